"""Tables people read (AppTest on the seeded dashboard lab): every number of the Runs table is sent
in its unit and rounded to the unit's precision, drawn with a format of that precision and the
unit in the cell; KV usage is a bar, health and config are badges; the Compare table's cells show
no more digits than the unit's precision."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.apptest import frame_with, open_page
from ui.tables import PRECISION

FORMAT = re.compile(r"^%,\.(\d)f(?: (.+))?$")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.(\d+))?")


def _decimals(value: float) -> int:
    text = repr(float(value))
    return 0 if text.endswith(".0") else len(text.split(".")[1])


def test_runs_table_formats_numbers_by_unit(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/2_Runs.py")
    table = next(df for df in at.dataframe if "output_throughput" in df.value.columns)
    config = json.loads(table.proto.columns)
    frame = table.value
    numeric = 0
    for key, col in config.items():
        kind = col.get("type_config", {})
        if kind.get("type") != "number":
            continue
        digits, unit = FORMAT.match(kind["format"]).groups()  # type: ignore[union-attr]
        assert int(digits) <= PRECISION[unit or "count"], (key, kind["format"])
        values = frame[key].dropna()
        assert all(_decimals(v) <= int(digits) for v in values), (key, list(values))
        numeric += 1
    assert numeric >= 10
    assert config["output_throughput"]["type_config"]["format"] == "%,.0f tok/s"
    assert config["mean_ttft_ms"]["type_config"]["format"] == "%,.1f ms"
    assert config["peak_tree_rss_bytes"]["type_config"]["format"] == "%,.2f GiB"
    assert config["peak_kv_cache_usage_perc"]["type_config"]["type"] == "progress"
    assert frame["peak_kv_cache_usage_perc"].dropna().between(0, 100).all()
    assert config["health"]["type_config"]["type"] == "multiselect"
    assert {tuple(x) for x in frame["health"]} >= {("ok",), ("not checked",)}
    assert "not reported by the engine" in config["kv_cache_tokens"]["help"]
    assert table.proto.placeholder == "—"


def test_compare_table_cells_keep_the_units_precision(dashboard_lab: dict[str, Any]) -> None:
    at = open_page("app_pages/4_Compare.py")
    table = frame_with(at, "metric")
    checked = 0
    for column in table.columns[1:]:
        for cell in table[column]:
            for match in NUMBER.finditer(str(cell)):
                shown = match.group(0)
                digits = len(match.group(1) or "")
                after = str(cell)[match.end() :].lstrip()
                if after.startswith("%") or " … " in str(cell):
                    assert digits <= PRECISION["%"], (column, cell)
                else:
                    assert digits <= 2, (column, cell)
                    if abs(float(shown.replace(",", ""))) >= 100:
                        assert digits == 0, (column, cell)
                checked += 1
    assert checked > 50
