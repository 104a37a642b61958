"""Issue 23 item 5 from the CLI: `search import FILE` records the H200 concurrency search (a lab
from before searches had rows), `search show ID [--json]` prints it as a result of its own (the
search's id, the chosen value, the objective's value beside it, the SLO, the knee, why each step
ran), and `search --confirm` repeats the choice against its closest rival until decided (fake
server, attached), the verdict shown with the search."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries
from store.snapshot import expanded
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.cli.main import main as cli_main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "h200"


@pytest.fixture
def h200_db(tmp_path: Path) -> Path:
    db = tmp_path / "lab.db"
    shutil.copy(expanded(EXAMPLES / "lab-h200-decisions.db.xz"), db)
    return db


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli_main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_import_then_show_names_the_leader_never_a_choice_from_one_run(
    h200_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 4: the H200 search ran each value once, so it chose nothing: `search show`
    names the leader, tried once with no interval, and each value's SLOs as tried once (one run
    over the limit rules nothing out); it used to say "chosen 138"."""
    db = ["--db", str(h200_db)]
    code, out, err = _cli(
        ["search", "import", str(EXAMPLES / "decisions-search.json"), *db], capsys
    )
    assert code == 0, err
    assert "recorded search 1" in err and "chosen 138" not in out
    code, out, err = _cli(["search", "show", "1", *db, "--json"], capsys)
    facts = json.loads(out)
    assert (facts["search_id"], facts["chosen"], facts["leader"]) == (1, None, 138)
    assert facts["chosen_objective"] is None and facts["interval"] is None
    decision = facts["decision"]
    assert decision["outcome"] == "undecided" and "tried once" in decision["why"]
    assert facts["choice"]["outcome"] == "undecided" and facts["choice"]["source"] == "search"
    assert facts["slo_ms"] == {"ttft": 1000.0} and facts["objective"] == "output_throughput"
    assert facts["knee"]["value"] == 138 and (facts["baseline"], facts["rival"]) == (16, 101)
    assert [s["value"] for s in facts["steps"]] == [64, 213, 363, 512, 138, 101]
    # each run's own p99 against the limit is a fact of the run; the value's SLOs are undecided
    assert [s["under_slo"] for s in facts["steps"]] == [True, False, False, False, True, True]
    assert {s["slo_state"] for s in facts["steps"]} == {"tried once"}
    assert {s["meets_slo"] for s in facts["steps"]} == {None}
    rows = {r["value"]: r for r in decision["values"]}
    assert rows[213]["status"] == "tried once" and rows[213]["slo"]["state"] == "tried once"
    assert round(rows[138]["mean"]) == 8431 and rows[138]["interval"] is None
    code, text, _ = _cli(["search", "show", "1", *db], capsys)
    lines = text.splitlines()
    assert (
        lines[1]
        == "objective: output throughput (tok/s, higher is better); SLOs: p99 TTFT <= 1000 ms"
    )
    assert lines[2].startswith(
        "undecided: no value has 2 runs (tried once: no interval yet); leader 138: "
        "output throughput 8,431 tok/s in its one run"
    ), lines[2]
    assert (
        "  concurrency = 213: tried once, no interval yet: output throughput 9,423 tok/s, "
        "p99 TTFT 2,435 ms (limit 1000 ms)" in lines
    )
    assert "(refine: between the best so far 64 and its neighbour 213)" in text
    assert lines[-1].startswith("confirm: run 138 vs 16 with repeats until decided")


def test_refusals_are_one_line_and_write_nothing(
    h200_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--db", str(h200_db)]
    data = json.loads((EXAMPLES / "decisions-search.json").read_text())
    data["search"]["slo_ms"] = {"ttft": 2000.0}  # not what the steps ran under
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    code, _, err = _cli(["search", "import", str(forged), *db], capsys)
    assert code == 1 and err.count("\n") == 1, err
    assert "search_key 9036f9681d does not match" in err
    with connect(h200_db, readonly=True) as conn:
        assert queries.list_searches(conn) == []
    for args, words in (
        (["search", "show", "x"], "the search's id is a whole number"),
        (["search", "show", "7"], "search 7: no search 7"),
        (["search", "show"], "give the search's id"),
        (["search"], "--param is required"),
    ):
        code, _, err = _cli([*args, *db], capsys)
        assert code == 1 and words in err and err.count("\n") == 1, (args, err)


def test_search_confirm_repeats_the_choice_against_its_rival_until_decided(
    lab_home: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`search --confirm`: the leader (two values tried once: undecided) runs against its closest
    rival until decided, and the confirm's result is part of the search's record: the choice in
    --json and in `search show`'s choice line (issue 37 item 4; it used to keep saying "chosen
    ... (one run: no interval yet)" after the confirm)."""
    db = lab_home / "lab.db"
    # two steps (1 and 4): the leader and its rival, then repeated until decided
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        flags = (
            f"--param concurrency --range 1:4 --coarse 2 --budget-runs 2 --base-url {srv.base_url}"
        )
        flags += " --model m --objective output_throughput --num-requests 8 --input-len 4"
        flags += f" --output-len 3 --num-warmups 0 --db {db} --confirm --json"
        flags += " --max-repeats 4 --budget-minutes 30"  # the confirm's limits
        done = tuning_cli(["search", *flags.split()], lab_home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    confirm, choice = result["confirm"], result["choice"]
    assert result["search_id"] == 1 and result["decision"]["outcome"] == "undecided"
    assert confirm["chosen"] == result["decision"]["leader"]
    assert {confirm["chosen"], confirm["other"]} == {1, 4}
    assert confirm["verdict"] in ("better", "worse", "equivalent", "undecided")
    assert 2 <= confirm["runs_a_side"][0] <= 4 and 2 <= confirm["runs_a_side"][1] <= 4
    assert confirm["confidence"] is not None and 0.95 <= confirm["confidence"] < 1
    # the confirm settles the choice: a value when decided, a named tie when not
    assert choice["source"] == "confirm" and choice["outcome"] in ("chosen", "tie")
    if choice["outcome"] == "tie":
        assert choice["tie"] == [1, 4] and choice["tie_breaker"]["rule"] == "less memory"
    with connect(db, readonly=True) as conn:
        exp = queries.get_experiment(conn, confirm["experiment_id"])
        stored = queries.get_search(conn, 1)["result"]
    assert exp["name"].startswith("confirm search 1: concurrency") and exp["repeats_auto"] == 1
    assert (exp["max_repeats"], exp["budget_minutes"]) == (4, 30.0)  # it used to have no budget
    assert stored["confirm"] == confirm and stored["choice"]["chosen"] == choice["chosen"]
    # `search show` reads only the store: in-process, as the tests above call it
    code, out, err = _cli(["search", "show", "1", "--db", str(db), "--json"], capsys)
    assert code == 0, err
    facts = json.loads(out)
    assert facts["confirm"] == confirm and facts["chosen"] == choice["chosen"]
    assert f"confirm experiment {confirm['experiment_id']}" in facts["choice"]["line"]
    text = _cli(["search", "show", "1", "--db", str(db)], capsys)[1].splitlines()
    assert text[2] == facts["choice"]["line"], text[2]
    assert any(w in text[2] for w in ("after the confirm", "confirmed", "overturned")), text[2]
    assert " vs " in text[-1] and " on output throughput: " in text[-1], text[-1]  # not the key


def test_a_confirm_has_the_experiments_limits_by_default() -> None:
    """`search --confirm` / `search confirm ID` without limits repeat at most
    DEFAULT_MAX_REPEATS runs a value within DEFAULT_BUDGET_MINUTES, as `experiment --repeats auto`
    does (the confirm used to repeat with no time budget at all); 0 minutes is no budget."""
    from tuning.cli.main import build_parser
    from tuning.cli.search_show import confirm_limits
    from tuning.experiment.size import DEFAULT_BUDGET_MINUTES, DEFAULT_MAX_REPEATS

    parse = build_parser().parse_args
    auto = confirm_limits(parse(["search", "confirm", "1"]))
    assert (auto.max_repeats, auto.budget_minutes) == (DEFAULT_MAX_REPEATS, DEFAULT_BUDGET_MINUTES)
    auto = confirm_limits(parse(["search", "confirm", "1", "--budget-minutes", "0"]))
    assert auto.budget_minutes is None
    with pytest.raises(ValueError, match="budget-minutes"):
        confirm_limits(parse(["search", "confirm", "1", "--budget-minutes", "-1"]))


def test_confirm_limits_are_refused_before_the_search_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad confirm limit, or a limit without --confirm, is one line before any work (nothing
    is written: no DB appears)."""
    db = tmp_path / "lab.db"
    base = ["search", "--param", "concurrency", "--range", "1:4", "--base-url", "http://x:1"]
    for extra, words in (
        (["--confirm", "--budget-minutes", "-1"], "--budget-minutes must be more than 0"),
        (["--max-repeats", "3"], "limit the confirm: add --confirm"),
    ):
        code, _, err = _cli([*base, *extra, "--db", str(db)], capsys)
        assert code == 1 and words in err and err.count("\n") == 1, err
    assert not db.exists()
