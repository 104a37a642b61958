"""Issue 23, item 8: the report opens with cards, as GuideLLM's does: model, hardware, engine and
vLLM version, workload, and the runs and experiments it covers; escaped and scrubbed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from core.redact import REDACTED
from store import connect, repo
from tests.factories import SECRET_ENV, run_row, seed_lab
from tuning.present.report import build_report
from tuning.present.report_cards import card_items, cards_section


def _cards(page: str) -> dict[str, str]:
    return dict(
        re.findall(r'data-card="([a-z]+)"><div class="k">[a-z]+</div><div class="v">([^<]*)<', page)
    )


def test_the_report_opens_with_model_hardware_vllm_and_workload(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    info = seed_lab(path, values=(2, 16), repeats=2, with_failed=False, with_secrets=False)
    page = build_report(path, experiment_ids=[info["experiment_id"]], kinds=("throughput",))
    header = page.split("</header>", 1)[0]
    assert _cards(header) == {
        "model": "tiny",
        "hardware": "cpu-test",
        "engine": "vLLM 0.32.0 (engine embedded-cpu)",
        "workload": "input 64 / output 16 tokens, concurrency 8, 24 requests",
        "covers": f"4 runs · experiment {info['experiment_id']}",
    }
    # the report's charts carry the same words as an exported chart does
    charts = page.split('<section id="charts">', 1)[1]
    assert "model tiny · cpu-test · vLLM 0.32.0" in charts


def test_cards_say_mixed_and_are_escaped_and_scrubbed(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    info = seed_lab(path, values=(2, 16), repeats=1, with_failed=False, with_secrets=False)
    rid = info["run_ids"][0]
    with connect(path) as db:
        repo.update_run(db, rid, model=f"<b>evil</b> {SECRET_ENV}", hardware="gpu-box")
    cards = _cards(build_report(path, run_ids=info["run_ids"], kinds=()))
    assert cards["model"] == f"&lt;b&gt;evil&lt;/b&gt; {REDACTED} / tiny"  # in the runs' order
    assert cards["hardware"] == "gpu-box / cpu-test"
    assert cards["covers"] == f"2 runs · experiment {info['experiment_id']}"


def test_runs_without_an_experiment_say_so() -> None:
    items: dict[str, Any] = dict(card_items([{**run_row(7), "experiment_id": None}]))
    assert items["covers"] == "1 run · no experiment"
    assert 'id="cards"' in cards_section([run_row(7)], [])
