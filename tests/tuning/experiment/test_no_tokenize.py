"""`experiment --base-url` against an OpenAI-compatible server without /tokenize (a gateway, not
vLLM): every run failed with a traceback (issue 22) while `bench` fell back to the lab's own
tokenizer. The run path now falls back the same way, says so, marks input lengths approximate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from store import connect, queries
from tests.fakes.fake_openai import fake_server
from tuning.settings import REPO_ROOT


def test_an_experiment_against_a_server_without_tokenize_runs(lab_home: Path) -> None:
    db = lab_home / "lab.db"
    with fake_server(tokenize=False) as srv:
        argv = [
            sys.executable,
            "-m",
            "tuning",
            "experiment",
            "--repeats",
            "1",
            "--param",
            "concurrency",
        ]
        argv += ["--values", "1,2", "--base-url", srv.base_url + "/v1", "--model", "fake-model"]
        argv += ["--num-requests", "4", "--input-len", "16", "--output-len", "4"]
        argv += ["--num-warmups", "0", "--db", str(db), "--json"]
        out = subprocess.run(
            argv, cwd=REPO_ROOT, env=os.environ, capture_output=True, text=True, timeout=300
        )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert "no /tokenize" in out.stderr  # said once a run, not hidden
    run_ids = json.loads(out.stdout.strip().splitlines()[-1])["run_ids"]
    with connect(db, readonly=True) as conn:
        runs = [queries.get_run(conn, int(i)) for i in run_ids]
    assert [r["status"] for r in runs] == ["done", "done"]
    assert all(r["completed"] == 4 for r in runs)
    assert all(r["summary"]["input_lens_approximate"] is True for r in runs)
