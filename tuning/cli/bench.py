"""`tuning-lab bench`: load only, against any running OpenAI-compatible server.

The lab's answer to `vllm bench serve` for one workload: exact-length prompts, a closed loop of C
streams, vLLM's metric definitions and result keys, plus what vLLM does not report (achieved
concurrency, the steady-state window, client CPU and event-loop lag: was the client the
bottleneck?).
The API key is read from OPENAI_API_KEY only; there is deliberately no --api-key flag, so the key
never lands in shell history, `ps` output or the result file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from core.redact import display_url
from tuning.cli.args import EXIT_REFUSED, add_progress, say, show_progress
from tuning.cli.parser import rename_flag
from tuning.measure.health import client_limits, reconcile_tokens, server_latency
from tuning.measure.loadgen.client import (
    DEFAULT_TRANSPORT,
    TRANSPORTS,
    LoadError,
    LoadResult,
    resolve_transport,
)
from tuning.measure.loadgen.endpoint import EndpointError, api_key_from_env, check_endpoint
from tuning.measure.loadgen.start import run_load_sync
from tuning.measure.metrics import (
    achieved_concurrency,
    columns,
    goodput,
    steady_state,
    summarize,
    warmup_check,
)
from tuning.measure.traffic.workload import (
    FALLBACK_NOTE,
    FALLBACK_TOKENIZER_ID,
    Workload,
    WorkloadError,
    build_prompts,
    choose_tokenizer,
    prompt_digest,
    workload_from_args,
)
from tuning.present.bench_table import print_table


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The bench flags; the API key is never one of them (OPENAI_API_KEY only)."""
    parser.add_argument(
        "--base-url",
        required=True,
        help="server root, with or without /v1, e.g. http://127.0.0.1:8000",
    )
    parser.add_argument("--model", required=True, help="the served model name")
    defined = "; needed for the fixed-length workload, which a dataset, trace or rate replaces"
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests kept in flight (with --request-rate: an in-flight cap, as vLLM's "
        "--max-concurrency)" + defined,
    )
    parser.add_argument(
        "--num-requests",
        type=int,
        default=None,
        help="measured requests (a dataset or trace: default every entry; a rate: 64)",
    )
    parser.add_argument(
        "--input-len", type=int, default=None, help="prompt tokens, exact (default 64 with a rate)"
    )
    parser.add_argument(
        "--output-len",
        type=int,
        default=None,
        help="output tokens, max_tokens with ignore_eos (default 64 with a rate)",
    )
    parser.add_argument(
        "--shared-prefix-len", type=int, default=0, help="tokens of a prefix shared by every prompt"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--num-warmups",
        type=int,
        default=None,
        help="unmeasured requests sent first (default: one wave = concurrency)",
    )
    parser.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer.json (or its folder); default: the model folder when "
        "--model is a local path, else the server's /tokenize, else (a server without "
        "/tokenize) the lab's own tokenizer, with input lengths approximate",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        help="seconds before a request counts as a timeout",
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        help="seconds without data after a stream's first token (or of SSE comments only) "
        "before it counts as stalled (a request with no answer yet waits for --request-timeout)",
    )
    parser.add_argument(
        "--goodput",
        nargs="+",
        default=None,
        metavar="METRIC:MS",
        help="SLOs like vLLM's, e.g. ttft:200 tpot:50 e2el:5000",
    )
    parser.add_argument(
        "--transport",
        choices=list(TRANSPORTS),
        default=DEFAULT_TRANSPORT,
        help="HTTP client: aiohttp, or the lab's raw HTTP/1.1 reader (less CPU)",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="FILE.json",
        help="the result file to write (vLLM bench's keys)",
    )
    rename_flag(parser, "--result-json", "--out")
    parser.add_argument("--quiet", action="store_true", help="no table, no progress")
    add_progress(parser)
    from tuning.measure.traffic.options import TrafficOptions

    TrafficOptions.add_cli_args(parser)  # --workload, --dataset, --request-rate, --multi-turn, ...


def parse_goodput(items: Sequence[str] | None) -> dict[str, float]:
    """['ttft:200', 'tpot:50'] -> {'ttft': 200.0, 'tpot': 50.0}; raises ValueError on bad input."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition(":")
        if not sep or name not in ("ttft", "tpot", "e2el"):
            raise ValueError(f"--goodput {item!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"--goodput {item!r}: {value!r} is not a number") from None
        if not ms > 0:
            raise ValueError(f"--goodput {item!r}: the SLO must be > 0 ms")
        out[name] = ms
    return out


def build_result(
    load: LoadResult,
    workload: Workload,
    *,
    model: str,
    base_url: str,
    tokenizer_id: str,
    prompts: Sequence[str],
    slo_ms: dict[str, float] | None = None,
) -> dict[str, Any]:
    """vLLM's result keys at the top level, the lab's extras under "lab"."""
    cols = columns(load.records)
    summary = summarize(cols, load.duration_s)
    failed_by_kind = summary.pop("failed_by_kind")
    good = goodput(cols, load.duration_s, slo_ms) if slo_ms else None
    records = load.records
    result: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai-chat" if workload.endpoint == "chat" else "openai",
        "backend": "openai-chat" if workload.endpoint == "chat" else "openai",
        "label": None,
        "model_id": model,
        "tokenizer_id": tokenizer_id,
        "num_prompts": workload.num_requests,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": workload.concurrency,
        **summary,
        "request_goodput": good["request_goodput"] if good else None,
        "input_lens": [r.prompt_tokens for r in records],
        "output_lens": [r.output_tokens if r.ok else 0 for r in records],
        "ttfts": [r.ttft for r in records],
        "itls": [r.itl for r in records],
        "latencies": [r.e2el for r in records],
        "start_times": [r.start for r in records],
        "errors": [r.error or "" for r in records],
    }
    result["lab"] = {
        "workload": workload.to_dict(),
        "workload_fingerprint": workload.fingerprint(),
        "prompt_digest": prompt_digest(prompts),
        "base_url": display_url(base_url),
        "started_at": datetime.fromtimestamp(load.started_at_unix, UTC).isoformat(),
        "failed_by_kind": failed_by_kind,
        "error_kinds": [r.error_kind for r in records],
        "goodput": ({"slo_ms": slo_ms, **good} if good else None),
        "achieved_concurrency": achieved_concurrency(cols, load.duration_s),
        "steady_state": steady_state(cols, workload.concurrency, load.inflight or None),
        "warmup_check": warmup_check(cols, workload.concurrency),
        "client_bound": bool(client_limits(load)),
        "client": load.health(),
        # vLLM's own counters and histograms over the measured window (settled /metrics reads)
        "server": {
            "tokens": reconcile_tokens(
                summary["total_output_tokens"], load.server_before, load.server_after
            ),
            "latency": server_latency(cols, load.server_before, load.server_after),
            "reads": load.server_reads,
        },
        # True when the prompts were built with the lab's fallback tokenizer (no /tokenize):
        # `input_len` then counts that tokenizer's tokens; input_lens are the server's counts.
        "input_lens_approximate": tokenizer_id == FALLBACK_TOKENIZER_ID,
        "tokenizer_note": FALLBACK_NOTE if tokenizer_id == FALLBACK_TOKENIZER_ID else None,
    }
    return result


def add_traffic(result: dict[str, Any], prep: Any, load: LoadResult) -> None:
    """A planned run's keys: vLLM's request_rate / burstiness, and the lab's traffic numbers."""
    from tuning.experiment.planned import traffic_summary

    arrival = prep.plan.spec.arrival
    if arrival.kind == "open":
        result["request_rate"] = arrival.rate
        result["burstiness"] = arrival.burstiness
    if arrival.kind != "closed":  # vLLM's key: the cap asked for (None: nothing held requests back)
        result["max_concurrency"] = arrival.max_concurrency
    result["lab"]["workload_spec"] = prep.plan.spec.to_dict()
    result["lab"]["workload_fingerprint"] = prep.fingerprint
    result["lab"]["traffic"] = traffic_summary(load.records, prep.plan, load.duration_s)
    result["lab"]["turns"] = [r.turn for r in load.records]
    result["lab"]["dispatch_lags"] = [r.dispatch_lag for r in load.records]


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: a reader never sees half a result."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False, default=str))
    os.replace(tmp, path)


# The fixed-length workload's flags: a dataset, a trace or a rate defines what they say.
CLASSIC_FLAGS = (
    ("--concurrency", "concurrency"),
    ("--num-requests", "num_requests"),
    ("--input-len", "input_len"),
    ("--output-len", "output_len"),
)


def _in_flight_cap(args: argparse.Namespace) -> dict[str, Any]:
    """With --request-rate, --concurrency caps what is in flight (vLLM's --max-concurrency)."""
    if args.request_rate is not None and args.concurrency and args.max_concurrency is None:
        return {"max_concurrency": args.concurrency}
    return {}


def bench_workload(args: argparse.Namespace, traffic: bool) -> Workload:
    """The classic workload of the flags; with real traffic (a dataset, trace, spec or rate) only
    its request settings count (endpoint, timeouts, seed, warm-ups) and the plan sets the rest,
    so the fixed-length flags may be left out."""
    if not traffic:
        missing = [flag for flag, name in CLASSIC_FLAGS if getattr(args, name) is None]
        if missing:
            raise WorkloadError(
                f"{', '.join(missing)} needed for the fixed-length workload "
                "(or give --request-rate, --dataset or --workload)"
            )
        return workload_from_args(args)
    defaults = {"concurrency": 1, "num_requests": 1, "input_len": 64, "output_len": 64}
    filled = {k: getattr(args, k) or v for k, v in defaults.items()}
    return workload_from_args(argparse.Namespace(**{**vars(args), **filled}))


def run_bench_command(args: argparse.Namespace) -> int:
    """Check the endpoint, build prompts, run the load, write the result JSON, print the table.

    Exit codes: 0 done (even with some failed requests, which are counted), 1 the endpoint or the
    run failed or no request succeeded, 2 invalid arguments.
    """
    err = sys.stderr
    key = api_key_from_env()
    from tuning.experiment.planned import Prepared, prepare
    from tuning.measure.traffic.options import TrafficOptions

    try:
        slo = parse_goodput(args.goodput)
        spec = TrafficOptions.from_cli_args(args, **_in_flight_cap(args)).to_spec()
        workload = bench_workload(args, spec is not None)
    except (WorkloadError, ValueError) as exc:
        say(f"error: {exc}", file=err)
        return EXIT_REFUSED  # refused before any request: 1 (2 is argparse's usage error)
    prep: Prepared | None = None
    try:
        check_endpoint(args.base_url, args.model, key)
        tokenizer, tokenizer_id = choose_tokenizer(args.tokenizer, args.model, args.base_url, key)
        if tokenizer_id == FALLBACK_TOKENIZER_ID:
            say(f"note: {FALLBACK_NOTE}", file=err)
        if spec is None:
            prompts = build_prompts(workload, tokenizer)
        else:  # real traffic: a plan, sent by tuning.measure.loadgen.schedule
            prep = prepare(workload, spec, tokenizer)
            prompts = [*prep.warmup_prompts, *(r.prompt for r in prep.plan.requests)]
    except (EndpointError, ValueError) as exc:
        say(f"error: {exc}", file=err)
        return 1
    cancel = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    in_main = threading.current_thread() is threading.main_thread()

    def on_sigint(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        say("\nstopping: in-flight requests are cancelled; Ctrl-C again to abort", file=err)

    show = not args.quiet and show_progress(args, err)  # a terminal, or --progress

    bar = tqdm(desc="bench", unit="req", file=err, disable=not show, leave=False)

    def progress(done: int, total: int) -> None:
        bar.total, bar.n = total, done
        bar.refresh()

    if in_main:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        if prep is None:
            load = run_load_sync(
                args.base_url,
                args.model,
                prompts,
                workload,
                api_key=key,
                on_progress=progress if show else None,
                cancel=cancel,
                transport=args.transport,
                server_stats=True,
            )
        else:
            from tuning.measure.loadgen.schedule import run_schedule_sync

            load = run_schedule_sync(
                args.base_url,
                args.model,
                prep.plan,
                prep.warmup_prompts,
                prep.workload,
                api_key=key,
                on_progress=progress if show else None,
                cancel=cancel,
                transport=args.transport,
                server_stats=True,
            )
    except LoadError as exc:
        say(f"error: {exc}", file=err)
        return 1
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
        bar.close()
    result = build_result(
        load,
        workload if prep is None else prep.workload,
        model=args.model,
        base_url=args.base_url,
        tokenizer_id=tokenizer_id,
        prompts=prompts,
        slo_ms=slo or None,
    )
    if prep is not None:
        add_traffic(result, prep, load)
    result["lab"]["transport"] = resolve_transport(args.transport, args.base_url)
    write_json(args.out, result)
    if not args.quiet:
        print_table(result)
        say(f"result: {args.out}")
    if load.cancelled:
        say("the run was cancelled; the result holds what was measured", file=err)
        return 1
    if result["completed"] == 0:
        first = next((r.error for r in load.records if r.error), "unknown")
        say(f"error: no request succeeded (first error: {first})", file=err)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tuning.cli.bench ...`: the same command without the lab's CLI around it."""
    from tuning.cli.parser import LabParser  # the lab's habits: no prefixes, did-you-mean

    parser = LabParser(prog="python -m tuning.cli.bench", description=__doc__)
    add_bench_arguments(parser)
    return run_bench_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
