"""Issue 11 item 15: the control calls to an endpoint (the model list and a one-token probe) are
made with the `openai` package, and its typed errors become the lab's plain messages about the key,
the base URL and the model name; `experiment --base-url` asks them before it plans anything.
Issue 41, case 9: the probe is bounded (a total and a stall deadline): a server that answers with
keep-alive comments only hung it for ever."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import open_db, queries
from tests.fakes.fake_openai import fake_server
from tuning.measure.loadgen import endpoint
from tuning.measure.loadgen.endpoint import (
    PROBE_EVENT_MAX,
    EndpointError,
    check_endpoint,
    probe_endpoint,
)

MODEL = "fake-model"
KEY = "sk-probe-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_the_control_calls_go_through_the_openai_client(monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    made: list[openai.OpenAI] = []
    real = openai.OpenAI

    def spy(*args: object, **kwargs: object) -> openai.OpenAI:
        made.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(openai, "OpenAI", spy)
    with fake_server() as srv:
        assert check_endpoint(srv.base_url + "/v1", MODEL) == [MODEL]
        probe_endpoint(srv.base_url, MODEL)
        probe_endpoint(srv.base_url, MODEL, endpoint="chat")
        assert srv.stats.paths == ["/v1/completions", "/v1/chat/completions"]
        assert [b["max_tokens"] for b in srv.stats.bodies] == [1, 1]
        assert all(b["stream"] for b in srv.stats.bodies)
        assert srv.stats.authorization == [None, None, None]  # no key: no header at all
    assert len(made) == 3 and all(c.max_retries == 0 for c in made)


def test_the_probe_sends_the_key_and_names_the_model() -> None:
    """(A missing or wrong key and a wrong URL: test_endpoint.py, for both control calls.)"""
    with fake_server(api_key=KEY) as srv:
        probe_endpoint(srv.base_url, MODEL, KEY)
        assert srv.stats.authorization[-1] == f"Bearer {KEY}"
        with pytest.raises(EndpointError, match="model 'llama-9000'.*check the model name"):
            probe_endpoint(srv.base_url, "llama-9000", KEY)


def test_a_server_that_fails_or_hangs_is_a_plain_message() -> None:
    with fake_server(fail_http_on={0}, error_after={1: 0}, hang_on={2}) as srv:
        with pytest.raises(EndpointError, match="HTTP 500: injected failure.*healthy"):
            probe_endpoint(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match="answered an error: injected stream error"):
            probe_endpoint(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match=r"no answer in 1 s.*check the base URL"):
            probe_endpoint(srv.base_url, MODEL, timeout_s=1.0)
    not_root = pytest.raises(EndpointError, match="404.*not an OpenAI-compatible server root")
    with fake_server() as srv, not_root:  # /metrics is not a model list
        check_endpoint(srv.base_url + "/metrics", MODEL)
    assert endpoint.PROBE_PROMPT


def test_an_attached_experiment_with_a_wrong_model_plans_nothing(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db_path = lab_home / "lab.db"
    with fake_server(model="gw-model", api_key=KEY) as srv:
        base = [
            "experiment",
            "--repeats",
            "1",
            "--base-url",
            srv.base_url,
            "--param",
            "concurrency",
            "--values",
            "1",
            "--num-requests",
            "2",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--db",
            str(db_path),
            "--json",
        ]
        env = {"OPENAI_API_KEY": KEY}
        wrong = tuning_cli([*base, "--model", "gw-modle"], lab_home, timeout=120, env=env)
        assert wrong.returncode == 1, wrong.stdout + wrong.stderr
        assert "check the model name (served: gw-model)" in wrong.stderr
        bad_key = tuning_cli(
            [*base, "--model", "gw-model"], lab_home, timeout=120, env={"OPENAI_API_KEY": "sk-x"}
        )
        assert bad_key.returncode == 1 and "check OPENAI_API_KEY" in bad_key.stderr
        assert not db_path.exists() or queries.list_experiments(open_db(db_path)) == []
        ok = tuning_cli([*base, "--model", "gw-model"], lab_home, timeout=120, env=env)
        assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["run_ids"]


def _bounded(call: Callable[[], None], limit: float) -> tuple[BaseException | None, float]:
    """Run `call` in a thread: (what it raised, seconds); fails the test if it is still running
    after `limit` s. A guard against a hang only (the probe used to wait for ever), never a
    speed claim: what ended it is in the words it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            raised.append(exc)

    t0 = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), f"the probe still runs after {limit:g} s"
    return (raised[0] if raised else None), time.monotonic() - t0


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_a_probe_answered_only_with_keepalive_comments_ends_at_its_stall_deadline(
    endpoint: str,
) -> None:
    with fake_server(keepalive_only=True, keepalive_ms=50) as srv:
        raised, took = _bounded(
            lambda: probe_endpoint(srv.base_url, MODEL, endpoint=endpoint, stall_s=1.0), 20
        )
    assert isinstance(raised, EndpointError), raised
    call = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    assert str(raised).startswith(
        f"{srv.base_url}{call} answered only keep-alive comments for 1 s (no data event) "
        f"for model {MODEL!r}"
    )
    assert took >= 1.0, took  # it waited out the stall deadline (a floor: sleeps are never short)


def test_a_probe_ends_at_its_total_deadline_whatever_the_stall_deadline() -> None:
    with fake_server(keepalive_only=True, keepalive_ms=50) as srv:
        raised, _ = _bounded(lambda: probe_endpoint(srv.base_url, MODEL, timeout_s=1.5), 20)
    # the total deadline ended it, not the stall deadline (10 s by default): its words say which
    assert isinstance(raised, EndpointError) and "keep-alive comments for 1.5 s" in str(raised)


def test_a_probe_holds_at_most_one_bounded_event() -> None:
    """A server that streams one endless event (no blank line) is refused past PROBE_EVENT_MAX
    bytes, not read into memory until the deadline."""
    from tuning.measure.loadgen.endpoint import _first_event, _Probe

    class Endless:
        request = None
        sent = 0

        def iter_bytes(self) -> Iterator[bytes]:
            while True:
                self.sent += 65536
                yield b"x" * 65536

    url = "http://127.0.0.1:9/v1/completions"
    probe = _Probe(url, MODEL, None, (time.monotonic() + 60, 60), 60)
    body = Endless()
    with pytest.raises(EndpointError, match="bytes without ending an event"):
        _first_event(body, probe)
    assert PROBE_EVENT_MAX < body.sent <= PROBE_EVENT_MAX + 65536  # refused at the cap


def test_an_attached_experiment_on_a_keepalive_only_server_plans_nothing(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """The issue's case, with the probe's own deadlines (no flag): one line naming the URL and
    what it saw, exit 1, nothing planned; it used to hang for ever."""
    db_path = lab_home / "lab.db"
    args = [
        "experiment",
        "--repeats",
        "1",
        "--param",
        "concurrency",
        "--values",
        "1",
        "--model",
        MODEL,
    ]
    args += ["--num-requests", "2", "--input-len", "4", "--output-len", "2", "--db", str(db_path)]
    with fake_server(keepalive_only=True) as srv:  # timeout=90: a guard against the old hang
        done = tuning_cli([*args, "--base-url", srv.base_url], lab_home, timeout=90)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        f"error: {srv.base_url}/v1/completions answered only keep-alive comments for 10 s"
    ), line
    assert not db_path.exists() or queries.list_experiments(open_db(db_path)) == []


def test_a_probe_reads_comments_then_data_and_a_last_event_without_its_blank_line() -> None:
    from tuning.measure.loadgen.endpoint import _first_event, _Probe

    class Body:
        request = None

        def __init__(self, *chunks: bytes) -> None:
            self.chunks = chunks

        def iter_bytes(self) -> Iterator[bytes]:
            yield from self.chunks

    def probe() -> _Probe:
        return _Probe(
            "http://127.0.0.1:9/v1/completions", MODEL, None, (time.monotonic() + 9, 9), 9
        )

    token = b'data: {"choices":[{"text":"x"}]}'
    _first_event(Body(b": keep-alive\r\n\r\n: ping\n\n", token + b"\n\n"), probe())
    _first_event(Body(b": keep-alive\n\n", token), probe())  # the stream ended at its event
    with pytest.raises(EndpointError, match="streamed nothing"):
        _first_event(Body(b": keep-alive\n\n", b"data: [DONE]\n\n"), probe())
    with pytest.raises(EndpointError, match="answered an error: overloaded; check"):
        _first_event(Body(b'data: {"error": {"message": "overloaded"}}\n\n'), probe())
