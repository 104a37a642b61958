"""Issue 23 item 5 (AppTest): the Searches page shows a search as a result of its own, on the H200
concurrency search (examples/h200, recorded from its --json output): the chosen value first, the
objective and the SLO, the SLO line and the chosen value on the chart, why each step ran, and the
button that confirms the choice against the baseline with repeats until decided."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from store import connect, queries
from store.snapshot import expanded
from tests.apptest import frame_with, open_page, page_text
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.decide.search.adopt import import_result

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "h200"


@pytest.fixture
def h200_lab(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the H200 decisions DB with its concurrency search recorded (search 1)."""
    lab_home.mkdir(parents=True, exist_ok=True)
    db = lab_home / "lab.db"
    shutil.copy(expanded(EXAMPLES / "lab-h200-decisions.db.xz"), db)
    data = json.loads((EXAMPLES / "decisions-search.json").read_text())
    assert import_result(db, data) == 1
    monkeypatch.setenv("TUNING_LAB_DB", str(db))
    return db


def _chart_spec(at: AppTest) -> dict[str, Any]:
    charts = list(at.get("vega_lite_chart"))
    assert len(charts) == 1, "not one chart on the page"
    spec: dict[str, Any] = json.loads(charts[0].proto.spec)
    return spec


def _rules(panel: dict[str, Any]) -> list[str]:
    """The rules of a panel: 'x' for a vertical one (a value), 'y' for a horizontal (a limit)."""
    return [
        "x" if "x" in layer["encoding"] else "y"
        for layer in panel["layer"]
        if layer["mark"]["type"] == "rule"
    ]


def test_the_page_leads_with_the_decision_and_draws_the_slo_line(h200_lab: Path) -> None:
    """Issue 37 item 4: the H200 search ran each value once: the page says undecided (138
    leads, tried once: no interval yet), never "chosen 138"; each value's SLOs are tried once."""
    at = open_page("app_pages/7_Searches.py")
    text = page_text(at).replace("\\", "")  # as read: without Markdown's escapes
    heads = [s.value for s in at.subheader]
    assert heads[0] == "concurrency: undecided (138 leads)", heads
    assert "chosen 138" not in text
    assert "undecided: no value has 2 runs (tried once: no interval yet); leader 138" in text
    assert "SLOs: p99 TTFT <= 1000 ms" in text
    assert "knee at 138" in text
    values = frame_with(at, "runs")
    assert list(values["runs"]) == [1] * 6 and set(values["SLOs"]) == {"tried once"}
    assert set(values["95 % interval"]) == {"tried once: no interval yet"}
    spec = _chart_spec(at)
    subtitle = spec["title"]["subtitle"]
    assert "chosen by the search" not in subtitle and "SLO: p99 TTFT <= 1000 ms" in subtitle
    throughput, ttft = spec["concat"]  # one panel a row (fits 1024 px)
    assert ttft["title"] == "p99 TTFT vs value", ttft["title"]
    assert _rules(throughput) == ["x"] and sorted(_rules(ttft)) == ["x", "y"]  # the knee
    steps = frame_with(at, "why")
    assert list(steps["concurrency"]) == ["64", "213", "363", "512", "138", "101"]
    assert steps["why"].iloc[4] == "refine: between the best so far 64 and its neighbour 213"
    assert list(steps["chosen"]) == [False] * 6
    assert list(steps["this run under the SLOs"]) == [True, False, False, False, True, True]
    labels = [b.label for b in at.button]
    assert "Confirm: run 138 vs 16 with repeats until decided" in labels, labels
    assert "Confirm: run 138 vs 101 with repeats until decided" in labels, labels


def test_confirm_plans_an_auto_repeats_experiment_and_starts_its_runner(
    h200_lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[Path, int]] = []
    monkeypatch.setattr("ui.searches.spawn_runner", lambda p, e: started.append((p, e)) or 1)
    at = open_page("app_pages/7_Searches.py")
    at.button(key="srchs_confirm").click().run()
    assert not at.exception, at.exception
    assert any("Experiment 8 started" in s.value for s in at.success), page_text(at)
    assert started == [(h200_lab, 8)]
    with connect(h200_lab, readonly=True) as db:
        exp: dict[str, Any] = queries.get_experiment(db, 8)
    assert exp["name"] == "confirm search 1: concurrency 138 vs 16"
    assert exp["values"] == [16, 138] and exp["repeats_auto"] == 1
    assert exp["base_url"] == "http://127.0.0.1:55363" and exp["workload"]["input_len"] == 512
    at.run()  # the search now names its confirming experiment (queued: nothing run yet)
    assert "confirm: 138 vs 16 on output throughput: not run yet" in page_text(at).replace("\\", "")


def test_a_lab_without_searches_says_so(fresh_db: Path) -> None:
    at = open_page("app_pages/7_Searches.py")
    assert "No search yet" in page_text(at)
    assert not at.button


def test_the_confirms_result_is_in_the_header_and_the_choice_line(
    lab_home: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37 item 4: after `search --confirm` (two values tried once, then the leader against
    its rival until decided: fake server, attached), the page's header and choice line carry the
    confirm's result (it used to say "chosen ... from one run" above an undecided confirm)."""
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        flags = "--param concurrency --range 1:4 --coarse 2 --budget-runs 2 --model m "
        flags += f"--base-url {srv.base_url} --num-requests 8 --input-len 4 --output-len 3 "
        flags += f"--num-warmups 0 --db {db} --confirm --json"
        done = tuning_cli(["search", *flags.split()], lab_home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    choice, confirm = result["choice"], result["confirm"]
    assert choice["source"] == "confirm"
    monkeypatch.setenv("TUNING_LAB_DB", str(db))
    at = open_page("app_pages/7_Searches.py")
    text = page_text(at).replace("\\", "")
    head = at.subheader[0].value
    if choice["outcome"] == "chosen":
        assert head == f"concurrency: chosen {choice['chosen']} (confirmed)", head
    else:
        assert head.startswith("concurrency: tie 1, 4 after the confirm"), head
    line = next(m.value for m in at.markdown if "confirm experiment" in m.value)
    assert line.replace("\\", "") == choice["line"], (line, choice["line"])
    assert line.replace("\\", "").startswith("undecided: no value has 2 runs")
    assert f"confirm experiment {confirm['experiment_id']}" in text
