"""Ray for the fleet: a local cluster the lab starts and stops, or an existing one by address.

A local cluster is `ray start --head` in a session of its own (all of Ray's processes share its
process group), bound to 127.0.0.1, with `lab_slot` = N declared, a small object store and no
dashboard; it is stopped by that group, never by name. Nodes of an existing cluster offer slots
by declaring the resource: `ray start --address HEAD:6379 --resources '{"lab_slot": 2}'` (a GPU
node may declare its GPU count / GPUs per run).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tuning.decide.fleet import SLOT_RESOURCE, FleetError, import_ray, require_ray
from tuning.decide.fleet.guard import start_guard
from tuning.decide.fleet.schedule import Slot
from tuning.engine.launch import free_port
from tuning.engine.procs import stop_group

OBJECT_STORE_BYTES = 100 * 2**20
REPO_ROOT = Path(__file__).resolve().parents[3]
# Declared (= 1) by every node this lab starts with itself on the PYTHONPATH of Ray's processes:
# a worker there needs no runtime environment (which would forgo Ray's pre-started workers and
# cost each worker a trip through the runtime-env agent, seconds under load).
LAB_ROOT_RESOURCE = "lab_root_" + hashlib.sha1(str(REPO_ROOT).encode()).hexdigest()[:10]
RAY_STOP_GRACE_S = 3.0  # the lab's own local Ray: SIGKILL after this (the guards stop servers)


@dataclass
class FleetOptions:
    """What `--fleet local|ray --slots N --ray-address ADDR --gpus-per-run K` asked for."""

    mode: str = "local"  # "local": a Ray the lab starts here; "ray": an existing cluster
    slots: int | None = None  # local: slots to declare; ray: at most this many in use
    address: str = "auto"
    gpus_per_run: int | None = None  # None: the tensor-parallel size on GPU nodes, 0 on CPU

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FleetOptions:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def ray_bin() -> str:
    """The `ray` command of this interpreter's environment."""
    local = Path(sys.executable).with_name("ray")
    return str(local) if local.exists() else (shutil.which("ray") or "ray")


def worker_env() -> dict[str, str]:
    """Environment for Ray's processes: the lab importable, the lab's settings as they are here."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT)
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.setdefault("RAY_AUTH_MODE", "token")  # the same token (~/.ray/auth_token) on every side
    return env


@dataclass
class LocalNode:
    """One `ray start` this process ran: its process group, its temp dir, its address, and the
    guard that stops the group if this process dies first."""

    pgid: int
    temp_dir: Path
    address: str
    guard: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        stop_group(self.pgid, grace=RAY_STOP_GRACE_S, timeout=60.0)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if self.guard is not None and self.guard.poll() is None:
            self.guard.terminate()
            self.guard.wait(timeout=10)


def ensure_auth_token(env: dict[str, str]) -> None:
    """The token a head started with token auth needs: `ray start` refuses to create it (only
    `ray.init()` does), so on a machine that never ran Ray the first `--fleet local` failed with
    AuthenticationError. Ray's own CLI makes it (~/.ray/auth_token); it is never printed."""
    if env.get("RAY_AUTH_MODE") != "token" or env.get("RAY_AUTH_TOKEN"):
        return
    home = Path(env.get("HOME", "~"))
    path = Path(env.get("RAY_AUTH_TOKEN_PATH") or home / ".ray" / "auth_token")
    if path.expanduser().exists():
        return
    made = subprocess.run(
        [ray_bin(), "get-auth-token", "--generate"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    if made.returncode != 0:
        tail = made.stderr.decode(errors="replace")[-1000:]
        raise FleetError(f"`ray get-auth-token --generate` failed ({made.returncode}):\n{tail}")


def start_node(
    slots: int,
    head_address: str | None = None,
    num_cpus: int = 1,
    num_gpus: int | None = None,
    extra: dict[str, float] | None = None,
) -> LocalNode:
    """`ray start` (a head, or a node joining `head_address`) on 127.0.0.1 in its own session."""
    if head_address is None:
        ensure_auth_token(worker_env())
    temp_dir = Path(tempfile.mkdtemp(prefix="labray-", dir="/tmp"))
    port = free_port()
    argv = [ray_bin(), "start", "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}"]
    resources = {SLOT_RESOURCE: slots, LAB_ROOT_RESOURCE: 1, **(extra or {})}
    argv += [f"--resources={json.dumps(resources)}"]
    argv += [f"--object-store-memory={OBJECT_STORE_BYTES}", "--disable-usage-stats"]
    if num_gpus is not None:
        argv.append(f"--num-gpus={num_gpus}")
    if head_address is None:
        argv += ["--head", f"--port={port}", "--include-dashboard=false"]
        argv += [f"--temp-dir={temp_dir}"]
        argv += [f"--dashboard-port={free_port()}"]
        address = f"127.0.0.1:{port}"
    else:
        argv += [f"--address={head_address}"]
        address = head_address
    argv += [f"--dashboard-agent-listen-port={free_port()}"]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=worker_env(),
        start_new_session=True,
    )
    out, _ = proc.communicate(timeout=180)
    node = LocalNode(proc.pid, temp_dir, address, start_guard(os.getpid(), [proc.pid]))
    if proc.returncode != 0:
        node.stop()
        tail = out.decode(errors="replace")[-2000:]
        raise FleetError(f"`ray start` failed (exit {proc.returncode}):\n{tail}")
    return node


def slots_of(nodes: list[dict[str, Any]], limit: int | None = None) -> list[Slot]:
    """The slots alive nodes offer (`lab_slot` resources), node by node, at most `limit`."""
    out: list[Slot] = []
    for node in nodes:
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        count = int(resources.get(SLOT_RESOURCE, 0))
        host = str(node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "")
        ours = bool(resources.get(LAB_ROOT_RESOURCE))
        out += [Slot(str(node["NodeID"]), i, host, ours) for i in range(count)]
    # Interleave nodes (node A slot 0, node B slot 0, A 1, ...) so a limit spreads over nodes.
    out.sort(key=lambda s: (s.index, s.node_id))
    return out[:limit] if limit else out


class Fleet:
    """A connected Ray: its slots, GPUs per run; `close()` disconnects (and stops a local Ray)."""

    def __init__(self, options: FleetOptions, local: LocalNode | None):
        self.options = options
        self.local = local

    def slots(self) -> list[Slot]:
        ray = import_ray()

        limit = self.options.slots if self.options.mode == "ray" else None
        return slots_of(ray.nodes(), limit)

    def gpus_per_run(self, tensor_parallel: int = 1) -> int:
        ray = import_ray()

        if self.options.gpus_per_run is not None:
            return self.options.gpus_per_run
        return max(1, tensor_parallel) if ray.cluster_resources().get("GPU", 0) else 0

    def close(self) -> None:
        ray = import_ray()

        try:
            ray.shutdown()
        finally:
            if self.local is not None:
                self.local.stop()


def runtime_env(slot: Slot) -> dict[str, Any] | None:
    """What a worker on `slot`'s node needs to import the lab: nothing on a node this lab started,
    else the lab's path on PYTHONPATH (the lab must be at the same path on that node)."""
    return None if slot.lab_path else {"env_vars": {"PYTHONPATH": str(REPO_ROOT)}}


def connect_ray(address: str) -> None:
    ray = import_ray()  # token auth on: a driver that connects sends the token only when told
    ray.init(address=address, log_to_driver=False, configure_logging=False)


@contextmanager
def open_fleet(options: FleetOptions) -> Iterator[Fleet]:
    """Ray for one experiment: started here (local, stopped at the end) or connected (ray)."""
    require_ray()
    local = None
    if options.mode == "local":
        slots = options.slots or default_local_slots(options.gpus_per_run)
        local = start_node(slots, num_cpus=1)
        address = local.address
    elif options.mode == "ray":
        address = options.address or "auto"
    else:
        raise FleetError(f"unknown fleet mode {options.mode!r}: local or ray")
    try:
        connect_ray(address)
    except Exception as exc:
        if local is not None:
            local.stop()
        raise FleetError(f"cannot connect to Ray at {address}: {exc}") from exc
    fleet = Fleet(options, local)
    try:
        yield fleet
    finally:
        fleet.close()


def default_local_slots(gpus_per_run: int | None) -> int:
    """One slot per GPU set on a GPU machine, else two (a CPU slot each)."""
    from tuning.engine.hardware import hardware_details

    gpus = len(hardware_details()["gpus"])
    if gpus:
        return max(1, gpus // max(1, gpus_per_run or 1))
    return 2
