"""Issue 41 case 12: `--coarse 0`, a `--set` of the varied parameter, an SLO or a range the search
cannot use, and 10,000 values at once were dropped, used silently or started without a word.
Each is now one line before any work: nothing asked of a server, no DB written; a `--set` of a
searched parameter (the start value a search's or plan's confirmation compares against) is
said in a note; more than 64 runs need `--yes`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes.engines import fake_settings_env
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tests.fakes.gpu_box import FAKE_VLLM_PKG
from tuning.cli.main import main as cli_main

SEARCH = ["search", "--param", "max-num-seqs", "--range", "1:8"]
PLAN = ["plan", "--params", "max-num-seqs", "--param-range", "max-num-seqs=1:8"]


@pytest.fixture
def db(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The lab's DB (not created yet) on the fake vLLM: whatever slipped through would start the
    fake, never the real engine."""
    for key, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(key, value)
    path = [str(FAKE_VLLM_PKG), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    return lab_home / "lab.db"


def refused_line(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("note:")]
    assert len(lines) == 1 and lines[0].startswith("refused:"), err[-3000:]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([*SEARCH, "--coarse", "0"], ["--coarse 0", "at least 2"]),
        ([*SEARCH, "--coarse", "1"], ["--coarse 1"]),
        ([*PLAN, "--coarse", "0"], ["--coarse 0"]),
        (["search", "--param", "max-num-seqs", "--range", "0:64"], ["0 is below the minimum"]),
        (["search", "--param", "gpu-memory-utilization", "--range", "0.5:1.5"], ["above"]),
        (["search", "--param", "gpu-memory-utilization", "--range=-inf:0.9"], ["--range"]),
        (["search", "--param", "enable-prefix-caching", "--range", "0:1"], ["is bool"]),
        (["search", "--param", "kv-cache-dtype", "--range", "0:1"], ["is choice"]),
        ([*PLAN[:3], "--param-range", "max-num-seqs=0:8"], ["--param-range max-num-seqs"]),
        ([*SEARCH, "--goodput", "ttft:200", "ttft:100"], ["--goodput", "ttft twice"]),
        (
            [*SEARCH, "--goodput", "tpot:20", "--output-len", "1"],
            ["--goodput tpot:20", "--output-len 1"],
        ),
    ],
)
def test_a_search_it_could_not_use_is_refused_before_any_run(
    args: list[str], words: list[str], db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main([*args, "--db", str(db)]) == 1
    refused_line(capsys, *words)
    assert not db.exists()


def test_a_set_of_the_varied_parameter_is_refused(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to be dropped: each run sets the varied parameter to its own value."""
    args = [
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
        "--values",
        "2,4",
        "--set",
        "max_num_seqs=8",
    ]
    assert cli_main([*args, "--db", str(db)]) == 1
    refused_line(capsys, "--set max_num_seqs=8", "varies")
    assert not db.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([*SEARCH, "--set", "max-num-seqs=4"], "the baseline value `search confirm` compares"),
        ([*PLAN, "--set", "max-num-seqs=4"], "the start configuration's value"),
    ],
)
def test_a_set_of_a_searched_parameter_is_said_not_silent(
    args: list[str], words: str, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """For a search or a plan it is the start value its confirmation compares against: said in a
    note before anything else (the search here is then refused for its budget, so nothing runs)."""
    assert cli_main([*args, "--budget-runs", "1", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    (note,) = [ln for ln in err.splitlines() if ln.startswith("note:")]
    assert "--set max-num-seqs=4" in note and words in note, err


def test_a_first_pass_longer_than_the_budget_is_said(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not refused (the search page offers 4 points with a budget of 3): said, before any run."""
    args = [*SEARCH, "--coarse", "6", "--budget-runs", "3", "--goodput", "ttft:1", "ttft:2"]
    assert cli_main([*args, "--db", str(db)]) == 1  # then refused for its SLO: nothing runs
    err = capsys.readouterr().err
    assert "note: --coarse 6 is more points than --budget-runs 3" in err, err


def test_a_server_flag_on_an_attached_server_is_refused_before_the_server_is_asked(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(FakeConfig(model="m")) as srv:
        attach = ["--base-url", srv.base_url, "--model", "m", "--db", str(db)]
        assert cli_main([*SEARCH, *attach]) == 1
        refused_line(capsys, "max-num-seqs needs a server restart", "--base-url")
        searched = ["search", "--param", "concurrency", "--range", "1:4"]
        assert cli_main([*searched, "--set", "max-num-seqs=4", *attach]) == 1
        refused_line(capsys, "--set max-num-seqs=4", "its own flags")
        assert cli_main([*searched, "--set", "concurrency=2", *attach]) == 1
        refused_line(capsys, "--set concurrency=2", "workload setting", "--concurrency 2")
        asked = list(srv.stats.paths)
    assert asked == [] and not db.exists()


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        (["--values", ",".join(map(str, range(1, 10_001)))], "10,000 runs"),
        (["--values", ",".join(map(str, range(1, 8))), "--repeats", "auto"], "70 runs"),
        (["--values", "1,2", "--repeats", "33"], "66 runs"),
    ],
)
def test_an_experiment_over_the_cap_needs_yes(
    args: list[str], runs: str, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--db", str(db)]
    command = ["experiment", "--repeats", "1", "--param", "concurrency", *args, *dead]
    assert cli_main(command) == 1
    refused_line(capsys, runs, "--yes")
    assert not db.exists()
    # With --yes it gets past the cap to the server, which is not there (exit 1, its own words).
    assert cli_main([*command, "--yes"]) == 1
    assert "cannot reach http://127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        ([*SEARCH, "--budget-runs", "100"], "100 runs"),
        ([*SEARCH, "--budget-runs", "50", "--confirm"], "70 runs"),
        (
            ["plan", "--params", "max-num-seqs,max-num-batched-tokens", "--budget-runs", "40"]
            + [
                "--param-range",
                "max-num-seqs=1:8",
                "--param-range",
                "max-num-batched-tokens=64:512",
            ],
            "86 runs",
        ),
    ],
)
def test_a_search_or_plan_over_the_cap_needs_yes(
    args: list[str], runs: str, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main([*args, "--db", str(db)]) == 1
    refused_line(capsys, runs, "--yes")
    assert not db.exists()
