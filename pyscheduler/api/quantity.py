"""Kubernetes resource quantities (``resource.Quantity``) as exact fractions.

Design
------
A quantity string is split by one regular expression into sign, integer digits,
fraction digits and suffix, mirroring the hand-written scanner of apimachinery's
``ParseQuantity`` (so the same strings are accepted and rejected, with the same
error texts).  The suffix selects a base and exponent (``m`` = 10^-3, ``Ki`` =
2^10, ``e3`` = 10^3) and the *format* used when printing the value back
(``DecimalSI``, ``BinarySI`` or ``DecimalExponent``).

Values are :class:`fractions.Fraction` so that arithmetic on them is exact.
Like Kubernetes, a parsed value is rounded *away from zero* to a whole number
of nano units (``0.1n`` becomes ``1n``), and ``BinarySI`` values are capped at
2^63-1.  Parsing results are memoised because the same few strings (``100m``,
``128Mi``...) are parsed over and over on the API-server and scheduler paths.

:func:`milli_value` and :func:`value` reproduce ``Quantity.MilliValue()`` and
``Quantity.Value()``: they round up (away from zero) to an integer number of
milli units / units; these are what the scheduler uses for cpu (millicores) and
memory (bytes).  :func:`format_quantity` produces the canonical string form
(``Quantity.String()``): ``0.1`` -> ``100m``, ``2**30`` in binary -> ``1Gi``.

Deliberate differences from Kubernetes: leading and trailing white space is
ignored (as the JSON decoder of ``Quantity`` does), results are unbounded
Python integers rather than wrapping ``int64`` values, and decimal exponents
above 10000 are rejected instead of producing absurdly large numbers.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "FORMAT_ERROR",
    "NUMERIC_ERROR",
    "SUFFIX_ERROR",
    "QuantityError",
    "canonical_quantity",
    "format_quantity",
    "milli_value",
    "parse_quantity",
    "parse_quantity_with_format",
    "value",
]

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

FORMAT_ERROR = (
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
SUFFIX_ERROR = "unable to parse quantity's suffix"
NUMERIC_ERROR = "unable to parse numeric part of quantity"


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


# sign, integer digits, fraction digits, suffix.  The number part may be empty
# ("-", "k", "."): apimachinery's scanner reads those as zero, and so do we.
_SHAPE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")
_INT64 = re.compile(r"[+-]?[0-9]+")

# suffix -> (is_binary, exponent); binary exponents are powers of two.
_SUFFIXES: dict[str, tuple[bool, int]] = {
    "n": (False, -9), "u": (False, -6), "m": (False, -3), "": (False, 0),
    "k": (False, 3), "M": (False, 6), "G": (False, 9), "T": (False, 12),
    "P": (False, 15), "E": (False, 18),
    "Ki": (True, 10), "Mi": (True, 20), "Gi": (True, 30), "Ti": (True, 40),
    "Pi": (True, 50), "Ei": (True, 60),
}
_DEC_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BIN_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NANO = 10**9
_MAX_INT64 = 2**63 - 1
_MAX_EXPONENT = 10_000


def _round_nano(f: Fraction) -> Fraction:
    """Round away from zero to a whole number of nano units."""
    d = f.denominator
    if _NANO % d == 0:
        return f
    n = f.numerator
    q = -(-abs(n) * _NANO // d)
    return Fraction(q if n > 0 else -q, _NANO)


@lru_cache(maxsize=8192)
def _parse(s: str) -> tuple[Fraction, str]:
    m = _SHAPE.fullmatch(s)
    if m is None or not s:
        raise QuantityError(FORMAT_ERROR)
    sign, whole, frac, suffix = m.groups()
    frac = frac or ""
    entry = _SUFFIXES.get(suffix)
    if entry is not None:
        binary, exp = entry
        fmt = BINARY_SI if binary else DECIMAL_SI
    elif len(suffix) > 1 and suffix[0] in "eE" and _INT64.fullmatch(suffix, 1):
        binary, exp, fmt = False, int(suffix[1:]), DECIMAL_EXPONENT
        if not -(2**63) <= exp < 2**63:
            raise QuantityError(SUFFIX_ERROR)
        if exp > _MAX_EXPONENT:
            raise QuantityError(NUMERIC_ERROR)
    else:
        raise QuantityError(SUFFIX_ERROR)
    digits = whole + frac
    n = int(digits) if digits else 0
    if sign == "-":
        n = -n
    if binary:
        v = _round_nano(Fraction(n << exp, 10 ** len(frac)))
        if v > _MAX_INT64:
            v = Fraction(_MAX_INT64)
        elif v < -_MAX_INT64:
            v = Fraction(-_MAX_INT64)
        return v, fmt
    e = exp - len(frac)
    if e >= 0:
        return Fraction(n * 10**e), fmt
    if n == 0:
        return Fraction(0), fmt
    if len(digits) + e < -9:  # far below one nano: rounds up to +-1n
        return Fraction(1 if n > 0 else -1, _NANO), fmt
    return _round_nano(Fraction(n, 10**-e)), fmt


def parse_quantity_with_format(s: str | int | float) -> tuple[Fraction, str]:
    """Parse a quantity and also return its format (``DecimalSI``, ``BinarySI``, ``DecimalExponent``).

    ``int`` and ``float`` are treated like the JSON numbers they come from.
    Raises :class:`QuantityError` with the Kubernetes error text.
    """
    if isinstance(s, str):
        return _parse(s.strip())
    if isinstance(s, bool):
        raise QuantityError(FORMAT_ERROR)
    if isinstance(s, int):
        return Fraction(s), DECIMAL_SI
    if isinstance(s, float):
        if not math.isfinite(s):
            raise QuantityError(FORMAT_ERROR)
        return _parse(repr(s))
    raise QuantityError(FORMAT_ERROR)


def parse_quantity(s: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity (``"100m"``, ``"1.5Gi"``, ``"1e3"``, ``2``) into an exact fraction."""
    return parse_quantity_with_format(s)[0]


def _scaled(f: Fraction, scale: int) -> int:
    n = f.numerator * scale
    d = f.denominator
    if d == 1:
        return n
    r = -(-abs(n) // d)
    return r if n > 0 else -r


@lru_cache(maxsize=8192)
def _milli_of(s: str) -> int:
    return _scaled(parse_quantity(s), 1000)


@lru_cache(maxsize=8192)
def _value_of(s: str) -> int:
    return _scaled(parse_quantity(s), 1)


def milli_value(q: Fraction | str | int | float) -> int:
    """The quantity in milli units, rounded away from zero (``Quantity.MilliValue()``)."""
    if type(q) is str:
        return _milli_of(q)
    return _scaled(q if isinstance(q, Fraction) else parse_quantity(q), 1000)


def value(q: Fraction | str | int | float) -> int:
    """The quantity in whole units, rounded away from zero (``Quantity.Value()``)."""
    if type(q) is str:
        return _value_of(q)
    return _scaled(q if isinstance(q, Fraction) else parse_quantity(q), 1)


def format_quantity(f: Fraction | int, binary: bool = False, *, exponent: bool = False) -> str:
    """Canonical string for a value, as ``Quantity.String()`` prints it.

    ``binary`` selects the ``BinarySI`` format (``Ki``...``Ei``; used only for
    whole numbers of at least 1024, as in Kubernetes), ``exponent`` the
    ``DecimalExponent`` format (``1e3``); otherwise ``DecimalSI`` (``m``, ``k``...).
    Values are first rounded away from zero to nano units.
    """
    f = _round_nano(Fraction(f))
    if not f:
        return "0"
    if binary and f.denominator == 1 and 1024 <= abs(f) <= _MAX_INT64:
        n = f.numerator
        e = 0
        while e < 6 and n % 1024 == 0:
            n //= 1024
            e += 1
        return f"{n}{_BIN_SUFFIX[e]}"
    n = f.numerator * (_NANO // f.denominator)
    e = -9
    while n % 10 == 0:
        n //= 10
        e += 1
    r = e % 3
    if r:
        n *= 10**r
        e -= r
    if exponent:
        return f"{n}e{e}" if e else str(n)
    if e > 18:
        n *= 10 ** (e - 18)
        e = 18
    return f"{n}{_DEC_SUFFIX[e]}"


def canonical_quantity(s: str | int | float) -> str:
    """Parse ``s`` and print it back in canonical form, keeping its format (``"1000m"`` -> ``"1"``)."""
    v, fmt = parse_quantity_with_format(s)
    return format_quantity(v, fmt == BINARY_SI, exponent=fmt == DECIMAL_EXPONENT)
