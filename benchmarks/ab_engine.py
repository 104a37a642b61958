"""What the A/B scripts that start the embedded engine share (agreement.py, server_agreement.py):
their flags, the one server both clients measure, the load of one run, a client run.

Unlike benchmarks/common.py this module imports the lab (the engine, the server process), so the
GPU scripts under a bare python3 do not use it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import common
from tuning.engine.embedded import embedded_spec, model_dir
from tuning.engine.server import ServerProcess, StartupFacts

REPO = Path(__file__).resolve().parents[1]


def ab_args(
    doc: str | None, *, pairs: int, concurrency: list[int], num_requests: int, output_len: int
) -> argparse.Namespace:
    """The flags of an A/B script (the defaults are the script's), parsed from sys.argv."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=pairs)
    parser.add_argument("--concurrency", type=int, nargs="+", default=concurrency)
    parser.add_argument("--num-requests", type=int, default=num_requests)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=output_len)
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    return parser.parse_args()


@dataclass(frozen=True)
class Server:
    """The running embedded engine: where to reach it, its start, a folder for the clients."""

    base_url: str
    facts: StartupFacts
    tmp: Path

    def load(self, args: argparse.Namespace, concurrency: int, num_requests: int) -> common.Load:
        """One measured run of `args`' lengths at this concurrency, against this server."""
        return common.Load(
            base_url=self.base_url,
            model="tiny",
            tokenizer=model_dir(),
            concurrency=concurrency,
            num_requests=num_requests,
            input_len=args.input_len,
            output_len=args.output_len,
        )


@contextmanager
def embedded_server(concurrency: list[int], prefix: str) -> Iterator[Server]:
    """The embedded engine with room for the largest concurrency, healthy; stopped on exit."""
    spec = embedded_spec()
    launch = spec.launch({**spec.baseline, "max-num-seqs": max(256, max(concurrency))})
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    print(f"starting the embedded engine ({' '.join(launch.argv[3:])})", flush=True)
    with ServerProcess(launch, tmp / "server.log") as server:
        yield Server(launch.base_url, server.wait_healthy(600), tmp)


def run_client(cmd: list[str], tool: str, out: Path) -> dict[str, Any]:
    """Run one client to the end; its result JSON (RuntimeError with its output if it failed)."""
    done = subprocess.run(
        cmd, cwd=REPO, env=common.client_env(), capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"{tool} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result
