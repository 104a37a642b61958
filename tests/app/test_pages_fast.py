"""AppTest of the dashboard pages (Live, Compare, History) against a synthetic, seeded lab DB.

The DB is written through store.repo like the runner writes it: experiments, runs with stored
summaries, per-request rows and telemetry samples; one experiment is live (its runner pid is this
process and its heartbeat is fresh, so the home page's stale-runner sweep leaves it alone).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.clock import now_iso
from core.records import RequestRecord, SampleRow
from store import open_db, queries, repo
from tuning.metrics import summarize

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "app.py")
WORKLOAD = {
    "num_requests": 40,
    "concurrency": 8,
    "input_len": 64,
    "output_len": 32,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}


def _records(rng: np.random.Generator, n: int, ttft_s: float, tpot_s: float) -> list[RequestRecord]:
    out = []
    for i in range(n):
        start = i * 0.05
        ttft = ttft_s * (1 + rng.normal(0, 0.05))
        itl = list(np.abs(rng.normal(tpot_s, tpot_s * 0.1, 31)))
        out.append(
            RequestRecord(
                index=i,
                start=start,
                ttft=ttft,
                end=start + ttft + sum(itl),
                itl=itl,
                prompt_tokens=64,
                output_tokens=32,
                ok=True,
                http_status=200,
            )
        )
    return out


def _samples(duration: float, kv_peak: float, rss: float) -> list[SampleRow]:
    rows = []
    for k in range(int(duration * 4)):
        t = k / 4
        load = 1.0 if 5 <= t <= duration - 2 else 0.0
        rows += [
            SampleRow(t, "tree_rss_bytes", rss * min(1.0, t / 4)),
            SampleRow(t, "kv_cache_usage_perc", kv_peak * load),
            SampleRow(t, "generation_tokens_total", max(0.0, t - 5) * 300),
            SampleRow(t, "num_requests_running", 8 * load),
            SampleRow(t, "num_requests_waiting", 2 * load),
        ]
    return rows


def add_run(
    db: Any,
    exp_id: int,
    seq: int,
    value: int,
    repeat: int,
    rng: np.random.Generator,
    status: str = "done",
    hardware: str = "cpu-test",
    ttft_s: float = 0.05,
    log_path: str | None = None,
) -> int:
    config = {"max-num-seqs": value, "block-size": 32}
    run_id = repo.create_run(
        db,
        experiment_id=exp_id,
        seq=seq,
        repeat_index=repeat,
        param="max-num-seqs",
        value=str(value),
        config_json=config,
        workload_json=WORKLOAD,
        workload_fingerprint="fp-test",
        engine="embedded",
        vllm_version="0.32.0",
        model="tiny",
        backend="cpu",
        hardware=hardware,
        status=status,
        phase=status,
        author="ada",
        started_at=now_iso(),
        log_path=log_path,
    )
    if status == "failed":
        repo.update_run(
            db,
            run_id,
            failure_kind="oom",
            failure_reason="KV cache too small",
            failure_hint="lower max-num-seqs",
            log_tail="ERROR: out of memory\n",
        )
        return run_id
    recs = _records(rng, 40, ttft_s, 0.004 * (1 + value / 64))
    repo.insert_requests(db, run_id, recs)
    repo.insert_samples(db, run_id, _samples(20.0, 0.3 + value / 100, 1.5 * 2**30))
    if status == "done":
        summary = summarize(recs, 2.5)
        summary.update(
            peak_tree_rss_bytes=int(1.5 * 2**30),
            peak_kv_cache_usage_perc=0.4,
            preemptions=0,
            load_window_s=[5.0, 18.0],
        )
        repo.store_summary(db, run_id, summary)
        repo.update_run(
            db,
            run_id,
            time_to_healthy_s=12.0 + rng.random(),
            kv_cache_tokens=8192,
            finished_at=now_iso(),
        )
    return run_id


def seed(path: Path, log_dir: Path) -> dict[str, Any]:
    """Experiment 1: done, max-num-seqs 2/16/64 x 3 repeats (64 failed to start, one run on other
    hardware); experiment 2: running now, with a log file."""
    db = open_db(path)
    rng = np.random.default_rng(7)
    e1 = repo.create_experiment(
        db,
        name="max-num-seqs = 2, 16, 64",
        param="max-num-seqs",
        values_json=[2, 16, 64],
        repeats=3,
        config_json={"block-size": 32},
        workload_json=WORKLOAD,
        model="tiny",
        runs_total=9,
        runs_done=9,
        status="done",
        phase="done",
        author="ada",
    )
    seq = 0
    ids: list[int] = []
    for repeat in range(3):
        for value in (2, 16, 64):
            status = "failed" if value == 64 else "done"
            hw = "other-box" if (value == 16 and repeat == 2) else "cpu-test"
            ids.append(
                add_run(
                    db,
                    e1,
                    seq,
                    value,
                    repeat,
                    rng,
                    status=status,
                    hardware=hw,
                    ttft_s=0.05 if value == 2 else 0.06,
                )
            )
            seq += 1
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "run-live.log"
    log.write_text("INFO starting vLLM\nINFO KV cache: 8192 tokens\nINFO live-log-marker\n")
    e2 = repo.create_experiment(
        db,
        name="max-num-seqs = 4, 8",
        param="max-num-seqs",
        values_json=[4, 8],
        repeats=1,
        config_json={"block-size": 32},
        workload_json=WORKLOAD,
        model="tiny",
        runs_total=2,
        runs_done=1,
        status="running",
        phase="loading",
        author="bob",
    )
    done = add_run(db, e2, 0, 4, 0, rng)
    live = add_run(db, e2, 1, 8, 0, rng, status="running", log_path=str(log))
    repo.update_experiment(
        db,
        e2,
        current_run_id=live,
        requests_done=17,
        requests_total=40,
        runner_pid=os.getpid(),
        heartbeat_at=now_iso(),
        started_at=now_iso(),
    )
    db.conn.close()
    return {"done_exp": e1, "live_exp": e2, "runs": ids, "live_run": live, "live_done": done}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    home = tmp_path / "lab"
    monkeypatch.setenv("TUNING_LAB_HOME", str(home))
    monkeypatch.setenv("TUNING_LAB_DB", str(tmp_path / "lab.db"))
    info = seed(tmp_path / "lab.db", home / "logs")
    info["db"] = tmp_path / "lab.db"
    yield info
    st.cache_data.clear()
    st.cache_resource.clear()


def _page(page: str, setup: Any = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    if setup:
        setup(at)
    at.switch_page(page).run()
    return at


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [m.value for m in at.caption]
    parts += (
        [x.value for x in at.success]
        + [x.value for x in at.warning]
        + [x.value for x in at.info]
        + [x.value for x in at.error]
    )
    parts += [x.value for x in at.code]
    return "\n".join(str(p) for p in parts)


def test_compare_page_defaults_to_latest_done_experiment(lab: dict[str, Any]) -> None:
    at = _page("pages/4_Compare.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="cmp_experiment").value == lab["done_exp"]
    text = _texts(at)
    assert "Comparability" in text and "other-box" in _frames(at)
    assert "pre-allocates the KV cache" in text
    base = at.multiselect(key=f"cmp_baseline_exp{lab['done_exp']}").value
    assert sorted(base) == sorted(lab["runs"][0::3])  # the first value's runs
    table = _frame(at, "metric")
    assert "verdict max-num-seqs = 16" in table.columns
    assert "TPOT = (E2EL − TTFT) / (output tokens − 1)" in text
    for key in (
        "dl_png_throughput",
        "dl_svg_latency",
        "dl_html_cdf",
        "dl_csv_table",
        "dl_json_table",
        "dl_png_memory",
        "dl_png_kv",
        "dl_png_knee",
    ):
        assert at.get("download_button") and any(
            getattr(b, "key", None) == key for b in at.get("download_button")
        ), key


def _frames(at: AppTest) -> str:
    return "\n".join(df.value.to_csv() for df in at.dataframe)


def _frame(at: AppTest, column: str) -> Any:
    """The first dataframe with this column (AppTest exposes no key for read-only frames)."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no dataframe with column {column!r}")


def test_compare_page_with_runs_from_link_and_slo(lab: dict[str, Any]) -> None:
    ids = lab["runs"][:6]

    def setup(at: AppTest) -> None:
        at.query_params["runs"] = ",".join(map(str, ids))
        at.session_state["cmp_slo_ttft"] = 1000.0

    at = _page("pages/4_Compare.py", setup)
    assert not at.exception, at.exception
    assert at.selectbox(key="cmp_experiment").value is None
    table = _frame(at, "metric")
    assert any("goodput" in str(m) for m in table["metric"])


def test_compare_page_baseline_switch_flips_roles(lab: dict[str, Any]) -> None:
    at = _page("pages/4_Compare.py")
    key = f"cmp_baseline_exp{lab['done_exp']}"
    sixteen = [lab["runs"][1], lab["runs"][4]]
    at.multiselect(key=key).set_value(sixteen).run()
    assert not at.exception, at.exception
    table = _frame(at, "metric")
    assert any(c.startswith("baseline: max-num-seqs = 16") for c in table.columns)


def test_live_page_shows_active_experiment(lab: dict[str, Any]) -> None:
    at = _page("pages/3_Live.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="live_experiment").value == lab["live_exp"]
    text = _texts(at)
    assert "live-log-marker" in text
    assert "loading" in text
    assert at.button(key="live_stop")
    progress = [p.value for p in at.get("progress")]
    assert progress, "progress bars"
    at.button(key="live_stop").click().run()
    assert not at.exception, at.exception
    db = open_db(lab["db"])
    assert queries.cancel_requested(db, lab["live_exp"])
    # a second poll (what run_every does in the browser) still renders from the DB alone
    at.run()
    assert not at.exception, at.exception


def test_live_page_final_state_when_nothing_runs(lab: dict[str, Any]) -> None:
    db = open_db(lab["db"])
    repo.update_experiment(
        db, lab["live_exp"], status="cancelled", phase="cancelled", finished_at=now_iso()
    )
    db.conn.close()
    at = _page("pages/3_Live.py")
    assert not at.exception, at.exception
    text = _texts(at)
    assert "cancelled" in text
    assert not [b for b in at.button if getattr(b, "key", None) == "live_stop"]


def test_live_page_query_param_picks_experiment(lab: dict[str, Any]) -> None:
    at = _page(
        "pages/3_Live.py", lambda a: a.query_params.__setitem__("experiment", str(lab["done_exp"]))
    )
    assert not at.exception, at.exception
    assert at.selectbox(key="live_experiment").value == lab["done_exp"]


def test_history_page_filters_edits_and_deletes(lab: dict[str, Any]) -> None:
    at = _page("pages/5_History.py")
    assert not at.exception, at.exception
    runs = _frame(at, "param")
    assert len(runs) == 11
    at.multiselect(key="hist_status").set_value(["failed"]).run()
    assert len(_frame(at, "param")) == 3
    at.multiselect(key="hist_status").set_value([]).run()
    at.text_input(key="hist_text").set_value("other-box").run()
    assert len(_frame(at, "param")) == 1
    at.text_input(key="hist_text").set_value("").run()
    target = lab["runs"][0]
    at.selectbox(key="hist_edit_run").set_value(target).run()
    at.text_area(key=f"hist_notes_{target}").set_value("=cmd|' /C calc'!A0 baseline note").run()
    at.text_input(key=f"hist_tags_{target}").set_value("baseline, cpu").run()
    at.button(key="hist_save").click().run()
    assert not at.exception, at.exception
    db = open_db(lab["db"])
    row = queries.get_run(db, target)
    assert row["notes"].startswith("=cmd") and row["tags"] == "baseline, cpu"
    at.button(key="hist_hide").click().run()
    assert queries.get_run(db, target)["hidden"] == 1
    assert len(_frame(at, "param")) == 10
    at.checkbox(key="hist_show_hidden").check().run()
    assert len(_frame(at, "param")) == 11
    # delete needs the confirmation box first
    victim = lab["runs"][2]
    at.selectbox(key="hist_edit_run").set_value(victim).run()
    assert at.button(key="hist_delete").disabled
    at.checkbox(key="hist_confirm_delete").check().run()
    at.button(key="hist_delete").click().run()
    assert not at.exception, at.exception
    assert victim not in {r["id"] for r in queries.list_runs(db, include_hidden=True)}


def test_history_page_experiments_tab(lab: dict[str, Any]) -> None:
    at = _page("pages/5_History.py")
    exps = _frame(at, "created")
    assert len(exps) == 2
    # a running experiment cannot be deleted
    at.selectbox(key="hist_edit_experiment").set_value(lab["live_exp"]).run()
    assert at.button(key="hist_exp_delete").disabled


@pytest.mark.parametrize("page", ["pages/3_Live.py", "pages/4_Compare.py", "pages/5_History.py"])
def test_pages_on_an_empty_lab(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "lab"))
    monkeypatch.setenv("TUNING_LAB_DB", str(tmp_path / "lab.db"))
    at = _page(page)
    assert not at.exception, at.exception
    assert "No " in _texts(at) or "Nothing" in _texts(at)


def test_pages_on_edge_cases(lab: dict[str, Any]) -> None:
    """A queued experiment with no runs, a single-run experiment, and runs of two experiments
    with different parameters picked together from a link."""
    db = open_db(lab["db"])
    repo.create_experiment(
        db,
        name="queued",
        param="block-size",
        values_json=[16],
        repeats=1,
        status="queued",
        runs_total=1,
    )
    rng = np.random.default_rng(3)
    single = repo.create_experiment(
        db,
        name="one run",
        param="max-num-seqs",
        values_json=[4],
        repeats=1,
        status="done",
        runs_total=1,
        runs_done=1,
    )
    only = add_run(db, single, 0, 4, 0, rng)
    db.conn.close()
    at = _page("pages/3_Live.py")  # the queued one is active, without a run yet
    assert not at.exception, at.exception
    at = _page(
        "pages/4_Compare.py", lambda a: a.query_params.__setitem__("experiment", str(single))
    )
    assert not at.exception, at.exception
    assert "No candidate side" in _texts(at)
    mixed = [lab["runs"][0], lab["runs"][1], only, lab["live_done"]]
    at = _page(
        "pages/4_Compare.py",
        lambda a: a.query_params.__setitem__("runs", ",".join(map(str, mixed))),
    )
    assert not at.exception, at.exception
    at.multiselect(key="cmp_baseline_runs").set_value([]).run()
    assert not at.exception, at.exception
    assert "Pick at least one baseline run" in _texts(at)
