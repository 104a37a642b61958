"""`tuning-lab fleet status [--json]`, and the fleet flags of `experiment`:
`--fleet local|ray --slots N --ray-address ADDR --gpus-per-run K`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from tuning.cli.args import refused, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("fleet",)


def add_fleet_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that send an experiment's runs to the fleet (Ray) instead of one at a time."""
    g = p.add_argument_group("fleet (runs in parallel through Ray; `make fleet` installs it)")
    g.add_argument(
        "--fleet",
        choices=["local", "ray"],
        default=None,
        help="local: a Ray the lab starts here; ray: an existing cluster (--ray-address)",
    )
    g.add_argument("--slots", type=int, default=None, help="local: slots; ray: at most this many")
    g.add_argument("--ray-address", default="auto", help="ray: auto or HOST:PORT")
    g.add_argument(
        "--gpus-per-run", type=int, default=None, help="GPUs per run (default: tensor-parallel)"
    )


def fleet_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The experiment's fleet options from its flags (None: no fleet); FleetError when unusable."""
    from tuning.decide.fleet import FleetError, require_ray
    from tuning.decide.fleet.cluster import FleetOptions

    if not getattr(args, "fleet", None):
        return None
    require_ray()
    if getattr(args, "base_url", None):
        raise FleetError("--fleet starts servers on its workers; it cannot attach (--base-url)")
    if args.slots is not None and args.slots < 1:
        raise FleetError("--slots must be at least 1")
    if args.gpus_per_run is not None and args.gpus_per_run < 0:
        raise FleetError("--gpus-per-run must be 0 or more")
    return FleetOptions(args.fleet, args.slots, args.ray_address, args.gpus_per_run).to_dict()


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser("fleet", help="the fleet (Ray): nodes, slots, GPUs, what each runs")
    p.add_argument("action", choices=["status"])
    p.add_argument("--ray-address", default="auto", help="auto or HOST:PORT")
    p.add_argument("--json", action="store_true")


def fleet_status(address: str) -> dict[str, Any]:
    """Nodes of the cluster at `address`: slots, GPUs, and the lab's workers on each."""
    from tuning.decide.fleet import SLOT_RESOURCE, import_ray
    from tuning.decide.fleet.cluster import connect_ray, slots_of

    ray = import_ray()
    connect_ray(address)
    try:
        nodes = ray.nodes()
        available = ray.available_resources()
        actors = _lab_actors()
    finally:
        ray.shutdown()
    out = []
    for node in nodes:
        res = node.get("Resources") or {}
        node_id = str(node["NodeID"])
        out.append(
            {
                "node_id": node_id,
                "host": node.get("NodeManagerHostname"),
                "address": node.get("NodeManagerAddress"),
                "alive": bool(node.get("Alive")),
                "slots": int(res.get(SLOT_RESOURCE, 0)),
                "gpus": int(res.get("GPU", 0)),
                "cpus": int(res.get("CPU", 0)),
                "running": [a for a in actors if a.get("node_id") == node_id],
            }
        )
    return {
        "address": address,
        "nodes": out,
        "slots_total": len(slots_of(nodes)),
        "slots_free": int(available.get(SLOT_RESOURCE, 0)),
    }


def _lab_actors() -> list[dict[str, Any]]:
    """The lab's run workers alive on the cluster (Ray's state API), best effort."""
    try:
        from ray.util.state import list_actors

        found = list_actors(filters=[("class_name", "=", "RunWorker"), ("state", "=", "ALIVE")])
    except Exception:
        return []
    return [{"actor_id": a.actor_id, "node_id": a.node_id, "pid": a.pid} for a in found]


def run(args: argparse.Namespace) -> int:
    from tuning.decide.fleet import FleetError, require_ray

    try:
        require_ray()
        status = fleet_status(args.ray_address)
    except FleetError as exc:
        return refused(str(exc))
    except Exception as exc:  # no cluster at that address
        return refused(f"no Ray cluster at {args.ray_address}: {type(exc).__name__}: {exc}")
    if args.json:
        say(json.dumps(status, indent=2))
        return 0
    say(f"fleet at {status['address']}: {status['slots_free']}/{status['slots_total']} slots free")
    for node in status["nodes"]:
        state = "alive" if node["alive"] else "dead"
        say(
            f"  {node['node_id'][:12]} {node['host'] or '?':20} {state:5} slots {node['slots']}"
            f"  GPUs {node['gpus']}  CPUs {node['cpus']}  running {len(node['running'])}"
        )
        for actor in node["running"]:
            say(f"    worker pid {actor['pid']}")
    return 0
