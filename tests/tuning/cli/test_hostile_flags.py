"""Odd flag values are refused in one line that names the flag (exit 1, nothing written), never a
traceback: `predict --device-memory-gib nan|inf|-4`, a `--base-url` that does not parse; and a
URL's `?token=` is never echoed in an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.cli.main import main as cli_main

SECRET = "Zq7Xw2Lp9Vb4Nm8Kc3"


@pytest.mark.parametrize("gib", ["nan", "inf", "-inf", "-4", "0"])
def test_predict_refuses_a_device_memory_that_is_not_a_size(
    gib: str, lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(
        ["predict", f"--device-memory-gib={gib}", "--param", "block-size", "--values", "32"]
    )
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("\n") == 1 and "--device-memory-gib" in err and "finite" in err


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::1:8000", "not a valid URL"),
        ("http://h:99999/v1", "not a valid URL"),
        ("http://:8000/v1", "names no host"),
        (f"ftp://h/v1?token={SECRET}", "must start with http"),
    ],
)
@pytest.mark.parametrize("command", ["experiment", "search", "bench"])
def test_a_base_url_that_does_not_parse_is_refused_in_one_line(
    command: str, url: str, why: str, lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "experiment": ["--param", "concurrency", "--values", "1,2"],
        "search": ["--param", "concurrency", "--range", "1:4"],
        "bench": ["--num-requests", "2", "--concurrency", "1", "--input-len", "4"],
    }[command]
    extra = ["--output-len", "4", "--out", str(lab_home / "r.json")]
    code = cli_main(
        [command, *argv, *(extra if command == "bench" else []), "--model", "m", "--base-url", url]
    )
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("refused: --base-url") and why in err, err
    assert SECRET not in err
    assert not (lab_home / "lab.db").exists() and not (lab_home / "r.json").exists()


def test_a_token_in_an_unreachable_base_url_is_not_echoed(
    lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:9/v1?token={SECRET}&x=1"
    code = cli_main(
        [
            "experiment",
            "--repeats",
            "1",
            "--param",
            "concurrency",
            "--values",
            "1,2",
            "--model",
            "m",
        ]
        + ["--base-url", url]
    )
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach" in err and "token=[redacted]" in err, err
    assert SECRET not in err
