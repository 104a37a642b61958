"""The CLI's text output says why a run failed in the words the pages use: `runs` and a search's
step lines (`search show`, and the stderr line of a step that measured nothing) printed the
store's keys (`[out_of_memory]`, `run 7 failed (port_in_use: ...)`); `--json` keeps the keys."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from core.failure_kinds import FAILURE_WORDS, failure_words
from store import connect, queries, repo
from tests.factories_search import add_search
from tuning.cli.main import main as cli_main
from tuning.decide.search.driver import AFTER_START
from tuning.engine.server import HINTS as START_KINDS
from tuning.experiment.outcome import HINTS as LAB_HINTS
from tuning.experiment.outcome import LAB_KINDS

# every kind the lab stores: a failed start's, a failed load's, the lab's own, the fleet's
KINDS = sorted(
    {*START_KINDS, *LAB_HINTS, *LAB_KINDS, *AFTER_START, "worker_error", "worker_lost", "oom"}
)


def test_every_kind_the_lab_stores_has_words() -> None:
    assert not set(KINDS) - set(FAILURE_WORDS)
    assert all("_" not in failure_words(k) for k in KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_runs_and_search_steps_print_a_failure_kind_in_words(
    fresh_db: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    add_search(fresh_db, budget_runs=3)
    with connect(fresh_db) as db:
        run, *rest = queries.list_runs(db, None, include_hidden=True)
        repo.update_run(db, run["id"], status="failed", failure_kind=kind, failure_reason="x")
    capsys.readouterr()
    assert cli_main(["runs", "--db", str(fresh_db)]) == 0
    listed = capsys.readouterr().out
    (line,) = [x for x in listed.splitlines() if x.split()[0] == str(run["id"])]
    assert f"[{failure_words(kind)}]" in line, line
    assert cli_main(["search", "show", "1", "--db", str(fresh_db)]) == 0
    shown = capsys.readouterr().out
    if kind not in LAB_KINDS:  # a lab failure is no step: its value is measured again
        (step,) = [x for x in shown.splitlines() if f"run {run['id']} failed" in x]
        assert f"run {run['id']} failed ({failure_words(kind)})" in step, step
    if "_" in kind:  # a key of one word reads the same
        assert kind not in listed + shown
    others = [str(r["id"]) for r in rest]  # compared with the failed one: it has no numbers
    assert cli_main(["compare", "--db", str(fresh_db), *others, str(run["id"])]) == 0
    compared = capsys.readouterr().out
    assert f"run {run['id']} (" in compared and f"[{failure_words(kind)}]" in compared, compared
    if "_" in kind:
        assert kind not in compared
    assert cli_main(["runs", "--db", str(fresh_db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert next(r for r in rows if r["id"] == run["id"])["failure_kind"] == kind


def test_an_experiments_failed_run_line_says_why_in_words(
    tmp_path: Path, fake_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """`experiment`'s progress line of a failed run printed `run 2 failed [out_of_memory]: ...`:
    it says the kind in words (the fake vLLM runs out of memory at max-num-seqs 16)."""
    args = ["experiment", "--param", "max-num-seqs", "--values", "2,16", "--num-requests", "4"]
    args += ["--concurrency", "2", "--input-len", "8", "--output-len", "4", "--num-warmups", "0"]
    done = fake_cli(
        tmp_path, *args, "--start-timeout", "120", faults="oom_at_start@max-num-seqs=16"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [x for x in done.stderr.splitlines() if " failed [" in x]
    assert lines, done.stderr
    assert all("failed [out of memory]: " in x for x in lines), lines
    assert "out_of_memory" not in done.stderr


def test_server_starts_failure_says_why_in_words(
    tmp_path: Path, fake_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """`server start` printed `FAILED [out_of_memory] ...` for a start that failed; the words now,
    and --json keeps the key."""
    done = fake_cli(tmp_path, "server", "start", faults="oom_at_start", timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED [out of memory] " in done.stdout and "out_of_memory" not in done.stdout
    as_json = fake_cli(tmp_path, "server", "start", "--json", faults="oom_at_start", timeout=120)
    assert '"kind": "out_of_memory"' in as_json.stdout, as_json.stdout + as_json.stderr
