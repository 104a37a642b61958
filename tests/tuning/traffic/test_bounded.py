"""Hostile or odd data files: each cap refuses in one line naming the file and line (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuning.measure.traffic import bounded
from tuning.measure.traffic.bounded import MAX_NESTING, read_prefix
from tuning.measure.traffic.errors import DataError
from tuning.measure.traffic.sources import read_csv, read_jsonl, read_sharegpt, read_trace

DEEP = "[" * 100_000 + "]" * 100_000


def test_an_over_long_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """A JSONL line six times the cap: refused at its line, read no further than the cap."""
    import tracemalloc

    path = tmp_path / "long.jsonl"
    good = json.dumps({"prompt": "hi", "output_len": 4})
    line = json.dumps({"prompt": "x" * (6 * bounded.MAX_LINE_BYTES)})
    path.write_text(f"{good}\n{line}\n{good}\n")
    del line
    tracemalloc.start()
    try:
        with pytest.raises(DataError) as exc:
            read_jsonl(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (exc.value.line, str(exc.value)) == (
        2,
        f"{path}, line 2: a line over the 4 MiB limit for one line (one request); "
        "is this a JSONL file?",
    )
    # the cap's worth (and the reader's buffer growing to it), not the 24 MiB line
    assert peak < 3 * bounded.MAX_LINE_BYTES, peak


def test_the_line_cap_is_checked_while_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small cap, so the test shows the readline bound: line 3 of a trace, line 2 of a CSV."""
    monkeypatch.setattr(bounded, "MAX_LINE_BYTES", 100)
    trace = tmp_path / "t.jsonl"
    row = '{"timestamp": 0, "input_length": 5, "output_length": 5}\n'
    trace.write_text(
        row
        + row
        + '{"timestamp": 1, "input_length": 5, "output_length": 5, '
        + '"hash_ids": ['
        + "0, " * 40
        + "0]}\n"
    )
    with pytest.raises(DataError, match="a line over the") as exc:
        read_trace(trace)
    assert exc.value.line == 3
    csv = tmp_path / "c.csv"
    csv.write_text("prompt\n" + "y" * 200 + "\n")
    with pytest.raises(DataError, match="a line over the") as exc2:
        read_csv(csv)
    assert exc2.value.line == 2


@pytest.mark.parametrize("where", ["jsonl", "sharegpt"])
def test_deeply_nested_json_is_one_line(tmp_path: Path, where: str) -> None:
    if where == "jsonl":
        path = tmp_path / "deep.jsonl"
        path.write_text('{"prompt": "ok"}\n{"prompt": ' + DEEP + "}\n")
        reader, line = read_jsonl, 2
    else:
        path = tmp_path / "deep.json"
        ok = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
        path.write_text("[\n" + json.dumps(ok) + ",\n" + DEEP + "\n]")
        reader, line = read_sharegpt, 3
    with pytest.raises(DataError) as exc:
        reader(path)
    assert exc.value.line == line
    assert f"JSON nested deeper than {MAX_NESTING} levels" in str(exc.value)


def test_nesting_within_the_cap_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    nested = {"prompt": "p", "extra": json.loads("[" * 60 + "]" * 60)}
    path.write_text(json.dumps(nested) + "\n" + '{"prompt": "[[[[[ in text is not nesting"}\n')
    assert len(read_jsonl(path).items) == 2


def test_a_lone_surrogate_is_refused_at_load(tmp_path: Path) -> None:
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text('{"prompt": "fine"}\n{"prompt": "bad \\ud800 text"}\n')
    with pytest.raises(DataError) as exc:
        read_jsonl(jsonl)
    assert (exc.value.line, exc.value.field) == (2, "prompt")
    assert "lone surrogate \\ud800 at character 4" in str(exc.value)
    assert "refused, not cleaned" in str(exc.value)
    sharegpt = tmp_path / "s.json"
    turns = [{"from": "human", "value": "q"}, {"from": "gpt", "value": "\udc00"}]
    sharegpt.write_text(json.dumps([{"conversations": turns}]))
    with pytest.raises(DataError) as exc2:
        read_sharegpt(sharegpt)
    assert (exc2.value.line, exc2.value.field) == (1, "conversations[1].value")


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    """What Excel writes: the BOM is skipped (and still part of the hashed bytes)."""
    bom = b"\xef\xbb\xbf"
    csv = tmp_path / "excel.csv"
    csv.write_bytes(bom + b"prompt,n\nhello there,3\n")
    data = read_csv(csv, output_column="n")
    assert [c.turns[0].user for c in data.items] == ["hello there"]
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_bytes(bom + b'{"prompt": "hi", "output_len": 2}\n')
    assert read_jsonl(jsonl).items[0].output_len == 2
    sharegpt = tmp_path / "b.json"
    turns = [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]
    sharegpt.write_bytes(bom + json.dumps([{"conversations": turns}]).encode())
    assert len(read_sharegpt(sharegpt).items) == 1
    assert read_prefix(jsonl).startswith("{")


def test_a_spec_file_is_capped_and_nesting_bounded(tmp_path: Path) -> None:
    from tuning.measure.traffic.spec import read_spec

    big = tmp_path / "big.json"
    big.write_text('{"name": "' + "n" * (2 * 1024 * 1024) + '"}')
    with pytest.raises(DataError, match=r"over the 1024 KiB limit for a workload spec") as exc:
        read_spec(big)
    assert exc.value.path == str(big)
    deep = tmp_path / "deep.json"
    deep.write_text('{"name": ' + DEEP + "}")
    with pytest.raises(DataError, match=f"{deep}: JSON nested deeper than 64"):
        read_spec(deep)
    odd = tmp_path / "odd.json"
    odd.write_text('{"name": "x\\ud800"}')
    with pytest.raises(DataError, match=f"{odd}: name: a lone surrogate"):
        read_spec(odd)
    trace = tmp_path / "neg.jsonl"
    trace.write_text('{"timestamp": -5, "input_length": 5, "output_length": 5}\n')
    with pytest.raises(DataError, match="must be >= 0 ms") as exc2:
        read_trace(trace)
    assert (exc2.value.line, exc2.value.field) == (1, "timestamp")
