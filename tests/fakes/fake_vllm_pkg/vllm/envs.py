"""vLLM's environment knobs, as the real `vllm.envs` keeps them: name -> a reader of os.environ,
documented by the comment lines above each entry, a few validated by `env_with_choices`, and a few
names that are not vLLM's own (the real table reads LD_LIBRARY_PATH and S3 credentials too)."""

import os


def env_with_choices(env_name, default, choices, case_sensitive=True):  # type: ignore[no-untyped-def]
    """As vLLM 0.32's: a reader that refuses a value outside `choices` (a list or a callable)."""

    def _get_validated_env():  # type: ignore[no-untyped-def]
        value = os.getenv(env_name)
        if value is None:
            return default
        actual = choices() if callable(choices) else choices
        if value not in actual:
            raise ValueError(f"Invalid value '{value}' for {env_name}. Valid options: {actual}.")
        return value

    return _get_validated_env


environment_variables = {
    # ================== Runtime Env Vars ==================
    # used in distributed environment to determine the ip address
    # of the current node
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    "VLLM_CPU_KVCACHE_SPACE": lambda: int(os.getenv("VLLM_CPU_KVCACHE_SPACE", "0")) or None,
    # (CPU backend only) CPU core ids bound by OpenMP threads
    "VLLM_CPU_OMP_THREADS_BIND": lambda: os.getenv("VLLM_CPU_OMP_THREADS_BIND", "auto"),
    # Decode steps per fake scheduler tick
    "VLLM_FAKE_STEPS": lambda: int(os.getenv("VLLM_FAKE_STEPS", "4")),
    "VLLM_FAKE_SPLIT": lambda: int(os.getenv("VLLM_FAKE_SPLIT", "0")) or None,  # default None
    "VLLM_FAKE_ASYNC": lambda: bool(int(os.getenv("VLLM_FAKE_ASYNC", "0"))),
    # Use dedicated multiprocess context for workers.
    "VLLM_WORKER_MULTIPROC_METHOD": env_with_choices(
        "VLLM_WORKER_MULTIPROC_METHOD", "fork", ["spawn", "fork"]
    ),
    # Tokens before a second GEMM stream is used
    "VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD": lambda: int(
        os.getenv("VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD", "1024")
    ),
    # Comma-separated *additional* prefixes of env vars to copy from the
    # driver to Ray workers. Example: "MYLIB_,OTHER_"
    "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": lambda: os.getenv(
        "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY", ""
    ),
    # the default logging level
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(),
    # when `VLLM_NCCL_SO_PATH` is not set, vllm will try to find the nccl
    # library file in the locations specified by `LD_LIBRARY_PATH`
    "LD_LIBRARY_PATH": lambda: os.environ.get("LD_LIBRARY_PATH", None),
    "S3_SECRET_ACCESS_KEY": lambda: os.environ.get("S3_SECRET_ACCESS_KEY"),
}
