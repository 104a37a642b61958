"""Flags of each kind the real parser has: bool with --no-, a switch, a choice, ints, a JSON
model with its own validation, a several-values flag, and the ones the lab never tunes. As in
vLLM, a group is titled after its config class (vllm.config) and a JSON flag's type function keeps
that class as a default argument."""

import argparse
import dataclasses
import json

from vllm.config import CompilationConfig, StructuredOutputsConfig


def _dataclass_type(config_cls):  # type: ignore[no-untyped-def]
    def parse_dataclass(text, cls=config_cls):  # type: ignore[no-untyped-def]
        value = json.loads(text)
        unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"1 validation error for {cls.__name__}; {unknown[0]}; Extra inputs")
        return value

    return parse_dataclass


def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    front = parser.add_argument_group("Frontend")
    front.add_argument("--host", type=str, default=None, help="Host name.")
    front.add_argument("--port", type=int, default=8000, help="Port number.")
    front.add_argument("--disable-log-stats", action="store_true", help="Disable stats.")
    model = parser.add_argument_group("ModelConfig")
    model.add_argument("--model", type=str, default="Qwen/Qwen3-0.6B", help="Model.")
    model.add_argument(
        "--trust-remote-code", action=argparse.BooleanOptionalAction, default=False, help="Trust."
    )
    model.add_argument(
        "--enforce-eager", action=argparse.BooleanOptionalAction, default=False, help="Eager."
    )
    model.add_argument(
        "--enable-sleep-mode", action=argparse.BooleanOptionalAction, default=False, help="Sleep."
    )
    sched = parser.add_argument_group("SchedulerConfig")
    sched.add_argument("--max-num-seqs", type=int, default=None, help="Max sequences.")
    sched.add_argument(
        "--scheduling-policy",
        type=str,
        choices=["fcfs", "priority"],
        default="fcfs",
        help="The scheduling policy to use (default %(default)s).",
    )
    sched.add_argument(
        "--long-prefill-token-threshold", type=int, default=0, help="Long prefill threshold."
    )
    sched.add_argument(
        "--async-scheduling", action=argparse.BooleanOptionalAction, default=None, help="Async."
    )
    sched.add_argument(
        "--stream-interval", type=int, default=1, help="Tokens a streamed chunk carries."
    )
    sched.add_argument("--scheduler-cls", type=str, default=None, help="The scheduler class.")
    sched.add_argument("--max-lora-cls-labels", type=int, default=None, help="Labels.")
    parallel = parser.add_argument_group("ParallelConfig")
    parallel.add_argument(
        "--distributed-executor-backend", type=str, default=None, help="Executor backend."
    )
    parallel.add_argument("--fake-worker-hook", type=str, default=None, help="Renamed cls.")
    outputs = parser.add_argument_group("StructuredOutputsConfig")
    outputs.add_argument("--reasoning-parser", type=str, default="", help="Reasoning parser.")
    outputs.add_argument("--reasoning-parser-plugin", type=str, default="", help="Plugin.")
    comp = parser.add_argument_group("VllmConfig")
    comp.add_argument(
        "--compilation-config",
        "-cc",
        type=_dataclass_type(CompilationConfig),
        default=None,
        help="C.",
    )
    comp.add_argument(
        "--structured-outputs-config",
        type=_dataclass_type(StructuredOutputsConfig),
        default=None,
        help="Structured outputs.",
    )
    comp.add_argument("--fake-dump-path", type=str, default=None, help="A path by its name.")
    comp.add_argument("--cudagraph-capture-sizes", type=int, nargs="+", default=None, help="S.")
    comp.add_argument("--enable-log-outputs", action="store_true", help="Log outputs.")
    return parser
