"""Runs out of the lab in the field's formats: a Benchmark Report v0.2.1 that llm-d's own
package (`llmd-benchmark-report`) validates, and vLLM bench JSON that vLLM's own loader (the one
`vllm bench sweep plot` uses, from the embedded engine's venv; no server is started) reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tuning.cli.main import main as cli_main
from tuning.experiment.imported import import_field

REPO = Path(__file__).resolve().parents[4]
FIELD = REPO / "tests" / "fixtures" / "field"
ENGINE_PYTHON = REPO / ".engine" / "venv" / "bin" / "python"


@pytest.fixture
def two_values(fresh_db: Path, tmp_path: Path) -> tuple[Path, int]:
    """The real vLLM file and a slower copy, at two values of max-num-seqs (two runs each)."""
    doc = json.loads((FIELD / "vllm_bench_serve.json").read_text())
    eid = None
    for n, (value, factor) in enumerate([("16", 1.0), ("16", 1.01), ("64", 1.5), ("64", 1.52)]):
        path = tmp_path / f"r{n}.json"
        slower = {**doc, "ttfts": [t * factor for t in doc["ttfts"]]}
        slower["latencies"] = [t * factor for t in doc["latencies"]]
        path.write_text(json.dumps(slower))
        eid = import_field(
            fresh_db, path, param="max-num-seqs", value=value, experiment_id=eid
        ).experiment_id
    assert eid is not None
    return fresh_db, eid


def _export(db: Path, *args: str) -> int:
    return cli_main(["export", "--db", str(db), *args])


def test_benchmark_report_validates_with_llmds_package(
    two_values: tuple[Path, int], tmp_path: Path
) -> None:
    import llmd_benchmark_report as llmd  # requirements-dev.txt pins it: make test installs it

    db, eid = two_values
    out = tmp_path / "br"
    assert (
        _export(db, "--experiment", str(eid), "--format", "benchmark-report", "--out", str(out))
        == 0
    )
    files = sorted(out.glob("run-*.json"))
    assert len(files) == 4
    reports = [llmd.load_benchmark_report(json.loads(f.read_text())) for f in files]
    assert {r.version for r in reports} == {"0.2.1"}
    assert len({r.run.eid for r in reports}) == 1  # one experiment
    first = json.loads(files[0].read_text())
    native = first["scenario"]["stack"][0]["native"]["args"]
    assert native == {"--max-num-seqs": 16}
    latency = first["results"]["request_performance"]["aggregate"]["latency"]
    assert latency["time_to_first_token"]["units"] == "s"
    assert 0 < latency["time_to_first_token"]["mean"] < 1  # ms in the lab, seconds here


def test_one_run_is_one_file(two_values: tuple[Path, int], tmp_path: Path) -> None:
    db, _ = two_values
    out = tmp_path / "one.json"
    assert _export(db, "1", "--format", "vllm-bench", "--out", str(out)) == 0
    doc = json.loads(out.read_text())
    original = json.loads((FIELD / "vllm_bench_serve.json").read_text())
    for key in ("completed", "max_concurrency", "model_id", "request_rate"):
        assert doc[key] == original[key], key
    assert doc["mean_ttft_ms"] == pytest.approx(original["mean_ttft_ms"], rel=1e-6)
    assert len(doc["ttfts"]) == len(original["ttfts"])
    assert _export(db, "1", "--format", "vllm-bench", "--out", str(tmp_path / "dir")) == 1


def test_vllm_bench_sweep_folder_reads_back_with_vllms_loader(
    two_values: tuple[Path, int], tmp_path: Path
) -> None:
    if not ENGINE_PYTHON.exists():
        pytest.skip("the embedded engine's venv (.engine/venv) is not built")
    db, eid = two_values
    out = tmp_path / "sweep"
    assert _export(db, "--experiment", str(eid), "--format", "vllm-bench", "--out", str(out)) == 0
    script = (
        "import json, sys; from pathlib import Path; "
        "from vllm.benchmarks.sweep.plot import _json_load_bytes, _convert_inf_nan_strings, "
        "plot, PlotFilters, PlotBinners; d = Path(sys.argv[1]); "
        "rows = [r for p in sorted(d.rglob('**/summary.json')) "
        "for r in _convert_inf_nan_strings(_json_load_bytes(p))]; "
        "plot(d, d / 'figs', [], [], [], ['max_num_seqs'], var_x='request_throughput', "
        "var_y='p99_ttft_ms', filter_by=PlotFilters(), bin_by=PlotBinners(), scale_x=None, "
        "scale_y=None, dry_run=True); "
        "print('ROWS ' + json.dumps([[r['max_num_seqs'], r['p99_ttft_ms']] for r in rows]))"
    )
    done = subprocess.run(
        [str(ENGINE_PYTHON), "-c", script, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("ROWS ")][0]
    rows = json.loads(line[5:])
    assert sorted(v for v, _ in rows) == [16, 16, 64, 64]
    slow = [p for v, p in rows if v == 64]
    fast = [p for v, p in rows if v == 16]
    assert min(slow) > max(fast)


def test_export_reimports_as_the_same_numbers(two_values: tuple[Path, int], tmp_path: Path) -> None:
    """The sweep folder the lab writes is one the lab reads (its flag from the folder names)."""
    db, eid = two_values
    out = tmp_path / "sweep"
    assert _export(db, "--experiment", str(eid), "--format", "vllm-bench", "--out", str(out)) == 0
    other = tmp_path / "other.db"
    result = import_field(other, out)
    assert len(result.runs_added) == 4


def test_benchmark_report_carries_the_kv_cache_start_and_labs_version(
    fresh_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run measured here has a KV capacity, a peak KV usage with its samples and a time to
    healthy: the report left their slots empty, and said tool_version "0.1.0" whatever the lab
    was. They are filled from the run (validated by llm-d's package), the version is the lab's
    package's, and an imported run (no such facts) leaves them out."""
    from importlib import metadata

    import llmd_benchmark_report as llmd
    import numpy as np

    from store import connect
    from tests.factories import add_experiment, add_run

    real = metadata.version  # the lab's package metadata says 9.9.9 (it said 0.1.0 anyway)
    monkeypatch.setattr(
        metadata, "version", lambda name: "9.9.9" if name == "vllm-tuning-lab" else real(name)
    )
    with connect(fresh_db) as db:
        exp = add_experiment(db, values=[16])
        rid = add_run(db, exp, seq=0, value=16, rng=np.random.default_rng(3))
    out = tmp_path / "one.json"
    assert _export(fresh_db, str(rid), "--format", "benchmark-report", "--out", str(out)) == 0
    doc = json.loads(out.read_text())
    report = llmd.load_benchmark_report(doc)  # the package validates it
    assert report.scenario is not None and report.scenario.load is not None
    assert report.scenario.load.standardized.tool_version == "9.9.9"
    assert doc["scenario"]["stack"][0]["native"]["config"] == {"kv_cache_tokens": 8192}
    seen = doc["results"]["observability"]
    (engine,) = seen["components"]
    assert engine["component_label"] == doc["scenario"]["stack"][0]["metadata"]["label"]
    usage = engine["aggregate"]["kv_cache_usage"]
    assert usage["units"] == "fraction" and usage["max"] == pytest.approx(0.36)  # 0.2 + 16/100
    assert 0 < usage["mean"] < usage["max"]  # idle before and after the load: below its peak
    startup = seen["pod_startup_times"]
    assert startup["pods"][0]["startup_seconds"] == 9.5 == startup["aggregate"]["mean"]
    imported = import_field(
        fresh_db, FIELD / "vllm_bench_serve.json", param="max-num-seqs", value="16"
    )
    other = tmp_path / "imported.json"
    rid2 = str(imported.runs_added[0])
    assert _export(fresh_db, rid2, "--format", "benchmark-report", "--out", str(other)) == 0
    theirs = json.loads(other.read_text())
    llmd.load_benchmark_report(theirs)
    assert "observability" not in theirs["results"]
    assert theirs["scenario"]["load"]["standardized"]["tool_version"] == "unknown"
