"""Issue 40: the pages speak words a user knows. Each page, opened with AppTest on the seeded lab
(with a finished search and a plan in it, its failed starts stored as the engine classifies them:
out_of_memory), shows no metric key of the catalog (`output_throughput`: its label is "output
throughput"), no run failure kind (`out_of_memory`: "out of memory") and no "None" / "nan", in
its text, its tables' visible headers and cells, or its widgets' labels and choices. Words of
vLLM itself (`vllm:num_preemptions_total` in a formula) are names a vLLM user knows and are not
keys of the lab's catalog."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from store import connect, queries, repo
from tests.apptest import TEXT_ELEMENTS, open_page, with_query
from tests.factories import add_plan
from tests.factories_search import add_search
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.experiment.outcome import LAB_KINDS

# a failed start's kinds (tuning.engine.server) and the lab's own (tuning.experiment.outcome)
FAILURE_KINDS = {"out_of_memory", "invalid_argument", "engine_init", "engine_died", *LAB_KINDS}
KEYS = re.compile(
    r"(?<![\w:])("
    + "|".join([k for k in METRIC_BY_KEY if "_" in k] + sorted(FAILURE_KINDS))
    + r")\b"
)
MISSING = re.compile(r"\b(None|nan|NaN)\b")
PAGES = [
    ("app_pages/0_Home.py", None),
    ("app_pages/1_New_experiment.py", None),
    ("app_pages/1_New_experiment.py", ("mode", "search")),  # the latest search's decision log
    ("app_pages/2_Runs.py", None),
    ("app_pages/3_Live.py", None),
    ("app_pages/4_Compare.py", ("experiment", 1)),
    ("app_pages/5_History.py", None),
    ("app_pages/6_Settings.py", None),
    ("app_pages/7_Searches.py", ("search", 1)),
    ("app_pages/4_Compare.py", ("search", 1)),  # the search's runs, its chart's caption
]
WIDGETS = ("selectbox", "multiselect", "radio", "button", "checkbox", "toggle", "text_input")


def _shown_frame(df: Any) -> list[str]:
    """A dataframe as the page draws it: its visible columns' headers (their labels) and cells."""
    config = json.loads(df.proto.columns or "{}")
    order = list(df.proto.column_order)
    frame = df.value
    out = []
    for col in frame.columns:
        conf = config.get(str(col)) or {}
        if conf.get("hidden") or (order and str(col) not in order):
            continue
        out.append(str(conf.get("label") or col))
        out += [str(v) for v in frame[col] if isinstance(v, str)]
    return out


def shown_words(at: AppTest) -> list[str]:
    """Every piece of text the page shows: text elements, tables, widgets' labels and choices."""
    parts = [str(getattr(e, "value", "")) for k in TEXT_ELEMENTS for e in getattr(at, k)]
    for df in at.dataframe:
        parts += _shown_frame(df)
    for kind in WIDGETS:
        for w in getattr(at, kind):
            parts.append(str(w.label))
            parts += [str(o) for o in getattr(w, "options", [])]
    for m in at.metric:
        parts += [str(m.label), str(m.value)]
    return parts


@pytest.mark.parametrize(("page", "query"), PAGES)
def test_no_page_shows_a_metric_key_or_none(
    dashboard_lab: dict[str, Any], page: str, query: tuple[str, Any] | None
) -> None:
    runs = add_search(dashboard_lab["db"])["runs"]
    add_plan(dashboard_lab["db"])
    with connect(dashboard_lab["db"]) as db:  # as the engine's failed start is classified
        for rid in dashboard_lab["runs"]:
            if queries.get_run(db, rid)["status"] == "failed":
                repo.update_run(db, rid, failure_kind="out_of_memory")

    def setup(at: AppTest) -> None:
        if query:
            with_query(*query)(at)
        if query and query[0] == "search":  # a search's link to Compare names its runs
            at.query_params["runs"] = ",".join(map(str, runs))

    at = open_page(page, setup)
    if query and query[0] == "mode":
        at.radio(key="new_mode").set_value(query[1]).run()
        assert not at.exception, at.exception
    bad = [p for p in shown_words(at) if KEYS.search(p) or MISSING.search(p)]
    assert not bad, bad
