"""Prelaunch: a server's Python imports done ahead, the server itself run only on "go".

Run by the ENGINE's own interpreter (which does not have the lab installed: standard library only,
no lab imports), in place of the command it wraps:

    <python> prelaunch.py --module vllm.entrypoints.openai.api_server -- ARGS...   # python -m M
    <python> prelaunch.py --script /path/server.py -- ARGS...                     # python FILE
    <python> prelaunch.py --entry vllm.entrypoints.cli.main:main --argv0 vllm \\
        [--also vllm.entrypoints.cli.serve ...] -- serve ARGS...                   # console script

It imports the entry point's modules (the module itself, not as __main__; a script's top-level
imports; a console script's module and `--also`), prints one line with the seconds that took,
waits for a line "go" on stdin (end of input: the lab is gone, exit without running anything),
prints one line with the time it went, then runs the entry point as the plain command would have
(`runpy.run_module(M, run_name="__main__", alter_sys=True)` with sys.argv set, `runpy.run_path`, or
`sys.exit(func())`). Both lines carry `time.monotonic()` (one clock for every process of the
machine), so the lab can tell a user's plain start from the seconds spent waiting for go.

An import that fails is the start's failure: its traceback is in the log, the exit code 1.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import runpy
import sys
import time

PREFIX = "tuning-lab prelaunch:"


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        own, rest = argv[:cut], argv[cut + 1 :]
    else:
        own, rest = argv, []
    parser = argparse.ArgumentParser(prog="prelaunch.py")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--module")
    how.add_argument("--script")
    how.add_argument("--entry")
    parser.add_argument("--argv0", default="")
    parser.add_argument("--also", action="append", default=[])
    return parser.parse_args(own), rest


def _script_imports(path: str) -> list[str]:
    """The modules a script imports at its top level (absolute imports only), with the names
    `from M import N` may mean as submodules."""
    with open(path, "rb") as fh:
        tree = ast.parse(fh.read(), filename=path)
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)  # and each name that is a submodule (else: not found)
            names += [f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def _try_import(names: list[str]) -> None:
    """Best effort: a module this version does not have is imported (or not) by the run itself."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (the entry point's own run says it, if it matters)
            pass


def _imports(args: argparse.Namespace) -> None:
    """The entry point's modules, imported as the plain command's run will need them."""
    if args.module:
        sys.path[0] = os.getcwd()  # as `python -m` puts it
        importlib.import_module(args.module)
        # Its dependencies stay imported; the module itself runs afresh as __main__ (as under
        # `python -m`, where it is not in sys.modules under its own name).
        sys.modules.pop(args.module, None)
    elif args.script:
        sys.path[0] = os.path.dirname(os.path.abspath(args.script))  # as `python FILE` puts it
        _try_import(_script_imports(args.script))
    else:
        if args.argv0 and os.path.dirname(args.argv0):
            sys.path[0] = os.path.dirname(os.path.abspath(args.argv0))
        importlib.import_module(args.entry.partition(":")[0])
    _try_import(args.also)


def _run(args: argparse.Namespace, rest: list[str]) -> object:
    if args.module:
        sys.argv = [args.module, *rest]  # argv[0] becomes the module's file, as under -m
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        return 0
    if args.script:
        sys.argv = [args.script, *rest]
        runpy.run_path(args.script, run_name="__main__")
        return 0
    module, _, func = args.entry.partition(":")
    target: object = importlib.import_module(module)
    for part in func.split("."):
        target = getattr(target, part)
    # as pip's console-script wrapper does
    sys.argv = [re.sub(r"(-script\.pyw|\.exe)?$", "", args.argv0 or module), *rest]
    assert callable(target)
    return target()


def main(argv: list[str]) -> object:
    began = time.monotonic()
    args, rest = _parse(argv)
    _imports(args)
    done = time.monotonic()
    print(f"{PREFIX} imports took {done - began:.3f} s (monotonic {done:.6f})", flush=True)
    line = sys.stdin.readline()
    if line.strip() != "go":
        print(f"{PREFIX} no go (input closed): exiting without starting", flush=True)
        return 0
    print(f"{PREFIX} go (monotonic {time.monotonic():.6f})", flush=True)
    return _run(args, rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))  # type: ignore[arg-type]  # an entry point returns what it returns
