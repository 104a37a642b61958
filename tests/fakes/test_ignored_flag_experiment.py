"""Issue 11 item 1 end to end on the fake vLLM: an experiment whose changed flag the engine parses
and echoes but does not apply (`ignore_flag=NAME`) stores the mismatch on the run, Compare gives
that side no verdict, and the Runs and Compare pages say so."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from store import connect, queries

REPO = Path(__file__).resolve().parents[2]
FakeCli = Callable[..., CompletedProcess[str]]
WORKLOAD = ["--num-requests", "6", "--concurrency", "3", "--input-len", "8", "--output-len", "4"]
WORKLOAD += ["--num-warmups", "1", "--start-timeout", "240"]


def experiment(cli: FakeCli, home: Path, faults: str, *args: str) -> list[dict[str, Any]]:
    done = cli(home, "experiment", *args, *WORKLOAD, "--json", faults=faults)
    assert done.returncode == 0, done.stdout + done.stderr
    with connect(home / "lab.db", readonly=True) as db:
        return queries.list_runs(db, include_hidden=True)


@pytest.fixture(scope="module")
def ignored_block_size(
    tmp_path_factory: pytest.TempPathFactory, fake_cli: FakeCli
) -> dict[str, Any]:
    """block-size 32 vs 64, twice each; the engine ignores 64 (runs with its default, 16)."""
    home = tmp_path_factory.mktemp("ignored")
    faults = "ignore_flag=block_size@block-size=64"
    args = ["--param", "block-size", "--values", "32,64", "--repeats", "2"]
    runs = experiment(fake_cli, home, faults, *args)
    return {"home": home, "faults": faults, "runs": runs}


def test_the_run_stores_what_the_engine_ran_with_and_the_mismatch(
    ignored_block_size: dict[str, Any],
) -> None:
    runs = ignored_block_size["runs"]
    assert [r["status"] for r in runs] == ["done"] * 4  # measured: a result, not a failure
    for r in runs:
        eff = r["effective_config"]
        assert eff["sources"]["block-size"] == "vllm:cache_config_info"
        assert eff["non_default_args"]["block-size"] == int(r["value"])  # the parser saw it
        if r["value"] == "32":
            assert r["config_mismatch"] == [] and eff["values"]["block-size"] == "32"
        else:
            (m,) = r["config_mismatch"]
            assert (m["param"], m["asked"], m["effective"]) == ("block-size", 64, "16")
            assert "block-size: asked 64, the engine ran with 16" in m["reason"]


def test_compare_gives_the_ignored_side_no_verdict(
    ignored_block_size: dict[str, Any], fake_cli: FakeCli
) -> None:
    exp = str(ignored_block_size["runs"][0]["experiment_id"])
    home, faults = ignored_block_size["home"], ignored_block_size["faults"]
    done = fake_cli(home, "compare", "--experiment", exp, "--json", faults=faults)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (cand,) = data["candidates"]
    assert cand["label"] == "block-size = 64" and "block-size: asked 64" in cand["not_applied"][0]
    assert {r["verdict"] for r in data["rows"] if r["role"] == "candidate"} == {"not applied"}
    text = fake_cli(home, "compare", "--experiment", exp, faults=faults).stdout
    assert "Not applied by the engine, so no verdict" in text


@pytest.fixture
def pages(ignored_block_size: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = ignored_block_size["home"]
    monkeypatch.setenv("TUNING_LAB_HOME", str(home))
    monkeypatch.setenv("TUNING_LAB_DB", str(home / "lab.db"))
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def page(path: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def test_the_runs_page_shows_the_mismatch(pages: None, ignored_block_size: dict[str, Any]) -> None:
    runs = ignored_block_size["runs"]
    at = page("app_pages/2_Runs.py")
    table = next(df.value for df in at.dataframe if "config" in df.value.columns)
    badges = {v: list(c) for v, c in zip(table["value"], table["config"], strict=True)}
    assert badges == {"32": ["applied"], "64": ["not applied: block-size"]}
    warned = "\n".join(w.value for w in at.warning)
    assert "The engine did not run with what these runs asked for" in warned
    listed = next(df.value for df in at.dataframe if "what the engine said" in df.value.columns)
    assert sorted(listed["run"]) == sorted(r["id"] for r in runs if r["value"] == "64")
    assert all("block-size: asked 64, the engine ran with 16" in x for x in listed.iloc[:, 1])


def test_the_compare_page_gives_no_verdict(pages: None) -> None:
    at = page("app_pages/4_Compare.py")
    warned = "\n".join(w.value for w in at.warning)
    assert "Not applied by the engine, so no verdict" in warned
    why = next(df.value for df in at.dataframe if "why" in df.value.columns)
    assert set(why["side"]) == {"block-size = 64"} and len(why) == 2  # its two repeats
    table = next(df.value for df in at.dataframe if "metric" in df.value.columns)
    verdicts = table["verdict 64"].tolist()
    assert verdicts and all(v.startswith("⊘ not applied") for v in verdicts[1:])


def test_an_ignored_max_num_seqs_shows_under_load(tmp_path: Path, fake_cli: FakeCli) -> None:
    """No resolved config reports max-num-seqs: vLLM's running count above the limit does."""
    faults = "ignore_flag=max_num_seqs,ttft_ms=1000"
    runs = experiment(
        fake_cli, tmp_path, faults, "--repeats", "1", "--param", "max-num-seqs", "--values", "1"
    )
    (run,) = runs
    (m,) = run["config_mismatch"]
    assert m["param"] == "max-num-seqs" and m["source"] == "vllm:num_requests_running under load"
    assert "more than the limit" in m["reason"]
