"""A run's telemetry as charts, Live and findings read it: its samples (all, or some series since a
time), the series it has, one series downsampled in SQL, whether some runs have a series, and its
successful requests' latency points (every k-th row for a CDF). The rest of the reads are
store.queries'."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from sqlite_utils import Database


def _marks(items: Iterable[Any]) -> str:
    return ",".join("?" * len(list(items)))


def get_samples(
    db: Database, run_id: int, series: Iterable[str] | None = None, since_t: float | None = None
) -> list[dict[str, Any]]:
    clauses: list[str] = ["run_id = ?"]
    params: list[Any] = [run_id]
    if series is not None:
        names = list(series)
        clauses.append(f"series in ({_marks(names)})")
        params += names
    if since_t is not None:
        clauses.append("t_s > ?")
        params.append(since_t)
    return list(
        db.query(
            f"select t_s, series, label, value from samples where "
            f"{' and '.join(clauses)} order by t_s",
            params,
        )
    )


def sample_series(db: Database, run_id: int) -> list[str]:
    return [
        r[0] for r in db.execute("select distinct series from samples where run_id = ?", [run_id])
    ]


def latency_rows(
    db: Database, run_id: int, max_rows: int = 2000
) -> list[tuple[float, float, float, float]]:
    """(start, ttft, end, output tokens) of successful requests, every k-th row when there are
    more than `max_rows` (a CDF needs its shape, not every row)."""
    count = int(
        db.execute("select count(*) from requests where run_id = ?", [run_id]).fetchone()[0]
    )
    stride = max(1, math.ceil(count / max_rows)) if max_rows else 1
    return [
        tuple(r)
        for r in db.execute(
            "select start_s, ttft_s, end_s, output_tokens from requests where run_id = ? "
            "and ok = 1 and idx % ? = 0",
            [run_id, stride],
        ).fetchall()
    ]


def load_series(
    db: Database, run_id: int, series: str, max_points: int = 500, sum_labels: bool = True
) -> list[tuple[float, float]]:
    """One sample series downsampled in SQL to <= max_points buckets of time: the max of each
    bucket (peaks survive; for a cumulative counter the max is its last value). With `sum_labels`
    the labels (GPUs) are added up per bucket, so a 2-GPU box shows the whole server."""
    row = db.execute(
        "select min(t_s), max(t_s), count(*) from samples where run_id = ? and series = ?",
        [run_id, series],
    ).fetchone()
    if not row or not row[2]:
        return []
    t0, t1, _n = row
    width = max((t1 - t0) / max(1, max_points), 1e-9)
    rows = db.execute(
        "select label, cast((t_s - ?) / ? as integer) as b, max(t_s), max(value) from samples "
        "where run_id = ? and series = ? group by label, b",
        [t0, width, run_id, series],
    ).fetchall()
    if not sum_labels:
        merged: dict[int, tuple[float, float]] = {}
        for _label, b, t, v in rows:
            prev = merged.get(b)
            merged[b] = (t, v) if prev is None else (max(prev[0], t), max(prev[1], v))
        return sorted(merged.values())
    buckets: dict[int, list[float]] = {}
    for _label, b, t, v in rows:
        cur = buckets.setdefault(b, [t, 0.0])
        cur[0] = max(cur[0], t)
        cur[1] += v
    return sorted((t, v) for t, v in buckets.values())


def available_series(db: Database, run_ids: Iterable[int], names: Sequence[str]) -> set[str]:
    ids = [int(i) for i in run_ids]
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    # One index probe per (run, series) name asked for, instead of a scan.
    out = set()
    for name in names:
        hit = db.execute(
            f"select 1 from samples where run_id in ({marks}) and series = ? limit 1", [*ids, name]
        ).fetchone()
        if hit:
            out.add(name)
    return out
