"""Issue 23, item 8: what runs were measured on, in words (model, hardware, vLLM, workload), as
every exported chart and the report carry it; runs that differ say so."""

from __future__ import annotations

from tests.factories import run_row
from tuning.compare.comparison import build_comparison
from tuning.compare.context import comparison_context, run_context, workload_words


def test_one_configuration_reads_as_a_sentence() -> None:
    ctx = run_context([run_row(1, 2), run_row(2, 16)])
    assert ctx.model == "tiny" and ctx.hardware == "cpu"
    assert ctx.engine == "vLLM 0.32.0 (engine embedded)"
    assert ctx.workload == "input 64 / output 16 tokens, concurrency 8, 24 requests"
    assert ctx.lines() == [
        "model tiny · cpu · vLLM 0.32.0 (engine embedded)",
        "workload: input 64 / output 16 tokens, concurrency 8, 24 requests",
    ]
    assert (ctx.runs, ctx.experiments) == (2, (1,))


def test_the_issues_workload_with_thousands_separators() -> None:
    wl = {"input_len": 512, "output_len": 256, "concurrency": 128, "num_requests": 3072}
    assert workload_words([run_row(1, workload=wl)]) == (
        "input 512 / output 256 tokens, concurrency 128, 3,072 requests"
    )


def test_runs_that_differ_list_their_values_or_read_mixed() -> None:
    runs = [run_row(i, c, param="concurrency") for i, c in enumerate((8, 16, 32), 1)]
    runs[1]["model"] = "llama1b"
    ctx = run_context(runs)
    assert ctx.model == "tiny / llama1b"
    assert "concurrency 8, 16, 32" in ctx.workload
    many = [run_row(i, hardware=f"box-{i}", vllm_version=f"0.{i}") for i in range(1, 6)]
    ctx = run_context(many)
    assert ctx.hardware == "mixed (5)" and ctx.engine == "mixed (5)"


def test_a_dataset_is_named_and_an_open_loop_has_its_rate() -> None:
    wl = {"input_len": None, "output_len": None, "concurrency": 64, "num_requests": 500}
    wl["request_rate"] = 4.5
    spec = {"name": "", "source": {"kind": "sharegpt", "path": "/data/ShareGPT_V3.json"}}
    words = workload_words([run_row(1, workload=wl, workload_spec=spec)])
    assert (
        words == "ShareGPT_V3.json (sharegpt), rate 4.5 req/s, at most concurrency 64, 500 requests"
    )
    spec = {"name": "mooncake-day1", "source": {"kind": "trace", "path": "/t/x.jsonl"}}
    assert workload_words([run_row(1, workload_spec=spec)]).startswith("mooncake-day1 (trace), ")


def test_a_comparisons_context_is_of_its_sides_runs_only() -> None:
    runs = [run_row(1, 2), run_row(2, 16), run_row(3, 16, model="other")]
    cmp = build_comparison(runs[:2], [1])
    assert comparison_context(runs, cmp).model == "tiny"
    assert run_context([]).model == "unknown"
