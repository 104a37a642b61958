"""The parameters the lab knows: the curated table of tunable vLLM flags, environment knobs and
workload knobs (`PARAMS`), each with its type, range and unit; a name resolved to its parameter
(`get_param`, the user's own vLLM flags through `learned`); and a parameter's value as a person
reads it (`show_value`: '1 GiB' for a bytes-typed one), while an argv, a stored value and a command
line keep `format_value`'s canonical text ('1073741824'). Every typed value is checked by
tuning.engine.validate before any process starts.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from core.units import format_bytes
from core.units import parse_bytes as parse_bytes  # re-exported for the callers of the registry
from tuning.engine.flags.policy import CODE
from tuning.engine.value_text import (
    format_value as format_value,  # re-exported: the registry's callers
)
from tuning.engine.value_text import split_values as split_values
from tuning.engine.value_text import value_words

Backend = Literal["cpu", "gpu"]
Kind = Literal["flag", "env", "workload"]
ValueType = Literal["int", "float", "bool", "choice", "bytes", "text", "json", "list"]
Learned = Mapping[
    str, "Param"
]  # flags of the user's vLLM beyond the curated table (tuning.engine.flags)

BOTH: frozenset[str] = frozenset({"cpu", "gpu"})
FORCED_HOST = "127.0.0.1"
# The CPU backend's KV budget in GiB (environment). vLLM's CPU platform copies it over
# cache_config.kv_cache_memory_bytes, so it silently beats both flags below.
CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
KV_BUDGET_FLAGS = ("kv-cache-memory-bytes", "gpu-memory-utilization")


_ITEM_WORDS = {"int": "whole numbers", "float": "numbers", "bytes": "byte counts", "text": "texts"}


class ParamError(ValueError):
    """A configuration the lab refuses to launch; the message names the parameter and the rule."""


@dataclass(frozen=True)
class Param:
    name: str
    type: ValueType
    help: str
    kind: Kind = "flag"
    flag: str | None = None
    env: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    default: Any = None
    unit: str = ""
    backends: frozenset[str] = BOTH
    # A flag whose False form is `--no-<flag>`; True is `--<flag>`.
    negatable: bool = True
    # Where it is defined: the lab's curated table, or the user's vLLM ("learned",
    # tuning.engine.flags).
    source: str = "curated"
    group: str = ""
    # From the engine's config classes (tuning.engine.flags): dotted keys of a JSON value that name
    # code
    # or a file; `names_code`: the value itself would, beyond its named `choices`.
    code_keys: tuple[str, ...] = ()
    names_code: bool = False
    # A list-valued flag (`type` "list"; vLLM's argparse nargs "+" or "*"): each value is one list
    # of `item`-typed elements (`choices` are theirs), launched one argv item per element.
    item: ValueType | None = None
    nargs: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["backends"], out["choices"] = sorted(self.backends), list(self.choices)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Param:
        fields = dict(raw)
        fields["backends"] = frozenset(fields.get("backends") or BOTH)
        fields["choices"] = tuple(fields.get("choices") or ())
        fields["code_keys"] = tuple(fields.get("code_keys") or ())
        return cls(**fields)

    @property
    def restarts_server(self) -> bool:
        return self.kind != "workload"

    def describe_range(self) -> str:
        if self.type == "list":
            what = _ITEM_WORDS.get(self.item or "text", "values")
            if self.item == "choice":
                what = "of " + ", ".join(self.choices)
            numbers = self.item in ("int", "float", "bytes")
            words = list(self.choices[:2]) or ["a", "b"]
            example = "[1,2,4,8]" if numbers else json.dumps(words, separators=(",", ":"))
            empty = " (or empty: [])" if self.nargs == "*" else ""
            return f"a list of {what}{empty}, each value in brackets, as {example}"
        if self.type == "choice":
            named = "one of " + ", ".join(self.choices)
            return named + (f" (any other is a class to import: {CODE})" if self.names_code else "")
        if self.type == "bool":
            return "true or false"
        if self.type in ("text", "json"):
            return "a JSON object" if self.type == "json" else "text, as your vLLM defines it"
        if self.type == "bytes":
            low = "" if self.minimum is None else format_bytes(self.minimum)
            high = "" if self.maximum is None else format_bytes(self.maximum)
            return f"{low}..{high} (1 GiB, 512MiB, 1G = 2^30, 1g = 10^9)"
        low = "" if self.minimum is None else f"{self.minimum:g}"
        high = "" if self.maximum is None else f"{self.maximum:g}"
        return f"{low}..{high} {self.unit}".strip()


PARAMS: dict[str, Param] = {
    p.name: p
    for p in [
        Param(
            name="block-size",
            type="int",
            flag="--block-size",
            minimum=1,
            maximum=1024,
            unit="tokens",
            help="Tokens per KV-cache block; the CPU attention backend needs a multiple of 32.",
        ),
        Param(
            name="gpu-memory-utilization",
            type="float",
            flag="--gpu-memory-utilization",
            minimum=0.01,
            maximum=1.0,
            default=0.92,
            unit="fraction",
            help="Share of device memory (node RAM on CPU) vLLM may take; "
            "the KV cache gets what is left.",
        ),
        Param(
            name="kv-cache-memory-bytes",
            type="bytes",
            flag="--kv-cache-memory-bytes",
            minimum=1,
            maximum=2**50,
            unit="bytes",
            help="Exact KV-cache budget (1G = 2^30, 1g = 10^9); overrides gpu-memory-utilization.",
        ),
        Param(
            name="max-num-seqs",
            type="int",
            flag="--max-num-seqs",
            minimum=1,
            maximum=65536,
            unit="requests",
            help="Most requests the scheduler runs in one batch.",
        ),
        Param(
            name="max-num-batched-tokens",
            type="int",
            flag="--max-num-batched-tokens",
            minimum=1,
            maximum=2**24,
            unit="tokens",
            help="Most tokens scheduled in one engine step (prefill budget).",
        ),
        Param(
            name="max-model-len",
            type="int",
            flag="--max-model-len",
            minimum=16,
            maximum=2**22,
            unit="tokens",
            help="Longest prompt + output a request may have; sets the per-request KV need.",
        ),
        Param(
            name="enable-prefix-caching",
            type="bool",
            flag="--enable-prefix-caching",
            default=True,
            help="Reuse KV blocks of shared prompt prefixes across requests.",
        ),
        Param(
            name="enable-chunked-prefill",
            type="bool",
            flag="--enable-chunked-prefill",
            default=True,
            help="Split long prefills into chunks that share steps with decodes.",
        ),
        Param(
            name="kv-cache-dtype",
            type="choice",
            flag="--kv-cache-dtype",
            default="auto",
            choices=("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"),
            help="Storage type of the KV cache; fp8 halves its memory per token.",
        ),
        Param(
            name="enforce-eager",
            type="bool",
            flag="--enforce-eager",
            default=False,
            help="Skip torch.compile and CUDA graphs: faster start, usually slower steps.",
        ),
        Param(
            name="dtype",
            type="choice",
            flag="--dtype",
            default="auto",
            choices=("auto", "bfloat16", "float16", "float32"),
            help="Weight and activation type.",
        ),
        Param(
            name="tensor-parallel-size",
            type="int",
            flag="--tensor-parallel-size",
            minimum=1,
            maximum=64,
            default=1,
            unit="devices",
            backends=frozenset({"gpu"}),
            help="Devices one model is split across.",
        ),
        Param(
            name="VLLM_CPU_KVCACHE_SPACE",
            type="int",
            kind="env",
            env="VLLM_CPU_KVCACHE_SPACE",
            minimum=1,
            maximum=1024,
            unit="GiB",
            backends=frozenset({"cpu"}),
            help="CPU engine only: GiB of RAM for the KV cache (environment variable).",
        ),
        Param(
            name="concurrency",
            type="int",
            kind="workload",
            minimum=1,
            maximum=100000,
            default=16,
            unit="requests",
            help="Requests kept in flight by the load generator (no restart needed).",
        ),
        Param(
            name="input-len",
            type="int",
            kind="workload",
            minimum=1,
            maximum=2**20,
            default=64,
            unit="tokens",
            help="Prompt tokens per request, exact (no restart needed).",
        ),
        Param(
            name="output-len",
            type="int",
            kind="workload",
            minimum=1,
            maximum=2**20,
            default=64,
            unit="tokens",
            help="Output tokens per request, with ignore_eos (no restart needed).",
        ),
        Param(
            name="shared-prefix-len",
            type="int",
            kind="workload",
            minimum=0,
            maximum=2**20,
            default=0,
            unit="tokens",
            help="Tokens of a prefix shared by all prompts (no restart needed).",
        ),
        Param(
            name="request-rate",
            type="float",
            kind="workload",
            minimum=0.001,
            maximum=1e6,
            unit="req/s",
            help="Open loop: requests per second (Poisson/gamma arrivals; no restart needed).",
        ),
        Param(
            name="burstiness",
            type="float",
            kind="workload",
            minimum=0.001,
            maximum=1000.0,
            help="Open loop: gamma shape of the gaps, 1 = Poisson, < 1 burstier (no restart).",
        ),
    ]
}


def get_param(name: str, learned: Learned | None = None) -> Param:
    """The curated parameter `name`, else the user's vLLM flag of that name in `learned`."""
    key = name.strip()
    for table in (PARAMS, learned or {}):
        if key in table:
            return table[key]
        if key.replace("_", "-") in table:
            return table[key.replace("_", "-")]
    close = suggest(key, [*PARAMS, *(learned or {})])
    raise ParamError(f"unknown parameter {name!r}{close}; known: {', '.join(sorted(PARAMS))}")


def suggest(name: str, known: Iterable[str]) -> str:
    """' (did you mean `max-num-seqs`?)', or '' when nothing is close."""
    key = name.strip().removeprefix("--").replace("_", "-")
    close = difflib.get_close_matches(key, sorted(set(known)), n=3, cutoff=0.75)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"`{c}`" for c in close) + "?)"


def show_value(name: str | None, value: Any, learned: Learned | None = None) -> str:
    """`value` of parameter `name` for people (tables, chips, labels, charts and reports); an
    unknown parameter's or an unparsable value as `format_value` writes it."""
    if value is None:
        return "unset"
    try:
        param = get_param(name, learned) if name else None
        if param is not None and param.type == "bytes" and not isinstance(value, bool):
            n = value if isinstance(value, (int, float)) else parse_bytes(str(value))
            return format_bytes(n)
    except ValueError:  # ParamError is one
        pass
    return value_words(value)


def run_value(run: Mapping[str, Any]) -> str:
    """A stored run's value (its `param`, `value`) as a person reads it."""
    return show_value(run.get("param"), run.get("value"))
