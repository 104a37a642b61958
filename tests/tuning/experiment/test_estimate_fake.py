"""Issue 25, item 2, acceptance: a 6-run experiment's printed estimate is within 30 % of its
actual wall time, on the fake vLLM with a scripted start time (start_delay) and a small load,
the model's numbers coming from an experiment of the same engine run just before it. The wall
time is measured from the moment the estimate line is printed to the end of the command, which
is what the line promises; the progress lines say how much is left after each run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO
from tests.fakes.engines import fake_settings_env

START_DELAY = "start_delay=2"  # the fake spends it between launch and /health 200
LOAD = ["--num-requests", "8", "--concurrency", "4", "--input-len", "8", "--output-len", "8"]
LOAD += ["--num-warmups", "0", "--start-timeout", "60"]


def experiment(home: Path, repeats: int, *extra: str) -> tuple[int, list[str], str, float]:
    """`python -m tuning experiment` over max-num-seqs 2,4 on the fake: (exit code, stderr
    lines, stdout, seconds from the printed estimate line to the end)."""
    args = ["experiment", "--repeats", "1", "--param", "max-num-seqs", "--values", "2,4"]
    args += ["--repeats", str(repeats), *LOAD, "--db", str(home / "lab.db"), *extra]
    env = {**os.environ, **fake_settings_env(home, START_DELAY), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None and proc.stdout is not None
    lines: list[str] = []
    printed_at = None
    for raw in proc.stderr:  # tqdm redraws with \r: the words are the last part of a line
        line = raw.rstrip("\n").split("\r")[-1]
        lines.append(line)
        if printed_at is None and line.startswith("estimate: "):
            printed_at = time.monotonic()
    out = proc.stdout.read()
    code = proc.wait(timeout=120)
    assert printed_at is not None, lines
    return code, lines, out, time.monotonic() - printed_at


def test_a_six_run_experiments_estimate_is_within_30_percent(lab_home: Path) -> None:
    lab_home.mkdir(parents=True, exist_ok=True)
    code, lines, _, _ = experiment(lab_home, 1)  # the history: 2 runs of this engine
    assert code == 0, lines
    assert any("no runs of this engine yet: a guess" in line for line in lines), lines

    code, lines, out, wall = experiment(lab_home, 3, "--json")
    assert code == 0, lines
    estimate = json.loads(out.strip().splitlines()[-1])["estimate"]
    line = next(x for x in lines if x.startswith("estimate: "))
    print(f"{line}\nmeasured: {wall:.1f} s from the estimate line to the end")
    print("\n".join(x for x in lines if x.startswith("run ")))
    assert line.startswith("estimate: 6 runs, about ")
    assert "from 2 earlier runs of this engine: start " in line
    assert estimate["runs"] == 6 and estimate["line"] == line
    assert abs(estimate["seconds"] - wall) <= 0.30 * wall, (estimate["seconds"], wall)
    # after each run: how many are done and what is left, by the same model
    left = [x for x in lines if x.startswith("run ") and " of 6 done; about " in x]
    assert [x.split(" of ")[0] for x in left] == [f"run {i}" for i in range(1, 7)], lines
    assert left[-1].endswith(" left")
