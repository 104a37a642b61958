"""Issue 40 item 4, Compare's "Server starts": on the committed H100 cudagraph example
(compilation-config FULL_AND_PIECEWISE vs NONE) every chart row read "compilation-conf…" (the
value first, cut), the legend was one cut row, there was no total, and "compile cache: miss hit"
was unexplained. Rows name the run first, the table's columns are the short side headings, a
total row sums the phases, the cache states are in words with a line saying what they mean, and
the legend has whole names beside the bars and each bar ends in its total."""

from __future__ import annotations

import shutil
from pathlib import Path

from store import snapshot
from tests.apptest import open_page, page_text
from ui.startup import CACHE, CACHE_WORDS, TOTAL, cache_words, with_total

REPO = Path(__file__).resolve().parents[2]
CUDAGRAPH = REPO / "examples" / "h200" / "lab-h100-cudagraph.db.xz"


def test_the_total_sums_the_phases_and_the_cache_states_read_as_words() -> None:
    table = [
        {"phase": "API server up", "a": 3.0, "b": 4.0},
        {"phase": "torch.compile", "a": 10.0, "b": None},
        {"phase": CACHE, "a": "miss hit", "b": "?"},
    ]
    rows = with_total(table, ["a", "b"])
    assert [r["phase"] for r in rows] == ["API server up", "torch.compile", TOTAL, CACHE]
    assert rows[2]["a"] == 13.0 and rows[2]["b"] == 4.0
    assert rows[3]["a"] == f"{CACHE_WORDS['miss']} · {CACHE_WORDS['hit']}"
    assert rows[3]["b"] == "not known"
    assert cache_words(None) is None


def test_compare_server_starts_name_the_runs_and_explain_the_cache(fresh_db: Path) -> None:
    shutil.copy(snapshot.expanded(CUDAGRAPH), fresh_db)
    at = open_page("app_pages/4_Compare.py")
    assert not at.exception, at.exception
    frame = next(d.value for d in at.dataframe if "phase" in d.value.columns)
    sides = [c for c in frame.columns if c != "phase"]
    assert not any(c.startswith("compilation-config") for c in sides), sides
    assert sides[0].endswith("(baseline)")
    phases = list(frame["phase"])
    assert phases[-2:] == [TOTAL, CACHE]
    for side in sides:
        seconds = [float(v.removesuffix(" s")) for v in frame[side][:-2] if v != "—"]
        total = float(frame[side].iloc[-2].removesuffix(" s"))
        assert abs(total - sum(seconds)) < 0.1 * len(seconds), (side, total, seconds)
        assert frame[side].iloc[-1].startswith(("miss (compiled", "hit (loaded"))
    assert "A miss compiled the model" in page_text(at)
    (chart,) = [c for c in at.get("vega_lite_chart") if "Server start" in c.proto.spec]
    spec, data = chart.proto.spec, chart.proto.SerializeToString()  # rows travel as Arrow
    assert "run 1 · ".encode() in data and b"compilation-config=" not in data
    assert '"labelLimit": 0' in spec and '"orient": "right"' in spec  # whole names, beside
    assert '"total"' in spec  # each bar's total at its end
