"""The traffic options a user chooses (a spec file or saved name, a data file, an open-loop rate,
conversations) and the `WorkloadSpec` they make.

One typed object that the CLI (`from_cli_args`), the New experiment page and `bench` all build,
so the rules that turn choices into a spec live here and not in one front end that the others
import (vLLM sweep's pattern: an args dataclass with `add_cli_args` / `from_cli_args`). Without
any traffic option the classic fixed-length closed loop is kept (`to_spec` returns None).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuning.measure.traffic.arrival import ScheduleTooLong
from tuning.measure.traffic.bounded import read_prefix, resolve_path
from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.materialize import check
from tuning.measure.traffic.spec import (
    FILE_KINDS,
    Arrival,
    LengthDist,
    MultiTurn,
    SharedPrefixes,
    Source,
    WorkloadSpec,
    _to_plain,
    read_spec,
)

# --multi-turn without a number: turns per synthetic conversation.
DEFAULT_TURNS = 3
# Parameters whose runs set the arrival rate: their arrival must be an open loop.
RATE_PARAMS = ("request-rate", "burstiness")
# Number options, their flag, and whether 0 is refused too (rates and factors); NaN, inf never.
_NUMBER_FLAGS = (
    ("request_rate", "--request-rate", True),
    ("burstiness", "--burstiness", True),
    ("trace_speed", "--trace-speed", True),
    ("think_time", "--think-time", False),
)
# The flag that set a spec field a schedule refusal names.
_FIELD_FLAGS = {"arrival.rate": "request_rate", "arrival.speed": "trace_speed"}


@dataclass(frozen=True)
class TrafficOptions:
    """The traffic choices plus the classic workload's numbers they build on (lengths, count,
    concurrency, seed) and the swept parameter (a rate sweep needs an open loop)."""

    workload: str | None = None
    dataset: str | None = None
    dataset_format: str | None = None
    request_rate: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    multi_turn: int | None = None
    think_time: float = 0.0
    trace_speed: float = 1.0
    num_requests: int | None = None
    concurrency: int = 1
    input_len: int = 64
    output_len: int = 64
    shared_prefix_len: int = 0
    seed: int = 0
    param: str | None = None

    @staticmethod
    def add_cli_args(p: argparse.ArgumentParser) -> None:
        """Real-traffic flags; none given keeps the classic workload (the other workload flags)."""
        g = p.add_argument_group("traffic (tuning.measure.traffic)")
        g.add_argument(
            "--workload", default=None, help="a spec JSON file, or a saved workload's name"
        )
        g.add_argument("--dataset", default=None, help="a data file (workloads/ is searched too)")
        g.add_argument("--dataset-format", choices=list(FILE_KINDS), default=None)
        g.add_argument(
            "--request-rate", type=float, default=None, help="open loop: requests per second"
        )
        g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape; 1 = Poisson")
        g.add_argument(
            "--max-concurrency", type=int, default=None, help="open loop / trace: in-flight cap"
        )
        g.add_argument(
            "--multi-turn",
            type=int,
            nargs="?",
            const=DEFAULT_TURNS,
            default=None,
            metavar="TURNS",
            help=f"conversations (synthetic: TURNS turns each, default {DEFAULT_TURNS})",
        )
        g.add_argument("--think-time", type=float, default=0.0, help="seconds between turns")
        g.add_argument("--trace-speed", type=float, default=1.0, help="trace replay speed factor")

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace, **overrides: Any) -> TrafficOptions:
        """The options a parsed command line holds; a flag a command lacks keeps its default."""
        values = {
            f.name: getattr(args, f.name)
            for f in dataclasses.fields(cls)
            if getattr(args, f.name, None) is not None
        }
        return cls(**{**values, **overrides})

    def check_numbers(self) -> None:
        """Refuse a NaN, infinite or negative number option (and 0 for a rate or factor)."""
        for name, flag, strict in _NUMBER_FLAGS:
            value = getattr(self, name)
            if value is None:
                continue
            if not math.isfinite(value) or value < 0 or (strict and value == 0):
                sign = ">" if strict else ">="
                raise TrafficError(f"{flag} must be a finite number {sign} 0, got {value}")

    def to_spec(self, db: Path | None = None) -> WorkloadSpec | None:
        """The spec the options describe, or None for the classic workload (no traffic option).

        Its data file is read and its schedule's length checked here (`traffic.check`), so a bad
        file or a schedule of years is refused at the flag, before a run is planned or an
        endpoint asked."""
        self.check_numbers()
        spec = self._spec(db)
        if spec is None:
            return None
        try:
            check(spec)
        except ScheduleTooLong as exc:
            name = _FIELD_FLAGS.get(exc.field, "")
            value = getattr(self, name) if name else None
            flag = "--" + name.replace("_", "-")
            raise TrafficError(f"{flag} {value:g}: {exc.detail}" if value else str(exc)) from None
        return spec

    def _spec(self, db: Path | None) -> WorkloadSpec | None:
        rate = self.request_rate
        if rate is None and self.param in RATE_PARAMS:
            rate = 1.0  # the runner sets each value; the arrival must be an open loop
        turns = self.multi_turn
        if self.workload:
            spec = load_spec(self.workload, db)
        elif self.dataset:
            kind = self.dataset_format or guess_format(self.dataset)
            spec = WorkloadSpec(
                source=Source(kind, str(resolve_path(self.dataset))),
                input=None,
                output=None,
                num_requests=self.num_requests,
                seed=self.seed,
            )
        elif rate is not None or turns is not None:
            prefix = self.shared_prefix_len
            spec = WorkloadSpec(
                input=LengthDist(mean=self.input_len),
                output=LengthDist(mean=self.output_len),
                prefixes=SharedPrefixes(1, prefix) if prefix else SharedPrefixes(),
                num_requests=self.num_requests or 64,
                seed=self.seed,
            )
        else:
            return None
        kind = spec.source.kind
        cap = self.max_concurrency
        if rate is not None:
            arrival = Arrival("open", rate=rate, burstiness=self.burstiness, max_concurrency=cap)
        elif kind == "trace" and not self.workload:
            arrival = Arrival("trace", speed=self.trace_speed, max_concurrency=cap)
        elif not self.workload:
            arrival = Arrival("closed", concurrency=self.concurrency or 1)
        else:
            arrival = spec.arrival
        changes: dict[str, Any] = {"arrival": arrival}
        if turns is not None:
            dist = LengthDist(mean=turns) if kind == "synthetic" else None
            changes["multi_turn"] = MultiTurn(True, dist, self.think_time)
        data = {**spec.to_dict(), **{k: _to_plain(v) for k, v in changes.items()}}
        return WorkloadSpec.from_dict(data)


def guess_format(path: str) -> str:
    """sharegpt for .json, csv for .csv, trace for a JSONL whose first line has a timestamp."""
    lower = path.lower()
    if lower.endswith(".json"):
        return "sharegpt"
    if lower.endswith(".csv"):
        return "csv"
    first = read_prefix(path).split("\n", 1)[0]  # a bounded sniff
    return "trace" if '"timestamp"' in first else "jsonl"


def load_spec(ref: str, db: Path | None = None) -> WorkloadSpec:
    """A spec file (JSON), or the name of a workload saved in the DB."""
    if Path(ref).is_file():
        return read_spec(ref)
    from store import connect, queries

    if db is not None and db.exists():
        with connect(db, readonly=True) as conn:
            row = queries.get_workload(conn, ref)
        if row is not None:
            return WorkloadSpec.from_dict(row["spec"])
    raise TrafficError(f"{ref!r} is neither a spec file nor a saved workload (workload list)")
