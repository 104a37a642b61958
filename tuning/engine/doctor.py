"""`tuning-lab doctor`: is this machine ready to run the lab? Each check looks, never changes
anything (the DB is opened read-only), and says what it found; a problem comes with its fix.

The checks: the engine (its command present, vLLM importable in its interpreter, its version, the
model folder), the GPU through NVML (a problem only for a GPU engine), the app's port, free disk
under the lab's home, the DB (`quick_check`, schema version against this code, WAL) and the team
folder (set, a folder, writable).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from store.health import inspect_db
from tuning.engine.current import current_spec
from tuning.engine.find import COMMAND_FIX, locate, model_config, read_gpus, vllm_version
from tuning.engine.flags.catalog import CatalogError, engine_python
from tuning.engine.server import describe_holders, port_holders, port_is_free
from tuning.engine.spec import EngineError, EngineSpec
from tuning.settings import Settings, default_db_path, lab_home, load_settings

APP_PORT = 8501  # `make run` and .streamlit/config.toml
MIN_FREE_BYTES = 2 << 30  # logs, per-request rows and samples of a few hundred runs


@dataclass
class Diagnosis:
    """One check's result: `ok` False is a problem, and `fix` says what to do about it."""

    check: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        head = f"{'ok' if self.ok else 'PROBLEM':8s}{self.check}: {self.detail}"
        return head if self.ok or not self.fix else f"{head}\n{'':8s}fix: {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_engine(spec: EngineSpec, import_check: bool = True) -> list[Diagnosis]:
    """The engine's command present, vLLM importable in its interpreter (a `vllm` script's is its
    shebang's), its version and path; the model's config.json readable (for KV prediction)."""
    found: list[Diagnosis] = []
    program = spec.command[0]
    located = locate(program)
    if located is None:
        fix = "run `make setup` (builds .engine/)" if spec.name == "embedded-cpu" else ""
        fix = fix or f"{COMMAND_FIX} on Settings -> vLLM interpreter or command"
        return [Diagnosis("engine", False, f"{spec.name}: {program} not found", fix)]
    script = Path(program).name.startswith("python") and spec.command[1:2] != ["-m"]
    if import_check and not script:
        found.append(_import_vllm(spec.name, [located, *spec.command[1:]]))
    else:
        how = "its import not checked" + (": not a `python -m` command" if script else "")
        found.append(Diagnosis("engine", True, f"{spec.name}: {located} ({how})"))
    found.append(check_model(spec))
    return found


def check_model(spec: EngineSpec) -> Diagnosis:
    """Whether the model's config.json can be read (a local folder or a Hugging Face cache hit):
    without it there is no KV prediction, and the lab downloads nothing to get it."""
    path, why = model_config(spec.model)
    if path is not None:
        return Diagnosis("model", True, f"{spec.model}: config.json readable ({path})")
    if spec.name == "embedded-cpu":
        return Diagnosis("model", False, f"{spec.model}: {why}", "run `make setup`")
    if Path(spec.model).is_absolute() or spec.model.startswith("."):
        return Diagnosis("model", False, f"{spec.model}: {why}", "fix the model path on Settings")
    return Diagnosis(
        "model",
        True,
        f"{spec.model}: {why}; vLLM resolves it when it starts, but there is no KV prediction",
        "",
    )


def _import_vllm(name: str, command: list[str]) -> Diagnosis:
    try:
        python = engine_python(command)
    except CatalogError as exc:
        return Diagnosis("engine", False, f"{name}: {exc}", COMMAND_FIX)
    version, why = vllm_version(locate(python) or python, full_import=True)
    if version is None:
        fix = "`make setup` (embedded) or `pip install vllm` in that interpreter"
        return Diagnosis("engine", False, f"{name}: {why}", fix)
    return Diagnosis("engine", True, f"{name}: vllm {version} in {python}")


def check_gpu(backend: str, nvml: Any = None) -> Diagnosis:
    """GPUs through NVML, with the driver and free memory; none is fine for a CPU engine and a
    problem for a GPU one."""
    gpus = read_gpus(nvml)
    if gpus.error.startswith("NVML not available"):
        if backend != "gpu":
            return Diagnosis("gpu", True, f"{gpus.error}; the {backend} engine needs none")
        return Diagnosis(
            "gpu",
            False,
            f"{gpus.error}: no GPU memory is sampled and a GPU engine cannot start",
            "install the NVIDIA driver (nvidia-smi must work) or switch to the embedded engine",
        )
    if gpus.error:
        return Diagnosis("gpu", False, gpus.error, "check nvidia-smi")
    if not gpus.names and backend == "gpu":
        return Diagnosis(
            "gpu", False, "NVML sees no GPU", "check CUDA_VISIBLE_DEVICES and nvidia-smi"
        )
    if not gpus.names:
        return Diagnosis("gpu", True, "0 visible: none")
    return Diagnosis("gpu", True, f"{len(gpus.names)} visible: {gpus.summary()}")


def engine_findings(settings: Settings, import_check: bool = True) -> list[Diagnosis]:
    """The engine's part of the doctor (engine, model, GPU): also Settings' "Check engine"."""
    try:
        spec = current_spec(settings)
    except EngineError as exc:
        return [
            Diagnosis("engine", False, str(exc), "fill in the engine on Settings"),
            check_gpu(settings.engine_backend),
        ]
    return [*check_engine(spec, import_check), check_gpu(spec.backend)]


def _is_the_app(pid: int) -> bool:
    """Whether `pid` is the lab's app: `streamlit run`, or `python -m ui.serve` (`make run`)."""
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return "ui.serve" in argv or any(Path(a).name == "streamlit" for a in argv[:2])


def check_port(port: int, host: str = "127.0.0.1") -> Diagnosis:
    """The app's port: free, or held by the lab's own app, or a problem naming who holds it."""
    if port_is_free(host, port):
        return Diagnosis("port", True, f"{host}:{port} is free")
    holders = describe_holders(port)
    if "streamlit" in holders or any(_is_the_app(pid) for pid in port_holders(port)):
        return Diagnosis("port", True, f"{host}:{port} is served by {holders} (the app, running)")
    return Diagnosis(
        "port",
        False,
        f"{host}:{port} is in use by {holders}",
        f"stop that process, or serve the app on another port (`make run PORT={port + 1}`)",
    )


def check_disk(folder: Path, minimum: int = MIN_FREE_BYTES) -> Diagnosis:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    detail = f"{free / 2**30:.1f} GiB free under {folder}"
    if free < minimum:
        fix = f"free at least {minimum / 2**30:.0f} GiB (old logs are under {folder / 'logs'})"
        return Diagnosis("disk", False, detail, fix)
    return Diagnosis("disk", True, detail)


def check_db(path: Path) -> list[Diagnosis]:
    h = inspect_db(path)
    if not h.exists:
        return [Diagnosis("db", True, f"{path} does not exist yet (created on first use)")]
    restore = f"move {path} aside and restore a copy (an exported bundle can be imported)"
    if h.error:
        return [Diagnosis("db", False, f"{path} cannot be read: {h.error}", restore)]
    found = []
    if h.quick_check != ["ok"]:
        words = "; ".join(h.quick_check[:3])
        fix = f"`sqlite3 {path} .recover > recovered.sql`, then {restore}"
        found.append(Diagnosis("db", False, f"{path}: quick_check failed: {words}", fix))
    else:
        found.append(Diagnosis("db", True, f"{path}: quick_check ok"))
    if h.newer:
        found.append(
            Diagnosis(
                "schema",
                False,
                f"written by a newer lab (unknown migrations: {', '.join(h.unknown_migrations)})",
                "update the lab (git pull) before opening this DB",
            )
        )
    else:
        pending = h.code_schema_version - (h.schema_version or 0)
        note = f"; {pending} migration(s) run on next write" if pending else ""
        found.append(Diagnosis("schema", True, f"version {h.schema_version}{note}"))
    if (h.journal_mode or "").lower() != "wal":  # a snapshot, or a DB never written by the lab
        note = f"journal mode {h.journal_mode} (the lab switches it to WAL when it writes)"
        found.append(Diagnosis("wal", True, note))
    else:
        found.append(Diagnosis("wal", True, "journal mode wal"))
    return found


def check_team(folder: str) -> Diagnosis:
    if not folder:
        return Diagnosis("team", True, "no team folder set (sharing is optional)")
    path = Path(folder).expanduser()
    if not path.is_dir():
        fix = "mount the share, or change Settings -> Team folder"
        return Diagnosis("team", False, f"{path} does not exist or is not a folder", fix)
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        fix = f"give this user write access to {path} (publishing writes bundles there)"
        return Diagnosis("team", False, f"{path} is not writable ({exc.strerror})", fix)
    return Diagnosis("team", True, f"{path} is writable")


def diagnose(
    settings: Settings | None = None,
    db_path: Path | None = None,
    port: int = APP_PORT,
    import_check: bool = True,
) -> list[Diagnosis]:
    """Every check, in order; none raises."""
    settings = settings or load_settings()
    checks: list[Callable[[], list[Diagnosis] | Diagnosis]] = [
        lambda: engine_findings(settings, import_check),
        lambda: check_port(port),
        lambda: check_disk(lab_home()),
        lambda: check_db(db_path or default_db_path()),
        lambda: check_team(settings.team_folder),
    ]
    out: list[Diagnosis] = []
    for check in checks:
        try:
            got = check()
        except Exception as exc:  # noqa: BLE001 (a doctor that crashes helps nobody)
            got = Diagnosis("doctor", False, f"a check failed: {type(exc).__name__}: {exc}")
        out.extend(got if isinstance(got, list) else [got])
    return out
