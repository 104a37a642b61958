"""Run BY THE ENGINE'S OWN INTERPRETER (stdlib + vllm only, never the lab): read the argument
parser of the vLLM it belongs to, or check values with it.

    python engine_probe.py list          -> JSON {"vllm_version", "parser", "flags": [...]}
    python engine_probe.py check < JSON  -> JSON [{"flag", "ok", "error", "parsed"}, ...]
    python engine_probe.py check-env < JSON  (the same for [[VLLM_NAME, value], ...])

`check` reads [[flag, value-or-null], ...]; each is parsed alone with the engine's own types and
choices (a null value is a bare flag), so a malformed value is refused with vLLM's own message
before any server starts. Which parser: the API server's (`make_arg_parser`, the place moved
between vLLM versions), else the engine's (`AsyncEngineArgs.add_cli_args`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import json
import os
import re
import sys
from typing import Any

_SERVER_PARSERS = (
    "vllm.entrypoints.launchers.cli_args",  # 0.3x
    "vllm.entrypoints.openai.cli_args",  # 0.1x-0.2x
)
_JSON_TYPES = {"loads", "parse_dataclass", "union_dict_and_str"}


def _parser() -> tuple[argparse.ArgumentParser, str]:
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]
    except ImportError:  # older vLLM
        from vllm.utils import FlexibleArgumentParser  # type: ignore[import-not-found]
    for name in _SERVER_PARSERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "make_arg_parser"):
            return module.make_arg_parser(FlexibleArgumentParser()), name + ".make_arg_parser"
    from vllm.engine.arg_utils import AsyncEngineArgs  # type: ignore[import-not-found]

    return AsyncEngineArgs.add_cli_args(FlexibleArgumentParser()), "AsyncEngineArgs.add_cli_args"


def _named(fn: Any) -> str | None:
    name = getattr(fn, "__name__", "")
    if name in _JSON_TYPES:
        return "json"
    if name.startswith("human_readable_int"):
        return "bytes"
    if fn in (int, float):
        return str(name)
    return None


def _inner_type(fn: Any) -> str | None:
    """What vLLM's wrappers (`optional_type(int)`, `_parse_type(human_readable_int)`) wrap."""
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        if callable(inner) and (found := _named(inner) or _inner_type(inner)):
            return found
    return None


def _kind(action: argparse.Action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):
        return "bool"
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "switch"
    if action.choices:
        return "choice"
    return _named(action.type) or _inner_type(action.type) or "str"


def _plain(value: Any) -> Any:
    """A JSON-safe form of a default (enums, dataclasses and callables as text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(getattr(value, "value", value))


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    try:
        return text % {"default": action.default, "prog": "vllm"}
    except (TypeError, ValueError, KeyError):
        return text


def list_flags() -> dict[str, Any]:
    parser, origin = _parser()
    flags = []
    for group in parser._action_groups:
        for action in group._group_actions:
            longs = [s for s in action.option_strings if s.startswith("--")]
            if not longs or isinstance(action, argparse._HelpAction):
                continue
            main = next((s for s in longs if not s.startswith("--no-")), longs[0])
            flags.append(
                {
                    "name": main[2:],
                    "dest": action.dest,
                    "aliases": [s[2:] for s in longs if s != main and not s.startswith("--no-")],
                    "kind": _kind(action),
                    "type_name": getattr(action.type, "__name__", None),
                    "choices": [str(c) for c in action.choices or ()],
                    "default": _plain(action.default),
                    "help": _help(action),
                    "group": group.title or "",
                    "nargs": None if action.nargs in (None, 0) else str(action.nargs),
                    "deprecated": bool(getattr(action, "deprecated", False)),
                }
            )
    import vllm  # type: ignore[import-not-found]

    return {
        "vllm_version": str(vllm.__version__),
        "parser": origin,
        "flags": flags,
        "env": list_env(),
    }


def _env_kind(default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, (int, float)):
        return type(default).__name__
    return "str"


def _env_comments(module: Any) -> dict[str, str]:
    """The comment lines right above each entry of `environment_variables` in vllm/envs.py: vLLM
    documents its knobs there and nowhere a program can read (the readers are bare lambdas)."""
    try:
        lines = inspect.getsource(module).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    comments: list[str] = []
    for line in lines:
        text = line.strip()
        if text.startswith("#"):
            words = text.lstrip("#").strip()
            if words and not words.startswith("="):  # not a "=== Runtime Env Vars ===" banner
                comments.append(words)
            continue
        entry = re.match(r'"([A-Z][A-Z0-9_]*)":', text)
        if entry and comments and entry.group(1) not in found:
            found[entry.group(1)] = " ".join(comments)
        comments = []
    return found


def _env_choices(reader: Any) -> list[str]:
    """The fixed choices of a knob made by vLLM's `env_with_choices`, kept in its closure."""
    if getattr(reader, "__name__", "") != "_get_validated_env":
        return []
    try:
        choices = inspect.getclosurevars(reader).nonlocals.get("choices")
        choices = choices() if callable(choices) else choices
    except Exception:  # a lazy list that needs a platform: no choices shown, vLLM still checks
        return []
    if isinstance(choices, (list, tuple)) and all(isinstance(c, str) for c in choices):
        return list(choices)
    return []


def list_env() -> list[dict[str, Any]]:
    """vLLM's own environment knobs (the VLLM_* names of `vllm.envs.environment_variables`; the
    table also reads system and other libraries' variables such as LD_LIBRARY_PATH or
    S3_SECRET_ACCESS_KEY, which are not vLLM's to tune) with their defaults, help and choices:
    each reader called with the variable unset (they only read os.environ)."""
    try:
        import vllm.envs as envs  # type: ignore[import-not-found]
    except ImportError:
        return []
    table = getattr(envs, "environment_variables", {})
    helps = _env_comments(envs)
    out = []
    for name, reader in table.items():
        if not name.startswith("VLLM_"):
            continue
        saved = os.environ.pop(name, None)
        try:
            default = _plain(reader())
        except Exception:  # a reader that needs more than its variable: no default known
            default = None
        finally:
            if saved is not None:
                os.environ[name] = saved
        choices = _env_choices(reader)
        kind = "choice" if choices else _env_kind(default)
        out.append(
            {
                "name": name,
                "kind": kind,
                "default": default,
                "help": helps.get(name, ""),
                "choices": choices,
            }
        )
    return out


def check_env(items: list[list[Any]]) -> list[dict[str, Any]]:
    """Each (NAME, value) read by vLLM's own reader of that variable (int('abc') fails here)."""
    import vllm.envs as envs

    out = []
    for name, value in items:
        reader = envs.environment_variables.get(name)
        if reader is None:
            out.append({"flag": name, "ok": False, "error": f"vLLM has no {name}", "parsed": None})
            continue
        saved = os.environ.get(name)
        os.environ[name] = str(value)
        try:
            parsed = _plain(reader())
            out.append({"flag": name, "ok": True, "error": None, "parsed": parsed})
        except Exception as exc:
            out.append(
                {"flag": name, "ok": False, "error": f"{type(exc).__name__}: {exc}", "parsed": None}
            )
        finally:
            if saved is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = saved
    return out


class _Refused(Exception):
    pass


def check(items: list[list[Any]]) -> list[dict[str, Any]]:
    parser, _ = _parser()

    def error(message: str) -> Any:
        raise _Refused(message)

    parser.error = error  # type: ignore[method-assign]
    parser.exit_on_error = False
    out = []
    for flag, value in items:
        argv = [flag] if value is None else [flag, str(value)]
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                ns, rest = parser.parse_known_args(argv)
            if rest:
                raise _Refused(f"unrecognized arguments: {' '.join(rest)}")
            action = next(a for a in parser._actions if flag in a.option_strings)
            parsed = _plain(getattr(ns, action.dest, None))
            if not isinstance(parsed, (bool, int, float, type(None))):
                parsed = str(parsed)[:200]
            out.append({"flag": flag, "ok": True, "error": None, "parsed": parsed})
        except (_Refused, argparse.ArgumentError, ValueError, TypeError, StopIteration) as exc:
            out.append({"flag": flag, "ok": False, "error": str(exc), "parsed": None})
    return out


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "list"
    if mode == "list":  # vLLM reads its help texts only for `--help` (arg_utils.NEEDS_HELP,
        sys.argv.append("--help")  # decided at import): without it most flags have none
    with contextlib.redirect_stdout(sys.stderr):  # vLLM's import-time prints stay out of the JSON
        if mode == "list":
            result: Any = list_flags()
        elif mode == "check-env":
            result = check_env(json.load(sys.stdin))
        else:
            result = check(json.load(sys.stdin))
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
