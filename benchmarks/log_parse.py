"""What one run's server log costs the lab: a normal log against a 200 MB one, side by side.

Issue 41 (case 8): a 200 MB log was read whole several times (100 s, 770 MB of RSS), and one long
line cost minutes in a regex. What the lab does with one run's log, done here exactly so:

1. while the server starts, one follower reads the log as it is written
(tuning.engine.startup_anatomy.
   LogStamps with the run's tuning.engine.log_facts.Sheet): the start's milestones and its facts;
2. at /health 200, the follower's last read (what was written since), the startup facts, the
   anatomy, what the engine runs with (tuning.engine.effective.check_start): the "after healthy"
   time,
   what the start timeout must also cover;
3. at the end of the run, the stored tail (200 lines, tuning.engine.server_log.tail).

The logs are built from a real vLLM 0.25 start on the H200 (examples/h200, run-1.log), written by
another process as the engine would, as fast as it can:
- normal: its start (to "Application startup complete"), then its ~600 request lines;
- 200 MB after healthy: the same start; 200 MB of its API server's request lines follow before the
  tail is read (a long run at a high rate, or request logging on);
- 200 MB in the start: the same 200 MB in the middle of the start (an engine flooding its log), then
  the rest of the start; /health answers `--settle` seconds after the last line (the H200's start
  took ~1 s from its last engine line to healthy).
Beside the time after healthy, each row shows the lab's whole CPU time with the log (the follower
included) and, for a caller with no follower (a failed start's words, the CLI), one whole read
of the log as it stood at healthy.

Each measurement runs in a fresh process; its peak RSS over its imports is reset and read back
(/proc/self/clear_refs, VmHWM); the logs are interleaved round by round (normal, after, start,
then the reverse order); medians and ratios to normal are printed.

    .venv/bin/python benchmarks/log_parse.py [--rounds 5] [--mb 200] [--settle 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

H200_LOGS = REPO / "examples" / "h200" / "server-logs.tar.gz"
RUN_LOG = "logs/experiment-1/run-1.log"
PIDS = (561, 682)  # its APIServer and EngineCore
HEALTHY_MARK = b"Application startup complete."
SCENARIOS = ("normal", "after", "start")
LABELS = {"normal": "normal", "after": "200 MB after healthy", "start": "200 MB in the start"}
# The engine's side: append a file to the log in 1 MiB writes, as fast as it can.
WRITER = (
    "import sys\n"
    "with open(sys.argv[1], 'rb') as src, open(sys.argv[2], 'ab', buffering=0) as dst:\n"
    "    while piece := src.read(1 << 20):\n"
    "        dst.write(piece)\n"
)


def build(folder: Path, megabytes: int) -> dict[str, tuple[Path, Path]]:
    """scenario -> (what the engine writes until healthy, the whole log at the end of the run)."""
    with tarfile.open(H200_LOGS) as tar:
        member = tar.extractfile(RUN_LOG)
        assert member is not None
        lines = member.read().splitlines(keepends=True)
    healthy = next(i for i, line in enumerate(lines) if HEALTHY_MARK in line) + 1
    start, rest = b"".join(lines[:healthy]), b"".join(lines[healthy:])
    requests = b"".join(line for line in lines[healthy:] if line.startswith(b"(APIServer"))
    flood = requests * (megabytes * 1_000_000 // len(requests) + 1)
    flood = flood[: flood.rfind(b"\n", 0, megabytes * 1_000_000) + 1]
    half = start.rfind(b"\n", 0, len(start) // 2) + 1
    files: dict[str, bytes] = {
        "normal-start": start,
        "normal-end": start + rest,
        "after-end": start + flood + rest,
        "start-start": start[:half] + flood + start[half:],
    }
    files["start-end"] = files["start-start"] + rest
    paths = {}
    for name, data in files.items():
        paths[name] = folder / f"{name}.log"
        paths[name].write_bytes(data)
    return {
        "normal": (paths["normal-start"], paths["normal-end"]),
        "after": (paths["normal-start"], paths["after-end"]),
        "start": (paths["start-start"], paths["start-end"]),
    }


def lab_work(written: Path, at_end: Path, log: Path, settle: float) -> dict[str, Any]:
    """A start (the engine writes `written` into `log`), then what the runner does with it."""
    from tuning.engine import effective
    from tuning.engine.launch import Launch
    from tuning.engine.log_facts import Sheet, read_sheet
    from tuning.engine.server import startup_facts
    from tuning.engine.server_log import tail
    from tuning.engine.startup_anatomy import LogStamps, anatomy

    launch = Launch(argv=["vllm"], env={}, host="127.0.0.1", port=9, config={"max-num-seqs": 64})
    cpu0, t0 = time.process_time(), time.monotonic()
    log.write_bytes(b"")
    sheet = Sheet(set(PIDS))
    follower = LogStamps(log, t0, sheet).start()
    subprocess.run([sys.executable, "-c", WRITER, str(written), str(log)], check=True)
    time.sleep(settle)  # the rest of the start: /health answers
    healthy = time.perf_counter()
    deadline = time.monotonic() + 300
    stamps = follower.stop(until_s=time.monotonic() - t0, deadline=deadline)
    facts = startup_facts(sheet)
    facts.anatomy = anatomy(stamps, time.monotonic() - t0, sheet)
    check = effective.check_start(launch, sheet, facts, "gpu")
    after_healthy = time.perf_counter() - healthy
    t_tail = time.perf_counter()
    lines = tail(at_end, 200).splitlines()
    tail_s = time.perf_counter() - t_tail
    cpu = time.process_time() - cpu0
    t_whole = time.perf_counter()
    whole = read_sheet(log, set(PIDS), deadline)
    whole_s = time.perf_counter() - t_whole
    assert whole.values == sheet.values and len(lines) == 200
    return {
        "after_healthy": after_healthy + tail_s,
        "cpu": cpu,
        "whole_read": whole_s,
        "kv_cache_tokens": facts.kv_cache_tokens,
        "complete": sheet.complete and sheet.bytes_read == written.stat().st_size,
        "mismatches": len(check.mismatches),
    }


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(written: Path, at_end: Path, log: Path, settle: float) -> None:
    """One measurement: the peak RSS is reset after the imports (Linux: clear_refs 5 resets
    VmHWM), so what is printed is what the log work added to the process's resident set."""
    import tuning.engine.effective  # noqa: F401 (imported before the baseline)
    import tuning.engine.server  # noqa: F401

    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kib("VmRSS")
    said = lab_work(written, at_end, log, settle)
    added = (_status_kib("VmHWM") - base) * 1024
    print(json.dumps({"rss_added": max(0, added), **said}))


def measure(files: tuple[Path, Path], log: Path, settle: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, __file__, "--child", *map(str, (*files, log)), "--settle", str(settle)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--child", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        written, at_end, log = args.child
        child(written, at_end, log, args.settle)
        return
    with tempfile.TemporaryDirectory(prefix="log-parse-") as tmp:
        logs = build(Path(tmp), args.mb)
        sizes = {k: (v[0].stat().st_size, v[1].stat().st_size) for k, v in logs.items()}
        got: dict[str, list[dict[str, Any]]] = {k: [] for k in SCENARIOS}
        for r in range(args.rounds):
            order = SCENARIOS if r % 2 == 0 else tuple(reversed(SCENARIOS))
            for name in order:
                got[name].append(measure(logs[name], Path(tmp) / "server.log", args.settle))
    print(
        f"{args.rounds} rounds, interleaved; each a fresh process; medians; /health answers "
        f"{args.settle:g} s after the engine's last start line"
    )
    head = ("log", "at healthy", "at end", "after healthy", "x normal", "lab CPU", "x normal")
    print(f"{head[0]:<21}{head[1]:>11}{head[2]:>10}{head[3]:>14}{head[4]:>9}", end="")
    print(f"{head[5]:>9}{head[6]:>9}{'RSS added':>11}{'whole read':>11}{'KV tokens':>10}")

    def med(name: str, key: str) -> float:
        return float(statistics.median(m[key] for m in got[name]))

    for name in SCENARIOS:
        start, end = sizes[name]
        ok = all(m["complete"] for m in got[name])
        print(
            f"{LABELS[name]:<21}{start / 1e6:>9.2f}MB{end / 1e6:>8.1f}MB"
            f"{med(name, 'after_healthy') * 1e3:>12.1f}ms"
            f"{med(name, 'after_healthy') / med('normal', 'after_healthy'):>9.2f}"
            f"{med(name, 'cpu'):>8.2f}s{med(name, 'cpu') / med('normal', 'cpu'):>9.1f}"
            f"{med(name, 'rss_added') / 1e6:>9.1f}MB{med(name, 'whole_read'):>10.2f}s"
            f"{got[name][0]['kv_cache_tokens']!s:>10}" + ("" if ok else "  (read cut short!)")
        )


if __name__ == "__main__":
    main()
