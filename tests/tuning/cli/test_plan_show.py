"""Issue 23 item 5, "a plan likewise", from the CLI: `plan show ID [--json]` prints a stored plan
as a result of its own (the parameters in order, each search's chosen value with its objective,
SLOs and search id, start vs recommended, the gain with its interval and verdict, the `vllm
serve` command, the run and experiment ids behind each number); `plan list` lists the plans; a
bad id is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import add_plan, plan_result
from tuning.cli.main import main as cli_main


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli_main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_show_prints_the_recommendation_and_what_stands_behind_it(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_id = add_plan(fresh_db, plan_result(search_ids=(3, 4)))
    code, out, err = _cli(["plan", "show", str(plan_id), "--db", str(fresh_db)], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"plan {plan_id} (done): max-num-seqs, then block-size"
    assert lines[1] == (
        "objective: output throughput (tok/s, higher is better); SLOs: p99 TTFT <= 500 ms"
    )
    assert lines[3] == (
        "  1. max-num-seqs 1..64: chosen 16, output throughput 1,500 tok/s, meets the SLOs "
        "(search 3; run 2; runs 1, 2; experiments 1, 2)"
    )
    assert lines[4].startswith("  2. block-size 16..32: chosen 32, output throughput 1,800 tok/s")
    assert "  max-num-seqs: unset → 16" in lines and "  concurrency: 4 → 4 (same)" in lines
    gain = next(line for line in lines if line.startswith("gain over the start"))
    assert gain == (
        "gain over the start, output throughput: 1,000 tok/s → 1,210 tok/s, +21.0 %: ▲ better "
        "(95 % CI +13.0 … +29.0 %)"
    )
    assert (
        "  behind it: runs 5, 8 (start) vs runs 6, 7 (recommended); experiments 5, 6, 7, 8" in lines
    )
    assert "Recommended: serve: vllm serve m --max-num-seqs 16 --block-size 32" in lines

    code, out, _ = _cli(["plan", "show", str(plan_id), "--db", str(fresh_db), "--json"], capsys)
    facts = json.loads(out)
    assert facts["params"] == ["max-num-seqs", "block-size"] and facts["status"] == "done"
    assert [(s["search_id"], s["chosen"]) for s in facts["steps"]] == [(3, 16), (4, 32)]
    assert [g["tone"] for g in facts["gains"]] == ["better", "muted"]  # undecided is grey
    assert facts["gain"]["ci_low_pct"] == 13.0 and facts["confirm_runs"]["final"] == [6, 7]
    changed = {c["param"]: c["changed"] for c in facts["config"]}
    assert changed == {"block-size": True, "concurrency": False, "max-num-seqs": True}


def test_an_undecided_plan_shows_no_serve_command_and_says_what_would_decide_it(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 5: a plan showed "Recommended" and a ready `vllm serve` command for a gain
    that was undecided. Its decision record now decides: no command, and what would decide it."""
    plan_id = add_plan(fresh_db, plan_result(recommended=False))
    code, out, err = _cli(["plan", "show", str(plan_id), "--db", str(fresh_db)], capsys)
    assert code == 0, err
    assert "serve: vllm serve m --max-num-seqs" not in out and "Recommended" not in out
    assert "final (not recommended) vs start:" in out
    assert "not recommended: output throughput is undecided; ≈ " in out
    assert "more runs a side (a larger --confirm-repeats) would likely decide it" in out
    code, out, _ = _cli(["plan", "show", str(plan_id), "--db", str(fresh_db), "--json"], capsys)
    facts = json.loads(out)
    assert facts["serve_command"] is None and facts["recommended"] is False
    assert facts["decision"]["rule"] == "fixed-n" and facts["decision"]["recommended"] is None


def test_a_plan_stored_before_decisions_were_recorded_recommends_nothing(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan result without a decision record (stored before m017): its gain stays for
    information, and no command is offered as if it were decided."""
    result = plan_result()
    del result["decision"]
    plan_id = add_plan(fresh_db, result)
    code, out, err = _cli(["plan", "show", str(plan_id), "--db", str(fresh_db)], capsys)
    assert code == 0, err
    assert "serve: vllm serve m --max-num-seqs" not in out
    assert "not recommended: no decision record: this plan ended before the lab recorded" in out


def test_plan_list_lists_the_plans_newest_first(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(["plan", "list", "--db", str(fresh_db)], capsys)
    assert code == 0 and out == "" and "no plan yet" in err
    plan_id = add_plan(fresh_db)
    code, out, _ = _cli(["plan", "list", "--db", str(fresh_db)], capsys)
    assert out.splitlines() == [
        f"plan {plan_id}: max-num-seqs, block-size · done · gain +21.0 %: ▲ better"
    ]
    code, out, _ = _cli(["plan", "list", "--db", str(fresh_db), "--json"], capsys)
    assert [p["plan_id"] for p in json.loads(out)] == [plan_id]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["plan", "show"], "plan show: give the plan's id (`plan list` lists them)"),
        (["plan", "show", "two"], "plan show 'two': the plan's id is a whole number"),
        (["plan", "show", "9"], "plan 9: no plan 9"),
        (["plan", "list", "3"], "plan list '3': takes no id (`plan show ID` shows one)"),
        (["plan"], "plan: --params is required (or `plan show ID`, `plan list`)"),
    ],
)
def test_a_bad_plan_command_is_refused_in_one_line(
    fresh_db: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, out, err = _cli([*args, "--db", str(fresh_db)], capsys)
    assert (code, out, err) == (1, "", f"refused: {says}\n")


def test_a_bytes_typed_plan_reads_in_gib(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23 item 4 in a plan: a kv-cache-memory-bytes search reads 1 GiB..16 GiB, chosen 4 GiB,
    and its recommended value 4 GiB: no raw byte count."""
    result = plan_result()
    first = result["searches"][0]
    first.update(param="kv-cache-memory-bytes", range=[float(2**30), float(2**34)], chosen=2**32)
    first["log"][1]["value"] = float(2**32)
    result["params"][0] = "kv-cache-memory-bytes"
    result["recommended"] = {"kv-cache-memory-bytes": 2**32, "block-size": 32, "concurrency": 4}
    plan_id = add_plan(fresh_db, result)
    code, out, err = _cli(["plan", "show", str(plan_id), "--db", str(fresh_db)], capsys)
    assert code == 0, err
    assert "1. kv-cache-memory-bytes 1 GiB..16 GiB: chosen 4 GiB" in out
    assert "  kv-cache-memory-bytes: unset → 4 GiB" in out.splitlines()
    assert "4294967296" not in out and "17179869184" not in out
