"""Which lines of a block hold which anchors: a block searched once for many literals at once.

The log follower looks for some twenty literals in every block of a log that may hold 200 MB (the
sheet's facts, tuning.engine.log_facts, and the start's pending milestones,
tuning.engine.startup_anatomy). `bytes.find` is one full pass over the block per literal; here a
large block is searched once: each anchor stands in by its rarest two bytes (`pair`), numpy looks
every two-byte window of the block up in a table of those pairs, and each hit is checked against
the anchors it stands for at their offsets. An anchor that holds another one is never searched
for: the lines of the shorter one are the only lines it can be on. A line holds an anchor only
within its cap (tuning.engine.server_log.cap_line), as `marked_lines` says.

Where the pairs are common in a block (more than one hit in DENSE bytes) they are chosen again
from that block's own counts; small blocks (the reads of a normal start), and blocks where even
those pairs are common, are searched anchor by anchor with bytes.find: the same lines either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tuning.engine.server_log import Block, cap_line

SMALL = 64 * 1024  # bytes: a smaller block is searched anchor by anchor
DENSE = 512  # more than one pair hit in this many bytes: anchor by anchor
REST = 16  # blocks searched anchor by anchor after pairs chosen again did not help
PIECE = 1 << 18  # bytes of a block looked up at once
# Bytes in about the order of how often they come in log text (English words, numbers, paths);
# a byte not listed (capitals, rare punctuation) is rarer than all of them.
COMMON = b" etaoinsr0123456789.lcdhu:m-/_=p,()fgy'[]\"wbvkx"


@dataclass(frozen=True, slots=True)
class Marked:
    """A line of a block that holds at least one anchor within its cap."""

    raw: bytes  # the line, cut to its cap
    cut: bool  # longer than its cap (or the block's one line was)
    start: int  # where it starts in the block
    end: int  # where it ends (its newline, or the block's end)
    held: frozenset[bytes]  # the anchors it holds within its cap


def _rarity(byte: int) -> int:
    i = COMMON.find(bytes([byte]))
    return len(COMMON) + 1 if i < 0 else i


def pair(anchor: bytes) -> int:
    """Where the rarest two bytes of `anchor` start in it (ties: the first)."""
    scores = [_rarity(anchor[i]) + _rarity(anchor[i + 1]) for i in range(len(anchor) - 1)]
    return scores.index(max(scores))


Pairs = tuple[np.ndarray, dict[bytes, list[tuple[bytes, int]]]]  # the look-up table, its needles


class Marks:
    """The lines of a block holding any of `anchors` (each anchor at least two bytes), in order.

    Each needle's pair is its rarest by COMMON until a block has too many hits: then the pairs
    are chosen again, each needle's rarest in that block (a flood repeats itself, so the next
    blocks are searched at once again); the lines found are the same whichever pairs are used."""

    small = SMALL  # a smaller block is searched anchor by anchor

    def __init__(self, anchors: Iterable[bytes]) -> None:
        self.anchors = tuple(dict.fromkeys(anchors))
        assert all(len(a) >= 2 for a in self.anchors), self.anchors
        # searched for: the anchors that hold no other (the lines of "KV cache size: " are among
        # those of "KV cache")
        self.needles = tuple(
            a for a in self.anchors if not any(o != a and o in a for o in self.anchors)
        )
        self._pairs = self._choose([pair(n) for n in self.needles])  # replaced whole, never edited
        self._rest = 0

    def _choose(self, ats: list[int]) -> Pairs:
        table = np.zeros(1 << 16, dtype=bool)
        by_pair: dict[bytes, list[tuple[bytes, int]]] = {}
        for needle, at in zip(self.needles, ats, strict=True):
            two = needle[at : at + 2]
            table[int.from_bytes(two, "little")] = True
            by_pair.setdefault(two, []).append((needle, at))
        return table, by_pair

    def lines(self, block: Block) -> Iterator[Marked]:
        """The lines of `block` that hold an anchor within their cap, in order, one at a time."""
        data = block.data
        starts = None
        if len(data) >= self.small:
            starts = self._starts_at_once(data)
        if starts is None:
            starts = self._starts_one_by_one(data)
        for start in sorted(starts):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            raw, cut = cap_line(data[start:end])
            held = frozenset(a for a in self.anchors if a in raw)
            if held:
                yield Marked(raw, cut or block.cut, start, end, held)

    def _starts_one_by_one(self, data: bytes) -> set[int]:
        starts = set()
        for needle in self.needles:
            i = data.find(needle)
            while i >= 0:
                starts.add(data.rfind(b"\n", 0, i) + 1)
                end = data.find(b"\n", i)
                i = data.find(needle, end) if end >= 0 else -1  # one hit a line is enough
        return starts

    def _starts_at_once(self, data: bytes) -> set[int] | None:
        """Where the lines with a needle start, from one look-up of every two-byte window; None
        when the pairs are too common in `data` for that to pay, even chosen again."""
        if self._rest > 0:  # chosen again lately, in vain: not at every block of a flood
            self._rest -= 1
            return None
        table, by_pair = self._pairs
        hits = [p for first, pairs in _windows(data) for p in _hits(table, first, pairs)]
        if len(hits) > len(data) // DENSE:
            table, by_pair = self._pairs = self._rarest_in(data)
            hits = [p for first, pairs in _windows(data) for p in _hits(table, first, pairs)]
            if len(hits) > len(data) // DENSE:
                self._rest = REST
                return None
        starts = set()
        for p in hits:
            for needle, at in by_pair[data[p : p + 2]]:
                i = p - at
                if i >= 0 and data.startswith(needle, i):
                    starts.add(data.rfind(b"\n", 0, i) + 1)
        return starts

    def _rarest_in(self, data: bytes) -> Pairs:
        """Each needle's pair that is rarest among the two-byte windows of `data`."""
        seen = np.zeros(1 << 16, dtype=np.int64)
        for _, pairs in _windows(data):
            seen += np.bincount(pairs, minlength=1 << 16)
        ats = []
        for needle in self.needles:
            twos = (needle[i : i + 2] for i in range(len(needle) - 1))
            counts = [int(seen[int.from_bytes(two, "little")]) for two in twos]
            ats.append(counts.index(min(counts)))
        return self._choose(ats)


def _windows(data: bytes) -> Iterator[tuple[int, np.ndarray]]:
    """Every two-byte window of `data` as little-endian numbers, a PIECE at a time (what numpy
    makes of them stays small): (where the first starts, the windows every two bytes from it)."""
    last = len(data) - 1  # windows start before it
    for lo in range(0, last, PIECE):
        hi = min(lo + PIECE, last)
        for first in (lo, lo + 1):
            if (count := (hi - first + 1) // 2) > 0:
                yield first, np.frombuffer(data, dtype="<u2", count=count, offset=first)


def _hits(table: np.ndarray, first: int, pairs: np.ndarray) -> list[int]:
    """Where the windows `pairs` (every two bytes from `first`) are in `table`."""
    found: list[int] = (np.flatnonzero(np.take(table, pairs)) * 2 + first).tolist()
    return found


@lru_cache(maxsize=64)
def marks(anchors: tuple[bytes, ...]) -> Marks:
    """One Marks per set of anchors (a follower's set changes as its milestones are stamped)."""
    return Marks(anchors)
