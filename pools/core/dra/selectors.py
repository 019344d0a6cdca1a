"""CEL selectors of DeviceClasses and claim requests, evaluated against one device (pure).

A selector is a CEL expression over one variable, `device`, shaped as the Kubernetes DRA
environment shapes it:

    device.driver                                   "gpu.nvidia.com"
    device.attributes["gpu.nvidia.com"].productName  string, int, bool or version
    device.capacity["gpu.nvidia.com"].memory         quantity
    device.allowMultipleAllocations                  bool

The expressions run in a real CEL engine (`common-expression-language`, Rust); this module
only adds Kubernetes' two value types the engine does not know. A quantity (`quantity("40Gi")`,
every capacity) and a version (`semver("1.2.3")`, every version attribute) are carried as
one-key maps, so `==` between two of them compares their normalised values, and their
methods (`compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`,
`major`, `minor`, `patch`) are functions registered on the engine, which CEL's receiver
syntax calls with the value first.

Every device of one model looks the same to most selectors but for its UUID and index: the
result is kept per expression and per the values the expression can read (the attributes
and capacities it names), so a check over 15,000 nodes evaluates each distinct device once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pools.core.fit.quantities import QuantityError, parse_quantity

QUANTITY = "k8s.io/quantity"
VERSION = "k8s.io/semver"
_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_STRING = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Macros and functions that read a whole map: with them any key may be read.
_WHOLE_MAP = re.compile(r"\b(exists|exists_one|all|map|filter|size)\s*\(|\bin\b")


class SelectorError(ValueError):
    """A selector that does not compile, or fails on a device: the message says which."""


def quantity_value(raw: object) -> dict[str, str]:
    """A quantity as CEL carries it; the same text gives the same (shared, never changed)
    map: the devices of a cluster repeat a few capacities thousands of times."""
    if isinstance(raw, str):
        return _quantity_text(raw)
    return _quantity(raw)


@functools.lru_cache(maxsize=4096)
def _quantity_text(raw: str) -> dict[str, str]:
    return _quantity(raw)


def _quantity(raw: object) -> dict[str, str]:
    try:
        value = parse_quantity(raw).value
    except QuantityError as error:
        raise SelectorError(f"quantity({raw!r}): {error}") from None
    return {QUANTITY: f"{value.numerator}/{value.denominator}"}


def version_value(raw: str) -> dict[str, str]:
    if _SEMVER.match(raw) is None:
        raise SelectorError(f"semver({raw!r}): not a semantic version (MAJOR.MINOR.PATCH)")
    return {VERSION: raw}


def _fraction(value: Mapping[str, str]) -> Fraction:
    return Fraction(value[QUANTITY])


def _version_key(raw: str) -> tuple[Any, ...]:
    match = _SEMVER.match(raw)
    if match is None:
        return (0, 0, 0, 1, ())
    major, minor, patch, pre = match.groups()
    # A pre-release sorts before its release (SemVer 2.0, rule 11), identifiers compared
    # numerically when numeric.
    prerelease = tuple(
        (0, int(p), "") if p.isdigit() else (1, 0, p) for p in (pre or "").split(".")
    )
    return (int(major), int(minor), int(patch), 0 if pre else 1, prerelease if pre else ())


def _compare(left: Any, right: Any) -> int:
    if isinstance(left, Mapping) and QUANTITY in left and isinstance(right, Mapping):
        a, b = _fraction(left), _fraction(right)
    elif isinstance(left, Mapping) and VERSION in left and isinstance(right, Mapping):
        a, b = _version_key(left[VERSION]), _version_key(right[VERSION])  # type: ignore[assignment]
    else:
        raise SelectorError(f"compareTo: no overload for {left!r} and {right!r}")
    return (a > b) - (a < b)


def _as_integer(value: Mapping[str, str]) -> int:
    amount = _fraction(value)
    if amount.denominator != 1:
        raise SelectorError(f"asInteger: {amount} is not a whole number")
    return int(amount)


def _part(index: int):  # type: ignore[no-untyped-def]
    def read(value: Mapping[str, str]) -> int:
        match = _SEMVER.match(value[VERSION])
        return int(match.group(index + 1)) if match else 0

    return read


_FUNCTIONS = {
    "quantity": quantity_value,
    "semver": version_value,
    "isQuantity": lambda raw: _parses(quantity_value, raw),
    "isSemver": lambda raw: _parses(version_value, raw),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda value: float(_fraction(value)),
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
}


def _parses(read: Any, raw: object) -> bool:
    try:
        read(raw)
    except SelectorError:
        return False
    return True


@dataclass(frozen=True)
class Selector:
    """One compiled expression, and what of a device it can read."""

    expression: str
    program: Any
    names: frozenset[str] | None  # attribute and capacity names it may read; None: all
    domains: tuple[str, ...]  # quoted names that may be a domain: absent ones read as {}


@functools.cache
def _cel() -> Any:
    """The CEL engine, imported at its first use: the package's __init__ loads its command
    line (typer, rich, prompt_toolkit), about 0.3 s of every process's start, and most of
    the portal's processes (web workers, beat, commands) never evaluate a selector. Kept
    after that: selectors are evaluated once a device, 120,000 devices in a large fit."""
    import cel

    return cel


def compile_selector(expression: str) -> Selector:
    try:
        program = _cel().compile(expression)
    except ValueError as error:
        raise SelectorError(f"CEL compile error: {_first_line(error)}") from None
    literals = [a or b for a, b in _STRING.findall(expression)]
    names: frozenset[str] | None = None
    if _WHOLE_MAP.search(expression) is None:
        names = frozenset(_WORD.findall(_STRING.sub(" ", expression))) | frozenset(literals)
    return Selector(expression, program, names, tuple(x for x in literals if "." in x))


def _first_line(error: Exception) -> str:
    text = str(error)
    return text.split("\n", 1)[0]


class SelectorCache:
    """Compiled selectors and their results, for one check."""

    def __init__(self) -> None:
        self._compiled: dict[str, Selector | SelectorError] = {}
        self._results: dict[tuple[str, Any], bool | SelectorError] = {}

    def compiled(self, expression: str) -> Selector:
        found = self._compiled.get(expression)
        if found is None:
            try:
                found = compile_selector(expression)
            except SelectorError as error:
                found = error
            self._compiled[expression] = found
        if isinstance(found, SelectorError):
            raise found
        return found

    def matches(self, expression: str, device: Any) -> bool:
        """Whether `device` (a `pools.core.dra.inventory.Device`) satisfies the expression;
        SelectorError when it does not compile or fails on this device."""
        selector = self.compiled(expression)
        key = (expression, device.signature(selector.names))
        result = self._results.get(key)
        if result is None:
            result = self._results[key] = _evaluate(selector, device)
        if isinstance(result, SelectorError):
            raise result
        return result


def _evaluate(selector: Selector, device: Any) -> bool | SelectorError:
    context = _cel().Context()
    for name, function in _FUNCTIONS.items():
        context.add_function(name, function)
    context.add_variable("device", device.cel_value(selector.domains))
    try:
        result = selector.program.execute(context)
    except SelectorError as error:
        return error
    except (KeyError, ValueError, TypeError, RuntimeError) as error:
        message = str(error).strip("'\"")
        if isinstance(error, KeyError):
            message = f"no such key: {message}"
        return SelectorError(f"CEL runtime error: {_first_line(Exception(message))}")
    if not isinstance(result, bool):
        return SelectorError(f"CEL result must be a bool, got {type(result).__name__}")
    return result
