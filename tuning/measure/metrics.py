"""Per-request records -> the numbers a run is judged by, with vLLM's definitions
(benchmark-anchors 1.2).

- TTFT: first `choices` chunk minus the request's start, per request.
- TPOT: (E2EL - TTFT) / (output_tokens - 1) per request with output_tokens > 1; requests weigh
  equally.
- ITL: every gap between consecutive content chunks, pooled over all requests (chunk-weighted).
  A chunk may carry several tokens (`--stream-interval N`, speculative decoding), so the lab
  also reports ITL per token: each gap / (output_tokens - 1) / (chunks - 1) of its request (the
  tokens a later chunk carries on average; the first chunk's belong to TTFT), which equals ITL at
  one token a chunk and averages to TPOT over one request's gaps; and
  mean_tokens_per_chunk = successful output tokens / their content chunks.
- E2EL: last content chunk minus start.
- duration: first dispatch to last completion (the load generator measures it).
- output_throughput = successful output tokens / duration;
  request_throughput = completed / duration;
  total_token_throughput = (successful input + output tokens) / duration.
- Percentiles: numpy's default linear interpolation; std is numpy's population std, like vLLM.

Failed requests count in `failed` and nowhere else. Where vLLM prints 0 for a metric without data
(every request failed), the lab says None: 0 ms would read as a perfect result. Token counts are the
server's `usage`; a successful record without one contributes no tokens and no TPOT.
Everything works on numpy arrays built in one pass, so a million records summarise in about a
second.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, compress
from typing import Any

import numpy as np

from core.records import RequestRecord

LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
PERCENTILES: tuple[int, ...] = (90, 99)
GOODPUT_METRICS: tuple[str, ...] = ("ttft", "tpot", "e2el")
STEADY_THRESHOLD = 0.9

Row = RequestRecord | Mapping[str, Any]


@dataclass
class Columns:
    """The records as arrays; NaN where a value is missing. `itl` holds successful requests only."""

    ok: np.ndarray  # bool
    start: np.ndarray  # s
    ttft: np.ndarray  # s, NaN when no content chunk came
    end: np.ndarray  # s
    output_tokens: np.ndarray  # float, NaN when unknown
    prompt_tokens: np.ndarray  # float, NaN when unknown
    itl: np.ndarray  # pooled gaps of the successful requests
    chunks: np.ndarray  # content chunks per successful request (len(itl) + 1)
    error_kind: list[str | None]

    @property
    def n(self) -> int:
        return int(self.ok.size)

    @property
    def e2el(self) -> np.ndarray:
        return self.end - self.start


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Building a million-row table triggers full collections that scan every record: pause GC."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def columns(records: Iterable[Row]) -> Columns:
    """RequestRecords (or their `to_row()` dicts) into arrays, one list comprehension per field."""
    recs: Sequence[Row] = records if isinstance(records, (list, tuple)) else list(records)
    with _gc_paused():
        if recs and isinstance(recs[0], Mapping):
            maps: Sequence[Mapping[str, Any]] = recs  # type: ignore[assignment]
            ok = np.array([bool(r["ok"]) for r in maps], dtype=bool)
            start = np.array([r["start"] for r in maps], dtype=float)
            ttft = np.array([r.get("ttft") for r in maps], dtype=float)
            end = np.array([r.get("end") for r in maps], dtype=float)
            out = np.array([r.get("output_tokens") for r in maps], dtype=float)
            prompt = np.array([r.get("prompt_tokens") for r in maps], dtype=float)
            itls = [r.get("itl") or [] for r in maps]
            kinds = [r.get("error_kind") for r in maps]
        else:
            objs: Sequence[RequestRecord] = recs  # type: ignore[assignment]
            ok = np.array([r.ok for r in objs], dtype=bool)
            start = np.array([r.start for r in objs], dtype=float)
            ttft = np.array([r.ttft for r in objs], dtype=float)
            end = np.array([r.end for r in objs], dtype=float)
            out = np.array([r.output_tokens for r in objs], dtype=float)
            prompt = np.array([r.prompt_tokens for r in objs], dtype=float)
            itls = [r.itl for r in objs]
            kinds = [r.error_kind for r in objs]
        ok &= ~np.isnan(ttft) & ~np.isnan(end)  # a success without timings cannot be measured
        good_itls = list(compress(itls, ok.tolist()))
        count = sum(map(len, good_itls))
        itl = np.fromiter(chain.from_iterable(good_itls), dtype=float, count=count)
        chunks = np.fromiter(map(len, good_itls), dtype=np.int64, count=len(good_itls)) + 1
    return Columns(
        ok=ok,
        start=start,
        ttft=ttft,
        end=end,
        output_tokens=out,
        prompt_tokens=prompt,
        itl=itl,
        chunks=chunks,
        error_kind=kinds,
    )


def _stats(prefix: str, values_s: np.ndarray, out: dict[str, Any]) -> None:
    if values_s.size == 0:
        for stat in ("mean", "median", "std", *(f"p{p}" for p in PERCENTILES)):
            out[f"{stat}_{prefix}_ms"] = None
        return
    # One partition for the median and every percentile (np.median is the 50th, linear).
    qs = np.percentile(values_s, (50, *PERCENTILES)) * 1000.0
    out[f"mean_{prefix}_ms"] = float(np.mean(values_s)) * 1000.0
    out[f"median_{prefix}_ms"] = float(qs[0])
    out[f"std_{prefix}_ms"] = float(np.std(values_s)) * 1000.0
    for p, v in zip(PERCENTILES, qs[1:], strict=True):
        out[f"p{p}_{prefix}_ms"] = float(v)


def _tpots(c: Columns, zero_for_short: bool) -> np.ndarray:
    """Per successful request; `zero_for_short` gives 0 for output_tokens <= 1 (vLLM's goodput)."""
    ok = c.ok
    out = c.output_tokens[ok]
    e2el = c.e2el[ok]
    ttft = c.ttft[ok]
    long = out > 1
    if zero_for_short:
        tpot = np.zeros(out.size)
        tpot[long] = (e2el[long] - ttft[long]) / (out[long] - 1)
        return tpot
    return (e2el[long] - ttft[long]) / (out[long] - 1)


def _tokens_per_chunk(c: Columns) -> float | None:
    """Successful output tokens / their content chunks (requests with a usage), pooled."""
    tokens = c.output_tokens[c.ok]
    known = ~np.isnan(tokens)
    chunks = int(c.chunks[known].sum())
    return float(tokens[known].sum()) / chunks if chunks else None


def _itl_per_token(c: Columns) -> np.ndarray:
    """Each ITL gap / the tokens a later chunk of its request carries on average,
    (output_tokens - 1) / (chunks - 1); a request without usage or with one output token gives
    none. At one token a chunk everywhere this is ITL itself (no copy)."""
    gaps = c.chunks - 1
    per_chunk = (c.output_tokens[c.ok] - 1) / np.maximum(gaps, 1)  # NaN without usage
    has = gaps > 0
    if np.all(per_chunk[has] == 1.0):
        return c.itl
    usable = per_chunk > 0  # False for NaN
    factor = np.repeat(np.where(usable, per_chunk, np.nan), gaps)
    values = c.itl / factor
    return values[~np.isnan(factor)]


def _per_s(value: float, duration_s: float) -> float | None:
    return value / duration_s if duration_s > 0 else None


def summarize(records: Iterable[Row] | Columns, duration_s: float) -> dict[str, Any]:
    """vLLM's result keys: completed, failed, duration, token totals, throughputs, and mean /
    median / std / p90 / p99 of TTFT, TPOT, ITL, E2EL in ms. Also the lab's ITL per token (same
    statistics) and `mean_tokens_per_chunk`, `failed_by_kind` and the exact
    `max_concurrent_requests` over the successful requests' [start, end) intervals."""
    c = records if isinstance(records, Columns) else columns(records)
    ok = c.ok
    completed = int(ok.sum())
    total_in = int(np.nansum(c.prompt_tokens[ok]))
    total_out = int(np.nansum(c.output_tokens[ok]))
    out: dict[str, Any] = {
        "completed": completed,
        "failed": c.n - completed,
        "duration": float(duration_s),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": _per_s(completed, duration_s),
        "output_throughput": _per_s(total_out, duration_s),
        "total_token_throughput": _per_s(total_in + total_out, duration_s),
    }
    _stats("ttft", c.ttft[ok], out)
    _stats("tpot", _tpots(c, zero_for_short=False), out)
    _stats("itl", c.itl, out)
    _stats("itl_per_token", _itl_per_token(c), out)
    out["mean_tokens_per_chunk"] = _tokens_per_chunk(c)
    _stats("e2el", c.e2el[ok], out)
    kinds: dict[str, int] = {}
    for i in np.flatnonzero(~ok):
        kind = c.error_kind[i] or "unknown"
        kinds[kind] = kinds.get(kind, 0) + 1
    out["failed_by_kind"] = kinds
    out["max_concurrent_requests"] = _max_overlap(c.start[ok], c.end[ok])
    return out


def _max_overlap(start: np.ndarray, end: np.ndarray) -> int:
    if start.size == 0:
        return 0
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    order = np.lexsort((steps, times))  # at equal times an end (-1) comes before a start
    return int(np.max(np.cumsum(steps[order])))


def goodput(
    records: Iterable[Row] | Columns, duration_s: float, slo_ms: Mapping[str, float]
) -> dict[str, Any]:
    """vLLM's goodput: a successful request is good when every given metric <= its SLO (ms);
    output_tokens <= 1 gives TPOT 0. `good_share` is good / all requests (failures are not good)."""
    unknown = set(slo_ms) - set(GOODPUT_METRICS)
    if unknown or not slo_ms:
        raise ValueError(
            f"SLO metrics must be among {', '.join(GOODPUT_METRICS)}; got "
            f"{', '.join(sorted(slo_ms)) or 'none'}"
        )
    c = records if isinstance(records, Columns) else columns(records)
    ok = c.ok
    values = {"ttft": c.ttft[ok], "tpot": _tpots(c, zero_for_short=True), "e2el": c.e2el[ok]}
    good_mask = np.ones(int(ok.sum()), dtype=bool)
    for name, limit in slo_ms.items():
        good_mask &= (float(limit) / 1000.0) >= values[name]
    good = int(good_mask.sum())
    return {
        "good": good,
        "good_share": good / c.n if c.n else None,
        "request_goodput": _per_s(good, duration_s),
    }


def achieved_concurrency(records: Iterable[Row] | Columns, duration_s: float) -> float | None:
    """Little's law: the mean number of successful requests in flight = sum(E2EL) / duration."""
    c = records if isinstance(records, Columns) else columns(records)
    if duration_s <= 0:
        return None
    return float(np.sum(c.e2el[c.ok])) / duration_s


def _inflight_from_records(c: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(times, level after each event) from every request with a known end (failures included)."""
    known = ~np.isnan(c.end)
    start = c.start
    ends = c.end[known]
    # A failure without an end still held a slot from its start; without an end time it is left out.
    times = np.concatenate([start[known], ends])
    steps = np.concatenate([np.ones(ends.size), -np.ones(ends.size)])
    order = np.lexsort((steps, times))
    return times[order], np.cumsum(steps[order])


def token_times(c: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(time of every content chunk, tokens it carried) for the successful requests.

    Chunk times are start + TTFT + cumulative ITL; each chunk of a request carries
    output_tokens / chunks tokens (usage is exact per request; the split between chunks is not
    known).
    """
    ok = c.ok
    first = (c.start + c.ttft)[ok]
    lengths = c.chunks
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0), np.zeros(0)
    heads = np.cumsum(lengths) - lengths
    gaps = np.empty(total)
    is_head = np.zeros(total, dtype=bool)
    is_head[heads] = True
    gaps[heads] = first
    gaps[~is_head] = c.itl
    running = np.cumsum(gaps)
    base = np.repeat(running[heads] - first, lengths)
    times = running - base
    out = np.nan_to_num(c.output_tokens[ok], nan=0.0)
    weights = np.repeat(out / lengths, lengths)
    return times, weights


def _tokens_in_window(c: Columns, t0: float, t1: float) -> float:
    """Output tokens whose chunk time falls in [t0, t1] (same approximation as `token_times`).

    Requests wholly inside or outside the window are counted from their first and last chunk
    times; only the few that straddle an edge (about 2C) are walked chunk by chunk.
    """
    ok = c.ok
    first = (c.start + c.ttft)[ok]
    last = c.end[ok]
    out = np.nan_to_num(c.output_tokens[ok], nan=0.0)
    inside = (first >= t0) & (last <= t1)
    tokens = float(out[inside].sum())
    straddle = np.flatnonzero(~inside & (last >= t0) & (first <= t1))
    if straddle.size:
        gaps = c.chunks - 1
        offsets = np.cumsum(gaps) - gaps
        for j in straddle:
            lo = int(offsets[j])
            times = first[j] + np.concatenate(([0.0], np.cumsum(c.itl[lo : lo + int(gaps[j])])))
            hit = int(((times >= t0) & (times <= t1)).sum())
            tokens += float(out[j]) * hit / int(c.chunks[j])
    return tokens


def steady_state(
    records: Iterable[Row] | Columns,
    concurrency: int,
    inflight: Sequence[tuple[float, int]] | None = None,
    threshold: float = STEADY_THRESHOLD,
) -> dict[str, Any]:
    """The window where at least ~90% of C requests were in flight, and the output throughput in it.

    The window runs from the first moment the level reaches ceil(threshold * C) to the last moment
    it falls below it for good (brief dips between a completion and the next dispatch do not cut
    it).
    `inflight` is the load generator's sampled timeline; without it the level comes from the
    records' [start, end) intervals (exact, but blind to failures that have no end time).
    """
    c = records if isinstance(records, Columns) else columns(records)
    need = max(1, math.ceil(threshold * concurrency))
    if inflight:
        times = np.array([p[0] for p in inflight], dtype=float)
        level = np.array([p[1] for p in inflight], dtype=float)
    else:
        times, level = _inflight_from_records(c)
    above = level >= need
    none = {
        "t0": None,
        "t1": None,
        "duration": None,
        "output_throughput": None,
        "output_tokens": 0.0,
        "completed": 0,
        "need_inflight": need,
        "found": False,
    }
    if not above.any():
        return none
    i0 = int(np.argmax(above))
    t0 = float(times[i0])
    last_above = int(above.size - 1 - np.argmax(above[::-1]))
    t1 = float(times[last_above + 1]) if last_above + 1 < times.size else float(times[last_above])
    if t1 <= t0:
        return none
    tokens = _tokens_in_window(c, t0, t1)
    ends = c.end[c.ok]
    done = int(((ends >= t0) & (ends <= t1)).sum())
    return {
        "t0": t0,
        "t1": t1,
        "duration": t1 - t0,
        "output_throughput": tokens / (t1 - t0),
        "output_tokens": tokens,
        "completed": done,
        "need_inflight": need,
        "found": True,
    }


def warmup_check(
    records: Iterable[Row] | Columns, first_n: int, ratio: float = 1.5, min_diff_ms: float = 20.0
) -> dict[str, Any]:
    """Were the first N requests (by start) clearly slower to first token than the rest?

    `slow_start` is True when their mean TTFT is > `ratio` x the rest's and > `min_diff_ms` more:
    a cold server (compile, caches) or not enough warm-up. In a closed loop the first wave also
    arrives as one burst of C prefills, which raises its TTFT a little even on a warm server.
    """
    c = records if isinstance(records, Columns) else columns(records)
    ok = np.flatnonzero(c.ok)
    order = ok[np.argsort(c.start[ok], kind="stable")]
    first, rest = order[:first_n], order[first_n:]
    result: dict[str, Any] = {
        "first_n": int(first.size),
        "first_mean_ttft_ms": None,
        "rest_mean_ttft_ms": None,
        "ratio": None,
        "slow_start": False,
    }
    if first.size == 0 or rest.size == 0:
        return result
    a = float(np.mean(c.ttft[first])) * 1000.0
    b = float(np.mean(c.ttft[rest])) * 1000.0
    result.update(
        first_mean_ttft_ms=a,
        rest_mean_ttft_ms=b,
        ratio=a / b if b > 0 else None,
        slow_start=bool(a > ratio * b and a - b > min_diff_ms),
    )
    return result


def parse_slo(items: Iterable[str] | None) -> dict[str, float]:
    """['ttft:200', 'tpot:50,e2el:2000'] -> {'ttft': 200.0, ...}; ValueError says what is wrong."""
    out: dict[str, float] = {}
    parts = [p.strip() for item in items or [] for p in str(item).split(",") if p.strip()]
    for part in parts:
        name, sep, value = part.partition(":")
        if not sep or name not in GOODPUT_METRICS:
            raise ValueError(f"SLO {part!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"SLO {part!r}: {value!r} is not a number") from None
        if not (ms > 0 and math.isfinite(ms)):
            raise ValueError(f"SLO {part!r}: must be a positive number of ms")
        out[name] = ms
    return out
