"""Soak: restart the embedded engine N times the lab's way and count what is left behind.

Each cycle is what the runner does between two values: start vLLM with a fresh port
(`EngineSpec.launch` + `ServerProcess`), wait for /health, send one completion, stop the group and
wait until the port is free. After every stop the script looks for leaks: a process that carries
this soak's marker in its environment (every engine process inherits it), the cycle's port still
bound, and the lab process's own open file descriptors, threads and RSS. It prints one line per
cycle and a summary; it exits 1 when anything leaked (RSS growth is reported, not judged: Python's
allocator keeps freed arenas).

The engine is the lab's current one (settings / TUNING_LAB_ENGINE*, default the embedded CPU
engine). Run it alone on the machine (it starts the real engine):

    flock /tmp/engine.lock .venv/bin/python benchmarks/soak.py --restarts 50

Against the fake vLLM (lab-side leaks only, no engine, seconds a restart):

    export TUNING_LAB_ENGINE=custom TUNING_LAB_ENGINE_MODEL=fake-org/fake-model \
        TUNING_LAB_SERVED_MODEL_NAME=fake \
        TUNING_LAB_ENGINE_COMMAND="$PWD/.venv/bin/python tests/fakes/fake_vllm.py"
    .venv/bin/python benchmarks/soak.py --restarts 50
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tuning.engine.embedded import current_spec  # noqa: E402
from tuning.engine.server import ServerProcess, port_is_free  # noqa: E402

MARKER = "TUNING_LAB_SOAK"


def marked(token: str) -> list[psutil.Process]:
    """Live processes (not zombies) that inherited this soak's marker: engines and children."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid == me or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(MARKER) == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def lab_state() -> dict[str, int]:
    me = psutil.Process()
    return {
        "fds": me.num_fds(),
        "threads": me.num_threads(),
        "rss": me.memory_info().rss,
        "children": len(me.children(recursive=True)),
    }


def complete(base_url: str, model: str) -> int:
    """One short streamed completion; its output token count from the server's usage."""
    body = {
        "model": model,
        "prompt": "hello",
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        base_url + "/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    tokens = 0
    with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 (loopback only)
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage") or {}
                tokens = int(usage.get("completion_tokens") or tokens)
    return tokens


def cycle(i: int, logs: Path, token: str) -> dict[str, Any]:
    spec = current_spec()
    launch = spec.launch({"max-num-seqs": 4})
    server = ServerProcess(launch, logs / f"restart-{i}.log")
    t0 = time.monotonic()
    server.start()
    try:
        server.wait_healthy(timeout=600)
        ready = time.monotonic() - t0
        tokens = complete(launch.base_url, spec.served_model_name)
    finally:
        t1 = time.monotonic()
        server.stop()
        stopped = time.monotonic() - t1
    time.sleep(0.5)  # init reaps an orphan a moment after it exits
    left = marked(token)
    return {
        "restart": i,
        "ready_s": ready,
        "stop_s": stopped,
        "tokens": tokens,
        "left": [(p.pid, p.name()) for p in left],
        "port_free": port_is_free(launch.host, launch.port),
        **lab_state(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None, help="write every cycle here")
    args = parser.parse_args()
    if args.restarts < 1:
        parser.error("--restarts must be at least 1")
    token = uuid.uuid4().hex
    os.environ[MARKER] = token  # every server started from here inherits it
    start = lab_state()
    rows = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        for i in range(1, args.restarts + 1):
            row = cycle(i, Path(tmp), token)
            rows.append(row)
            print(
                f"restart {i:3d}: ready {row['ready_s']:5.1f} s, stop {row['stop_s']:4.1f} s, "
                f"{row['tokens']} tokens, left {len(row['left'])} process(es), "
                f"port {'free' if row['port_free'] else 'BUSY'}, fds {row['fds']}, "
                f"threads {row['threads']}, rss {row['rss'] / 2**20:.1f} MiB",
                flush=True,
            )
    end = lab_state()
    first = rows[0]
    leaked = [r for r in rows if r["left"] or not r["port_free"]]
    spec = current_spec()
    print(f"\n{args.restarts} restarts of {spec.name} (vllm {spec.vllm_version})")
    print(f"processes left after a stop: {sum(len(r['left']) for r in rows)}")
    print(f"ports still bound after a stop: {sum(not r['port_free'] for r in rows)}")
    print(
        f"lab fds: {start['fds']} before, {first['fds']} after restart 1, {end['fds']} at the end"
    )
    print(f"lab threads: {start['threads']} before, {end['threads']} at the end")
    print(f"lab child processes at the end: {end['children']}")
    print(
        f"lab RSS: {start['rss'] / 2**20:.1f} MiB before, {first['rss'] / 2**20:.1f} after "
        f"restart 1, {end['rss'] / 2**20:.1f} at the end "
        f"({(end['rss'] - first['rss']) / 2**20:+.1f} MiB over restarts 2..{args.restarts})"
    )
    ready = sorted(r["ready_s"] for r in rows)
    stop = sorted(r["stop_s"] for r in rows)
    print(
        f"start to healthy: median {ready[len(ready) // 2]:.1f} s (max {ready[-1]:.1f}); "
        f"stop: median {stop[len(stop) // 2]:.1f} s (max {stop[-1]:.1f})"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    fd_growth = end["fds"] - first["fds"]
    ok = not leaked and fd_growth <= 0 and end["children"] == 0
    print("PASS: nothing leaked" if ok else f"LEAK: {len(leaked)} cycle(s), fds {fd_growth:+d}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
