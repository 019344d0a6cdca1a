"""Quantities read as apimachinery's ParseQuantity reads them, and printed canonically."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.core.fit.quantities import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    MAX_INT64,
    Quantity,
    QuantityError,
    format_quantity,
    milli_value,
    parse_quantity,
    whole_value,
)

F = Fraction


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("0", F(0), DECIMAL_SI),
        ("0Ki", F(0), BINARY_SI),
        ("0e-10", F(0), DECIMAL_EXPONENT),
        ("1Ki", F(1024), BINARY_SI),
        ("8Ki", F(8 * 1024), BINARY_SI),
        ("7Mi", F(7 * 2**20), BINARY_SI),
        ("6Gi", F(6 * 2**30), BINARY_SI),
        ("5Ti", F(5 * 2**40), BINARY_SI),
        ("4Pi", F(4 * 2**50), BINARY_SI),
        ("3Ei", F(3 * 2**60), BINARY_SI),
        ("5n", F(5, 10**9), DECIMAL_SI),
        ("4u", F(4, 10**6), DECIMAL_SI),
        ("3m", F(3, 1000), DECIMAL_SI),
        ("9", F(9), DECIMAL_SI),
        ("8k", F(8000), DECIMAL_SI),
        ("7M", F(7 * 10**6), DECIMAL_SI),
        ("6G", F(6 * 10**9), DECIMAL_SI),
        ("5T", F(5 * 10**12), DECIMAL_SI),
        ("2P", F(2 * 10**15), DECIMAL_SI),
        ("1E", F(10**18), DECIMAL_SI),
        ("1E-3", F(1, 1000), DECIMAL_EXPONENT),
        ("1e3", F(1000), DECIMAL_EXPONENT),
        ("1e+3", F(1000), DECIMAL_EXPONENT),
        ("1.5e2", F(150), DECIMAL_EXPONENT),
        ("1.5Ki", F(1536), BINARY_SI),
        ("0.5Ki", F(512), BINARY_SI),
        (".5Mi", F(2**19), BINARY_SI),
        ("100.035k", F(100035), DECIMAL_SI),
        ("0.001", F(1, 1000), DECIMAL_SI),
        ("1.5", F(3, 2), DECIMAL_SI),
        ("100m", F(1, 10), DECIMAL_SI),
        ("500Mi", F(500 * 2**20), BINARY_SI),
        ("-1", F(-1), DECIMAL_SI),
        ("+2", F(2), DECIMAL_SI),
        # The scanner's quirks, kept because the API server keeps them.
        ("1.", F(1), DECIMAL_SI),
        ("1.G", F(10**9), DECIMAL_SI),
        (".5", F(1, 2), DECIMAL_SI),
        (".", F(0), DECIMAL_SI),
        ("-", F(0), DECIMAL_SI),
        ("007", F(7), DECIMAL_SI),
        # Non-zero values round up, away from zero, to the nano.
        ("0.1n", F(1, 10**9), DECIMAL_SI),
        ("-0.1n", F(-1, 10**9), DECIMAL_SI),
        ("1.0000000001", F(1000000001, 10**9), DECIMAL_SI),
        ("1e-50", F(1, 10**9), DECIMAL_EXPONENT),
        # Binary values under 1 print as decimal ones; binary values are capped at 2^63-1.
        ("0.0001Ki", F(1024, 10**4), DECIMAL_SI),
        ("9Ei", F(MAX_INT64), BINARY_SI),
    ],
)
def test_parse(text: str, value: Fraction, fmt: str) -> None:
    assert parse_quantity(text) == Quantity(value, fmt)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "regular expression"),
        ("two", "regular expression"),
        ("1.1.M", "regular expression"),
        ("1+1.0M", "regular expression"),
        ("1e1.0", "regular expression"),
        ("1 Gi", "regular expression"),
        ("1e", "suffix"),
        ("1e+", "suffix"),
        ("1i", "suffix"),
        ("1K", "suffix"),  # kilo is a lower-case k
        ("1Mi3", "suffix"),
        ("1ee3", "suffix"),
        ("1e100", "larger than"),
        ("10E", "larger than"),
    ],
)
def test_not_a_quantity(text: str, why: str) -> None:
    with pytest.raises(QuantityError, match=why):
        parse_quantity(text)


def test_yaml_numbers_are_read_from_their_text() -> None:
    assert parse_quantity(2) == Quantity(F(2))
    assert parse_quantity(0.5) == Quantity(F(1, 2))
    assert parse_quantity(1e18).value == F(10**18)  # repr: "1e+18"
    assert parse_quantity(" 2Gi ") == Quantity(F(2 * 2**30), BINARY_SI)  # JSON trims blanks


@pytest.mark.parametrize("raw", [True, None, [1], {"a": 1}, float("inf"), float("nan")])
def test_other_types_are_refused(raw: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


@pytest.mark.parametrize(
    ("text", "whole", "milli"),
    [
        ("1", 1, 1000),
        ("100m", 1, 100),
        ("1.5", 2, 1500),
        ("0.1m", 1, 1),
        ("1n", 1, 1),
        ("-1.5", -2, -1500),
        ("2Gi", 2 * 2**30, 2 * 2**30 * 1000),
    ],
)
def test_value_and_milli_value_round_up_away_from_zero(text: str, whole: int, milli: int) -> None:
    value = parse_quantity(text).value
    assert (whole_value(value), milli_value(value)) == (whole, milli)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("1000", "1k"),
        ("1536", "1536"),
        ("0.5Ki", "512"),
        ("1024Mi", "1Gi"),
        ("1025Mi", "1025Mi"),
        ("1.0001Ki", "1024102400u"),
        ("1e3", "1e3"),
        ("12e6", "12e6"),
        ("0", "0"),
        ("-100m", "-100m"),
        ("1E", "1E"),
    ],
)
def test_canonical_form(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


SUFFIXES = {"n": F(1, 10**9), "u": F(1, 10**6), "m": F(1, 1000), "": F(1), "k": F(1000)}
SUFFIXES |= {"M": F(10**6), "G": F(10**9), "Ki": F(1024), "Mi": F(2**20), "Gi": F(2**30)}


@given(st.integers(0, 10**6), st.sampled_from(sorted(SUFFIXES)))
def test_whole_numbers_with_any_suffix(number: int, suffix: str) -> None:
    assert parse_quantity(f"{number}{suffix}").value == number * SUFFIXES[suffix]


@given(st.integers(0, 10**9), st.integers(0, 10**12), st.sampled_from(sorted(SUFFIXES)))
def test_decimals_are_exact_then_rounded_up_to_the_nano(
    whole: int, digits: int, suffix: str
) -> None:
    text = f"{whole}.{digits}{suffix}"
    exact = (whole + F(digits, 10 ** len(str(digits)))) * SUFFIXES[suffix]
    value = parse_quantity(text).value
    assert value >= exact and value - exact < F(1, 10**9)
    assert (value * 10**9).denominator == 1


@given(
    st.integers(-(10**9), 10**9),
    st.sampled_from(sorted(SUFFIXES)),
)
def test_printing_then_reading_gives_the_same_quantity(number: int, suffix: str) -> None:
    quantity = parse_quantity(f"{number}{suffix}")
    assert parse_quantity(str(quantity)).value == quantity.value


@given(st.integers(1, 10**12), st.integers(-9, 6))
def test_canonical_decimal_uses_the_largest_exponent_with_a_whole_mantissa(
    mantissa: int, exponent: int
) -> None:
    value = F(mantissa) * F(10) ** exponent
    text = format_quantity(value)
    assert parse_quantity(text).value == value
    assert not text.rstrip("numkMGTPE").endswith("000")
