"""A block searched once for many anchors (issue 41, case 8: a 200 MB log in the middle of a start).

The follower used to search every block once per anchor (the sheet's eleven, each pending
milestone's own, "Worker" forever on one GPU): ~20 full passes a block, 160 MB/s, so 200 MB
written during a start was not read by /health 200 and the run waited for it. Now a block is
searched once for them all (tuning.engine.log_marks), and what is found must be exactly what the
straightforward reading finds: every real vLLM log of examples/h200 and tests/data gives the same
facts (and the same pids, conflicts, foreign lines) and stamps the same milestones after the same
piece of the log, whichever way its blocks are searched. The speed is shown by
benchmarks/log_parse.py, not asserted here.
"""

from __future__ import annotations

import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuning.engine import log_marks
from tuning.engine.log_facts import ANCHORS, Sheet, read_sheet
from tuning.engine.log_marks import Marks
from tuning.engine.server_log import (
    ARGS_CAP,
    CHUNK,
    LINE_CAP,
    Block,
    Blocks,
    Lines,
    block_lines,
    log_line,
    marked_lines,
)
from tuning.engine.startup_anatomy import _ANCHORS, MILESTONES, LogStamps

REPO = Path(__file__).resolve().parents[2]
EVERY_ANCHOR = ANCHORS + tuple(a for key, _, _ in MILESTONES for a in _ANCHORS[key])
# what the follower looks for once its first APIServer line is read
FOLLOWING = tuple(a for a in EVERY_ANCHOR if a != b"(APIServer pid=")
PIECE = 64 * 1024  # the log is written and followed this much at a time
REQUEST = (
    b'(APIServer pid=561) INFO:     127.0.0.1:54382 - "POST /v1/completions HTTP/1.1" 200 OK\n'
)
KV = b"(EngineCore pid=682) INFO 12-02 18:33:10 [kv_cache_utils.py:1316] GPU KV cache size: "


def example_logs() -> Iterator[tuple[str, bytes]]:
    """Every real vLLM log the repository holds: tests/data and each examples/h200 tarball."""
    for path in sorted((REPO / "tests" / "data").glob("*.log")):
        yield path.name, path.read_bytes().rstrip(b"\n") + b"\n"  # a last line is whole
    for tarball in sorted((REPO / "examples" / "h200").glob("*server-logs.tar.gz")):
        with tarfile.open(tarball) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".log") and (fh := tar.extractfile(member)):
                    data = fh.read()
                    yield f"{tarball.name}:{member.name}", data.rstrip(b"\n") + b"\n"


def facts(sheet: Sheet) -> dict[str, Any]:
    return {
        "values": sheet.values,
        "sums": sheet.sums,
        "seen": sheet.seen,
        "conflicts": {k: c.to_dict() for k, c in sheet.conflicts.items()},
        "engine_pids": sheet.engine_pids,
        "read": {k: v for k, v in sheet.read_record().items() if k != "bytes"},
    }


def facts_line_by_line(data: bytes, pids: set[int] | None) -> dict[str, Any]:
    """The straightforward reading: each line, cut to its cap, that holds an anchor is fed."""
    sheet = Sheet(pids)
    for block in Lines(data.decode("utf-8", "replace")).blocks():
        for raw, cut in block_lines(block):
            if any(anchor in raw for anchor in ANCHORS):
                sheet.feed(log_line(raw, cut))
    return facts(sheet)


def first_pieces_line_by_line(data: bytes) -> dict[str, int]:
    """Each milestone -> the piece of the log whose whole lines first show it, line by line."""
    found: dict[str, int] = {}
    rest = b""
    for i, off in enumerate(range(0, len(data), PIECE)):
        rest += data[off : off + PIECE]
        whole, rest = rest[: rest.rfind(b"\n") + 1], rest[rest.rfind(b"\n") + 1 :]
        for raw, _ in block_lines(Block(whole.rstrip(b"\n"))):
            text = raw.decode("utf-8", "replace")
            for key, _, rx in MILESTONES:
                if key not in found and rx.search(text):
                    found[key] = i
    return found


def followed(data: bytes, tmp: Path, pids: set[int] | None) -> tuple[dict[str, int], Sheet]:
    """The follower's reading of `data` written a piece at a time: each milestone -> the piece
    after which it was stamped, and its sheet."""
    log = tmp / "server.log"
    log.write_bytes(b"")
    sheet = Sheet(pids)
    follower = LogStamps(log, time.monotonic(), sheet)
    found: dict[str, int] = {}
    with open(log, "ab") as fh:
        for i, off in enumerate(range(0, len(data), PIECE)):
            fh.write(data[off : off + PIECE])
            fh.flush()
            follower.read()
            for key in follower.stamps:
                found.setdefault(key, i)
    return found, sheet


@pytest.mark.parametrize("at_once", [True, False], ids=["numpy-look-up", "anchor-by-anchor"])
def test_every_example_log_gives_the_facts_and_stamps_of_a_line_by_line_reading(
    at_once: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if at_once:  # every block searched at once, however small
        monkeypatch.setattr(Marks, "small", 2)
    else:
        monkeypatch.setattr(Marks, "_starts_at_once", lambda self, data: None)
    count = 0
    for name, data in example_logs():
        first = log_line(data[: data.find(b"\n")]).pid
        for pids in (None, {first} if first is not None else None):
            want = facts_line_by_line(data, pids)
            found, sheet = followed(data, tmp_path, pids)
            assert facts(sheet) == want, name
            assert found == first_pieces_line_by_line(data), name
            whole = read_sheet(data.decode("utf-8", "replace"), pids)
            assert facts(whole) == want, name
        count += 1
    assert count == 56  # the 4 of tests/data and the 52 of the H200/H100 tarballs


def same_as_marked_lines(block: Block, anchors: tuple[bytes, ...]) -> list[bytes]:
    got = list(Marks(anchors).lines(block))
    assert [(m.raw, m.cut) for m in got] == list(marked_lines(block, anchors))
    for m in got:
        assert m.held == {a for a in anchors if a in m.raw}
        assert block.data[m.start : m.end].startswith(m.raw)
    return [m.raw for m in got]


def test_a_flood_is_searched_at_once_with_the_pairs_rarest_in_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Request lines hold 'mp' (completions): the pair first chosen for torch.compile; the pairs
    are chosen again from the block, and the lines are still found at once, as marked_lines
    finds them, a hit straddling or past a line's cap included."""
    lines = [REQUEST] * 20_000
    lines[7] = KV + b"2,205,168 tokens\n"
    lines[9_000] = b"(EngineCore pid=682) INFO torch.compile took 12.59 s in total\n"
    lines[9_001] = b"(APIServer pid=561) INFO " + b"x" * (LINE_CAP - 30) + b"KV cache size: 9\n"
    lines[9_002] = b"(APIServer pid=561) INFO " + b"x" * LINE_CAP + b" took 1 s\n"
    args = b"(APIServer pid=561) INFO non-default args: {" + b"y" * 10_000 + b" took 2 s}\n"
    lines[15_000] = args
    block = Block(b"".join(lines).rstrip(b"\n"))

    def no(self: Marks, data: bytes) -> set[int]:
        raise AssertionError("searched anchor by anchor")

    monkeypatch.setattr(Marks, "_starts_one_by_one", no)
    found = same_as_marked_lines(block, FOLLOWING)
    assert len(found) == 3 and found[0].startswith(KV) and found[-1] == args.rstrip(b"\n")
    assert len(args) < ARGS_CAP


def test_a_block_where_every_pair_is_common_is_searched_anchor_by_anchor() -> None:
    """Every line holds an anchor (a foreign process repeating a KV line): no pair is rare, the
    block is searched anchor by anchor, the same lines either way."""
    block = Block((KV + b"1 tokens\n" + REQUEST) * 12_000)
    marks = Marks(FOLLOWING)
    assert len(same_as_marked_lines(block, FOLLOWING)) == 12_000
    assert marks._starts_at_once(block.data) is None
    assert marks._rest == log_marks.REST  # the next blocks are not looked up in vain


def test_the_sheet_and_the_milestones_share_one_search_a_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One search of a block for the sheet's anchors and the pending milestones' own (a block
    used to be searched once per anchor, a never-logged milestone's included, forever)."""
    searched: list[tuple[bytes, ...]] = []
    lines = Marks.lines

    def spy(self: Marks, block: Block) -> list[log_marks.Marked]:
        searched.append(self.anchors)
        return lines(self, block)

    monkeypatch.setattr(Marks, "lines", spy)
    log = tmp_path / "server.log"
    log.write_bytes(REQUEST * 30_000)  # 2.6 MB: three chunks
    split = Blocks()
    data = log.read_bytes()
    blocks = [b for off in range(0, len(data), CHUNK) for b in split.feed(data[off : off + CHUNK])]
    sheet = Sheet({561})
    LogStamps(log, time.monotonic(), sheet).stop()
    assert len(searched) == len(blocks) >= 3
    assert all(set(ANCHORS) | {b"Worker", b"KV cache size: "} <= set(a) for a in searched)
    assert b"(APIServer pid=" in searched[0] and b"(APIServer pid=" not in searched[1]
    assert Marks(EVERY_ANCHOR).needles.count(b"KV cache") == 1
    assert b"KV cache size: " not in Marks(EVERY_ANCHOR).needles
