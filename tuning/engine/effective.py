"""What the engine really runs with, against what the run asked for.

A flag can be parsed and then not applied: on the CPU backend `VLLM_CPU_KVCACHE_SPACE` overrides
`--kv-cache-memory-bytes`, a platform may override a block size, a wrapper script may drop a flag.
A run whose changed parameter did not reach the engine measures the baseline twice; it is a result
to flag, never a comparison to judge. So every start is read back from the engine's own words:

- `vllm:cache_config_info` (the resolved cache config): block size, KV budget in bytes, KV tokens,
  gpu-memory-utilization, prefix caching, KV dtype;
- the EngineCore's `Initializing a V1 LLM engine ... with config:` line: max_seq_len, dtype,
  kv_cache_dtype, enforce_eager, prefix caching, chunked prefill, tensor parallel size;
- `Using max model len N`, and the CPU worker's `Explicitly set` / `Auto set ... GiB for KV cache`;
- `non-default args: {...}` (what vLLM's argument parser received) for the flags no resolved
  config reports (max-num-seqs, max-num-batched-tokens);
- after the load, vLLM's own `num_requests_running`: more requests at once than max-num-seqs
  means the limit was not applied.

Only parameters of the registry are kept (so nothing else from the log, a secret included, is
stored). The rules of equality: byte sizes compare as integers (8M = 8,388,608, within 0.1 %),
floats to 12 significant digits (0.9 is not 0.9000001), booleans from True/False/1/0, dtypes
without `torch.`, and `auto` accepts whatever the engine resolved it to. A parameter no source
reports is listed as unverified, not as a mismatch.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from core.units import GIB, format_bytes
from tuning.engine.launch import Launch
from tuning.engine.log_facts import SOURCE as SRC_LOG
from tuning.engine.log_facts import Sheet, read_sheet
from tuning.engine.params import CPU_KV_ENV, PARAMS, Param, get_param, parse_bytes
from tuning.engine.server import StartupFacts
from tuning.engine.value_text import list_elements

BYTES_TOLERANCE = 1e-3
# Floats reach vLLM with every digit (tuning.engine.value_text.format_value) and vLLM prints them
# with
# every digit (repr), so only representation noise is forgiven: 0.9 ran for 0.9000001 is flagged.
FLOAT_TOLERANCE = 1e-12

SRC_CACHE = "vllm:cache_config_info"
SRC_ENGINE = "engine config log line"
SRC_MAX_LEN = "'Using max model len' log line"
SRC_ARGS = "'non-default args' log line"
SRC_CPU_KV = "CPU worker's KV cache log line"
SRC_LOAD = "vllm:num_requests_running under load"

# registry name <- label of vllm:cache_config_info
_CACHE_LABELS = {
    "block-size": "block_size",
    "kv-cache-memory-bytes": "kv_cache_memory_bytes",
    "gpu-memory-utilization": "gpu_memory_utilization",
    "enable-prefix-caching": "enable_prefix_caching",
    "kv-cache-dtype": "cache_dtype",
}
# registry name <- key of the engine's `with config:` line
_ENGINE_KEYS = {
    "max-model-len": "max_seq_len",
    "dtype": "dtype",
    "kv-cache-dtype": "kv_cache_dtype",
    "enforce-eager": "enforce_eager",
    "enable-prefix-caching": "enable_prefix_caching",
    "enable-chunked-prefill": "enable_chunked_prefill",
    "tensor-parallel-size": "tensor_parallel_size",
}
_ENGINE_FIELD = re.compile(r"(?<![\w.])(\w+)=([^,\s]+)")
# An enum member in a config's repr (`<CUDAGraphMode.NONE: 0>`) is no Python literal: it is read as
# the text "NONE (0)", which a JSON value matches by name or by value.
_ENUM_REPR = re.compile(r"<(?:\w+\.)+(\w+): ([^<>]*)>")
_ENUM_TEXT = re.compile(r"^(\w+) \((.*)\)$")
_ARG_ITEM = re.compile(
    r"'(\w+)': ('[^']*'|\"[^\"]*\"|True|False|None|-?[\d.]+(?:e[+-]?\d+)?|\[[^\[\]'\"]*\])"
)  # a flat list of numbers too (a flag of several values: `'cudagraph_capture_sizes': [1, 2]`)
_AUTO = {"dtype": "auto", "kv-cache-dtype": "auto"}


def _dest(param: Param) -> str:
    """vLLM's argparse destination of a flag: --max-num-seqs -> max_num_seqs."""
    return (param.flag or param.name)[2:].replace("-", "_")


@dataclass(frozen=True)
class Mismatch:
    """One asked parameter the engine did not run with."""

    param: str
    asked: Any
    effective: Any
    source: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Effective:
    """The engine's configuration as it reported it, under the registry's names."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    non_default_args: dict[str, Any] | None = None  # registry keys only; None: no such line
    non_default_args_cut: bool = False  # the line was longer than it is read: absent != lost
    kv_budget: str | None = None  # CPU worker: "explicit" or "auto"
    kv_cache_tokens: int | None = None

    def put(self, name: str, value: Any, source: str) -> None:
        if value is None or name in self.values:
            return  # the first (most resolved) source wins
        self.values[name] = value
        self.sources[name] = source

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _literal(text: str) -> Any:
    if text == "None":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text.strip("'\"")


def parse_non_default_args(
    log: str | Sheet, learned: Mapping[str, Param] | None = None
) -> dict[str, Any] | None:
    """The registry's flags (and the learned ones the run used) among vLLM's `non-default args:
    {...}` (the last one of the launch's own lines)."""
    found = read_sheet(log).get("non_default_args")
    if found is None:
        return None
    raw = _ENUM_REPR.sub(lambda m: repr(f"{m[1]} ({m[2].strip(chr(39))})"), found)
    parsed: Any
    try:
        parsed = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):  # a value that is not a literal: take the simple ones
        parsed = {k: _literal(v) for k, v in _ARG_ITEM.findall(raw)}
    known = [*PARAMS.values(), *(learned or {}).values()]
    dests = {_dest(p): p.name for p in known if p.kind == "flag"}
    return {dests[k]: v for k, v in parsed.items() if k in dests}


def _engine_fields(sheet: Sheet) -> dict[str, str]:
    found = sheet.get("engine_config")
    return dict(_ENGINE_FIELD.findall(found)) if found else {}


def read_effective(
    log: str | Sheet,
    cache_labels: Mapping[str, str] | None,
    learned: Mapping[str, Param] | None = None,
) -> Effective:
    """Everything the engine said about its configuration, most resolved source first (from its
    own log lines: `tuning.engine.log_facts`)."""
    sheet = read_sheet(log)
    eff = Effective()
    labels = dict(cache_labels or {})
    for name, label in _CACHE_LABELS.items():
        value = labels.get(label)
        if value not in (None, "", "None"):
            eff.put(name, value, SRC_CACHE)
    if labels.get("kv_cache_size_tokens") not in (None, "", "None"):
        eff.kv_cache_tokens = _as_int(labels["kv_cache_size_tokens"])
    engine = _engine_fields(sheet)
    for name, key in _ENGINE_KEYS.items():
        if key in engine:
            eff.put(name, engine[key], SRC_ENGINE)
    if (max_len := sheet.get("max_model_len")) is not None:
        eff.put("max-model-len", max_len, SRC_MAX_LEN)
    # GiB with one or two decimals: too coarse for a byte count, enough to tell who sized it
    eff.kv_budget = sheet.get("cpu_kv_budget")
    eff.non_default_args = parse_non_default_args(sheet, learned)
    eff.non_default_args_cut = bool(sheet.get("non_default_args_cut"))
    for name, value in (eff.non_default_args or {}).items():
        eff.put(name, value, SRC_ARGS)
    return eff


# --- equality ---------------------------------------------------------------------------------


def _as_int(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    return None


def _as_bytes(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if math.isfinite(value) else None
    try:
        return parse_bytes(str(value).strip())
    except ValueError:
        return _as_int(value)


def _as_text(value: Any) -> str:
    text = str(value).strip().strip("'\"")
    return text[len("torch.") :] if text.startswith("torch.") else text


def same(param: Param, asked: Any, effective: Any) -> bool:
    """Is `effective` what `asked` means, under the tolerance rules of the module docstring?"""
    if param.type == "bytes":
        a, e = _as_bytes(asked), _as_bytes(effective)
        return a is not None and e is not None and abs(a - e) <= BYTES_TOLERANCE * max(a, 1)
    if param.type == "bool":
        return _as_bool(asked) is not None and _as_bool(asked) == _as_bool(effective)
    if param.type == "float":
        try:
            return math.isclose(float(asked), float(effective), rel_tol=FLOAT_TOLERANCE)
        except (TypeError, ValueError):
            return False
    if param.type == "int":
        a_int, e_int = _as_int(asked), _as_int(effective)
        return a_int is not None and a_int == e_int
    if param.type == "json":
        return _same_json(asked, effective)
    if param.type == "list":
        return _same_list(param, asked, effective)
    if _AUTO.get(param.name) == _as_text(asked):
        return True  # `auto` is whatever the engine resolved it to
    return _as_text(asked) == _as_text(effective)


def _same_json(asked: Any, effective: Any) -> bool:
    """Every field the user set is what the engine's parsed config holds (it adds the rest)."""
    try:
        wanted = json.loads(asked) if isinstance(asked, str) else asked
    except ValueError:
        return False
    if not isinstance(wanted, dict):
        return False
    if isinstance(effective, str) and effective.lstrip().startswith("{"):
        try:  # the engine echoed the JSON it was given
            effective = json.loads(effective)
        except ValueError:
            pass
    if isinstance(effective, dict):
        return all(_same_field(v, effective.get(k)) for k, v in wanted.items())
    text = str(effective)  # a config object's repr: `field=value` or `'field': value`
    return all(f"{k}={v!r}" in text or f"'{k}': {v!r}" in text for k, v in wanted.items())


def _elements(value: Any) -> list[Any] | None:
    """A list value as its elements: the stored JSON text, a list, or the engine's repr of one."""
    if isinstance(value, (list, tuple)):
        return list(value)
    try:
        return list_elements(value)
    except ValueError:
        pass
    found = _literal(str(value)) if isinstance(value, str) else None
    return list(found) if isinstance(found, (list, tuple)) else None


def _same_list(param: Param, asked: Any, effective: Any) -> bool:
    """The same elements in the same order, each by its own type's rule."""
    wanted, got = _elements(asked), _elements(effective)
    if wanted is None or got is None or len(wanted) != len(got):
        return False
    one = replace(param, type=param.item or "text", item=None, nargs=None)
    return all(same(one, a, e) for a, e in zip(wanted, got, strict=True))


def _same_field(wanted: Any, got: Any) -> bool:
    """A JSON field as asked against the engine's: an enum member matches its name or value."""
    if wanted == got:
        return True
    enum = _ENUM_TEXT.match(got) if isinstance(got, str) else None
    return enum is not None and str(wanted).upper() in (enum[1].upper(), enum[2].upper())


def show(param: Param, value: Any) -> str:
    """A value as a mismatch line shows it: bytes in binary units (four decimals tell close
    counts apart)."""
    if value is None:
        return "nothing (not set)"
    if param.type == "bytes" or param.name == CPU_KV_ENV:
        n = _as_bytes(value)
        if n is not None:
            return format_bytes(n, decimals=4)
    if param.type == "bool":
        b = _as_bool(value)
        return str(value) if b is None else ("true" if b else "false")
    return _as_text(value)


def _mismatch(param: Param, asked: Any, effective: Any, source: str, why: str = "") -> Mismatch:
    reason = (
        f"{param.name}: asked {show(param, asked)}, the engine ran with "
        f"{show(param, effective)} ({source})" + (f"; {why}" if why else "")
    )
    return Mismatch(param.name, asked, effective, source, reason)


# --- asked vs effective -----------------------------------------------------------------------


def _cpu_kv_env(asked: Any, eff: Effective) -> Mismatch | None:
    """VLLM_CPU_KVCACHE_SPACE=N asks for N GiB of KV cache."""
    param = get_param(CPU_KV_ENV)
    effective = eff.values.get("kv-cache-memory-bytes")
    if effective is None:
        return None
    wanted = int(asked) * GIB
    if same(get_param("kv-cache-memory-bytes"), wanted, effective):
        return None
    reason = (
        f"{param.name}: asked {asked} GiB of KV cache, the engine ran with "
        f"{show(get_param('kv-cache-memory-bytes'), effective)} "
        f"({eff.sources['kv-cache-memory-bytes']})"
    )
    return Mismatch(param.name, asked, effective, eff.sources["kv-cache-memory-bytes"], reason)


def compare(
    asked: Mapping[str, Any],
    eff: Effective,
    backend: str | None = None,
    learned: Mapping[str, Param] | None = None,
) -> tuple[list[Mismatch], list[str]]:
    """(mismatches, unverified parameter names) of a run's asked server config."""
    mismatches: list[Mismatch] = []
    unverified: list[str] = []
    for key, value in asked.items():
        try:
            param = get_param(key, learned)
        except ValueError:
            continue
        if param.kind == "workload":
            continue
        if param.name == CPU_KV_ENV:
            found = _cpu_kv_env(value, eff)
            if found:
                mismatches.append(found)
            elif "kv-cache-memory-bytes" not in eff.values:
                unverified.append(param.name)
            continue
        if param.name in eff.values:
            effective, source = eff.values[param.name], eff.sources[param.name]
            if not same(param, value, effective):
                mismatches.append(_mismatch(param, value, effective, source))
        elif (
            eff.non_default_args is not None
            and not eff.non_default_args_cut
            and param.kind == "flag"
        ):
            # The parser saw the argv; a flag absent from it is either vLLM's default or lost.
            if param.default is not None and same(param, value, param.default):
                continue
            mismatches.append(
                _mismatch(param, value, None, SRC_ARGS, "vLLM's argument parser did not receive it")
            )
        else:
            unverified.append(param.name)
    gmu = asked.get("gpu-memory-utilization")
    if (
        backend == "cpu"
        and gmu is not None
        and "kv-cache-memory-bytes" not in asked
        and eff.kv_budget == "explicit"
    ):
        budget = show(get_param("kv-cache-memory-bytes"), eff.values.get("kv-cache-memory-bytes"))
        why = (
            f"the KV cache was sized from an explicit budget ({budget}, e.g. {CPU_KV_ENV}), "
            "not from gpu-memory-utilization"
        )
        param = get_param("gpu-memory-utilization")
        mismatches.append(_mismatch(param, gmu, "a fixed KV budget", SRC_CPU_KV, why))
    return mismatches, unverified


@dataclass(frozen=True)
class Check:
    """A server's start read back: what it runs with, what it was asked, what differs."""

    asked: dict[str, Any]
    effective: dict[str, Any]
    mismatches: list[dict[str, Any]]


def log_conflicts(facts: StartupFacts) -> list[Mismatch]:
    """The facts the launch's own log lines disagreed on (tuning.engine.log_facts), as mismatches:
    what
    the lab stored from its log may not be what the engine runs with."""
    out = []
    for c in facts.log_conflicts:
        values = c.get("values") or []
        out.append(Mismatch(f"log:{c.get('fact')}", None, values, SRC_LOG, str(c.get("reason"))))
    return out


def check_start(
    launch: Launch, log: str | Sheet, facts: StartupFacts, backend: str | None = None
) -> Check:
    """Asked (the launch's validated config) vs what the engine's log and /metrics say; a fact
    its own lines disagreed on is a mismatch too."""
    eff = read_effective(log, facts.cache_config, launch.learned)
    mismatches, unverified = compare(launch.config, eff, backend, launch.learned)
    mismatches += log_conflicts(facts)
    record = {**eff.to_dict(), "unverified": unverified}
    return Check(dict(launch.config), record, [m.to_dict() for m in mismatches])


def check_load(asked: Mapping[str, Any], health: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Mismatches the load itself shows: more requests running at once than max-num-seqs."""
    limit = _as_int(asked.get("max-num-seqs"))
    running = health.get("server_running_max")
    if limit is None or not isinstance(running, (int, float)) or running <= limit:
        return []
    param = get_param("max-num-seqs")
    m = _mismatch(
        param,
        limit,
        int(running),
        SRC_LOAD,
        f"vLLM ran {int(running)} requests at once, more than the limit",
    )
    return [m.to_dict()]


def applied_columns(check: Check | None, health: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's stored columns: effective_config_json and config_mismatch_json (a list, empty
    when everything asked was applied); with `health`, what the load showed is added."""
    if check is None:
        return {}
    seen = check_load(check.asked, health) if health is not None else []
    return {
        "effective_config_json": check.effective,
        "config_mismatch_json": check.mismatches + seen,
    }


def mismatch_params(mismatches: Any) -> list[str]:
    """The parameter names of stored mismatches (tolerant of any stored shape)."""
    if not isinstance(mismatches, list):
        return []
    return [str(m["param"]) for m in mismatches if isinstance(m, dict) and "param" in m]


def mismatch_reasons(mismatches: Any) -> list[str]:
    if not isinstance(mismatches, list):
        return []
    return [str(m.get("reason") or m.get("param")) for m in mismatches if isinstance(m, dict)]


def stored_mismatches(run: Mapping[str, Any]) -> list[Any] | None:
    """A run's stored config mismatches (parsed, or from `config_mismatch_json`); None when the
    run was never checked or what is stored is not a list (an odd bundle)."""
    raw = run.get("config_mismatch")
    if raw is None and isinstance(run.get("config_mismatch_json"), str):
        try:
            raw = json.loads(run["config_mismatch_json"])
        except ValueError:
            raw = None
    return raw if isinstance(raw, list) else None
