"""A compact Compare page (AppTest on the seeded dashboard lab): the verdict per metric comes first,
one line each, with the whole verdict (the words of tuning.compare, never cut); the explanations
(the verdict rule, noise floor, failed runs, SLO fields, definitions) are folded in expanders; the
table's verdict columns are wide."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from streamlit.testing.v1 import AppTest

from store import connect
from tests.apptest import open_page
from tuning.compare.present import verdict_text
from tuning.compare.selection import gather_runs
from tuning.present.model import build_model
from ui.common import md_escape
from ui.compare import CELL_PADDING_PX, VERDICT_PX_PER_CHAR


def walk(node: Any, ancestors: tuple[str, ...] = ()) -> Iterator[tuple[Any, tuple[str, ...]]]:
    """Every element in page order with the types of the blocks around it."""
    yield node, ancestors
    kids = getattr(node, "children", None) or {}
    for key in sorted(kids):
        yield from walk(kids[key], (*ancestors, getattr(node, "type", "")))


def texts(at: AppTest) -> list[tuple[str, str, tuple[str, ...]]]:
    out = []
    for node, ancestors in walk(at._tree):
        kind = getattr(node, "type", "")
        value = getattr(node, "value", None) if kind != "dataframe" else "<table>"
        if isinstance(value, str):
            out.append((kind, value, ancestors))
    return out


def test_compare_page_puts_the_verdicts_first(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py")
    shown = texts(at)
    order = [value for _, value, _ in shown]
    summary = order.index("#### Verdict per metric")
    assert summary < order.index("#### Side by side") < order.index("#### Charts")
    lines = "\n".join(v for k, v, _ in shown if k == "markdown")
    with connect(dashboard_lab["db"]) as db:
        exp = dashboard_lab["done_exp"]
        runs, named = gather_runs(db, run_ids=(), experiment_ids=[exp])
        comparison = build_model(
            db,
            experiment_ids=[exp],
            runs=runs,
            experiments=named,
            baseline_ids=dashboard_lab["runs"][0::3],
        ).comparison
    assert comparison.candidates
    for side in comparison.candidates:
        for metric in comparison.metrics:
            change = comparison.changes.get((side.label, metric.key))
            if change is not None:  # the whole verdict, on the metric's own line
                whole = md_escape(verdict_text(change, comparison.confidence, metric.unit))
                line = next(x for x in lines.splitlines() if f"**{metric.label}**" in x)
                assert whole in lines and line.startswith("- "), (metric.key, whole)


def test_compare_page_folds_the_explanations(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py")
    folded = ("Verdict:", "Noise floor", "**Goodput SLOs**", "Runs without a measurement")
    for kind, value, ancestors in texts(at):
        if any(word in value for word in folded):
            assert "expander" in ancestors, (kind, value[:60])
    table = next(df for df in at.dataframe if "metric" in df.value.columns)
    config = json.loads(table.proto.columns)
    verdicts = [c for c in table.value.columns if c.startswith("verdict ")]
    assert verdicts
    for column in verdicts:  # wide enough for its longest verdict: none is cut
        longest = max(len(str(t)) for t in table.value[column])
        width = config[column]["width"]
        assert width >= longest * VERDICT_PX_PER_CHAR + 2 * CELL_PADDING_PX
