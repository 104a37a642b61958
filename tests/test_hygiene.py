"""House rules checked on the source: no shell, no kill-by-name, no Streamlit in the core."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = [
    p
    for p in REPO.rglob("*.py")
    if not any(part in {".venv", ".engine", "data", "node_modules"} for part in p.parts)
]
MAKE_AND_SH = [REPO / "Makefile", *REPO.glob(".ci/*"), *REPO.rglob("*.sh")]


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def test_sources_were_found() -> None:
    assert len(SOURCES) > 10


def test_no_source_builds_a_shell_command() -> None:
    offenders = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        for call in _calls(tree):
            func = ast.unparse(call.func)
            if func in {
                "os.system",
                "os.popen",
                "subprocess.getoutput",
                "subprocess.getstatusoutput",
                "os.execl",
                "os.spawnl",
            }:
                offenders.append(f"{path}:{call.lineno} {func}")
            for kw in call.keywords:
                if kw.arg == "shell" and not (
                    isinstance(kw.value, ast.Constant) and kw.value.value is False
                ):
                    offenders.append(f"{path}:{call.lineno} shell=")
    assert not offenders, offenders


def test_nothing_is_killed_by_name() -> None:
    pattern = re.compile(r"\b(pkill|killall)\b")  # we never kill by name
    offenders = []
    for path in SOURCES + [p for p in MAKE_AND_SH if p.is_file()]:
        if path == Path(__file__):
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path}:{no}")
    assert not offenders, offenders


def test_core_packages_never_import_streamlit() -> None:
    offenders = []
    for path in SOURCES:
        rel = path.relative_to(REPO)
        if rel.parts[0] not in {"tuning", "store"}:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.split(".")[0] == "streamlit" for n in names):
                offenders.append(str(rel))
    assert not offenders, offenders


def test_nothing_binds_all_interfaces() -> None:
    offenders = []
    for path in SOURCES + [REPO / ".streamlit" / "config.toml"]:
        if "tests" in path.relative_to(REPO).parts:
            continue
        if "0.0.0.0" in path.read_text():
            offenders.append(str(path))
    assert not offenders, offenders
