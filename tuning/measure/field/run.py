"""One run read from a file another tool wrote (vLLM's `bench serve`, GuideLLM, AIPerf): its
numbers under the lab's metric names, its per-request rows where the file keeps them, and what
the file says of the load and the server. Pure data; the readers build it, the import stores it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.records import RequestRecord


class FieldError(ValueError):
    """A file the lab cannot read as any tool's result file; the message is one line naming it."""


@dataclass(frozen=True)
class FieldRun:
    """One measured run of a field tool, in the lab's words."""

    tool: str  # 'vllm-bench', 'guidellm', 'aiperf'
    tool_version: str | None
    label: str  # where in the file: 'run=0.json', 'benchmarks[2]'
    summary: dict[str, Any]  # the lab's summary keys (vLLM's names, ms for latencies)
    records: list[RequestRecord] | None = None  # per request, when the file keeps them
    model: str | None = None
    workload: dict[str, Any] = field(default_factory=dict)  # concurrency, request_rate, ...
    config: dict[str, Any] = field(default_factory=dict)  # server flags the file holds, if any
    started_at: str | None = None


def obj(value: Any) -> Mapping[str, Any]:
    """A mapping, or an empty one (a field of another shape is ignored, not trusted)."""
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
