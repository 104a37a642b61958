"""How a run and an experiment end, decided in one place: the failure kind of an exception, a run
whose every request failed, a run whose numbers cannot be true (`suspect`), which (value, repeat)
pairs are still to do on a resume, and the experiment's own verdict once its runs are in."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.plausible import summary_problems
from core.records import RequestRecord
from core.status import MEASURED, Status
from store import StoreError
from tuning.engine.params import format_value
from tuning.engine.server import StopFailure, classify_failure

# Failures of the lab or of the machine, not results of the configuration: a resume runs them again.
LAB_KINDS = frozenset(
    {"runner_died", "lab_error", "store_error", "stop_failed", "measurement_error", "port_in_use"}
)
HINTS: dict[str, str] = {
    "lab_error": "The lab itself failed around this run (not the engine); the traceback is in "
    "the runner's log. `tuning-lab experiment --resume ID` runs it again.",
    "store_error": "The lab's database refused a write (locked or read-only); nothing of the "
    "engine is to blame. Resume the experiment once the DB is writable.",
    "stop_failed": "The previous server did not go away (a process or the port outlived SIGKILL); "
    "look for a stray process and resume the experiment.",
    "engine_died": "The engine process died during the load while its API server stayed up "
    "(/health turned 503); the log excerpt says why. Often memory: lower the KV cache or "
    "the concurrency.",
    "measurement_error": "The load or its bookkeeping failed after the server was healthy; the "
    "traceback is in the runner's log.",
    "requests_failed": "The server started but every measured request failed; the first errors "
    "are quoted. Check the model name, max-model-len against the prompt length, and the log.",
}


def exception_kind(exc: BaseException) -> str:
    """The failure kind of an unexpected exception around a run."""
    if isinstance(exc, StopFailure):
        return "stop_failed"
    if isinstance(exc, sqlite3.Error | StoreError):
        return "store_error"
    return "lab_error"


def engine_words(died: str, log_text: str | None) -> str:
    """Why the engine died, with the engine's own last error when its log gave one."""
    kind, words = classify_failure(log_text or "", None)
    return f"{died}: {words}" if kind != "crashed" else died


def requests_verdict(records: Sequence[RequestRecord]) -> tuple[str, str] | None:
    """(kind, reason) when every measured request failed; None when any succeeded (a share of
    failures is a result, counted in `failed`)."""
    if not records or any(r.ok for r in records):
        return None
    kinds = Counter(r.error_kind or "unknown" for r in records)
    first = next((r.error for r in records if r.error), "")
    spread = ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())
    reason = f"0 of {len(records)} requests completed ({spread})"
    return "requests_failed", (reason + (f"; first error: {first}" if first else ""))[:2000]


def find_suspect_reasons(records: Sequence[RequestRecord], summary: Mapping[str, Any]) -> list[str]:
    """Why a measured run's numbers cannot be trusted, in words a user reads; [] when they can.
    Once per run: the requests whose `usage` failed its check (tuning.measure.loadgen.sse), then the
    summary's own numbers (core.plausible.summary_problems)."""
    out = []
    bad = [r for r in records if r.error_kind == "implausible_usage"]
    if bad:
        first = next((r.error for r in bad if r.error), "")
        out.append(
            f"{len(bad)} of {len(records)} requests had a usage that cannot be true, so their "
            f"tokens are not counted" + (f"; first: {first}" if first else "")
        )
    problems = summary_problems(dict(summary))
    if problems:
        out.append("summary numbers that cannot be true: " + ", ".join(problems))
    return [words[:2000] for words in out]


def finished(run: Mapping[str, Any]) -> bool:
    """A run that is a result: measured (done or suspect), or failed for a reason of its
    configuration."""
    if run.get("status") in MEASURED:
        return True
    return run.get("status") == Status.FAILED and run.get("failure_kind") not in LAB_KINDS


def remaining(plan: Sequence[tuple[Any, int]], runs: Iterable[Mapping[str, Any]]) -> list[int]:
    """The schedule positions (seq) whose (value, repeat) pair has no finished run yet, in order.
    Matched by pair, not by position: an experiment stored in an older order (A B A B) resumes
    the pairs it lacks, not the positions."""
    done = Counter(
        (str(r.get("value")), int(r["repeat_index"]))
        for r in runs
        if r.get("repeat_index") is not None and finished(r)
    )
    left = []
    for seq, (value, repeat) in enumerate(plan):
        pair = (format_value(value), int(repeat))
        if done[pair] > 0:
            done[pair] -= 1
        else:
            left.append(seq)
    return left


def experiment_verdict(runs: Iterable[Mapping[str, Any]]) -> tuple[Status, str | None]:
    """DONE when at least one run measured something (done or suspect); FAILED, saying why, when
    every run failed."""
    runs = list(runs)
    if any(r.get("status") in MEASURED for r in runs):
        return Status.DONE, None
    failed = [r for r in runs if r.get("status") == Status.FAILED]
    if not failed:
        return (Status.CANCELLED, None) if runs else (Status.DONE, None)
    kinds = Counter(str(r.get("failure_kind") or "unknown") for r in failed)
    spread = ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())
    first = next((str(r["failure_reason"]) for r in failed if r.get("failure_reason")), "")
    error = f"every run failed ({spread})" + (f"; first: {first}" if first else "")
    return Status.FAILED, error[:2000]
