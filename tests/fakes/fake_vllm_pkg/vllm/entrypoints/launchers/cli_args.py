"""Flags of each kind the real parser has: bool with --no-, a switch, a choice, ints, a JSON
model with its own validation, a several-values flag, and the ones the lab never tunes."""

import argparse
import json


def parse_dataclass(text):
    value = json.loads(text)
    unknown = sorted(set(value) - {"cudagraph_capture_sizes", "mode"})
    if unknown:
        raise ValueError(f"1 validation error for CompilationConfig; {unknown[0]}; Extra inputs")
    return value


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
    comp = parser.add_argument_group("VllmConfig")
    comp.add_argument("--compilation-config", "-cc", type=parse_dataclass, default=None, help="C.")
    comp.add_argument("--cudagraph-capture-sizes", type=int, nargs="+", default=None, help="S.")
    comp.add_argument("--enable-log-outputs", action="store_true", help="Log outputs.")
    return parser
