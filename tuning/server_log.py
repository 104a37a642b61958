"""Read a server's log in linear time and bounded memory: the one reader every log parser uses.

A log is the engine's to write: one line can be 50 MB, the file 200 MB. So a log is read in chunks
of `CHUNK` bytes, each line is cut to `LINE_CAP` bytes before any pattern sees it (the rest of a
long line is skipped, never kept), vLLM's process prefix (`(EngineCore_DP0 pid=1235) `) is split
off each line, and the tail is read by seeking from the end. One kind of line may be longer:
vLLM's `non-default args: {...}`, whose JSON values (a user's `--compilation-config`) are checked
against what was asked, is kept up to `ARGS_CAP`. A reader given a deadline stops there and says
so (`Lines.complete`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LINE_CAP = 4096  # bytes of a line any pattern sees
ARGS_CAP = 256 * 1024  # the 'non-default args' line (found in its first PROBE bytes)
ARGS_MARKER = b"non-default args: "
PROBE = 256
CHUNK = 1 << 20
TAIL_BYTES = 256 * 1024  # the most a tail reads, however long its lines
CUT_MARK = " [...]"

# vLLM's log format: `{VLLM_LOGGING_PREFIX}(%(process_name)s pid=%(process)d) LEVEL ...`; the
# optional leading text is the user's VLLM_LOGGING_PREFIX.
_PREFIX = re.compile(r"[^(\n]{0,64}?\((\w+) pid=(\d{1,9})\) ?")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line as a parser sees it: cut to its cap, with vLLM's process prefix split off."""

    text: str  # the whole (capped) line
    role: str | None  # `EngineCore_DP0`; None: not a line of vLLM's logger
    pid: int | None
    message: str  # the text after the prefix (the whole text when there is none)
    cut: bool  # longer than its cap: the end is missing


def log_line(raw: bytes, cut: bool = False) -> LogLine:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    m = _PREFIX.match(text)
    if m is None:
        return LogLine(text, None, None, text, cut)
    return LogLine(text, m.group(1), int(m.group(2)), text[m.end() :], cut)


class LineSplitter:
    """Bytes in, whole lines out, each cut to its cap; a line still being written holds at most
    its cap in memory, whatever its length."""

    def __init__(self, cap: int = LINE_CAP, args_cap: int = ARGS_CAP) -> None:
        self.cap = cap
        self.args_cap = max(cap, args_cap)
        self._line = bytearray()
        self._cut = False

    def _room(self) -> int:
        limit = self.cap
        if len(self._line) >= self.cap and ARGS_MARKER in self._line[:PROBE]:
            limit = self.args_cap
        return limit - len(self._line)

    def _keep(self, data: bytes | memoryview, start: int, end: int) -> None:
        room = self._room()
        if room > 0:
            self._line += data[start : min(end, start + room)]
            if end - start > room and self._room() > 0:  # the cap widened: keep on
                self._keep(data, start + room, end)
                return
        if end - start > max(room, 0):
            self._cut = True

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """The lines `data` completes, as (capped bytes, cut)."""
        out: list[tuple[bytes, bool]] = []
        view = memoryview(data)
        start, size = 0, len(data)
        while start < size:
            nl = data.find(b"\n", start)
            if nl < 0:
                self._keep(view, start, size)
                break
            if not self._line and not self._cut and nl - start <= self.cap:
                out.append((data[start:nl], False))  # the common case: one slice
            else:
                self._keep(view, start, nl)
                out.append((bytes(self._line), self._cut))
                self._line.clear()
                self._cut = False
            start = nl + 1
        return out

    def end(self) -> list[tuple[bytes, bool]]:
        """The last line, when the log does not end in a newline."""
        if not self._line and not self._cut:
            return []
        last = [(bytes(self._line), self._cut)]
        self._line.clear()
        self._cut = False
        return last


class Lines:
    """The lines of a log file (or a text), read once from the start, until `deadline`
    (`time.monotonic()`); `complete` is False when the deadline cut the read short."""

    def __init__(self, source: Path | str, deadline: float | None = None) -> None:
        self.source = source
        self.deadline = deadline
        self.complete = True
        self.bytes_read = 0

    def __iter__(self) -> Iterator[LogLine]:
        splitter = LineSplitter()
        if isinstance(self.source, str):
            data = self.source.encode("utf-8", "replace")
            self.bytes_read = len(data)
            for raw, cut in [*splitter.feed(data), *splitter.end()]:
                yield log_line(raw, cut)
            return
        try:
            with open(self.source, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    self.bytes_read += len(chunk)
                    for raw, cut in splitter.feed(chunk):
                        yield log_line(raw, cut)
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        self.complete = False
                        return
        except OSError:
            return  # no log (yet): nothing said
        for raw, cut in splitter.end():
            yield log_line(raw, cut)


def tail(path: Path, lines: int, max_bytes: int = TAIL_BYTES) -> str:
    """The last `lines` lines of a log, read from its end (never more than `max_bytes`), each cut
    to LINE_CAP and marked with CUT_MARK where it was (at its start for a line that began before
    what was read); "" when there is no file."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return ""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    first = max(0, len(parts) - lines) if lines > 0 else len(parts)
    out = []
    for i in range(first, len(parts)):
        part = parts[i]
        if i == 0 and start > 0:  # its start was not read
            out.append(CUT_MARK.strip() + " " + _text(part[-LINE_CAP:]))
        elif len(part) > LINE_CAP:
            out.append(_text(part[:LINE_CAP]) + CUT_MARK)
        else:
            out.append(_text(part))
    return "\n".join(out)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")
