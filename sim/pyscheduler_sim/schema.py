"""OpenAPI v3 schemas of CustomResourceDefinitions: validation, defaulting, pruning.

Design
------
A CRD version's ``schema.openAPIV3Schema`` is compiled once by
:func:`compile_schema` into a tree of immutable :class:`_Node` records (one per
schema object: type, bounds, compiled ``pattern``, child nodes for
``properties``/``items``/``additionalProperties`` and the ``allOf``/``anyOf``/
``oneOf``/``not`` value validations).  The resulting :class:`CompiledSchema`
is reused for every request on that version and offers the three steps
kube-apiserver performs on a custom object:

``default(obj)``
    Structural defaulting: for every object, each property that is absent (or
    ``null`` while the property is not ``nullable``) and has a ``default`` gets
    a deep copy of it; the walk then continues into the value, so defaults
    inside defaults apply too.  It descends into array items and
    ``additionalProperties`` values but never creates an absent parent object.

``prune(obj)``
    Drops fields the schema does not specify, except under
    ``x-kubernetes-preserve-unknown-fields: true``.  The root ``apiVersion``,
    ``kind`` and ``metadata`` are always kept as they are (object metadata is
    the API server's business, never pruned by the CRD schema), and so are
    those three fields of an ``x-kubernetes-embedded-resource`` object.
    Value validations (``allOf``...) never keep a field.  The pruned paths
    are returned in kube's notation (``spec.foo``, ``spec.items[0].bar``), the
    same text the API server puts into its ``unknown field`` warnings.

``validate(obj)``
    Every violation as a :class:`~pyscheduler.api.validation.FieldError`,
    converted from the OpenAPI failures the way apiextensions-apiserver does:
    ``type`` and ``format`` mismatches are ``FieldValueTypeInvalid``,
    ``required`` is ``Required value``, ``enum`` is ``Unsupported value``,
    ``maxLength`` is ``Too long``, ``maxItems``/``maxProperties`` are
    ``Too many``, everything else ``Invalid value`` with the OpenAPI detail
    (``spec.replicas in body should be greater than or equal to 1``).  The
    checks run in kube-openapi's order for each schema node (type, value
    validations, string, format, number, array, enum, object) and the
    list-type checks (``x-kubernetes-list-type`` ``set``/``map`` duplicates)
    come after all of them, as the API server runs them as a separate pass.
    Array elements are addressed ``spec.items[2].name`` and map values
    ``spec.labels.key``.

:func:`validate_crd_schema` checks the rules for *structural* schemas that the
API server enforces when a CRD is created or updated, with its messages: the
root is ``type: object`` (not ``nullable``, no ``additionalProperties``),
every node specifies a ``type`` unless it is ``x-kubernetes-int-or-string`` or
preserves unknown fields, ``properties`` are not combined with an
``additionalProperties`` schema or ``false``, arrays have ``items``,
``x-kubernetes-preserve-unknown-fields`` is never ``false``, embedded
resources are objects, root ``metadata`` only constrains ``name`` and
``generateName``, value validations (``allOf``/``anyOf``/``oneOf``/``not``)
carry no structural keywords (the int-or-string ``anyOf`` idiom excepted),
``uniqueItems`` is not used, list types and map keys are consistent, patterns
compile, and every ``default`` validates against its schema (after its own
nested defaults apply) and has nothing to prune.

Semantics and limits
--------------------
* Types: ``boolean`` is not an ``integer``; ``number`` accepts integers;
  ``integer`` accepts floats with an integral value (as kube-openapi does).
  ``null`` is only accepted where ``nullable: true``; elsewhere it is a type
  error.
* ``pattern`` uses Python's :func:`re.search` (unanchored, like Go's
  ``regexp.MatchString``); ECMA/RE2 syntax that Python does not share is
  reported as an invalid pattern by :func:`validate_crd_schema` and never
  matches at validation time.
* ``format``: ``int32`` and ``int64`` range-check integers; ``date-time``
  (alias ``datetime``), ``date``, ``byte``, ``uuid``, ``ipv4``, ``ipv6`` and
  ``cidr`` check strings.  Other formats are accepted silently.
* ``minimum``/``maximum`` with OpenAPI v3.0 boolean ``exclusiveMinimum`` and
  ``exclusiveMaximum``; ``multipleOf`` is exact for decimal values.
* ``x-kubernetes-validations`` (CEL rules) are evaluated after the OpenAPI checks
  (:mod:`pyscheduler_sim.celrules`); a rule that does not compile refuses the CRD.
  ``x-kubernetes-map-type`` and the ratcheting of unchanged invalid values on
  update.  ``patternProperties``, ``dependencies`` and ``$ref`` are not
  structural and are ignored.
* A schema of ``None`` compiles to a :class:`CompiledSchema` that accepts,
  keeps and leaves untouched every object.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as _dt
import ipaddress
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from pyscheduler_sim.celrules import Rule, RuleError, compile_rules, evaluate
from pyscheduler.api.validation import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    FieldError,
    duplicate,
    go_quote,
    forbidden,
    invalid,
    not_supported,
    required,
)

__all__ = [
    "DUPLICATE",
    "FORBIDDEN",
    "INVALID",
    "NOT_SUPPORTED",
    "REQUIRED",
    "TOO_LONG",
    "TOO_MANY",
    "TYPE_INVALID",
    "CompiledSchema",
    "compile_schema",
    "validate_crd_schema",
]

TYPE_INVALID = "FieldValueTypeInvalid"
"""Cause type of ``type``/``format`` mismatches (rendered ``Invalid value``)."""
TOO_MANY = "FieldValueTooMany"
"""Cause type of ``maxItems``/``maxProperties`` failures (rendered ``Too many``)."""

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_LIST_TYPES = ("atomic", "map", "set")
_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


# ---------------------------------------------------------------- small helpers

def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def _body(path: str, text: str) -> str:
    """An OpenAPI failure text: ``<path> in body <text>``."""
    return f"{path} in body {text}" if path else f"in body {text}"


def _num(v: float | int) -> str:
    """A number as Go's ``%v`` prints a float64 (integral values without a fraction)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isfinite(v) and v == int(v) and abs(v) < 1e21:
        return str(int(v))
    if not math.isfinite(v):
        return "NaN" if v != v else ("+Inf" if v > 0 else "-Inf")
    r = repr(v)
    if "e" in r:
        mant, _, exp = r.partition("e")
        sign = "-" if exp.startswith("-") else "+"
        return f"{mant}e{sign}{exp.lstrip('+-').zfill(2)}"
    return r


def _kind(v: object) -> str:
    """The OpenAPI type name of a JSON value (``null`` for ``None``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    return type(v).__name__


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _canon(v: object) -> object:
    """A hashable key with JSON equality: ``True != 1``, ``1 == 1.0``, dict order ignored."""
    if v is None:
        return ("z",)
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, Mapping):
        return ("o", frozenset((str(k), _canon(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return ("l", tuple(_canon(x) for x in v))
    return ("?", repr(v))


def _json_text(v: object) -> str:
    try:
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        return repr(v)


# ---------------------------------------------------------------- formats

_DATE_TIME_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?")
_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_UUID_RE = re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def _valid_date(y: str, m: str, d: str) -> bool:
    try:
        _dt.date(int(y), int(m), int(d))
    except ValueError:
        return False
    return True


def _is_date_time(s: str) -> bool:
    m = _DATE_TIME_RE.fullmatch(s)
    if m is None or not _valid_date(m[1], m[2], m[3]):
        return False
    return int(m[4]) < 24 and int(m[5]) < 60 and int(m[6]) < 61


def _is_date(s: str) -> bool:
    m = _DATE_RE.fullmatch(s)
    return m is not None and _valid_date(m[1], m[2], m[3])


def _is_byte(s: str) -> bool:
    try:
        base64.b64decode(s.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return False
    return True


def _is_ip(version: int) -> Callable[[str], bool]:
    def check(s: str) -> bool:
        try:
            addr = ipaddress.ip_address(s)
        except ValueError:
            return False
        return addr.version == version
    return check


def _is_cidr(s: str) -> bool:
    if "/" not in s:
        return False
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return True


_STRING_FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _is_date_time,
    "datetime": _is_date_time,
    "date": _is_date,
    "byte": _is_byte,
    "uuid": lambda s: _UUID_RE.fullmatch(s) is not None,
    "ipv4": _is_ip(4),
    "ipv6": _is_ip(6),
    "cidr": _is_cidr,
}
_INT_FORMATS = {"int32": _INT32, "int64": _INT64}


# ---------------------------------------------------------------- compiled nodes

_NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True, eq=False)
class _Node:
    """One compiled schema object."""

    types: tuple[str, ...] = ()
    nullable: bool = False
    int_or_string: bool = False
    preserve: bool = False
    embedded: bool = False
    default: Any = _NO_DEFAULT
    properties: Mapping[str, _Node] = field(default_factory=dict)
    additional: _Node | bool | None = None
    items: _Node | None = None
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] | None = None
    pattern: str | None = None
    regex: re.Pattern[str] | None = None
    bad_pattern: bool = False
    format: str = ""
    minimum: float | int | None = None
    maximum: float | int | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | int | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int | None = None
    max_properties: int | None = None
    list_type: str = ""
    map_keys: tuple[str, ...] = ()
    all_of: tuple[_Node, ...] = ()
    any_of: tuple[_Node, ...] = ()
    one_of: tuple[_Node, ...] = ()
    not_: _Node | None = None
    rules: tuple[Rule, ...] = ()

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


def _opt_int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v)


def _opt_num(v: object) -> float | int | None:
    return v if _is_number(v) else None  # type: ignore[return-value]


def _opt_str(v: object) -> str:
    return v if isinstance(v, str) else ""


def _compile(raw: object) -> _Node:
    if not isinstance(raw, Mapping):
        return _Node()
    s: Mapping[str, Any] = raw
    t = s.get("type")
    types: tuple[str, ...]
    if isinstance(t, str) and t:
        types = (t,)
    elif isinstance(t, list):
        types = tuple(x for x in t if isinstance(x, str))
    else:
        types = ()
    props_raw = s.get("properties")
    props = {str(k): _compile(v) for k, v in props_raw.items()} if isinstance(props_raw, Mapping) else {}
    ap = s.get("additionalProperties")
    additional: _Node | bool | None
    if isinstance(ap, bool):
        additional = ap
    elif isinstance(ap, Mapping):
        additional = _compile(ap)
    else:
        additional = None
    items_raw = s.get("items")
    if isinstance(items_raw, list):  # tuple form: not structural; use the first schema
        items_raw = items_raw[0] if items_raw else None
    items = _compile(items_raw) if isinstance(items_raw, Mapping) else None
    req = s.get("required")
    enum = s.get("enum")
    pattern = s.get("pattern")
    regex: re.Pattern[str] | None = None
    bad_pattern = False
    if isinstance(pattern, str):
        try:
            regex = re.compile(pattern)
        except re.error:
            bad_pattern = True
    else:
        pattern = None
    keys = s.get("x-kubernetes-list-map-keys")

    def subs(name: str) -> tuple[_Node, ...]:
        v = s.get(name)
        return tuple(_compile(x) for x in v) if isinstance(v, list) else ()

    not_raw = s.get("not")
    try:
        rules = compile_rules(s.get("x-kubernetes-validations"))
    except RuleError:
        rules = ()  # such a CRD is refused when it is created (validate_crd_schema)
    return _Node(
        rules=rules,
        types=types,
        nullable=s.get("nullable") is True,
        int_or_string=s.get("x-kubernetes-int-or-string") is True,
        preserve=s.get("x-kubernetes-preserve-unknown-fields") is True,
        embedded=s.get("x-kubernetes-embedded-resource") is True,
        default=s["default"] if "default" in s else _NO_DEFAULT,
        properties=props,
        additional=additional,
        items=items,
        required=tuple(str(x) for x in req) if isinstance(req, list) else (),
        enum=tuple(enum) if isinstance(enum, list) else None,
        pattern=pattern,
        regex=regex,
        bad_pattern=bad_pattern,
        format=_opt_str(s.get("format")),
        minimum=_opt_num(s.get("minimum")),
        maximum=_opt_num(s.get("maximum")),
        exclusive_minimum=s.get("exclusiveMinimum") is True,
        exclusive_maximum=s.get("exclusiveMaximum") is True,
        multiple_of=_opt_num(s.get("multipleOf")),
        min_length=_opt_int(s.get("minLength")),
        max_length=_opt_int(s.get("maxLength")),
        min_items=_opt_int(s.get("minItems")),
        max_items=_opt_int(s.get("maxItems")),
        unique_items=s.get("uniqueItems") is True,
        min_properties=_opt_int(s.get("minProperties")),
        max_properties=_opt_int(s.get("maxProperties")),
        list_type=_opt_str(s.get("x-kubernetes-list-type")),
        map_keys=tuple(str(k) for k in keys) if isinstance(keys, list) else (),
        all_of=subs("allOf"),
        any_of=subs("anyOf"),
        one_of=subs("oneOf"),
        not_=_compile(not_raw) if isinstance(not_raw, Mapping) else None,
    )


# ---------------------------------------------------------------- defaulting

def _needs_default(container_has: bool, value: object, node: _Node) -> bool:
    return node.has_default and (not container_has or (value is None and not node.nullable))


def _default(v: object, n: _Node) -> None:
    if isinstance(v, dict):
        for k, prop in n.properties.items():
            if _needs_default(k in v, v.get(k), prop):
                v[k] = copy.deepcopy(prop.default)
        extra = n.additional if isinstance(n.additional, _Node) else None
        for k, x in v.items():
            p: _Node | None = n.properties.get(k)
            if p is None and extra is not None:
                if x is None and _needs_default(True, x, extra):
                    v[k] = x = copy.deepcopy(extra.default)
                p = extra
            if p is not None:
                _default(x, p)
    elif isinstance(v, list) and n.items is not None:
        it = n.items
        for i, x in enumerate(v):
            if x is None and _needs_default(True, x, it):
                v[i] = x = copy.deepcopy(it.default)
            _default(x, it)


# ---------------------------------------------------------------- pruning

_EMPTY = _Node()


def _prune(v: object, n: _Node, path: str, out: list[str], resource: bool = False) -> None:
    if isinstance(v, dict):
        resource = resource or n.embedded
        for k in list(v):
            if resource and k in _RESOURCE_FIELDS:
                continue  # type and object metadata are the API server's business, not the schema's
            x = v[k]
            p = n.properties.get(k)
            if p is None:
                if isinstance(n.additional, _Node):
                    p = n.additional
                elif n.additional is True or n.preserve:
                    continue
                else:
                    del v[k]
                    out.append(_child(path, k))
                    continue
            _prune(x, p, _child(path, k), out)
    elif isinstance(v, list):
        if n.items is None and n.preserve:
            return
        it = n.items if n.items is not None else _EMPTY
        for i, x in enumerate(v):
            _prune(x, it, _index(path, i), out)


# ---------------------------------------------------------------- validation

def _type_matches(v: object, types: Sequence[str]) -> bool:
    k = _kind(v)
    for t in types:
        if t == k or (t == "number" and k == "integer"):
            return True
        if t == "integer" and k == "number" and math.isfinite(v) and float(v).is_integer():  # type: ignore[arg-type]
            return True
    return False


def _multiple_of(v: float | int, m: float | int) -> bool:
    if m == 0:
        return True
    if isinstance(v, int) and isinstance(m, int):
        return v % m == 0
    try:
        return Decimal(repr(v)) % Decimal(repr(m)) == 0
    except (InvalidOperation, ValueError):
        return False


class _Run:
    """The errors of one validation: OpenAPI errors first, then the separate list-type pass."""

    __slots__ = ("errs", "late")

    def __init__(self) -> None:
        self.errs: list[FieldError] = []
        self.late: list[FieldError] = []

    @property
    def ok(self) -> bool:
        return not self.errs and not self.late

    @property
    def count(self) -> int:
        return len(self.errs) + len(self.late)

    def merge(self, other: _Run) -> None:
        self.errs.extend(other.errs)
        self.late.extend(other.late)


def _validate(v: object, n: _Node, path: str, run: _Run) -> None:
    errs = run.errs
    types = ("integer", "string") if n.int_or_string else n.types
    if v is None:
        if not n.nullable and types:
            errs.append(FieldError(TYPE_INVALID, path, v, _body(path, f"must be of type {','.join(types)}")))
        return
    if types and not _type_matches(v, types):
        errs.append(FieldError(TYPE_INVALID, path, v,
                               _body(path, f"must be of type {','.join(types)}: \"{_kind(v)}\"")))
    if n.any_of or n.one_of or n.all_of or n.not_ is not None:
        _validate_value_validations(v, n, path, run)
    if isinstance(v, str):
        _validate_string(v, n, path, errs)
    elif _is_number(v):
        _validate_number(v, n, path, errs)  # type: ignore[arg-type]
    elif isinstance(v, list):
        _validate_array(v, n, path, run)
    if n.enum is not None and _canon(v) not in {_canon(e) for e in n.enum}:
        errs.append(not_supported(path, v, [e if isinstance(e, str) else _json_text(e) for e in n.enum]))
    if isinstance(v, dict):
        _validate_object(v, n, path, run)


def _validate_value_validations(v: object, n: _Node, path: str, run: _Run) -> None:
    errs = run.errs
    if n.any_of:
        best: _Run | None = None
        for sub in n.any_of:
            r = _Run()
            _validate(v, sub, path, r)
            if r.ok:
                best = None
                break
            if best is None or r.count < best.count:
                best = r
        if best is not None:
            errs.append(invalid(path, v, _body(path, "must validate at least one schema (anyOf)")))
            run.merge(best)
    if n.one_of:
        valid = 0
        best = None
        for sub in n.one_of:
            r = _Run()
            _validate(v, sub, path, r)
            if r.ok:
                valid += 1
            elif best is None or r.count < best.count:
                best = r
        if valid != 1:
            extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            errs.append(invalid(path, v, _body(path, f"must validate one and only one schema (oneOf). {extra}")))
            if valid == 0 and best is not None:
                run.merge(best)
    if n.all_of:
        valid = 0
        for sub in n.all_of:
            r = _Run()
            _validate(v, sub, path, r)
            valid += r.ok
            run.merge(r)
        if valid != len(n.all_of):
            extra = ". None validated" if valid == 0 else ""
            errs.append(invalid(path, v, _body(path, f"must validate all the schemas (allOf){extra}")))
    if n.not_ is not None:
        r = _Run()
        _validate(v, n.not_, path, r)
        if r.ok:
            errs.append(invalid(path, v, _body(path, "must not validate the schema (not)")))


def _validate_string(v: str, n: _Node, path: str, errs: list[FieldError]) -> None:
    if n.max_length is not None and len(v) > n.max_length:
        errs.append(FieldError(TOO_LONG, path, v, f"may not be more than {n.max_length} bytes"))
    if n.min_length is not None and len(v) < n.min_length:
        errs.append(invalid(path, v, _body(path, f"should be at least {n.min_length} chars long")))
    if n.pattern is not None and (n.regex is None or n.regex.search(v) is None):
        errs.append(invalid(path, v, _body(path, f"should match '{n.pattern}'")))
    check = _STRING_FORMATS.get(n.format)
    if check is not None and not check(v):
        errs.append(FieldError(TYPE_INVALID, path, v, _body(path, f"must be of type {n.format}: {go_quote(v)}")))


def _validate_number(v: float | int, n: _Node, path: str, errs: list[FieldError]) -> None:
    bounds = _INT_FORMATS.get(n.format)
    if bounds is not None and isinstance(v, int) and not bounds[0] <= v <= bounds[1]:
        errs.append(FieldError(TYPE_INVALID, path, v, _body(path, f"must be of type {n.format}")))
    if n.multiple_of is not None and not _multiple_of(v, n.multiple_of):
        errs.append(invalid(path, v, _body(path, f"should be a multiple of {_num(n.multiple_of)}")))
    if n.maximum is not None:
        if n.exclusive_maximum and v >= n.maximum:
            errs.append(invalid(path, v, _body(path, f"should be less than {_num(n.maximum)}")))
        elif v > n.maximum:
            errs.append(invalid(path, v, _body(path, f"should be less than or equal to {_num(n.maximum)}")))
    if n.minimum is not None:
        if n.exclusive_minimum and v <= n.minimum:
            errs.append(invalid(path, v, _body(path, f"should be greater than {_num(n.minimum)}")))
        elif v < n.minimum:
            errs.append(invalid(path, v, _body(path, f"should be greater than or equal to {_num(n.minimum)}")))


def _validate_array(v: list[Any], n: _Node, path: str, run: _Run) -> None:
    errs = run.errs
    if n.items is not None:
        for i, x in enumerate(v):
            _validate(x, n.items, _index(path, i), run)
    if n.min_items is not None and len(v) < n.min_items:
        errs.append(invalid(path, v, _body(path, f"should have at least {n.min_items} items")))
    if n.max_items is not None and len(v) > n.max_items:
        errs.append(FieldError(TOO_MANY, path, len(v), f"must have at most {n.max_items} items"))
    if n.unique_items and len({_canon(x) for x in v}) != len(v):
        errs.append(invalid(path, v, _body(path, "shouldn't contain duplicates")))
    if n.list_type == "set":
        seen: set[object] = set()
        for i, x in enumerate(v):
            key = _canon(x)
            if key in seen:
                run.late.append(duplicate(_index(path, i), x))
            seen.add(key)
    elif n.list_type == "map" and n.map_keys:
        item_props = n.items.properties if n.items is not None else {}
        seen = set()
        for i, x in enumerate(v):
            if not isinstance(x, dict):
                continue
            values: dict[str, Any] = {}
            for k in n.map_keys:
                if k in x:
                    values[k] = x[k]
                else:
                    p = item_props.get(k)
                    values[k] = p.default if p is not None and p.has_default else None
            key = _canon(values)
            if key in seen:
                run.late.append(duplicate(_index(path, i), values))
            seen.add(key)


def _validate_object(v: dict[str, Any], n: _Node, path: str, run: _Run) -> None:
    errs = run.errs
    if n.max_properties is not None and len(v) > n.max_properties:
        errs.append(FieldError(TOO_MANY, path, len(v), f"must have at most {n.max_properties} items"))
    if n.min_properties is not None and len(v) < n.min_properties:
        errs.append(invalid(path, v, _body(path, f"should have at least {n.min_properties} properties")))
    if n.additional is False:
        for k in v:
            if k not in n.properties:
                errs.append(invalid(path, k, _body(_child(path, k), "is a forbidden property")))
    for k in n.required:
        if k not in v:
            errs.append(required(_child(path, k)))
    for k, p in n.properties.items():
        if k in v:
            _validate(v[k], p, _child(path, k), run)
    if isinstance(n.additional, _Node):
        for k, x in v.items():
            if k not in n.properties:
                _validate(x, n.additional, _child(path, k), run)
    if n.embedded and v:
        api_version, kind = v.get("apiVersion"), v.get("kind")
        if not isinstance(kind, str) or not kind:
            run.late.append(required(_child(path, "kind"), "must not be empty"))
        if not isinstance(api_version, str) or not api_version:
            run.late.append(required(_child(path, "apiVersion"), "must not be empty"))
        elif api_version.count("/") > 1:
            run.late.append(invalid(_child(path, "apiVersion"), api_version,
                                    f"unexpected GroupVersion string: {api_version}"))


def _validate_rules(v: object, n: _Node, path: str, old: object, has_old: bool,
                    errs: list[FieldError]) -> None:
    """Evaluate ``x-kubernetes-validations`` top down (the node's own rules, then its
    children's, as kube's CEL validator walks); ``old`` is the value at the same place before
    an update (objects' properties only)."""
    if n.rules and v is not None:
        errs.extend(evaluate(n.rules, v, old, has_old, path,
                             n.types[0] if n.types else "object"))
    if isinstance(v, dict):
        old_map = old if has_old and isinstance(old, dict) else None
        for k, x in v.items():
            child = n.properties.get(k) or (n.additional if isinstance(n.additional, _Node)
                                            else None)
            if child is not None:
                _validate_rules(x, child, _child(path, k), None if old_map is None
                                else old_map.get(k), old_map is not None and k in old_map, errs)
    elif isinstance(v, list) and n.items is not None:
        for i, x in enumerate(v):
            _validate_rules(x, n.items, _index(path, i), None, False, errs)


# ---------------------------------------------------------------- public API

class CompiledSchema:
    """A compiled ``openAPIV3Schema``: validate, default and prune custom objects.

    Built once per CRD version by :func:`compile_schema` and shared by all
    requests; it holds no per-request state.
    """

    __slots__ = ("_root",)

    def __init__(self, root: _Node | None) -> None:
        self._root = root

    @property
    def accepts_everything(self) -> bool:
        """True for the schema-less form (``compile_schema(None)``)."""
        return self._root is None

    def default(self, obj: dict[str, Any]) -> None:
        """Apply ``default`` values in place (see the module docstring)."""
        if self._root is not None:
            _default(obj, self._root)

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Drop unspecified fields in place; returns their paths (``spec.foo``)."""
        if self._root is None:
            return []
        out: list[str] = []
        _prune(obj, self._root, "", out, resource=True)
        return out

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
        """Every schema violation of ``obj``, as kube-apiserver reports them, then the
        violations of its validation rules (``old``: the object before an update)."""
        if self._root is None:
            return []
        run = _Run()
        _validate(obj, self._root, "", run)
        errs = run.errs + run.late
        if not any(e.type == TYPE_INVALID for e in errs):  # kube's blocking errors
            _validate_rules(obj, self._root, "", old, old is not None, errs)
        return errs


def compile_schema(schema: Mapping[str, Any] | None) -> CompiledSchema:
    """Compile a CRD version's ``openAPIV3Schema``; ``None`` accepts everything."""
    return CompiledSchema(None if schema is None else _compile(schema))


# ---------------------------------------------------------------- structural rules

_VALUE_VALIDATION_KEYS = ("anyOf", "allOf", "oneOf")
_NESTED_FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
)
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
_ROOT, _FIELD, _ITEM = "root", "field", "item"


def _set_flag(v: object) -> bool:
    """Whether a keyword counts as set (Go's non-zero value)."""
    return v not in (None, False, "", [], {})


class _CRDSchemaCheck:
    def __init__(self) -> None:
        self.errs: list[FieldError] = []

    def structural(self, s: Mapping[str, Any], path: str, lvl: str) -> None:
        """One node of the structural part of the schema."""
        errs = self.errs
        try:
            compile_rules(s.get("x-kubernetes-validations"))
        except RuleError as exc:
            field_name, _, detail = str(exc).partition(": ")
            rule = s["x-kubernetes-validations"][int(field_name.split("[")[1].split("]")[0])]
            errs.append(invalid(_child(path, field_name), rule.get("rule"), detail))
        t = s.get("type")
        preserve = s.get("x-kubernetes-preserve-unknown-fields")
        int_or_string = s.get("x-kubernetes-int-or-string") is True
        embedded = s.get("x-kubernetes-embedded-resource") is True
        props = s.get("properties")
        props = props if isinstance(props, Mapping) else {}
        ap = s.get("additionalProperties")
        items = s.get("items")
        if t is not None and t not in _TYPES:
            errs.append(not_supported(_child(path, "type"), t, _TYPES))
        if embedded and t != "object":
            if t:
                errs.append(invalid(_child(path, "type"), t,
                                    "must be object if x-kubernetes-embedded-resource is true"))
            else:
                errs.append(required(_child(path, "type"), "must be object if x-kubernetes-embedded-resource is true"))
        elif not t and not int_or_string and preserve is not True:
            detail = {_ROOT: "must not be empty at the root",
                      _ITEM: "must not be empty for specified array items"}.get(
                lvl, "must not be empty for specified object fields")
            errs.append(required(_child(path, "type"), detail))
        if lvl == _ROOT and t and t != "object":
            errs.append(invalid(_child(path, "type"), t, "must be object at the root"))
        if int_or_string and preserve is True:
            errs.append(invalid(_child(path, "x-kubernetes-preserve-unknown-fields"), True,
                                "must be false if x-kubernetes-int-or-string is true"))
        if int_or_string and embedded:
            errs.append(invalid(_child(path, "x-kubernetes-embedded-resource"), True,
                                "must be false if x-kubernetes-int-or-string is true"))
        if preserve is False:
            errs.append(invalid(_child(path, "x-kubernetes-preserve-unknown-fields"), False,
                                "must be true or undefined"))
        if ap is not None:
            if lvl == _ROOT:
                errs.append(forbidden(_child(path, "additionalProperties"), "must not be used at the root"))
            if embedded:
                errs.append(forbidden(_child(path, "additionalProperties"),
                                      "must not be used if x-kubernetes-embedded-resource is set"))
            if props and ap is not True:
                errs.append(forbidden(_child(path, "additionalProperties"),
                                      "additionalProperties and properties are mutual exclusive"))
        if embedded and preserve is not True and not props:
            errs.append(required(_child(path, "properties"),
                                 "must not be empty if x-kubernetes-embedded-resource is true "
                                 "without x-kubernetes-preserve-unknown-fields"))
        if lvl == _ROOT or embedded:
            self.resource_meta(s, props, path, lvl == _ROOT)
        if s.get("uniqueItems") is True:
            errs.append(forbidden(_child(path, "uniqueItems"),
                                  "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
        self.pattern(s, path)
        if t == "array" and items is None:
            errs.append(required(_child(path, "items"), "must be specified"))
        if isinstance(items, list):
            errs.append(forbidden(_child(path, "items"), "items must be a schema object and not an array"))
        self.list_type(s, path)
        for k, sub in props.items():
            self.structural_child(sub, f"{path}.properties[{k}]", _FIELD)
        if isinstance(ap, Mapping):
            self.structural_child(ap, _child(path, "additionalProperties"), _FIELD)
        if isinstance(items, Mapping):
            self.structural_child(items, _child(path, "items"), _ITEM)
        self.value_validations(s, path, skip_int_or_string=int_or_string)
        if "default" in s:
            self.default(s, path, lvl)

    def structural_child(self, sub: object, path: str, lvl: str) -> None:
        if isinstance(sub, Mapping):
            self.structural(sub, path, lvl)
        else:
            self.errs.append(invalid(path, sub, "must be an object"))

    def resource_meta(self, s: Mapping[str, Any], props: Mapping[str, Any], path: str, root: bool) -> None:
        """The ``kind``/``apiVersion``/``metadata`` properties of a resource (the root or an embedded one)."""
        errs = self.errs
        for name, want in (("kind", "string"), ("apiVersion", "string"), ("metadata", "object")):
            sub = props.get(name)
            if isinstance(sub, Mapping) and sub.get("type") != want:
                errs.append(invalid(f"{path}.properties[{name}].type", sub.get("type", ""), f"must be {want}"))
        meta = props.get("metadata")
        if not root or not isinstance(meta, Mapping):
            return
        meta_props = meta.get("properties")
        meta_props = meta_props if isinstance(meta_props, Mapping) else {}
        extra_keys = set(meta) - {"type", "properties", "default"}
        extra_props = set(meta_props) - {"name", "generateName"}
        if any(_set_flag(meta[k]) for k in extra_keys) or extra_props:
            errs.append(forbidden(f"{path}.properties[metadata]",
                                  "must not specify anything other than name and generateName, "
                                  "but metadata is implicitly specified"))

    def pattern(self, s: Mapping[str, Any], path: str) -> None:
        p = s.get("pattern")
        if p is None:
            return
        if not isinstance(p, str):
            self.errs.append(invalid(_child(path, "pattern"), p, "must be a string"))
            return
        try:
            re.compile(p)
        except re.error as e:
            self.errs.append(invalid(_child(path, "pattern"), p, f"must be a valid regular expression, but isn't: {e}"))

    def list_type(self, s: Mapping[str, Any], path: str) -> None:
        errs = self.errs
        t = s.get("type")
        lt = s.get("x-kubernetes-list-type")
        keys = s.get("x-kubernetes-list-map-keys")
        keys = [str(k) for k in keys] if isinstance(keys, list) else []
        lt_path = _child(path, "x-kubernetes-list-type")
        keys_path = _child(path, "x-kubernetes-list-map-keys")
        items_path = _child(path, "items")
        items = s.get("items")
        if lt is not None and t != "array":
            if t:
                errs.append(invalid(_child(path, "type"), t, "must be array if x-kubernetes-list-type is specified"))
            else:
                errs.append(required(_child(path, "type"), "must be array if x-kubernetes-list-type is specified"))
        elif lt == "set" and isinstance(items, Mapping):
            if items.get("type") == "array" and items.get("x-kubernetes-list-type", "atomic") != "atomic":
                errs.append(invalid(_child(items_path, "x-kubernetes-list-type"), items.get("x-kubernetes-list-type"),
                                    "must be atomic as item of a list with x-kubernetes-list-type=set"))
            if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
                errs.append(invalid(_child(items_path, "x-kubernetes-map-type"), items.get("x-kubernetes-map-type"),
                                    "must be atomic as item of a list with x-kubernetes-list-type=set"))
        if lt is not None and lt not in _LIST_TYPES:
            errs.append(not_supported(lt_path, lt, ("atomic", "set", "map")))
        if keys:
            if lt is None:
                errs.append(required(lt_path, "must be map if x-kubernetes-list-map-keys is non-empty"))
            elif lt != "map":
                errs.append(invalid(lt_path, lt, "must be map if x-kubernetes-list-map-keys is non-empty"))
        if lt not in ("map", "set"):
            return
        if lt == "map":
            if not keys:
                errs.append(required(keys_path, "must not be empty if x-kubernetes-list-type is map"))
            if items is None:
                errs.append(required(items_path, "must have a schema if x-kubernetes-list-type is map"))
            elif isinstance(items, Mapping) and items.get("type") != "object":
                errs.append(invalid(_child(items_path, "type"), items.get("type", ""),
                                    "must be object if parent array's x-kubernetes-list-type is map"))
        if not isinstance(items, Mapping):
            return
        item_props = items.get("properties")
        item_props = item_props if isinstance(item_props, Mapping) else {}
        if lt == "map" and items.get("type") == "object":
            seen: set[str] = set()
            for k in keys:
                prop = item_props.get(k)
                if isinstance(prop, Mapping):
                    if prop.get("type") in ("array", "object"):
                        errs.append(invalid(f"{items_path}.properties[{k}].type", items.get("type"),
                                            "must be a scalar type if parent array's x-kubernetes-list-type is map"))
                else:
                    errs.append(invalid(keys_path, keys, "entries must all be names of item properties"))
                if k in seen:
                    errs.append(invalid(keys_path, keys, "must not contain duplicate entries"))
                seen.add(k)
        if items.get("nullable") is True:
            errs.append(forbidden(_child(items_path, "nullable"),
                                  f"cannot be nullable when x-kubernetes-list-type is {lt}"))
        if lt == "map":
            req = items.get("required")
            req = req if isinstance(req, list) else []
            for k in keys:
                prop = item_props.get(k)
                if not isinstance(prop, Mapping):
                    continue
                kpath = f"{items_path}.properties[{k}]"
                if k not in req and prop.get("default") is None:
                    errs.append(required(_child(kpath, "default"), "this property is in x-kubernetes-list-map-keys, "
                                         "so it must have a default or be a required property"))
                if prop.get("nullable") is True:
                    errs.append(forbidden(_child(kpath, "nullable"),
                                          "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))

    def value_validations(self, s: Mapping[str, Any], path: str, skip_int_or_string: bool) -> None:
        """``anyOf``/``allOf``/``oneOf``/``not`` of a node; the int-or-string ``anyOf`` idiom is exempt."""
        for key in _VALUE_VALIDATION_KEYS:
            subs = s.get(key)
            if subs is None:
                continue
            if not isinstance(subs, list):
                self.errs.append(invalid(_child(path, key), subs, "must be an array"))
                continue
            if skip_int_or_string and key == "anyOf" and subs == _INT_OR_STRING_ANY_OF:
                continue
            for i, sub in enumerate(subs):
                skip = skip_int_or_string and key == "allOf" and i == 0
                self.value_validation(sub, _index(_child(path, key), i), skip)
        if "not" in s:
            self.value_validation(s["not"], _child(path, "not"), False)

    def value_validation(self, s: object, path: str, skip_int_or_string: bool) -> None:
        """A node inside a value validation: it may not carry structural keywords."""
        if not isinstance(s, Mapping):
            self.errs.append(invalid(path, s, "must be an object"))
            return
        self.value_validations(s, path, skip_int_or_string)
        self.pattern(s, path)
        items = s.get("items")
        if isinstance(items, Mapping):
            self.value_validation(items, _child(path, "items"), False)
        props = s.get("properties")
        if isinstance(props, Mapping):
            for k, sub in props.items():
                self.value_validation(sub, f"{path}.properties[{k}]", False)
        for key, detail in _NESTED_FORBIDDEN:
            if _set_flag(s.get(key)) or (key in ("default", "additionalProperties") and key in s):
                self.errs.append(forbidden(_child(path, key), detail))
        if isinstance(props, Mapping) and "metadata" in props:
            self.errs.append(forbidden(f"{path}.properties[metadata]", "must not be specified in a nested context"))

    def default(self, s: Mapping[str, Any], path: str, lvl: str) -> None:
        """A ``default`` must validate against its own schema, after its own nested defaults apply."""
        dpath = _child(path, "default")
        node = _compile(s)
        value = copy.deepcopy(s["default"])
        _default(value, node)
        run = _Run()
        _validate(value, node, "", run)
        for e in run.errs + run.late:
            self.errs.append(FieldError(e.type, f"{dpath}.{e.field}" if e.field else dpath, e.value, e.detail))
        pruned: list[str] = []
        _prune(value, node, "", pruned, resource=lvl == _ROOT)
        if pruned:
            self.errs.append(invalid(dpath, s["default"], f"must not have unknown fields: [{' '.join(pruned)}]"))


def validate_crd_schema(schema: object,
                        path: str = "spec.versions[0].schema.openAPIV3Schema") -> list[FieldError]:
    """The structural-schema errors of a CRD version's ``openAPIV3Schema`` (empty when valid)."""
    if schema is None:
        return [required(path, "schemas are required")]
    if not isinstance(schema, Mapping):
        return [invalid(path, schema, "must be an object")]
    check = _CRDSchemaCheck()
    if schema.get("nullable") is True:
        check.errs.append(forbidden(_child(path, "nullable"), "nullable cannot be true at the root"))
    check.structural(schema, path, _ROOT)
    return check.errs
