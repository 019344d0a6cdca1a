"""Typed reading of decoded manifest data, each problem recorded with its field path (pure).

Paths are written the way the API server writes them (`field.Path`): `.name` for a struct
field, `[3]` for a list index, `[nvidia.com/gpu]` for a map key. A reader never raises: it
records the problem, returns an empty value of the right type and lets the caller go on, so
one pass reports every problem of a document.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pools.core.fit.findings import FieldProblem

MAX_PROBLEMS = 50
MAX_INT32 = 2**31 - 1  # replicas and the other counts are int32 in the API


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index(path: str, position: int) -> str:
    return f"{path}[{position}]"


def key(path: str, name: str) -> str:
    return f"{path}[{name}]"


def describe(value: object) -> str:
    """How a wrong value is named in a message: its type, as a YAML author would say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float):
        return f"a number ({value})"
    return f"a {type(value).__name__}"


def quoted(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


class FieldReader:
    def __init__(self) -> None:
        self.problems: list[FieldProblem] = []

    def problem(self, path: str, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(FieldProblem(path, message))

    def mapping(self, value: object, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping, not {describe(value)}")
            return {}
        return value

    def sequence(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(path, f"must be a list, not {describe(value)}")
            return []
        return value

    def string(self, value: object, path: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            hint = f' (write it in quotes: "{quoted(value)}")' if _scalar(value) else ""
            self.problem(path, f"must be a string, not {describe(value)}{hint}")
            return ""
        return value

    def integer(
        self, value: object, path: str, default: int, *, minimum: int = 0, maximum: int = MAX_INT32
    ) -> int:
        """An int32 field (replicas, parallelism, minAvailable ...), as the API decodes it."""
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(path, f"must be an integer, not {describe(value)}")
            return default
        if value < minimum:
            self.problem(
                path, f"Invalid value: {value}: must be greater than or equal to {minimum}"
            )
            return default
        if value > maximum:
            self.problem(
                path, f"Invalid value: {value}: must be at most {maximum} (a 32-bit integer)"
            )
            return default
        return value

    def boolean(self, value: object, path: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            self.problem(path, f"must be a boolean, not {describe(value)}")
            return False
        return value

    def string_map(self, value: object, path: str) -> dict[str, str]:
        result: dict[str, str] = {}
        for name, item in self.mapping(value, path).items():
            text = self.string(item, key(path, str(name)))
            if isinstance(item, str):
                result[str(name)] = text
        return result

    def strings(self, value: object, path: str) -> list[str]:
        return [
            self.string(item, index(path, i)) for i, item in enumerate(self.sequence(value, path))
        ]

    def unknown_fields(self, value: dict[str, Any], path: str, allowed: Iterable[str]) -> list[str]:
        """Fields the API does not know: strict decoding refuses them, and we would miss them."""
        unknown = [name for name in value if name not in allowed]
        return [child(path, str(name)) for name in unknown]


def _scalar(value: object) -> bool:
    return isinstance(value, bool | int | float)
