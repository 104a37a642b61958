"""Values of a column added by a migration, computed for the rows stored before it, in SQL.

One function per migration that needs one; each is one UPDATE over rows whose value is still NULL,
so a migration that ran halfway runs again cleanly.
"""

from __future__ import annotations

from sqlite_utils import Database

# A finished run's chunk figures from its request rows (tuning.measure.metrics: tokens a chunk =
# output tokens / content chunks; ITL per token = each gap / ((output - 1) / (chunks - 1)), whose
# mean over a request's gaps is (E2EL - TTFT) x gaps / (output - 1)). Percentiles need every gap:
# a run stored before has only these two means.
_CHUNK_BACKFILL = """
UPDATE runs SET
  mean_tokens_per_chunk = (
    SELECT sum(q.output_tokens) * 1.0 / sum(json_array_length(q.itl_json) + 1)
    FROM requests q
    WHERE q.run_id = runs.id AND q.ok = 1 AND q.ttft_s IS NOT NULL AND q.end_s IS NOT NULL
      AND q.output_tokens IS NOT NULL AND json_valid(q.itl_json)),
  mean_itl_per_token_ms = (
    SELECT 1000.0 * sum((q.end_s - q.start_s - q.ttft_s) * json_array_length(q.itl_json)
                        / (q.output_tokens - 1))
           / sum(json_array_length(q.itl_json))
    FROM requests q
    WHERE q.run_id = runs.id AND q.ok = 1 AND q.ttft_s IS NOT NULL AND q.end_s IS NOT NULL
      AND q.output_tokens > 1 AND json_valid(q.itl_json) AND json_array_length(q.itl_json) > 0)
WHERE summary_json IS NOT NULL AND mean_tokens_per_chunk IS NULL
"""


def backfill_chunks(db: Database) -> None:
    """m016_chunked_streams: each finished run's tokens a chunk and mean ITL per token, from its
    request rows."""
    db.execute(_CHUNK_BACKFILL)
