"""Which vLLM the lab finds (issue 21 item 4): the saved custom engine, then VLLM_PYTHON, then a
`vllm` on PATH (its interpreter from the shebang); what NVML sees; the model's config.json from a
folder or the Hugging Face cache; and the decision `make run` branches on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_nvml import FakeNvml
from tests.fakes.gpu_box import FAKE_VLLM_PKG, engine_vars, vllm_shim
from tuning.engine.current import custom_spec
from tuning.engine.find import (
    NAMED_UNUSABLE,
    SAVED_MISSING,
    USE_EMBEDDED,
    USE_FOUND,
    choose_engine,
    custom_problem,
    find_vllm,
    model_config,
    read_gpus,
    save_found,
    served_name_for,
)
from tuning.settings import Settings, load_settings


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_home: Path) -> dict[str, str]:
    """This process's environment as a GPU box's: a `vllm` shim on PATH, the fake package."""
    for name in engine_vars():
        monkeypatch.delenv(name, raising=False)
    shim = vllm_shim(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(FAKE_VLLM_PKG))
    return {"shim": str(shim)}


def test_a_vllm_on_path_is_found_with_its_shebang_interpreter_and_version(
    box: dict[str, str],
) -> None:
    found = find_vllm(Settings()).found
    assert found is not None
    assert (found.source, found.command) == ("PATH", [box["shim"], "serve"])
    assert found.python == sys.executable and found.version == "0.32.0+fake"


def test_vllm_python_comes_before_path_and_the_saved_setting_before_both(
    box: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_PYTHON", sys.executable)
    found = find_vllm(Settings()).found
    assert found is not None and (found.source, found.command) == ("VLLM_PYTHON", [sys.executable])
    saved = Settings(engine="custom", engine_command=f"{box['shim']} serve")
    found = find_vllm(saved).found
    assert found is not None and found.source == "settings"


def test_a_saved_command_that_does_not_exist_is_said_and_the_next_one_used(
    box: dict[str, str],
) -> None:
    gone = Settings(engine="custom", engine_command="/opt/vllm/bin/vllm serve")
    discovery = find_vllm(gone)
    assert discovery.notes == ["settings: /opt/vllm/bin/vllm not found"]
    assert discovery.found is not None and discovery.found.source == "PATH"
    assert discovery.saved_missing


def test_an_interpreter_without_vllm_is_not_a_vllm(
    box: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "")
    discovery = find_vllm(Settings())
    assert discovery.found is None
    assert "vllm does not import" in discovery.notes[-1]


def test_make_run_uses_a_found_vllm_only_when_nvml_sees_gpus(box: dict[str, str]) -> None:
    assert choose_engine(Settings(), nvml=FakeNvml(devices=2)).code == USE_FOUND
    assert choose_engine(Settings(), nvml=FakeNvml(devices=0)).code == USE_EMBEDDED
    no_driver = FakeNvml()
    no_driver.fail_init = True
    assert choose_engine(Settings(), nvml=no_driver).code == USE_EMBEDDED


def test_a_saved_engine_that_is_gone_stops_make_run_rather_than_install_the_cpu_engine(
    box: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    gone = Settings(engine="custom", engine_command="/opt/vllm/bin/vllm serve", engine_model="m")
    decision = choose_engine(gone, nvml=FakeNvml(devices=2))
    assert decision.code == SAVED_MISSING
    assert "was not found" in decision.lines[-1] and "Settings" in decision.lines[-1]


def test_a_vllm_python_seeing_no_gpu_stops_make_run_in_one_line_rather_than_install_the_cpu_engine(
    box: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_PYTHON", sys.executable)
    decision = choose_engine(Settings(), nvml=FakeNvml(devices=0))
    assert decision.code == NAMED_UNUSABLE != USE_EMBEDDED
    [line] = decision.lines
    assert line.startswith(f"stopped: VLLM_PYTHON={sys.executable} has vllm 0.32.0+fake")
    assert "NVML sees no GPU" in line and "TUNING_LAB_ENGINE_COMMAND=" in line
    assert not save_found(decision, Settings())
    assert choose_engine(Settings(), nvml=FakeNvml(devices=2)).code == USE_FOUND
    # the way on that the line names (docs/guides/gpu-box.md): the custom engine is always used
    monkeypatch.setenv("TUNING_LAB_ENGINE", "custom")
    monkeypatch.setenv("TUNING_LAB_ENGINE_COMMAND", sys.executable)
    assert choose_engine(load_settings(), nvml=FakeNvml(devices=0)).code == USE_FOUND


def test_a_vllm_python_without_vllm_stops_make_run_naming_it_rather_than_use_the_vllm_on_path(
    box: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "venv" / "bin" / "python"
    monkeypatch.setenv("VLLM_PYTHON", str(missing))
    decision = choose_engine(Settings(), nvml=FakeNvml(devices=0))
    assert decision.code == NAMED_UNUSABLE
    [line] = decision.lines
    assert line.startswith(f"stopped: VLLM_PYTHON={missing}: {missing} not found")
    # nor is another vLLM (the one on PATH) served in its place, GPUs or not
    assert choose_engine(Settings(), nvml=FakeNvml(devices=2)).code == NAMED_UNUSABLE
    saved = Settings(engine="custom", engine_command=f"{box['shim']} serve")
    assert choose_engine(saved, nvml=FakeNvml(devices=0)).code == USE_FOUND  # the saved one: always
    monkeypatch.delenv("VLLM_PYTHON")
    assert choose_engine(Settings(), nvml=FakeNvml(devices=0)).code == USE_EMBEDDED


def test_the_found_vllm_is_saved_with_the_model_and_a_served_name_from_it(
    box: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_MODEL", "/models/Qwen3-8B/")
    settings = load_settings()
    assert save_found(choose_engine(settings, nvml=FakeNvml(devices=1)), settings)
    saved = load_settings()
    assert (saved.engine, saved.engine_command) == ("custom", f"{box['shim']} serve")
    assert saved.engine_model == "/models/Qwen3-8B/"
    spec = custom_spec(saved)
    assert spec.served_model_name == "Qwen3-8B" and spec.vllm_version == "0.32.0+fake"
    assert not save_found(choose_engine(saved, nvml=FakeNvml(devices=1)), saved)  # nothing new


@pytest.mark.parametrize(
    ("served", "model", "expected"),
    [("", "Qwen/Qwen3-8B", "Qwen3-8B"), ("tiny", "/m/llama/", "llama"), ("mine", "/m/x", "mine")],
)
def test_the_served_name_follows_the_model_unless_one_is_set(
    served: str, model: str, expected: str
) -> None:
    settings = Settings(
        engine="custom",
        engine_command="/nonexistent/python",
        engine_model=model,
        served_model_name=served,
    )
    assert custom_spec(settings).served_model_name == expected
    assert served_name_for("Qwen/Qwen3-8B") == "Qwen3-8B"


def test_gpus_with_driver_and_free_memory() -> None:
    gpus = read_gpus(FakeNvml(devices=2, total=80 << 30, used=8 << 30))
    assert gpus.names == ["Fake H200 #0", "Fake H200 #1"] and gpus.driver == "550.54.15"
    assert gpus.free_bytes == [72 << 30, 72 << 30]
    assert "driver 550.54.15" in gpus.summary() and "144.0 GiB free" in gpus.summary()
    no_driver = FakeNvml()
    no_driver.fail_init = True
    assert read_gpus(no_driver).error.startswith("NVML not available")


def test_the_models_config_from_a_folder_or_the_hub_cache_never_a_download(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert model_config(str(folder), {}) == (folder / "config.json", "")
    assert model_config(str(tmp_path / "gone"), {})[0] is None
    snap = tmp_path / "hf" / "hub" / "models--org--name" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert model_config("org/name", {"HF_HOME": str(tmp_path / "hf")}) == (
        snap / "config.json",
        "",
    )
    path, why = model_config("org/other", {"HF_HOME": str(tmp_path / "hf")})
    assert path is None and "not in the Hugging Face cache" in why


def test_a_custom_engine_is_refused_naming_the_field(box: dict[str, str]) -> None:
    gone = custom_problem("/opt/vllm/bin/vllm serve", "m")
    assert gone.startswith("engine command: /opt/vllm/bin/vllm not found;") and "which vllm" in gone
    assert custom_problem("", "m").startswith("engine command: empty")
    assert custom_problem("'unbalanced", "m").startswith("engine command:")
    assert custom_problem(f"{box['shim']} serve", " ").startswith("model:")
    assert custom_problem(f"{box['shim']} serve", "org/name") == ""


def test_kv_prediction_reads_a_hub_models_config_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuning.engine.predict import ModelShape

    snap = tmp_path / "hf" / "hub" / "models--org--name" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    shape = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4}
    (snap / "config.json").write_text(json.dumps({**shape, "vocab_size": 100}))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert ModelShape.load("org/name").layers == 2
    with pytest.raises(FileNotFoundError):
        ModelShape.load("org/absent")
