"""Issue 39, item 6: what the recorder loses is counted and said, never passed as complete. Rows
the sink refused past `max_pending` (the oldest) and at stop were dropped without a trace; a memory
sampler that ran late skipped ticks and its series read as whole."""

from __future__ import annotations

import time

from core.records import SampleRow
from tests.checks import wait_for
from tuning.measure.telemetry.completeness import SampleLoss, Ticks, sample_gaps
from tuning.measure.telemetry.recorder import Sampler, Telemetry


class Counting(Sampler):
    """One row of its series per call; `cost_s` of work per call; a memory series when told."""

    def __init__(self, series: str, period: float, memory: bool = False, cost_s: float = 0.0):
        super().__init__(period)
        self.name = self.series = series
        self.memory = memory
        self.cost_s = cost_s
        self.calls = 0

    def sample(self, t: float) -> list[SampleRow]:
        self.calls += 1
        if self.cost_s:
            time.sleep(self.cost_s)
        return [SampleRow(t, self.series, float(self.calls))]


def refusing(batch: list[SampleRow]) -> None:
    raise RuntimeError("database is locked")


def test_rows_a_refusing_sink_never_took_are_counted_by_series() -> None:
    memory = Counting("tree_rss_bytes", 0.02, memory=True)
    kv = Counting("kv_cache_usage_perc", 0.05)
    tel = Telemetry(max_pending=5)
    tel.start([memory, kv], refusing, flush_every=0.05)
    assert wait_for(lambda: tel.sink_errors >= 3 and memory.calls >= 12, timeout=60)
    held = tel.loss()
    assert sum(held.unstored.values()) <= 5 and held.dropped  # the oldest beyond 5 are gone
    tel.stop()
    gone = tel.loss()
    assert gone.unstored == {}  # the last retry failed too: dropped, not left pending
    assert gone.dropped == {"tree_rss_bytes": memory.calls, "kv_cache_usage_perc": kv.calls}
    record = gone.to_json()
    assert record["complete"] is False and record["lost_rows"] == gone.dropped
    words = sample_gaps({"samples": record})
    assert words[0].startswith(f"memory series incomplete: {memory.calls:,} of its samples")
    assert words[1] == f"samples incomplete: {kv.calls:,} rows of other series never reached the DB"


def test_a_sink_that_takes_everything_loses_nothing() -> None:
    got: list[SampleRow] = []
    memory = Counting("tree_rss_bytes", 0.02, memory=True)
    tel = Telemetry()
    tel.start([memory], got.extend, flush_every=0.05)
    assert wait_for(lambda: memory.calls >= 5, timeout=60)
    tel.stop()
    record = tel.loss().to_json()
    assert len(got) == memory.calls and record["lost_rows"] == {}
    words = sample_gaps({"samples": record})  # thinning, on a busy box, is the next test's
    assert not [w for w in words if "incomplete" in w], words


def test_a_memory_sampler_that_runs_late_is_flagged_as_thinned() -> None:
    """Each read takes 4 periods: at least three ticks of four are skipped (a sleep is never
    shorter than asked), so the series is thinned and says so; a series that is not memory, as
    late, is not called a memory series."""
    slow = Counting("tree_rss_bytes", 0.02, memory=True, cost_s=0.08)
    other = Counting("num_requests_running", 0.02, cost_s=0.08)
    tel = Telemetry()
    tel.start([slow, other], lambda batch: None, flush_every=0.05)
    assert wait_for(lambda: slow.calls >= 4 and other.calls >= 4, timeout=60)
    tel.stop()
    record = tel.loss().to_json()
    ticks = record["ticks"]["tree_rss_bytes"]
    assert ticks["taken"] == slow.calls and ticks["due"] >= 3 * slow.calls
    assert record["thinned"] == ["tree_rss_bytes"] and record["complete"] is False
    (words,) = sample_gaps({"samples": record})
    assert words.startswith(
        f"memory series thinned: tree_rss_bytes sampled {slow.calls:,} of {ticks['due']:,} ticks"
    )


def test_a_reused_servers_next_run_counts_only_its_own_losses() -> None:
    first = SampleLoss({"tree_rss_bytes": 4}, {}, {"process_tree": Ticks(10, 10, True, 30)})
    later = SampleLoss(
        {"tree_rss_bytes": 4, "gpu_used_bytes": 2},
        {"kv_cache_usage_perc": 3},
        {"process_tree": Ticks(30, 50, True, 90)},
    )
    own = later.since(first)
    assert own.dropped == {"gpu_used_bytes": 2} and own.unstored == {"kv_cache_usage_perc": 3}
    assert own.ticks == {"process_tree": Ticks(20, 40, True, 60)}  # half its ticks skipped
    assert own.to_json()["thinned"] == ["process_tree"]


def test_a_stored_record_from_elsewhere_is_read_carefully() -> None:
    """Words come from a run's stored health, perhaps an imported bundle's: no crash, no count
    invented, and a run recorded before this field reads as nothing to say."""
    assert sample_gaps(None) == [] and sample_gaps({}) == []
    assert sample_gaps({"samples": {"complete": True, "lost_rows": {"tree_rss_bytes": 9}}}) == []
    hostile = {
        "complete": False,
        "lost_rows": {"tree_rss_bytes": "x", "gpu_used_bytes": -5, "kv": 1e400},
        "thinned": ["gpu"],
        "ticks": {"gpu": "nonsense"},
    }
    assert sample_gaps({"samples": hostile}) == []
