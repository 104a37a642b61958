"""The run health section's memory facts (ui.health): what the engine did not report, said once."""

from __future__ import annotations


def test_missing_engine_facts_are_named_once() -> None:
    """Issue 23 (smaller): a run without engine facts said "not reported by the engine" eight
    times; each missing fact now shows "—", and one line names them, grouped by why."""
    from ui.health import NOT_REPORTED, _memory_lines

    lines = _memory_lines({"kv_cache_tokens": 393216, "peak_tree_rss_bytes": 3 * 2**30})
    text = "\n".join(lines)
    assert text.count(NOT_REPORTED) == 1 and "393,216 tokens" in text and "3 GiB" in text
    why = "KV memory, max concurrency, block size, weights (its start log had no such line)"
    assert why in lines[-1]
    assert "peak GPU (no GPU or NVML here)" in lines[-1]
