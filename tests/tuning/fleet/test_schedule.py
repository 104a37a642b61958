"""Which run goes to which slot: each value's repeats spread over slots and nodes; a retry avoids
the node it was lost on."""

from __future__ import annotations

from collections import defaultdict

from tuning.decide.fleet.schedule import History, Job, Slot, assign, pick
from tuning.experiment.order import counterbalanced


def _slots(nodes: int, per_node: int) -> list[Slot]:
    return [Slot(f"node{n}", i) for i in range(per_node) for n in range(nodes)]


def test_each_values_repeats_land_on_different_slots_and_nodes() -> None:
    plan = counterbalanced([2, 4, 8, 16], repeats=2)
    layout = assign(plan, _slots(nodes=2, per_node=2))
    slots_of: dict[str, set[str]] = defaultdict(set)
    nodes_of: dict[str, set[str]] = defaultdict(set)
    for slot, jobs in layout.items():
        for job in jobs:
            slots_of[job.key].add(slot)
            nodes_of[job.key].add(slot.split("/")[0])
    assert sum(len(jobs) for jobs in layout.values()) == 8
    assert all(len(s) == 2 for s in slots_of.values()), slots_of  # no value tied to one slot
    assert all(len(n) == 2 for n in nodes_of.values()), nodes_of  # nor to one node


def test_a_retry_waits_for_another_nodes_slot_unless_none_is_left() -> None:
    retry = Job(3, 8, 1, attempt=2, avoid_node="node0")
    pending = [Job(4, 2, 1), retry]
    history = History()
    first = pick(pending, Slot("node0", 0), history, {"node0", "node1"})
    assert first is not None and first.attempt == 1  # node0 may not take the retry
    assert pick(pending, Slot("node1", 0), history, {"node0", "node1"}) is retry
    alone = [Job(5, 8, 1, attempt=2, avoid_node="node0")]
    assert pick(alone, Slot("node0", 0), History(), {"node0"}) is not None  # the only node left


def test_retries_go_first() -> None:
    pending = [Job(0, 2, 0), Job(1, 4, 0, attempt=2, avoid_node="gone")]
    job = pick(pending, Slot("node0", 0), History(), {"node0", "gone"})
    assert job is not None and job.attempt == 2
