"""A lab whose stored text is hostile, as an imported bundle from a hostile teammate could make it.

    info = seed_hostile_lab(path, value=SCRIPT_BREAKOUT, text=MD_NOTES)

Two values x two repeats of measured runs (the baseline "2" and the candidate `value`), one failed
start, and optionally an experiment that is running now (its runner pid is this process and its
heartbeat fresh, so the home page's reaper leaves it alone). Every free-text field the lab stores
(names, notes, tags, author, host, origin, model, failure kind, reason, hint, log tail, health
reasons) carries `text`; the run values carry `value`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.records import NewExperiment, RequestRecord
from store import connect, open_db, queries, repo
from tuning.cli.main import main as cli_main
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.measure.metrics import summarize

# Closes the inline <script> of an HTML export and runs its own; the HTML comment opener and the
# line separators are the other two ways out of a JSON-in-script block.
SCRIPT_BREAKOUT = (
    "16</script><script>window.__pwned=1;alert(1)</script>"
    "<!--<script>\u2028\u2029&amp;<img src=x onerror=window.__pwned=2>"
)
# Markdown an st.markdown would draw as an image (a request to a host the data chose) and as bold.
MD_IMAGE = "![x](http://127.0.0.1:9/x.png)"
MD_NOTES = "**bold** <img src=x onerror=alert(1)> [link](javascript:alert(1)) :red[red] $x^2$"
# A terminal escape: colours, or worse, the rest of the user's terminal.
TERM_ESCAPE = "\x1b[31mred\x1b]0;title\x07\x1b[0m"

WORKLOAD = {
    "num_requests": 12,
    "concurrency": 4,
    "input_len": 16,
    "output_len": 8,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}


def _records(ttft_s: float) -> list[RequestRecord]:
    return [
        RequestRecord(
            index=i,
            start=i * 0.05,
            ttft=ttft_s * (1 + 0.01 * (i % 5)),
            end=i * 0.05 + ttft_s + 0.07,
            itl=[0.01] * 7,
            prompt_tokens=16,
            output_tokens=8,
            ok=True,
            http_status=200,
        )
        for i in range(12)
    ]


def seed_hostile_lab(
    path: Path,
    *,
    value: str,
    text: str = MD_NOTES,
    param: str = "max-num-seqs",
    with_active: bool = False,
) -> dict[str, Any]:
    """The hostile lab described above; returns the ids."""
    db = open_db(path)
    exp = repo.create_experiment(
        db,
        NewExperiment(param=param),
        name=f"sweep {text}",
        values_json=["2", value],
        repeats=2,
        config_json={"block-size": 16},
        workload_json=WORKLOAD,
        model=text,
        status="done",
        phase="done",
        runs_total=5,
        runs_done=5,
        author=text,
        host=text,
        origin=text,
        notes=text,
        tags=text,
        error=text,
    )

    def run(seq: int, repeat: int, val: str, status: str, *texts: str, **fields: Any) -> int:
        """A run of the experiment: `text` as its author, origin and each field named in `texts`."""
        return repo.create_run(
            db,
            experiment_id=exp,
            seq=seq,
            repeat_index=repeat,
            param=param,
            value=val,
            config_json={"block-size": 16, param: val},
            workload_json=WORKLOAD,
            workload_fingerprint="fp-hostile",
            engine="embedded",
            model="tiny",
            hardware="cpu-test",
            status=status,
            phase=status,
            **dict.fromkeys(("author", "origin", *texts), text),
            **fields,
        )

    run_ids: list[int] = []
    seq = 0
    for rep in range(2):
        for val, ttft in (("2", 0.05), (value, 0.06)):
            now = {"started_at": now_iso(), "finished_at": now_iso()}
            engine = {"vllm_version": "0.32.0", "backend": "cpu"}
            rid = run(seq, rep, val, "done", "host", "notes", "tags", **engine, **now)
            seq += 1
            recs = _records(ttft)
            repo.insert_requests(db, rid, recs)
            summary = summarize(recs, 1.0)
            summary.update(peak_tree_rss_bytes=2**30, load_window_s=[0.0, 1.0])
            repo.store_summary(db, rid, summary)
            repo.update_run(
                db,
                rid,
                kv_cache_tokens=4096,
                block_size=16,
                health_json={
                    "client_bound": True,
                    "client_bound_reasons": [text],
                    "target_concurrency": text,
                    "tokens": {"agree": False, "client_output_tokens": text},
                },
            )
            run_ids.append(rid)
    texts = ("failure_kind", "failure_reason", "failure_hint", "log_tail")
    failed = run(seq, 0, value, "failed", *texts)
    out: dict[str, Any] = {"experiment_id": exp, "run_ids": run_ids, "failed_run": failed}
    if with_active:
        live = repo.create_experiment(
            db,
            NewExperiment(param=param),
            name=f"live {text}",
            values_json=[value],
            repeats=1,
            workload_json=WORKLOAD,
            model=text,
            status="running",
            phase=text,
            runs_total=1,
            runs_done=0,
            author=text,
            runner_pid=os.getpid(),
            heartbeat_at=now_iso(),
            started_at=now_iso(),
        )
        out["active_experiment_id"] = live
    db.conn.close()
    return out


def seed_breakout_lab(home: Path) -> dict[str, Any]:
    """The hostile lab with SCRIPT_BREAKOUT as every value and text, at home/lab.db; its ids, its
    `home`, `path` and the comparison of its experiment (`cmp`)."""
    path = home / "lab.db"
    info = seed_hostile_lab(path, value=SCRIPT_BREAKOUT, text=SCRIPT_BREAKOUT)
    with connect(path, readonly=True) as db:
        runs = queries.load_runs(db, queries.experiment_run_ids(db, info["experiment_id"]))
    info.update(home=home, path=path, cmp=build_comparison(runs, default_baseline(runs)))
    return info


def chart_html_cli(lab: dict[str, Any], out: Path) -> int:
    """`tuning chart --kind throughput --out OUT` over the lab's experiment; its exit code."""
    argv = ["chart", "--db", str(lab["path"]), "--experiment", str(lab["experiment_id"])]
    return cli_main([*argv, "--kind", "throughput", "--out", str(out)])
