"""`tuning-lab workload preview` (a literal command of the README) counts tokens with the
configured model's tokenizer (issue 40): --tokenizer, else --model's or the custom engine's model,
found in its local folder or in the Hugging Face cache (never downloaded); the embedded engine's
own tokenizer only when that is the engine. With no tokenizer to be had it refuses in one line
naming the model and the fix. It used to read only the embedded engine's tokenizer, which a GPU
box never builds: there every preview was refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tuning.engine.embedded as engine_module
from tuning.cli.main import main

DATASET = ["--dataset", "workloads/chat-500.sharegpt.json", "--num-requests", "20", "--json"]
PREVIEW = ["workload", "preview", *DATASET]


def small_tokenizer(folder: Path) -> Path:
    """A byte-level BPE of 300 ids trained offline from a few sentences (not the lab's 1,024-id
    one, so its counts differ), saved as folder/tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    text = ["the quick brown fox jumps over the lazy dog", "a model serves requests"] * 20
    tok.train_from_iterator(text, trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture
def gpu_box(lab_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lab whose engine is the user's vLLM (custom) and that has no embedded engine built."""
    monkeypatch.setattr(engine_module, "ENGINE_DIR", tmp_path / "no-engine")
    monkeypatch.setenv("TUNING_LAB_ENGINE_DIR", str(tmp_path / "no-engine"))
    monkeypatch.setenv("TUNING_LAB_ENGINE", "custom")
    monkeypatch.setenv("TUNING_LAB_ENGINE_COMMAND", "/usr/bin/false")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return lab_home


def _preview(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main([*PREVIEW, *extra]) == 0, capsys.readouterr().err
    return dict(json.loads(capsys.readouterr().out))


def test_the_custom_engines_local_model_tokenizer_counts_the_tokens(
    gpu_box: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = small_tokenizer(tmp_path / "my-model")
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", str(model))
    configured = _preview(capsys)
    named = _preview(capsys, "--tokenizer", str(model / "tokenizer.json"))
    assert configured["tokens"] == named["tokens"]


def test_a_hub_id_is_read_from_the_hugging_face_cache(
    gpu_box: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    local = small_tokenizer(tmp_path / "local")
    small_tokenizer(tmp_path / "hub" / "models--acme--tiny-chat" / "snapshots" / "0a1b2c")
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", "acme/tiny-chat")
    from_cache = _preview(capsys)
    assert from_cache["tokens"] == _preview(capsys, "--tokenizer", str(local))["tokens"]


def test_the_model_flag_names_the_tokenizer_and_differs_from_the_embedded_one(
    lab_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(engine_module, "ENGINE_DIR", tmp_path / "no-engine")
    model = small_tokenizer(tmp_path / "my-model")
    embedded = _preview(capsys)  # the embedded engine is the configured one (the default)
    mine = _preview(capsys, "--model", str(model))
    assert mine["tokens"] != embedded["tokens"]
    assert mine["tokens"] == _preview(capsys, "--tokenizer", str(model))["tokens"]


def test_the_embedded_engine_previews_before_it_is_built(
    lab_home: Path,
    tmp_path: Path,
    lab_tokenizer: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    built = _preview(capsys)  # the embedded engine's tokenizer.json, as `make setup` builds it
    monkeypatch.setattr(engine_module, "ENGINE_DIR", tmp_path / "no-engine")
    assert _preview(capsys)["tokens"] == built["tokens"]  # the same tokenizer, from the corpus


@pytest.mark.parametrize("model", ["acme/not-downloaded", "/nowhere/model"])
def test_no_tokenizer_is_refused_in_one_line_naming_the_model_and_the_fix(
    gpu_box: Path, model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUNING_LAB_ENGINE_MODEL", model)
    assert main(PREVIEW) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith("refused: no tokenizer for model " + model)
    assert "--tokenizer FILE" in lines[0] and f"download {model} tokenizer.json" in lines[0]
    assert not (gpu_box / "lab.db").exists()
