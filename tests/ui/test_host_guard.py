"""The host check in front of the app (ui/host_guard.py), driven as an ASGI app: a request for a
host name the lab does not serve, or from an origin it does not serve, gets 403 before the app
sees it (issue 41 case 11: DNS rebinding); the served names, ports ignored, pass through."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from ui.host_guard import (
    HostGuard,
    HostListError,
    allowed_hosts,
    host_name,
    host_refusal,
    origin_name,
    parse_hosts,
)

ALLOWED = allowed_hosts("lab.example, 10.0.0.5", "127.0.0.1")


def test_the_served_names_are_loopback_the_bound_address_and_the_users() -> None:
    assert {"localhost", "127.0.0.1", "::1", "lab.example", "10.0.0.5"} == ALLOWED
    assert "gpu-box" in allowed_hosts("", "gpu-box")  # a bound name is served
    assert allowed_hosts("", "::", "") == {"localhost", "127.0.0.1", "::1"}  # every interface: none
    assert "box.lan" in allowed_hosts(" Box.LAN. ,, [fe80::1] ")
    assert "fe80::1" in allowed_hosts("[fe80::1]")


@pytest.mark.parametrize("bad", ["http://lab.example", "lab.example:8501", "*.example", "a b"])
def test_a_user_name_with_scheme_port_wildcard_or_space_is_refused(bad: str) -> None:
    with pytest.raises(HostListError, match=r"^TUNING_LAB_ALLOWED_HOSTS: .* is not a host name"):
        parse_hosts(f"ok.example,{bad}")


def test_host_and_origin_names() -> None:
    assert host_name("127.0.0.1:8501") == "127.0.0.1"
    assert host_name("[::1]:8501") == "::1"
    assert host_name("LocalHost.") == "localhost"
    for junk in (None, "", "evil.example:99999", "user@localhost", "localhost/x", ":8501"):
        assert host_name(junk) is None, junk
    assert origin_name("http://localhost:9000") == "localhost"
    assert origin_name("null") is None and origin_name("file://") is None


def _headers(host: str | None, origin: str | None = None) -> list[tuple[bytes, bytes]]:
    out = [] if host is None else [(b"host", host.encode())]
    return out + ([] if origin is None else [(b"origin", origin.encode())])


def test_refusal_reads_host_then_origin() -> None:
    assert host_refusal(_headers("127.0.0.1:8501"), ALLOWED) == ""
    assert (
        host_refusal(_headers("localhost:9000", "http://localhost:9000"), ALLOWED) == ""
    )  # tunnel
    assert host_refusal(_headers("lab.example", "https://lab.example"), ALLOWED) == ""
    assert host_refusal(_headers("evil.example:8501", "http://evil.example:8501"), ALLOWED) == (
        "Host 'evil.example:8501' is not a name this lab serves"
    )
    assert host_refusal(_headers("127.0.0.1:8501", "http://evil.example"), ALLOWED) == (
        "Origin 'http://evil.example' is not a name this lab serves"
    )
    assert host_refusal(_headers("127.0.0.1", "null"), ALLOWED).startswith("Origin 'null'")
    assert host_refusal(_headers(None), ALLOWED) == "Host None is not a name this lab serves"
    assert (
        host_refusal(_headers("evil.example") + _headers("127.0.0.1"), ALLOWED)
        == "two Host headers"
    )
    two_origins = _headers("127.0.0.1", "http://evil.example") + [(b"Origin", b"http://127.0.0.1")]
    assert host_refusal(two_origins, ALLOWED) == "two Origin headers"
    long = host_refusal(_headers("x" * 10_000), ALLOWED)
    assert len(long) < 200  # the caller's value is cut before it reaches the terminal


class _App:
    """The app behind the guard: records what reached it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen.append(scope["type"])


def _call(guard: HostGuard, scope: dict[str, Any], incoming: list[dict[str, Any]]) -> list[Any]:
    sent: list[Any] = []

    async def receive() -> Any:
        return incoming.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    return sent


def test_the_guard_answers_403_to_a_foreign_host_over_http_and_websocket() -> None:
    app, log = _App(), io.StringIO()
    guard = HostGuard(app, ALLOWED, log)
    evil = _headers("evil.example:8501", "http://evil.example:8501")
    sent = _call(guard, {"type": "http", "headers": evil}, [])
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 403
    assert b"Host 'evil.example:8501' is not a name this lab serves" in sent[1]["body"]
    sent = _call(guard, {"type": "websocket", "headers": evil}, [{"type": "websocket.connect"}])
    assert sent == [{"type": "websocket.close", "code": 1008}]  # before accept: HTTP 403
    assert app.seen == []
    assert log.getvalue().count("refused a request: Host 'evil.example:8501'") == 1  # once


def test_the_guard_passes_served_hosts_and_lifespan_through() -> None:
    app = _App()
    guard = HostGuard(app, ALLOWED, io.StringIO())
    assert _call(guard, {"type": "http", "headers": _headers("localhost:8501")}, []) == []
    assert _call(guard, {"type": "websocket", "headers": _headers("[::1]:8501")}, []) == []
    assert _call(guard, {"type": "lifespan"}, []) == []
    assert app.seen == ["http", "websocket", "lifespan"]
