"""The app answers only for the host names it serves: an ASGI check in front of every HTTP route
and the websocket, so a web page whose own name was rebound to 127.0.0.1 (DNS rebinding) gets 403.

Streamlit's CORS and XSRF checks cannot stop that page: to the browser it is same-origin with the
rebound name, and Streamlit's own `server.allowedHosts` guards the websocket only. Here a request
is served only when its `Host` (and its `Origin`, when it sends one) names localhost, 127.0.0.1,
::1, the address the server binds, or a name in TUNING_LAB_ALLOWED_HOSTS. Ports are not compared:
an SSH tunnel may bring the app to another local port. `ui/serve.py` installs the check.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, TextIO
from urllib.parse import urlsplit

ENV = "TUNING_LAB_ALLOWED_HOSTS"
LOOPBACK = ("localhost", "127.0.0.1", "::1")
# A DNS name (labels of letters, digits, hyphens, underscores) or IPv4; IPv6 through ipaddress.
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")
_WARNED_MAX = 32  # distinct refused hosts named on the terminal, then silence (no log flooding)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HostListError(ValueError):
    """A name in TUNING_LAB_ALLOWED_HOSTS that is not a bare host name or address."""


def _normal(name: str) -> str:
    return name.strip().lower().rstrip(".")


def _valid(name: str) -> bool:
    if _NAME.match(name):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def parse_hosts(text: str) -> list[str]:
    """The comma-separated names of TUNING_LAB_ALLOWED_HOSTS, normalised; a name with a scheme,
    port, path or wildcard is refused (HostListError names it)."""
    out = []
    for raw in text.split(","):
        name = _normal(raw)
        if not name:
            continue
        if name.startswith("[") and name.endswith("]"):
            name = name[1:-1]
        if not _valid(name):
            raise HostListError(
                f"{ENV}: {raw.strip()!r} is not a host name or address (give bare names, "
                "comma-separated, without scheme, port or wildcard)"
            )
        out.append(name)
    return out


def _serves_one_address(address: str) -> bool:
    """Whether a bind address names one host (not every interface, not empty)."""
    try:
        return not ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return bool(address)


def allowed_hosts(user: str, *addresses: str) -> frozenset[str]:
    """Loopback names, each address the app is served on (those naming one host), and the user's
    names (TUNING_LAB_ALLOWED_HOSTS's text)."""
    served = [a for a in (_normal(a).strip("[]") for a in addresses) if _serves_one_address(a)]
    return frozenset([*LOOPBACK, *served, *parse_hosts(user)])


def host_name(value: str | None) -> str | None:
    """The host name of a Host header (`name[:port]`, `[v6]:port`), or None when it is not one."""
    if not value:
        return None
    try:
        parts = urlsplit(f"//{value}")
        _ = parts.port  # a port that is not a number in range raises
    except ValueError:
        return None
    if parts.username is not None or parts.password is not None or parts.path or parts.query:
        return None
    if parts.fragment or not parts.hostname:
        return None
    return _normal(parts.hostname)


def origin_name(value: str) -> str | None:
    """The host name of an Origin header (`scheme://host[:port]`); None for `null` or junk."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https"):
        return None
    return host_name(parts.netloc)


def _shown(value: str | None) -> str:
    """A header value for a message: quoted, escaped, and cut (it is the caller's)."""
    return repr(value if value is None or len(value) <= 80 else value[:80] + "...")


def host_refusal(headers: Iterable[tuple[bytes, bytes]], allowed: frozenset[str]) -> str:
    """Why a request with these headers is not served, or "" when it is."""
    host: str | None = None
    origin: str | None = None
    for key, value in headers:
        name = key.lower()
        if name == b"host":
            if host is not None:
                return "two Host headers"
            host = value.decode("latin-1")
        elif name == b"origin":
            if origin is not None:
                return "two Origin headers"
            origin = value.decode("latin-1")
    if host_name(host) not in allowed:
        return f"Host {_shown(host)} is not a name this lab serves"
    if origin is not None and origin_name(origin) not in allowed:
        return f"Origin {_shown(origin)} is not a name this lab serves"
    return ""


class HostGuard:
    """ASGI middleware: HTTP requests and websocket upgrades for a host (or from an origin) outside
    `allowed` get 403 before any route sees them; lifespan events pass through."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str], log: TextIO | None = None) -> None:
        self.app = app
        self.allowed = allowed
        self.log = log if log is not None else sys.stderr
        self.warned: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        why = host_refusal(scope.get("headers") or [], self.allowed)
        if not why:
            await self.app(scope, receive, send)
            return
        self._warn(why)
        if kind == "websocket":
            await receive()  # websocket.connect; closing before accepting answers HTTP 403
            await send({"type": "websocket.close", "code": 1008})
            return
        body = f"refused: {why} (names it answers: {ENV})\n".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _warn(self, why: str) -> None:
        """One line on the terminal per distinct refusal, the first few only."""
        if why in self.warned or len(self.warned) >= _WARNED_MAX:
            return
        self.warned.add(why)
        print(f"tuning lab: refused a request: {why} (allow it with {ENV})", file=self.log)
