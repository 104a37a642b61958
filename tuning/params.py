"""The allow-list of tunable vLLM parameters, and the only road from a configuration to an argv.

Every value a user types passes through `validate_value` before any process starts, so a hostile or
malformed value (NaN, a flag smuggled in as a value, shell metacharacters) is refused here with a
message the UI can show next to the field.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from core.units import format_bytes
from core.units import parse_bytes as parse_bytes  # re-exported for the callers of the registry
from tuning.flags.policy import CODE
from tuning.value_text import Item, ambiguous_split, json_object_text, value_items
from tuning.value_text import format_value as format_value  # re-exported: the registry's callers
from tuning.value_text import split_values as split_values

Backend = Literal["cpu", "gpu"]
Kind = Literal["flag", "env", "workload"]
ValueType = Literal["int", "float", "bool", "choice", "bytes", "text", "json"]
Learned = Mapping[str, "Param"]  # flags of the user's vLLM beyond the curated table (tuning.flags)

BOTH: frozenset[str] = frozenset({"cpu", "gpu"})
FORCED_HOST = "127.0.0.1"
_SAFE_TEXT = re.compile(r"^[A-Za-z0-9_.]+$")
_PRINTABLE = re.compile(r"^[\x21-\x7e]+$")  # a learned text flag's value: one argv item, no space
# The CPU backend's KV budget in GiB (environment). vLLM's CPU platform copies it over
# cache_config.kv_cache_memory_bytes, so it silently beats both flags below.
CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
KV_BUDGET_FLAGS = ("kv-cache-memory-bytes", "gpu-memory-utilization")


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
    # Where it is defined: the lab's curated table, or the user's vLLM ("learned", tuning.flags).
    source: str = "curated"
    group: str = ""
    # From the engine's config classes (tuning.flags): dotted keys of a JSON value that name code
    # or a file; `names_code`: the value itself would, beyond its named `choices`.
    code_keys: tuple[str, ...] = ()
    names_code: bool = False

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


def _reject_text(param: Param, text: str) -> None:
    if text.startswith("-") and not (param.type in ("int", "float") and param.source != "curated"):
        raise ParamError(f"{param.name}: value {text!r} starts with '-' (it would read as a flag)")
    if param.type == "json":
        return  # one argv item, parsed as JSON below
    if param.type == "text" and _PRINTABLE.match(text):
        return
    if not _SAFE_TEXT.match(text):
        raise ParamError(
            f"{param.name}: value {text!r} has characters other than letters, digits, '_' and '.'"
        )


def _json_value(param: Param, raw: Any) -> str:
    """A dict-valued flag's value as compact JSON, its keys held to the flag policy."""
    try:
        return json_object_text(raw, param.code_keys)
    except ValueError as exc:
        raise ParamError(f"{param.name}: {exc}") from None


def validate_value(name: str, raw: Any, learned: Learned | None = None) -> Any:
    """Return the typed value of `raw` for parameter `name`, or raise ParamError saying why not."""
    param = get_param(name, learned)
    if raw is None:
        raise ParamError(f"{param.name}: a value is required")
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ParamError(f"{param.name}: empty value")
        # '1 GiB' is one value: the space inside a byte count is not a character of the argv
        _reject_text(param, "".join(text.split()) if param.type == "bytes" else text)
    else:
        text = None
    value: Any
    if param.type == "bool":
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in ("true", "1", "yes", "on"):
            return True
        if text is not None and text.lower() in ("false", "0", "no", "off"):
            return False
        raise ParamError(f"{param.name}: expected true or false, got {raw!r}")
    if param.type == "json":
        return _json_value(param, raw)
    if param.type == "text":
        if text is None:
            raise ParamError(f"{param.name}: expected text, got {raw!r}")
        return text
    if param.type == "choice":
        if text is None or text not in param.choices:
            raise ParamError(f"{param.name}: {raw!r} is not {param.describe_range()}")
        return text
    if isinstance(raw, bool):
        raise ParamError(f"{param.name}: expected a number, got a boolean")
    try:
        if param.type == "bytes":
            value = parse_bytes(text) if text is not None else raw
            if isinstance(value, float):
                if not math.isfinite(value) or value != int(value):
                    raise ValueError(raw)
                value = int(value)
            if not isinstance(value, int):
                raise ValueError(raw)
        elif param.type == "int":
            if text is not None:
                value = int(text)
            elif isinstance(raw, float):
                if not math.isfinite(raw) or raw != int(raw):
                    raise ValueError(raw)
                value = int(raw)
            elif isinstance(raw, int):
                value = raw
            else:
                raise ValueError(raw)
        else:
            value = float(text) if text is not None else raw
            if not isinstance(value, (int, float)):
                raise ValueError(raw)
            value = float(value)
    except (ValueError, TypeError, OverflowError):
        raise ParamError(f"{param.name}: {raw!r} is not a valid {param.type}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ParamError(f"{param.name}: {raw!r} is not a finite number")
    if param.minimum is not None and value < param.minimum:
        raise ParamError(f"{param.name}: {value} is below the minimum {param.minimum:g}")
    if param.maximum is not None and value > param.maximum:
        raise ParamError(f"{param.name}: {value} is above the maximum {param.maximum:g}")
    return value


def validate_config(
    config: Mapping[str, Any], backend: str | None = None, learned: Learned | None = None
) -> dict[str, Any]:
    """Validate every key of a server configuration; workload keys are not allowed here."""
    out: dict[str, Any] = {}
    for key, raw in config.items():
        param = get_param(key, learned)
        if param.kind == "workload":
            raise ParamError(f"{param.name} is a workload setting, not a server flag")
        if backend is not None and backend not in param.backends:
            raise ParamError(f"{param.name} is not honoured by the {backend} backend")
        out[param.name] = validate_value(param.name, raw, learned)
    _refuse_ignored_budget(out)
    return out


def _refuse_ignored_budget(config: Mapping[str, Any]) -> None:
    """Two KV budgets in one configuration: the engine would apply one and ignore the other."""
    flags = [name for name in KV_BUDGET_FLAGS if name in config]
    if CPU_KV_ENV in config and flags:
        raise ParamError(
            f"{flags[0]} and {CPU_KV_ENV} both set the KV-cache budget; on the CPU backend the "
            f"environment variable wins and {flags[0]} would be ignored: set only one"
        )
    if len(flags) == 2:
        raise ParamError(
            "kv-cache-memory-bytes and gpu-memory-utilization both set the KV-cache budget; "
            "vLLM ignores gpu-memory-utilization when kv-cache-memory-bytes is given: set only one"
        )


def _bytes(name: str, text: str) -> bool:
    """Whether `text` is a byte count ('1 GiB') for a bytes-typed parameter `name`."""
    try:
        if get_param(name).type != "bytes":
            return False
        parse_bytes(text)
    except ValueError:
        return False
    return True


def parse_values(name: str, text: str | Iterable[Any], learned: Learned | None = None) -> list[Any]:
    """'2,16' -> [2, 16], each validated; the UI calls this as the user types. The list syntax
    (JSON values, text in double quotes holding commas) is tuning.value_text's."""
    try:
        found = value_items(text) if isinstance(text, str) else [Item(i) for i in text]
    except ValueError as exc:
        raise ParamError(f"{name}: {exc}") from None
    if not found:
        raise ParamError(f"{name}: give at least one value")
    items = [item.text for item in found]
    spaced = [i.text for i in found if not i.quoted and _spaced(name, i.text)]
    if spaced:
        raise ParamError(f"{name}: separate values with commas: {','.join(spaced[0].split())}")
    param = _known(name, learned) if isinstance(text, str) else None  # a list is split already
    if (
        param
        and param.type == "text"
        and (why := ambiguous_split(found, param.help, param.default))
    ):
        raise ParamError(f"{param.name} {why}")
    values = [validate_value(name, item, learned) for item in items]
    seen: list[Any] = []
    for raw, value in zip(items, values, strict=True):
        if value in seen:
            raise ParamError(f"{name}: {raw} is given twice; each value runs once per repeat")
        seen.append(value)
    return values


def _spaced(name: str, text: Any) -> bool:
    """'2 16': two values typed without their comma (a JSON value or '1 GiB' is one)."""
    return (
        isinstance(text, str)
        and len(text.split()) > 1
        and text[:1] not in "{["
        and not _bytes(name, text)
    )


def _known(name: str, learned: Learned | None) -> Param | None:
    try:
        return get_param(name, learned)
    except ParamError:
        return None  # refused by name when the values are checked


def parse_assignments(items: Iterable[str], label: str) -> tuple[dict[str, str], list[str]]:
    """NAME=VALUE items -> (the values, one message per item without '='); blank items are skipped.

    Every malformed item is reported, so a form can list them all at once; names and values are
    checked later, by validate_config.
    """
    values: dict[str, str] = {}
    errors: list[str] = []
    for item in items:
        if not item.strip():
            continue
        if "=" not in item:
            errors.append(f"{label} {item!r} is not NAME=VALUE")
            continue
        key, value = item.split("=", 1)
        values[key.strip()] = value.strip()
    return values, errors
