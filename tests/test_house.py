"""The house rules, read from the source: one direction of imports, small modules, SQL only in
store/, no shell, no kill-by-name, nothing bound to every interface."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".engine", "data", "node_modules", ".carry", "out"}
SOURCES = [p for p in REPO.rglob("*.py") if not SKIP & set(p.relative_to(REPO).parts)]
APP_DIRS = ("core", "store", "tuning", "ui", "pages")
APP = [
    p
    for p in SOURCES
    if p.relative_to(REPO).parts[0] in APP_DIRS or p.name == "app.py" and p.parent == REPO
]
MAKE_AND_SH = [REPO / "Makefile", *REPO.glob(".ci/*"), *REPO.rglob("*.sh")]
MAX_LINES = 500

# What each layer may not import (top-level package names).
FORBIDDEN: dict[str, set[str]] = {
    "core": {"store", "tuning", "ui", "pages", "app", "streamlit"},
    "store": {"tuning", "ui", "pages", "app", "streamlit"},
    "tuning": {"ui", "pages", "app", "streamlit"},
}
SQL = re.compile(
    r"\b(select\s[\s\S]*?\bfrom\b|insert\s+(or\s+\w+\s+)?into\b|update\s+\w+\s+set\b|"
    r"delete\s+from\b)",
    re.IGNORECASE,
)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imported_packages(tree: ast.AST) -> set[str]:
    """Top-level names of every absolute import, wherever it stands (function bodies too)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def layer_violations(rel: Path, tree: ast.AST) -> list[str]:
    bad = FORBIDDEN.get(rel.parts[0], set()) & imported_packages(tree)
    return [f"{rel} imports {sorted(bad)}"] if bad else []


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def sql_outside_store(rel: Path, tree: ast.AST) -> list[str]:
    """SQL text in string literals (not docstrings) and .execute()/.query() calls."""
    if rel.parts[0] == "store":
        return []
    out = []
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and SQL.search(node.value)
        ):
            out.append(f"{rel}:{node.lineno} SQL text {node.value[:40]!r}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"execute", "executemany", "executescript", "query"}
        ):
            out.append(f"{rel}:{node.lineno} .{node.func.attr}(")
    return out


def test_sources_were_found() -> None:
    assert len(APP) > 30 and any(p.name == "app.py" for p in APP)


def test_layers_import_one_way() -> None:
    offenders = [v for p in SOURCES for v in layer_violations(p.relative_to(REPO), _tree(p))]
    assert not offenders, offenders


def test_the_layer_check_sees_a_violation() -> None:
    tree = ast.parse("def f():\n    from tuning.settings import load_settings\n")
    assert layer_violations(Path("store/x.py"), tree) == ["store/x.py imports ['tuning']"]
    assert layer_violations(Path("tuning/x.py"), ast.parse("import streamlit as st"))
    assert not layer_violations(Path("tuning/x.py"), ast.parse("from store import repo"))


def test_no_app_module_over_500_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in APP
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_sql_outside_store() -> None:
    offenders = [v for p in APP for v in sql_outside_store(p.relative_to(REPO), _tree(p))]
    assert not offenders, offenders


def test_the_sql_check_sees_sql() -> None:
    tree = ast.parse(
        '"""select the runs from the store"""\n'
        'rows = db.execute("SELECT id FROM runs")\nq = "delete from samples"\n'
    )
    found = sql_outside_store(Path("tuning/x.py"), tree)
    assert len(found) == 3, found  # the string, the call, the delete; not the docstring
    assert not sql_outside_store(Path("store/x.py"), tree)


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def test_no_source_builds_a_shell_command() -> None:
    shells = {
        "os.system",
        "os.popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "os.execl",
        "os.spawnl",
    }
    offenders = []
    for path in SOURCES:
        for call in _calls(_tree(path)):
            func = ast.unparse(call.func)
            if func in shells:
                offenders.append(f"{path}:{call.lineno} {func}")
            offenders += [
                f"{path}:{call.lineno} shell="
                for kw in call.keywords
                if kw.arg == "shell"
                and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
            ]
    assert not offenders, offenders


def test_nothing_is_killed_by_name() -> None:
    pattern = re.compile(r"\b(pkill|killall)\b")
    offenders = []
    for path in SOURCES + [p for p in MAKE_AND_SH if p.is_file()]:
        if path == Path(__file__):
            continue
        offenders += [
            f"{path}:{no}"
            for no, line in enumerate(path.read_text().splitlines(), 1)
            if pattern.search(line)
        ]
    assert not offenders, offenders


def test_nothing_binds_all_interfaces() -> None:
    offenders = [
        str(p)
        for p in [*SOURCES, REPO / ".streamlit" / "config.toml"]
        if "tests" not in p.relative_to(REPO).parts and "0.0.0.0" in p.read_text()
    ]
    assert not offenders, offenders
