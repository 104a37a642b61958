"""Reading a user's file with every size bounded before it is parsed.

The caps are named here so that a refusal can quote them: bytes per file (`MAX_DATA_BYTES`, checked
from the file's size before a byte is read, and again while reading in case it grows), bytes per
line (`MAX_LINE_BYTES`, read with a bounded `readline`, so a 50 MB line costs 4 MiB, not the whole
line), bytes per ShareGPT entry, and JSON nesting (`MAX_NESTING`, counted before `json` recurses,
so `[[[[...]]]]` is a one-line refusal and never a RecursionError; the scan is core.json_depth's,
shared with every other JSON the lab reads from outside). A UTF-8 BOM (what Excel writes) is
skipped; a lone surrogate in text (`"\\ud800"`) is refused, not cleaned, so nothing sent or hashed
later can fail to encode.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.json_depth import MAX_NESTING as MAX_NESTING  # re-exported: the one scan, named here too
from core.json_depth import nesting_words
from core.json_depth import too_deep as too_deep
from tuning.measure.traffic.errors import DataError

# Larger files are refused: sample them down first. A stated limit keeps a stray 10 GB upload from
# filling memory (the records themselves are kept).
MAX_DATA_BYTES = 100 * 1024 * 1024
# One line of a JSONL/CSV/trace file, and one ShareGPT entry: a 1M-token prompt is about 4 MB.
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_ENTRY_CHARS = MAX_LINE_BYTES
_CHUNK = 1024 * 1024
_BOM = codecs.BOM_UTF8
WORKLOADS_DIR = Path(__file__).resolve().parents[3] / "workloads"


def resolve_path(path: str | Path) -> Path:
    """A relative path is looked up in the working directory, then in the lab's workloads/."""
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists() and (WORKLOADS_DIR / p).exists():
        return WORKLOADS_DIR / p
    return p


def nesting_error(path: Path, line: int | None = None) -> DataError:
    return DataError(path, nesting_words(MAX_NESTING), line=line)


def check_text(path: Path, line: int | None, field: str, text: str) -> str:
    """`text` as is, or DataError when it holds a lone surrogate (JSON `"\\ud800"`): it cannot be
    encoded to send, hash or store, so the lab refuses it here rather than guess a replacement."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = f"{ord(text[exc.start]):04x}"
        raise DataError(
            path,
            f"a lone surrogate \\u{bad} at character {exc.start} is not valid Unicode "
            "(refused, not cleaned): fix the text",
            line=line,
            field=field,
        ) from None
    return text


def parse_json(path: Path, text: str, line: int | None = None) -> Any:
    """`json.loads` after the nesting check; a JSONDecodeError is left to the caller to word."""
    if too_deep(text):
        raise nesting_error(path, line)
    return json.loads(text)


class Reader:
    """A data file's bytes: size limit, NUL-byte (binary) check, UTF-8 (a BOM skipped), sha256."""

    def __init__(self, path: str | Path, max_bytes: int = MAX_DATA_BYTES) -> None:
        self.path = resolve_path(path)
        self.max_bytes = max_bytes
        self.hasher = hashlib.sha256()
        self._read = 0
        if not self.path.is_file():
            raise DataError(self.path, "no such file")
        size = self.path.stat().st_size
        if size > max_bytes:
            raise self._too_big(size)
        if size == 0:
            raise DataError(self.path, "the file is empty")

    def _too_big(self, size: int) -> DataError:
        return DataError(
            self.path,
            f"the file is {size / 2**20:.1f} MiB, over the {self.max_bytes / 2**20:.0f} MiB "
            "limit for workload data; sample it down first",
        )

    def _count(self, raw: bytes, line: int) -> None:
        """Hash `raw`; refuse a NUL byte, or a file that grew past the limit while being read."""
        self.hasher.update(raw)
        nul = raw.find(b"\0")
        if nul >= 0:
            raise DataError(
                self.path,
                f"a binary file (NUL byte at offset {self._read + nul}); expected UTF-8 text",
                line=line + raw[:nul].count(b"\n"),
            )
        self._read += len(raw)
        if self._read > self.max_bytes:
            raise self._too_big(self._read)

    def chunks(self) -> Iterator[str]:
        """The text in chunks of about 1 MiB (for a ShareGPT array, which may be one long line)."""
        decoder = codecs.getincrementaldecoder("utf-8-sig")()
        lines = 1
        with self.path.open("rb") as f:
            while True:
                raw = f.read(_CHUNK)
                final = not raw
                self._count(raw, lines)
                try:
                    text = decoder.decode(raw, final=final)
                except UnicodeDecodeError:
                    raise DataError(
                        self.path, "not UTF-8 text (a binary file?)", line=lines
                    ) from None
                lines += raw.count(b"\n")
                if text:
                    yield text
                if final:
                    return

    def lines(self, max_line: int | None = None) -> Iterator[tuple[int, str]]:
        """(1-based line number, line with its newline) for every line; each read with a bounded
        readline, and the first line over `max_line` bytes (default `MAX_LINE_BYTES`) refused
        before the rest of it is read."""
        max_line = MAX_LINE_BYTES if max_line is None else max_line
        number = 0
        with self.path.open("rb") as f:
            head = f.read(_CHUNK)  # a binary file is called one before its first line is parsed
            nul = head.find(b"\0")
            if nul >= 0:
                raise DataError(
                    self.path,
                    f"a binary file (NUL byte at offset {nul}); expected UTF-8 text",
                    line=1 + head[:nul].count(b"\n"),
                )
            f.seek(0)
            while raw := f.readline(max_line + 1):
                number += 1
                if len(raw) > max_line:
                    raise DataError(
                        self.path,
                        f"a line over the {max_line / 2**20:g} MiB limit for one line "
                        "(one request); is this a JSONL file?",
                        line=number,
                    )
                self._count(raw, number)
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise DataError(
                        self.path, "not UTF-8 text (a binary file?)", line=number
                    ) from None
                yield number, text

    def digest(self) -> str:
        return self.hasher.hexdigest()


def read_prefix(path: str | Path, limit: int = 64 * 1024) -> str:
    """At most `limit` bytes from the start of a file, as text (a BOM skipped, bad bytes
    replaced): enough to sniff a format without reading a whole file; '' when unreadable."""
    try:
        with resolve_path(path).open("rb") as f:
            raw = f.read(limit)
    except OSError:
        return ""
    return raw.removeprefix(_BOM).decode("utf-8", errors="replace")


def read_small_json(path: str | Path, max_bytes: int, what: str) -> Any:
    """A whole JSON file that is small by nature (a workload spec): size checked before reading,
    nesting before parsing; DataError naming the file otherwise."""
    p = resolve_path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise DataError(
                p, f"{size / 1024:.0f} KiB, over the {max_bytes // 1024} KiB limit for {what}"
            )
        with p.open("rb") as f:
            raw = f.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise DataError(p, f"over the {max_bytes // 1024} KiB limit for {what}")
        text = raw.removeprefix(_BOM).decode("utf-8")
    except OSError as exc:
        raise DataError(p, f"cannot read {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataError(p, f"not UTF-8 text: not {what}") from None
    try:
        return parse_json(p, text)
    except ValueError as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(p, f"not JSON: not {what} ({exc})") from None
