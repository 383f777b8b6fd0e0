"""Tests for pyscheduler.api.quantity (Kubernetes resource quantities)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pyscheduler.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    FORMAT_ERROR,
    NUMERIC_ERROR,
    SUFFIX_ERROR,
    QuantityError,
    canonical_quantity,
    format_quantity,
    milli_value,
    parse_quantity,
    parse_quantity_with_format,
    value,
)

F = Fraction


def test_format_error_text_is_kubernetes() -> None:
    assert FORMAT_ERROR == (
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


@pytest.mark.parametrize(
    ("text", "expected", "fmt"),
    [
        pytest.param("1", F(1), DECIMAL_SI, id="integer"),
        pytest.param("0", F(0), DECIMAL_SI, id="zero"),
        pytest.param("007", F(7), DECIMAL_SI, id="leading-zeros"),
        pytest.param("1.5", F(3, 2), DECIMAL_SI, id="decimal"),
        pytest.param(".5", F(1, 2), DECIMAL_SI, id="leading-dot"),
        pytest.param("5.", F(5), DECIMAL_SI, id="trailing-dot"),
        pytest.param("+1", F(1), DECIMAL_SI, id="plus-sign"),
        pytest.param("-1", F(-1), DECIMAL_SI, id="minus-sign"),
        pytest.param("-0.5", F(-1, 2), DECIMAL_SI, id="negative-fraction"),
        pytest.param("1n", F(1, 10**9), DECIMAL_SI, id="nano"),
        pytest.param("1u", F(1, 10**6), DECIMAL_SI, id="micro"),
        pytest.param("100m", F(1, 10), DECIMAL_SI, id="milli"),
        pytest.param("2k", F(2000), DECIMAL_SI, id="kilo"),
        pytest.param("3M", F(3 * 10**6), DECIMAL_SI, id="mega"),
        pytest.param("1G", F(10**9), DECIMAL_SI, id="giga"),
        pytest.param("1T", F(10**12), DECIMAL_SI, id="tera"),
        pytest.param("1P", F(10**15), DECIMAL_SI, id="peta"),
        pytest.param("1E", F(10**18), DECIMAL_SI, id="exa"),
        pytest.param("1Ki", F(1024), BINARY_SI, id="kibi"),
        pytest.param("128Mi", F(128 * 2**20), BINARY_SI, id="mebi"),
        pytest.param("1.5Gi", F(3 * 2**29), BINARY_SI, id="fractional-gibi"),
        pytest.param("1Ti", F(2**40), BINARY_SI, id="tebi"),
        pytest.param("1Pi", F(2**50), BINARY_SI, id="pebi"),
        pytest.param("1Ei", F(2**60), BINARY_SI, id="exbi"),
        pytest.param("9Ei", F(2**63 - 1), BINARY_SI, id="binary-capped-at-int64"),
        pytest.param("1e3", F(1000), DECIMAL_EXPONENT, id="exponent"),
        pytest.param("1E3", F(1000), DECIMAL_EXPONENT, id="upper-exponent"),
        pytest.param("1e+3", F(1000), DECIMAL_EXPONENT, id="signed-exponent"),
        pytest.param("1.5e-3", F(3, 2000), DECIMAL_EXPONENT, id="negative-exponent"),
        pytest.param("0.5n", F(1, 10**9), DECIMAL_SI, id="rounds-up-to-nano"),
        pytest.param("-0.5n", F(-1, 10**9), DECIMAL_SI, id="rounds-away-from-zero"),
        pytest.param("1e-20", F(1, 10**9), DECIMAL_EXPONENT, id="tiny-rounds-up"),
        pytest.param("1.0000000001", F(1000000001, 10**9), DECIMAL_SI, id="sub-nano-digits"),
        pytest.param(" 2 ", F(2), DECIMAL_SI, id="surrounding-space"),
        pytest.param("12345678901234567890", F(12345678901234567890), DECIMAL_SI, id="beyond-int64"),
        pytest.param(".", F(0), DECIMAL_SI, id="lone-dot-is-zero"),
        pytest.param("k", F(0), DECIMAL_SI, id="suffix-only-is-zero"),
    ],
)
def test_parse(text: str, expected: Fraction, fmt: str) -> None:
    assert parse_quantity(text) == expected
    assert parse_quantity_with_format(text) == (expected, fmt)


@pytest.mark.parametrize(
    ("raw", "expected", "fmt"),
    [
        pytest.param(2, F(2), DECIMAL_SI, id="int"),
        pytest.param(-3, F(-3), DECIMAL_SI, id="negative-int"),
        pytest.param(0.25, F(1, 4), DECIMAL_SI, id="float"),
        pytest.param(1e16, F(10**16), DECIMAL_EXPONENT, id="float-with-exponent"),
    ],
)
def test_parse_json_numbers(raw: int | float, expected: Fraction, fmt: str) -> None:
    assert parse_quantity_with_format(raw) == (expected, fmt)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", FORMAT_ERROR, id="empty"),
        pytest.param("abc", FORMAT_ERROR, id="letters"),
        pytest.param("1.2.3", FORMAT_ERROR, id="two-dots"),
        pytest.param("1Kb", FORMAT_ERROR, id="unknown-suffix-char"),
        pytest.param("1 k", FORMAT_ERROR, id="inner-space"),
        pytest.param("0x10", FORMAT_ERROR, id="hex"),
        pytest.param("1e3.5", FORMAT_ERROR, id="fractional-exponent"),
        pytest.param("--1", SUFFIX_ERROR, id="double-sign-scans-as-suffix"),
        pytest.param("1kk", SUFFIX_ERROR, id="doubled-suffix"),
        pytest.param("1K", SUFFIX_ERROR, id="upper-kilo"),
        pytest.param("1e", SUFFIX_ERROR, id="bare-e"),
        pytest.param("1e+", SUFFIX_ERROR, id="exponent-without-digits"),
        pytest.param("1ee3", SUFFIX_ERROR, id="double-e"),
        pytest.param("1Mi3", SUFFIX_ERROR, id="digits-after-binary-suffix"),
        pytest.param("1e99999999999999999999", SUFFIX_ERROR, id="exponent-beyond-int64"),
        pytest.param("1e20000", NUMERIC_ERROR, id="exponent-too-large"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(True, id="bool"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="inf"),
        pytest.param(None, id="none"),
    ],
)
def test_parse_rejects_non_quantities(raw: object) -> None:
    with pytest.raises(QuantityError, match="quantities must match"):
        parse_quantity(raw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "milli", "whole"),
    [
        pytest.param("100m", 100, 1, id="100m"),
        pytest.param("1", 1000, 1, id="one"),
        pytest.param("1.5", 1500, 2, id="one-and-a-half"),
        pytest.param("0.1m", 1, 1, id="sub-milli-rounds-up"),
        pytest.param("1n", 1, 1, id="nano"),
        pytest.param("0", 0, 0, id="zero"),
        pytest.param("-1.5", -1500, -2, id="negative-rounds-away-from-zero"),
        pytest.param("128Mi", 128 * 2**20 * 1000, 128 * 2**20, id="memory"),
        pytest.param("1e3", 1_000_000, 1000, id="exponent"),
        pytest.param(2, 2000, 2, id="int"),
        pytest.param(F(1, 3), 334, 1, id="fraction"),
    ],
)
def test_milli_value_and_value(raw: str | int | Fraction, milli: int, whole: int) -> None:
    assert milli_value(raw) == milli
    assert value(raw) == whole
    if not isinstance(raw, Fraction):
        assert milli_value(parse_quantity(raw)) == milli


@pytest.mark.parametrize(
    ("amount", "binary", "exponent", "expected"),
    [
        pytest.param(F(0), False, False, "0", id="zero"),
        pytest.param(F(0), True, False, "0", id="zero-binary"),
        pytest.param(F(1, 10), False, False, "100m", id="tenth"),
        pytest.param(F(3, 2), False, False, "1500m", id="one-and-a-half"),
        pytest.param(F(1500), False, False, "1500", id="1500"),
        pytest.param(F(1000), False, False, "1k", id="1000"),
        pytest.param(F(1500000), False, False, "1500k", id="1500000"),
        pytest.param(F(10**18), False, False, "1E", id="exa"),
        pytest.param(F(10**21), False, False, "1000E", id="beyond-exa"),
        pytest.param(F(1, 10**9), False, False, "1n", id="nano"),
        pytest.param(F(-1, 4), False, False, "-250m", id="negative"),
        pytest.param(F(2**30), True, False, "1Gi", id="gibi"),
        pytest.param(F(2**30), False, False, "1073741824", id="gibi-as-decimal"),
        pytest.param(F(1536), True, False, "1536", id="binary-not-divisible"),
        pytest.param(F(1536 * 1024), True, False, "1536Ki", id="binary-kibi"),
        pytest.param(F(512), True, False, "512", id="binary-small"),
        pytest.param(F(1, 2), True, False, "500m", id="binary-fraction-falls-back"),
        pytest.param(F(-(2**20)), True, False, "-1Mi", id="binary-negative"),
        pytest.param(F(1000), False, True, "1e3", id="exponent"),
        pytest.param(F(1500), False, True, "1500", id="exponent-not-needed"),
        pytest.param(F(3, 2000), False, True, "1500e-6", id="exponent-negative"),
        pytest.param(F(1, 3 * 10**9), False, False, "1n", id="rounds-up-to-nano"),
    ],
)
def test_format_quantity(amount: Fraction, binary: bool, exponent: bool, expected: str) -> None:
    assert format_quantity(amount, binary, exponent=exponent) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1000m", "1", id="milli-to-unit"),
        pytest.param("0.1", "100m", id="decimal-to-milli"),
        pytest.param("1024Mi", "1Gi", id="binary-promoted"),
        pytest.param("1.5Gi", "1536Mi", id="binary-fraction"),
        pytest.param("1.5Ki", "1536", id="binary-not-whole-kibi"),
        pytest.param("0.1Ki", "102400m", id="binary-below-1024"),
        pytest.param("1E3", "1e3", id="exponent-lowercased"),
        pytest.param("1e100", "10e99", id="exponent-multiple-of-three"),
        pytest.param("2", "2", id="plain"),
    ],
)
def test_canonical_quantity(text: str, expected: str) -> None:
    assert canonical_quantity(text) == expected


@pytest.mark.parametrize(
    "amount",
    [
        pytest.param(F(n, d), id=f"{n}/{d}")
        for n, d in [(0, 1), (1, 1), (7, 10), (123456789, 1000), (-5, 8), (2**40, 1), (3 * 2**29, 1),
                     (10**25, 1), (1, 10**9), (999, 1000), (2**63 - 1, 1), (-(2**35), 1)]
    ],
)
@pytest.mark.parametrize("binary", [False, True], ids=["decimal", "binary"])
@pytest.mark.parametrize("exponent", [False, True], ids=["si", "exp"])
def test_format_round_trips(amount: Fraction, binary: bool, exponent: bool) -> None:
    text = format_quantity(amount, binary, exponent=exponent)
    assert parse_quantity(text) == amount


def test_parse_is_cached_and_stable() -> None:
    assert parse_quantity("250m") is parse_quantity("250m")
    assert milli_value("250m") == milli_value("250m") == 250
