"""Field errors and name checks with kube-apiserver's rules and error messages.

Design
------
Objects are validated in their JSON form (plain ``dict``/``list``/``str``
values) without converting them to typed classes first.  Every check appends
:class:`FieldError` records, the equivalent of apimachinery's ``field.Error``:
a cause type (``FieldValueInvalid``...), a field path rendered exactly as
``field.Path`` does (``spec.containers[0].resources.requests[cpu]``), the bad
value and a detail.  :attr:`FieldError.message` renders the error like Go's
``(*field.Error).Error()``: strings are quoted the way ``%q`` quotes them,
integers and booleans are printed bare, anything else as Go's ``json.Marshal`` writes it
(``["a","b"]``, ``{"k":"v"}``), as apimachinery 1.36 does.
The string checks (``IsDNS1123Label``, ``IsQualifiedName``,
``IsValidLabelValue``...) return the same detail strings as apimachinery and
memoise their results, since the same label keys and values recur constantly.

Where Kubernetes would fail earlier, while decoding JSON into Go structs (a
string where a list belongs, a float port number...), these functions report a
``FieldValueInvalid`` error with a short detail such as ``must be an object``
or ``must be an integer``.  Absent optional fields are treated like Go's zero
values, as the API server would see them after decoding.

The validation of whole objects (metadata, pod specs, nodes, namespaces) is the
embedded cluster's (:mod:`pyscheduler_sim.validation`); the scheduler itself needs
the name and label checks here, for selectors and its configuration.

:func:`aggregate_message`, :func:`status_causes` and :func:`invalid_message`
turn an error list into the pieces of the ``422 Invalid`` ``Status`` that
kube-apiserver returns.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache


__all__ = [
    "go_json",
    "MUST_BE_ARRAY",
    "MUST_BE_BOOLEAN",
    "MUST_BE_INTEGER",
    "MUST_BE_NON_NEGATIVE",
    "MUST_BE_OBJECT",
    "MUST_BE_STRING",
    "Verbatim",
    "invalid_each",
    "max_len_error",
    "DUPLICATE",
    "FORBIDDEN",
    "INVALID",
    "NOT_SUPPORTED",
    "REQUIRED",
    "TOO_LONG",
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "FieldError",
    "NameValidator",
    "aggregate_message",
    "duplicate",
    "forbidden",
    "go_quote",
    "invalid",
    "invalid_message",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "not_supported",
    "required",
    "status_causes",
    "too_long",
    "validate_annotations",
    "validate_dns1123_label",
    "validate_dns1123_subdomain",
    "validate_labels",
]

INVALID = "FieldValueInvalid"
REQUIRED = "FieldValueRequired"
DUPLICATE = "FieldValueDuplicate"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

_TYPE_TEXT = {
    INVALID: "Invalid value",
    REQUIRED: "Required value",
    DUPLICATE: "Duplicate value",
    NOT_SUPPORTED: "Unsupported value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    "FieldValueNotFound": "Not found",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
_VALUELESS = frozenset((REQUIRED, FORBIDDEN, TOO_LONG, "InternalError"))


class _Omitted:
    """apimachinery's ``field.OmitValueType``: an error that names no value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OMIT_VALUE"


#: The value of an error that prints none (``Invalid value: <detail>``).
OMIT_VALUE = _Omitted()


class Verbatim(str):
    """A value printed without quotes (Go values that implement ``fmt.Stringer``)."""

    __slots__ = ()


# ---------------------------------------------------------------- rendering

_PLAIN = re.compile(r'[ !#-\[\]-~]*')
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
            '"': '\\"', "\\": "\\\\"}


def go_quote(s: str) -> str:
    """Quote ``s`` the way Go's ``%q`` / ``strconv.Quote`` does."""
    if _PLAIN.fullmatch(s):
        return f'"{s}"'
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif c < 0x20 or c == 0x7F:
            out.append(f"\\x{c:02x}")
        elif ch.isprintable() and not 0xD800 <= c < 0xE000:
            out.append(ch)
        elif c < 0x10000:
            out.append(f"\\u{0xFFFD if 0xD800 <= c < 0xE000 else c:04x}")
        else:
            out.append(f"\\U{c:08x}")
    out.append('"')
    return "".join(out)


def _go_float(f: float) -> str:
    """``%v`` of a Go float64: shortest digits, exponent form below 1e-4 or from 1e6."""
    if not math.isfinite(f):
        return "NaN" if f != f else ("+Inf" if f > 0 else "-Inf")
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digit_tuple, exp = Decimal(repr(f)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    x = len(digits) + int(exp) - 1
    s = "-" if sign else ""
    if x < -4 or x >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{s}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if x < 0:
        return f"{s}0.{'0' * (-x - 1)}{digits}"
    whole, frac = digits[: x + 1].ljust(x + 1, "0"), digits[x + 1:]
    return f"{s}{whole}.{frac}" if frac else f"{s}{whole}"


def _render(v: object) -> str:
    if v is None:
        return '"null"'
    if isinstance(v, Verbatim):
        return str.__str__(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    return go_json(v)


def go_json(v: object) -> str:
    """``json.Marshal``'s text for a JSON value: no spaces, map keys sorted, UTF-8 kept, and
    ``<``, ``>``, ``&`` escaped as Go escapes them for HTML."""
    try:
        text = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=str)
    except (TypeError, ValueError):
        return repr(v)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation failure, like apimachinery's ``field.Error``."""

    type: str
    field: str
    value: object
    detail: str

    @property
    def body(self) -> str:
        """The message without the field path (``ErrorBody()``; a Status cause's message)."""
        text = _TYPE_TEXT.get(self.type, self.type)
        s = text if self.type in _VALUELESS or self.value is OMIT_VALUE \
            else f"{text}: {_render(self.value)}"
        return f"{s}: {self.detail}" if self.detail else s

    @property
    def message(self) -> str:
        """``<field>: <body>``, exactly as kube-apiserver prints it."""
        return f"{self.field}: {self.body}" if self.field else self.body

    def __str__(self) -> str:
        return self.message


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(INVALID, path, value, detail)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, path, "", detail)


def duplicate(path: str, value: object) -> FieldError:
    return FieldError(DUPLICATE, path, value, "")


def not_supported(path: str, value: object, supported: Iterable[str]) -> FieldError:
    values = ", ".join(go_quote(v) for v in supported)
    return FieldError(NOT_SUPPORTED, path, value, f"supported values: {values}" if values else "")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, path, "", detail)


def too_long(path: str, value: object, max_length: int) -> FieldError:
    return FieldError(TOO_LONG, path, value, f"must have at most {max_length} bytes")


def aggregate_message(errors: Iterable[FieldError]) -> str:
    """The errors joined as a Go ``utilerrors.Aggregate`` prints them (deduplicated, ``[a, b]``)."""
    msgs = list(dict.fromkeys(e.message for e in errors))
    if len(msgs) == 1:
        return msgs[0]
    return "[" + ", ".join(msgs) + "]" if msgs else ""


def status_causes(errors: Iterable[FieldError]) -> list[dict[str, str]]:
    """``Status.details.causes`` entries for the errors."""
    return [{"reason": e.type, "message": e.body, "field": e.field} for e in errors]


def invalid_message(kind: str, group: str, name: str, errors: Iterable[FieldError]) -> str:
    """``Status.message`` of a 422 Invalid error: ``Pod "x" is invalid: <aggregate>``."""
    qualified = f"{kind}.{group}" if group else kind
    agg = aggregate_message(errors)
    head = f"{qualified} {go_quote(name)} is invalid"
    return f"{head}: {agg}" if agg else head


# ---------------------------------------------------------------- string formats

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def _blen(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


_DNS1123_LABEL_ERR = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character", _DNS1123_LABEL_FMT, "my-name", "123-abc")
_DNS1123_SUBDOMAIN_ERR = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character", _DNS1123_SUBDOMAIN_FMT, "example.com")
_LABEL_KEY_ERR_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_LABEL_NAME_ERR = "name part " + _regex_error(_LABEL_KEY_ERR_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
_LABEL_KEY_SHAPE_ERR = ("a valid label key " + _regex_error(_LABEL_KEY_ERR_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                        + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
_LABEL_VALUE_ERR = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character", _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")


@lru_cache(maxsize=4096)
def _dns1123_label(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append("must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else _DNS1123_LABEL_ERR)
    return tuple(errs)


@lru_cache(maxsize=4096)
def _dns1123_subdomain(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if _blen(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_DNS1123_SUBDOMAIN_ERR)
    return tuple(errs)


@lru_cache(maxsize=8192)
def _qualified_name(value: str) -> tuple[str, ...]:
    parts = value.split("/")
    if len(parts) > 2:
        return (_LABEL_KEY_SHAPE_ERR,)
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(_LABEL_NAME_ERR)
    return tuple(errs)


@lru_cache(maxsize=8192)
def _label_value(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_LABEL_VALUE_ERR)
    return tuple(errs)


def is_dns1123_label(value: str) -> list[str]:
    """Detail messages of ``IsDNS1123Label`` (empty when valid)."""
    return list(_dns1123_label(value))


def is_dns1123_subdomain(value: str) -> list[str]:
    """Detail messages of ``IsDNS1123Subdomain`` (empty when valid)."""
    return list(_dns1123_subdomain(value))


def is_qualified_name(value: str) -> list[str]:
    """Detail messages of ``IsQualifiedName`` -- the label key rule (empty when valid)."""
    return list(_qualified_name(value))


def is_valid_label_value(value: str) -> list[str]:
    """Detail messages of ``IsValidLabelValue`` (empty when valid)."""
    return list(_label_value(value))


# ---------------------------------------------------------------- field helpers

NameValidator = Callable[[str, str], list[FieldError]]
"""``(value, path) -> errors``; the validation functions for names have this shape."""

MUST_BE_OBJECT = "must be an object"
MUST_BE_ARRAY = "must be an array"
MUST_BE_STRING = "must be a string"
MUST_BE_INTEGER = "must be an integer"
MUST_BE_BOOLEAN = "must be a boolean"
MUST_BE_NON_NEGATIVE = "must be greater than or equal to 0"


def invalid_each(path: str, value: object, msgs: tuple[str, ...] | list[str]) -> list[FieldError]:
    return [FieldError(INVALID, path, value, m) for m in msgs] if msgs else []


def validate_dns1123_subdomain(value: object, path: str) -> list[FieldError]:
    """``ValidateDNS1123Subdomain``: at most 253 characters of ``[a-z0-9.-]``."""
    if not isinstance(value, str):
        return [invalid(path, value, MUST_BE_STRING)]
    return invalid_each(path, value, _dns1123_subdomain(value))


def validate_dns1123_label(value: object, path: str) -> list[FieldError]:
    """``ValidateDNS1123Label``: at most 63 characters of ``[a-z0-9-]``."""
    if not isinstance(value, str):
        return [invalid(path, value, MUST_BE_STRING)]
    return invalid_each(path, value, _dns1123_label(value))


def _str_map(m: object, path: str, errs: list[FieldError]) -> dict[str, str] | None:
    """``m`` as a string map, or ``None`` (with an error appended) when it is not one."""
    if m is None:
        return {}
    if not isinstance(m, dict):
        errs.append(invalid(path, m, MUST_BE_OBJECT))
        return None
    bad = False
    for k, v in m.items():
        if not isinstance(v, str):
            errs.append(invalid(path, v, MUST_BE_STRING))
            bad = True
        if not isinstance(k, str):
            errs.append(invalid(path, k, MUST_BE_STRING))
            bad = True
    return None if bad else m


def validate_labels(labels: object, path: str = "metadata.labels") -> list[FieldError]:
    """Label keys must be qualified names, values valid label values."""
    errs: list[FieldError] = []
    m = _str_map(labels, path, errs)
    if m:
        for k, v in m.items():
            ke = _qualified_name(k)
            if ke:
                errs.extend(invalid_each(path, k, ke))
            ve = _label_value(v)
            if ve:
                errs.extend(invalid_each(path, v, ve))
    return errs


def validate_annotations(annotations: object, path: str = "metadata.annotations") -> list[FieldError]:
    """Annotation keys must be qualified names (case-insensitively); total size at most 256 KiB."""
    errs: list[FieldError] = []
    m = _str_map(annotations, path, errs)
    if m:
        size = 0
        for k, v in m.items():
            ke = _qualified_name(k.lower())
            if ke:
                errs.extend(invalid_each(path, k, ke))
            size += _blen(k) + _blen(v)
        if size > TOTAL_ANNOTATION_SIZE_LIMIT:
            errs.append(too_long(path, "", TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs
