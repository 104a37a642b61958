"""The GPU run of 2026-12-07 committed under examples/h200, on an H100 (the device tool lent an
H100 for `nvidia-h200`), real vLLM 0.25.0:

- step (n), issue 37's acceptance: `search --param max-num-seqs --range 64:256 --goodput tpot:80
  --budget-runs 4 --confirm` ends with a named tie (the confirm left 64 vs 256 undecided) and its
  tie-breaker, never "chosen" from one run; the confirm is an until-decided experiment whose
  primary verdicts read the same in `compare`, on Compare, in the report and in `search show`;
- step (m), issue 38's: a resident until-decided experiment (max-num-seqs 8 vs 128, compiled):
  2 starts and 2 switches, its check and the KV capacity after a wake stored, each run's anatomy
  adding up to its wall time.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from store import open_db, queries
from tests.apptest import open_page, with_query
from tests.examples import H200, lab_of
from tuning.cli.main import main as cli_main
from tuning.present.report import build_report

DB = H200 / "lab-h100-resident-confirm.db.xz"
CONFIRM, RESIDENT = 6, 1
# The confirm's headline: 64 (chosen by the search) against 256, the objective and both guards.
CONFIRM_HEAD = (
    "max-num-seqs 64 vs 256: objective output throughput -55.9 % (undecided); guards p99 TTFT "
    "+895.8 % (undecided), p99 TPOT -17.1 % (undecided)"
)


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return lab_of(DB, tmp_path, monkeypatch)


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(args) == 0
    return capsys.readouterr().out


def _headline_on_compare(exp: int) -> str:
    at = open_page("app_pages/4_Compare.py", with_query("experiment", exp))
    assert not at.exception, at.exception
    box = next(n for n in at.main.children.values() if getattr(n, "key", None) == "cmp_headline")
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(getattr(node, "value", None), str):
            out.append(node.value)
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)

    walk(box)
    return "\n".join(out)


def _words(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_the_confirms_primary_verdicts_agree_on_every_surface(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _cli(["compare", "--db", str(lab), "--experiment", str(CONFIRM)], capsys)
    assert text.splitlines()[0].startswith(CONFIRM_HEAD)
    assert "Recommendation" not in text
    as_json = json.loads(
        _cli(["compare", "--db", str(lab), "--experiment", str(CONFIRM), "--json"], capsys)
    )
    (value,) = as_json["decision"]["values"]
    verdicts = {m["metric"]: m["verdict"] for m in value["metrics"]}
    assert verdicts == {
        "output_throughput": "undecided",
        "p99_ttft_ms": "undecided",
        "p99_tpot_ms": "undecided",
    }
    assert as_json["decision"]["rule"] == "sequential"
    assert as_json["decision"]["recommended"] is None
    assert CONFIRM_HEAD in _headline_on_compare(CONFIRM)
    assert CONFIRM_HEAD in _words(build_report(lab, experiment_ids=[CONFIRM]))


def test_the_search_ends_in_a_named_tie_read_from_the_confirms_record(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _cli(["search", "show", "1", "--db", str(lab)], capsys)
    choice = next(x for x in shown.splitlines() if x.startswith("chosen 64"))
    assert "after the confirm, a tie: 64 vs 256 undecided" in choice
    assert "the tie-breaker picks 64: the smaller value, which costs less memory" in choice
    as_json = json.loads(_cli(["search", "show", "1", "--db", str(lab), "--json"], capsys))
    found = as_json.get("result", as_json)
    assert found["choice"]["outcome"] == "tie" and found["choice"]["tie"] == [64, 256]
    # the confirm's interval is the one its decision record holds (Holm's share of the look's
    # alpha over the three primaries: 99.44 %), as `compare` prints it, not a replay at 98.33 %
    assert found["confirm"]["confidence"] == pytest.approx(1 - 0.05 / 3 / 3)
    objective = json.loads(
        _cli(["compare", "--db", str(lab), "--experiment", str(CONFIRM), "--json"], capsys)
    )["decision"]["values"][0]["metrics"][0]
    assert found["confirm"]["interval_pct"] == pytest.approx(
        [objective["ci_low_pct"], objective["ci_high_pct"]]
    )


def test_the_resident_experiment_switched_and_stored_its_check(lab: Path) -> None:
    db = open_db(lab)
    exp = queries.get_experiment(db, RESIDENT)
    resident = json.loads(exp["resident_json"])
    assert resident["used"] is True and resident["starts"] == 2 and resident["switches"] == 2
    assert resident["kv_after_wake"]["fresh_tokens"] == resident["kv_after_wake"]["woken"]
    assert set(resident["check"]["values"]) == {"8", "128"}
    runs = queries.load_runs(db, queries.experiment_run_ids(db, RESIDENT))
    assert [r["hardware"] for r in runs] == ["1x NVIDIA H100 80GB HBM3"] * 4
    for run in runs:
        anatomy = run["anatomy"] if "anatomy" in run else json.loads(run["anatomy_json"])
        parts = sum(float(p["seconds"]) for p in anatomy["parts"])
        assert parts == pytest.approx(float(anatomy["wall_s"]), rel=0.02)
