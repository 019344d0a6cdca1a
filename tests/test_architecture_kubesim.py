"""The shape of kubesim/ and bench/, checked from their source: no import cycle among
kubesim's modules, no function over 60 lines.

Every import statement counts, wherever it stands: inside a function (it only hides a
cycle until the function runs) and under `if TYPE_CHECKING:` too. kubesim's cluster and
its controllers once named each other in type hints only; that still tied five modules
into one knot that had to be read and changed together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60


def package_modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package at `package` (a directory)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(path: Path, name: str) -> Iterator[str]:
    """Every dotted name the module `name` imports, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            # `from kubesim import cluster` imports the module kubesim.cluster.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_names(path, name):
            parts = imported.split(".")
            # Importing kubesim.a.b runs kubesim/a/__init__.py first: the packages on the way
            # are imported too, except those the importer sits in (already running).
            for depth in range(1, len(parts) + 1):
                prefix = ".".join(parts[:depth])
                if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                    targets.add(prefix)
        graph[name] = targets
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others (itself if on a cycle)."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, directly or not (the strongly
    connected components with more than one module), each sorted."""
    reach = {node: reachable(graph, node) for node in graph}
    found = {
        tuple(sorted(other for other in reach[node] if node in reach.get(other, ())))
        for node in graph
        if node in reach[node]
    }
    return sorted(list(group) for group in found)


def long_functions(paths: Iterable[Path]) -> list[str]:
    """`file:line name (N lines)` for every function or method over the limit, nested ones
    included."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
    return found


def write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "pkg"


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": (
                "import os\n"
                "import pkg.sub.c\n"
                "from . import b\n"
                "def later():\n"
                "    from pkg.d import thing\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.e import Type\n"
            ),
            "pkg/b.py": "",
            "pkg/d.py": "",
            "pkg/e.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from pkg.sub import f\nfrom ..b import x\n",
            "pkg/sub/f.py": "",
        },
    )
    graph = import_graph(package_modules(package))
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.c", "pkg.b", "pkg.d", "pkg.e"}
    # A module's own packages are no edge: they are running when it is imported.
    assert graph["pkg.sub.c"] == {"pkg.sub.f", "pkg.b"}


def test_a_cycle_would_be_found(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}) == [
        ["a", "b", "c"],
        ["e", "f"],
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) == []
    # A cycle made of a type-only import and an import inside a function is a cycle.
    package = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "if TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "def later():\n    from pkg import a\n",
            "pkg/c.py": "from pkg import a\n",
        },
    )
    assert cycles(import_graph(package_modules(package))) == [["pkg.a", "pkg.b"]]


def test_no_import_cycle_in_kubesim() -> None:
    graph = import_graph(package_modules(ROOT / "kubesim"))
    assert len(graph) > 40
    # The cluster builds its controllers: it imports them, and they do not import it.
    assert {"kubesim.lifecycle", "kubesim.disruption"} <= graph["kubesim.cluster"]
    found = cycles(graph)
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_long_function_would_be_found(tmp_path: Path) -> None:
    source = tmp_path / "long.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    source.write_text(
        f"def fits():\n{body}\n"  # the limit exactly
        "class Holder:\n"
        f"    def method(self):\n{body.replace('    ', '        ')}        y = 0\n"
    )
    assert long_functions([source]) == [f"{source}:{MAX_FUNCTION_LINES + 3} method (61 lines)"]


def test_no_function_in_kubesim_or_bench_is_over_60_lines() -> None:
    paths = sorted([*(ROOT / "kubesim").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    assert len(paths) > 50
    too_long = long_functions(paths)
    assert too_long == [], "split by step: " + ", ".join(too_long)
