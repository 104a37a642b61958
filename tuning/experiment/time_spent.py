"""An experiment's time, whole: its runs' anatomies (tuning.experiment.run_anatomy) plus what it
spent outside them (the last server's stop, once its runs are over), in one line per experiment;
the estimate made before it started against what it took; whether its repeats switched resident
servers (the words: tuning.compare.resident_words).

The estimate is stored when the runner takes the experiment (`experiments.estimate_json`), before
its first run, so `compare` can print it beside the actual time afterwards; a resumed experiment
keeps the one made before its first start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlite_utils import Database

from core.clock import now_iso
from core.plausible import MAX_PART_S, in_range
from core.status import is_active
from store import queries, repo
from tuning.compare.resident_words import resident_json, resident_lines
from tuning.engine.startup_anatomy import COLD, compile_state
from tuning.experiment.estimate import about, of_experiment
from tuning.experiment.run_anatomy import grouped, parts_of, time_spent_line
from tuning.experiment.run_parts import span_s


def _outside(exp: Mapping[str, Any]) -> dict[str, Any]:
    """The experiment's stored time outside its runs ({} when none)."""
    stored = exp.get("anatomy")
    return dict(stored) if isinstance(stored, dict) else {}


def add_after_runs(db: Database, experiment_id: int, seconds: float) -> None:
    """Count `seconds` (the last server's stop) as the experiment's time outside its runs; a
    resumed experiment adds each session's."""
    exp = queries.get_experiment(db, experiment_id)
    stored = _outside(exp)
    before = in_range(stored.get("after_runs_s"), 0.0, MAX_PART_S) or 0.0
    repo.update_experiment(
        db,
        experiment_id,
        anatomy_json={**stored, "after_runs_s": round(before + max(0.0, seconds), 3)},
    )


def store_estimate(db: Database, experiment_id: int) -> dict[str, Any] | None:
    """The estimate of the experiment as it stands before its first run, stored once; None when
    it cannot be made (the store's own words are for `estimate`; a run never fails of it)."""
    exp = queries.get_experiment(db, experiment_id)
    if isinstance(exp.get("estimate"), dict):
        return dict(exp["estimate"])
    try:
        estimate = {**of_experiment(db, exp).to_json(), "made_at": now_iso()}
    except (ValueError, KeyError, TypeError):
        return None
    repo.update_experiment(db, experiment_id, estimate_json=estimate)
    return estimate


def experiment_anatomy(
    exp: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """Where the experiment's time went: the sum of its runs' parts, grouped, plus its time
    outside them; None when none of its runs has an anatomy (stored before the lab kept one)."""
    anats = [r.get("anatomy") for r in runs if parts_of(r.get("anatomy"))]
    if not anats:
        return None
    stored = _outside(exp)
    after = in_range(stored.get("after_runs_s"), 0.0, MAX_PART_S) or 0.0
    groups = grouped(anats, outside_s=after)
    total = sum(groups.values())
    return {
        "experiment_id": exp.get("id"),
        "total_s": round(total, 3),
        "runs_s": round(total - after, 3),
        "after_runs_s": round(after, 3),
        "groups": {k: round(v, 3) for k, v in groups.items()},
        "runs_with_anatomy": len(anats),
        "runs_without": len(runs) - len(anats),
        "line": time_spent_line(groups, total),
    }


def took_s(exp: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> float | None:
    """What the experiment took: its runs' windows and its time outside them when every run has
    an anatomy, else its stored start to end."""
    anat = experiment_anatomy(exp, runs)
    if anat is not None and not anat["runs_without"]:
        return float(anat["total_s"])
    return span_s(exp.get("started_at"), exp.get("finished_at"))


def estimate_line(exp: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    """'estimate before start: 4 runs, about 15 min (a guess: ...); took 9.0 min over 4 runs:
    0.60x the estimate'; '' when no estimate was stored."""
    est = exp.get("estimate")
    if not isinstance(est, Mapping) or not isinstance(est.get("seconds"), int | float):
        return ""
    planned = float(est["seconds"])
    most = est.get("max_seconds")
    basis = (est.get("costs") or {}).get("basis") or ""
    head = f"estimate before start: {est.get('runs')} runs, {about(planned)}"
    if isinstance(most, int | float) and est.get("max_runs") is not None:
        head += f" (at most {est['max_runs']} runs, {about(float(most))})"
    head += f" ({basis})" if basis else ""
    took = took_s(exp, runs)
    if took is None or is_active(exp.get("status")):
        return f"{head}; not finished yet"
    minutes = took >= 90
    amount = f"{took / 60:.1f} min" if minutes else f"{took:.0f} s"
    ratio = f": {took / planned:.2f}x the estimate" if planned > 0 else ""
    return f"{head}; took {amount} over {len(runs)} runs{ratio}"


def cold_starts(runs: Sequence[Mapping[str, Any]]) -> list[int]:
    """The runs whose server compiled its graphs anew (vLLM's compile cache missed, whole or in
    part): their time to healthy is a cold start's (tuning.engine.startup_anatomy)."""
    return [int(r["id"]) for r in runs if compile_state(r) in COLD]


def cold_start_line(runs: Sequence[Mapping[str, Any]]) -> str:
    """What a time-to-healthy verdict over `runs` counts, said: '' when no start was cold."""
    cold = cold_starts(runs)
    if not cold:
        return ""
    timed = [r for r in runs if isinstance(r.get("time_to_healthy_s"), int | float)]
    warm = [float(r["time_to_healthy_s"]) for r in timed if int(r["id"]) not in cold]
    hot = [float(r["time_to_healthy_s"]) for r in timed if int(r["id"]) in cold]
    said = f"time to healthy: run{'s' if len(cold) > 1 else ''} {', '.join(map(str, cold))} "
    said += "started with a cold compile cache (torch.compile ran)"
    if hot and warm:
        said += f": {sum(hot) / len(hot):.1f} s cold vs {sum(warm) / len(warm):.1f} s warm"
    return said + "; a time-to-healthy verdict over these runs counts the cold starts"


def hidden_starts(runs: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each prelaunched start's seconds done beside the previous run (its server's spawn and
    imports while the previous server stopped: `prelaunch_ahead`, tuning.engine.prelaunch)."""
    out = []
    for run in runs:
        anat = run.get("anatomy")
        beside = anat.get("overlapped") if isinstance(anat, Mapping) else None
        for part in beside if isinstance(beside, list) else ():
            seconds = part.get("seconds") if isinstance(part, Mapping) else None
            if part.get("key") == "prelaunch_ahead" and isinstance(seconds, int | float):
                out.append(float(seconds))
    return out


def hidden_line(runs: Sequence[Mapping[str, Any]]) -> str:
    """'starts overlapped: 3 of 4 servers imported while the previous one stopped, 31.5 s hidden
    (10.5 s a start)'; '' when none was."""
    hidden = hidden_starts(runs)
    if not hidden:
        return ""
    return (
        f"starts overlapped: {len(hidden)} of {len(runs)} servers imported while the previous "
        f"one stopped, {sum(hidden):.1f} s hidden ({sum(hidden) / len(hidden):.1f} s a start)"
    )


def report(db: Database, runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each experiment the runs belong to (in order): where its time went, its estimate
    against what it took, its cold starts and what its repeats did about resident engines
    (tuning.compare.resident_words); the lines `compare`, Live, Compare and the report show."""
    out = []
    for exp_id in dict.fromkeys(r.get("experiment_id") for r in runs):
        if exp_id is None:
            continue
        exp = queries.get_experiment(db, int(exp_id))
        own = queries.list_runs(db, int(exp_id), include_hidden=True)
        anat = experiment_anatomy(exp, own)
        took = "so far" if is_active(exp.get("status")) else "took"
        lines = [f"experiment {exp_id}, {took} {anat['line']}"] if anat and anat["line"] else []
        said = (estimate_line(exp, own), hidden_line(own), cold_start_line(own))
        lines += [text for text in said if text]
        lines += resident_lines(exp.get("resident"))  # switched servers, the check, a fall back
        if lines:
            out.append(
                {
                    "experiment_id": int(exp_id),
                    "anatomy": anat,
                    "estimate": exp.get("estimate"),
                    "took_s": took_s(exp, own),
                    "cold_starts": cold_starts(own),
                    "hidden_start_s": round(sum(hidden_starts(own)), 3),
                    "resident": resident_json(exp.get("resident")),
                    "lines": lines,
                }
            )
    return out
