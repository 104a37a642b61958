"""The one reader of a server log (issue 41, case 8): a long line is cut before any pattern sees
it and never held whole, the tail is read from the end, a deadline ends a read. Before, one line of
200 KB cost 155 s in an unanchored regex and a 200 MB log was read whole several times (770 MB)."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tuning.engine.server import parse_startup_log
from tuning.engine.server_log import (
    ARGS_CAP,
    CUT_MARK,
    LINE_CAP,
    Block,
    Blocks,
    Lines,
    block_lines,
    marked_lines,
    tail,
)
from tuning.engine.startup_anatomy import LogStamps

T = TypeVar("T")
MB = 1_000_000
KV_LINE = "(EngineCore pid=7) INFO GPU KV cache size: 4,096 tokens\n"


def peak_bytes(work: Callable[[], T]) -> tuple[T, int]:
    """What `work` returns, and the most Python memory it held at once."""
    tracemalloc.start()
    try:
        out = work()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def huge_log(path: Path, line_bytes: int, lines_after: int = 3) -> Path:
    with open(path, "w") as fh:
        fh.write("(APIServer pid=6) INFO vLLM server version 0.32.0, serving model m\n")
        fh.write("(APIServer pid=6) INFO " + "x" * line_bytes + "\n")
        fh.write(KV_LINE)
        for i in range(lines_after):
            fh.write(f"(APIServer pid=6) INFO line {i}\n")
    return path


def test_a_long_line_is_cut_before_any_pattern_and_never_held_whole(tmp_path: Path) -> None:
    log = huge_log(tmp_path / "s.log", 50 * MB)
    facts, peak = peak_bytes(lambda: parse_startup_log(log, pids={6, 7}))
    assert facts.kv_cache_tokens == 4096 and facts.vllm_version == "0.32.0"
    assert peak < 8 * MB  # one chunk and a line's cap, not the 50 MB line
    long = [line for line in Lines(log) if line.cut]
    assert len(long) == 1 and len(long[0].text.encode()) == LINE_CAP
    assert long[0].role == "APIServer" and long[0].pid == 6


def test_a_line_written_in_pieces_is_held_only_up_to_its_cap() -> None:
    split = Blocks()
    assert split.feed(b"(APIServer pid=6) INFO ") == []
    for _ in range(100):
        assert split.feed(b"y" * 100_000) == []
        assert len(split._line) <= LINE_CAP
    (block, rest) = split.feed(b"tail\nnext line\nnext")
    assert block.cut and len(block.data) == LINE_CAP
    assert block.data.startswith(b"(APIServer pid=6) INFO yyy")
    assert rest == Block(b"next line") and split.end() == [Block(b"next")]


def test_the_non_default_args_line_is_kept_longer_and_its_cut_is_said() -> None:
    value = "{'mode': 3, 'compile_sizes': [" + ", ".join(["8"] * 20_000) + "]}"  # 60 KB
    line = f"(APIServer pid=6) INFO non-default args: {{'max_num_seqs': 4, 'c': {value}}}"
    (block,) = Blocks().feed(line.encode() + b"\nshort\n")
    assert list(block_lines(block)) == [(line.encode(), False), (b"short", False)]
    huge = (line + "x" * ARGS_CAP).encode()
    ((kept, cut),) = block_lines(Block(huge))
    assert cut and len(kept) == ARGS_CAP
    other = b"(APIServer pid=6) INFO " + b"z" * ARGS_CAP
    ((kept, cut),) = block_lines(Block(other))
    assert cut and len(kept) == LINE_CAP


def test_only_the_lines_with_an_anchor_are_looked_at() -> None:
    data = b"a KV cache line\nnothing here\n" + b"q" * LINE_CAP + b" took 1 s\nlast took 2 s"
    got = list(marked_lines(Block(data), (b"KV cache", b" took ")))
    assert got == [(b"a KV cache line", False), (b"last took 2 s", False)]  # not past a cap


def test_a_tail_that_begins_inside_a_line_shows_its_end_as_cut(tmp_path: Path) -> None:
    got = tail(huge_log(tmp_path / "one.log", 60 * MB, lines_after=0), 2)
    first, last = got.splitlines()
    assert last == KV_LINE.strip()
    assert first == CUT_MARK.strip() + " " + "x" * LINE_CAP


def test_a_deadline_ends_a_read_and_says_so(tmp_path: Path) -> None:
    log = huge_log(tmp_path / "s.log", 8 * MB)
    lines = Lines(log, deadline=time.monotonic() - 1)
    assert len(list(lines)) == 1 and not lines.complete  # the first chunk's whole line only
    whole = Lines(log, deadline=time.monotonic() + 60)
    assert len(list(whole)) == 6 and whole.complete


def test_log_stamps_hold_a_long_line_only_up_to_its_cap(tmp_path: Path) -> None:
    log = huge_log(tmp_path / "s.log", 30 * MB)
    stamps = LogStamps(log, time.monotonic())
    got, peak = peak_bytes(lambda: stamps.stop())  # one read of the whole file
    assert {"api_process", "kv_cache"} <= set(got)
    assert peak < 8 * MB
