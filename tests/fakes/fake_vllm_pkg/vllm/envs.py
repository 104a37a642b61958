"""vLLM's environment knobs, as the real `vllm.envs` keeps them: name -> a reader of os.environ."""

import os

environment_variables = {
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    "VLLM_CPU_KVCACHE_SPACE": lambda: int(os.getenv("VLLM_CPU_KVCACHE_SPACE", "0")) or None,
    "VLLM_CPU_OMP_THREADS_BIND": lambda: os.getenv("VLLM_CPU_OMP_THREADS_BIND", "auto"),
    "VLLM_FAKE_STEPS": lambda: int(os.getenv("VLLM_FAKE_STEPS", "4")),
    "VLLM_FAKE_SPLIT": lambda: int(os.getenv("VLLM_FAKE_SPLIT", "0")) or None,  # default None
    "VLLM_FAKE_ASYNC": lambda: bool(int(os.getenv("VLLM_FAKE_ASYNC", "0"))),
}
