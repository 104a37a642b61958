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
from collections.abc import Iterable, Iterator
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


@dataclass(frozen=True, slots=True)
class Block:
    """Whole lines of a log, `\\n` between them: a chunk's complete lines (each no longer than a
    chunk), or one line that spanned chunks, already cut to its cap (`cut`: it was longer)."""

    data: bytes
    cut: bool = False


def line_cap(data: bytes, start: int = 0) -> int:
    """The cap of the line that starts at `start` of `data`: ARGS_CAP for vLLM's non-default
    args line (its marker within the first PROBE bytes), else LINE_CAP."""
    return ARGS_CAP if ARGS_MARKER in data[start : start + PROBE] else LINE_CAP


def cap_line(raw: bytes) -> tuple[bytes, bool]:
    """A line cut to its cap, and whether it was cut."""
    if len(raw) <= LINE_CAP:
        return raw, False
    cap = line_cap(raw)
    return (raw[:cap], True) if len(raw) > cap else (raw, False)


def block_lines(block: Block) -> Iterator[tuple[bytes, bool]]:
    """Each line of a block, cut to its cap."""
    if block.cut:
        yield block.data, True
        return
    for raw in block.data.split(b"\n"):
        yield cap_line(raw)


def marked_lines(
    block: Block, anchors: Iterable[bytes], within: bytes | None = None
) -> Iterator[tuple[bytes, bool]]:
    """The lines of a block holding one of `anchors` within their cap, in order. The anchors are
    found in the whole block at once (bytes.find), so a line without one costs no Python step;
    `within` is searched instead of the block when given (its lowercase, for anchors in any case:
    the same length, the same lines)."""
    data = block.data
    hay = data if within is None else within
    anchors = tuple(anchors)
    starts = set()
    for anchor in anchors:
        i = hay.find(anchor)
        while i >= 0:
            starts.add(hay.rfind(b"\n", 0, i) + 1)
            end = hay.find(b"\n", i)
            i = hay.find(anchor, end) if end >= 0 else -1  # one hit a line is enough
    for start in sorted(starts):
        end = data.find(b"\n", start)
        raw, cut = cap_line(data[start : end if end >= 0 else len(data)])
        if any(anchor in hay[start : start + len(raw)] for anchor in anchors):
            yield raw, cut or block.cut


def last_line(block: Block) -> bytes:
    """The block's last line that is not blank, cut to its cap (b"" when there is none)."""
    data = block.data.rstrip()
    return cap_line(data[data.rfind(b"\n") + 1 :])[0]


class Blocks:
    """Bytes in, blocks of whole lines out (`feed`); a line still being written is held only up
    to its cap in memory, however long it grows."""

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

    def _keep(self, data: bytes) -> None:
        room = self._room()
        if room > 0:
            self._line += data[:room]
            if len(data) > room and self._room() > 0:  # the cap widened: keep on
                self._keep(data[room:])
                return
        if len(data) > max(room, 0):
            self._cut = True

    def _carried(self) -> Block:
        block = Block(bytes(self._line), self._cut)
        self._line.clear()
        self._cut = False
        return block

    def feed(self, data: bytes) -> list[Block]:
        """The blocks of whole lines that `data` completes."""
        first = data.find(b"\n")
        if first < 0:
            self._keep(data)
            return []
        out, body = [], 0
        if self._line or self._cut:
            self._keep(data[:first])
            out.append(self._carried())
            body = first + 1
        last = data.rfind(b"\n")
        if body <= last:
            out.append(Block(data[body:last]))
        self._keep(data[last + 1 :])
        return out

    def end(self) -> list[Block]:
        """The last line, when the log does not end in a newline."""
        return [self._carried()] if self._line or self._cut else []


class Lines:
    """A log file (or a text) as blocks of whole lines, read once from the start in chunks until
    `deadline` (`time.monotonic()`); `complete` is False when the deadline cut the read short."""

    def __init__(self, source: Path | str, deadline: float | None = None) -> None:
        self.source = source
        self.deadline = deadline
        self.complete = True
        self.bytes_read = 0

    def blocks(self) -> Iterator[Block]:
        split = Blocks()
        if isinstance(self.source, str):
            data = self.source.encode("utf-8", "replace")
            self.bytes_read = len(data)
            yield from [*split.feed(data), *split.end()]
            return
        try:
            with open(self.source, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    self.bytes_read += len(chunk)
                    yield from split.feed(chunk)
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        self.complete = False
                        return
        except OSError:
            return  # no log (yet): nothing said
        yield from split.end()

    def __iter__(self) -> Iterator[LogLine]:
        """Every line, cut to its cap, its prefix split off."""
        for block in self.blocks():
            for raw, cut in block_lines(block):
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
