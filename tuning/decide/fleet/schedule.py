"""Which run goes to which slot: each value's repeats spread over slots (and nodes), so no value is
tied to one GPU or one machine's noise.

The driver keeps a list of pending jobs in the experiment's counterbalanced order (A B B A); when a
slot is free it asks `pick` for the next job for that slot: the first pending job whose value has
run least on that slot, then least on that slot's node. A retry (attempt 2) avoids the node it was
lost on whenever another node has a slot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tuning.engine.params import format_value


@dataclass(frozen=True)
class Slot:
    """One place a run can go: `index` of `count` slots of node `node_id`; `lab_path` when the
    node's Ray already has this lab on its path (a node the lab started)."""

    node_id: str
    index: int
    host: str = ""
    lab_path: bool = False

    @property
    def name(self) -> str:
        return f"{self.node_id[:8]}/{self.index}"


@dataclass
class Job:
    """One run of the plan: its order (seq), value, repeat; `avoid_node` for a retry."""

    seq: int
    value: Any
    repeat: int
    attempt: int = 1
    avoid_node: str | None = None

    @property
    def key(self) -> str:
        return format_value(self.value)


@dataclass
class History:
    """What has been placed where: value -> slots, value -> nodes."""

    on_slot: Counter[tuple[str, str]] = field(default_factory=Counter)
    on_node: Counter[tuple[str, str]] = field(default_factory=Counter)

    def record(self, job: Job, slot: Slot) -> None:
        self.on_slot[(job.key, slot.name)] += 1
        self.on_node[(job.key, slot.node_id)] += 1


def jobs_for(plan: list[tuple[Any, int]], todo: list[int] | None = None) -> list[Job]:
    """The plan's jobs, only positions `todo` (a resume: those without a finished run) if given."""
    wanted = range(len(plan)) if todo is None else todo
    return [Job(seq, *plan[seq]) for seq in wanted]


def pick(pending: list[Job], slot: Slot, history: History, nodes: set[str]) -> Job | None:
    """The job `slot` should run next (removed from `pending`), or None when it should wait.

    A retry that must avoid this slot's node waits for another node's slot, unless this is the
    only node left in `nodes`.
    """
    allowed = [
        job for job in pending if job.avoid_node != slot.node_id or not (nodes - {job.avoid_node})
    ]
    if not allowed:
        return None
    # Retries first (they are late already), then the least-seen value here, then plan order.
    best = min(
        allowed,
        key=lambda job: (
            job.attempt == 1,
            history.on_slot[(job.key, slot.name)],
            history.on_node[(job.key, slot.node_id)],
            job.seq,
        ),
    )
    pending.remove(best)
    history.record(best, slot)
    return best


def assign(plan: list[tuple[Any, int]], slots: list[Slot]) -> dict[str, list[Job]]:
    """A whole plan laid out round by round over `slots` (each slot takes a job in turn): the
    placement `pick` gives when every run takes as long; for tests and `fleet status`."""
    pending, history, nodes = jobs_for(plan), History(), {s.node_id for s in slots}
    out: dict[str, list[Job]] = {s.name: [] for s in slots}
    while pending:
        for slot in slots:
            job = pick(pending, slot, history, nodes)
            if job is not None:
                out[slot.name].append(job)
    return out
