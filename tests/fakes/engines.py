"""Start the fake vLLM the lab's way, and stand up a foreign process the lab must never signal.

    launch = fake_launch({"max-num-seqs": 4}, faults="stall_after=1")  # ServerProcess(launch, log)
    env = {**os.environ, **fake_settings_env(home, faults="crash_at_start@max-num-seqs=4")}
    subprocess.run([sys.executable, "-m", "tuning", "experiment", ...], env=env)

Faults reach the fake either in its command (`fake_command(faults)`, stored with the experiment's
engine) or through `FAKE_VLLM_FAULTS` in the lab's environment, which every server it starts
inherits. The model is a Hugging Face style name with no local folder, so the lab builds prompts
with the server's `/tokenize` (one token per byte), which the fake's usage counts agree with.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.fakes.fake_vllm import FAULTS_ENV
from tuning.engine.launch import Launch
from tuning.engine.spec import EngineSpec

FAKE_VLLM = Path(__file__).resolve().with_name("fake_vllm.py")
FAKE_MODEL = "fake-org/fake-model"
FAKE_SERVED_NAME = "fake"


def fake_command(faults: str = "", module: bool = False) -> list[str]:
    """The engine command: this interpreter running fake_vllm.py (+ faults carried as a flag);
    `module`: as `python -m tests.fakes.fake_vllm` (from the repository root)."""
    command = [sys.executable, *(["-m", "tests.fakes.fake_vllm"] if module else [str(FAKE_VLLM)])]
    return command + ["--fake-faults", faults] if faults else command


def fake_spec(
    faults: str = "", served_name: str = FAKE_SERVED_NAME, backend: str = "gpu"
) -> EngineSpec:
    """An engine spec like `custom_spec` makes for a user's own GPU vLLM (`backend="cpu"`: a CPU
    vLLM's, as the embedded engine is)."""
    return EngineSpec(
        name="custom",
        command=fake_command(faults),
        model=FAKE_MODEL,
        served_model_name=served_name,
        backend=backend,
        env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"},
        vllm_version="unknown",
    )


def fake_launch(
    config: Mapping[str, Any] | None = None, faults: str = "", port: int | None = None
) -> Launch:
    """A Launch built exactly as the runner builds one (validated config, free port, env)."""
    return fake_spec(faults).launch(dict(config or {}), port=port)


def fake_settings_env(home: Path, faults: str = "") -> dict[str, str]:
    """Environment for `python -m tuning ...` whose engine is the fake (settings.json ignored)."""
    return {
        "TUNING_LAB_HOME": str(home),
        "TUNING_LAB_DB": str(home / "lab.db"),
        "TUNING_LAB_LOCK": str(home / "runner.lock"),
        "TUNING_LAB_ENGINE": "custom",
        "TUNING_LAB_ENGINE_COMMAND": shlex.join(fake_command()),
        "TUNING_LAB_ENGINE_MODEL": FAKE_MODEL,
        "TUNING_LAB_SERVED_MODEL_NAME": FAKE_SERVED_NAME,
        "TUNING_LAB_ENGINE_BACKEND": "gpu",
        "TUNING_LAB_ENGINE_LOAD_FORMAT": "",
        FAULTS_ENV: faults,
    }


_LISTENER = """
import socket, sys
sock = socket.socket()
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen(16)
print(sock.getsockname()[1], flush=True)
while True:
    conn, _ = sock.accept()
    conn.close()
"""


@dataclass
class ForeignProcess:
    """Someone else's listener: its own session, its identity fixed by pid and start time."""

    proc: subprocess.Popen[str]
    port: int
    started: float

    @property
    def pid(self) -> int:
        return self.proc.pid

    def untouched(self) -> bool:
        """Still running, still the same process (never signalled, never replaced)."""
        try:
            p = psutil.Process(self.pid)
            return p.status() != psutil.STATUS_ZOMBIE and p.create_time() == self.started
        except psutil.Error:
            return False


@contextmanager
def foreign_listener(port: int = 0) -> Iterator[ForeignProcess]:
    """A plain socket listener in another process and session, on `port` (0: any free one)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _LISTENER, str(port)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        bound = int(proc.stdout.readline())
        yield ForeignProcess(proc, bound, psutil.Process(proc.pid).create_time())
    finally:
        proc.kill()  # ours to stop, by its own pid
        proc.wait(10)
