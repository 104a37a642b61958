"""The field's result files, made by the real tools (tests/fixtures/field/README.md names each
command and version), read as lab runs: each format detected from its content, the metric traps
handled, unknown fields ignored, a file of no known shape refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tuning.measure.field.detect import read_field
from tuning.measure.field.run import FieldError

FIELD = Path(__file__).resolve().parents[3] / "fixtures" / "field"
VLLM = FIELD / "vllm_bench_serve.json"
GUIDELLM = FIELD / "guidellm_benchmarks.json"
AIPERF = FIELD / "aiperf" / "profile_export_aiperf.json"


def test_vllm_bench_result_keeps_vllms_numbers_and_requests() -> None:
    doc = json.loads(VLLM.read_text())
    fmt, runs = read_field(VLLM)
    assert fmt == "vLLM bench result" and len(runs) == 1
    run = runs[0]
    assert run.records is not None and len(run.records) == doc["num_prompts"]
    # recomputed from the --save-detailed lists by the lab's formulas: vLLM's own numbers
    for key in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms", "p99_ttft_ms"):
        assert run.summary[key] == pytest.approx(doc[key], rel=1e-6), key
    assert run.summary["completed"] == doc["completed"]
    assert run.workload["concurrency"] == doc["max_concurrency"]
    assert run.model == doc["model_id"] and run.config == {}


def test_vllm_without_detail_keeps_the_files_aggregates() -> None:
    doc = json.loads(VLLM.read_text())
    for key in ("ttfts", "itls", "latencies", "start_times", "generated_texts", "errors"):
        doc.pop(key)
    run = _read_doc(doc, "vllm.json")[0]
    assert run.records is None
    assert run.summary["p99_itl_ms"] == doc["p99_itl_ms"]


def test_guidellm_tpot_is_its_inter_token_latency_not_its_time_per_output_token() -> None:
    doc = json.loads(GUIDELLM.read_text())
    metrics = doc["benchmarks"][0]["metrics"]
    itl = metrics["inter_token_latency_ms"]["successful"]["mean"]
    tpot_with_ttft = metrics["time_per_output_token_ms"]["successful"]["mean"]
    fmt, runs = read_field(GUIDELLM)
    assert fmt == "GuideLLM benchmarks"
    run = runs[0]
    assert run.summary["mean_tpot_ms"] == pytest.approx(itl, rel=1e-3)
    assert run.summary["mean_tpot_ms"] < tpot_with_ttft * 0.95  # the trap is not taken
    assert run.summary["mean_ttft_ms"] == pytest.approx(
        metrics["time_to_first_token_ms"]["successful"]["mean"], rel=1e-6
    )
    assert run.summary["mean_itl_ms"] is None  # GuideLLM keeps no chunk gaps: unknown, not made up
    assert run.workload["concurrency"] == 4 and run.tool_version == "0.8.1"


def test_guidellm_without_requests_uses_inter_token_latency_as_tpot() -> None:
    doc = json.loads(GUIDELLM.read_text())
    for bench in doc["benchmarks"]:
        bench["requests"] = {}
    run = _read_doc(doc, "benchmarks.json")[0]
    metrics = doc["benchmarks"][0]["metrics"]
    assert run.records is None
    assert run.summary["mean_tpot_ms"] == metrics["inter_token_latency_ms"]["successful"]["mean"]


def test_aiperf_itl_is_inter_chunk_latency_and_tokens_are_the_servers() -> None:
    doc = json.loads(AIPERF.read_text())
    fmt, runs = read_field(AIPERF)
    assert fmt == "AIPerf profile export"
    run = runs[0]
    assert run.records is not None and len(run.records) == doc["request_count"]["avg"]
    assert run.summary["mean_itl_ms"] == pytest.approx(doc["inter_chunk_latency"]["avg"], rel=1e-6)
    assert run.summary["mean_ttft_ms"] == pytest.approx(doc["time_to_first_token"]["avg"], rel=1e-6)
    # output tokens from the server's usage, not AIPerf's own tokenizer count
    usage = doc["usage_completion_tokens"]["avg"]
    assert all(r.output_tokens == usage for r in run.records)
    assert run.summary["total_output_tokens"] == doc["total_usage_completion_tokens"]["avg"]


def test_aiperf_without_jsonl_maps_inter_token_latency_to_tpot(tmp_path: Path) -> None:
    alone = tmp_path / "profile_export_aiperf.json"
    shutil.copy(AIPERF, alone)
    run = read_field(alone)[1][0]
    doc = json.loads(AIPERF.read_text())
    assert run.records is None
    assert run.summary["mean_tpot_ms"] == doc["inter_token_latency"]["avg"]
    assert run.summary["mean_itl_ms"] == doc["inter_chunk_latency"]["avg"]


def test_sweep_folder_reads_each_run_with_its_server_flag(tmp_path: Path) -> None:
    doc = json.loads(VLLM.read_text())
    for value in (16, 64):
        combo = tmp_path / f"SERVE--max_num_seqs={value}-BENCH--max_concurrency=4"
        combo.mkdir()
        for n in range(2):  # as `vllm bench sweep serve` merges the overrides into run files
            run = {**doc, "run_number": n, "max_num_seqs": value, "max_concurrency": 4}
            (combo / f"run={n}.json").write_text(json.dumps(run))
        (combo / "summary.json").write_text("[]")
    fmt, runs = read_field(tmp_path)
    assert fmt == "vLLM bench sweep" and len(runs) == 4
    assert sorted(r.config["max-num-seqs"] for r in runs) == [16, 16, 64, 64]
    assert all("max-concurrency" not in r.config for r in runs)  # a bench override, not a flag


def test_a_real_sweep_folder_reads_its_server_flag_from_the_folder_names() -> None:
    fmt, runs = read_field(FIELD / "vllm_sweep")
    assert fmt == "vLLM bench sweep" and len(runs) == 4
    assert sorted(r.config["max-num-seqs"] for r in runs) == [4, 4, 8, 8]
    assert all(r.records and len(r.records) == 8 for r in runs)


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    for path in (VLLM, GUIDELLM):
        doc = json.loads(path.read_text())
        doc["a_field_from_the_future"] = {"nested": [1, 2, 3]}
        before = read_field(path)[1][0].summary
        assert _read_doc(doc, path.name, tmp_path)[0].summary == before


@pytest.mark.parametrize(
    "text", ['{"hello": 1}', "[1, 2]", "not json", '{"benchmarks": 3}', "[" * 5000]
)
def test_a_file_of_no_known_format_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "mystery.json"
    path.write_text(text)
    with pytest.raises(FieldError) as exc:
        read_field(path)
    message = str(exc.value)
    assert "\n" not in message and str(path) in message
    assert "GuideLLM" in message and "AIPerf" in message and "vLLM bench" in message


def _read_doc(doc: dict, name: str, folder: Path | None = None) -> list:
    import tempfile

    where = folder or Path(tempfile.mkdtemp())
    path = where / name
    path.write_text(json.dumps(doc))
    return read_field(path)[1]
