"""`tuning-lab engine setup|info|detect` and `tuning-lab server start|stop|status`: the
embedded engine, and one detached server with its state in a small JSON file, so a shell (or a
headless GPU box) can drive the same lifecycle the runner uses."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.failure_kinds import failure_words
from tuning.cli.args import EXIT_OK, EXIT_REFUSED, refused, say
from tuning.cli.parser import prog_name, rename_flag
from tuning.engine import effective, ipc_dir
from tuning.engine.current import current_spec, engine_info
from tuning.engine.embedded import setup_embedded
from tuning.engine.params import ParamError
from tuning.engine.procs import group_alive, stop_group
from tuning.engine.server import ServerProcess, StartFailure, http_get, port_is_free
from tuning.engine.spec import EngineError
from tuning.engine.validate import parse_assignments
from tuning.settings import lab_home

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("engine", "server")


def state_path() -> Path:
    return lab_home() / "server.json"


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """--set NAME=VALUE items as a config dict (ParamError naming every item without '=')."""
    values, errors = parse_assignments(items or [], "--set")
    if errors:
        raise ParamError("; ".join(errors))
    return values


def add_arguments(sub: Subparsers) -> None:
    engine = sub.add_parser("engine", help="the embedded CPU engine")
    everb = engine.add_subparsers(dest="verb", required=True)
    setup = everb.add_parser("setup", help="build the engine venv and the tiny model (idempotent)")
    setup.add_argument("--force", action="store_true")
    info = everb.add_parser("info", help="interpreter, vLLM version, model path")
    info.add_argument("--json", action="store_true")
    detect = everb.add_parser(
        "detect",
        help="find your vLLM (saved, VLLM_PYTHON, a `vllm` on PATH) and the GPUs, and say which "
        "engine `make run` serves: exit 0 when one is chosen (yours, or the embedded engine), 1 "
        "when the vLLM named cannot be used (a saved engine that is gone, a broken VLLM_PYTHON)",
    )
    detect.add_argument("--save", action="store_true", help="save the found vLLM in the settings")
    detect.add_argument(
        "--model", default=None, help="the model it serves (default: VLLM_MODEL, then Settings)"
    )
    detect.add_argument("--json", action="store_true")
    detect.add_argument(
        "--choice",
        action="store_true",
        help="print only the choice on stdout (yours or embedded; nothing when refused) and the "
        "lines on stderr: what `make run` reads",
    )
    server = sub.add_parser("server", help="start, stop or inspect one vLLM server")
    verbs = server.add_subparsers(dest="verb", required=True)
    start = verbs.add_parser("start", help="start the configured engine and wait until healthy")
    start.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a registry parameter for this start (repeatable)",
    )
    start.add_argument(
        "--start-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds the server may take to become healthy",
    )
    rename_flag(start, "--timeout", "--start-timeout")
    start.add_argument("--json", action="store_true")
    verbs.add_parser("stop", help="stop the server started by `server start`")
    status = verbs.add_parser("status", help="is it alive and healthy")
    status.add_argument("--json", action="store_true")


def _load_state() -> dict[str, Any] | None:
    try:
        return json.loads(state_path().read_text())
    except (OSError, ValueError):
        return None


def _detect(args: argparse.Namespace) -> int:
    """Which engine `make run` serves: exit 0 when one is chosen (yours or the embedded one), 1
    when the vLLM named cannot be used (the table of every command: 0 done, 1 failed or refused)."""
    from tuning.engine.find import USE_EMBEDDED, USE_FOUND, choose_engine, save_found
    from tuning.settings import load_settings

    if args.model is not None and not args.model.strip():
        return refused("--model is empty")
    settings = load_settings()
    decision = choose_engine(settings, model=args.model)
    saved = save_found(decision, settings) if args.save else False
    choice = {USE_FOUND: "yours", USE_EMBEDDED: "embedded"}.get(decision.code)
    code = EXIT_OK if choice else EXIT_REFUSED
    if args.json:
        found = decision.discovery.found
        say(
            json.dumps(
                {
                    "code": code,
                    "engine": choice,
                    "vllm": found.to_dict() if found else None,
                    "not_used": decision.discovery.notes,
                    "gpus": decision.gpus.to_dict(),
                    "model": decision.model,
                    "saved": saved,
                }
            )
        )
    else:
        where = sys.stderr if args.choice else sys.stdout
        for line in decision.lines:
            say(line, file=where)
        if saved:
            say("saved as the custom engine in the settings (change it on Settings)", file=where)
        if args.choice and choice:
            say(choice)
    return code


def _engine(args: argparse.Namespace) -> int:
    if args.verb == "detect":
        return _detect(args)
    if args.verb == "setup":
        try:
            setup_embedded(lambda line: say(line, flush=True), force=args.force)
        except EngineError as exc:
            say(f"engine setup failed: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        info = engine_info()
    except EngineError as exc:
        return refused(str(exc))
    if args.json:
        say(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            say(f"{key:18} {value}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch one of COMMANDS (args.command) by its verb."""
    if args.command == "engine":
        return _engine(args)
    if args.verb == "start":
        return _start(args)
    if args.verb == "stop":
        return _stop()
    return _status(args)


def _start(args: argparse.Namespace) -> int:
    state = _load_state()
    if state and group_alive(int(state["pgid"])):
        say(
            f"a server is already running at {state['base_url']} (pid {state['pid']}); "
            f"`{prog_name()} server stop` first"
        )
        return 1
    spec = current_spec()
    config = dict(spec.baseline)
    try:
        config.update(parse_sets(args.set))
        launch = spec.launch(config)
    except ParamError as exc:
        say(f"refused before starting anything: {exc}")
        return EXIT_REFUSED
    log = lab_home() / "logs" / f"server-{time.strftime('%Y%m%d-%H%M%S')}.log"
    server = ServerProcess(launch, log)
    server.start()
    state = {
        "pid": server.pid,
        "pgid": server.pgid,
        "base_url": launch.base_url,
        "port": launch.port,
        "log": str(log),
        "argv": launch.argv,
        "model": spec.served_model_name,
        "ipc_dir": str(server.ipc_dir or ""),  # removed by `server stop` (tuning.engine.ipc_dir)
    }
    state_path().parent.mkdir(parents=True, exist_ok=True)
    state_path().write_text(json.dumps(state, indent=2))
    say(
        f"started pid {server.pid}, log {log}; waiting for {launch.base_url}/health ...", flush=True
    )
    try:
        facts = server.wait_healthy(args.start_timeout)
    except StartFailure as failure:
        state_path().unlink(missing_ok=True)
        out = failure.to_dict()
        say(
            json.dumps(out, indent=2)
            if args.json
            else f"FAILED [{failure_words(failure.kind)}] {failure.reason}\nhint: {failure.hint}"
        )
        return 1
    check = effective.check_start(launch, server.sheet or "", facts, spec.backend)
    state["facts"] = facts.to_dict()
    state["effective_config"], state["config_mismatch"] = check.effective, check.mismatches
    state_path().write_text(json.dumps(state, indent=2))
    if args.json:
        say(json.dumps(state, indent=2))
    else:
        say(
            f"healthy after {facts.time_to_healthy_s:.1f} s at {launch.base_url}: KV cache "
            f"{facts.kv_cache_tokens} tokens, max concurrency {facts.max_concurrency}x"
        )
        for m in check.mismatches:
            say(f"NOT APPLIED {m['reason']}")
    return 0


def _stop() -> int:
    state = _load_state()
    if not state:
        say("no server recorded")
        return 0
    stop_group(int(state["pgid"]))
    ipc_dir.remove(state.get("ipc_dir") or None)
    deadline = time.monotonic() + 30
    while not port_is_free("127.0.0.1", int(state["port"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    state_path().unlink(missing_ok=True)
    say(f"stopped process group {state['pgid']}; port {state['port']} is free")
    return 0


def _status(args: argparse.Namespace) -> int:
    state = _load_state()
    if not state:
        say(json.dumps({"running": False}) if args.json else "no server recorded")
        return 1
    alive = group_alive(int(state["pgid"]))
    try:
        code, _ = http_get(state["base_url"] + "/health")
    except OSError:
        code = 0
    out = {"running": alive, "healthy": code == 200, **state}
    say(
        json.dumps(out, indent=2)
        if args.json
        else f"{'running' if alive else 'gone'}, health {code or 'no answer'}, {state['base_url']}"
    )
    return 0 if alive else 1
