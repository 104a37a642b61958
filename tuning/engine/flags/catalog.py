"""Every flag the user's vLLM defines, read from its own argument parser in its own interpreter.

The lab's curated registry (tuning.engine.params) knows 12 flags well (units, ranges, KV
prediction); the
engine knows its ~300. Reading them takes the engine's import time (about 10 s on the CPU build),
so a catalog is cached per engine (interpreter path + vLLM version) in the store
(store.engine_flags) and read again only when the version changes or the user asks.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PROBE = Path(__file__).with_name("engine_probe.py")
PROBE_TIMEOUT_S = 300.0  # a cold import of vLLM on a busy 2-core machine
# What a catalog holds; a cached one of another format is read again (2: `env`; 3: help texts;
# 4: only vLLM's own VLLM_* knobs, with their help and choices; 5: what in a flag names code or a
# file, from the engine's config classes).
FORMAT = 5


class CatalogError(RuntimeError):
    """The engine's parser could not be read; the message says why and what to fix."""


@dataclass(frozen=True)
class FlagInfo:
    """One flag as the engine's parser defines it (names without the leading `--`)."""

    name: str
    dest: str
    kind: str  # bool (--x/--no-x), switch (--x only), choice, int, float, bytes, json, str
    type_name: str | None = None
    choices: tuple[str, ...] = ()
    default: Any = None
    help: str = ""
    group: str = ""
    nargs: str | None = None
    aliases: tuple[str, ...] = ()
    deprecated: bool = False
    # Read from the engine's config classes (engine_probe): the value itself is a class to import
    # (`scheduler-cls`), except its named `options` (`distributed-executor-backend mp`); dotted
    # keys of its JSON value typed or documented as code or a file (`reasoning_parser_plugin`).
    names_code: bool = False
    options: tuple[str, ...] = ()
    code_keys: tuple[str, ...] = ()

    @property
    def runnable_default(self) -> Any:
        """The default as a value the flag could be given; None when the parser's default is
        not one: a JSON-valued flag's default is the engine's own config object, read back as
        its repr (`{'mode': None, ... <DynamicShapesType.BACKED: 'backed'>}`)."""
        if not isinstance(self.default, (bool, int, float, str)):
            return None
        if self.kind != "json":
            return self.default
        try:
            return self.default if isinstance(json.loads(str(self.default)), dict) else None
        except ValueError:
            return None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FlagInfo:
        return cls(
            name=str(raw["name"]),
            dest=str(raw.get("dest") or raw["name"].replace("-", "_")),
            kind=str(raw.get("kind") or "str"),
            type_name=raw.get("type_name"),
            choices=tuple(str(c) for c in raw.get("choices") or ()),
            default=raw.get("default"),
            help=str(raw.get("help") or ""),
            group=str(raw.get("group") or ""),
            nargs=raw.get("nargs"),
            aliases=tuple(str(a) for a in raw.get("aliases") or ()),
            deprecated=bool(raw.get("deprecated")),
            names_code=bool(raw.get("names_code")),
            options=tuple(str(o) for o in raw.get("options") or ()),
            code_keys=tuple(str(k) for k in raw.get("code_keys") or ()),
        )


@dataclass(frozen=True)
class Catalog:
    """The flags of one engine (its interpreter and vLLM version), and when they were read."""

    python: str
    vllm_version: str
    parser: str
    flags: dict[str, FlagInfo] = field(default_factory=dict)
    read_at: float = 0.0
    # vLLM's environment knobs (VLLM_*), from its own `vllm.envs`: tuned only when named.
    env: dict[str, FlagInfo] = field(default_factory=dict)

    def get(self, name: str) -> FlagInfo | None:
        """A flag by its name, an alias or its dest (`max_num_seqs`); an environment knob by its
        name (`VLLM_...`)."""
        key = name.strip().removeprefix("--")
        if key in self.flags:
            return self.flags[key]
        if key in self.env:
            return self.env[key]
        dashed = key.replace("_", "-")
        for info in self.flags.values():
            if dashed == info.name or dashed in info.aliases or key == info.dest:
                return info
        return None

    def search(self, word: str | None = None, env: bool = False) -> list[FlagInfo]:
        """Flags (with `env`, environment knobs) whose name, group or help mention `word`
        (case-insensitive); all without one."""
        pool = self.env if env else self.flags
        items = sorted(pool.values(), key=lambda f: (f.group, f.name))
        if not word:
            return items
        w = word.lower()
        return [
            f for f in items if w in f.name.lower() or w in f.group.lower() or w in f.help.lower()
        ]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["flags"] = [asdict(f) for f in self.flags.values()]
        out["env"] = [asdict(f) for f in self.env.values()]
        out["format"] = FORMAT
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Catalog:
        infos = [FlagInfo.from_dict(f) for f in raw.get("flags") or ()]
        knobs = [
            FlagInfo.from_dict({"group": "environment", "dest": e["name"], **e})
            for e in raw.get("env") or ()
        ]
        return cls(
            python=str(raw.get("python") or ""),
            vllm_version=str(raw.get("vllm_version") or "unknown"),
            parser=str(raw.get("parser") or ""),
            flags={f.name: f for f in infos},
            read_at=float(raw.get("read_at") or 0.0),
            env={k.name: k for k in knobs},
        )


def engine_python(command: Sequence[str]) -> str:
    """The interpreter behind an engine command: `python -m vllm...` -> python; a `vllm` script
    (`vllm serve`) -> its shebang's interpreter, which is where its vllm package lives."""
    if not command:
        raise CatalogError("the engine has no command")
    first = command[0]
    if Path(first).name.startswith("python"):
        return first
    import shutil

    path = shutil.which(first) or first
    try:
        with open(path, "rb") as fh:
            head = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError as exc:
        raise CatalogError(f"cannot read the engine command {first!r}: {exc.strerror}") from None
    if not head.startswith("#!"):
        raise CatalogError(f"{first!r} is not a Python script: give the vLLM interpreter instead")
    parts = shlex.split(head[2:])
    if parts and Path(parts[0]).name == "env" and len(parts) > 1:
        parts = parts[1:]
    if not parts:
        raise CatalogError(f"{first!r} names no interpreter on its first line")
    return parts[0]


def _probe(python: str, mode: str, stdin: str | None, timeout: float) -> Any:
    try:
        proc = subprocess.run(
            [python, str(PROBE), mode],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError:
        raise CatalogError(f"no interpreter at {python!r}: is this engine installed?") from None
    except subprocess.TimeoutExpired:
        raise CatalogError(f"reading vLLM's parser took over {timeout:.0f} s ({python})") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CatalogError(f"reading vLLM's parser with {python} failed: {tail}")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise CatalogError(f"vLLM's parser probe printed no JSON ({python})") from None


def read_catalog(python: str, timeout: float = PROBE_TIMEOUT_S) -> Catalog:
    """The engine's flags, read now in its own interpreter."""
    raw = _probe(python, "list", None, timeout)
    return Catalog.from_dict({**raw, "python": python, "read_at": time.time()})


@dataclass(frozen=True)
class Checked:
    """One value as the engine's own parser took it: refused with its message, or parsed."""

    flag: str
    ok: bool
    error: str | None
    parsed: Any


def check_in_engine(
    python: str,
    argvs: Iterable[tuple[str, str | list[str] | None]],
    timeout: float = PROBE_TIMEOUT_S,
    env: bool = False,
) -> list[Checked]:
    """Each (flag, value) parsed alone by the engine's parser (None: a bare flag; a list: one
    argv item each, for a flag of several values): its types, choices and JSON models, before
    any server starts. With `env`, each (VLLM_NAME, value) read
    by vLLM's own reader of that variable."""
    items = [[flag, value] for flag, value in argvs]
    if not items:
        return []
    raw = _probe(python, "check-env" if env else "check", json.dumps(items), timeout)
    return [Checked(str(r["flag"]), bool(r["ok"]), r.get("error"), r.get("parsed")) for r in raw]
