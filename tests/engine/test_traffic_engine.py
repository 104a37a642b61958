"""Real engine, short: a multi-turn workload with prefix caching off vs on (the engine's /metrics
count no hits with it off and hits with it on, each run keeps first-turn and later-turn TTFT), and
a replay of the shipped Mooncake-format trace with its dispatch lag reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect, queries
from tuning.engine.spec import EngineSpec

pytestmark = pytest.mark.engine

TRACE = Path(__file__).resolve().parents[2] / "workloads" / "mooncake-small.jsonl"


def experiment(
    tuning_cli: Callable[..., CompletedProcess[str]], home: Path, *args: str
) -> list[dict[str, Any]]:
    """Run `experiment ARGS` into home/lab.db; its runs with their request rows."""
    db = home / "lab.db"
    done = tuning_cli(
        [
            "experiment",
            "--repeats",
            "1",
            *args,
            "--start-timeout",
            "600",
            "--db",
            str(db),
            "--json",
        ],
        home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_ids = json.loads(done.stdout.strip().splitlines()[-1])["run_ids"]
    with connect(db, readonly=True) as conn:
        runs = [queries.get_run(conn, i) for i in run_ids]
        for run in runs:
            run["records"] = queries.get_requests(conn, run["id"])
    return runs


def test_multi_turn_prefix_caching_off_vs_on(
    built_engine: EngineSpec,
    tuning_cli: Callable[..., CompletedProcess[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    runs = experiment(
        tuning_cli,
        tmp_path_factory.mktemp("traffic-engine"),
        *("--param", "enable-prefix-caching", "--values", "false,true"),
        *("--multi-turn", "3", "--think-time", "0.2", "--concurrency", "2"),
        *("--num-requests", "6", "--input-len", "500", "--output-len", "8"),
        "--num-warmups",
        "1",
    )
    for run in runs:
        assert run["status"] == "done" and run["completed"] == 6, run.get("failure_reason")
        recs = run["records"]
        assert [r.turn for r in recs] == [0, 1, 2, 0, 1, 2]
        # Later turns send the history: more prompt tokens than the turn before.
        assert recs[0].prompt_tokens < recs[1].prompt_tokens < recs[2].prompt_tokens  # type: ignore[operator]
        traffic = run["summary"]["traffic"]
        assert traffic["requests_first_turn"] == 2 and traffic["requests_later_turns"] == 4
        assert traffic["mean_ttft_ms_first_turn"] > 0 and traffic["mean_ttft_ms_later_turns"] > 0
    off, on = (run["summary"] for run in runs)
    assert not off.get("prefix_cache_hits_delta"), off  # caching off: nothing is reused
    assert on["prefix_cache_hits_delta"] > 0 and on["prefix_cache_hit_rate"] > 0, on
    print(
        "prefix caching off/on: hit rate "
        f"{off.get('prefix_cache_hit_rate') or 0:.2f} / {on['prefix_cache_hit_rate']:.2f}; "
        "mean TTFT first turn "
        f"{off['traffic']['mean_ttft_ms_first_turn']:.1f} / "
        f"{on['traffic']['mean_ttft_ms_first_turn']:.1f} ms, later turns "
        f"{off['traffic']['mean_ttft_ms_later_turns']:.1f} / "
        f"{on['traffic']['mean_ttft_ms_later_turns']:.1f} ms"
    )


def test_trace_replay_reports_its_dispatch_lag(
    built_engine: EngineSpec,
    tuning_cli: Callable[..., CompletedProcess[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    (run,) = experiment(
        tuning_cli,
        tmp_path_factory.mktemp("trace-engine"),
        *("--param", "concurrency", "--values", "4", "--dataset", str(TRACE)),
        *("--trace-speed", "1", "--num-requests", "6", "--num-warmups", "1"),
    )
    assert run["status"] == "done" and run["completed"] == 6, run.get("failure_reason")
    assert run["workload_spec"]["arrival"]["kind"] == "trace"
    assert all(r.dispatch_lag is not None for r in run["records"])
    traffic = run["summary"]["traffic"]
    lag = traffic["dispatch_lag"]
    assert traffic["arrival"] == "trace" and lag["planned"] == 6
    assert 0 <= lag["mean_s"] <= lag["max_s"] and isinstance(traffic["schedule_kept"], bool)
    print(
        f"trace replay: 6 requests, dispatch lag mean {1000 * lag['mean_s']:.1f} ms, "
        f"p99 {1000 * lag['p99_s']:.1f} ms, max {1000 * lag['max_s']:.1f} ms, "
        f"schedule kept {traffic['schedule_kept']}"
    )
