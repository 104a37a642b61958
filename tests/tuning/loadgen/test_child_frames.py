"""The child's frames arrive whole or are named as cut. On the H200 a fleet run failed with
`UnpicklingError: pickle data was truncated`: the child wrote its result with one unbuffered
`write`, which a handled signal interrupts after a pipe's worth of bytes, and the rest was lost."""

from __future__ import annotations

import io
import pickle
import signal
import subprocess
import sys
import textwrap
import time

from tuning.measure.loadgen.child import _FRAME, _read_frames, write_all
from tuning.settings import REPO_ROOT

SIZE = 32 << 20

WRITER = textwrap.dedent(
    f"""
    import os, signal, sys
    from tuning.measure.loadgen.child import write_all
    signal.signal(signal.SIGUSR1, lambda *_: None)  # handled, as the child's SIGTERM is
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    write_all(out, b"x" * {SIZE})
    """
)


def test_a_signal_during_a_large_write_loses_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER], stdout=subprocess.PIPE, cwd=REPO_ROOT)
    assert proc.stdout is not None
    got = 0
    for _ in range(100):  # read slowly, and signal the writer while it is blocked on the pipe
        got += len(proc.stdout.read1(1 << 16))
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.002)
    got += len(proc.stdout.read())
    assert proc.wait(timeout=30) == 0
    assert got == SIZE


def test_write_all_finishes_a_partial_write() -> None:
    class Short(io.RawIOBase):
        """At most 1,000 bytes a call, like a write a signal cut short."""

        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b: bytes) -> int:  # type: ignore[override]
            chunk = bytes(b[:1000])
            self.data += chunk
            return len(chunk)

    out = Short()
    write_all(out, b"y" * 10_500)
    assert bytes(out.data) == b"y" * 10_500


def test_a_result_frame_cut_short_is_reported_not_unpickled() -> None:
    payload = pickle.dumps({"records": list(range(1000))})
    stream = io.BytesIO(_FRAME.pack(b"R", len(payload)) + payload[: len(payload) // 2])
    result, failure = _read_frames(stream, {})
    assert result is None
    assert failure is not None and "R frame was cut off" in failure
    assert f"of {len(payload):,} bytes" in failure
