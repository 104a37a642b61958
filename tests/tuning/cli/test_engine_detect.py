"""A GPU box is a first-class home (issue 21 item 4), simulated here: a "user's vLLM" on PATH (a
`vllm` shim whose interpreter imports the fake vllm package) and NVML reporting GPUs
(tests/fakes/nvml_module). On a fresh clone `make run` does not install the CPU engine, and
`doctor --json` names the vLLM it found.

`make -n run` prints the recipes without running them, except a line that calls $(MAKE): that is
the decision line (`tuning engine detect --choice`, then `make engine` only when it prints
`embedded`), so the decision
runs for real while the nested `make engine` only prints what it would install."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.gpu_box import REPO, subprocess_env

SETUP = "-m tuning engine setup"


def make_n_run(tmp: Path, gpus: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-n", "-o", ".venv/.deps", "run", *extra],
        cwd=REPO,
        env=subprocess_env(tmp, gpus),
        capture_output=True,
        text=True,
        timeout=300,
    )


def cli(tmp: Path, gpus: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env=subprocess_env(tmp, gpus),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_make_run_on_a_gpu_box_uses_the_users_vllm_and_installs_nothing(tmp_path: Path) -> None:
    out = make_n_run(tmp_path, gpus=2)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "using your vLLM 0.32.0+fake (PATH)" in out.stderr  # the lines: stderr under --choice
    assert "2x Fake H200" in out.stderr
    assert SETUP not in out.stdout and "pip install" not in out.stdout
    saved = json.loads((tmp_path / "home" / "settings.json").read_text())
    assert saved["engine"] == "custom"
    assert saved["engine_command"] == f"{tmp_path / 'user-bin' / 'vllm'} serve"
    assert "python -m ui.serve app.py" in out.stdout


def test_make_run_without_gpus_builds_the_embedded_engine(tmp_path: Path) -> None:
    out = make_n_run(tmp_path, gpus=0)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "NVML sees no GPU" in out.stderr and SETUP in out.stdout
    assert not (tmp_path / "home" / "settings.json").exists()


def test_make_run_with_a_vllm_python_and_no_gpu_stops_and_says_why_installing_nothing(
    tmp_path: Path,
) -> None:
    env = {**subprocess_env(tmp_path, 0), "VLLM_PYTHON": sys.executable}
    out = subprocess.run(
        ["make", "-n", "-o", ".venv/.deps", "run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode != 0
    assert f"stopped: VLLM_PYTHON={sys.executable} has vllm 0.32.0+fake" in out.stderr
    assert SETUP not in out.stdout and "ui.serve" not in out.stdout
    assert not (tmp_path / "home" / "settings.json").exists()


def test_make_run_engine_embedded_still_builds_it_and_serves_it(tmp_path: Path) -> None:
    out = make_n_run(tmp_path, 2, "ENGINE=embedded")
    assert out.returncode == 0, out.stdout + out.stderr
    assert SETUP in out.stdout and "engine detect" not in out.stdout
    assert "TUNING_LAB_ENGINE=embedded" in out.stdout
    assert not (tmp_path / "home" / "settings.json").exists()


def test_detect_exit_codes_and_the_model_it_saves(tmp_path: Path) -> None:
    out = cli(tmp_path, 2, "engine", "detect", "--json", "--save", "--model", "org/My-Model")
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    assert report["vllm"]["source"] == "PATH" and report["saved"] is True
    assert report["model"] == "org/My-Model" and len(report["gpus"]["names"]) == 2
    info = json.loads(cli(tmp_path, 2, "engine", "info", "--json").stdout)
    assert info["served_model_name"] == "My-Model" and info["vllm_version"] == "0.32.0+fake"
    assert cli(tmp_path, 0, "engine", "detect").returncode == 0  # a saved engine: always used


def test_detect_refuses_an_empty_model_and_writes_nothing(tmp_path: Path) -> None:
    out = cli(tmp_path, 2, "engine", "detect", "--save", "--model", " ")
    assert out.returncode == 1 and out.stderr.strip() == "refused: --model is empty"
    assert not (tmp_path / "home").exists()


def test_doctor_json_names_the_vllm_it_found(tmp_path: Path) -> None:
    model = tmp_path / "models" / "Qwen3-8B"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert cli(tmp_path, 2, "engine", "detect", "--save", "--model", str(model)).returncode == 0
    out = cli(tmp_path, 2, "doctor", "--json", "--port", "1")
    report = json.loads(out.stdout)
    shim = str(tmp_path / "user-bin" / "vllm")
    assert report["vllm"]["command"] == [shim, "serve"]
    assert report["vllm"]["version"] == "0.32.0+fake"
    found = {f["check"]: f for f in report["findings"]}
    assert found["engine"]["ok"] and "vllm 0.32.0+fake in" in found["engine"]["detail"]
    assert found["gpu"]["ok"] and "driver 550.54.15" in found["gpu"]["detail"]
    assert "GiB free" in found["gpu"]["detail"]
    assert found["model"]["ok"] and "config.json readable" in found["model"]["detail"]


def test_doctor_json_on_a_box_without_vllm_names_none(tmp_path: Path) -> None:
    env_path = tmp_path / "empty-bin"
    env_path.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "tuning", "doctor", "--json", "--no-import"],
        cwd=REPO,
        env={**subprocess_env(tmp_path, 0), "PATH": str(env_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(out.stdout)
    assert report["vllm"] is None and report["vllm_not_used"] == ["PATH: no `vllm` on PATH"]


def test_detect_exits_per_the_table_and_says_its_choice(tmp_path: Path) -> None:
    """0 done, 1 refused, as every command (it exited 3 for the embedded engine): no GPU and
    nothing saved chooses the embedded engine and exits 0; `--choice` prints only the choice on
    stdout; a VLLM_PYTHON that cannot be used is refused with 1 and no choice."""
    embedded = cli(tmp_path, 0, "engine", "detect", "--choice")
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout == "embedded\n" and "the embedded CPU engine" in embedded.stderr
    report = json.loads(cli(tmp_path, 0, "engine", "detect", "--json").stdout)
    assert (report["code"], report["engine"]) == (0, "embedded")
    yours = cli(tmp_path, 2, "engine", "detect", "--choice")
    assert (yours.returncode, yours.stdout) == (0, "yours\n")
    env = {**subprocess_env(tmp_path, 0), "VLLM_PYTHON": sys.executable}
    stop = subprocess.run(
        [sys.executable, "-m", "tuning", "engine", "detect", "--choice"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (stop.returncode, stop.stdout) == (1, "")
    assert "stopped: VLLM_PYTHON" in stop.stderr


def test_detect_help_says_the_table_not_exit_3(capsys: Any) -> None:
    import pytest

    from tuning.cli.main import main

    with pytest.raises(SystemExit):
        main(["engine", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "exit 0 when one is chosen" in shown and "3" not in shown
