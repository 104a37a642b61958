"""Readers for workload data files: JSONL, ShareGPT JSON, CSV and Mooncake-format traces.

Every reader streams its file line by line (a ShareGPT array in chunks, one entry at a time) within
the caps of `tuning.measure.traffic.bounded` (file, line, entry, nesting), refuses a file larger
than
`MAX_DATA_BYTES` before reading it, hashes the bytes it reads (the data digest that
goes into the fingerprint), and raises `DataError` naming the file, line and field for the first
problem it meets. A reader returns only after the whole file checked out: nothing half-read leaks.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuning.measure.traffic.bounded import (
    MAX_DATA_BYTES,
    MAX_ENTRY_CHARS,
    Reader,
    check_text,
    nesting_error,
    parse_json,
    resolve_path,
    too_deep,
)
from tuning.measure.traffic.errors import DataError
from tuning.measure.traffic.spec import MOONCAKE_BLOCK, Source

__all__ = ["MAX_DATA_BYTES", "resolve_path"]  # re-exported: callers knew them from here
_USER_ROLES = frozenset({"human", "user"})
_ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})


@dataclass(frozen=True)
class FileTurn:
    """One user message and the answer the file recorded for it (None when the file has none)."""

    user: str
    answer: str | None


@dataclass(frozen=True)
class FileConversation:
    """A file entry: optional system prompt, its turns, and the output length it asks for (the
    last turn's `output_len`/`max_tokens`, or a CSV output column), with its 1-based line."""

    line: int
    turns: tuple[FileTurn, ...]
    system: str | None = None
    output_len: int | None = None


@dataclass(frozen=True)
class Conversations:
    """What a JSONL, ShareGPT or CSV file holds. `skipped` counts ShareGPT entries with fewer than
    two messages, which vLLM's sampler drops before shuffling."""

    path: str
    digest: str
    items: tuple[FileConversation, ...]
    skipped: int = 0


@dataclass(frozen=True)
class TraceEntry:
    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True)
class Trace:
    path: str
    digest: str
    entries: tuple[TraceEntry, ...]


def _json_line(path: Path, number: int, line: str, last: bool) -> Any:
    try:
        return parse_json(path, line, number)
    except json.JSONDecodeError as exc:
        truncated = last and not line.endswith("\n") or "Unterminated" in exc.msg
        why = "truncated JSON (the line ends inside the object)" if truncated else "invalid JSON"
        raise DataError(path, f"{why}: {exc.msg} at column {exc.colno}", line=number) from None


def _json_lines(reader: Reader) -> Iterator[tuple[int, dict[str, Any]]]:
    lines = _with_last(reader.lines())
    for (number, line), last in lines:
        if not line.strip():
            continue
        value = _json_line(reader.path, number, line, last)
        if not isinstance(value, dict):
            raise DataError(reader.path, "each line must be a JSON object", line=number)
        yield number, value


def _with_last(items: Iterator[tuple[int, str]]) -> Iterator[tuple[tuple[int, str], bool]]:
    """Each item with a flag saying whether it is the last one (one item of look-ahead)."""
    prev = next(items, None)
    while prev is not None:
        nxt = next(items, None)
        yield prev, nxt is None
        prev = nxt


def _positive_int(path: Path, line: int, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(path, f"must be a positive integer, got {value!r}", line=line, field=name)
    return value


def _text(path: Path, line: int, name: str, value: Any) -> str:
    if isinstance(value, list):  # OpenAI content parts: keep the text ones
        parts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type") == "text"]
        value = "".join(p for p in parts if isinstance(p, str)) if parts else None
    if not isinstance(value, str) or not value:
        raise DataError(path, f"must be non-empty text, got {value!r:.60}", line=line, field=name)
    return check_text(path, line, name, value)


def _turns(
    path: Path, line: int, name: str, messages: list[tuple[str, str]]
) -> tuple[str | None, tuple[FileTurn, ...]]:
    """(role, text) pairs -> system prompt and turns; each user message opens a turn.

    Real chat logs are untidy: two messages of one role in a row are joined with a newline, and
    answers before the first user message are dropped. A conversation with no user message is
    an error.
    """
    system: list[str] = []
    turns: list[FileTurn] = []
    for k, (role, text) in enumerate(messages):
        if role == "system":
            if turns:
                raise DataError(path, f"message {k}: a system message after a turn", line, name)
            system.append(text)
        elif role == "user":
            if turns and turns[-1].answer is None:
                turns[-1] = FileTurn(turns[-1].user + "\n" + text, None)
            else:
                turns.append(FileTurn(text, None))
        elif turns:
            prev = turns[-1].answer
            turns[-1] = FileTurn(turns[-1].user, text if prev is None else prev + "\n" + text)
    if not turns:
        raise DataError(path, "a conversation with no user turn", line=line, field=name)
    return ("\n".join(system) or None), tuple(turns)


def read_jsonl(path: str | Path, max_bytes: int = MAX_DATA_BYTES) -> Conversations:
    """One request per line: `prompt` (text) or `messages` (OpenAI chat), and optionally
    `output_len` or `max_tokens`."""
    reader = Reader(path, max_bytes)
    items: list[FileConversation] = []
    for number, obj in _json_lines(reader):
        p = reader.path
        if "messages" in obj:
            msgs = obj["messages"]
            if not isinstance(msgs, list):
                raise DataError(p, "must be a list of messages", line=number, field="messages")
            pairs = []
            for k, m in enumerate(msgs):
                role = m.get("role") if isinstance(m, dict) else None
                if role not in ("system", "user", "assistant", "developer"):
                    raise DataError(
                        p, f"message {k} has role {role!r}", line=number, field="messages"
                    )
                text = _text(p, number, f"messages[{k}].content", m.get("content"))
                pairs.append(("system" if role == "developer" else role, text))
            system, turns = _turns(p, number, "messages", pairs)
        elif "prompt" in obj:
            system, turns = None, (FileTurn(_text(p, number, "prompt", obj["prompt"]), None),)
        else:
            raise DataError(p, "missing: each line needs 'prompt' or 'messages'", number, "prompt")
        out = next((k for k in ("output_len", "max_tokens") if k in obj), None)
        output_len = None if out is None else _positive_int(p, number, out, obj[out])
        items.append(FileConversation(number, turns, system, output_len))
    if not items:
        raise DataError(reader.path, "the file is empty (no JSON lines)")
    return Conversations(str(reader.path), reader.digest(), tuple(items))


def _array_entries(reader: Reader) -> Iterator[tuple[int, Any]]:
    """(line, value) for each element of a top-level JSON array, decoded one at a time."""
    decoder = json.JSONDecoder()
    chunks = reader.chunks()
    buf, pos, line, eof = "", 0, 1, False

    def more() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        nxt = next(chunks, None)
        if nxt is None:
            eof = True
            return False
        buf, pos = buf[pos:] + nxt, 0
        return True

    def skip_ws() -> str:
        nonlocal pos, line
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                line += buf[pos] == "\n"
                pos += 1
            if pos < len(buf) or not more():
                return buf[pos] if pos < len(buf) else ""

    if skip_ws() != "[":
        raise DataError(reader.path, "a ShareGPT file must be a JSON array of objects", line)
    pos += 1
    first = True
    while True:
        ch = skip_ws()
        if ch == "]" and first:
            break
        if not first:
            if ch == "]":
                break
            if ch != ",":
                why = "truncated JSON: the file ends inside the array" if not ch else "expected ','"
                raise DataError(reader.path, why, line=line)
            pos += 1
            skip_ws()
        first = False
        while True:
            if too_deep(buf, pos, whole=False):
                raise nesting_error(reader.path, line)
            try:
                value, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                if len(buf) - pos > MAX_ENTRY_CHARS or not more():
                    cap = f"invalid JSON (or an entry over {MAX_ENTRY_CHARS // 2**20} MiB)"
                    why = "truncated JSON" if eof else cap
                    raise DataError(reader.path, f"{why}: {exc.msg}", line=line) from None
        yield line, value
        line += buf.count("\n", pos, end)
        pos = end
    pos += 1  # the closing bracket
    if skip_ws():
        raise DataError(reader.path, "unexpected text after the JSON array", line=line)


def read_sharegpt(path: str | Path, max_bytes: int = MAX_DATA_BYTES) -> Conversations:
    """A JSON array of `{"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]}`."""
    reader = Reader(path, max_bytes)
    p = reader.path
    items: list[FileConversation] = []
    skipped = 0
    for number, entry in _array_entries(reader):
        if not isinstance(entry, dict) or "conversations" not in entry:
            raise DataError(p, "missing: each entry needs a list", number, "conversations")
        conv = entry["conversations"]
        if not isinstance(conv, list):
            raise DataError(p, "must be a list of messages", number, "conversations")
        pairs = []
        for k, m in enumerate(conv):
            role = m.get("from") if isinstance(m, dict) else None
            if role not in _USER_ROLES | _ASSISTANT_ROLES | {"system"}:
                raise DataError(p, f"message {k} has role {role!r}", number, f"conversations[{k}]")
            text = _text(p, number, f"conversations[{k}].value", m.get("value"))
            pairs.append(
                (
                    "user"
                    if role in _USER_ROLES
                    else "system"
                    if role == "system"
                    else "assistant",
                    text,
                )
            )
        system, turns = _turns(p, number, "conversations", pairs)
        if len(conv) < 2:
            skipped += 1
            continue
        items.append(FileConversation(number, turns, system))
    if not items:
        raise DataError(p, "the file is empty (no conversation with two messages)")
    return Conversations(str(p), reader.digest(), tuple(items), skipped)


def read_csv(
    path: str | Path,
    prompt_column: str = "prompt",
    output_column: str | None = None,
    max_bytes: int = MAX_DATA_BYTES,
) -> Conversations:
    """A CSV with a header row; one request per row from `prompt_column` (and `output_column`)."""
    reader = Reader(path, max_bytes)
    p = reader.path
    rows = csv.reader(line for _, line in reader.lines())
    items: list[FileConversation] = []
    try:
        header = next(rows, None)
        if header is None:
            raise DataError(p, "the file is empty")
        for col in (prompt_column, output_column):
            if col is not None and col not in header:
                cols = ", ".join(header)
                raise DataError(p, f"missing column; the header has: {cols}", 1, col)
        at = header.index(prompt_column)
        out_at = None if output_column is None else header.index(output_column)
        for row in rows:
            number = rows.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise DataError(p, f"{len(row)} cells for {len(header)} columns", number)
            output_len = None
            if out_at is not None:
                cell = row[out_at].strip()
                value: Any = int(cell) if cell.lstrip("-").isdigit() else cell
                output_len = _positive_int(p, number, str(output_column), value)
            turn = FileTurn(_text(p, number, prompt_column, row[at]), None)
            items.append(FileConversation(number, (turn,), None, output_len))
    except csv.Error as exc:
        raise DataError(p, f"bad CSV: {exc}", line=rows.line_num) from None
    if not items:
        raise DataError(p, "the file has a header but no rows")
    return Conversations(str(p), reader.digest(), tuple(items))


def read_trace(
    path: str | Path, block_size: int = MOONCAKE_BLOCK, max_bytes: int = MAX_DATA_BYTES
) -> Trace:
    """Mooncake's trace format: JSONL of `timestamp` (ms), `input_length`, `output_length` and
    optional `hash_ids` (one id per `block_size` tokens of the prompt; equal ids, equal tokens)."""
    reader = Reader(path, max_bytes)
    p = reader.path
    entries: list[TraceEntry] = []
    last_ts = -math.inf
    for number, obj in _json_lines(reader):
        for name in ("timestamp", "input_length", "output_length"):
            if name not in obj:
                raise DataError(p, "missing field", line=number, field=name)
        ts = obj["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise DataError(p, f"must be a number of ms, got {ts!r}", number, "timestamp")
        if ts < 0:
            raise DataError(p, f"must be >= 0 ms, got {ts!r}", number, "timestamp")
        if ts < last_ts:
            raise DataError(
                p, f"timestamps must not decrease: {ts} comes after {last_ts}", number, "timestamp"
            )
        last_ts = ts
        n_in = _positive_int(p, number, "input_length", obj["input_length"])
        n_out = _positive_int(p, number, "output_length", obj["output_length"])
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) for h in ids
        ):
            raise DataError(p, "must be a list of integers", number, "hash_ids")
        if len(ids) > math.ceil(n_in / block_size):
            raise DataError(
                p,
                f"{len(ids)} blocks of {block_size} tokens for an input of {n_in} tokens",
                number,
                "hash_ids",
            )
        entries.append(TraceEntry(number, float(ts), n_in, n_out, tuple(ids)))
    if not entries:
        raise DataError(p, "the file is empty (no JSON lines)")
    return Trace(str(p), reader.digest(), tuple(entries))


def read_source(source: Source, max_bytes: int = MAX_DATA_BYTES) -> Conversations | Trace:
    """The reader for a spec's source kind (not for synthetic sources, which have no file)."""
    if source.path is None:
        raise DataError("<none>", f"a {source.kind} source has no file to read")
    if source.kind == "jsonl":
        return read_jsonl(source.path, max_bytes)
    if source.kind == "sharegpt":
        return read_sharegpt(source.path, max_bytes)
    if source.kind == "csv":
        return read_csv(source.path, source.prompt_column, source.output_column, max_bytes)
    return read_trace(source.path, source.block_size, max_bytes)
