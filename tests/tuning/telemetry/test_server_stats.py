"""Issue 11 items 2 and 11, the reading side: vLLM's histograms parsed from a real /metrics text,
and a /metrics read repeated until the counters settle (or the expected tokens are counted),
bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.fake_openai import fake_server
from tuning.measure.telemetry.server_stats import (
    MetricsReader,
    parse_histogram_totals,
    parse_server_stats,
    read_settled,
    tokens_counted,
    window_means,
)

REAL = Path(__file__).resolve().parents[2] / "data" / "real_metrics.txt"


def test_histograms_of_a_real_vllm_metrics_text() -> None:
    got = parse_histogram_totals(REAL.read_text())
    assert got["time_to_first_token_seconds_count"] == 1.0
    assert got["time_to_first_token_seconds_sum"] == pytest.approx(0.047321319580078125)
    assert got["inter_token_latency_seconds_count"] == 15.0
    for name in (
        "e2e_request_latency_seconds",
        "request_queue_time_seconds",
        "request_time_per_output_token_seconds",
    ):
        assert got[f"{name}_count"] == 1.0, name
    both = parse_server_stats(REAL.read_text())
    assert both["generation_tokens_total"] == 16.0 and "time_to_first_token_seconds_sum" in both


def test_window_means_are_sum_and_count_deltas() -> None:
    before = {"time_to_first_token_seconds_sum": 1.0, "time_to_first_token_seconds_count": 10.0}
    after = {"time_to_first_token_seconds_sum": 3.0, "time_to_first_token_seconds_count": 30.0}
    got = window_means(before, after)
    assert got["server_mean_ttft_ms"] == pytest.approx(100.0) and got["server_ttft_count"] == 20
    assert got["server_mean_e2el_ms"] is None and got["server_e2el_count"] is None
    assert window_means(None, after)["server_mean_ttft_ms"] is None


class Clock:
    """A fake clock whose sleep advances it; `fetch` returns the counter as of now."""

    def __init__(self, counts: dict[float, float]) -> None:
        self.t = 0.0
        self.counts = counts  # time -> counter value from then on
        self.reads = 0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s

    def fetch(self) -> dict[str, float] | None:
        self.reads += 1
        value = max(v for at, v in self.counts.items() if at <= self.t + 1e-9)
        return {"generation_tokens_total": value, "num_requests_running": 0.0}


def _settle(clock: Clock, **kw: object) -> object:
    return read_settled(clock.fetch, clock=clock.now, sleep=clock.sleep, **kw)  # type: ignore[arg-type]


def test_a_late_counter_is_waited_for() -> None:
    """The issue's race: the last request's 64 tokens reach /metrics 0.25 s late."""
    clock = Clock({0.0: 4032.0, 0.25: 4096.0})
    got = _settle(clock, target=tokens_counted({"generation_tokens_total": 0.0}, 4096, 64))
    assert got.values["generation_tokens_total"] == 4096.0 and got.settled  # type: ignore[attr-defined]
    assert clock.t == pytest.approx(0.3)


def test_without_a_target_two_reads_a_quiet_period_apart_must_agree() -> None:
    clock = Clock({0.0: 100.0, 0.15: 108.0})  # a warm-up's tokens land after the first read
    got = _settle(clock)
    assert got.values["generation_tokens_total"] == 108.0 and got.settled  # type: ignore[attr-defined]
    assert 0.45 <= clock.t <= 0.6


def test_a_counter_that_never_reaches_the_target_is_bounded() -> None:
    clock = Clock({0.0: 10.0})
    got = _settle(clock, target=lambda v: v["generation_tokens_total"] >= 20)
    assert got.settled and clock.t == pytest.approx(1.0, abs=0.11)  # type: ignore[attr-defined]
    moving = Clock({i / 20: float(i) for i in range(200)})  # never stops within the bound
    got = _settle(moving)
    assert not got.settled and moving.t == pytest.approx(5.0, abs=0.11)  # type: ignore[attr-defined]


def test_no_metrics_is_one_read_and_none() -> None:
    calls: Iterator[None] = iter([None])
    got = read_settled(lambda: next(calls))
    assert got.values is None and not got.settled and got.reads == 1
    assert MetricsReader("http://127.0.0.1:9")() is None  # nothing listens on the discard port


def test_the_reader_against_the_fakes_metrics() -> None:
    with fake_server() as srv:
        values = MetricsReader(srv.base_url)()
    assert values is not None and values["generation_tokens_total"] == 0.0
