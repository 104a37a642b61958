"""Issue 23, item 1 on Compare (AppTest): the page opens on the latest experiment with two or more
values (not a one-run search step), and the headline decision is the first element under the
title and the selectors; the verdict list below shows the primary metrics in full and folds every
other metric into one line, for information, not corrected. On a copy of the committed H200
decisions example (experiments 2-7 are the one-value steps of a concurrency search; experiment 1
is kv-cache-memory-bytes 1G vs 16G)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from store import connect, queries, snapshot
from tests.apptest import open_page
from tests.factories import add_experiment
from ui.compare import default_experiment

REPO = Path(__file__).resolve().parents[2]
DECISIONS = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"
# The selectors at the top of the page: which runs, which sides, the SLO fields and the margin.
SELECTORS = {"cmp_experiment", "cmp_sides", "cmp_margin"}


def _keys(node: Any) -> set[str]:
    """The keys of a node and of every element inside it."""
    out = {str(getattr(node, "key", None) or "")}
    for child in (getattr(node, "children", None) or {}).values():
        out |= _keys(child)
    return out


def _markdown(node: Any, folds: bool = True) -> list[str]:
    """The markdown inside a node, in page order; without what expanders fold when not `folds`."""
    if getattr(node, "type", "") == "markdown":
        return [str(node.value)]
    if not folds and getattr(node, "type", "") == "expander":
        return []
    kids = getattr(node, "children", None) or {}
    return [t for k in sorted(kids) for t in _markdown(kids[k], folds)]


def test_compare_opens_on_the_latest_experiment_with_two_values_headline_first(
    fresh_db: Path,
) -> None:
    shutil.copy(snapshot.expanded(DECISIONS), fresh_db)
    at = open_page("app_pages/4_Compare.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="cmp_experiment").value == 1  # not 7, the latest one-run step
    top = [at.main.children[k] for k in sorted(at.main.children)]
    last_selector = max(i for i, node in enumerate(top) if _keys(node) & SELECTORS)
    after = top[last_selector + 1]
    assert getattr(after, "key", None) == "cmp_headline", [getattr(n, "key", None) for n in top]
    lines = _markdown(after)
    assert lines[0] == (
        "- kv-cache-memory-bytes 16 GiB vs 1 GiB: objective output throughput +212.6 % "
        "(better); guards p99 TTFT -93.4 % (better), p99 TPOT -21.7 % (undecided); 19 other "
        "metrics for information, not corrected"
    )
    # the verdict list below: the primaries in full, every other metric folded in one line
    expanders = {e.key: e for e in at.expander if getattr(e, "key", None)}
    assert "cmp_info_0" in expanders
    assert "**mean TPOT**" in "".join(_markdown(expanders["cmp_info_0"]))
    summary = next(n for n in top if getattr(n, "key", None) == "cmp_summary")
    unfolded = "\n".join(_markdown(summary, folds=False))
    assert "**p99 TPOT**" in unfolded and "undecided" in unfolded  # a guard: in full
    assert "**mean TPOT**" not in unfolded  # for information: folded away


def test_the_default_experiment(fresh_db: Path) -> None:
    """Newest first: a done experiment with two values beats a newer one-value step and a newer
    running one; then one with two values; then the latest done; else the latest."""
    with connect(fresh_db) as db:
        old = add_experiment(db, values=[2, 16], status="done")
        add_experiment(db, values=[4, 8], status="running")
        add_experiment(db, values=[138], status="done")
        experiments = queries.list_experiments(db)  # newest first: 138, then 4/8, then 2/16
    assert experiments[default_experiment(experiments)]["id"] == old
    assert default_experiment(experiments[:2]) == 1  # the running 4/8 before a one-value step
    assert default_experiment(experiments[:1]) == 0  # only a one-value step: the latest done
    assert default_experiment([{"values": [1], "status": "failed"}, *experiments[:1]]) == 1
    assert default_experiment([{"values": [1], "status": "failed"}]) == 0
