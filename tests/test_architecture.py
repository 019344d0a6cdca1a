"""The shape of the code, checked from its source: no import cycle in pools/ and portal/, a
pure core with no Django (or Kubernetes, requests, Celery) inside, no function over 60 lines.

The imports are read with `ast`, every one of them, including those inside functions (an
import inside a function only hides a cycle until the function runs).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pools", "portal")
MAX_FUNCTION_LINES = 60
# What the pure core must not reach, directly or through another module.
CORE_FORBIDDEN = {
    "django",
    "rest_framework",
    "kubernetes",
    "urllib3",
    "requests",
    "prometheus_api_client",
    "celery",
    "redis",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def project_modules() -> dict[str, Path]:
    """Every module of pools/ and portal/ (migrations included: they run at migrate time)."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The statements under `if TYPE_CHECKING:`: they never run, so they import nothing."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        for statement in node.body
        for inner in ast.walk(statement)
    }


def imported_names(path: Path, name: str, *, for_types: bool = False) -> Iterator[str]:
    """Every module name `path` imports at run time, wherever the import statement stands
    (with `for_types`, also those under `if TYPE_CHECKING:`, which only a type checker runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skipped = set() if for_types else _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            # `from pools import moves` imports the module pools.moves.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def project_target(imported: str) -> str | None:
    """The project module an import lands in, or None for the standard library and
    third-party packages."""
    modules = project_modules()
    while imported:
        if imported in modules:
            return imported
        imported = imported.rpartition(".")[0]
    return None


@cache
def import_graph(*, for_types: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    modules = project_modules()
    for name, path in modules.items():
        targets = {project_target(i) for i in imported_names(path, name, for_types=for_types)}
        # Importing pools.a.b runs pools/a/__init__.py first: an edge to every package on
        # the way, or a cycle through a package's __init__ goes unseen. A module's own
        # packages are already running when it is imported, so they are no edge.
        targets |= {
            ".".join(t.split(".")[:depth])
            for t in set(targets) - {None}
            for depth in range(2, t.count(".") + 1)
        }
        graph[name] = {
            t for t in targets if t in modules and t != name and not name.startswith(t + ".")
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "import pools.models\n"
        "from pools import moves\n"
        "from . import audit\n"
        "def later():\n"
        "    from pools.tasks import execute_move\n"
        "if TYPE_CHECKING:\n"
        "    from pools.fleet.selectors import overview\n"
    )
    found = {project_target(i) for i in imported_names(source, "pools.example")}
    assert {"pools.models", "pools.moves", "pools.audit", "pools.tasks"} <= found
    assert "pools.fleet.selectors" not in found
    assert len(import_graph()) > 40


def test_no_import_cycle_in_pools_and_portal() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_even_for_the_type_checker() -> None:
    """A cycle through `if TYPE_CHECKING:` imports runs nothing, but it still says two
    modules need each other: the shared types get a module of their own."""
    found = cycles(import_graph(for_types=True))
    assert found == [], "type-level cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_cycle_would_be_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The layers of docs/architecture.md, inside out: a module imports only its own layer and
# those inside it. A module's layer is the folder it sits in (or, at the top of pools/, its
# own name): there is no list of modules to forget, and a module in a folder missing here
# fails `test_every_module_sits_where_a_layer_is_known`.
FOLDER_LAYERS = {
    # The pure core: no Django, no outside system.
    "pools.core": "core",
    # One package per outside system, the models, and what every floor shares (errors,
    # events, roles, the portal's instruments and log context, the guarded cache).
    "pools.kube": "edges",
    "pools.metrics": "edges",
    "pools.notify": "edges",
    "pools.models": "edges",
    "pools.common": "edges",
    # The domain: one package per concept.
    "pools.moves": "domain",
    "pools.fleet": "domain",
    "pools.fit": "domain",
    "pools.insights": "domain",
    "pools.drills": "domain",
    "pools.inventory": "domain",
    "pools.membership": "domain",
    "pools.search": "domain",
    "pools.tokens": "domain",
    "pools.audit": "domain",
    "pools.maintenance": "domain",
    "pools.bookings": "domain",
    "pools.reclaim": "domain",
    # Entry points: pages, the API, commands, tasks and the wiring of the app and project.
    "pools.pages": "entry",
    "pools.api": "entry",
    "pools.management": "entry",
    "pools.templatetags": "entry",
    "pools.migrations": "entry",
    "pools.tasks": "entry",
    "pools.urls": "entry",
    "pools.apps": "entry",
    "portal": "entry",
}
DEPTH = {"core": 0, "edges": 1, "domain": 2, "entry": 3}


def layer(module: str) -> str:
    """The layer of the nearest folder (or top-level module) named in FOLDER_LAYERS."""
    if module == "pools":
        return "core"  # the package itself: empty
    name = module
    while name:
        if name in FOLDER_LAYERS:
            return FOLDER_LAYERS[name]
        name = name.rpartition(".")[0]
    raise LookupError(f"{module} sits in no folder with a layer: place it, or name its folder")


def test_every_module_sits_where_a_layer_is_known() -> None:
    unplaced = []
    for module in project_modules():
        try:
            layer(module)
        except LookupError:
            unplaced.append(module)
    assert unplaced == []
    # A module added at the top of pools/ is not placed: the top holds only the entry wiring.
    assert {m.count(".") for m in project_modules() if layer(m) != "entry"} >= {1, 2}
    with pytest.raises(LookupError):
        layer("pools.loose_module")


def test_every_layer_imports_only_inwards() -> None:
    outward = sorted(
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in import_graph().items()
        for target in targets
        if DEPTH[layer(target)] > DEPTH[layer(module)]
    )
    assert outward == []
    assert layer("pools.moves.rules") == "domain" and layer("pools.api.moves") == "entry"


def reachable(start: str) -> set[str]:
    graph = import_graph()
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        # Importing a module runs its packages' __init__ first.
        parent = name.rpartition(".")[0]
        todo.extend(graph.get(name, ()))
        if parent:
            todo.append(parent)
    return seen


def external_imports(name: str) -> set[str]:
    path = project_modules()[name]
    return {i.split(".")[0] for i in imported_names(path, name) if project_target(i) is None}


def core_modules() -> list[str]:
    return [m for m in project_modules() if m == "pools.core" or m.startswith("pools.core.")]


def test_the_core_imports_no_django_nor_any_edge_directly_or_through_the_project() -> None:
    assert len(core_modules()) >= 8
    for module in core_modules():
        project = reachable(module)
        outside = set().union(*(external_imports(m) for m in project))
        assert not outside & CORE_FORBIDDEN, (module, sorted(outside & CORE_FORBIDDEN))
        assert project <= {"pools", *core_modules()}, (module, sorted(project))


def test_the_core_imports_no_django_at_run_time() -> None:
    """The same, as Python sees it: the core imported alone loads none of them."""
    imports = "; ".join(f"import {m}" for m in core_modules())
    forbidden = sorted(CORE_FORBIDDEN)
    check = (
        f"import sys; {imports}; "
        f"bad = sorted({{m.split('.')[0] for m in sys.modules}} & set({forbidden!r})); "
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def long_functions() -> Iterator[tuple[str, str, int]]:
    for name, path in project_modules().items():
        if ".migrations." in f".{name}.":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node.name, length


def test_no_function_in_pools_or_portal_is_over_60_lines() -> None:
    too_long = sorted(long_functions())
    assert too_long == [], "split by step: " + ", ".join(
        f"{where} {name} ({length} lines)" for where, name, length in too_long
    )


TOP_OF_POOLS = {"__init__.py", "apps.py", "models.py", "tasks.py", "urls.py"}


def test_the_top_of_pools_holds_only_the_entry_wiring() -> None:
    loose = {path.name for path in (ROOT / "pools").glob("*.py")}
    assert loose == TOP_OF_POOLS, "move into the concept's package: " + ", ".join(
        sorted(loose - TOP_OF_POOLS)
    )


# Sending a task to the broker: a task's own methods, and the Celery app's.
ENQUEUING = {"delay", "apply_async", "send_task", "signature", "s", "si", "chain", "group"}


def _task_names(tree: ast.AST) -> set[str]:
    """The local names that stand for pools.tasks or one of its tasks."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "pools":
            names |= {a.asname or a.name for a in node.names if a.name == "tasks"}
        elif isinstance(node, ast.ImportFrom) and node.module == "pools.tasks":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == "pools.tasks"}
    return names


def enqueues(source: str) -> list[int]:
    """The lines where `source` sends work to the broker itself."""
    tree = ast.parse(source)
    tasks = _task_names(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ENQUEUING:
            continue
        root = node.func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if node.func.attr == "send_task" or (isinstance(root, ast.Name) and root.id in tasks):
            found.append(node.lineno)
    return found


def test_only_tasks_py_enqueues_work() -> None:
    """Pages, the API and services call a function of pools.tasks; only that module knows
    which task runs, with which options (one place to change a queue or a retry)."""
    assert enqueues("from pools import tasks\ntasks.sync_inventory.delay()\n") == [2]
    assert enqueues("from pools.tasks import run_drill\nrun_drill.apply_async((1,))\n") == [2]
    assert enqueues("app.send_task('pools.tasks.x')\n") == [1]
    assert enqueues("RetryPolicy().delay(1, None)\n") == []
    offenders = {
        name: lines
        for name, path in project_modules().items()
        if name != "pools.tasks" and (lines := enqueues(path.read_text()))
    }
    assert offenders == {}
