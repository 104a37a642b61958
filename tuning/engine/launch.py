"""The only road from a validated configuration to an argv and environment: one server start.

The lab builds every argv itself (no shell); the host is always 127.0.0.1 and the port free, so a
tuning value can never expose the server or smuggle in a flag.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuning.engine.params import (
    CPU_KV_ENV,
    FORCED_HOST,
    KV_BUDGET_FLAGS,
    Learned,
    Param,
    format_value,
    get_param,
)
from tuning.engine.validate import validate_config, validate_value
from tuning.engine.value_text import list_argv


def engine_env(
    config: Mapping[str, Any], base_env: Mapping[str, str] | None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """(environment to set, names to unset) for a start of `config` over the engine's `base_env`.

    An explicit KV flag (kv-cache-memory-bytes, or gpu-memory-utilization, which sizes the KV
    cache from memory on CPU too) drops the baseline's `VLLM_CPU_KVCACHE_SPACE`, from the engine's
    env and from the lab's own environment the server inherits: otherwise vLLM's CPU platform
    overrides the flag with it and the changed value is never applied.
    """
    merged = dict(base_env or {})
    unset: tuple[str, ...] = ()
    if CPU_KV_ENV not in config and any(name in config for name in KV_BUDGET_FLAGS):
        merged.pop(CPU_KV_ENV, None)
        unset = (CPU_KV_ENV,)
    return merged, unset


def config_args(
    config: Mapping[str, Any], learned: Learned | None = None
) -> tuple[list[str], dict[str, str]]:
    """Validated config -> (flag argv, env); never emits --disable-log-stats or a host. A bool
    flag without a `--no-` form (a switch) is given when true and left out when false; a list
    value is one argv item per element (`--cudagraph-capture-sizes 1 2 4 8`)."""
    argv: list[str] = []
    env: dict[str, str] = {}
    for key in sorted(config):
        param = get_param(key, learned)
        value = validate_value(param.name, config[key], learned)
        if param.kind == "env":
            env[param.env or param.name] = format_value(value)
        elif param.kind == "flag":
            assert param.flag is not None
            if param.type == "bool" and (value or param.negatable):
                argv.append(param.flag if value else "--no-" + param.flag[2:])
            elif param.type == "list":  # vLLM's nargs: one argv item per element
                argv += [param.flag, *list_argv(value)]
            elif param.type != "bool":
                argv += [param.flag, format_value(value)]
    return argv, env


def free_port(host: str = FORCED_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one server: argv (no shell), extra env, where it will listen."""

    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    config: dict[str, Any] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()  # removed from the inherited environment too
    learned: dict[str, Param] = field(default_factory=dict)  # the user's vLLM flags it uses

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def build_launch(
    command: list[str],
    model: str,
    served_name: str,
    config: Mapping[str, Any],
    backend: str,
    *,
    port: int | None = None,
    load_format: str | None = None,
    base_env: Mapping[str, str] | None = None,
    learned: Learned | None = None,
) -> Launch:
    """A validated configuration -> the argv and environment of one vLLM server start."""
    clean = validate_config(config, backend, learned)
    flags, env = config_args(clean, learned)
    chosen = port or free_port()
    argv = list(command) + [
        "--model",
        model,
        "--served-model-name",
        served_name,
        "--host",
        FORCED_HOST,
        "--port",
        str(chosen),
    ]
    if load_format:
        argv += ["--load-format", load_format]
    argv += flags
    assert "--disable-log-stats" not in argv
    merged, unset = engine_env(clean, base_env)
    merged.update(env)
    used = {k: p for k, p in (learned or {}).items() if k in clean}
    return Launch(
        argv=argv,
        env=merged,
        host=FORCED_HOST,
        port=chosen,
        config=clean,
        unset_env=unset,
        learned=used,
    )
