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


def imported_names(path: Path, name: str) -> Iterator[str]:
    """Every module name `path` imports at run time, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_only(tree)
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
            # `from pools import workflow` imports the module pools.workflow.
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
def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in project_modules().items():
        targets = {project_target(i) for i in imported_names(path, name)}
        graph[name] = {t for t in targets if t is not None and t != name}
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
        "from pools import workflow\n"
        "from . import audit\n"
        "def later():\n"
        "    from pools.tasks import execute_move\n"
        "if TYPE_CHECKING:\n"
        "    from pools.selectors import overview\n"
    )
    found = {project_target(i) for i in imported_names(source, "pools.example")}
    assert {"pools.models", "pools.workflow", "pools.audit", "pools.tasks"} <= found
    assert "pools.selectors" not in found
    assert len(import_graph()) > 40


def test_no_import_cycle_in_pools_and_portal() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_cycle_would_be_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The layers of docs/architecture.md, inside out: a module imports only its own layer and
# those inside it. Whatever is not listed is an entry point (pages, API, commands, tasks,
# the Django project).
LAYERS = {
    "core": ("pools", "pools.core"),
    # The portal's own instruments and log context: the edges call them with one line.
    "edges": (
        "pools.kube",
        "pools.metrics",
        "pools.guarded_cache",
        "pools.models",
        "pools.observability",
        "pools.log_context",
        # The liveness file a process renews (the standard library only).
        "pools.heartbeat",
    ),
    "domain": (
        "pools.errors",
        "pools.events",
        "pools.roles",
        "pools.audit",
        "pools.inventory",
        "pools.services",
        "pools.workflow",
        "pools.execution",
        "pools.node_outcome",
        "pools.draining",
        "pools.break_glass",
        "pools.move_records",
        "pools.selectors",
        "pools.filters",
        "pools.tokens",
        "pools.idempotency",
    ),
}
DEPTH = {"core": 0, "edges": 1, "domain": 2, "entry": 3}


def layer(module: str) -> str:
    if module == "pools":
        return "core"  # the package itself: empty
    for name, prefixes in LAYERS.items():
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "pools"):
            return name
    return "entry"


def test_every_layer_imports_only_inwards() -> None:
    outward = sorted(
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in import_graph().items()
        for target in targets
        if DEPTH[layer(target)] > DEPTH[layer(module)]
    )
    assert outward == []
    assert layer("pools.workflow.rules") == "domain" and layer("pools.api.views") == "entry"


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
