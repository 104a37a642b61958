"""vLLM's own account of a measured window: its token counters and latency histograms, read from
/metrics just before the first measured request and just after the last, once they have settled.

Why "settled": vLLM's output handler hands a request's last tokens to its HTTP response before its
stat logger counts them (`record()` runs after the outputs are queued), so a read made the moment
the client saw the last `[DONE]` can miss the last iteration: issue 11 saw 4,032 server tokens for
4,096 the client received (exactly one request). A read is therefore repeated, every POLL_S, until
the counters have not moved for QUIET_S (two reads agree) or the expected tokens are all counted,
and for at most SETTLE_BOUND_S; a read that never settled says so instead of pretending.

Histograms are kept as their `_sum` and `_count` (summed over engines): the difference of two reads
over the window is the server's own mean for exactly the requests that finished inside it.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from core.plausible import number
from tuning.measure.telemetry.prom import parse_vllm_metrics

# The lab's latency name -> vLLM's histogram (seconds), as vllm/v1/metrics/loggers.py names them.
HISTOGRAMS: dict[str, str] = {
    "ttft": "time_to_first_token_seconds",  # first token - arrival, per request
    "e2el": "e2e_request_latency_seconds",  # finished - arrival, per finished request
    "queue": "request_queue_time_seconds",  # scheduled - queued, per finished request
    "itl": "inter_token_latency_seconds",  # every gap between a request's iterations
    "tpot": "request_time_per_output_token_seconds",  # decode time / (tokens - 1), per request
}
_HIST_SAMPLES = frozenset(f"vllm:{h}_{p}" for h in HISTOGRAMS.values() for p in ("sum", "count"))

POLL_S = 0.1  # between two reads of /metrics while waiting for it to settle
QUIET_S = 0.3  # counters unchanged this long: settled
QUIET_UNMET_S = 1.0  # ... when the expected tokens are not all counted (a real mismatch, or late)
SETTLE_BOUND_S = 5.0  # never wait longer than this for one read
TIMEOUT_S = 5.0  # one /metrics request

Values = dict[str, float]


def parse_histogram_totals(text: str) -> Values:
    """`{name}_sum` and `{name}_count` of HISTOGRAMS from a /metrics text (keys without "vllm:"),
    summed over engines and any other label. The buckets (most of the text) are skipped."""
    kept = []
    for line in text.splitlines():
        if line and line[0] != "#" and line.split("{", 1)[0].split(" ", 1)[0] in _HIST_SAMPLES:
            kept.append(line)
    out: Values = {}
    if not kept:
        return out
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for sample in family.samples:
            value = number(sample.value)
            if value is None or value < 0:  # NaN, inf or a negative total cannot be a latency
                continue
            key = sample.name[5:]
            out[key] = out.get(key, 0.0) + value
    return out


def parse_server_stats(text: str) -> Values:
    """The lab's counters and gauges (telemetry.prom) plus the latency histograms' sums/counts."""
    return {**parse_vllm_metrics(text), **parse_histogram_totals(text)}


def _moving(values: Mapping[str, float]) -> dict[str, float]:
    """What keeps growing while the server still accounts for work: counters and histograms."""
    return {k: v for k, v in values.items() if k.endswith(("_total", "_sum", "_count"))}


@dataclass
class Settled:
    """One settled read: the values (None when /metrics could not be read), whether they settled
    inside the bound, how many reads it took and how long."""

    values: Values | None
    settled: bool
    reads: int
    waited_s: float

    def facts(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("values")
        return out


def read_settled(
    fetch: Callable[[], Values | None],
    target: Callable[[Values], bool] | None = None,
    *,
    quiet_s: float = QUIET_S,
    quiet_unmet_s: float = QUIET_UNMET_S,
    poll_s: float = POLL_S,
    bound_s: float = SETTLE_BOUND_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Settled:
    """Read until the counters stop moving, or `target(values)` holds; at most `bound_s`.

    Without a target the counters must be unchanged for `quiet_s`; with one that does not hold yet
    (the server has counted fewer tokens than the client received) for `quiet_unmet_s`, so a late
    counter gets more time than an idle one.
    """
    start = clock()
    values = fetch()
    reads = 1
    if values is None:
        return Settled(None, False, reads, clock() - start)
    if target is not None and target(values):
        return Settled(values, True, reads, clock() - start)
    quiet = quiet_s if target is None else quiet_unmet_s
    since = clock()
    while clock() - start < bound_s:
        sleep(poll_s)
        current = fetch()
        reads += 1
        if current is None:  # the server went away: the last good read, not settled
            return Settled(values, False, reads, clock() - start)
        if target is not None and target(current):
            return Settled(current, True, reads, clock() - start)
        if _moving(current) != _moving(values):
            since = clock()
        values = current
        if clock() - since >= quiet:
            return Settled(values, True, reads, clock() - start)
    return Settled(values, False, reads, clock() - start)


class MetricsReader:
    """GET <root>/metrics -> `parse_server_stats`, or None when it cannot be read (no /metrics, a
    gateway that hides it, a refused connection). Proxies are bypassed, as the samplers do."""

    def __init__(self, root: str, timeout: float = TIMEOUT_S) -> None:
        self.url = root.rstrip("/") + "/metrics"
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __call__(self) -> Values | None:
        try:
            with self._opener.open(self.url, timeout=self.timeout) as resp:
                if resp.status != 200:
                    return None
                text = resp.read().decode("utf-8", "replace")
        except (OSError, urllib.error.URLError, ValueError):
            return None
        try:
            return parse_server_stats(text) or None
        except ValueError:  # not Prometheus text
            return None


def tokens_counted(before: Mapping[str, float], client_tokens: int, finished: int) -> Callable:
    """A `read_settled` target: the server has counted at least the tokens the client received,
    and (where it exports the histogram) at least `finished` finished requests since `before`."""

    def done(values: Values) -> bool:
        key = "generation_tokens_total"
        if key not in values or key not in before:
            return False
        if values[key] - before[key] < client_tokens:
            return False
        count = "e2e_request_latency_seconds_count"
        if count in values and count in before:
            return values[count] - before[count] >= finished
        return True

    return done


def window_means(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None
) -> dict[str, Any]:
    """The server's own mean of each latency over the window (ms) and how many observations it
    averaged; None where the server exports no such histogram or saw none."""
    out: dict[str, Any] = {}
    for lab, name in HISTOGRAMS.items():
        mean = count = None
        if before and after and f"{name}_count" in after:
            count = after[f"{name}_count"] - before.get(f"{name}_count", 0.0)
            total = after[f"{name}_sum"] - before.get(f"{name}_sum", 0.0)
            mean = 1000.0 * total / count if count > 0 else None
        out[f"server_mean_{lab}_ms"] = mean
        out[f"server_{lab}_count"] = None if count is None else int(round(count))
    return out
