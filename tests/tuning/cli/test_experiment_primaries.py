"""Issue 37 item 2: an experiment declares its primary metrics, `--objective METRIC` and `--guard
METRIC` (repeatable), stored on the experiment and used by its decision; a metric that cannot
decide is refused in one line before anything is planned."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import open_db, queries
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.cli.main import build_parser
from tuning.cli.primaries import primaries_from_args
from tuning.compare.primaries import DEFAULT_GUARDS, Primaries


def _args(*extra: str) -> Primaries:
    args = build_parser().parse_args(
        ["experiment", "--param", "max-num-seqs", "--values", "2,16", *extra]
    )
    return primaries_from_args(args)


def test_the_defaults_and_what_the_flags_declare() -> None:
    assert _args() == Primaries("output_throughput", DEFAULT_GUARDS)
    assert _args("--objective", "mean_ttft_ms", "--guard", "p99_e2el_ms", "--guard", "failed") == (
        Primaries("mean_ttft_ms", ("p99_e2el_ms", "failed"))
    )
    assert _args("--guard", "p99_ttft_ms,preemptions").guards == ("p99_ttft_ms", "preemptions")
    assert _args("--guard", "none").guards == ()
    # an objective that is a default guard is not guarded by itself
    assert _args("--objective", "p99_ttft_ms").guards == ("p99_tpot_ms",)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--objective", "speed"], "--objective 'speed': not a metric; one of output_throughput"),
        (
            ["--guard", "peak_kv_cache_usage_perc"],
            "--guard 'peak_kv_cache_usage_perc': has no better direction, so it cannot decide",
        ),
        (
            ["--guard", "output_throughput"],
            "--guard output_throughput: it is already the objective",
        ),
        (
            ["--objective", "request_goodput"],
            "--objective 'request_goodput': depends on SLOs a comparison sets afterwards",
        ),
    ],
)
def test_a_metric_that_cannot_decide_is_refused_before_anything(
    lab_home: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
    flags: list[str],
    says: str,
) -> None:
    db = lab_home / "lab.db"
    args = ["experiment", "--param", "max-num-seqs", "--values", "2,16", "--db", str(db)]
    done = tuning_cli([*args, *flags], lab_home)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()] and says in done.stderr
    assert not db.exists() or not queries.list_experiments(open_db(db))  # nothing written


def test_the_declared_primaries_are_stored_and_decide(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db_path = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=5.0, itl_ms=5.0)) as srv:
        args = ["experiment", "--param", "concurrency", "--values", "1,2", "--db", str(db_path)]
        args += ["--base-url", srv.base_url, "--model", "m", "--num-requests", "2"]
        args += ["--input-len", "4", "--output-len", "3", "--num-warmups", "0", "--json"]
        args += ["--objective", "mean_ttft_ms", "--guard", "p99_e2el_ms", "--repeats", "2"]
        done = tuning_cli(args, lab_home)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    exp = queries.get_experiment(open_db(db_path), out["experiment_id"])
    assert exp["objective"] == "mean_ttft_ms" and exp["guards"] == ["p99_e2el_ms"]
    decision = exp["decision"]
    assert decision["primaries"] == {"objective": "mean_ttft_ms", "guards": ["p99_e2el_ms"]}
    assert [m["metric"] for m in decision["values"][0]["metrics"]] == [
        "mean_ttft_ms",
        "p99_e2el_ms",
    ]
    assert out["decision"]["rule"] == "fixed-n"  # what `experiment --json` ends with
