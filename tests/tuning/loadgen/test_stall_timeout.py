"""Issue 11 item 3: a stream that goes silent after its first token fails as `stalled` after the
stall timeout, not after the whole request timeout; silence before the first token is queueing and
only the request timeout ends it. Issue 41, case 9: a stream of keep-alive comments only is no
queue: it stalls too. Both transports; the fake vLLM process for the `bench` case."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.records import FAILURE_KINDS
from tests.fakes.engines import FAKE_SERVED_NAME, fake_launch
from tests.fakes.fake_openai import fake_server
from tuning.compare.catalog import WORKLOAD_IGNORED
from tuning.engine.server import ServerProcess
from tuning.measure.loadgen.start import run_load_sync
from tuning.measure.traffic.workload import Workload, WorkloadError

REPO = Path(__file__).resolve().parents[3]
MODEL = "fake-model"


def _wl(**kw: object) -> Workload:
    base: dict[str, object] = dict(
        num_requests=4, concurrency=4, input_len=4, output_len=6, num_warmups=0
    )
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def test_stall_timeout_is_a_client_policy_not_a_workload_property() -> None:
    w = _wl()
    assert w.stall_timeout_s == 60.0 and "stalled" in FAILURE_KINDS
    assert _wl(stall_timeout_s=2).fingerprint() == w.fingerprint()
    assert "stall_timeout_s" in WORKLOAD_IGNORED
    old = {k: v for k, v in w.to_dict().items() if k != "stall_timeout_s"}
    assert Workload.from_dict(old).stall_timeout_s == 60.0  # runs stored before the field
    for bad in (0, -1, float("nan"), True, "5"):
        with pytest.raises(WorkloadError, match="stall_timeout_s"):
            _wl(stall_timeout_s=bad)


def test_a_stream_silent_after_its_first_token_fails_as_stalled(transport: str) -> None:
    w = _wl(stall_timeout_s=0.5, request_timeout_s=30)
    prompts = ["[[stall_after=1]]", "ok-1", "[[stall_after=2]]", "ok-3"]
    with fake_server(itl_ms=2) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts, w, transport=transport)
    kinds = [r.error_kind for r in res.records]  # the 30 s request timeout would say `timeout`
    assert kinds == ["stalled", None, "stalled", None], [r.error for r in res.records]
    stalled = res.records[0]
    assert stalled.ttft is not None and "0.5 s" in (stalled.error or "")


def test_silence_before_the_first_token_is_queueing_and_times_out(transport: str) -> None:
    w = _wl(num_requests=2, concurrency=2, stall_timeout_s=0.3, request_timeout_s=1.5)
    t0 = time.monotonic()
    with fake_server() as srv:
        res = run_load_sync(srv.base_url, MODEL, ["[[hang]]", "fine"], w, transport=transport)
    assert [r.error_kind for r in res.records] == ["timeout", None]
    assert time.monotonic() - t0 >= 1.4


def test_a_stream_of_keepalive_comments_only_fails_as_stalled(transport: str) -> None:
    """Issue 41, case 9: a server that answers with SSE comments and never a data event is
    answering, with nothing: `stalled` after the stall timeout (it used to run to the request
    timeout, 600 s by default, for every request)."""
    w = _wl(num_requests=2, concurrency=2, stall_timeout_s=0.5, request_timeout_s=30)
    with fake_server(keepalive_ms=50) as srv:
        res = run_load_sync(
            srv.base_url, MODEL, ["[[keepalive_after=0]]", "fine"], w, transport=transport
        )
    # the 30 s request timeout would say `timeout`; the stall timeout says `stalled`
    assert [r.error_kind for r in res.records] == ["stalled", None], [r.error for r in res.records]
    stalled = res.records[0]
    assert stalled.ttft is None and stalled.error == "only keep-alive comments, no data, for 0.5 s"


def test_keepalive_comments_after_the_first_token_are_no_data(transport: str) -> None:
    """Comments after the first token do not hold the stall off either (this held already)."""
    w = _wl(num_requests=2, concurrency=2, stall_timeout_s=0.5, request_timeout_s=30)
    with fake_server(keepalive_ms=50) as srv:
        res = run_load_sync(
            srv.base_url, MODEL, ["[[keepalive_after=1]]", "ok"], w, transport=transport
        )
    assert [r.error_kind for r in res.records] == ["stalled", None], [r.error for r in res.records]
    assert res.records[0].error == "no data for 0.5 s after the first token"


def test_bench_against_a_server_of_keepalive_comments_ends_in_seconds(tmp_path: Path) -> None:
    """`bench --base-url` (it has no probe: the load is its first request) against a server that
    answers every stream with keep-alive comments only: every request `stalled` at
    --stall-timeout, exit 1, instead of 600 s (the request timeout) a wave."""
    out = tmp_path / "result.json"
    args = ["bench", "--model", MODEL, "--concurrency", "4", "--num-requests", "4"]
    args += ["--input-len", "8", "--output-len", "4", "--stall-timeout", "1"]
    args += ["--out", str(out)]
    with fake_server(keepalive_only=True) as srv:
        done = subprocess.run(
            [sys.executable, "-m", "tuning", *args, "--base-url", srv.base_url],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,  # a guard against the old hang only (600 s a wave)
        )
    assert done.returncode == 1, done.stdout + done.stderr  # no request succeeded
    result = json.loads(out.read_text())
    assert result["completed"] == 0 and result["lab"]["failed_by_kind"] == {"stalled": 4}


def test_a_slow_but_steady_stream_is_not_stalled(transport: str) -> None:
    w = _wl(num_requests=2, concurrency=2, output_len=8, stall_timeout_s=0.5)
    with fake_server(itl_ms=150) as srv:  # 8 tokens over ~1 s, never 0.5 s of silence
        res = run_load_sync(srv.base_url, MODEL, ["a", "b"], w, transport=transport)
    assert all(r.ok for r in res.records), [r.error for r in res.records]


@pytest.mark.parametrize("bench_transport", ["raw", "aiohttp"])
def test_bench_against_a_fake_vllm_that_stalls_ends_in_seconds(
    tmp_path: Path, bench_transport: str
) -> None:
    """The issue's case: one token then nothing, C=8; today it runs for the request timeout."""
    server = ServerProcess(fake_launch(faults="stall_after=1"), tmp_path / "server.log")
    server.start()
    try:
        server.wait_healthy(timeout=30)
        out = tmp_path / "result.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tuning",
                "bench",
                "--base-url",
                server.launch.base_url,
                "--model",
                FAKE_SERVED_NAME,
                "--concurrency",
                "8",
                "--num-requests",
                "8",
                "--input-len",
                "8",
                "--output-len",
                "16",
                "--stall-timeout",
                "2",
                "--transport",
                bench_transport,
                "--out",
                str(out),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,  # a guard against the old hang only (the request timeout a wave)
        )
    finally:
        server.stop(grace=1.0, timeout=10)
    assert done.returncode == 1, done.stdout + done.stderr  # no request succeeded
    result = json.loads(out.read_text())
    assert result["failed"] == 8 and result["completed"] == 0
    assert result["lab"]["failed_by_kind"] == {"stalled": 8}
    assert "stalled: 8" in done.stdout  # each ended at the stall timeout, none at the request's


def test_stall_timeout_flag_on_bench_and_experiment() -> None:
    from tuning.cli.main import build_parser
    from tuning.measure.traffic.workload import workload_from_args

    parser = build_parser()
    common = ["--model", "m", "--num-requests", "2", "--input-len", "4", "--output-len", "2"]
    for argv in (
        ["bench", "--base-url", "http://x", "--concurrency", "1", "--out", "r", *common],
        ["experiment", "--repeats", "1", "--param", "concurrency", "--values", "1,2", *common],
    ):
        assert workload_from_args(parser.parse_args(argv)).stall_timeout_s == 60.0
        got = workload_from_args(parser.parse_args([*argv, "--stall-timeout", "7.5"]))
        assert got.stall_timeout_s == 7.5 and got.request_timeout_s == 600.0
