"""Issue 37 item 7: a comparison whose sides' chunks carry different numbers of tokens says so
next to ITL (the table, the CLI's text, the page's summary lines), judges ITL per token, and never
judges the tokens a chunk themselves (no direction is better)."""

from __future__ import annotations

from tests.factories import stream_interval_runs
from tuning.cli.compare import format_comparison
from tuning.compare.chunks import chunk_note, chunks_differ, tokens_per_chunk
from tuning.compare.comparison import build_comparison
from tuning.compare.present import table_rows


def test_chunk_size_differs_is_said_next_to_itl_and_time_per_token_is_better() -> None:
    cmp = build_comparison(stream_interval_runs(1.0, 15.06), [1, 2])
    side = cmp.candidates[0]
    assert tokens_per_chunk(side) == 15.06 and chunks_differ(cmp, side)
    note = chunk_note(cmp, side)
    assert note is not None and "chunk size differs (1 → 15.1 tokens a chunk)" in note
    # the verdicts stand as they are; per token is judged, the tokens a chunk never are
    assert cmp.changes[(side.label, "mean_itl_ms")].verdict == "worse"
    assert cmp.changes[(side.label, "mean_itl_per_token_ms")].verdict == "better"
    assert cmp.changes[(side.label, "mean_tpot_ms")].verdict == "better"
    assert "mean_tokens_per_chunk" not in {m.key for m in cmp.metrics}
    # the table: beside each ITL row (per chunk), not beside ITL per token nor TPOT
    names = {row[0].text: row[0] for row in table_rows(cmp)[1:]}
    assert "mean ITL (ms) · chunk size differs" in names
    assert "p99 ITL (ms) · chunk size differs" in names
    assert note in names["mean ITL (ms) · chunk size differs"].title
    assert "mean ITL per token (ms)" in names and "mean TPOT (ms)" in names
    # the CLI's text: on the ITL lines, and only there
    lines = format_comparison(cmp).splitlines()
    itl = [x for x in lines if x.strip().startswith("mean ITL  ")]  # the label, padded
    assert len(itl) == 1 and "worse" in itl[0] and note in itl[0]
    per_token = [x for x in lines if x.strip().startswith("mean ITL per token")]
    assert len(per_token) == 1 and "better" in per_token[0] and "chunk size" not in per_token[0]
    assert sum("chunk size differs" in x for x in lines) == 2  # mean and p99 ITL


def test_the_json_export_carries_each_sides_tokens_a_chunk_and_the_note() -> None:
    import json

    from tuning.present.export import comparison_json

    data = json.loads(comparison_json(build_comparison(stream_interval_runs(1.0, 15.06), [1, 2])))
    chunks = data["chunks"]
    assert list(chunks["tokens_per_chunk"].values()) == [1.0, 15.06]
    assert chunks["note"].startswith("chunk size differs (1 → 15.1 tokens a chunk)")
    same = json.loads(comparison_json(build_comparison(stream_interval_runs(1.0, 1.0), [1, 2])))
    assert same["chunks"]["note"] is None


def test_same_chunks_or_unknown_chunks_say_nothing() -> None:
    for base, cand in ((1.0, 1.0), (0.99, 1.0), (None, 15.0), (None, None)):
        cmp = build_comparison(stream_interval_runs(base, cand), [1, 2])
        assert chunk_note(cmp) is None, (base, cand)
        assert not any("chunk size" in row[0].text for row in table_rows(cmp))
        assert "chunk size" not in format_comparison(cmp)
