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
