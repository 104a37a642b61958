"""Dispatch schedules as pure functions: seconds after the start at which each request goes out.

Open loop follows vLLM's `get_request` (vllm/benchmarks/serve.py): gaps are gamma-distributed with
shape = burstiness and scale = 1 / (rate * burstiness), so the mean gap is 1/rate and burstiness 1
is a Poisson process (exponential gaps); below 1 is burstier, above 1 smoother, infinity is a
constant gap. The first request waits one gap too, and, as vLLM does, the cumulative offsets are
rescaled so the last one lands exactly at n / rate: the run's mean rate is the target whatever the
seed. A trace is replayed at its own timestamps, relative to the first, divided by a speed factor.
No schedule may plan past `MAX_SCHEDULE_S`: a trace gap of 1e15 ms or a rate of 1e-300 req/s is
refused here (`ScheduleTooLong`, naming the request), not left to run for ever.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.spec import Arrival

# The longest schedule the lab plans: a day of load is more than any tuning run needs.
MAX_SCHEDULE_S = 24 * 3600.0


def span_text(seconds: float) -> str:
    """A planned duration as a person reads it: '42.0 s', '3.5 h', '3.2e+11 h'."""
    return f"{seconds:.1f} s" if seconds < 600 else f"{seconds / 3600:.3g} h"


class ScheduleTooLong(TrafficError):
    """A schedule planned past `MAX_SCHEDULE_S`; `index` is the first request over it and `field`
    the spec field that made it so ('arrival.rate', 'arrival.speed', 'multi_turn.think_time_s')."""

    def __init__(self, field: str, index: int, planned_s: float, why: str) -> None:
        self.field = field
        self.index = index
        self.planned_s = planned_s
        self.detail = (
            f"{why}: the schedule plans {span_text(planned_s)}, over the "
            f"{span_text(MAX_SCHEDULE_S)} cap (MAX_SCHEDULE_S)"
        )
        super().__init__(f"{field}: {self.detail}")


def gamma_offsets(
    n: int, rate: float, burstiness: float, rng: np.random.Generator, normalize: bool = True
) -> list[float]:
    """Offsets of `n` open-loop requests at `rate` req/s with gamma gaps of shape `burstiness`."""
    if n < 1 or not rate > 0 or not burstiness > 0:
        raise TrafficError(
            f"need n >= 1, rate > 0 and burstiness > 0; got {n}, {rate}, {burstiness}"
        )
    if math.isinf(rate):
        return [0.0] * n
    if n / rate > MAX_SCHEDULE_S:
        why = f"{n} requests at {rate:g} req/s"
        raise ScheduleTooLong("arrival.rate", n - 1, n / rate, why)
    if math.isinf(burstiness):
        gaps = np.full(n, 1.0 / rate)
    else:
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    offsets = np.cumsum(gaps)
    if normalize and offsets[-1] > 0:
        offsets *= (n / rate) / offsets[-1]
    return [float(x) for x in offsets]


def poisson_offsets(
    n: int, rate: float, rng: np.random.Generator, normalize: bool = True
) -> list[float]:
    """A Poisson process: gamma gaps of shape 1 (exponential)."""
    return gamma_offsets(n, rate, 1.0, rng, normalize)


def trace_offsets(timestamps_ms: Sequence[float], speed: float = 1.0) -> list[float]:
    """A trace's timestamps (ms) as seconds after its first one, played `speed` times as fast."""
    if not speed > 0:
        raise TrafficError(f"speed must be > 0, got {speed}")
    if not timestamps_ms:
        return []
    first = timestamps_ms[0]
    out = [(ts - first) / 1000.0 / speed for ts in timestamps_ms]
    if any(b < a for a, b in zip(out, out[1:], strict=False)):
        raise TrafficError("trace timestamps must not decrease")
    over = next((k for k, x in enumerate(out) if not x <= MAX_SCHEDULE_S), None)
    if over is not None:
        why = f"timestamp {timestamps_ms[over]:g} ms, {out[over]:g} s after the first at x{speed:g}"
        raise ScheduleTooLong("arrival.speed", over, out[over], why)
    return out


def schedule(
    arrival: Arrival, n: int, seed: int, timestamps_ms: Sequence[float] | None = None
) -> list[float] | None:
    """The offsets for `n` dispatches under a spec's arrival, or None for a closed loop."""
    if arrival.kind == "closed":
        return None
    if arrival.kind == "trace":
        if timestamps_ms is None or len(timestamps_ms) != n:
            raise TrafficError("a trace arrival needs one timestamp per request")
        return trace_offsets(timestamps_ms, arrival.speed)
    assert arrival.rate is not None
    rng = np.random.default_rng([seed, 2])  # its own stream: lengths keep vLLM's draw order
    return gamma_offsets(n, arrival.rate, arrival.burstiness, rng)


def gap_stats(offsets: Sequence[float]) -> dict[str, float]:
    """Achieved rate, mean gap, and coefficient of variation of gaps (1 for Poisson)."""
    if len(offsets) < 2:
        return {"rate": 0.0, "mean_gap_s": 0.0, "cv": 0.0, "duration_s": 0.0}
    gaps = np.diff(np.asarray([0.0, *offsets]))
    mean = float(gaps.mean())
    duration = float(offsets[-1])
    return {
        "rate": len(offsets) / duration if duration > 0 else math.inf,
        "mean_gap_s": mean,
        "cv": float(gaps.std() / mean) if mean > 0 else 0.0,
        "duration_s": duration,
    }
