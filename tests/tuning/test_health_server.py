"""Issue 11 item 11: the client's mean latencies beside vLLM's own histogram means for the same
window, the client - server difference, the bound that flags a run, and where it is shown
(bench's table and result, the Runs page's health)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.records import RequestRecord
from tests.factories import bench_args
from tests.fakes.fake_openai import fake_server
from tuning.cli.bench import run_bench_command
from tuning.measure.health import SERVER_GAP_MS, server_latency, server_summary
from tuning.measure.metrics import columns
from ui.health import health_badge, health_problems, server_gap_ms


def _records(n: int, ttft: float, e2el: float, out: int = 5) -> list[RequestRecord]:
    gap = (e2el - ttft) / (out - 1)
    return [
        RequestRecord(
            index=i,
            start=float(i),
            ttft=ttft,
            end=i + e2el,
            itl=[gap] * (out - 1),
            output_tokens=out,
            prompt_tokens=4,
            ok=True,
        )
        for i in range(n)
    ]


def _server(n: int, ttft_s: float, e2el_s: float) -> tuple[dict[str, float], dict[str, float]]:
    before = {
        "time_to_first_token_seconds_sum": 5.0,
        "time_to_first_token_seconds_count": 7.0,
        "e2e_request_latency_seconds_sum": 9.0,
        "e2e_request_latency_seconds_count": 7.0,
        "request_queue_time_seconds_sum": 0.0,
        "request_queue_time_seconds_count": 7.0,
    }
    after = dict(before)
    after["time_to_first_token_seconds_sum"] += n * ttft_s
    after["time_to_first_token_seconds_count"] += n
    after["e2e_request_latency_seconds_sum"] += n * e2el_s
    after["e2e_request_latency_seconds_count"] += n
    after["request_queue_time_seconds_sum"] += n * 0.002
    after["request_queue_time_seconds_count"] += n
    return before, after


def test_a_client_close_to_the_server_is_not_flagged() -> None:
    got = server_latency(columns(_records(8, 0.110, 0.500)), *_server(8, 0.100, 0.490))
    assert got["comparable"] and not got["flagged"]
    assert got["server_mean_ttft_ms"] == pytest.approx(100.0)
    assert got["client_minus_server_ttft_ms"] == pytest.approx(10.0)
    assert got["client_minus_server_e2el_ms"] == pytest.approx(10.0)
    assert got["server_mean_queue_ms"] == pytest.approx(2.0)
    summary = server_summary({"server_latency": got})
    assert summary["server_mean_ttft_ms"] == pytest.approx(100.0)
    assert summary["client_minus_server_ttft_ms"] == pytest.approx(10.0)
    assert set(summary) >= {"server_mean_queue_ms", "server_mean_itl_ms", "server_mean_tpot_ms"}


def test_a_gap_beyond_the_bound_flags_the_run() -> None:
    # 200 ms of TTFT the server never saw: beyond max(50 ms, 25 % of 100 ms)
    got = server_latency(columns(_records(8, 0.300, 0.700)), *_server(8, 0.100, 0.500))
    assert got["flagged"] and any("TTFT +200 ms" in r for r in got["reasons"]), got["reasons"]
    # a long request: 25 % of a 1 s E2EL (250 ms) is the bound, so 100 ms is not flagged
    ok = server_latency(columns(_records(8, 0.110, 1.100)), *_server(8, 0.100, 1.000))
    assert not ok["flagged"] and SERVER_GAP_MS == 50.0


def test_a_client_faster_than_the_server_is_a_window_mismatch() -> None:
    got = server_latency(columns(_records(8, 0.080, 0.480)), *_server(8, 0.100, 0.500))
    assert got["flagged"] and "-20 ms" in got["reasons"][0]


def test_different_requests_are_shown_but_not_judged() -> None:
    records = _records(8, 0.300, 0.700)
    records[0].ok = False
    records[0].error_kind = "stalled"
    got = server_latency(columns(records), *_server(8, 0.100, 0.500))
    assert got["comparable"] is False and not got["flagged"]
    assert "finished 8 requests" in got["not_comparable"] and "completed 7" in got["not_comparable"]
    assert server_latency(columns(records), None, None)["comparable"] is None


def test_the_runs_page_shows_the_gap_and_the_flag() -> None:
    lat = server_latency(columns(_records(8, 0.300, 0.700)), *_server(8, 0.100, 0.500))
    run = {"health": {"server_latency": lat}, "summary": server_summary({"server_latency": lat})}
    assert server_gap_ms(run) == pytest.approx(200.0)
    assert any(p.startswith("server disagrees") for p in health_problems(run))
    assert health_badge(run) == "suspect: server disagrees"
    assert server_gap_ms({"summary": {}}) is None
    hostile = {"summary": "x", "health": {"server_latency": {"client_minus_server_ttft_ms": "1"}}}
    assert server_gap_ms(hostile) is None


def test_bench_reports_the_servers_own_means(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    with fake_server(ttft_ms=30, itl_ms=2, counter_lag_ms=300) as srv:
        assert run_bench_command(bench_args(srv.base_url, out)) == 0
    server = json.loads(out.read_text())["lab"]["server"]
    assert server["tokens"]["agree"] and server["tokens"]["server_output_tokens"] == 45
    lat = server["latency"]
    assert lat["comparable"] and lat["server_mean_ttft_ms"] >= 30  # the fake's 30 ms: a floor
    assert lat["client_minus_server_ttft_ms"] == pytest.approx(
        lat["client_mean_ttft_ms"] - lat["server_mean_ttft_ms"]
    )
    assert lat["client_minus_server_ttft_ms"] >= 0  # the client's wait holds the server's
    printed = capsys.readouterr().out
    assert "Server mean TTFT (ms)" in printed and "Client - server mean TTFT (ms)" in printed
