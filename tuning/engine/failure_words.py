"""Why a start failed, in the engine's own words: a failed start's log read a block at a time.

Every line can count here, not only vLLM's logger's: the argument parser's usage and the API
server's last traceback are printed without its prefix. Only a line holding one of ANCHORS (in any
case) is looked at, found in a whole block at once; what is kept is bounded (a flag per marker,
the first exception of each kind, the last line), and each line is matched in time linear in its
length (cut to a few KB by `tuning.engine.server_log`).
"""

from __future__ import annotations

import re
from pathlib import Path

from tuning.engine.server_log import Block, Lines, LogLine, last_line, log_line, marked_lines

_ARGPARSE_WORDS = ("error: argument", "error: unrecognized arguments", "error: the following")
_EXC_AT = re.compile(r"(?:\w+\.)*(\w*(?:Error|Exception)): (.+)")
_EXC_AFTER = re.compile(r"[\])] ")
_GENERIC = (
    "Engine core initialization failed",
    "EngineCore failed to start",
    "See root cause above",
)
_OOM_MARKERS = (
    "out of memory",
    "outofmemoryerror",
    "no available memory for the cache blocks",
    "larger than the available kv cache memory",
    "is less than desired gpu memory",
    "cannot allocate memory",
)


# Every marker below holds one of these, lowercased (the block is searched in its lowercase).
ANCHORS = (
    b"error: ",
    b"exception: ",
    b"usage:",
    b"address already in use",
    b"out of memory",
    b"outofmemoryerror",
    b"no available memory",
    b"larger than the available",
    b"less than desired",
    b"cannot allocate memory",
    b"engine core initialization failed",
    b"enginecore failed to start",
    b"see root cause above",
)


def _exception(text: str) -> tuple[str, str] | None:
    """`ValueError: msg` at the start of a line or after its `[file.py:12] ` / `(prefix) `: the
    last such place first (linear: one attempt per place, each bounded by the line)."""
    starts = [m.end() for m in _EXC_AFTER.finditer(text)]
    for pos in [*reversed(starts), 0]:
        if m := _EXC_AT.fullmatch(text, pos):
            return m.group(1), m.group(2).strip()
    return None


class FailureWords:
    """What a failed start's log says went wrong, read line by line (`feed`, every line: the
    argument parser's and the last traceback's are no lines of vLLM's logger) in bounded memory."""

    def __init__(self) -> None:
        self.argparse: str | None = None
        self.usage = False
        self.last = ""
        self.port = False
        self.oom = False
        self.generic = False
        self.specific: str | None = None  # the first exception that is not a generic one
        self.oom_specific: str | None = None

    def feed_block(self, block: Block) -> None:
        """The lines of a block that can say why (one of ANCHORS), and its last line."""
        for raw, cut in marked_lines(block, ANCHORS, within=block.data.lower()):
            self.feed(log_line(raw, cut))
        if last := last_line(block).decode("utf-8", "replace").strip():
            self.last = last

    def feed(self, line: LogLine) -> None:
        text = line.text
        stripped = text.strip()
        if stripped:
            self.last = stripped
        if self.argparse is None and any(w in text for w in _ARGPARSE_WORDS):
            self.argparse = stripped
        self.usage = self.usage or "usage:" in text
        self.port = self.port or "Address already in use" in text
        self.generic = self.generic or any(g in text for g in _GENERIC)
        lowered = text.lower()
        oom_line = any(marker in lowered for marker in _OOM_MARKERS)
        self.oom = self.oom or oom_line
        if ("Error: " in text or "Exception: " in text) and (found := _exception(text)):
            name, words = found
            if not any(g in words for g in _GENERIC):
                said = f"{name}: {words}"
                self.specific = self.specific or said
                if self.oom_specific is None and any(k in said.lower() for k in _OOM_MARKERS):
                    self.oom_specific = said

    def verdict(self, returncode: int | None) -> tuple[str, str]:
        if self.argparse is not None:
            return "invalid_argument", self.argparse
        if returncode == 2 and self.usage:
            return "invalid_argument", self.last or "argument parser exited with code 2"
        if self.port:
            return "port_in_use", "OSError: [Errno 98] Address already in use"
        if self.oom:
            return "out_of_memory", (self.oom_specific or self.specific or "out of memory")[:500]
        if self.specific or self.generic:
            return "engine_init", (self.specific or "Engine core initialization failed")[:500]
        return "crashed", f"the server exited with code {returncode}"


def classify_failure(log: str | Path, returncode: int | None) -> tuple[str, str]:
    """(kind, reason) for a start that died; the reason is the engine's words where it gave any."""
    words = FailureWords()
    for block in Lines(log).blocks():
        words.feed_block(block)
    return words.verdict(returncode)
