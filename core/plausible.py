"""Plausibility of numbers from outside the lab, in one place: a server's `usage`, its /metrics,
its startup facts and the values stored runs hold. Each check returns the number when it can be
true, or None (or words saying what is wrong); no I/O, no state.

The lab's own clocks are trusted; what a server says (token counts, counters, engine facts) and
what a stored row holds (a teammate's bundle, a hand edit, an older bug) are not: a number that
cannot be true is never stored or used as if it were, and the words say what was seen.

The bounds and why they hold:
- Output tokens: vLLM never generates more than a request's `max_tokens` (with `ignore_eos` it
  generates exactly that), speculative decoding included: that is the bound. The chunks received
  cannot bound it tightly: `--stream-interval N` puts N tokens in a chunk, and vLLM's
  `RequestOutputCollector` merges the deltas of several steps into one chunk whenever the API
  server falls behind the engine, so one chunk may carry any number of tokens up to max_tokens.
- Input tokens: a byte-level tokenizer's token covers at least one byte of text, so a prompt
  holds at most its UTF-8 bytes in tokens (the request body, JSON-escaped, is longer still), plus
  what a chat template adds (PROMPT_TEMPLATE_TOKENS, generous).
- History (estimates): a part of a run (a start, a load, the rest) outside [0, MAX_PART_S], or a
  throughput over MAX_TOKENS_PER_S, is not a measurement of this lab's hardware.
"""

from __future__ import annotations

import math
from typing import Any

PROMPT_TEMPLATE_TOKENS = 8192  # tokens a chat template may add around the prompt's own bytes
MAX_PART_S = 86_400.0  # one part of one run (start, load, rest) longer than a day: not a run
MAX_TOKENS_PER_S = 1e7  # output tok/s of one server; today's largest serve about 1e5
WORDS_MAX = 300  # characters of one value shown in words


def number(value: Any) -> float | None:
    """A finite real number (int or float, not bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return out if math.isfinite(out) else None


def count(value: Any) -> int | None:
    """A whole, finite, non-negative number (a count of tokens, requests, blocks), else None.
    An integral float (1000.0, as JSON may carry it) is a count; 3.5 tokens is not."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    x = number(value)
    return int(x) if x is not None and x >= 0 and x.is_integer() else None


def amount(value: Any) -> float | None:
    """A finite, non-negative number (GiB, seconds, a ratio), else None."""
    x = number(value)
    return x if x is not None and x >= 0 else None


def in_range(value: Any, low: float, high: float) -> float | None:
    """A finite number within [low, high], else None."""
    x = number(value)
    return x if x is not None and low <= x <= high else None


def shown(value: Any) -> str:
    """A value from outside as the words quote it: 1,000,000,000, -5, inf, 'ten'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)[:WORDS_MAX]
    if abs(value) >= 10**18:  # 1e+308 (past a float: its size)
        if isinstance(value, int) and value.bit_length() > 1000:
            return f"about 2^{value.bit_length()}"
        return f"{value:.3g}"
    if not math.isfinite(value) or not float(value).is_integer():
        return f"{value:g}"
    return f"{int(value):,}"


def output_tokens_problem(value: Any, chunks: int, max_tokens: int | None) -> str | None:
    """Words when a stream's `usage.completion_tokens` cannot be true; None when it can."""
    tokens = count(value)
    stream = f"a stream of {chunks:,} chunk{'s' if chunks != 1 else ''}"
    if tokens is None:
        return f"server's usage says {shown(value)} output tokens for {stream} (not a count)"
    if max_tokens is not None and tokens > max_tokens:
        return (
            f"server's usage says {shown(tokens)} output tokens for {stream}; "
            f"{max_tokens:,} were asked for (max_tokens)"
        )
    return None


def input_tokens_problem(value: Any, request_bytes: int) -> str | None:
    """Words when a response's `usage.prompt_tokens` cannot be true for a request body of
    `request_bytes` bytes; None when it can (or when the server gave none)."""
    if value is None:
        return None
    tokens = count(value)
    if tokens is None:
        return f"server's usage says {shown(value)} input tokens (not a count)"
    if request_bytes > 0 and tokens > request_bytes + PROMPT_TEMPLATE_TOKENS:
        return (
            f"server's usage says {shown(tokens)} input tokens for a request of "
            f"{request_bytes:,} bytes"
        )
    return None


# The summary numbers that can never be negative or infinite, whatever was measured.
NON_NEGATIVE_SUMMARY = (
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "steady_output_throughput",
    "preemptions",
    "generation_tokens_delta",
    "prompt_tokens_delta",
    "request_success_delta",
)


def summary_problems(summary: dict[str, Any]) -> list[str]:
    """Words for each summary number that cannot be true: negative or not finite, or an output
    throughput over MAX_TOKENS_PER_S. Once per run, after `tuning.measure.metrics.summarize`."""
    out = []
    for key in NON_NEGATIVE_SUMMARY:
        value = summary.get(key)
        if value is None:
            continue
        x = number(value)
        if x is None or x < 0:
            out.append(f"{key} = {shown(value)}")
        elif key.endswith("output_throughput") and x > MAX_TOKENS_PER_S:
            out.append(f"{key} = {shown(round(x))} tok/s, over {MAX_TOKENS_PER_S:,.0f}")
    return out
