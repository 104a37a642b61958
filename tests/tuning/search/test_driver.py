"""Issue 13, item 4 end to end against a fake server (attached, so concurrency is the searched
parameter and nothing restarts): every step is an ordinary run in the store with the reason it
was chosen, the JSON names the chosen value, its runs and the log, and a second call with the
same arguments resumes instead of starting over."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from store import connect, queries
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer


def test_search_runs_steps_and_resumes(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        args = ["search", "--base-url", srv.base_url, "--model", "m", "--param", "concurrency"]
        args += ["--range", "1:4", "--objective", "output_throughput", "--coarse", "2"]
        args += ["--num-requests", "4", "--input-len", "4", "--output-len", "3"]
        args += ["--num-warmups", "0", "--db", str(db), "--json"]
        first = tuning_cli([*args, "--budget-runs", "2"], lab_home)
        assert first.returncode == 0, first.stderr
        done = json.loads(first.stdout)
        assert [e["value"] for e in done["log"]] == [1.0, 4.0]
        assert done["log"][0]["why"].startswith("coarse pass") and "budget" in done["stopped"]
        assert done["chosen"] in (1, 4) and done["interval"] is None
        assert done["start_limit"] is None  # every value started
        # the same search with a larger budget resumes: the two runs are not run again
        again = tuning_cli([*args, "--budget-runs", "3"], lab_home)
    assert again.returncode == 0, again.stderr
    more = json.loads(again.stdout)
    assert more["runs"][:2] == done["runs"] and len(more["runs"]) == 3
    assert more["log"][2]["why"].startswith("refine")
    with connect(db, readonly=True) as conn:
        runs = queries.list_runs(conn, include_hidden=True)
        assert sorted(r["id"] for r in runs) == sorted(more["runs"])
        assert all(r["status"] == "done" for r in runs)
    bad = tuning_cli([*args, "--objective", "nope"], lab_home)
    assert bad.returncode == 2 and "refused: objective 'nope'" in bad.stderr
