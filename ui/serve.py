"""How `make run` starts the app: Streamlit's own `streamlit run`, with the host check
(ui/host_guard.py) in front of every HTTP route and the websocket, and a terminal token
(ui/terminal_token.py) printed for engine command changes from the browser.

    python -m ui.serve app.py --server.port 8501 [any other `streamlit run` option]

The entry script and every option pass through to Streamlit unchanged. Streamlit (1.67) builds
its Starlette app in `starlette_server.create_starlette_app`; the check wraps what it returns. If
a Streamlit without that name is installed, the launcher refuses to serve rather than serve
unguarded (tests/ui/test_serve.py starts the real server and sends it foreign hosts).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ui import terminal_token
from ui.host_guard import ENV, HostGuard, HostListError, allowed_hosts, parse_hosts

USAGE = "usage: python -m ui.serve SCRIPT [streamlit run options]"


def guarded(create: Callable[[Any], Any], user_hosts: str) -> Callable[[Any], Any]:
    """`create_starlette_app` with the host check in front of the app it builds; the names come
    from the config Streamlit has loaded by then (the bound address, the browser address)."""
    from streamlit import config

    def create_guarded(runtime: Any) -> Any:
        allowed = allowed_hosts(
            user_hosts,
            str(config.get_option("server.address") or ""),
            str(config.get_option("browser.serverAddress") or ""),
        )
        names = ", ".join(sorted(allowed))
        print(f"  The app answers only for: {names} (more: {ENV})", flush=True)
        return HostGuard(create(runtime), allowed)

    return create_guarded


def install(environ: Mapping[str, str]) -> None:
    """Put the host check in front of the app Streamlit will build. Raises HostListError for a
    bad TUNING_LAB_ALLOWED_HOSTS and SystemExit when Streamlit has no place to put it."""
    from streamlit.web.server.starlette import starlette_server

    user_hosts = environ.get(ENV, "")
    parse_hosts(user_hosts)  # refused now, before anything is served
    create = getattr(starlette_server, "create_starlette_app", None)
    if not callable(create):
        raise SystemExit(
            "refused: this Streamlit has no starlette_server.create_starlette_app, so the host "
            "check cannot be installed; install the pinned streamlit (make setup)"
        )
    starlette_server.create_starlette_app = guarded(create, user_hosts)  # type: ignore[attr-defined,assignment]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        install(os.environ)
    except HostListError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    terminal_token.announce(terminal_token.issue())
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *args]
    cli.main(prog_name="streamlit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
