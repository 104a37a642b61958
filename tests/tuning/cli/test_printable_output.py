"""Stored text reaches the terminal only through `say`/`printable`: names, values, notes and
failure kinds holding escape sequences (`\\x1b[2J` clears the screen, `\\x1b]0;...\\x07`
retitles it) or line breaks are printed as visible escapes by `runs`, `compare` and
`workload list`; and no module of the CLI prints any other way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from store import connect, queries, repo
from tests.factories import seed_lab
from tuning.cli.main import main as cli_main

CLEAR, TITLE = "\x1b[2J", "\x1b]0;pwned\x07"
CLI = Path(__file__).resolve().parents[3] / "tuning" / "cli"


@pytest.fixture
def hostile_db(tmp_path: Path) -> Path:
    """A lab whose stored text carries terminal escapes (as a DB or an imported bundle can)."""
    path = tmp_path / "lab.db"
    info = seed_lab(path, values=(2, 16), repeats=1, with_failed=True, with_secrets=False)
    with connect(path) as db:
        runs = queries.list_runs(db, info["experiment_id"], include_hidden=True)
        for run in runs:
            fields = {"value": f"{run['value']}{CLEAR}"}
            if run["status"] == "failed":
                fields["failure_kind"] = f"oom{TITLE}\nforged row"
            repo.update_run(db, run["id"], **fields)
        spec = {"source": {"kind": f"file{CLEAR}"}, "arrival": {"kind": f"open{TITLE}"}}
        repo.save_workload(db, f"chat{TITLE}", spec, f"abc{CLEAR}")
    return path


def _clean(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out, repr(out)
    assert "\\x1b" in out  # shown, as a visible escape


def test_runs_prints_stored_text_escaped(
    hostile_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["runs", "--db", str(hostile_db)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert "oom\\x1b]0;pwned\\x07\\nforged row" in out  # one cell, one line
    assert not any(line.startswith("forged row") for line in out.splitlines())


def test_compare_prints_stored_text_escaped(
    hostile_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["compare", "--db", str(hostile_db), "--experiment", "1"]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert "Baseline: max-num-seqs = 2\\x1b[2J" in out


def test_workload_list_prints_stored_text_escaped(
    hostile_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["workload", "list", "--db", str(hostile_db)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert "chat\\x1b]0;pwned\\x07" in out and "\x07" not in out


def test_the_cli_prints_only_through_say() -> None:
    """`print`, `sys.stdout.write` and friends appear only in `say` (tuning/cli/args.py)."""
    offenders = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = ast.unparse(node.func)
            if func == "print" or func.endswith((".stdout.write", ".stderr.write")):
                offenders.append(f"{path.name}:{node.lineno} {func}")
            elif func == "tqdm.write" and "printable(" not in ast.unparse(node.args[0]):
                offenders.append(f"{path.name}:{node.lineno} {func} without printable")
    assert len([o for o in offenders if o.startswith("args.py")]) == 1, offenders  # say itself
    assert [o for o in offenders if not o.startswith("args.py")] == [], offenders
