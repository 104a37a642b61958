"""Run BY THE ENGINE'S OWN INTERPRETER (stdlib + vllm only, never the lab): read the argument
parser of the vLLM it belongs to, or check values with it.

    python engine_probe.py list          -> JSON {"vllm_version", "parser", "flags": [...]}
    python engine_probe.py check < JSON  -> JSON [{"flag", "ok", "error", "parsed"}, ...]
    python engine_probe.py check-env < JSON  (the same for [[VLLM_NAME, value], ...])

`check` reads [[flag, value-or-null], ...]; each is parsed alone with the engine's own types and
choices (a null value is a bare flag, a list one argv item per element), so a malformed value is
refused with vLLM's own message before any server starts. `list` also reads, from the engine's
config classes (a flag's group is its class, its dest the field), which flags take a class to
import and which keys of a JSON value name code or a file, for the lab's policy
(tuning.engine.flags.policy). Which parser: the API server's
(`make_arg_parser`, the place moved between vLLM versions), else the engine's
(`AsyncEngineArgs.add_cli_args`).
"""

from __future__ import annotations

import argparse
import ast
import collections.abc
import contextlib
import dataclasses
import functools
import importlib
import inspect
import io
import json
import os
import pathlib
import re
import sys
import textwrap
import types
import typing
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


# What a config field is, read from the engine's own config classes (vLLM builds most flags from
# their fields: the flag's group is the class, its dest the field): a type that takes a class or a
# callable (`scheduler_cls: str | type[object]`) or a path, or text documented as a qualified
# name, a module path, a path or a directory (`CompilationConfig.backend`, `inductor_passes`).
_CODE_DOC = re.compile(
    r"qualified|class name|module path|dynamically load|\bpath\b|director(y|ies)|\bfolder\b",
    re.IGNORECASE,
)
_CONTAINERS = (list, set, frozenset, tuple, dict, collections.abc.Sequence, collections.abc.Mapping)


def _members(hint: Any) -> list[Any]:
    """The types a hint allows: unions and Optional flattened, Annotated unwrapped."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _members(typing.get_args(hint)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(hint) for m in _members(arg)]
    return [hint]


def _takes_code(hint: Any) -> bool:
    """A class, a callable or a path (in a list or dict too); an unresolved hint by its text."""
    for member in _members(hint):
        origin = typing.get_origin(member)
        if member is type or origin is type:
            return True
        if origin is collections.abc.Callable or member in (
            collections.abc.Callable,
            typing.Callable,
        ):
            return True
        if isinstance(member, type) and issubclass(member, pathlib.PurePath):
            return True
        if origin in _CONTAINERS and any(_takes_code(a) for a in typing.get_args(member)):
            return True
        if isinstance(member, (str, typing.ForwardRef)) and re.search(
            r"\btype\[|Callable|\bPath\b", str(member)
        ):
            return True
    return False


def _holds_text(hint: Any) -> bool:
    """Could the value be a free name (str, Any, a container of them), not only fixed choices?"""
    for member in _members(hint):
        if member is str or member is Any or isinstance(member, (str, typing.ForwardRef)):
            return True
        if typing.get_origin(member) in _CONTAINERS and any(
            _holds_text(a) for a in typing.get_args(member)
        ):
            return True
    return False


def _options(hint: Any) -> list[str]:
    """The named options of a Literal in the hint (`mp`, `ray`, ... of a backend)."""
    return sorted(
        str(a)
        for m in _members(hint)
        if typing.get_origin(m) is typing.Literal
        for a in typing.get_args(m)
        if isinstance(a, str)
    )


def _dataclasses(hint: Any) -> list[type]:
    return [m for m in _members(hint) if isinstance(m, type) and dataclasses.is_dataclass(m)]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # a name only importable under TYPE_CHECKING: the raw annotations
        return {f.name: f.type for f in dataclasses.fields(cls)}


@functools.cache
def _field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of `cls` and its bases (vLLM documents fields there)."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(base)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = after.value.value
    return docs


def _code_keys(cls: type, prefix: str = "", depth: int = 0) -> list[str]:
    """Dotted keys of a JSON value for config class `cls` that name code or a file."""
    out: list[str] = []
    hints, docs = _hints(cls), _field_docs(cls)
    for field in dataclasses.fields(cls):
        hint = hints.get(field.name, field.type)
        path = prefix + field.name
        doc = docs.get(field.name, "")
        if _takes_code(hint) or (_holds_text(hint) and _CODE_DOC.search(doc)):
            out.append(path)
        for inner in _dataclasses(hint):
            if depth < 4 and inner is not cls:
                out += _code_keys(inner, path + ".", depth + 1)
    return out


def _config_class(title: str, parser_module: str) -> type | None:
    """The config class a parser group is titled after (`SchedulerConfig`, `Frontend`...)."""
    places = ["vllm.config", parser_module.rsplit(".", 1)[0]]
    for place in places:
        try:
            module = importlib.import_module(place)
        except ImportError:
            continue
        for name in (title, title + "Args"):
            found = getattr(module, name, None)
            if isinstance(found, type) and dataclasses.is_dataclass(found):
                return found
    return None


def _type_dataclass(fn: Any, depth: int = 0) -> type | None:
    """The config class a JSON flag's type function validates against (vLLM's parse_dataclass
    keeps it as a default argument, wrapped in optional_type's closure)."""
    if depth > 3 or not callable(fn):
        return None
    inner = [*(getattr(fn, "__defaults__", None) or ())]
    inner += [c.cell_contents for c in getattr(fn, "__closure__", None) or () if _filled(c)]
    for value in inner:
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            return value
    for value in inner:
        if found := _type_dataclass(value, depth + 1):
            return found
    return None


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _code_facts(action: argparse.Action, title: str, origin: str) -> dict[str, Any]:
    """{names_code, options, code_keys} of one flag; nothing known when its class is not found."""
    owner = _config_class(title, origin)
    hint = _hints(owner).get(action.dest) if owner else None
    names_code = hint is not None and _takes_code(hint) and not _dataclasses(hint)
    inner = _dataclasses(hint) if hint is not None else []
    if not inner and (typed := _type_dataclass(action.type)) is not None:
        inner = [typed]
    keys = sorted({k for cls in inner for k in _code_keys(cls)})
    return {
        "names_code": names_code,
        "options": _options(hint) if names_code else [],
        "code_keys": keys,
    }


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
                    **_safe_code_facts(action, group.title or "", origin),
                }
            )
    import vllm  # type: ignore[import-not-found]

    return {
        "vllm_version": str(vllm.__version__),
        "parser": origin,
        "flags": flags,
        "env": list_env(),
    }


def _safe_code_facts(action: argparse.Action, title: str, origin: str) -> dict[str, Any]:
    try:
        return _code_facts(action, title, origin)
    except Exception:  # a class this reading cannot follow: the lab's policy by name still holds
        return {}


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


def check_items(items: list[list[Any]]) -> list[dict[str, Any]]:
    parser, _ = _parser()

    def error(message: str) -> Any:
        raise _Refused(message)

    parser.error = error  # type: ignore[method-assign]
    parser.exit_on_error = False
    out = []
    for flag, value in items:
        if isinstance(value, list):  # a flag of several values (nargs): one argv item each
            argv = [flag, *(str(v) for v in value)]
        else:
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
            result = check_items(json.load(sys.stdin))
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
