"""A model without a config.json: `predict` names its flag (--model-config), while the message
itself, which New experiment shows too, speaks no CLI (issue 23 item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.cli.main import main as cli_main
from tuning.engine.predict import ModelShape


def test_the_cli_names_the_flag_and_the_message_does_not(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HOME", str(lab_home / "hf"))  # an empty cache: nothing is found
    with pytest.raises(FileNotFoundError) as raised:
        ModelShape.load(lab_home / "no-model")
    assert "--" not in str(raised.value) and "Hugging Face cache" in str(raised.value)
    code = cli_main(
        ["predict", "--param", "block-size", "--values", "32", "--model-config", "absent.json"]
    )
    err = capsys.readouterr().err
    print(err)
    assert code == 1 and err.count("\n") == 1
    assert "no config.json at absent.json" in err and err.rstrip().endswith("give --model-config")
