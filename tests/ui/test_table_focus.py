"""Issue 40 item 4, wide Compare tables: at 1440 px a three-value table was 2,071 px wide in a
978 px frame and the candidate's value scrolled away. The candidate in view's value and verdict
are pinned beside the metric, its columns come first, and "differences only" keeps the metrics
a verdict found better or worse (AppTest on the committed memory-wall example: three values)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from store import snapshot
from tests.apptest import open_page
from tuning.compare.present import TONE_CSS
from ui.table_focus import decided_rows, focus_order, pinned_columns

REPO = Path(__file__).resolve().parents[2]
WALL = REPO / "examples" / "h200" / "lab-h200-memory-wall.db.xz"
COLUMNS = [
    "metric",
    "Δ 8 GiB",
    "verdict 8 GiB",
    "to decide 8 GiB",
    "Δ 16 GiB",
    "verdict 16 GiB",
    "to decide 16 GiB",
    "1 GiB (baseline)",
    "8 GiB",
    "16 GiB",
    "better",
    "role",
]


def test_the_candidate_in_view_comes_first_and_is_pinned() -> None:
    heads = ["8 GiB", "16 GiB"]
    order = focus_order(COLUMNS, heads, "16 GiB")
    assert order[:6] == [
        "metric",
        "16 GiB",
        "verdict 16 GiB",
        "Δ 16 GiB",
        "1 GiB (baseline)",
        "to decide 16 GiB",
    ]
    assert sorted(order) == sorted(COLUMNS)  # nothing lost, nothing twice
    assert pinned_columns(heads, "16 GiB") == ["metric", "16 GiB", "verdict 16 GiB"]
    assert pinned_columns(["8 GiB"], "8 GiB") == ["metric"]  # one candidate: as it was


def test_differences_only_keeps_rows_a_verdict_decided() -> None:
    text = pd.DataFrame({"metric": ["a", "b", "c"], "verdict x": ["better", "equiv", "worse"]})
    css = pd.DataFrame(
        {"metric": ["", "", ""], "verdict x": [TONE_CSS["better"], "", TONE_CSS["worse"]]}
    )
    assert decided_rows(text, css).tolist() == [True, False, True]


def _table(at: object) -> tuple[pd.DataFrame, dict[str, object], list[str]]:
    (df,) = [d for d in at.dataframe if "metric" in d.value.columns and "role" in d.value.columns]  # type: ignore[attr-defined]
    config = json.loads(df.proto.columns)
    return df.value, config, list(df.proto.column_order)


def test_the_three_value_table_pins_the_value_and_verdict_in_view(fresh_db: Path) -> None:
    shutil.copy(snapshot.expanded(WALL), fresh_db)
    at = open_page("app_pages/4_Compare.py")
    assert not at.exception, at.exception
    focus = at.selectbox(key="cmp_focus")
    assert len(focus.options) == 2  # two candidates against the baseline
    first = focus.value
    frame, config, order = _table(at)
    assert order[:3] == ["metric", first, f"verdict {first}"]
    for column in order[:3]:
        assert config[column]["pinned"] is True, (column, config[column])
    other = [o for o in focus.options if o != first][0]
    focus.set_value(other).run()
    _, config, order = _table(at)
    assert order[:3] == ["metric", other, f"verdict {other}"]
    assert config[other]["pinned"] is True and not config.get(first, {}).get("pinned")
    at.toggle(key="cmp_diff_only").set_value(True).run()
    assert not at.exception, at.exception
    fewer, _, _ = _table(at)
    assert 0 < len(fewer) < len(frame)
    verdicts = fewer[[c for c in fewer.columns if c.startswith("verdict ")]]
    assert verdicts.apply(lambda r: r.str.contains(r"\b(?:better|worse)\b").any(), axis=1).all()
