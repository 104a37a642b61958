"""The engine's ZMQ socket files stay out of /tmp: each start gets a private folder (vLLM's
VLLM_RPC_BASE_PATH) that is gone once the server is stopped, and a folder a dead lab left behind is
swept. Before, every start of the CPU engine left 7 socket files in /tmp (4,499 on the test
machine after ten hours of `make test`)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks import wait_for
from tuning.engine import ipc_dir
from tuning.engine.launch import Launch, free_port
from tuning.engine.params import FORCED_HOST
from tuning.engine.server import ServerProcess

# Binds a socket in $VLLM_RPC_BASE_PATH as vLLM does (ipc://<base>/<uuid>) and answers /health;
# killed by signal, it never unlinks the file, as vLLM's processes don't.
_SOCKET_SERVER = """
import http.server, os, socket, sys, uuid
s = socket.socket(socket.AF_UNIX)
s.bind(os.path.join(os.environ["VLLM_RPC_BASE_PATH"], str(uuid.uuid4())))
s.listen()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The system temp folder, for this test alone (not under tmp_path, which pytest must have
    made first: a socket's path is at most 107 bytes)."""
    base = Path(tempfile.mkdtemp(prefix="ipc-test-"))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _launch(env: dict[str, str] | None = None) -> Launch:
    port = free_port()
    argv = [sys.executable, "-c", _SOCKET_SERVER, FORCED_HOST, str(port)]
    return Launch(argv=argv, env=env or {}, host=FORCED_HOST, port=port)


def _sockets(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if stat.S_ISSOCK(p.lstat().st_mode)]


def test_a_start_binds_in_its_own_folder_and_stop_removes_it(temp: Path, tmp_path: Path) -> None:
    with ServerProcess(_launch(), tmp_path / "server.log") as server:
        server.wait_healthy(timeout=30)
        folder = server.ipc_dir
        assert folder is not None and folder.parent == temp
        assert folder.name.startswith(ipc_dir.PREFIX)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # no other user reaches the engine
        assert wait_for(lambda: len(_sockets(folder)) == 1)
        bound = ipc_dir.bound_paths()
        assert bound is not None and str(_sockets(folder)[0]) in bound
    assert not folder.exists()
    assert _sockets(temp) == []


def test_a_users_own_rpc_path_is_left_as_it_is(temp: Path, tmp_path: Path) -> None:
    theirs = temp / "mine"
    theirs.mkdir()
    with ServerProcess(_launch({ipc_dir.VAR: str(theirs)}), tmp_path / "server.log") as server:
        server.wait_healthy(timeout=30)
        assert server.ipc_dir is None
        assert wait_for(lambda: len(_sockets(theirs)) == 1)
    assert theirs.is_dir() and len(_sockets(theirs)) == 1  # theirs to keep or remove
    assert [p.name for p in temp.iterdir()] == ["mine"]


def _stale_socket(folder: Path) -> None:
    """A socket file nobody binds any more: what a killed engine leaves."""
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(folder / "dead"))
    s.close()


def test_sweep_removes_only_folders_no_live_server_uses(temp: Path) -> None:
    old = time.time() - ipc_dir.STALE_AFTER_S - 5
    dead, live, young, other = ipc_dir.create(), ipc_dir.create(), ipc_dir.create(), temp / "x"
    other.mkdir()
    _stale_socket(dead)
    _stale_socket(young)
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(live / "alive"))
    listening.listen()
    try:
        for folder in (dead, live, other):
            os.utime(folder, (old, old))
        assert ipc_dir.sweep() == [dead]
        assert not dead.exists()
        assert live.is_dir() and young.is_dir() and other.is_dir()
    finally:
        listening.close()
    assert sorted(ipc_dir.sweep(now=time.time() + 2 * ipc_dir.STALE_AFTER_S)) == sorted(
        [live, young]
    )
    assert other.is_dir()


def test_remove_leaves_a_folder_it_did_not_make(temp: Path) -> None:
    theirs = temp / "vllm-rpc"
    theirs.mkdir()
    ipc_dir.remove(theirs)
    ipc_dir.remove(None)
    assert theirs.is_dir()
