"""Real engine, short: a multi-turn workload with prefix caching on reuses the history of earlier
turns (prefix-cache hits > 0 from the engine's /metrics), and the run keeps per-turn numbers."""

from __future__ import annotations

import json
from collections.abc import Callable
from subprocess import CompletedProcess

import pytest

from store import connect, queries
from tuning.engine import EngineSpec

pytestmark = pytest.mark.engine


def test_multi_turn_with_prefix_caching_hits_the_cache(
    built_engine: EngineSpec,
    tuning_cli: Callable[..., CompletedProcess[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = tmp_path_factory.mktemp("traffic-engine")
    db = home / "lab.db"
    done = tuning_cli(
        [
            *("experiment", "--param", "enable-prefix-caching", "--values", "true"),
            *("--multi-turn", "3", "--think-time", "0.2", "--concurrency", "2"),
            *("--num-requests", "6", "--input-len", "160", "--output-len", "8"),
            *("--num-warmups", "1", "--start-timeout", "600", "--db", str(db), "--json"),
        ],
        home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["run_ids"][0]
    with connect(db, readonly=True) as conn:
        run = queries.get_run(conn, run_id)
        recs = queries.get_requests(conn, run_id)
    assert run["status"] == "done" and run["completed"] == 6, run.get("failure_reason")
    assert [r.turn for r in recs] == [0, 1, 2, 0, 1, 2]
    # Later turns send the history: more prompt tokens than the turn before.
    assert recs[1].prompt_tokens > recs[0].prompt_tokens  # type: ignore[operator]
    summary = run["summary"]
    assert summary["prefix_cache_hits_delta"] > 0, summary
    assert summary["prefix_cache_hit_rate"] > 0
    traffic = summary["traffic"]
    assert traffic["requests_first_turn"] == 2 and traffic["requests_later_turns"] == 4
    assert traffic["mean_ttft_ms_later_turns"] is not None
