"""The workload spec: what traffic a run replays, as plain versioned data.

A spec says where prompts come from (synthetic or a data file), how long inputs and outputs are
(a distribution each), which requests share a system prompt, whether requests are turns of
conversations, and when requests are sent (a closed loop at a concurrency, an open loop at a rate,
or a trace's timestamps). It holds no prompts: `materialize` turns it into the request list. Every
class validates itself on construction and `WorkloadSpec.from_dict` names the field a bad value sits
in, so a spec read from a file or the UI fails with a message a user can act on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tuning.measure.traffic.bounded import read_small_json
from tuning.measure.traffic.errors import DataError, TrafficError
from tuning.measure.traffic.workload import MAX_REQUESTS

# Bump when a field changes meaning; `from_dict` refuses specs from a newer lab.
SPEC_VERSION = 1
LENGTH_KINDS: tuple[str, ...] = ("fixed", "uniform", "normal", "lognormal", "histogram")
SOURCE_KINDS: tuple[str, ...] = ("synthetic", "jsonl", "sharegpt", "csv", "trace")
ARRIVAL_KINDS: tuple[str, ...] = ("closed", "open", "trace")
FILE_KINDS: tuple[str, ...] = ("jsonl", "sharegpt", "csv", "trace")
# Mooncake traces hash prompts in blocks of 512 tokens.
MOONCAKE_BLOCK = 512
# A spec is a page of JSON; a larger file is not one.
MAX_SPEC_BYTES = 1024 * 1024
# Seconds between turns (a longer think time is no longer one conversation).
MAX_THINK_S = 3600.0


def _int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TrafficError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise TrafficError(f"{name} must be >= {minimum}, got {value}")


def _number(name: str, value: Any, minimum: float, *, strict: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok:
        raise TrafficError(f"{name} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        sign = ">" if strict else ">="
        raise TrafficError(f"{name} must be {sign} {minimum}, got {value}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise TrafficError(f"{name} {value!r} is not one of {', '.join(allowed)}")


@dataclass(frozen=True)
class Bin:
    """One bar of an empirical histogram: lengths low..high (inclusive), drawn with `weight`."""

    low: int
    high: int
    weight: float

    def __post_init__(self) -> None:
        _int("bin low", self.low, 1)
        _int("bin high", self.high, self.low)
        _number("bin weight", self.weight, 0.0, strict=True)


@dataclass(frozen=True)
class LengthDist:
    """Token lengths (or turn counts): every kind is rounded, then clipped to [minimum, maximum].

    - fixed: always `mean`.
    - uniform: vLLM's range ratio, integers in [floor(mean*(1-r)), ceil(mean*(1+r))].
    - normal / lognormal: `mean` and `std` are those of the lengths themselves (lognormal's
      mu and sigma are derived from them).
    - histogram: a bin is drawn by weight, then an integer uniformly inside it.
    """

    kind: str = "fixed"
    mean: float = 128
    range_ratio: float = 0.0
    std: float = 0.0
    bins: tuple[Bin, ...] = ()
    minimum: int = 1
    maximum: int | None = None

    def __post_init__(self) -> None:
        _choice("length kind", self.kind, LENGTH_KINDS)
        _int("minimum", self.minimum, 1)
        if self.maximum is not None:
            _int("maximum", self.maximum, self.minimum)
        if self.kind == "histogram":
            if not self.bins:
                raise TrafficError("a histogram needs at least one bin")
            return
        if self.bins:
            raise TrafficError(f"bins are only for kind 'histogram', not {self.kind!r}")
        if self.kind in ("fixed", "uniform"):
            _int(f"{self.kind} mean", self.mean, 1)
        else:
            _number("mean", self.mean, 0.0, strict=True)
        _number("range_ratio", self.range_ratio, 0.0)
        if self.range_ratio >= 1.0 or (self.range_ratio and self.kind != "uniform"):
            raise TrafficError(
                f"range_ratio must be in [0, 1) and only for kind 'uniform', got "
                f"{self.range_ratio} for {self.kind!r}"
            )
        _number("std", self.std, 0.0, strict=self.kind == "lognormal")
        if self.std and self.kind not in ("normal", "lognormal"):
            raise TrafficError(f"std is only for normal and lognormal, not {self.kind!r}")


@dataclass(frozen=True)
class Source:
    """Where prompts come from. `path` is required for every kind but synthetic.

    `shuffle` reorders a file's entries with `random.Random(seed)` before sampling, as vLLM's
    ShareGPT sampler does; `prompt_column` / `output_column` name a CSV's columns;
    `block_size` is the token count one trace hash id stands for.
    """

    kind: str = "synthetic"
    path: str | None = None
    shuffle: bool = True
    prompt_column: str = "prompt"
    output_column: str | None = None
    block_size: int = MOONCAKE_BLOCK

    def __post_init__(self) -> None:
        _choice("source kind", self.kind, SOURCE_KINDS)
        if (self.kind == "synthetic") != (self.path is None):
            raise TrafficError(
                "a synthetic source takes no path"
                if self.kind == "synthetic"
                else f"a {self.kind} source needs a path"
            )
        if not isinstance(self.shuffle, bool):
            raise TrafficError(f"shuffle must be true or false, got {self.shuffle!r}")
        if not self.prompt_column:
            raise TrafficError("prompt_column must not be empty")
        _int("block_size", self.block_size, 1)


@dataclass(frozen=True)
class Limits:
    """vLLM's ShareGPT filter, and the engine's context: keeps every request servable.

    A file's first turns shorter than `min_len` tokens (prompt or answer), with a prompt longer
    than `max_input_len`, or needing more than `max_total_len` (prompt + output), are skipped as
    vLLM's sampler skips them; a conversation ends before the turn that would need more than
    `max_total_len`; a synthetic request that would is an error.
    """

    min_len: int = 4
    max_input_len: int = 1024
    max_total_len: int = 2048

    def __post_init__(self) -> None:
        _int("min_len", self.min_len, 1)
        _int("max_input_len", self.max_input_len, self.min_len)
        _int("max_total_len", self.max_total_len, 2)


@dataclass(frozen=True)
class SharedPrefixes:
    """K distinct system prompts of `length` tokens; prompt k goes to `shares[k]` of conversations.

    Empty `shares` splits all conversations evenly; shares summing below 1 leave the rest
    without a shared prefix. A prefix is sent before the request's own prompt (vLLM's
    `--random-prefix-len` meaning: it adds to the input length).
    """

    count: int = 0
    length: int = 0
    shares: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        _int("prefix count", self.count, 0)
        _int("prefix length", self.length, 1 if self.count else 0)
        if self.shares and len(self.shares) != self.count:
            raise TrafficError(
                f"shares has {len(self.shares)} entries for {self.count} prefixes; give one "
                "share per prefix, or none for an even split"
            )
        for share in self.shares:
            _number("prefix share", share, 0.0, strict=True)
        if sum(self.shares) > 1.0 + 1e-9:
            raise TrafficError(f"prefix shares add up to {sum(self.shares):g}, more than 1")

    def share_of(self, k: int) -> float:
        return self.shares[k] if self.shares else 1.0 / self.count


@dataclass(frozen=True)
class MultiTurn:
    """Conversations: each turn sends the whole history, then waits `think_time_s` after an answer.

    `turns` draws the number of turns of a synthetic conversation; a file's conversations bring
    their own turns (leave `turns` unset).
    """

    enabled: bool = False
    turns: LengthDist | None = None
    think_time_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise TrafficError(f"multi_turn.enabled must be true or false, got {self.enabled!r}")
        _number("think_time_s", self.think_time_s, 0.0)
        if self.think_time_s > MAX_THINK_S:
            raise TrafficError(f"think_time_s must be <= {MAX_THINK_S:g}, got {self.think_time_s}")
        if not self.enabled and (self.turns is not None or self.think_time_s):
            raise TrafficError("turns and think_time_s need multi_turn.enabled")


@dataclass(frozen=True)
class Arrival:
    """When requests are sent.

    - closed: `concurrency` requests in flight, the next sent when one ends (the default).
    - open: at `rate` req/s with gamma gaps of shape `burstiness` (1 = Poisson, like vLLM's
      `--burstiness`), at most `max_concurrency` in flight when set.
    - trace: at the trace's timestamps divided by `speed` (2 = twice as fast), capped likewise.
    """

    kind: str = "closed"
    concurrency: int = 1
    rate: float | None = None
    burstiness: float = 1.0
    speed: float = 1.0
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        _choice("arrival kind", self.kind, ARRIVAL_KINDS)
        _int("concurrency", self.concurrency, 1)
        _number("burstiness", self.burstiness, 0.0, strict=True)
        _number("speed", self.speed, 0.0, strict=True)
        if self.max_concurrency is not None:
            _int("max_concurrency", self.max_concurrency, 1)
        if self.kind == "open":
            if self.rate is None:
                raise TrafficError("an open-loop arrival needs a rate (requests per second)")
            _number("rate", self.rate, 0.0, strict=True)
        elif self.rate is not None:
            raise TrafficError(f"rate is only for an open-loop arrival, not {self.kind!r}")


@dataclass(frozen=True)
class WorkloadSpec:
    """The whole workload. `input`/`output` None means "from the data file".

    `num_requests` counts requests sent (every turn is one); None takes every usable entry of
    a file. Everything random is drawn from `seed`.
    """

    source: Source = field(default_factory=Source)
    input: LengthDist | None = field(default_factory=lambda: LengthDist(mean=256))
    output: LengthDist | None = field(default_factory=lambda: LengthDist(mean=128))
    prefixes: SharedPrefixes = field(default_factory=SharedPrefixes)
    multi_turn: MultiTurn = field(default_factory=MultiTurn)
    arrival: Arrival = field(default_factory=Arrival)
    limits: Limits = field(default_factory=Limits)
    num_requests: int | None = 100
    seed: int = 0
    name: str = ""
    version: int = SPEC_VERSION

    def __post_init__(self) -> None:
        _int("seed", self.seed, 0)
        if self.version != SPEC_VERSION:
            raise TrafficError(
                f"spec version {self.version!r} is not {SPEC_VERSION}; "
                "it was written by another version of the lab"
            )
        kind = self.source.kind
        if self.num_requests is None:
            if kind == "synthetic":
                raise TrafficError("a synthetic workload needs num_requests")
        else:
            _int("num_requests", self.num_requests, 1)
            if self.num_requests > MAX_REQUESTS:
                raise TrafficError(
                    f"num_requests must be <= {MAX_REQUESTS:,}, got {self.num_requests:,}"
                )
        if kind == "synthetic" and (self.input is None or self.output is None):
            raise TrafficError("a synthetic workload needs input and output length distributions")
        if kind != "synthetic" and self.input is not None:
            raise TrafficError(
                f"input lengths come from the {kind} file; leave input unset (or null)"
            )
        if kind == "trace" and self.output is not None:
            raise TrafficError("output lengths come from the trace; leave output unset (or null)")
        if kind == "trace" and self.prefixes.count:
            raise TrafficError("a trace shares prompts through its hash_ids; leave prefixes unset")
        if self.arrival.kind == "trace" and kind != "trace":
            raise TrafficError("a trace arrival replays a trace file: set source kind 'trace'")
        self._check_multi_turn(kind)

    def _check_multi_turn(self, kind: str) -> None:
        mt = self.multi_turn
        if not mt.enabled:
            return
        if kind in ("csv", "trace"):
            raise TrafficError(f"a {kind} source has no conversations; turn multi_turn off")
        if kind == "synthetic" and mt.turns is None:
            raise TrafficError("a synthetic multi-turn workload needs a turns distribution")
        if kind != "synthetic" and mt.turns is not None:
            raise TrafficError(f"turns come from the {kind} file; leave multi_turn.turns unset")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; `from_dict(to_dict())` gives an equal spec."""
        out = _to_plain(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> WorkloadSpec:
        """Builds and validates a spec; an error names the field, e.g. 'arrival.rate'. A file
        source's lengths left unset (absent, or null) come from the file, as its error says."""
        spec = _build(cls, _file_lengths_unset(data), "spec")
        assert isinstance(spec, WorkloadSpec)
        return spec


def _file_lengths_unset(data: Any) -> Any:
    """`data` with `input` (and a trace's `output`) null where a file source leaves them out:
    the defaults are synthetic lengths, which a file source refuses."""
    source = data.get("source") if isinstance(data, dict) else None
    kind = source.get("kind") if isinstance(source, dict) else None
    if kind is None or kind == "synthetic" or not isinstance(kind, str):
        return data
    unset = {"input": None, "output": None} if kind == "trace" else {"input": None}
    return {**unset, **data}


def _to_plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_to_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _to_plain(getattr(value, f.name)) for f in fields(value)}
    return value


# The nested dataclass each field holds; everything else is a plain JSON scalar.
_NESTED: dict[str, type] = {
    "source": Source,
    "input": LengthDist,
    "output": LengthDist,
    "turns": LengthDist,
    "prefixes": SharedPrefixes,
    "multi_turn": MultiTurn,
    "arrival": Arrival,
    "limits": Limits,
}


def _build(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise TrafficError(f"{path} must be an object, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TrafficError(f"{path}: unknown field(s) {', '.join(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        where = f"{path}.{name}" if path != "spec" else name
        if name in _NESTED and value is not None:
            kwargs[name] = _build(_NESTED[name], value, where)
        elif name == "bins":
            if not isinstance(value, list):
                raise TrafficError(f"{where} must be a list of {{low, high, weight}}")
            kwargs[name] = tuple(_build(Bin, b, f"{where}[{i}]") for i, b in enumerate(value))
        elif name == "shares":
            if not isinstance(value, list):
                raise TrafficError(f"{where} must be a list of numbers")
            kwargs[name] = tuple(value)
        else:
            if isinstance(value, str):
                _encodable(where, value)
            kwargs[name] = value
    try:
        return cls(**kwargs)
    except TrafficError as exc:
        raise TrafficError(f"{path}: {exc}" if path != "spec" else str(exc)) from None


def _encodable(where: str, text: str) -> None:
    """A lone surrogate (JSON `"\\ud800"`) cannot be stored or sent: refused, naming the field."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TrafficError(
            f"{where}: a lone surrogate at character {exc.start} is not valid Unicode (refused)"
        ) from None


def read_spec(path: str | Path) -> WorkloadSpec:
    """A spec file: its size capped before it is read (`MAX_SPEC_BYTES`), its nesting before it
    is parsed; a refusal names the file and the field."""
    data = read_small_json(path, MAX_SPEC_BYTES, "a workload spec")
    try:
        return WorkloadSpec.from_dict(data)
    except DataError:
        raise
    except TrafficError as exc:
        raise DataError(path, str(exc)) from None
