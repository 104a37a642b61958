"""Chunked streams: when the compared sides' chunks carry different numbers of tokens, say so next
to ITL.

vLLM's ITL is the gap between two streamed chunks. With `--stream-interval N` (or speculative
decoding) a chunk carries several tokens, so the gap grows while the time per token falls: a
comparison of stream-interval 1 vs 16 would call ITL far "worse" although every token came sooner.
The lab records each run's tokens a chunk (tuning.measure.metrics) and ITL per token; this module
finds the sides whose tokens a chunk differ from the baseline's and words the note the table, the
CLI and the page put beside each ITL row, pointing at ITL per token and TPOT instead.
"""

from __future__ import annotations

from tuning.compare.catalog import TOKENS_PER_CHUNK, Metric
from tuning.compare.comparison import Comparison, Side

# Sides whose mean tokens a chunk differ by more than this fraction have different chunk sizes
# (chat's role chunk alone moves 128 tokens' figure by under 1 %).
CHUNK_DIFFERS = 0.05


def tokens_per_chunk(side: Side) -> float | None:
    """The mean of the side's runs' tokens a chunk; None when no run recorded it."""
    values = side.values.get(TOKENS_PER_CHUNK) or []
    return sum(values) / len(values) if values else None


def chunks_differ(comparison: Comparison, side: Side) -> bool:
    """True when `side`'s chunks carry a different number of tokens than the baseline's."""
    base, cand = tokens_per_chunk(comparison.baseline), tokens_per_chunk(side)
    if base is None or cand is None or base <= 0 or cand <= 0:
        return False
    return max(base, cand) / min(base, cand) - 1 > CHUNK_DIFFERS


def is_per_chunk(metric: Metric) -> bool:
    """ITL itself (per chunk), not ITL per token."""
    return "_itl_" in metric.key and "per_token" not in metric.key


def _size(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}"


def chunk_note(comparison: Comparison, side: Side | None = None) -> str | None:
    """'chunk size differs (1 → 15.1 tokens a chunk): ITL is per chunk; compare ITL per token
    and TPOT' for `side` against the baseline (or every candidate whose chunks differ); None when
    the chunks carry the same number of tokens, or it is not known."""
    sides = [side] if side is not None else comparison.candidates
    differ = [s for s in sides if s is not comparison.baseline and chunks_differ(comparison, s)]
    if not differ:
        return None
    base = _size(tokens_per_chunk(comparison.baseline))
    sizes = ", ".join(_size(tokens_per_chunk(s)) for s in differ)
    who = "" if side is not None or len(differ) == 1 else f" ({', '.join(s.label for s in differ)})"
    return (
        f"chunk size differs ({base} → {sizes} tokens a chunk{who}): ITL is per chunk; "
        "compare ITL per token and TPOT"
    )
