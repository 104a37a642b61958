"""Issue 41 case 12: 5,000-level nested JSON raised RecursionError (a traceback) wherever the lab
parsed JSON from outside without the workload reader's nesting bound: a JSON flag's `--values`
or `--set`, `search import FILE`, `predict --model-config`, a bundle's manifest (import, the team
folder) and settings.json. Each is now refused in one line naming the flag or file (a bad
settings.json is ignored, as any unreadable one is), before anything is written."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from store.bundle.format import DATA_NAME, MANIFEST_NAME
from tests.fakes.engines import fake_settings_env
from tests.fakes.gpu_box import FAKE_VLLM_PKG
from tuning.cli.main import main as cli_main
from tuning.measure.traffic.bounded import MAX_NESTING
from tuning.settings import load_settings

DEPTH = 5_000
DEEP_ARRAY = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECT = '{"a":' * DEPTH + "1" + "}" * DEPTH
WORDS = f"JSON nested deeper than {MAX_NESTING} levels"


def _one_refusal(capsys: pytest.CaptureFixture[str], *names: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("refused:"), err[-2000:]
    assert WORDS in lines[0] and all(n in lines[0] for n in names), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--param", "compilation-config", "--values", DEEP_OBJECT], ["--values"]),
        (
            [
                "--param",
                "max-num-seqs",
                "--values",
                "2,4",
                "--set",
                f"compilation-config={DEEP_OBJECT}",
            ],
            ["--set compilation-config"],
        ),
    ],
)
def test_a_deep_flag_value_is_refused_before_anything_is_written(
    args: list[str],
    names: list[str],
    lab_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in fake_settings_env(lab_home).items():  # the fake vLLM and its parser
        monkeypatch.setenv(key, value)
    path = [str(FAKE_VLLM_PKG), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    db = lab_home / "lab.db"
    assert cli_main(["experiment", *args, "--db", str(db)]) == 1
    _one_refusal(capsys, *names)
    assert not db.exists()


def test_a_deep_search_import_file_is_refused(
    tmp_path: Path, lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "search.json"
    deep.write_text(DEEP_ARRAY)
    assert cli_main(["search", "import", str(deep), "--db", str(lab_home / "lab.db")]) == 1
    _one_refusal(capsys, str(deep))


def test_a_deep_model_config_is_refused(
    tmp_path: Path, lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "config.json"
    deep.write_text(DEEP_OBJECT)
    args = ["predict", "--param", "max-num-seqs", "--values", "2", "--model-config", str(deep)]
    assert cli_main(args) == 1
    _one_refusal(capsys, str(deep))


def test_a_bundle_with_a_deep_manifest_is_refused(
    tmp_path: Path, lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "deep.bundle.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr(MANIFEST_NAME, DEEP_ARRAY)
        zf.writestr(DATA_NAME, b"")
    db = lab_home / "lab.db"
    assert cli_main(["import", str(bundle), "--db", str(db)]) == 1
    _one_refusal(capsys, str(bundle), MANIFEST_NAME)


def test_a_deep_settings_file_is_ignored_like_any_unreadable_one(lab_home: Path) -> None:
    lab_home.mkdir(parents=True, exist_ok=True)
    (lab_home / "settings.json").write_text(DEEP_OBJECT)
    assert load_settings().engine == "embedded"  # the defaults, no RecursionError
