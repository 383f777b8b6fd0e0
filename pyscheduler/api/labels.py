"""Label selectors with Kubernetes' syntax, semantics and error texts.

Label selectors come in two forms. The query-string form
(``?labelSelector=app=web,tier notin (db),!canary``) is parsed by :func:`parse_label_selector`
with apimachinery's grammar, so the same strings are accepted, the same implicit rules apply
(``in``/``notin`` are ordinary words where values are expected, ``a in ()`` means ``a in ("")``,
``a=`` means ``a=""``), requirements are sorted by key, and the same error texts are produced.
The API-object form (``matchLabels`` + ``matchExpressions``) is converted by
:func:`label_selector_from_dict` following ``LabelSelectorAsSelector``: an absent selector
(``None``) matches *nothing*, an empty one (``{}``) matches *everything*.
:func:`label_selector_from_set` is the unvalidated ``SelectorFromSet`` used for ``spec.selector``
maps of Services and ReplicationControllers.

Parsing produces an immutable :class:`LabelSelector` holding the requirements as
``(key, operator, values)`` tuples and, for matching, one small predicate closure per requirement,
so :meth:`LabelSelector.matches` is a short loop of dictionary look-ups. Parsed query strings are
memoised. Semantics follow Kubernetes: ``a!=b`` and ``a notin (b)`` also match objects that have
no label ``a``.

Errors are :class:`SelectorError`; ``str(err)`` names the offending selector and ``err.reason`` is
the exact text kube-apiserver would return.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from pyscheduler.api.validation import (
    FieldError,
    aggregate_message,
    go_quote,
    invalid,
    is_qualified_name,
    is_valid_label_value,
)

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EVERYTHING",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOTHING",
    "NOT_EQUALS",
    "NOT_IN",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "label_selector_from_dict",
    "label_selector_from_set",
    "parse_label_selector",
]

# Operators, spelled as apimachinery's selection.Operator values.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

Requirement = tuple[str, str, tuple[str, ...]]
"""``(key, operator, values)`` of one label selector requirement."""

_Labels = Mapping[str, str]
_Predicate = Callable[[_Labels], bool]
_NO_LABELS: dict[str, str] = {}


class SelectorError(ValueError):
    """An invalid label or field selector.

    ``reason`` is the text kube-apiserver returns for it; ``selector`` the
    offending selector string (empty for the object form).
    """

    def __init__(self, message: str, *, reason: str | None = None, selector: str = "") -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        self.selector = selector


# ---------------------------------------------------------------- label selectors

_INT64 = re.compile(r"[+-]?[0-9]+")


def _parse_int64(s: str) -> int | None:
    if not _INT64.fullmatch(s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def _predicate(key: str, op: str, values: tuple[str, ...]) -> _Predicate:
    if op == EXISTS:
        return lambda labels: key in labels
    if op == DOES_NOT_EXIST:
        return lambda labels: key not in labels
    if op in (GREATER_THAN, LESS_THAN):
        bound = _parse_int64(values[0]) if len(values) == 1 else None
        greater = op == GREATER_THAN

        def compare(labels: _Labels) -> bool:
            v = labels.get(key)
            n = None if v is None or bound is None else _parse_int64(v)
            return n is not None and bound is not None and (n > bound if greater else n < bound)
        return compare
    negate = op in (NOT_IN, NOT_EQUALS)
    if len(values) == 1:
        value = values[0]
        if negate:
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    choices = frozenset(values)
    if negate:
        return lambda labels: labels.get(key) not in choices
    return lambda labels: labels.get(key) in choices


_OP_TEXT = {GREATER_THAN: ">", LESS_THAN: "<"}


def _requirement_text(key: str, op: str, values: tuple[str, ...]) -> str:
    if op == EXISTS:
        return key
    if op == DOES_NOT_EXIST:
        return "!" + key
    text = values[0] if len(values) == 1 else ",".join(sorted(values))
    if op in (IN, NOT_IN):
        return f"{key} {op} ({text})"
    return f"{key}{_OP_TEXT.get(op, op)}{text}"


class LabelSelector:
    """An immutable, pre-compiled label selector (AND of its requirements)."""

    __slots__ = ("_nothing", "_preds", "_text", "requirements")

    requirements: tuple[Requirement, ...]

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        reqs = tuple(sorted(requirements, key=lambda r: r[0]))
        self.requirements = reqs
        self._nothing = nothing
        self._preds: tuple[_Predicate, ...] = tuple(_predicate(*r) for r in reqs)
        self._text: str | None = None

    @property
    def empty(self) -> bool:
        """True when the selector matches every object (no requirements)."""
        return not self.requirements and not self._nothing

    @property
    def matches_nothing(self) -> bool:
        """True for the selector built from an absent (``None``) API selector."""
        return self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels is selected."""
        if self._nothing:
            return False
        if labels is None:
            labels = _NO_LABELS
        for pred in self._preds:
            if not pred(labels):
                return False
        return True

    def requires_exact_match(self, key: str) -> str | None:
        """The single value a label must have to match (``a=b``, ``a in (b)``), else None."""
        for k, op, values in self.requirements:
            if k == key:
                if op in (EQUALS, DOUBLE_EQUALS, IN) and len(values) == 1:
                    return values[0]
                return None
        return None

    def __str__(self) -> str:
        if self._text is None:
            self._text = ",".join(_requirement_text(*r) for r in self.requirements)
        return self._text

    def __repr__(self) -> str:
        return "LabelSelector(nothing)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self.requirements == other.requirements and self._nothing == other._nothing

    def __hash__(self) -> int:
        return hash((self.requirements, self._nothing))


EVERYTHING = LabelSelector()
"""Matches every object."""
NOTHING = LabelSelector(nothing=True)
"""Matches no object."""


def _key_errors(key: str, path: str) -> list[FieldError]:
    msgs = is_qualified_name(key)
    return [invalid(path, key, "; ".join(msgs))] if msgs else []


def _new_requirement(key: str, op: str, values: list[str]) -> Requirement:
    """``labels.NewRequirement``: validates, raising the aggregated errors as a plain ValueError."""
    errs = _key_errors(key, "key")
    if op in (IN, NOT_IN):
        if not values:
            errs.append(invalid("values", values, "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(values) != 1:
            errs.append(invalid("values", values, "exact-match compatibility requires one single value"))
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            errs.append(invalid("values", values, "values set must be empty for exists and does not exist"))
    elif op in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            errs.append(invalid("values", values, "for 'Gt', 'Lt' operators, exactly one value is required"))
        errs.extend(invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
                    for i, v in enumerate(values) if _parse_int64(v) is None)
    for i, v in enumerate(values):
        msgs = is_valid_label_value(v)
        if msgs:
            errs.append(invalid(f"values[{i}][{key}]", v, "; ".join(msgs)))
    if errs:
        raise ValueError(aggregate_message(errs))
    return key, op, tuple(values)


# Lexer tokens.
_EOS, _CPAR, _COMMA, _NOT, _DEQ, _EQ, _GT, _IDENT, _IN, _LT, _NEQ, _NOTIN, _OPAR = range(13)
_KEYWORDS = {")": _CPAR, ",": _COMMA, "!": _NOT, "==": _DEQ, "=": _EQ, ">": _GT, "in": _IN, "<": _LT,
             "!=": _NEQ, "notin": _NOTIN, "(": _OPAR}
_SPECIAL = frozenset("=!(),<>")
_SPACE = frozenset(" \t\r\n")
_BINARY_OPS = {_IN: IN, _EQ: EQUALS, _DEQ: DOUBLE_EQUALS, _GT: GREATER_THAN, _LT: LESS_THAN,
               _NOTIN: NOT_IN, _NEQ: NOT_EQUALS}
_BINARY_OPS_TEXT = "in, notin, =, ==, !=, gt, lt"


def _lex(s: str) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in _SPACE:
            i += 1
        if i >= n:
            items.append((_EOS, ""))
            return items
        if s[i] in _SPECIAL:
            lit = s[i:i + 2] if s[i:i + 2] in ("==", "!=") else s[i]
            items.append((_KEYWORDS[lit], lit))
            i += len(lit)
            continue
        j = i
        while j < n and s[j] not in _SPECIAL and s[j] not in _SPACE:
            j += 1
        lit = s[i:j]
        items.append((_KEYWORDS[lit] if lit in ("in", "notin") else _IDENT, lit))
        i = j


class _Parser:
    """apimachinery's label selector parser, with the same look-ahead contexts and messages."""

    __slots__ = ("items", "pos")

    def __init__(self, s: str) -> None:
        self.items = _lex(s)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        return (_IDENT, lit) if values and tok in (_IN, _NOTIN) else (tok, lit)

    def take(self, values: bool = True) -> tuple[int, str]:
        item = self.peek(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok in (_IDENT, _NOT):
                try:
                    reqs.append(self.requirement())
                except ValueError as exc:
                    raise ValueError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.take()
                if tok == _EOS:
                    return reqs
                if tok != _COMMA:
                    raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
                tok2, lit2 = self.peek()
                if tok2 not in (_IDENT, _NOT):
                    raise ValueError(f"found '{lit2}', expected: identifier after ','")
            elif tok == _EOS:
                return reqs
            else:
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        op = ""
        tok, key = self.take()
        if tok == _NOT:
            op = DOES_NOT_EXIST
            tok, key = self.take()
        if tok != _IDENT:
            raise ValueError(f"found '{key}', expected: identifier")
        if errs := _key_errors(key, "<nil>"):
            raise ValueError(errs[0].message)
        if self.peek()[0] in (_EOS, _COMMA) and op != DOES_NOT_EXIST:
            op = EXISTS
        if op in (EXISTS, DOES_NOT_EXIST):
            return _new_requirement(key, op, [])
        tok, lit = self.take(values=False)
        op = _BINARY_OPS.get(tok, "")
        if not op:
            raise ValueError(f"found '{lit}', expected: {_BINARY_OPS_TEXT}")
        values = self.value_set() if op in (IN, NOT_IN) else self.exact_value()
        return _new_requirement(key, op, sorted(values))

    def value_set(self) -> set[str]:
        tok, lit = self.take()
        if tok != _OPAR:
            raise ValueError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == _CPAR:
            self.take()
            return {""}
        if tok not in (_IDENT, _COMMA):
            raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == _IDENT:
                values.add(lit)
                tok2, lit2 = self.peek()
                if tok2 == _CPAR:
                    break
                if tok2 != _COMMA:
                    raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            elif tok == _COMMA:
                if not values:
                    values.add("")
                tok2 = self.peek()[0]
                if tok2 == _CPAR:
                    values.add("")
                    break
                if tok2 == _COMMA:
                    values.add("")
            else:
                raise ValueError(f"found '{lit}', expected: ',', or identifier")
        self.take()  # the ')'
        return values

    def exact_value(self) -> set[str]:
        if self.peek()[0] in (_EOS, _COMMA):
            return {""}
        tok, lit = self.take()
        if tok == _IDENT:
            return {lit}
        raise ValueError(f"found '{lit}', expected: identifier")


@lru_cache(maxsize=1024)
def parse_label_selector(s: str) -> LabelSelector:
    """Parse the query-string form (``a=b,c!=d,e in (f,g),h,!i``); ``""`` selects everything.

    Raises :class:`SelectorError`.
    """
    if not s or s.isspace():
        return EVERYTHING
    try:
        reqs = _Parser(s).parse()
    except ValueError as exc:
        raise SelectorError(f"couldn't parse the selector string \"{s}\": {exc}", reason=str(exc), selector=s) from None
    return LabelSelector(reqs) if reqs else EVERYTHING


_DICT_OPS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_dict(sel: Mapping[str, Any] | None) -> LabelSelector:
    """``LabelSelectorAsSelector`` for a ``metav1.LabelSelector`` in JSON form.

    ``None`` gives :data:`NOTHING` (matches no object); a selector without
    ``matchLabels`` and ``matchExpressions`` gives :data:`EVERYTHING`.
    Raises :class:`SelectorError` for invalid keys, values or operators.

    Selectors are immutable, and the pods of one workload carry the same ones: a selector
    read before is answered from a bounded cache (the same object), not validated again.
    """
    if sel is None:
        return NOTHING
    key = _selector_key(sel)
    if key is None:  # not made of strings only: parse it, and report what is wrong
        return _label_selector_from_dict(sel)
    hit = _SELECTOR_CACHE.get(key)
    if hit is None:
        try:
            hit = _label_selector_from_dict(sel)
        except SelectorError as exc:
            hit = exc
        if len(_SELECTOR_CACHE) >= _SELECTOR_CACHE_SIZE:
            _SELECTOR_CACHE.clear()
        _SELECTOR_CACHE[key] = hit
    if isinstance(hit, SelectorError):
        raise SelectorError(str(hit))
    return hit


_SELECTOR_CACHE: dict[tuple[Any, ...], LabelSelector | SelectorError] = {}
_SELECTOR_CACHE_SIZE = 4096


def _selector_key(sel: Any) -> tuple[Any, ...] | None:
    """A selector's content as a hashable key, when it holds nothing but strings where the
    API has strings (the cache then answers exactly what parsing it again would); else None."""
    if not isinstance(sel, Mapping):
        return None
    labels = sel.get("matchLabels") or {}
    exprs = sel.get("matchExpressions") or []
    if type(labels) is not dict or type(exprs) is not list:
        return None
    items = tuple(labels.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:
            return None
    parts = []
    for e in exprs:
        if type(e) is not dict:
            return None
        values = e.get("values") or []
        key, op = e.get("key") or "", e.get("operator") or ""
        if type(values) is not list or type(key) is not str or type(op) is not str \
                or not all(type(v) is str for v in values):
            return None
        parts.append((key, op, tuple(values)))
    return items, tuple(parts)


def _label_selector_from_dict(sel: Mapping[str, Any]) -> LabelSelector:
    if not isinstance(sel, Mapping):
        raise SelectorError("label selector must be an object")
    labels = sel.get("matchLabels") or {}
    exprs = sel.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(exprs, list):
        raise SelectorError("matchLabels must be an object and matchExpressions an array")
    if not labels and not exprs:
        return EVERYTHING
    reqs: list[Requirement] = []
    try:
        for k, v in labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError("matchLabels keys and values must be strings")
            reqs.append(_new_requirement(k, EQUALS, [v]))
        for expr in exprs:
            if not isinstance(expr, Mapping):
                raise ValueError("matchExpressions entries must be objects")
            raw_op = expr.get("operator") or ""
            op = _DICT_OPS.get(raw_op) if isinstance(raw_op, str) else None
            if op is None:
                raise ValueError(f"{go_quote(str(raw_op))} is not a valid label selector operator")
            key = expr.get("key") or ""
            values = expr.get("values") or []
            if not isinstance(key, str) or not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ValueError("matchExpressions key and values must be strings")
            reqs.append(_new_requirement(key, op, list(values)))
    except ValueError as exc:
        raise SelectorError(str(exc)) from None
    return LabelSelector(reqs)


def label_selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """``SelectorFromSet``: equality on every pair, unvalidated; empty or ``None`` selects everything."""
    if not labels:
        return EVERYTHING
    return LabelSelector((k, EQUALS, (v,)) for k, v in labels.items())
