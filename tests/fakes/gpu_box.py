"""A GPU box simulated on a machine without one: the user's `vllm` on PATH (a shim script whose
shebang is an interpreter whose `import vllm` is the fake package, or the real embedded engine's),
and NVML reporting GPUs (tests/fakes/nvml_module for subprocesses, FakeNvml in-process).

    env = gpu_box_env(tmp_path)                  # for `python -m tuning ...` or `make`
    for k, v in env.items(): monkeypatch.setenv(k, v)   # for AppTest (plus sys.modules["pynvml"])
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parent
REPO = FAKES.parents[1]
FAKE_VLLM_PKG = FAKES / "fake_vllm_pkg"
NVML_MODULE = FAKES / "nvml_module"


def vllm_shim(folder: Path, python: str = sys.executable) -> Path:
    """A `vllm` script in `folder` (to put on PATH) whose shebang is `python`."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "vllm"
    shim.write_text(f"#!{python}\nfrom vllm.entrypoints.cli.main import main\nmain()\n")
    shim.chmod(0o755)
    return shim


def gpu_box_env(tmp: Path, gpus: int = 2, python: str = sys.executable) -> dict[str, str]:
    """Environment of a fresh clone on a GPU box: a lab home with no settings, no embedded engine,
    the user's vLLM on PATH behind `python`, NVML with `gpus` GPUs. The fake vllm package is on
    PYTHONPATH only for the lab's own interpreter (a real engine's interpreter has its own)."""
    shim = vllm_shim(tmp / "user-bin", python)
    fake = [str(FAKE_VLLM_PKG)] if python == sys.executable else []
    path = os.pathsep.join([str(NVML_MODULE), *fake, str(REPO)])
    return {
        "PATH": f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": path,
        "FAKE_NVML_GPUS": str(gpus),
        "TUNING_LAB_HOME": str(tmp / "home"),
        "TUNING_LAB_DB": str(tmp / "home" / "lab.db"),
        "TUNING_LAB_ENGINE_DIR": str(tmp / "no-engine"),
    }


ENGINE_VARS = ("VLLM_PYTHON", "VLLM_MODEL", "ENGINE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")


def engine_vars() -> list[str]:
    """The variables a developer's shell may carry that would change what is found."""
    lab = [n for n in os.environ if n.startswith(("TUNING_LAB_ENGINE", "TUNING_LAB_SERVED"))]
    return [*ENGINE_VARS, *lab]


def subprocess_env(tmp: Path, gpus: int = 2, python: str = sys.executable) -> dict[str, str]:
    """os.environ without engine_vars(), plus gpu_box_env: for `python -m tuning` and `make`."""
    env = {k: v for k, v in os.environ.items() if k not in engine_vars()}
    return {**env, **gpu_box_env(tmp, gpus, python)}
