"""ui.tables without a page: values in the cell's unit, rounded to its precision; a page's extra
columns kept as they are; an empty table keeps its columns."""

from __future__ import annotations

from ui.tables import BY_KEY, HEALTH, KV_USAGE, cell_value, run_column_config, run_frame


def test_values_are_sent_in_their_unit_and_precision() -> None:
    assert cell_value(BY_KEY["output_throughput"], 19352.0796) == 19352
    assert cell_value(BY_KEY["mean_ttft_ms"], 1049.3834) == 1049.4
    assert cell_value(BY_KEY["peak_tree_rss_bytes"], 3 * 2**30 + 12345) == 3.0
    assert cell_value(BY_KEY["kv_cache_tokens"], None) is None
    assert (
        cell_value(BY_KEY["mean_ttft_ms"], "n/a") is None
        and cell_value(BY_KEY["value"], "16") == "16"
    )


def test_frame_badges_progress_and_extra_columns() -> None:
    runs = [{"id": 1, "peak_kv_cache_usage_perc": 0.4567, "output_throughput": 182.4}]
    frame = run_frame(runs, ("id", HEALTH, KV_USAGE, "output_throughput"), lambda r: {"x": 7})
    assert list(frame.columns) == ["id", HEALTH, KV_USAGE, "output_throughput", "x"]
    assert frame.loc[0, HEALTH] == ["not checked"] and frame.loc[0, KV_USAGE] == 45.7
    config = run_column_config(frame)
    assert config["output_throughput"]["label"] == "output"
    assert config["x"]["type_config"]["format"] == "%,.0f"  # a page's own number: separators
    empty = run_frame([], ("id", "param"))
    assert list(empty.columns) == ["id", "param"] and len(empty) == 0


def test_a_pages_own_number_columns_get_separators() -> None:
    """Issue 23 (smaller): Runs showed "393216" (KV tokens predicted, a page's own column) beside
    "393,216" (KV capacity); every number column now has separators."""
    import pandas as pd

    from ui.tables import run_column_config

    frame = pd.DataFrame(
        {"KV tokens predicted": [393216, None], "prediction error %": [1.25, 0.5], "ok": [1, 0]}
    )
    frame["ok"] = frame["ok"].astype(bool)
    config = run_column_config(frame)
    assert config["KV tokens predicted"]["type_config"]["format"] == "%,.0f"
    assert config["prediction error %"]["type_config"]["format"] == "%,.2f"
    assert "ok" not in config
