"""The facts of a server log (issue 41, case 2): only vLLM's own lines of the launch count (its
prefix names a process of the launch), the last value wins, a disagreement is a conflict; the
log is searched a block at a time for the anchors of its facts and of a failure's words, which
must find on real vLLM logs what handing every line to the parsers finds. The runs behind the
case: tests/tuning/test_server.py (lines of pid 1 ignored) and
tests/tuning/experiment/test_log_conflicts.py (the launch's own lies stored as a mismatch)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from tuning.engine import effective
from tuning.engine.failure_words import FailureWords
from tuning.engine.log_facts import Sheet, read_sheet
from tuning.engine.server import parse_startup_log
from tuning.engine.server_log import Lines, log_line


def test_the_last_word_wins_and_only_a_disagreement_is_a_conflict() -> None:
    text = (
        "(EngineCore pid=7) INFO GPU KV cache size: 100 tokens, Maximum concurrency for 10 "
        "tokens per request: 10.00x\n"
        "(EngineCore pid=7) INFO GPU KV cache size: 100 tokens, Maximum concurrency for 10 "
        "tokens per request: 10.00x\n"
        "(Worker_TP0 pid=8) INFO Model loading took 1.5 GiB memory and 2.0 seconds\n"
        "(Worker_TP1 pid=9) INFO Model loading took 1.6 GiB memory and 2.1 seconds\n"
        "(APIServer pid=6) INFO vLLM server version 0.32.0, serving model m\n"
    )
    facts = parse_startup_log(text, pids={6, 7, 8, 9})
    assert facts.kv_cache_tokens == 100 and facts.weights_memory_gib == 1.6
    assert facts.log_conflicts == []  # the same word twice; two workers' own weights
    later = text + "(EngineCore pid=7) INFO GPU KV cache size: 200 tokens\n"
    facts = parse_startup_log(later, pids={6, 7, 8, 9})
    assert facts.kv_cache_tokens == 200 and facts.max_concurrency == 10.0
    (conflict,) = facts.log_conflicts
    assert conflict["fact"] == "kv_cache_tokens" and conflict["values"] == ["100", "200"]
    assert conflict["said_by"] == ["EngineCore pid 7", "EngineCore pid 7"]


def test_a_line_without_vllms_prefix_or_of_another_pid_is_no_fact() -> None:
    text = (
        "GPU KV cache size: 5 tokens\n"  # no prefix: anyone's print
        "(EngineCore pid=99) INFO GPU KV cache size: 6 tokens\n"  # not a process of the launch
        "(EngineCore pid=7) INFO Initializing a V1 LLM engine (v0.32.0) with config: "
        "max_seq_len=2048, dtype=torch.bfloat16\n"
    )
    facts = parse_startup_log(text, pids={7})
    assert facts.kv_cache_tokens is None and facts.vllm_version == "0.32.0"
    assert facts.engine_pids == {"EngineCore": 7}
    assert facts.log_read["foreign_lines"] == 1
    eff = effective.read_effective(read_sheet(text, {7}), None)
    assert eff.values["max-model-len"] == "2048"
    assert parse_startup_log(text).kv_cache_tokens == 6  # without the launch: any vLLM line


def real_logs() -> list[str]:
    """The real vLLM logs of tests/data and examples/h200."""
    data = Path(__file__).resolve().parents[1] / "data"
    texts = [p.read_text() for p in sorted(data.glob("*.log"))]
    h200 = Path(__file__).resolve().parents[2] / "examples" / "h200" / "server-logs.tar.gz"
    with tarfile.open(h200) as tar:
        for member in tar.getmembers():
            if member.name.endswith(".log") and (fh := tar.extractfile(member)):
                texts.append(fh.read().decode("utf-8", "replace"))
    assert len(texts) == 13  # the 4 of tests/data and the H200's 9
    return texts


def test_the_anchored_read_finds_what_reading_every_line_finds() -> None:
    """A log is searched a block at a time for the anchors of its facts (and of a failure's
    words): on real vLLM logs that must say what handing every line to the parsers says."""
    for text in real_logs():
        fast, every = read_sheet(text), Sheet()
        words, every_words = FailureWords(), FailureWords()
        for block in Lines(text).blocks():
            words.feed_block(block)
        for line in Lines(text):
            every.feed(line)
            every_words.feed(line)
        assert fast.values == every.values
        assert (fast.sums, fast.seen) == (every.sums, every.seen)
        assert fast.conflicts.keys() == every.conflicts.keys()
        assert fast.engine_pids.items() <= every.engine_pids.items()
        for code in (1, 2, None):
            assert words.verdict(code) == every_words.verdict(code)
    assert sum(bool(read_sheet(text).values) for text in real_logs()) == 12  # not argparse's


def test_a_following_sheet_looks_a_pid_it_does_not_hold_up_once() -> None:
    """While the server starts, its EngineCore may print before the lab has seen it: the sheet
    asks the process tree once for a pid it does not hold; a pid still missing is not ours."""
    pids: set[int] = {6}
    looked: list[int] = []

    def look_up() -> None:
        looked.append(len(looked))
        pids.add(7)  # the engine the launch started since the last look

    sheet = Sheet(pids, look_up)
    sheet.feed(log_line(b"(EngineCore pid=7) INFO GPU KV cache size: 5 tokens"))
    for _ in range(3):
        sheet.feed(log_line(b"(EngineCore pid=1) INFO GPU KV cache size: 9 tokens"))
    assert sheet.get("kv_cache_tokens") == 5 and sheet.engine_pids == {"EngineCore": 7}
    assert len(looked) == 2  # pid 7 once, pid 1 once
    assert sheet.foreign_lines == 3 and sheet.foreign_pids == [1]
