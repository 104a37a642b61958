"""The DNS-rebinding test (issue 41 case 11): the real app, started the way `make run` starts it
(`python -m ui.serve app.py --server.port PORT`, ui/serve.py), answers 127.0.0.1, localhost and
the names in TUNING_LAB_ALLOWED_HOSTS, and refuses with 403 an HTTP request and a websocket
upgrade (`/_stcore/stream`) that carry `Host: evil.example` and a matching Origin. Before, the
websocket answered 101 and the page behind it could change and run the engine command."""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tools.browser import answers_ok, lab_env
from tuning.engine.doctor import check_port
from tuning.engine.launch import free_port
from ui import serve

REPO = Path(__file__).resolve().parents[2]
ARGV = ["-m", "ui.serve", "app.py", "--server.port"]  # the Makefile's `run` line


def _get(port: int, host: str, path: str = "/_stcore/health", origin: str = "") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        if origin:
            conn.putheader("Origin", origin)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def _upgrade(port: int, name: str, origin: str) -> int:
    """The status of a websocket upgrade to /_stcore/stream for `Host: name:port`."""

    async def go() -> int:
        try:
            async with connect(
                f"ws://{name}:{port}/_stcore/stream",
                host="127.0.0.1",  # the socket goes to the app, whatever the name resolves to
                port=port,
                origin=origin,  # type: ignore[arg-type]
                subprotocols=["streamlit"],  # type: ignore[list-item]
                open_timeout=20,
            ) as ws:
                assert ws.response is not None
                return ws.response.status_code
        except InvalidStatus as exc:
            return exc.response.status_code

    return asyncio.run(go())


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """The app as `make run` starts it, on a free port and a fresh lab, with one name of the
    user's allowed; yields its port and its terminal's output file."""
    home = tmp_path_factory.mktemp("lab")
    out = home / "terminal.txt"
    port = free_port()
    env = {**lab_env(home), "TUNING_LAB_ALLOWED_HOSTS": "lab.example"}
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, *ARGV, str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not answers_ok(f"http://127.0.0.1:{port}/_stcore/health"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the app did not start: {out.read_text()[-2000:]}")
            time.sleep(0.3)
        yield port, out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_make_run_starts_the_app_through_the_launcher() -> None:
    recipe = (REPO / "Makefile").read_text()
    assert "$(BIN)/python " + " ".join(ARGV) + " $(PORT)" in recipe
    assert "streamlit run" not in recipe  # no start without the check


def test_a_foreign_host_is_refused_over_http_and_the_websocket(app: tuple[int, Path]) -> None:
    port, _ = app
    evil = f"evil.example:{port}"
    assert _get(port, evil, origin=f"http://{evil}") == 403
    assert _get(port, evil, "/") == 403
    assert _get(port, evil, "/_stcore/host-config") == 403
    assert _upgrade(port, "evil.example", f"http://{evil}") == 403
    assert _upgrade(port, "127.0.0.1", f"http://{evil}") == 403  # a foreign page's origin


def test_the_served_names_are_answered(app: tuple[int, Path]) -> None:
    port, _ = app
    for name in ("127.0.0.1", "localhost", "lab.example"):
        assert _get(port, f"{name}:{port}") == 200, name
        assert _get(port, f"{name}:{port}", "/") == 200, name
    assert _get(port, f"[::1]:{port}") == 200
    assert _get(port, "localhost:9000") == 200  # an SSH tunnel's local port
    assert _upgrade(port, "127.0.0.1", f"http://127.0.0.1:{port}") == 101
    assert _upgrade(port, "lab.example", f"http://lab.example:{port}") == 101


def test_the_terminal_shows_the_token_and_the_names_and_doctor_knows_the_app(
    app: tuple[int, Path],
) -> None:
    port, out = app
    assert _get(port, "evil.example") == 403
    time.sleep(0.5)  # the line reaches the file
    text = out.read_text()
    assert re.search(r"asks for this terminal token:\n  [A-Za-z0-9_-]{32}\n", text), text
    assert "answers only for: 127.0.0.1, ::1, lab.example, localhost" in text
    assert "refused a request: Host 'evil.example" in text
    found = check_port(port)
    assert found.ok and found.detail.endswith("(the app, running)"), found


def test_a_bad_allowed_hosts_list_is_refused_before_serving(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUNING_LAB_ALLOWED_HOSTS", "http://lab.example:8501")
    assert serve.main(["app.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refused: TUNING_LAB_ALLOWED_HOSTS: 'http://lab.example:8501' is not")
    assert serve.main([]) == 2 and "usage" in capsys.readouterr().err
