"""docs/configuration.md lists every environment variable the code reads, and nothing it does
not read; the README's short table names only variables documented there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
SOURCES = ["portal", "pools", "scripts"]
# Set for the child processes, never read as configuration.
NOT_CONFIGURATION = {"DJANGO_SETTINGS_MODULE", "PYTHONUNBUFFERED"}


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def names_read(tree: ast.AST) -> set[str]:
    """env_*("NAME", ...) (env_secret also reads NAME_FILE), os.environ.get("NAME"),
    os.environ["NAME"] and os.getenv("NAME")."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func, first = node.func, _string(node.args[0])
            if first is None:
                continue
            if isinstance(func, ast.Name) and func.id.startswith("env_"):
                found.add(first)
                if func.id == "env_secret":
                    found.add(f"{first}_FILE")
            elif isinstance(func, ast.Attribute) and (
                (func.attr == "get" and _is_os_environ(func.value))
                or (func.attr == "getenv" and isinstance(func.value, ast.Name))
            ):
                found.add(first)
        elif (
            isinstance(node, ast.Subscript)
            and _is_os_environ(node.value)
            and isinstance(node.ctx, ast.Load)
            and (name := _string(node.slice))
        ):
            found.add(name)
    return found - NOT_CONFIGURATION


def code_variables() -> set[str]:
    names: set[str] = set()
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            names |= names_read(ast.parse(path.read_text(), filename=str(path)))
    return names


def table_variables(text: str) -> set[str]:
    """The variables named in the first cell of each table row; the other cells only
    mention them."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    return names


def documented_variables() -> set[str]:
    return table_variables(CONFIGURATION.read_text())


def readme_variables() -> list[str]:
    """The first cell of each row of the README's short table, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    return [
        line.split("|")[1].strip().strip("`")
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_the_collector_finds_what_it_should() -> None:
    tree = ast.parse(
        'env_int("A", 1)\nenv_secret("B")\nos.environ.get("C")\nos.environ["D"]\n'
        'os.getenv("E")\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "x")\n'
        'env_str(\n    "F",\n    "multi-line",\n)\n'
    )
    assert names_read(tree) == {"A", "B", "B_FILE", "C", "D", "E", "F"}


def test_the_table_reader_takes_the_first_cell_only() -> None:
    text = (
        "| variable | meaning | default |\n| --- | --- | --- |\n"
        "| `A_B`, `C` / `C_FILE` | like `D` | `E` |\nprose naming `F`\n"
    )
    assert table_variables(text) == {"A_B", "C", "C_FILE"}


def test_every_variable_read_is_documented() -> None:
    code = code_variables()
    assert len(code) > 40  # the collector found the settings
    assert sorted(code - documented_variables()) == []


def test_every_documented_variable_is_read() -> None:
    assert sorted(documented_variables() - code_variables()) == []


def test_the_readme_shows_ten_documented_variables_and_links_the_rest() -> None:
    shown = readme_variables()
    assert len(shown) == len(set(shown)) == 10
    assert sorted(set(shown) - documented_variables()) == []
    section = (ROOT / "README.md").read_text().split("\n## Configuration", 1)[1]
    assert "](docs/configuration.md)" in section
