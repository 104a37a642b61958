"""Whether a run in a teammate's bundle can stand as evidence for reuse (issue 41): its numbers
must be the ones its own request rows give.

A bundle is not signed. Before the team folder's runs are offered (tuning.experiment.reuse_team),
what can be checked is checked:

1. The bundle's integrity as its format offers it (store.bundle.validate): the manifest's sha256
   and size of `bundle.sqlite`, SQLite's quick_check, exactly the lab's schema, typed and shaped
   rows, references inside the bundle, and each experiment and run as the manifest lists it.
2. The fingerprint is recomputed from the bundle's run rows (tuning.experiment.reuse_match), never
   read from a stored one.
3. Each run the offer would count is its own evidence (`evidence_problem`): its stored counts,
   token totals, throughputs and mean latencies, in its summary and in its columns, are what its
   own request rows give over its own duration, and no request ends after that duration. A
   bundle with one run that fails this is not offered at all.

What none of this can tell apart: a bundle written consistently by someone who copied a
teammate's hardware description, engine identity and workload (every bundle that teammate
publishes prints them) and measured on another machine, or forged request rows to agree with
forged numbers. A hardware string is what the lab that wrote the row says it ran on, not a proof
of a machine; nor is a lab uid, an author or a host. So an offer names who and where each run
comes from (author@host, the bundle's file) and counts nothing until the user says `--reuse`.
"""

from __future__ import annotations

import math
from typing import Any

from sqlite_utils import Database

from store import queries
from tuning.measure.metrics import summarize

# The numbers a run's request rows give by plain counting and averaging (the same in every
# version of the lab), checked against what the run claims.
CHECKED = (
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "mean_e2el_ms",
)
REL_TOL = 1e-6
LATE_S = 1e-3  # a request's end may pass the run's duration by rounding only


def _same(claimed: Any, given: Any) -> bool:
    if claimed is None or given is None:
        return claimed is None and given is None
    if isinstance(claimed, bool) or not isinstance(claimed, (int, float)):
        return False
    return math.isclose(float(claimed), float(given), rel_tol=REL_TOL, abs_tol=1e-9)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def evidence_problem(db: Database, run: dict[str, Any]) -> str | None:
    """Why run `run` (a decoded row of `db`) is not its own evidence, or None: its claimed numbers
    against what its request rows in `db` give (one line)."""
    summary = run.get("summary")
    duration = summary.get("duration") if isinstance(summary, dict) else None
    if not isinstance(duration, (int, float)) or isinstance(duration, bool) or not duration > 0:
        return "it has no duration to check its numbers against"
    assert isinstance(summary, dict)
    records = queries.get_requests(db, int(run["id"]))
    if not records:
        return "it has no request rows to check its numbers against"
    last = max((r.end for r in records if r.end is not None), default=0.0)
    if last > duration * (1 + REL_TOL) + LATE_S:
        return f"a request ends at {last:.3f} s, after the run's whole duration of {duration:.3f} s"
    given = summarize(records, float(duration))
    for key in CHECKED:
        for claimed in (summary.get(key), run.get(key)):
            if not _same(claimed, given.get(key)):
                return (
                    f"it claims {key} {_show(claimed)}, but its own {len(records):,} request rows "
                    f"give {_show(given.get(key))} over its {duration:.2f} s"
                )
    return None
