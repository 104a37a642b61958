"""A server spawned ahead (tuning.engine.prelaunch, issue 38 item 3): the launcher imports the
entry point and waits; nothing binds or starts before go; its time to healthy is what a plain
start would show (its imports + go to healthy); an import that fails is the start's failure in the
log's words; a launcher nobody lets go exits without starting anything."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.engines import fake_command, fake_spec
from tuning.engine.launch import Launch
from tuning.engine.prelaunch import (
    LAUNCHER,
    PrelaunchedServer,
    as_plain_start,
    read_marks,
    wrap,
)
from tuning.engine.procs import group_members
from tuning.engine.server import StartFailure, http_get, port_is_free

IMPORT_S = 1.5


def module_launch() -> Launch:
    """The fake run as `python -m tests.fakes.fake_vllm`, as the embedded engine runs vLLM."""
    return dataclasses.replace(fake_spec(), command=fake_command(module=True)).launch({})


def wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_what_the_launcher_wraps(tmp_path: Path) -> None:
    py = sys.executable
    assert wrap([py, "-m", "vllm.entrypoints.openai.api_server", "--port", "1"]) == [
        py,
        str(LAUNCHER),
        "--module",
        "vllm.entrypoints.openai.api_server",
        "--",
        "--port",
        "1",
    ]
    assert wrap([py, "/x/server.py", "--a"]) == [
        py,
        str(LAUNCHER),
        "--script",
        "/x/server.py",
        "--",
        "--a",
    ]
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text(f"#!{py}\nfrom vllm.entrypoints.cli.main import main\n")
    wrapped = wrap([str(script), "serve", "m"])
    assert wrapped is not None and wrapped[:4] == [
        py,
        str(LAUNCHER),
        "--entry",
        "vllm.entrypoints.cli.main:main",
    ]
    assert wrapped[-3:] == ["--", "serve", "m"] and "--argv0" in wrapped
    # what it cannot wrap runs as before
    shell = tmp_path / "bin" / "serve-it"
    shell.write_text('#!/bin/sh\nexec vllm serve "$@"\n')
    assert wrap([str(shell), "m"]) is None
    assert wrap([py, "-u", "-m", "vllm.entrypoints.openai.api_server"]) is None
    script.write_text("#!/bin/sh\n")  # a `vllm` that is no python console script
    assert wrap([str(script), "serve", "m"]) is None


def test_a_plain_start_of_the_same_seconds_is_what_a_prelaunched_one_shows() -> None:
    """Imports 3 s, waited for go until 10 s, healthy at 14 s: a plain start would have shown
    3 + 4 = 7 s, its milestones shifted by the 7 s of waiting."""
    healthy, stamps = as_plain_start(14.0, {"api_process": 10.5, "api_listening": 13.0}, 3.0, 10.0)
    assert healthy == 7.0
    assert stamps == {"prelaunch_imports": 3.0, "api_process": 3.5, "api_listening": 6.0}
    # go before the imports were done: nothing was waited for
    assert as_plain_start(5.0, {}, 3.0, 1.0)[0] == 5.0


def test_a_prelaunched_server_imports_before_go_and_shows_its_imports_in_time_to_healthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_IMPORT_S", str(IMPORT_S))
    launch = module_launch()
    server = PrelaunchedServer(launch, tmp_path / "server.log")
    try:
        server.start()
        wait_for(lambda: read_marks(server.log_path) is not None)
        time.sleep(1.0)  # held: no port, no engine, however long it waits
        assert server.alive() and port_is_free(launch.host, launch.port)
        assert len(group_members(server.pgid or 0)) == 1  # no EngineCore child yet
        server.release()
        facts = server.wait_healthy(60)
        assert http_get(launch.base_url + "/health")[0] == 200
    finally:
        server.stop()
    marks = read_marks(server.log_path)
    assert marks is not None and marks.went_at is not None and marks.imports_s >= IMPORT_S
    assert server.started_at is not None and server.healthy_at is not None
    imported_s = marks.imported_at - server.started_at
    went_to_healthy = server.healthy_at - marks.went_at
    tth = facts.time_to_healthy_s
    assert tth is not None and tth == pytest.approx(imported_s + went_to_healthy, abs=0.01)
    assert tth < server.healthy_at - server.started_at - 0.9  # the wait for go is left out
    phases = facts.anatomy["phases"]
    assert phases[0]["key"] == "prelaunch_imports" and phases[0]["seconds"] >= IMPORT_S
    assert facts.anatomy["phases_sum_s"] == pytest.approx(tth, abs=0.01)
    assert facts.anatomy["prelaunch"]["hidden_s"] >= IMPORT_S  # all of it before go


def test_an_import_error_in_the_launcher_is_the_starts_failure_in_the_logs_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_IMPORT_ERROR", "fake broken install: no module named torch")
    server = PrelaunchedServer(module_launch(), tmp_path / "server.log")
    server.start()
    wait_for(lambda: not server.alive())  # it fails while the previous server still stops
    server.release()  # its input is gone: no error here
    with pytest.raises(StartFailure) as failed:
        server.wait_healthy(30)
    assert "fake broken install: no module named torch" in failed.value.reason
    assert "ImportError" in failed.value.log_tail
    assert not group_members(server.pgid or 0)


def test_a_launcher_never_let_go_starts_nothing_and_leaves_no_process(tmp_path: Path) -> None:
    """Stopped while it imports or waits (a cancelled experiment), or its input closed without go
    (the lab died): it exits, nothing was bound."""
    launch = module_launch()
    stopped = PrelaunchedServer(launch, tmp_path / "a.log")
    stopped.start()
    stopped.stop(grace=5.0)
    assert not stopped.alive() and not group_members(stopped.pgid or 0)

    orphan = PrelaunchedServer(module_launch(), tmp_path / "b.log")
    orphan.start()
    assert orphan.proc is not None and orphan.proc.stdin is not None
    orphan.proc.stdin.close()  # as when the lab's process is gone
    try:
        assert orphan.proc.wait(30) == 0
    finally:
        orphan.stop()
    assert "no go" in orphan.log_path.read_text()
    assert "vLLM server version" not in orphan.log_path.read_text()
    assert os.path.exists(LAUNCHER)
