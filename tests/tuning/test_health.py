"""The run-health verdict: client-bound detection, steady state, goodput and token reconciliation,
against the fake server (no engine)."""

from __future__ import annotations

from core.records import RequestRecord
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer, fake_tokens
from tuning.measure.health import reconcile_tokens, run_health, scrape_counters, server_inflight
from tuning.measure.loadgen.client import LoadResult
from tuning.measure.loadgen.start import run_load_sync
from tuning.measure.metrics import columns, goodput
from tuning.measure.traffic.workload import Workload


def _load(records: list[RequestRecord], duration: float, **kw: object) -> LoadResult:
    base = dict(
        records=records,
        duration_s=duration,
        started_at_unix=0.0,
        t0_perf_counter=0.0,
        concurrency=4,
        client_cpu_s=0.1,
        client_cpu_util=0.1,
        loop_cpu_s=0.1,
        loop_lag_mean_ms=0.5,
        loop_lag_p99_ms=2.0,
        loop_lag_max_ms=3.0,
    )
    base.update(kw)
    return LoadResult(**base)  # type: ignore[arg-type]


def _closed_loop(c: int, waves: int, latency: float, out: int = 10) -> list[RequestRecord]:
    recs = []
    for w in range(waves):
        for i in range(c):
            start = w * latency
            recs.append(
                RequestRecord(
                    index=w * c + i,
                    start=start,
                    ttft=0.1 * latency,
                    end=start + latency,
                    itl=[0.9 * latency / (out - 1)] * (out - 1),
                    output_tokens=out,
                    prompt_tokens=8,
                    ok=True,
                )
            )
    return recs


WL = Workload(num_requests=16, concurrency=4, input_len=8, output_len=10, num_warmups=0)


def test_healthy_closed_loop_is_not_client_bound() -> None:
    recs = _closed_loop(4, 4, 1.0)
    health = run_health(_load(recs, 4.0), WL, [], 0.0)
    assert not health["client_bound"], health["client_bound_reasons"]
    assert abs(health["achieved_concurrency"] - 4.0) < 1e-9
    assert health["steady_state"]["found"]


def test_busy_client_and_lagging_loop_are_flagged() -> None:
    recs = _closed_loop(4, 4, 1.0)
    health = run_health(_load(recs, 4.0, client_cpu_util=0.97, loop_lag_p99_ms=80.0), WL, [], 0.0)
    assert health["client_bound"]
    assert any("CPU" in r for r in health["client_bound_reasons"])
    assert any("lag" in r for r in health["client_bound_reasons"])


def test_client_that_never_held_c_in_flight_is_flagged() -> None:
    # One request at a time although C = 4: the client serialised them.
    recs = [
        RequestRecord(
            index=i, start=float(i), ttft=0.1, end=i + 1.0, itl=[0.1] * 9, output_tokens=10, ok=True
        )
        for i in range(8)
    ]
    health = run_health(_load(recs, 8.0), WL, [], 0.0)
    assert health["client_bound"]
    assert health["achieved_concurrency"] < 1.01


def test_server_queue_is_matched_on_the_sample_clock() -> None:
    samples = [
        {"t_s": 10.0 + t, "series": "num_requests_running", "value": 4.0, "label": ""}
        for t in (0.5, 1.0, 1.5)
    ] + [{"t_s": 2.0, "series": "num_requests_running", "value": 0.0, "label": ""}]
    got = server_inflight(samples, 10.0, 12.0)
    assert got["running_mean"] == 4.0 and got["running_max"] == 4.0
    health = run_health(_load(_closed_loop(4, 4, 1.0), 4.0), WL, samples, load_offset_s=10.0)
    assert health["server_running_mean"] == 4.0
    assert health["server_inflight_share"] == 1.0


def test_token_reconciliation() -> None:
    ok = reconcile_tokens(
        1000, {"generation_tokens_total": 50.0}, {"generation_tokens_total": 1050.0}
    )
    assert ok["agree"] and ok["difference"] == 0
    bad = reconcile_tokens(
        1000, {"generation_tokens_total": 0.0}, {"generation_tokens_total": 1500.0}
    )
    assert bad["agree"] is False and bad["difference"] == -500
    unknown = reconcile_tokens(10, None, {"generation_tokens_total": 1.0})
    assert unknown["agree"] is None


def test_goodput_recomputed_with_new_slos() -> None:
    recs = _closed_loop(4, 2, 1.0)
    recs[0].ttft = 0.5  # one slow first token
    cols = columns(recs)
    strict = goodput(cols, 2.0, {"ttft": 200})
    loose = goodput(cols, 2.0, {"ttft": 600})
    assert strict["good"] == 7 and loose["good"] == 8
    assert loose["request_goodput"] == 4.0


def test_reconciliation_against_the_fake_server_counters() -> None:
    wl = Workload(num_requests=12, concurrency=3, input_len=4, output_len=5, num_warmups=2)
    with FakeOpenAIServer(FakeConfig(model="fake-model", itl_ms=1.0)) as srv:
        prompts = [" ".join(["w"] * 4)] * wl.total_prompts
        marks: dict[str, object] = {}

        def on_phase(phase: str) -> None:
            if phase == "loading":
                marks["before"] = scrape_counters(srv.base_url)

        result = run_load_sync(srv.base_url, "fake-model", prompts, wl, on_phase=on_phase)
        after = scrape_counters(srv.base_url)
    health = run_health(result, wl, [], 0.0, marks["before"], after)  # type: ignore[arg-type]
    tokens = health["tokens"]
    assert tokens["client_output_tokens"] == 12 * 5
    assert tokens["server_output_tokens"] == 12 * 5 and tokens["agree"]
    assert len(fake_tokens("a b")) >= 1
