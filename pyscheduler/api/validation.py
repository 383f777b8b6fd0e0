"""Object validation with kube-apiserver's rules and error messages.

Design
------
Objects are validated in their JSON form (plain ``dict``/``list``/``str``
values) without converting them to typed classes first.  Every check appends
:class:`FieldError` records, the equivalent of apimachinery's ``field.Error``:
a cause type (``FieldValueInvalid``...), a field path rendered exactly as
``field.Path`` does (``spec.containers[0].resources.requests[cpu]``), the bad
value and a detail.  :attr:`FieldError.message` renders the error like Go's
``(*field.Error).Error()``: strings are quoted the way ``%q`` quotes them,
integers and booleans are printed bare, lists of strings as ``[]string{...}``.
The string checks (``IsDNS1123Label``, ``IsQualifiedName``,
``IsValidLabelValue``...) return the same detail strings as apimachinery and
memoise their results, since the same label keys and values recur constantly.

Where Kubernetes would fail earlier, while decoding JSON into Go structs (a
string where a list belongs, a float port number...), these functions report a
``FieldValueInvalid`` error with a short detail such as ``must be an object``
or ``must be an integer``.  Absent optional fields are treated like Go's zero
values, as the API server would see them after decoding.

Only the rules that matter to a scheduler simulation are implemented: object
metadata, the scheduling-relevant parts of pod specs (containers, resources,
ports, tolerations, node selectors, names), node taints and capacity, and
namespace finalizers.  Volumes, probes, security contexts, affinity terms and
update-time (immutability) rules are not validated.

:func:`aggregate_message`, :func:`status_causes` and :func:`invalid_message`
turn an error list into the pieces of the ``422 Invalid`` ``Status`` that
kube-apiserver returns.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any

from pyscheduler.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    QuantityError,
    format_quantity,
    parse_quantity_with_format,
)

__all__ = [
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
    "validate_generic",
    "validate_labels",
    "validate_namespace",
    "validate_node",
    "validate_object_meta",
    "validate_pod",
    "validate_pod_spec",
    "validate_resource_list",
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


class _Verbatim(str):
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
    if isinstance(v, _Verbatim):
        return str.__str__(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return "[]string{" + ", ".join(go_quote(x) for x in v) + "}"
    try:
        return json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(v)


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
        s = text if self.type in _VALUELESS else f"{text}: {_render(self.value)}"
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


def _max_len_error(n: int) -> str:
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
        errs.append(_max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append("must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else _DNS1123_LABEL_ERR)
    return tuple(errs)


@lru_cache(maxsize=4096)
def _dns1123_subdomain(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if _blen(value) > 253:
        errs.append(_max_len_error(253))
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
        errs.append("name part " + _max_len_error(63))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(_LABEL_NAME_ERR)
    return tuple(errs)


@lru_cache(maxsize=8192)
def _label_value(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(_max_len_error(63))
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

_OBJ = "must be an object"
_ARR = "must be an array"
_STR = "must be a string"
_INT = "must be an integer"
_BOOL = "must be a boolean"
_NEGATIVE = "must be greater than or equal to 0"


def _msgs(path: str, value: object, msgs: tuple[str, ...] | list[str]) -> list[FieldError]:
    return [FieldError(INVALID, path, value, m) for m in msgs] if msgs else []


def validate_dns1123_subdomain(value: object, path: str) -> list[FieldError]:
    """``ValidateDNS1123Subdomain``: at most 253 characters of ``[a-z0-9.-]``."""
    if not isinstance(value, str):
        return [invalid(path, value, _STR)]
    return _msgs(path, value, _dns1123_subdomain(value))


def validate_dns1123_label(value: object, path: str) -> list[FieldError]:
    """``ValidateDNS1123Label``: at most 63 characters of ``[a-z0-9-]``."""
    if not isinstance(value, str):
        return [invalid(path, value, _STR)]
    return _msgs(path, value, _dns1123_label(value))


def _str_map(m: object, path: str, errs: list[FieldError]) -> dict[str, str] | None:
    """``m`` as a string map, or ``None`` (with an error appended) when it is not one."""
    if m is None:
        return {}
    if not isinstance(m, dict):
        errs.append(invalid(path, m, _OBJ))
        return None
    bad = False
    for k, v in m.items():
        if not isinstance(v, str):
            errs.append(invalid(path, v, _STR))
            bad = True
        if not isinstance(k, str):
            errs.append(invalid(path, k, _STR))
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
                errs.extend(_msgs(path, k, ke))
            ve = _label_value(v)
            if ve:
                errs.extend(_msgs(path, v, ve))
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
                errs.extend(_msgs(path, k, ke))
            size += _blen(k) + _blen(v)
        if size > TOTAL_ANNOTATION_SIZE_LIMIT:
            errs.append(too_long(path, "", TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


# ---------------------------------------------------------------- object metadata

_STANDARD_FINALIZERS = frozenset(("kubernetes", "orphan", "foregroundDeletion"))


def _validate_finalizers(finalizers: object, path: str, kube: bool, errs: list[FieldError]) -> None:
    if finalizers is None:
        return
    if not isinstance(finalizers, list):
        errs.append(invalid(path, finalizers, _ARR))
        return
    for f in finalizers:
        if not isinstance(f, str):
            errs.append(invalid(path, f, _STR))
            continue
        errs.extend(_msgs(path, f, _qualified_name(f)))
        if kube and "/" not in f and f not in _STANDARD_FINALIZERS:
            errs.append(invalid(path, f, "name is neither a standard finalizer name nor is it fully qualified"))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(invalid(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))


def _validate_owner_references(refs: object, path: str, errs: list[FieldError]) -> None:
    if refs is None:
        return
    if not isinstance(refs, list):
        errs.append(invalid(path, refs, _ARR))
        return
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            errs.append(invalid(path, ref, _OBJ))
            continue
        api_version = ref.get("apiVersion") or ""
        kind = ref.get("kind") or ""
        parts = api_version.split("/") if isinstance(api_version, str) else ["", "", ""]
        group, version = (parts[0], parts[-1]) if len(parts) == 2 else ("", parts[0] if len(parts) == 1 else "")
        if not version:
            errs.append(invalid(path + ".apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.append(invalid(f"{path}.{key}", ref.get(key) or "", "must not be empty"))
        if kind == "Event" and not group and version == "v1":
            errs.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if controller:
                errs.append(invalid(path, refs, "Only one reference can have Controller set to true. "
                                                 f'Found "true" in references for {controller} and {current}'))
            else:
                controller = current


def validate_object_meta(
    meta: object,
    *,
    namespaced: bool,
    name_validator: NameValidator | None = validate_dns1123_subdomain,
    path: str = "metadata",
    kube_finalizers: bool = True,
) -> list[FieldError]:
    """``ValidateObjectMeta`` for a create: name/generateName, namespace, labels, annotations,
    ownerReferences and finalizers.

    ``name_validator(value, path)`` checks the name (``None``: only require one);
    ``kube_finalizers`` adds the core API's rule that unqualified finalizer names
    must be standard ones (``kubernetes``, ``orphan``, ``foregroundDeletion``).
    """
    errs: list[FieldError] = []
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        return [invalid(path, meta, _OBJ)]
    name = meta.get("name") or ""
    gen = meta.get("generateName") or ""
    if not isinstance(gen, str):
        errs.append(invalid(path + ".generateName", gen, _STR))
    elif gen and name_validator is not None:
        masked = gen[:-2] + "a" if len(gen) > 1 and gen.endswith("-") else gen
        errs.extend(replace(e, value=gen) for e in name_validator(masked, path + ".generateName"))
    if not name:
        errs.append(required(path + ".name", "name or generateName is required"))
    elif not isinstance(name, str):
        errs.append(invalid(path + ".name", name, _STR))
    elif name_validator is not None:
        errs.extend(name_validator(name, path + ".name"))
    ns = meta.get("namespace") or ""
    if namespaced:
        if not ns:
            errs.append(required(path + ".namespace"))
        else:
            errs.extend(validate_dns1123_label(ns, path + ".namespace"))
    elif ns:
        errs.append(forbidden(path + ".namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if generation is not None:
        if not isinstance(generation, int) or isinstance(generation, bool):
            errs.append(invalid(path + ".generation", generation, _INT))
        elif generation < 0:
            errs.append(invalid(path + ".generation", generation, _NEGATIVE))
    if "labels" in meta:
        errs.extend(validate_labels(meta["labels"], path + ".labels"))
    if "annotations" in meta:
        errs.extend(validate_annotations(meta["annotations"], path + ".annotations"))
    _validate_owner_references(meta.get("ownerReferences"), path + ".ownerReferences", errs)
    _validate_finalizers(meta.get("finalizers"), path + ".finalizers", kube_finalizers, errs)
    return errs


# ---------------------------------------------------------------- resources

_STANDARD_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))
_STANDARD_RESOURCES = _STANDARD_CONTAINER_RESOURCES | frozenset((
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
    "limits.ephemeral-storage", "pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
    "persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers", "storage",
    "requests.storage",
))
_INTEGER_RESOURCES = frozenset((
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
))


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not _is_native(name) and not name.startswith("requests.") and not _qualified_name("requests." + name)


@lru_cache(maxsize=1024)
def _resource_rules(name: str, container: bool) -> tuple[tuple[str, ...], bool, bool]:
    """(name error details, value must be an integer, request may differ from limit)."""
    errs = list(_qualified_name(name))
    if not errs and "/" not in name and not (name in _STANDARD_RESOURCES or name.startswith(
            ("hugepages-", "requests.hugepages-"))):
        errs.append("must be a standard resource type or fully qualified")
    if container:
        if "/" not in name:
            if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                errs.append("must be a standard resource for containers")
        elif not _is_native(name) and not _is_extended(name):
            errs.append("doesn't follow extended resource name standard")
    integer = name in _INTEGER_RESOURCES or _is_extended(name)
    return tuple(errs), integer, _is_native(name) and not name.startswith("hugepages-")


def _quantity_text(q: Fraction, fmt: str) -> str:
    return format_quantity(q, fmt == BINARY_SI, exponent=fmt == DECIMAL_EXPONENT)


def _resource_list(
    rl: object, path: str, container: bool, errs: list[FieldError], node_status: bool = False
) -> dict[str, tuple[Fraction, str]]:
    """Validate a resource list, returning the parsed quantities (with their formats) that parsed.

    ``node_status``: node capacity -- names unchecked, paths ``status.capacity.cpu``.
    """
    parsed: dict[str, tuple[Fraction, str]] = {}
    if rl is None:
        return parsed
    if not isinstance(rl, dict):
        errs.append(invalid(path, rl, _OBJ))
        return parsed
    for name, raw in rl.items():
        p = f"{path}.{name}" if node_status else f"{path}[{name}]"
        name_errs, integer, _ = _resource_rules(name, container)
        if name_errs and not node_status:
            errs.extend(invalid(p, name, d) for d in name_errs)
        t = type(raw)
        if t is not str and t is not int and t is not float:
            errs.append(invalid(p, raw, "must be a quantity string or number"))
            continue
        try:
            q, fmt = parse_quantity_with_format(raw)
        except QuantityError as exc:
            errs.append(invalid(p, raw, str(exc)))
            continue
        parsed[name] = (q, fmt)
        if q.numerator < 0:
            errs.append(invalid(p, _quantity_text(q, fmt), _NEGATIVE))
        if integer and q.denominator != 1:
            errs.append(invalid(p, _Verbatim(_quantity_text(q, fmt)), _INT))
    return parsed


def validate_resource_list(rl: object, path: str, *, container: bool = False) -> list[FieldError]:
    """Resource names must be standard or fully qualified, values valid non-negative quantities.

    Paths are keyed like Kubernetes' (``spec.overhead[cpu]``); ``container``
    applies the stricter rules for container requests and limits.
    """
    errs: list[FieldError] = []
    _resource_list(rl, path, container, errs)
    return errs


def _validate_resources(res: object, path: str, errs: list[FieldError]) -> None:
    """``ValidateContainerResourceRequirements``."""
    if res is None:
        return
    if not isinstance(res, dict):
        errs.append(invalid(path, res, _OBJ))
        return
    lim_path, req_path = path + ".limits", path + ".requests"
    limits = _resource_list(res.get("limits"), lim_path, True, errs)
    requests = _resource_list(res.get("requests"), req_path, True, errs)
    hugepages = cpu_or_memory = False
    for name in limits:
        hugepages = hugepages or name.startswith("hugepages-")
        cpu_or_memory = cpu_or_memory or name in ("cpu", "memory")
    for name, (q, fmt) in requests.items():
        hugepages = hugepages or name.startswith("hugepages-")
        cpu_or_memory = cpu_or_memory or name in ("cpu", "memory")
        overcommit = _resource_rules(name, True)[2]
        lim = limits.get(name)
        if lim is not None:
            lq = lim[0]
            a, b = q.numerator * lq.denominator, lq.numerator * q.denominator
            if a != b and not overcommit:
                errs.append(invalid(req_path, _quantity_text(q, fmt),
                                    f"must be equal to {name} limit of {_quantity_text(*lim)}"))
            elif a > b:
                errs.append(invalid(req_path, _quantity_text(q, fmt),
                                    f"must be less than or equal to {name} limit of {_quantity_text(*lim)}"))
        elif not overcommit:
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
    if hugepages and not cpu_or_memory:
        errs.append(forbidden(path, "HugePages require cpu or memory"))


# ---------------------------------------------------------------- pods

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PORT_NAME_CHARS = re.compile("[-a-z0-9]+")
_INT32 = (-(2**31), 2**31 - 1)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _port_name_errors(name: str) -> list[str]:
    msgs = []
    if len(name) > 15:
        msgs.append(_max_len_error(15))
    if not _PORT_NAME_CHARS.fullmatch(name):
        msgs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not any("a" <= c <= "z" for c in name):
        msgs.append("must contain at least one letter (a-z)")
    if "--" in name:
        msgs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        msgs.append("must not begin or end with a hyphen")
    return msgs


def _validate_ports(ports: object, path: str, errs: list[FieldError]) -> None:
    if ports is None:
        return
    if not isinstance(ports, list):
        errs.append(invalid(path, ports, _ARR))
        return
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = f"{path}[{i}]"
        if not isinstance(port, dict):
            errs.append(invalid(p, port, _OBJ))
            continue
        name = port.get("name")
        if name:
            if not isinstance(name, str):
                errs.append(invalid(p + ".name", name, _STR))
            elif m := _port_name_errors(name):
                errs.extend(_msgs(p + ".name", name, m))
            elif name in names:
                errs.append(duplicate(p + ".name", name))
            else:
                names.add(name)
        cp = port.get("containerPort")
        if cp is None or cp == 0:
            errs.append(required(p + ".containerPort"))
        elif not _is_int(cp):
            errs.append(invalid(p + ".containerPort", cp, _INT))
        elif not 1 <= cp <= 65535:
            errs.append(invalid(p + ".containerPort", cp, "must be between 1 and 65535, inclusive"))
        hp = port.get("hostPort")
        if hp is not None and hp != 0:
            if not _is_int(hp):
                errs.append(invalid(p + ".hostPort", hp, _INT))
            elif not 1 <= hp <= 65535:
                errs.append(invalid(p + ".hostPort", hp, "must be between 1 and 65535, inclusive"))
        proto = port.get("protocol")
        if proto and proto not in _PROTOCOLS:
            errs.append(not_supported(p + ".protocol", proto, _PROTOCOLS))


def _validate_containers(
    ctrs: object, path: str, names: set[str], init: bool, errs: list[FieldError]
) -> None:
    if ctrs is None or ctrs == []:
        if not init:
            errs.append(required(path))
        return
    if not isinstance(ctrs, list):
        errs.append(invalid(path, ctrs, _ARR))
        return
    for i, c in enumerate(ctrs):
        p = f"{path}[{i}]"
        if not isinstance(c, dict):
            errs.append(invalid(p, c, _OBJ))
            continue
        name = c.get("name") or ""
        if not isinstance(name, str):
            errs.append(invalid(p + ".name", name, _STR))
        else:
            if not name:
                errs.append(required(p + ".name"))
            else:
                errs.extend(_msgs(p + ".name", name, _dns1123_label(name)))
            if name in names:
                errs.append(duplicate(p + ".name", name))
            else:
                names.add(name)
        image = c.get("image") or ""
        if not image:
            errs.append(required(p + ".image"))
        elif not isinstance(image, str):
            errs.append(invalid(p + ".image", image, _STR))
        elif image.strip() != image:
            errs.append(invalid(p + ".image", image, "must not have leading or trailing whitespace"))
        _validate_ports(c.get("ports"), p + ".ports", errs)
        _validate_resources(c.get("resources"), p + ".resources", errs)


def _validate_tolerations(tols: object, path: str, errs: list[FieldError]) -> None:
    if tols is None:
        return
    if not isinstance(tols, list):
        errs.append(invalid(path, tols, _ARR))
        return
    for i, t in enumerate(tols):
        p = f"{path}[{i}]"
        if not isinstance(t, dict):
            errs.append(invalid(p, t, _OBJ))
            continue
        key, op, val, effect = (t.get(k) or "" for k in ("key", "operator", "value", "effect"))
        if not all(isinstance(x, str) for x in (key, op, val, effect)):
            errs.append(invalid(p, t, "key, operator, value and effect must be strings"))
            continue
        if key:
            errs.extend(_msgs(p + ".key", key, _qualified_name(key)))
        elif op != "Exists":
            errs.append(invalid(p + ".operator", op,
                                'operator must be Exists when `key` is empty, which means "match all values and all keys"'))
        seconds = t.get("tolerationSeconds")
        if seconds is not None:
            if not _is_int(seconds):
                errs.append(invalid(p + ".tolerationSeconds", seconds, _INT))
            if effect != "NoExecute":
                errs.append(invalid(p + ".effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            if m := _label_value(val):
                errs.append(invalid(p + ".operator", val, ";".join(m)))
        elif op == "Exists":
            if val:
                errs.append(invalid(p + ".operator", t, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(p + ".operator", op, ("Equal", "Exists")))
        if effect and effect not in _TAINT_EFFECTS:
            errs.append(not_supported(p + ".effect", effect, _TAINT_EFFECTS))


def _validate_optional_name(spec: dict[str, Any], key: str, path: str, errs: list[FieldError]) -> None:
    v = spec.get(key)
    if v:
        errs.extend(validate_dns1123_subdomain(v, f"{path}.{key}"))


def validate_pod_spec(spec: object, path: str = "spec") -> list[FieldError]:
    """The scheduling-relevant parts of ``ValidatePodSpec``."""
    errs: list[FieldError] = []
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        return [invalid(path, spec, _OBJ)]
    names: set[str] = set()
    _validate_containers(spec.get("containers"), path + ".containers", names, False, errs)
    _validate_containers(spec.get("initContainers"), path + ".initContainers", names, True, errs)
    rp = spec.get("restartPolicy")
    if rp and rp not in _RESTART_POLICIES:
        errs.append(not_supported(path + ".restartPolicy", rp, _RESTART_POLICIES))
    if "nodeSelector" in spec:
        errs.extend(validate_labels(spec["nodeSelector"], path + ".nodeSelector"))
    for key in ("serviceAccountName", "nodeName", "priorityClassName", "schedulerName"):
        _validate_optional_name(spec, key, path, errs)
    host_network = spec.get("hostNetwork")
    if host_network is not None and not isinstance(host_network, bool):
        errs.append(invalid(path + ".hostNetwork", host_network, _BOOL))
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None:
        if not _is_int(ads):
            errs.append(invalid(path + ".activeDeadlineSeconds", ads, _INT))
        elif not 1 <= ads <= _INT32[1]:
            errs.append(invalid(path + ".activeDeadlineSeconds", ads, f"must be between 1 and {_INT32[1]}, inclusive"))
    prio = spec.get("priority")
    if prio is not None:
        if not _is_int(prio):
            errs.append(invalid(path + ".priority", prio, _INT))
        elif not _INT32[0] <= prio <= _INT32[1]:
            errs.append(invalid(path + ".priority", prio, f"must be between {_INT32[0]} and {_INT32[1]}, inclusive"))
    _validate_tolerations(spec.get("tolerations"), path + ".tolerations", errs)
    if spec.get("overhead") is not None:
        _validate_resources({"limits": spec["overhead"]}, path + ".overhead", errs)
    return errs


def _split(obj: object) -> tuple[object, object, list[FieldError]]:
    if not isinstance(obj, dict):
        return None, None, [invalid("", obj, _OBJ)]
    return obj.get("metadata"), obj.get("spec"), []


def validate_pod(obj: object) -> list[FieldError]:
    """``ValidatePodCreate``: namespaced metadata with a DNS-subdomain name, then the spec."""
    meta, spec, errs = _split(obj)
    if errs:
        return errs
    return validate_object_meta(meta, namespaced=True) + validate_pod_spec(spec)


def validate_node(obj: object) -> list[FieldError]:
    """``ValidateNode``: cluster-scoped metadata, taints, and capacity/allocatable quantities."""
    meta, spec, errs = _split(obj)
    if errs:
        return errs
    errs = validate_object_meta(meta, namespaced=False)
    if spec is not None and not isinstance(spec, dict):
        errs.append(invalid("spec", spec, _OBJ))
    elif spec:
        if spec.get("unschedulable") is not None and not isinstance(spec["unschedulable"], bool):
            errs.append(invalid("spec.unschedulable", spec["unschedulable"], _BOOL))
        taints = spec.get("taints")
        if taints is not None and not isinstance(taints, list):
            errs.append(invalid("spec.taints", taints, _ARR))
        elif taints:
            seen: set[tuple[str, str]] = set()
            for i, t in enumerate(taints):
                p = f"spec.taints[{i}]"
                if not isinstance(t, dict):
                    errs.append(invalid(p, t, _OBJ))
                    continue
                key, val, effect = (t.get(k) or "" for k in ("key", "value", "effect"))
                if not all(isinstance(x, str) for x in (key, val, effect)):
                    errs.append(invalid(p, t, "key, value and effect must be strings"))
                    continue
                errs.extend(_msgs(p + ".key", key, _qualified_name(key)))
                if m := _label_value(val):
                    errs.append(invalid(p + ".value", val, ";".join(m)))
                if not effect:
                    errs.append(required(p + ".effect"))
                elif effect not in _TAINT_EFFECTS:
                    errs.append(not_supported(p + ".effect", effect, _TAINT_EFFECTS))
                if (key, effect) in seen:
                    errs.append(FieldError(DUPLICATE, p, t, "taints must be unique by key and effect pair"))
                else:
                    seen.add((key, effect))
    status = obj.get("status") if isinstance(obj, dict) else None
    if isinstance(status, dict):
        for key in ("capacity", "allocatable"):
            _resource_list(status.get(key), f"status.{key}", False, errs, node_status=True)
    return errs


def validate_namespace(obj: object) -> list[FieldError]:
    """``ValidateNamespace``: a DNS-1123 label name and valid ``spec.finalizers``."""
    meta, spec, errs = _split(obj)
    if errs:
        return errs
    errs = validate_object_meta(meta, namespaced=False, name_validator=validate_dns1123_label)
    if spec is not None and not isinstance(spec, dict):
        errs.append(invalid("spec", spec, _OBJ))
    elif spec:
        fins = spec.get("finalizers")
        if fins is not None:
            _validate_finalizers(fins, "spec.finalizers", True, errs)
    return errs


def validate_generic(
    obj: object, namespaced: bool, *, name_validator: NameValidator | None = validate_dns1123_subdomain
) -> list[FieldError]:
    """Metadata-only validation for any other resource.

    The core API's finalizer rule applies when ``apiVersion`` is ``v1``.
    """
    meta, _, errs = _split(obj)
    if errs:
        return errs
    core = isinstance(obj, dict) and obj.get("apiVersion") == "v1"
    return validate_object_meta(meta, namespaced=namespaced, name_validator=name_validator, kube_finalizers=core)
