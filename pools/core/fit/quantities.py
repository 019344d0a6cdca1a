"""Kubernetes resource quantities, read exactly as apimachinery reads them (pure).

`ParseQuantity` (k8s.io/apimachinery/pkg/api/resource/quantity.go) accepts
`<sign><digits>.<digits><suffix>` where the suffix is a decimal SI one (`n u m "" k M G T P E`),
a binary SI one (`Ki Mi Gi Ti Pi Ei`) or an exponent (`e3`, `E-2`). Its scanner has quirks we
keep, because the API server keeps them: `1.` and `.5` are numbers, a lone sign or `.` reads as
zero, leading and trailing blanks are trimmed when the value arrives in JSON, and a YAML number
(`nvidia.com/gpu: 2`, `cpu: 0.5`) is read from its text. A non-zero value is rounded *up* to the
nano, so `0.1n` is `1n`; binary values are capped at 2^63-1. `Value()` and `MilliValue()` round
up, away from zero — a request of `0.1` CPU is 100m and `1.5` GPUs would be 2 (the API refuses
fractional extended resources before that matters).

Values are exact `Fraction`s; nothing here uses floating point. We refuse decimal values past
2^63-1 instead of wrapping as Go's int64 conversion would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

MAX_INT64 = 2**63 - 1
_NANO = 10**9
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
# Past these exponents every non-zero value is either above 2^63 or rounds up to 1n.
_MAX_EXPONENT = 40
FORMAT_REGEX = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; the message says why, in apimachinery's words."""


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: str = DECIMAL_SI

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


def parse_quantity(raw: object) -> Quantity:
    """A quantity from manifest data: a string, or a YAML/JSON number (read from its text)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise QuantityError(f"must be a string or a number, not {_kind(raw)}")
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"{raw!r} is not a number")
        text = repr(raw)
    else:
        text = str(raw)
    return _parse_text(text.strip())


def _kind(raw: object) -> str:
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, dict):
        return "a mapping"
    if isinstance(raw, list):
        return "a list"
    return type(raw).__name__


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    if not text:
        raise QuantityError(f"quantities must match the regular expression '{FORMAT_REGEX}'")
    if text == "0":
        return Quantity(Fraction(0), DECIMAL_SI)
    positive, number, suffix = _scan(text)
    base, exponent, fmt = _interpret_suffix(suffix)
    amount = number if positive else -number
    if amount == 0:
        return Quantity(Fraction(0), fmt)
    return _scaled(amount, base, exponent, fmt)


def _scan(text: str) -> tuple[bool, Fraction, str]:
    """apimachinery's parseQuantityString: sign, digits, optional fraction, then the suffix."""
    positive, pos, end = True, 0, len(text)
    if text[0] in "+-":
        positive, pos = text[0] == "+", 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(f"quantities must match the regular expression '{FORMAT_REGEX}'")
    number = Fraction(int(whole or "0")) + (
        Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0
    )
    return positive, number, text[suffix_start:]


def _interpret_suffix(suffix: str) -> tuple[int, int, str]:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    exponent = suffix[1:]
    digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
    if len(suffix) > 1 and suffix[0] in "eE" and digits and set(digits) <= _DIGITS:
        return 10, int(exponent), DECIMAL_EXPONENT
    raise QuantityError("unable to parse quantity's suffix")


def _scaled(amount: Fraction, base: int, exponent: int, fmt: str) -> Quantity:
    if base == 10 and exponent > _MAX_EXPONENT:
        raise QuantityError("is larger than Kubernetes can count (2^63-1)")
    if base == 10 and exponent < -_MAX_EXPONENT:
        value = Fraction(1 if amount > 0 else -1, _NANO)
    else:
        value = amount * (Fraction(base) ** exponent)
        # Round non-zero values up (away from zero) to the nano: asking for a little of a
        # resource gets some of it.
        nanos = math.ceil(abs(value) * _NANO)
        value = Fraction(nanos if value > 0 else -nanos, _NANO)
    if fmt == BINARY_SI:
        value = max(min(value, Fraction(MAX_INT64)), Fraction(-MAX_INT64))
        if 0 < abs(value) < 1:
            fmt = DECIMAL_SI
    elif abs(value) > MAX_INT64:
        raise QuantityError("is larger than Kubernetes can count (2^63-1)")
    return Quantity(value, fmt)


def whole_value(value: Fraction) -> int:
    """Quantity.Value(): rounded up to an integer, away from zero."""
    return _round_away(value)


def milli_value(value: Fraction) -> int:
    """Quantity.MilliValue(): the value in thousandths, rounded up away from zero."""
    return _round_away(value * 1000)


def _round_away(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else -math.ceil(-value)


def format_quantity(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """The canonical text the API server would print for the value (`1500m`, `1536Mi`, `1k`)."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        return _binary_text(int(value))
    mantissa, exponent = _canonical_decimal(value)
    if fmt == DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    suffix = _SUFFIX_BY_EXPONENT.get(exponent)
    if suffix is None:
        return f"{mantissa}e{exponent}"
    return f"{mantissa}{suffix}"


_SUFFIX_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {power // 10: suffix for suffix, power in _BINARY_SUFFIXES.items()}


def _binary_text(number: int) -> str:
    power = 0
    while power < 6 and number % 1024 == 0:
        number //= 1024
        power += 1
    return f"{number}{_BINARY_BY_POWER.get(power, '')}"


def _canonical_decimal(value: Fraction) -> tuple[int, int]:
    """Mantissa and an exponent that is a multiple of 3, as large as keeps the mantissa whole."""
    # Parsed values are whole numbers of nanos, so this is exact.
    mantissa, exponent = int(value * _NANO), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent
