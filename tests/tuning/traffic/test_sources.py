"""Data file readers: the shipped files read, and every kind of bad file fails with file, line and
field before anything is returned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuning.measure.traffic.errors import DataError
from tuning.measure.traffic.sources import (
    Conversations,
    read_csv,
    read_jsonl,
    read_sharegpt,
    read_source,
    read_trace,
    resolve_path,
)
from tuning.measure.traffic.spec import Source

WORKLOADS = Path(__file__).resolve().parents[3] / "workloads"


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def error(exc: pytest.ExceptionInfo[DataError]) -> tuple[int | None, str | None, str]:
    return exc.value.line, exc.value.field, str(exc.value)


def test_shipped_files_read() -> None:
    chat = read_sharegpt(WORKLOADS / "chat-500.sharegpt.json")
    assert len(chat.items) == 500 and chat.skipped == 0 and len(chat.digest) == 64
    assert chat.items[0].line == 2 and chat.items[-1].line == 501  # one entry a line
    assert any(len(c.turns) > 2 for c in chat.items)
    trace = read_trace(WORKLOADS / "mooncake-small.jsonl")
    assert len(trace.entries) == 300
    ts = [e.timestamp_ms for e in trace.entries]
    assert ts == sorted(ts)
    assert len(read_jsonl(WORKLOADS / "prompts-40.jsonl").items) == 40
    rows = read_csv(WORKLOADS / "prompts-40.csv", output_column="output_len")
    assert len(rows.items) == 40 and all(r.output_len for r in rows.items)


def test_relative_names_resolve_in_the_workloads_folder() -> None:
    assert resolve_path("mooncake-small.jsonl") == WORKLOADS / "mooncake-small.jsonl"
    data = read_source(Source("trace", "mooncake-small.jsonl"))
    assert not isinstance(data, Conversations)


def test_jsonl_prompt_and_messages(tmp_path: Path) -> None:
    lines = [
        {"prompt": "hello", "output_len": 5},
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hey"},
                {"role": "user", "content": [{"type": "text", "text": "again"}]},
            ],
            "max_tokens": 7,
        },
        {"prompt": "no length"},
    ]
    path = write(tmp_path, "p.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    items = read_jsonl(path).items
    assert items[0].turns[0].user == "hello" and items[0].output_len == 5
    assert items[1].system == "be brief" and items[1].output_len == 7
    assert [(t.user, t.answer) for t in items[1].turns] == [("hi", "hey"), ("again", None)]
    assert items[2].output_len is None and items[2].line == 3


def test_truncated_jsonl(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", '{"prompt": "a", "output_len": 3}\n{"prompt": "b", "outp')
    with pytest.raises(DataError) as exc:
        read_jsonl(path)
    line, _, msg = error(exc)
    assert line == 2 and "truncated JSON" in msg and str(path) in msg


def test_truncated_sharegpt(tmp_path: Path) -> None:
    text = (WORKLOADS / "chat-500.sharegpt.json").read_text()
    path = write(tmp_path, "t.json", text[: len(text) // 2])
    with pytest.raises(DataError, match="truncated JSON") as exc:
        read_sharegpt(path)
    assert exc.value.line is not None and exc.value.line > 100


def test_missing_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "m.jsonl", '{"prompt": "a"}\n{"text": "b"}\n')
    with pytest.raises(DataError, match="needs 'prompt' or 'messages'") as exc:
        read_jsonl(path)
    assert (exc.value.line, exc.value.field) == (2, "prompt")
    conv = [
        {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
        {"id": "x"},
    ]
    path = write(tmp_path, "m.json", json.dumps(conv, indent=1))
    with pytest.raises(DataError) as exc2:
        read_sharegpt(path)
    assert exc2.value.field == "conversations" and exc2.value.line == 14  # where it opens
    path = write(tmp_path, "m.json", json.dumps([{"conversations": [{"from": "human"}]}]))
    with pytest.raises(DataError, match="non-empty text") as exc3:
        read_sharegpt(path)
    assert exc3.value.field == "conversations[0].value"
    lines = [
        '{"timestamp": 0, "input_length": 10, "output_length": 5}',
        '{"timestamp": 5, "output_length": 5}',
    ]
    path = write(tmp_path, "tr.jsonl", "\n".join(lines))
    with pytest.raises(DataError) as exc4:
        read_trace(path)
    assert (exc4.value.line, exc4.value.field) == (2, "input_length")
    path = write(tmp_path, "c.csv", "text,n\nhello,3\n")
    with pytest.raises(DataError, match="missing column; the header has: text, n") as exc5:
        read_csv(path)
    assert (exc5.value.line, exc5.value.field) == (1, "prompt")
    path = write(tmp_path, "c.csv", 'prompt,n\nhello,3\n"",4\n')
    with pytest.raises(DataError, match="non-empty text") as exc6:
        read_csv(path, output_column="n")
    assert exc6.value.line == 3


@pytest.mark.parametrize("reader", [read_jsonl, read_sharegpt, read_csv, read_trace])
def test_binary_file(tmp_path: Path, reader: object) -> None:
    path = write(tmp_path, "b.bin", b'{"prompt": "x"}\n' + bytes(range(256)) * 4)
    with pytest.raises(DataError, match="binary file") as exc:
        reader(path)  # type: ignore[operator]
    assert exc.value.line == 2


def test_not_utf8_is_called_binary(tmp_path: Path) -> None:
    path = write(tmp_path, "l.jsonl", '{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        read_jsonl(path)


@pytest.mark.parametrize("reader", [read_jsonl, read_sharegpt, read_csv, read_trace])
@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file(tmp_path: Path, reader: object, text: str) -> None:
    path = write(tmp_path, "e.txt", text)
    with pytest.raises(DataError, match="empty|no rows|JSON array"):
        reader(path)  # type: ignore[operator]


def test_empty_array_and_header_only(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="empty"):
        read_sharegpt(write(tmp_path, "a.json", "[ ]\n"))
    with pytest.raises(DataError, match="header but no rows"):
        read_csv(write(tmp_path, "h.csv", "prompt\n"))


def test_conversation_with_no_user_turn(tmp_path: Path) -> None:
    good = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
    bad = {"conversations": [{"from": "system", "value": "s"}, {"from": "gpt", "value": "a"}]}
    path = write(tmp_path, "n.json", "[\n" + json.dumps(good) + ",\n" + json.dumps(bad) + "\n]")
    with pytest.raises(DataError, match="no user turn") as exc:
        read_sharegpt(path)
    assert (exc.value.line, exc.value.field) == (3, "conversations")
    line = json.dumps({"messages": [{"role": "assistant", "content": "hi"}]})
    with pytest.raises(DataError, match="no user turn"):
        read_jsonl(write(tmp_path, "n.jsonl", line + "\n"))


def test_untidy_conversations_are_joined(tmp_path: Path) -> None:
    conv = {
        "conversations": [
            {"from": "gpt", "value": "welcome"},
            {"from": "human", "value": "a"},
            {"from": "human", "value": "b"},
            {"from": "gpt", "value": "c"},
        ]
    }
    items = read_sharegpt(write(tmp_path, "u.json", json.dumps([conv]))).items
    assert [(t.user, t.answer) for t in items[0].turns] == [("a\nb", "c")]


def test_sharegpt_skips_entries_with_one_message_like_vllm(tmp_path: Path) -> None:
    one = {"conversations": [{"from": "human", "value": "alone"}]}
    two = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
    data = read_sharegpt(write(tmp_path, "s.json", json.dumps([one, two])))
    assert len(data.items) == 1 and data.skipped == 1


def test_trace_with_decreasing_timestamps(tmp_path: Path) -> None:
    lines = [
        {"timestamp": t, "input_length": 600, "output_length": 9, "hash_ids": [1, 2]}
        for t in (0, 50, 40)
    ]
    path = write(tmp_path, "d.jsonl", "\n".join(json.dumps(x) for x in lines))
    with pytest.raises(DataError, match="must not decrease: 40 comes after 50") as exc:
        read_trace(path)
    assert (exc.value.line, exc.value.field) == (3, "timestamp")


def test_trace_with_too_many_blocks(tmp_path: Path) -> None:
    line = {"timestamp": 0, "input_length": 600, "output_length": 9, "hash_ids": [1, 2, 3]}
    with pytest.raises(DataError, match="3 blocks of 512 tokens for an input of 600"):
        read_trace(write(tmp_path, "b.jsonl", json.dumps(line)))


def test_a_200_mb_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:  # sparse: no disk, no time
        f.truncate(200 * 1024 * 1024)
    with pytest.raises(DataError, match=r"200\.0 MiB, over the 100 MiB limit"):
        read_jsonl(path)


def test_large_files_stream_in_chunks(tmp_path: Path) -> None:
    """A 3 MB ShareGPT array whose entries straddle the 1 MiB read chunks parses entry by entry."""
    entry = {
        "conversations": [
            {"from": "human", "value": "q" * 5000},
            {"from": "gpt", "value": "a" * 5000},
        ]
    }
    path = write(tmp_path, "big.json", json.dumps([entry] * 300))
    data = read_sharegpt(path)
    assert len(data.items) == 300 and data.items[0].turns[0].answer == "a" * 5000
    with pytest.raises(DataError, match="over the 1 MiB limit"):
        read_sharegpt(path, max_bytes=1024 * 1024)


def test_nothing_is_returned_from_a_half_good_file(tmp_path: Path) -> None:
    good = [json.dumps({"prompt": f"p{i}", "output_len": 4}) for i in range(50)]
    path = write(tmp_path, "h.jsonl", "\n".join([*good, '{"prompt": 3}']))
    with pytest.raises(DataError) as exc:
        read_jsonl(path)
    assert (exc.value.line, exc.value.field) == (51, "prompt")
