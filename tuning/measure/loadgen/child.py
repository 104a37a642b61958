"""The load generator in its own Python process, so the client has a core's worth of GIL to itself
while telemetry threads run in the caller.

Frames on the child's stdout: 1 byte kind + 8 bytes length + payload. P = progress (two int64),
S = phase name, R = pickled `tuning.measure.loadgen.client.LoadResult`, E = error text. The job
(and the key, if given) goes in on stdin: never argv. Entry: `python -m
tuning.measure.loadgen.child --child`.

A child imports everything before it reads its job, so one can be started ahead (`prespawn`: a
second of Python start and imports a run, on an H100, moved out of the run's time) and wait for
its job; the next `run_load_in_subprocess` of the same interpreter takes it. One that is never
given a job reads the end of its stdin when the lab closes it (`discard_spare`) or exits, and
exits without sending anything.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Unpack

from core.redact import scrub_key
from tuning.measure.loadgen.client import DEFAULT_TRANSPORT, LoadError, LoadOptions, LoadResult
from tuning.measure.loadgen.start import check_prompts, run_load_sync
from tuning.measure.traffic.workload import Workload
from tuning.settings import REPO_ROOT

if TYPE_CHECKING:
    from tuning.measure.traffic import Schedule

_FRAME = struct.Struct("<cQ")
ERR_TAIL_BYTES = 2000  # of the child's stderr, in the error when it sent no result
_PROGRESS = struct.Struct("<qq")


@dataclass
class _Child:
    """A load generator process and the file its stderr goes to."""

    proc: subprocess.Popen[bytes]
    err: IO[bytes]

    @classmethod
    def spawn(cls, python: str) -> _Child:
        err = tempfile.TemporaryFile()  # noqa: SIM115 (kept open with the child, closed by close())
        try:
            proc = subprocess.Popen(
                [python, "-m", "tuning.measure.loadgen.child", "--child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=str(REPO_ROOT),
                start_new_session=True,
            )
        except BaseException:
            err.close()
            raise
        return cls(proc, err)

    def close(self) -> None:
        """End a child never given its job (its stdin closed: it exits) and its stderr file."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.err.close()


_spare: dict[str, _Child] = {}  # an interpreter -> its child started ahead, waiting for a job
_spare_lock = threading.Lock()


def prespawn(python: str | None = None) -> None:
    """Start the next load generator now (its Python start and imports), to be taken by the next
    `run_load_in_subprocess` of the same interpreter."""
    key = python or sys.executable
    with _spare_lock:
        child = _spare.get(key)
        if child is not None and child.proc.poll() is None:
            return
        _spare[key] = _Child.spawn(key)
    if child is not None:
        child.close()  # one that died waiting


def discard_spare() -> None:
    """End every child started ahead that was not taken (the runner's close)."""
    with _spare_lock:
        children = list(_spare.values())
        _spare.clear()
    for child in children:
        child.close()


def _take(python: str) -> _Child:
    """The child started ahead for `python` when it still waits, else a new one."""
    with _spare_lock:
        child = _spare.pop(python, None)
    if child is not None and child.proc.poll() is None:
        return child
    if child is not None:
        child.close()
    return _Child.spawn(python)


def run_load_in_subprocess(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    workload: Workload,
    *,
    python: str | None = None,
    plan: Schedule | None = None,
    **options: Unpack[LoadOptions],
) -> LoadResult:
    """`run_load_sync` in a child Python process (`python`, default this interpreter); the
    callbacks run here, in the caller. Cancelling sends SIGTERM (a graceful stop).

    With `plan`, the child runs `schedule.run_schedule_sync` instead: `prompts` are the warm-ups
    only and `workload` is `schedule.plan_workload(plan, ...)`."""
    if plan is None:
        check_prompts(prompts, workload)
    else:
        from tuning.measure.loadgen.schedule import check_plan

        check_plan(plan, prompts, workload)
    api_key = options.get("api_key")
    cancel = options.get("cancel")
    job = {
        "base_url": base_url,
        "model": model,
        "prompts": list(prompts),
        "workload": workload.to_dict(),
        "api_key": api_key,
        "transport": options.get("transport", DEFAULT_TRANSPORT),
        "server_stats": options.get("server_stats", False),
        "plan": plan,
    }
    child = _take(python or sys.executable)
    with child.err as err:
        proc = child.proc
        assert proc.stdin is not None and proc.stdout is not None
        stop_watch = threading.Event()

        def watch() -> None:
            while not stop_watch.is_set() and proc.poll() is None:
                if cancel is not None and cancel.wait(0.1):
                    proc.send_signal(signal.SIGTERM)
                    return
                if cancel is None:
                    stop_watch.wait(0.1)

        watcher = threading.Thread(target=watch, name="loadgen-cancel", daemon=True)
        watcher.start()
        try:
            try:
                proc.stdin.write(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            result, failure = _read_frames(proc.stdout, options)
            proc.wait(timeout=30)
        finally:
            stop_watch.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            watcher.join(timeout=1)
        if result is not None:
            return result
        size = err.seek(0, os.SEEK_END)  # the end of what it said, however much it said
        err.seek(max(0, size - ERR_TAIL_BYTES))
        tail = err.read().decode("utf-8", "replace")
        raise LoadError(
            failure
            or f"the load generator process exited with {proc.returncode}: "
            f"{scrub_key(tail, api_key)}"
        )


def _read_frames(stream: IO[bytes], options: LoadOptions) -> tuple[LoadResult | None, str | None]:
    """Pass progress and phases to the caller's callbacks until the child closes its stdout;
    returns (the result, the child's error text), each None when it sent none."""
    on_progress = options.get("on_progress")
    on_phase = options.get("on_phase")
    result: LoadResult | None = None
    failure: str | None = None
    while True:
        head = stream.read(_FRAME.size)
        if len(head) < _FRAME.size:
            return result, failure
        kind, size = _FRAME.unpack(head)
        payload = stream.read(size)
        if len(payload) < size:  # the child ended mid-frame: say so, never unpickle a stump
            cut = f"got {len(payload):,} of {size:,} bytes"
            return result, f"the load generator's {kind.decode()} frame was cut off ({cut})"
        if kind == b"P" and on_progress is not None:
            on_progress(*_PROGRESS.unpack(payload))
        elif kind == b"S" and on_phase is not None:
            on_phase(payload.decode())
        elif kind == b"R":
            result = pickle.loads(payload)
        elif kind == b"E":
            failure = payload.decode("utf-8", "replace")


def write_all(out: IO[bytes], data: bytes) -> None:
    """All of `data`: an unbuffered write to a pipe that a signal interrupts (the SIGTERM of a
    Stop, any handled signal) returns a partial count, and a plain `write` then dropped the rest
    of the frame (on the H200 a fleet run's result arrived cut: UnpicklingError)."""
    view = memoryview(data)
    while view:
        written = out.write(view)
        view = view[written or 0 :]


def _child_main() -> int:
    """Entry of `python -m tuning.measure.loadgen.child --child`: job on stdin, frames on stdout."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the frame stream
    raw = sys.stdin.buffer.read()
    if not raw:  # started ahead and never given a job: the lab closed it, or is gone
        return 0
    job = pickle.loads(raw)
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    parent = os.getppid()

    def orphan_watch() -> None:
        while not cancel.wait(0.5):
            if os.getppid() != parent:
                cancel.set()

    threading.Thread(target=orphan_watch, name="orphan-watch", daemon=True).start()

    def send(kind: bytes, payload: bytes) -> None:
        write_all(out, _FRAME.pack(kind, len(payload)) + payload)

    options: LoadOptions = {
        "api_key": job["api_key"],
        "on_progress": lambda d, t: send(b"P", _PROGRESS.pack(d, t)),
        "cancel": cancel,
        "on_phase": lambda ph: send(b"S", ph.encode()),
        "transport": job.get("transport", DEFAULT_TRANSPORT),
        "server_stats": job.get("server_stats", False),
    }
    workload = Workload.from_dict(job["workload"])
    try:
        if job.get("plan") is not None:
            from tuning.measure.loadgen.schedule import run_schedule_sync

            result = run_schedule_sync(
                job["base_url"], job["model"], job["plan"], job["prompts"], workload, **options
            )
        else:
            result = run_load_sync(
                job["base_url"], job["model"], job["prompts"], workload, **options
            )
    except Exception as exc:
        send(b"E", scrub_key(f"{type(exc).__name__}: {exc}", job.get("api_key")).encode())
        return 1
    # LoadResult is defined in tuning.measure.loadgen.client (not in this __main__), so the parent
    # can
    # unpickle it.
    send(b"R", pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        sys.exit(_child_main())
    print(
        "internal entry point: use tuning.measure.loadgen.child.run_load_in_subprocess",
        file=sys.stderr,
    )
    sys.exit(2)
