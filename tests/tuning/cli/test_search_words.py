"""Issue 40: the lines a user reads of a search speak the metric catalog's words, not its keys. A
search's step lines, `search show` (objective, values, steps, the confirm line: it said "on
output_throughput") and `plan show` used to print the raw key; --json keeps the keys."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.compare.catalog import METRIC_BY_KEY

# any catalog key with an underscore (output_throughput, mean_ttft_ms, ...), as a word
KEYS = re.compile(r"\b(" + "|".join(k for k in METRIC_BY_KEY if "_" in k) + r")\b")


def test_a_searchs_lines_name_the_objective_in_words(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        flags = (
            f"--param concurrency --range 1:4 --coarse 2 --budget-runs 2 --base-url {srv.base_url}"
        )
        flags += " --model m --objective output_throughput --num-requests 8 --input-len 4"
        flags += f" --output-len 3 --num-warmups 0 --db {db}"
        done = tuning_cli(["search", *flags.split()], lab_home)
    assert done.returncode == 0, done.stderr
    steps = [x for x in done.stdout.splitlines() if x.startswith("step ")]
    assert steps and all(" output throughput " in x and "tok/s" in x for x in steps), steps
    shown = tuning_cli(["search", "show", "1", "--db", str(db)], lab_home).stdout
    assert "objective: output throughput (tok/s" in shown
    assert shown.splitlines()[-1].startswith("confirm: "), shown
    assert not KEYS.search(done.stdout + shown), KEYS.findall(done.stdout + shown)
    facts = json.loads(
        tuning_cli(["search", "show", "1", "--db", str(db), "--json"], lab_home).stdout
    )
    assert facts["objective"] == "output_throughput"  # --json keeps the key
