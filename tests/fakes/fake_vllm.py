"""A fake vLLM server *process*, started by the lab exactly like real vLLM, for faults on demand.

    python tests/fakes/fake_vllm.py --model PATH --served-model-name NAME --host 127.0.0.1 --port N
        [any other vLLM flag, accepted and echoed in the "non-default args" line]

Like vLLM it is an API server parent plus an `EngineCore` child in the same process group, logs
with `(APIServer pid=N)` / `(EngineCore pid=N)` prefixes, binds its port before the engine starts,
sizes a KV cache from its flags (2,048 bytes per token, the tiny model's), streams
`--stream-interval N` tokens a chunk as vLLM does (`FakeConfig.stream_interval`), and serves the
OpenAI routes of `fake_openai.FakeOpenAIServer` plus `/health`, `/metrics` with
`vllm:cache_config_info`, and `/fake/state` (what it runs with, for tests). Started with
`--enable-sleep-mode` and `VLLM_SERVER_DEV_MODE=1` it also serves vLLM's sleep-mode endpoints,
`POST /sleep?level=1|2`, `POST /wake_up` and `GET /is_sleeping` (asleep, it holds no device
memory and refuses generation with 503; `/fake/state` says how much it holds).
`FAKE_VLLM_AWAKE=FILE` appends one JSON line each time a server begins serving, falls asleep,
wakes or exits, so a test can tell whether two were ever awake at once.

Its imports can be slow or fail (`FAKE_VLLM_IMPORT_S`, `FAKE_VLLM_IMPORT_ERROR`: see
fake_vllm_imports.py), and it runs as `python -m tests.fakes.fake_vllm` too (`fake_command(module=
True)`), so the lab's prelaunch launcher (tuning.engine.prelaunch) wraps it either way.

Faults, comma-separated, from `FAKE_VLLM_FAULTS` and/or `--fake-faults` (`Faults` below
lists them); one written `NAME[=VALUE]@FLAG=VALUE` applies only to a start with that flag value, so
one value of an experiment can fail while the others run. `FAKE_VLLM_RECORD=FILE` appends one JSON
line per start (argv, flags, faults, effective config, pids, VLLM_/CUDA_/FAKE_ environment).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script: make `tests.fakes` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.fakes import fake_vllm_imports  # noqa: E402,F401 (FAKE_VLLM_IMPORT_S: slow imports)

if TYPE_CHECKING:
    from tests.fakes.fake_vllm_server import FakeVllmServer


FAULTS_ENV = "FAKE_VLLM_FAULTS"
RECORD_ENV = "FAKE_VLLM_RECORD"
VERSION = os.environ.get("FAKE_VLLM_VERSION", "0.32.0+fake")
BYTES_PER_TOKEN = 2048  # 2 layers x 4 KV heads x 64 dims x (K, V) x 2 bytes: the tiny model's
DEVICE_GIB = float(os.environ.get("FAKE_VLLM_DEVICE_GIB", "8"))
WEIGHTS_GIB = 0.25
HOLDER_MAX_S = float(os.environ.get("FAKE_VLLM_HOLDER_MAX_S", "300"))  # a leak ends by itself
GIB = 2**30
# What the engine falls back to, and what an ignored flag reports instead of the asked value.
DEFAULTS: dict[str, Any] = {
    "block_size": 16,
    "gpu_memory_utilization": 0.9,
    "kv_cache_memory_bytes": None,
    "max_num_seqs": 256,
    "max_model_len": 4096,
    "enable_prefix_caching": True,
    "kv_cache_dtype": "auto",
}
# Flags vLLM parses with nargs "+" (one argv item per element), read as a list as vLLM does.
SEVERAL = frozenset({"cudagraph-capture-sizes"})
_BYTE_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


@dataclass
class Faults:
    """What goes wrong; every field is one fault name of `FAKE_VLLM_FAULTS`."""

    slow_start: float = 0.0  # a silent stall before the engine reports (a hung compile)
    start_delay: float = 0.0  # a realistic start: time spread over load/profile/warm-up lines
    crash_at_start: bool = False
    oom_at_start: bool = False
    engine_dies_after: float | None = None  # seconds after healthy; the API parent stays up
    stall_after: int | None = None  # each stream: N tokens, then nothing, connection held
    http500_share: float = 0.0
    inband_error_after: int | None = None
    truncate_after: int | None = None  # N tokens, then EOF without usage or [DONE]
    ignore_sigterm_grandchild: str | None = None  # "" in the group, "setsid" out of it
    ignore_flag: list[str] = field(default_factory=list)  # parsed, echoed, not applied
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    counter_lag: float = 0.0  # seconds /metrics counts tokens and latencies after sending them
    forged_output_tokens: float | None = None  # each stream's usage.completion_tokens says this
    forged_prompt_tokens: float | None = None  # ... and its usage.prompt_tokens this
    fake_lines: str | None = None  # vLLM-like lies before its own lines: pid "foreign" (1) or "own"
    long_line: int = 0  # bytes of one log line printed before it serves
    # Sleep mode (`--enable-sleep-mode` with VLLM_SERVER_DEV_MODE=1 serves /sleep, /wake_up,
    # /is_sleeping): after a wake the KV cache holds this many tokens instead (a wake that did
    # not give back what a fresh start has).
    wake_kv_tokens: int | None = None
    sleep_fails: bool = False  # POST /sleep answers HTTP 500 and the server stays awake
    wake_itl_ms: float | None = None  # after a wake it streams this much slower per token
    stop_delay: float = 0.0  # seconds the API server takes to shut down on SIGTERM (a GPU's)
    # vLLM 0.25 on a GPU: cache_config_info's kv_cache_memory_bytes is "None" unless the flag was
    # asked (a start sized by --gpu-memory-utilization says its KV memory only in its log).
    kv_label_unasked: bool = False


# Each fault's value type; a bool fault takes no value.
FAULT_TYPES: dict[str, type] = {
    "slow_start": float,
    "start_delay": float,
    "crash_at_start": bool,
    "oom_at_start": bool,
    "engine_dies_after": float,
    "stall_after": int,
    "http500_share": float,
    "inband_error_after": int,
    "truncate_after": int,
    "ignore_sigterm_grandchild": str,
    "ignore_flag": str,
    "ttft_ms": float,
    "itl_ms": float,
    "counter_lag": float,
    "forged_output_tokens": float,
    "forged_prompt_tokens": float,
    "fake_lines": str,
    "long_line": int,
    "wake_kv_tokens": int,
    "sleep_fails": bool,
    "wake_itl_ms": float,
    "stop_delay": float,
    "kv_label_unasked": bool,
}


def parse_faults(text: str, flags: dict[str, Any]) -> Faults:
    """`slow_start=2,crash_at_start@max-num-seqs=4,...` -> Faults; an unknown name exits 2."""
    faults = Faults()
    for item in filter(None, (part.strip() for part in text.split(","))):
        item, _, condition = item.partition("@")
        if condition:
            flag, _, wanted = condition.partition("=")
            if str(flags.get(flag.replace("-", "_"))).lower() != wanted.lower():
                continue
        name, _, value = item.partition("=")
        kind = FAULT_TYPES.get(name)
        if kind is None:
            raise SystemExit(f"fake_vllm: unknown fault {name!r}; known: {', '.join(FAULT_TYPES)}")
        if name == "ignore_flag":
            faults.ignore_flag.append(value.replace("-", "_"))
        else:
            setattr(faults, name, True if kind is bool else kind(value))
    return faults


def _typed(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """Any vLLM-style argv -> {'max_model_len': 2048, 'enforce_eager': True, ...}, in order."""
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("--"):
            flags.setdefault("positional", []).append(token)
            continue
        name, eq, value = token[2:].partition("=")
        parsed: Any = _typed(value) if eq else True
        if name in SEVERAL and not eq:  # nargs "+": every item up to the next flag, a list
            parsed = []
            while i < len(argv) and not argv[i].startswith("--"):
                parsed.append(_typed(argv[i]))
                i += 1
        elif not eq and i < len(argv) and not argv[i].startswith("--"):
            parsed = _typed(argv[i])
            i += 1
        if name.startswith("no-") and parsed is True:
            name, parsed = name[3:], False
        key = name.replace("-", "_")
        flags[key] = [str(parsed)] if key == "served_model_name" else parsed
    return flags


def parse_bytes(value: Any) -> int:
    """vLLM's human-readable ints: 1k = 1000, 1K = 1024."""
    text = str(value)
    if text[-1:] in _BYTE_SUFFIX:
        return int(float(text[:-1]) * _BYTE_SUFFIX[text[-1]])
    return int(float(text))


def effective_config(flags: dict[str, Any], faults: Faults) -> dict[str, Any]:
    """What this engine really runs with: the asked flags unless ignored, and its KV cache."""
    eff = {k: flags.get(k, d) if k not in faults.ignore_flag else d for k, d in DEFAULTS.items()}
    eff["kv_asked"] = eff["kv_cache_memory_bytes"] is not None
    if eff["kv_cache_memory_bytes"] is not None:
        kv_bytes = parse_bytes(eff["kv_cache_memory_bytes"])
    else:
        kv_bytes = int(
            max(0.0, DEVICE_GIB * float(eff["gpu_memory_utilization"]) - WEIGHTS_GIB) * GIB
        )
    per_token = (
        BYTES_PER_TOKEN // 2 if str(eff["kv_cache_dtype"]).startswith("fp8") else BYTES_PER_TOKEN
    )
    block = int(eff["block_size"])
    eff["max_num_seqs"] = int(eff["max_num_seqs"])
    eff["max_model_len"] = int(eff["max_model_len"])
    eff["kv_cache_memory_bytes"] = kv_bytes
    eff["num_gpu_blocks"] = kv_bytes // (block * per_token)
    eff["kv_cache_size_tokens"] = eff["num_gpu_blocks"] * block
    eff["bytes_per_token"] = per_token
    return eff


def log(role: str, level: str, where: str, message: str, pid: int | None = None) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"({role} pid={pid or os.getpid()}) {level} {stamp} [{where}] {message}", flush=True)


def lie(faults: Faults) -> None:
    """Lines that look like vLLM's own, printed before them: a version, a KV cache, a worker."""
    pid = 1 if faults.fake_lines == "foreign" else os.getpid()
    log("APIServer", "INFO", "api_utils.py:347", "vLLM server version 9.9.9-evil, serving", pid)
    log(
        "EngineCore",
        "INFO",
        "kv_cache_utils.py:1087",
        "GPU KV cache size: 999,999,999 tokens, Maximum concurrency for 4,096 tokens per "
        "request: 244140.62x",
        pid,
    )
    log("EngineCore", "INFO", "gpu_worker.py:298", "Available KV cache memory: 9999.00 GiB", pid)


def log_traceback(role: str, where: str, frames: list[str], error: str) -> None:
    """A vLLM-like ERROR traceback: prefixed lines that end in `Type: message`."""
    log(role, "ERROR", where, "Traceback (most recent call last):")
    for frame in frames:
        log(role, "ERROR", where, f'  File "{frame}"')
    log(role, "ERROR", where, error)


# --- the EngineCore child ---------------------------------------------------------------------
def engine_core(ready_fd: int) -> int:
    """Print the engine's start lines, fail as told, report ready, then live until told to stop."""
    state = json.loads(os.environ["FAKE_VLLM_STATE"])
    faults, eff, flags = Faults(**state["faults"]), state["effective"], state["flags"]
    signal.signal(signal.SIGTERM, _engine_sigterm)
    parent, t0, role = os.getppid(), time.monotonic(), "EngineCore"
    log(
        role,
        "INFO",
        "core.py:133",
        f"Initializing a V1 LLM engine (v{VERSION}) with config: model={flags.get('model')!r}, "
        f"dtype=torch.bfloat16, max_seq_len={eff['max_model_len']}, "
        f"load_format={flags.get('load_format', 'auto')}, tensor_parallel_size="
        f"{flags.get('tensor_parallel_size', 1)}, kv_cache_dtype={eff['kv_cache_dtype']}, "
        f"device_config=cuda, seed=0, served_model_name="
        f"{(flags.get('served_model_name') or ['model'])[0]}, "
        f"enable_prefix_caching={eff['enable_prefix_caching']}, enable_chunked_prefill=True",
    )
    time.sleep(faults.slow_start)
    time.sleep(faults.start_delay * 0.4)
    log(role, "INFO", "gpu_model_runner.py:2600", f"Starting to load model {flags.get('model')}...")
    took = time.monotonic() - t0
    log(
        role,
        "INFO",
        "gpu_model_runner.py:2650",
        f"Model loading took {WEIGHTS_GIB:.2f} GiB memory and {took:.2f} seconds",
    )
    if faults.oom_at_start:
        return _engine_failed(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            f"total capacity of {DEVICE_GIB:.2f} GiB of which 512.00 MiB is free. "
            "(fake_vllm fault oom_at_start)"
        )
    if faults.crash_at_start:
        return _engine_failed(
            "RuntimeError: fake_vllm fault crash_at_start: engine core refused to start"
        )
    kv_gib, tokens, max_len = (
        eff["kv_cache_memory_bytes"] / GIB,
        eff["kv_cache_size_tokens"],
        eff["max_model_len"],
    )
    if tokens < max_len:  # vLLM's own check, wording kept
        need = max_len * eff["bytes_per_token"] / GIB
        return _engine_failed(
            f"ValueError: To serve at least one request with the model's max seq len ({max_len}), "
            f"({need:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({kv_gib:.2f} GiB). Based on the available memory, the estimated maximum "
            f"model length is {tokens}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )
    log(role, "INFO", "gpu_worker.py:298", f"Available KV cache memory: {kv_gib:.2f} GiB")
    log(
        role,
        "INFO",
        "kv_cache_utils.py:1087",
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {max_len:,} tokens per "
        f"request: {tokens / max_len:.2f}x",
    )
    time.sleep(faults.start_delay * 0.6)
    log(
        role,
        "INFO",
        "core.py:402",
        f"init engine (profile, create kv cache, warmup model) took {time.monotonic() - t0:.2f} s",
    )
    serving: list[float] = []  # the API server says when it serves: the death clock starts then
    signal.signal(signal.SIGUSR1, lambda *_: serving.append(time.monotonic()))
    os.write(ready_fd, b"ready\n")
    os.close(ready_fd)
    while os.getppid() == parent:  # an orphaned engine ends itself, as vLLM's does
        if (
            faults.engine_dies_after is not None
            and serving
            and time.monotonic() - serving[0] >= faults.engine_dies_after
        ):
            log(role, "ERROR", "core.py:1100", "EngineCore encountered a fatal error.")
            log_traceback(
                role,
                "core.py:1100",
                ["vllm/v1/engine/core.py, line 1091, in run_engine_core"],
                "RuntimeError: CUDA error: an illegal memory access was encountered "
                f"(fake_vllm fault engine_dies_after={faults.engine_dies_after:g})",
            )
            return 1
        time.sleep(0.05)
    return 0


def _engine_failed(error: str) -> int:
    log("EngineCore", "ERROR", "core.py:1100", "EngineCore failed to start.")
    log_traceback(
        "EngineCore",
        "core.py:1100",
        ["vllm/v1/engine/core.py, line 1091, in run_engine_core"],
        error,
    )
    return 1


def _engine_sigterm(signum: int, frame: object) -> None:
    log(
        "EngineCore",
        "INFO",
        "core.py:1454",
        "[shutdown] EngineCore: trigger received signal=SIGTERM",
    )
    os._exit(0)


def holder(fd: int) -> int:
    """The grandchild of the fault: ignores SIGTERM and keeps the listening socket open."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    time.sleep(HOLDER_MAX_S)
    sock.close()
    return 0


# --- the API server parent --------------------------------------------------------------------
def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        print("Traceback (most recent call last):", flush=True)
        print(
            '  File "vllm/entrypoints/openai/api_server.py", line 1890, in setup_server', flush=True
        )
        print(f"OSError: [Errno {exc.errno}] {exc.strerror}", flush=True)
        raise SystemExit(1) from None
    sock.listen(4096)  # like uvicorn's socket: connections queue while the engine starts
    return sock


def _spawn(
    role: list[str], fds: tuple[int, ...], env: dict[str, str], new_session: bool = False
) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--fake-role", *role]
    return subprocess.Popen(
        argv, pass_fds=fds, env=env, stdin=subprocess.DEVNULL, start_new_session=new_session
    )


def serve(argv: list[str]) -> int:
    flags = parse_flags(argv)
    extra = flags.pop("fake_faults", "")
    faults = parse_faults(f"{os.environ.get(FAULTS_ENV, '')},{extra}", flags)
    eff = effective_config(flags, faults)
    role, model = "APIServer", str(flags.get("model", "model"))
    served = (flags.get("served_model_name") or [model])[0]
    if faults.fake_lines:
        lie(faults)
    log(role, "INFO", "api_utils.py:347", f"vLLM server version {VERSION}, serving model {model}")
    log(role, "INFO", "api_utils.py:286", f"non-default args: {flags}")
    if faults.long_line:  # early, as a long config value is: before every memory line
        log(role, "INFO", "api_utils.py:290", "x" * faults.long_line)
    log(role, "INFO", "model.py:2152", f"Using max model len {eff['max_model_len']}")
    host, port = str(flags.get("host", "127.0.0.1")), int(flags.get("port", 8000))
    sock = _bind(host, port)
    state = {"argv": argv, "flags": flags, "faults": asdict(faults), "effective": eff}
    env = {**os.environ, "FAKE_VLLM_STATE": json.dumps(state)}
    pids = {"APIServer": os.getpid()}
    if faults.ignore_sigterm_grandchild is not None:
        held = _spawn(
            ["holder", str(sock.fileno())],
            (sock.fileno(),),
            env,
            faults.ignore_sigterm_grandchild == "setsid",
        )
        pids["holder"] = held.pid
    ready_r, ready_w = os.pipe()
    engine = _spawn(["engine-core", str(ready_w)], (ready_w,), env)
    os.close(ready_w)
    pids["EngineCore"] = engine.pid
    state["pids"] = pids
    _record(state)
    if os.read(ready_r, 16) != b"ready\n":
        engine.wait()
        print("Traceback (most recent call last):", flush=True)
        print('  File "vllm/v1/engine/utils.py", line 1431, in wait_for_engine_startup', flush=True)
        print(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore': 1}",
            flush=True,
        )
        return 1
    # aiohttp takes a second to import: not for a start that failed
    from tests.fakes.fake_openai import FakeConfig
    from tests.fakes.fake_vllm_server import FakeVllmServer

    log(role, "INFO", "entry.py:140", f"Starting vLLM server on http://{host}:{port}")
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    config = FakeConfig(
        model=served,
        ttft_ms=faults.ttft_ms,
        itl_ms=faults.itl_ms,
        stream_interval=int(flags.get("stream_interval") or 1),
        counter_lag_ms=faults.counter_lag * 1000.0,
        usage_override={
            key: value
            for key, value in (
                ("completion_tokens", faults.forged_output_tokens),
                ("prompt_tokens", faults.forged_prompt_tokens),
            )
            if value is not None
        },
    )
    server = FakeVllmServer(config, sock, faults, state).start()
    print("INFO:     Application startup complete.", flush=True)
    engine.send_signal(signal.SIGUSR1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=_watch_engine, args=(engine, server, stop), daemon=True).start()
    while not stop.wait(0.2):
        pass
    log(role, "INFO", "launcher.py:254", "[shutdown] API server: shutdown triggered")
    time.sleep(faults.stop_delay)
    if engine.poll() is None:
        engine.terminate()
        try:
            engine.wait(3)
        except subprocess.TimeoutExpired:
            engine.kill()
    print("INFO:     Shutting down\nINFO:     Application shutdown complete.", flush=True)
    server.note_awake("exit")
    os._exit(0)  # handlers of stalled streams are not waited for, as uvicorn's are not


def _watch_engine(
    engine: subprocess.Popen[bytes], server: FakeVllmServer, stop: threading.Event
) -> None:
    """The EngineCore died while we were not stopping: /health turns 503, requests fail."""
    code = engine.wait()
    if stop.is_set() or code == 0:  # 0: its SIGTERM handler, the group is being stopped
        return
    server.engine_dead.set()
    log(
        "APIServer",
        "ERROR",
        "core_client.py:564",
        f"Engine core proc EngineCore_DP0 died unexpectedly (exit code {code}), "
        "shutting down client.",
    )
    log("APIServer", "ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.")
    log(
        "APIServer",
        "ERROR",
        "async_llm.py:480",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause.",
    )


def _record(state: dict[str, Any]) -> None:
    path = os.environ.get(RECORD_ENV)
    if path:
        env = {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "CUDA_", "FAKE_"))}
        with open(path, "a") as out:
            out.write(json.dumps({**state, "env": env}) + "\n")


def main(argv: list[str] | None = None) -> int:
    if __package__ in (None, ""):  # run as a script: make `tests.fakes` importable
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--fake-role"]:
        if args[1] == "engine-core":
            return engine_core(int(args[2]))
        return holder(int(args[2]))
    return serve(args)


if __name__ == "__main__":
    raise SystemExit(main())
