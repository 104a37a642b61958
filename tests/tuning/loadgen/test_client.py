"""The closed-loop client against the fake server, on both transports: timings, usage, failures,
warm-ups, C in flight, cancel, and the API key sent but never stored."""

from __future__ import annotations

import json
import threading

import pytest

from tests.factories import load_workload as wl
from tests.factories import prompts_for
from tests.fakes.fake_openai import fake_server
from tuning.engine.launch import free_port
from tuning.measure.loadgen.client import LoadError
from tuning.measure.loadgen.endpoint import check_endpoint
from tuning.measure.loadgen.start import run_load_sync
from tuning.measure.metrics import achieved_concurrency, summarize

MODEL = "fake-model"
KEY = "sk-test-0123456789abcdef"


def test_happy_path_timings_and_usage(transport: str) -> None:
    w = wl(n=6, c=2, out=5)
    ttft_s, itl_s = 0.025, 0.006
    with fake_server(ttft_ms=ttft_s * 1000, itl_ms=itl_s * 1000) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
        bodies = srv.stats.bodies
    assert [r.index for r in res.records] == list(range(6))
    for r in res.records:
        assert r.ok and r.error_kind is None and r.http_status == 200
        assert r.output_tokens == 5 and r.prompt_tokens == len("req-0")
        assert r.ttft is not None and 0.02 <= r.ttft <= r.end - r.start  # the server's floor
        assert len(r.itl) == 4 and all(g >= 0 for g in r.itl)
        assert r.end is not None and r.end == pytest.approx(r.start + r.ttft + sum(r.itl))
        # The server's delays are a floor: no request ends before its last token was sent.
        assert r.end - r.start >= ttft_s + 4 * itl_s
    # A busy client reads two chunks at once now and then (one gap near 0, the next longer), so
    # a single gap proves nothing; the gaps together still reflect the server's pacing.
    gaps = [g for r in res.records for g in r.itl]
    assert sum(gaps) / len(gaps) >= itl_s / 2, gaps
    assert res.records[0].start >= 0 and res.duration_s >= max(r.end for r in res.records)
    assert res.client_cpu_s >= 0 and res.loop_lag_max_ms >= res.loop_lag_p99_ms >= 0
    # req-0 and req-1 go out together (C = 2): either may reach the server first.
    [body] = [b for b in bodies if b["prompt"] == "req-0"]
    assert body["stream"] is True and body["ignore_eos"] is True and body["max_tokens"] == 5
    assert body["temperature"] == 0 and body["stream_options"] == {"include_usage": True}
    assert body["model"] == MODEL and body["prompt"] == "req-0"


def test_tokens_come_from_usage_not_chunks(transport: str) -> None:
    w = wl(n=3, c=3, out=7)
    with fake_server(tokens_per_chunk=3) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    for r in res.records:
        assert r.ok and r.output_tokens == 7 and len(r.itl) == 2  # 3 chunks: 3 + 3 + 1 tokens
    assert summarize(res.records, res.duration_s)["total_output_tokens"] == 21


def test_closed_loop_keeps_exactly_c_in_flight(transport: str) -> None:
    w = wl(n=30, c=5, out=10)
    with fake_server(ttft_ms=5, itl_ms=3) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
        assert srv.stats.max_concurrent == 5  # the server never saw more than C
    assert all(r.ok for r in res.records)
    # the client's own count: C from the first dispatch until the last one (then it drains)
    last_dispatch = max(r.start for r in res.records)
    mid = [n for t, n in res.inflight if 0.05 < t < last_dispatch]
    assert mid and set(mid) == {5}
    assert res.inflight[-1][1] == 0
    # and the slots were busy: a free slot is refilled at once, so sum(E2EL) / duration ~ C
    assert achieved_concurrency(res.records, res.duration_s) > 0.7 * 5


def test_warmups_go_first_and_are_not_counted(transport: str) -> None:
    w = wl(n=6, c=3, warm=3)
    phases: list[str] = []
    with fake_server() as srv:
        res = run_load_sync(
            srv.base_url, MODEL, prompts_for(w), w, on_phase=phases.append, transport=transport
        )
        sent = [b["prompt"] for b in srv.stats.bodies]
    assert srv.stats.requests == 9 and len(res.records) == 6
    assert set(sent[:3]) == {"warm-0", "warm-1", "warm-2"}
    assert set(sent[3:]) == {f"req-{i}" for i in range(6)}
    assert phases == ["warming_up", "loading"] and res.warmup_failed == 0


def test_failed_warmups_are_reported_not_counted(transport: str) -> None:
    w = wl(n=4, c=2, warm=2)
    with fake_server(fail_http_on={0}) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert res.warmup_failed == 1 and res.warmup_errors[0].startswith("http")
    assert len(res.records) == 4 and all(r.ok for r in res.records)


def test_every_failure_is_a_record(transport: str) -> None:
    special = {
        1: "[[http500]]",
        2: "[[error_after=3]]",
        3: "[[hang]]",
        4: "[[early_end=2]]",
        5: "[[no_usage]]",
        6: "[[no_choices]]",
    }
    w = wl(n=10, c=4, out=6, request_timeout_s=0.4)
    with fake_server(itl_ms=1) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w, special), w, transport=transport)
    by = {r.index: r for r in res.records}
    assert len(by) == 10
    assert [i for i in by if by[i].ok] == [0, 7, 8, 9]
    assert by[1].error_kind == "http" and by[1].http_status == 500
    assert "injected failure" in (by[1].error or "")
    assert by[2].error_kind == "stream_error" and "injected stream error" in (by[2].error or "")
    assert len(by[2].itl) == 2 and by[2].ttft is not None  # the partial stream stays on record
    assert by[3].error_kind == "timeout" and by[3].ttft is None
    assert by[4].error_kind == "early_end" and "[DONE]" in (by[4].error or "")
    assert by[5].error_kind == "no_usage" and by[5].output_tokens is None
    assert by[5].ttft is not None and len(by[5].itl) == 5  # timings kept for later recompute
    assert by[6].error_kind == "early_end" and "choices" in (by[6].error or "")
    s = summarize(res.records, res.duration_s)
    assert (s["completed"], s["failed"]) == (4, 6)
    assert s["failed_by_kind"] == {
        "http": 1,
        "stream_error": 1,
        "timeout": 1,
        "early_end": 2,
        "no_usage": 1,
    }
    assert s["total_output_tokens"] == 24


def test_error_object_style_inside_the_stream(transport: str) -> None:
    w = wl(n=2, c=2)
    with fake_server(error_after={0: 0, 1: 2}, error_style="object") as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert {r.error_kind for r in res.records} == {"stream_error"}


@pytest.mark.parametrize(
    "variant",
    [{"spaced_json": True}, {"crlf": True}, {"split_writes": True}, {"tokens_per_chunk": 4}],
)
def test_unusual_but_valid_streams(variant: dict[str, object], transport: str) -> None:
    w = wl(n=6, c=3, out=8)
    with fake_server(**variant) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    tpc = int(variant.get("tokens_per_chunk", 1))  # type: ignore[call-overload]
    for r in res.records:
        assert r.ok, r.error
        assert r.output_tokens == 8 and len(r.itl) == -(-8 // tpc) - 1


def test_chat_endpoint_counts_the_role_chunk_like_vllm(transport: str) -> None:
    w = wl(n=4, c=2, out=5, endpoint="chat")
    with fake_server() as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
        assert set(srv.stats.paths) == {"/v1/chat/completions"}
        assert srv.stats.bodies[0]["messages"][0]["role"] == "user"
    for r in res.records:
        assert r.ok and r.output_tokens == 5 and len(r.itl) == 5  # role chunk + 5 content chunks


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(suffix: str, transport: str) -> None:
    w = wl(n=2, c=1)
    with fake_server() as srv:
        assert check_endpoint(srv.base_url + suffix, MODEL) == [MODEL]
        res = run_load_sync(srv.base_url + suffix, MODEL, prompts_for(w), w, transport=transport)
        assert set(srv.stats.paths) == {"/v1/completions"}
    assert all(r.ok for r in res.records)


def test_key_is_sent_and_never_stored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], transport: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    w = wl(n=4, c=2)
    with fake_server(api_key=KEY, echo_auth_in_errors=True) as srv:
        res = run_load_sync(
            srv.base_url, MODEL, prompts_for(w, {0: "[[http500]]"}), w, transport=transport
        )
        assert set(srv.stats.authorization) == {f"Bearer {KEY}"}
    assert [r.ok for r in res.records] == [False, True, True, True]
    assert "***" in (res.records[0].error or "")  # the careless server echoed it; we scrubbed it
    stored = json.dumps([r.to_row() for r in res.records]) + json.dumps(res.health())
    stored += repr(res) + repr(res.records)
    out = capsys.readouterr()
    assert KEY not in stored + out.out + out.err


def test_wrong_key_fails_requests_as_http_401(
    monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-nope")
    w = wl(n=2, c=1)
    with fake_server(api_key=KEY) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert {(r.error_kind, r.http_status) for r in res.records} == {("http", 401)}


def test_unknown_model_is_an_http_failure(transport: str) -> None:
    w = wl(n=2, c=2)
    with fake_server() as srv:
        res = run_load_sync(srv.base_url, "other", prompts_for(w), w, transport=transport)
    assert {r.http_status for r in res.records} == {404}
    assert "does not exist" in (res.records[0].error or "")


def test_connection_refused_is_an_exception_record(transport: str) -> None:
    w = wl(n=3, c=2)
    res = run_load_sync(
        f"http://127.0.0.1:{free_port()}", MODEL, prompts_for(w), w, transport=transport
    )
    assert len(res.records) == 3 and {r.error_kind for r in res.records} == {"exception"}


def test_progress_and_prompt_count() -> None:
    w = wl(n=5, c=2)
    seen: list[tuple[int, int]] = []
    with fake_server() as srv:
        run_load_sync(
            srv.base_url, MODEL, prompts_for(w), w, on_progress=lambda d, t: seen.append((d, t))
        )
        with pytest.raises(LoadError, match="needs 5"):
            run_load_sync(srv.base_url, MODEL, ["x"] * 4, w)
    assert seen[-1] == (5, 5)


def test_cancel_stops_dispatch_and_in_flight_requests(transport: str) -> None:
    w = wl(n=100, c=4, out=50)
    cancel = threading.Event()

    def arm(phase: str) -> None:  # stop 0.15 s into the measured phase, however slow the start
        if phase == "loading":
            threading.Timer(0.15, cancel.set).start()

    with fake_server(itl_ms=20) as srv:
        res = run_load_sync(
            srv.base_url, MODEL, prompts_for(w), w, cancel=cancel, on_phase=arm, transport=transport
        )
    assert res.cancelled and 4 <= len(res.records) < 100  # dispatch stopped: not all 100 sent
    stopped = [r for r in res.records if not r.ok]
    assert stopped and all(
        r.error_kind == "exception" and "cancelled" in (r.error or "") for r in stopped
    )


def test_unknown_transport_is_refused() -> None:
    with pytest.raises(LoadError, match="transport"):
        run_load_sync("http://127.0.0.1:1", MODEL, ["a"], wl(n=1, c=1), transport="carrier-pigeon")
