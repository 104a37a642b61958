"""Issue 25 item 4 and issue 37 item 5: prefer vLLM's default when it does not matter, and
recommend only what the experiment's decision decided. Stored runs (built here, no engine)
compared the way `compare` does; the recommendation keeps the default when every value is decided
equivalent, names a value whose objective is decided better with no guard worse, and keeps the
baseline (saying where vLLM's default stands) when nothing beats it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import connect
from tests.factories import add_measured_experiment
from tuning.cli.main import main
from tuning.present.model import build_model
from tuning.present.report import build_report

PC = "enable-prefix-caching"  # vLLM's default: true (the lab's table and the parser agree)
FLAT = {"output_throughput": [1000.0, 1003.0, 998.0], "mean_ttft_ms": [100.0, 100.4, 99.7]}


def preference(db_path: Path, exp: int) -> Any:
    with connect(db_path, readonly=True) as db:
        return build_model(db, experiment_ids=[exp]).preference


def test_equivalent_on_every_metric_keeps_the_default(fresh_db: Path) -> None:
    exp = add_measured_experiment(
        fresh_db,
        PC,
        {
            True: FLAT,
            False: {"output_throughput": [1001, 999, 1002], "mean_ttft_ms": [100, 100.2, 99.9]},
        },
    )
    pref = preference(fresh_db, exp)
    print(pref.text)
    assert pref.kind == "default" and pref.recommended == "true"
    assert pref.text == (
        f"Keep vLLM's default {PC} = true (the lab's table): every value equivalent on every "
        "primary metric; fewer flags."
    )
    assert pref.inert


def test_one_metric_better_beyond_the_margin_recommends_that_value(fresh_db: Path) -> None:
    exp = add_measured_experiment(
        fresh_db,
        PC,
        {
            True: FLAT,
            False: {"output_throughput": [1200, 1210, 1195], "mean_ttft_ms": [100, 100.2, 99.9]},
        },
    )
    pref = preference(fresh_db, exp)
    print(pref.text)
    assert pref.kind == "value" and pref.recommended == "false"
    assert pref.text.startswith(f"Set {PC} = false: output throughput +20.1 % (better), no guard")
    assert "(p99 TTFT not measured, p99 TPOT not measured)" in pref.text
    assert "decided by the experiment's fixed-repeats test" in pref.text
    assert not pref.inert


def test_no_run_at_the_default_says_why(fresh_db: Path) -> None:
    exp = add_measured_experiment(
        fresh_db,
        "kv-cache-dtype",  # vLLM's default: auto, which this experiment never ran
        {"fp8": FLAT, "bfloat16": FLAT},
    )
    pref = preference(fresh_db, exp)
    print(pref.text)
    assert pref.kind == "keep" and pref.recommended is None
    assert pref.text == (
        "Keep the baseline kv-cache-dtype = fp8: no value's output throughput is decided better "
        "than the baseline's (vLLM's default, kv-cache-dtype = auto (the lab's table), was not "
        "among the values tried)."
    )


def test_the_engine_parser_default_wins_over_the_table(fresh_db: Path) -> None:
    """max-num-seqs has no default in the lab's table; the cached parser of vLLM 0.32.0 says 64."""
    from store import engine_flags

    exp = add_measured_experiment(
        fresh_db,
        "max-num-seqs",
        {
            64: FLAT,
            128: {"output_throughput": [1001, 999, 1002], "mean_ttft_ms": [100, 100.2, 99.9]},
        },
    )
    assert preference(fresh_db, exp).kind == "keep"  # no known default yet: the baseline
    flag = {"name": "max-num-seqs", "dest": "max_num_seqs", "kind": "int", "default": 64}
    catalog = {"python": "/x/python", "vllm_version": "0.32.0", "flags": [flag], "format": 3}
    with connect(fresh_db) as db:
        engine_flags.save(db, "/x/python", "0.32.0", catalog)
    pref = preference(fresh_db, exp)
    print(pref.text)
    assert pref.kind == "default" and pref.recommended == "64"
    assert "max-num-seqs = 64 (vLLM 0.32.0's parser)" in pref.text


def test_compare_text_json_and_report_carry_the_recommendation(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = add_measured_experiment(
        fresh_db,
        PC,
        {
            True: FLAT,
            False: {"output_throughput": [1001, 999, 1002], "mean_ttft_ms": [100, 100.2, 99.9]},
        },
    )
    assert main(["compare", "--db", str(fresh_db), "--experiment", str(exp)]) == 0
    text = capsys.readouterr().out
    assert f"Decision: Keep vLLM's default {PC} = true" in text
    assert main(["compare", "--db", str(fresh_db), "--experiment", str(exp), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prefer_default"]["recommendation"] == "default"
    assert data["prefer_default"]["default"]["value"] is True
    assert data["prefer_default"]["inert"] is True
    page = build_report(fresh_db, experiment_ids=[exp])
    assert '<section id="recommendation"><h2>Recommendation</h2>' in page
    assert f"Keep vLLM&#x27;s default {PC} = true" in page
