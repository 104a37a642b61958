"""The house rules, read from the source: one direction of imports, small modules, SQL only in
store/, no shell, no kill-by-name, nothing bound to every interface."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".engine", "data", "node_modules", ".carry", "out"}
SOURCES = [p for p in REPO.rglob("*.py") if not SKIP & set(p.relative_to(REPO).parts)]
APP_DIRS = ("core", "store", "tuning", "ui", "app_pages")
APP = [
    p
    for p in SOURCES
    if p.relative_to(REPO).parts[0] in APP_DIRS or p.name == "app.py" and p.parent == REPO
]
MAKE_AND_SH = [REPO / "Makefile", *REPO.glob(".ci/*"), *REPO.rglob("*.sh")]
MAX_LINES = 500
T = TypeVar("T", bound=ast.AST)

# What each layer may not import (top-level package names).
FORBIDDEN: dict[str, set[str]] = {
    "core": {"store", "tuning", "ui", "app_pages", "app", "streamlit"},
    "store": {"tuning", "ui", "app_pages", "app", "streamlit"},
    "tuning": {"ui", "app_pages", "app", "streamlit"},
}
SQL = re.compile(
    r"\b(select\s[\s\S]*?\bfrom\b|insert\s+(or\s+\w+\s+)?into\b|update\s+\w+\s+set\b|"
    r"delete\s+from\b)",
    re.IGNORECASE,
)


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each file parsed once for every rule (the rules re-parsed 500 files each)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _nodes(tree: ast.AST) -> dict[type[ast.AST], list[ast.AST]]:
    """Each tree walked once for every rule (a walk per rule cost more than the parse), its
    nodes grouped by type in walk order; planted trees of the self-tests go through it too."""
    out: dict[type[ast.AST], list[ast.AST]] = {}
    for node in ast.walk(tree):
        out.setdefault(type(node), []).append(node)
    return out


def _of(tree: ast.AST, *kinds: type[T]) -> list[T]:
    """The nodes of `tree` of these exact types (one kind's nodes in walk order)."""
    found = _nodes(tree)
    return [n for kind in kinds for n in found.get(kind, [])]  # type: ignore[misc]


def imported_packages(tree: ast.AST) -> set[str]:
    """Top-level names of every absolute import, wherever it stands (function bodies too)."""
    out: set[str] = set()
    for node in _of(tree, ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def layer_violations(rel: Path, tree: ast.AST) -> list[str]:
    bad = FORBIDDEN.get(rel.parts[0], set()) & imported_packages(tree)
    return [f"{rel} imports {sorted(bad)}"] if bad else []


def module_name(rel: Path) -> str:
    """tuning/cli/main.py -> tuning.cli.main; tuning/cli/__init__.py -> tuning.cli."""
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(name: str, tree: ast.AST, known: set[str], is_package: bool) -> set[str]:
    """The modules of `known` that module `name` imports, wherever the import stands (function
    bodies too): `from a.b import c` is a.b.c when that is a module, else a.b; relative imports
    are resolved against `name`."""
    out: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in _of(tree, ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            # `import a.b.c` of a module we do not know (an attribute path): its nearest module
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph(trees: Mapping[str, tuple[ast.AST, bool]]) -> dict[str, set[str]]:
    """Module -> the modules it imports, for the modules given (name -> (tree, is_package))."""
    known = set(trees)
    return {
        name: imported_modules(name, tree, known, is_package)
        for name, (tree, is_package) in trees.items()
    }


def cli_importers(graph: dict[str, set[str]]) -> list[str]:
    """Modules outside tuning.cli that import it; only the entry point tuning.__main__ may."""
    return sorted(
        f"{name} imports {sorted(t for t in targets if _in_cli(t))}"
        for name, targets in graph.items()
        if not _in_cli(name) and name != "tuning.__main__" and any(_in_cli(t) for t in targets)
    )


def _in_cli(name: str) -> bool:
    return name == "tuning.cli" or name.startswith("tuning.cli.")


def import_cycles(
    graph: dict[str, set[str]], allowed: frozenset[tuple[str, str]] = frozenset()
) -> list[list[str]]:
    """Each circle of imports (a strongly connected component of more than one module), shown as
    one closed path through it; the `allowed` edges are left out first."""
    edges = {a: {b for b in bs if (a, b) not in allowed and b in graph} for a, bs in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(_closed_path(edges, c) for c in components)


def _closed_path(edges: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside it."""
    start = min(component)
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v] & component):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return sorted(component)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in _of(tree, ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef):
        body = node.body  # type: ignore[attr-defined]
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            ids.add(id(body[0].value))
    return ids


def sql_outside_store(rel: Path, tree: ast.AST) -> list[str]:
    """SQL text in string literals (not docstrings) and .execute()/.query() calls."""
    if rel.parts[0] == "store":
        return []
    out = []
    docs = _docstrings(tree)
    for node in _of(tree, ast.Constant, ast.Call):
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
    return _of(tree, ast.Call)


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


def deferred_writes(rel: Path, tree: ast.AST) -> list[str]:
    """Calls of sqlite-utils' `atomic()` outside store/db.py: it begins deferred, so a write after a
    read in it fails at once with `database is locked` when another connection committed between
    (how a fleet resume was refused); `store.db.write_transaction` is the one way to write."""
    if rel == Path("store/db.py"):
        return []
    return [
        f"{rel}:{c.lineno}"
        for c in _calls(tree)
        if isinstance(c.func, ast.Attribute) and c.func.attr == "atomic"
    ]


def test_every_write_takes_the_write_lock_first() -> None:
    offenders = [v for p in APP for v in deferred_writes(p.relative_to(REPO), _tree(p))]
    assert not offenders, offenders


def test_the_deferred_write_check_sees_one() -> None:
    tree = ast.parse("with db.atomic():\n    db.table('runs').update(1, {})\n")
    assert deferred_writes(Path("store/transfer.py"), tree) == ["store/transfer.py:1"]
    assert not deferred_writes(Path("store/db.py"), tree)


def test_nothing_binds_all_interfaces() -> None:
    offenders = [
        str(p)
        for p in [*SOURCES, REPO / ".streamlit" / "config.toml"]
        if "tests" not in p.relative_to(REPO).parts and "0.0.0.0" in p.read_text()
    ]
    assert not offenders, offenders


# Edges allowed to close a circle: none (the last, runner <-> fleet, went with the one run path).
ALLOWED_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()


@functools.cache
def _tuning_graph() -> dict[str, set[str]]:
    """The import graph of tuning/, built once for the three rules that read it (not changed)."""
    trees = {
        module_name(p.relative_to(REPO)): (_tree(p), p.name == "__init__.py")
        for p in APP
        if p.relative_to(REPO).parts[0] == "tuning"
    }
    return import_graph(trees)


def test_nothing_outside_the_cli_imports_it() -> None:
    """The CLI is the outermost layer: only the entry point (tuning/__main__.py) imports it."""
    trees = {
        module_name(p.relative_to(REPO)): (_tree(p), p.name == "__init__.py")
        for p in APP
        if p.suffix == ".py"
    }
    graph = import_graph(trees)
    assert "tuning.cli.main" in graph["tuning.__main__"]
    assert not cli_importers(graph), cli_importers(graph)


def test_no_import_cycles_in_tuning() -> None:
    graph = _tuning_graph()
    assert len(graph) > 50 and graph["tuning.experiment.runner"]
    for edge in ALLOWED_CYCLE_EDGES:  # still there: otherwise delete it from the allow-list
        assert edge[1] in graph[edge[0]], f"{edge} is gone: remove it from ALLOWED_CYCLE_EDGES"
    cycles = import_cycles(graph, ALLOWED_CYCLE_EDGES)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_import_contract_sees_violations() -> None:
    """Planted violations: a store module and a page importing the CLI, and two circles."""
    src = {
        "tuning.__main__": "from tuning.cli.main import main",
        "tuning.cli": "",
        "tuning.cli.main": "from tuning.cli import demo",
        "tuning.cli.demo": "def run():\n    from tuning.cli.main import main",
        "tuning.present.report": "def f():\n    from tuning.cli.workload import spec_from_args",
        "tuning.cli.workload": "from . import args",
        "tuning.cli.args": "import tuning.measure.traffic.spec",
        "tuning.measure.traffic": "from tuning.measure.traffic.spec import X",
        "tuning.measure.traffic.spec": "from .errors import E",
        "tuning.measure.traffic.errors": "",
        "ui.workload": "from tuning.cli import workload",
        "tuning.a": "from tuning import b",
        "tuning.b": "from tuning.c import thing",
        "tuning.c": "def f():\n    import tuning.a",
    }
    packages = {"tuning.cli", "tuning.measure.traffic"}
    graph = import_graph({n: (ast.parse(s), n in packages) for n, s in src.items()})
    assert graph["tuning.cli.workload"] == {"tuning.cli.args"}  # relative, resolved
    assert graph["tuning.measure.traffic.spec"] == {"tuning.measure.traffic.errors"}
    assert cli_importers(graph) == [
        "tuning.present.report imports ['tuning.cli.workload']",
        "ui.workload imports ['tuning.cli.workload']",
    ]
    assert import_cycles(graph) == [
        ["tuning.a", "tuning.b", "tuning.c", "tuning.a"],
        ["tuning.cli.demo", "tuning.cli.main", "tuning.cli.demo"],
    ]
    allowed = frozenset({("tuning.cli.demo", "tuning.cli.main")})
    assert import_cycles(graph, allowed) == [["tuning.a", "tuning.b", "tuning.c", "tuning.a"]]


# The layers inside tuning/, innermost first (../shared/DESIGN.md): each imports only those before
# it; settings.py is the one loose module every layer reads; tuning/__main__.py starts the CLI.
TUNING_LAYERS = (
    "settings",
    "engine",
    "measure",
    "compare",
    "experiment",
    "decide",
    "present",
    "cli",
)
TUNING_ROOT_MODULES = {"__init__.py", "__main__.py", "settings.py"}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "tuning" or len(parts) < 2 or parts[1] not in TUNING_LAYERS:
        return None
    return TUNING_LAYERS.index(parts[1])


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module of tuning/ from a layer above its own."""
    out = []
    for name, targets in graph.items():
        mine = _layer(name)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = _layer(target)
            if theirs is not None and theirs > mine:
                out.append(f"{name} imports {target} ({TUNING_LAYERS[theirs]} sits above it)")
    return sorted(out)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between the packages of tuning/ (a module counts as its package; the
    loose modules at the root, settings and __main__, as themselves)."""

    def package(module: str) -> str:
        parent = module.rpartition(".")[0]
        return module if module in packages or parent == "tuning" else parent

    packages = {m for m in graph if any(o.startswith(m + ".") for o in graph)}
    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        mine = package(name)
        out.setdefault(mine, set())
        out[mine] |= {package(t) for t in targets if package(t) != mine}
    return out


def test_tuning_holds_only_its_layers_and_settings() -> None:
    loose = sorted(p.name for p in (REPO / "tuning").glob("*.py"))
    assert set(loose) == TUNING_ROOT_MODULES, loose
    folders = {
        p.name for p in (REPO / "tuning").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    assert folders == set(TUNING_LAYERS[1:]), folders


def test_tuning_layers_import_downward_only() -> None:
    offenders = upward_imports(_tuning_graph())
    assert not offenders, "\n".join(offenders)


def test_no_import_circle_between_packages() -> None:
    cycles = import_cycles(package_graph(_tuning_graph()))
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_layer_contract_sees_an_upward_import() -> None:
    """A planted upward import (engine -> measure, lazily in a function) and a package circle."""
    src = {
        "tuning.engine": "",
        "tuning.engine.server": "def f():\n    from tuning.measure.workload import Workload",
        "tuning.measure": "",
        "tuning.measure.workload": "from tuning.engine.server import f",
        "tuning.measure.loadgen": "",
        "tuning.measure.loadgen.client": "from tuning.measure import workload",
        "tuning.measure.health": "from tuning.measure.loadgen.client import C",
        "tuning.cli.main": "from tuning.engine.server import f",
    }
    packages = {"tuning.engine", "tuning.measure", "tuning.measure.loadgen"}
    graph = import_graph({n: (ast.parse(s), n in packages) for n, s in src.items()})
    assert upward_imports(graph) == [
        "tuning.engine.server imports tuning.measure.workload (measure sits above it)"
    ]
    assert import_cycles(package_graph(graph)) == [
        ["tuning.engine", "tuning.measure", "tuning.engine"]
    ]


# Public names several modules define on purpose: a protocol each module of a kind follows,
# reached through the module, never imported by name.
SHARED_NAMES: dict[str, str] = {
    "add_arguments": "each tuning/cli command module adds its subcommands (tuning.cli.main)",
    "run": "each tuning/cli command module runs its subcommands (tuning.cli.main dispatches)",
    "main": "a script's entry point: python -m tuning.cli.bench, tuning-lab-serve, the engine "
    "probe run in vLLM's own interpreter",
}
NAMED_DIRS = ("core", "store", "tuning", "ui")


def public_names(tree: ast.Module) -> list[str]:
    """The public top-level functions and classes a module defines."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [n.name for n in tree.body if isinstance(n, kinds) and not n.name.startswith("_")]


def shared_names(trees: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Public names defined by more than one module (besides SHARED_NAMES), with where."""
    where: dict[str, list[str]] = {}
    for rel, tree in trees.items():
        for name in public_names(tree):
            where.setdefault(name, []).append(rel)
    return {
        name: sorted(rels)
        for name, rels in sorted(where.items())
        if len(rels) > 1 and name not in SHARED_NAMES
    }


def _named_trees() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(REPO)): _tree(p)
        for p in APP
        if p.relative_to(REPO).parts[0] in NAMED_DIRS
    }


def test_no_two_public_functions_or_classes_share_a_name() -> None:
    """Issue 39 item 5: one name per concept ("plan" meant five things: two `run_plan`, two
    `plan_next`, two `RunUnit`)."""
    assert not shared_names(_named_trees())


def test_the_name_check_sees_a_planted_duplicate() -> None:
    trees = _named_trees()
    trees["tuning/experiment/planted.py"] = ast.parse("def plan_experiment():\n    pass\n")
    trees["ui/planted.py"] = ast.parse("class _Private: ...\ndef run(): ...\ndef main(): ...\n")
    assert shared_names(trees) == {
        "plan_experiment": ["tuning/experiment/plan.py", "tuning/experiment/planted.py"]
    }
    assert all(why.strip() for why in SHARED_NAMES.values())
