"""CRD validation rules (``x-kubernetes-validations``), evaluated with CEL as kube-apiserver does.

Each rule is compiled once with ``cel-python`` (a maintained implementation of the Common
Expression Language) when its schema is compiled. At validation time a rule runs with ``self``
bound to the value at its schema node; a rule that returns false is reported as
kube-apiserver reports it: ``<path><fieldPath>: Invalid value: <message>`` at an object or array
node, ``<path><fieldPath>: Invalid value: <the value>: <message>`` at a scalar one
(``failed rule: <rule>`` without a message), ``Forbidden`` or ``Required value`` when the rule
names that ``reason``. Rules run only when the object has no type errors (kube's "blocking"
errors), and transition rules (those naming ``oldSelf``) only on update, where an old value
exists at that node.

Not done: ``messageExpression``, the cost budget, and kube's CEL extension libraries beyond what
cel-python offers (its standard macros and string functions cover the rules of our own CRD).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from pyscheduler.api.validation import INVALID, OMIT_VALUE, FieldError, forbidden, required

__all__ = ["Rule", "RuleError", "compile_rules", "evaluate"]

_ENV = celpy.Environment()


class RuleError(ValueError):
    """A rule that does not compile; the message says where."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled ``x-kubernetes-validations`` entry."""

    text: str
    program: Any
    message: str
    field_path: str
    reason: str
    transition: bool


def compile_rules(raw: object) -> tuple[Rule, ...]:
    """The rules of one schema node (its ``x-kubernetes-validations`` list)."""
    if not isinstance(raw, list):
        return ()
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("rule"), str):
            continue
        text = entry["rule"]
        try:
            program = _ENV.program(_ENV.compile(text))
        except CELParseError as exc:
            raise RuleError(f"x-kubernetes-validations[{i}].rule: compilation failed: "
                            f"{str(exc).strip()}") from None
        out.append(Rule(text=text, program=program, message=str(entry.get("message") or ""),
                        field_path=str(entry.get("fieldPath") or ""),
                        reason=str(entry.get("reason") or "FieldValueInvalid"),
                        transition="oldSelf" in text))
    return tuple(out)


def _cel(value: object) -> Any:
    return json_to_cel(value)  # type: ignore[arg-type]


def evaluate(rules: tuple[Rule, ...], value: object, old: object, has_old: bool, path: str,
             schema_type: str) -> list[FieldError]:
    """The errors of ``rules`` for ``value`` (``old`` the value before an update)."""
    errs: list[FieldError] = []
    for rule in rules:
        if rule.transition and not has_old:
            continue
        activation = {"self": _cel(value)}
        if rule.transition:
            activation["oldSelf"] = _cel(old)
        where = f"{path}.{rule.field_path.lstrip('.')}" if rule.field_path else path
        where = where.lstrip(".")
        try:
            result = rule.program.evaluate(activation)
        except CELEvalError as exc:
            result = exc
        if isinstance(result, CELEvalError):
            detail = result.args[0] if result.args else result
            errs.append(FieldError(INVALID, where, schema_type,
                                   f"{rule.text}: evaluation error: {detail}"))
            continue
        if isinstance(result, celtypes.BoolType) and bool(result):
            continue
        message = rule.message or f"failed rule: {rule.text}"
        if rule.reason == "FieldValueForbidden":
            errs.append(forbidden(where, message))
        elif rule.reason == "FieldValueRequired":
            errs.append(required(where, message))
        else:
            # kube prints the value a rule failed on, except an object's or an array's.
            shown = OMIT_VALUE if schema_type in ("object", "array") else value
            errs.append(FieldError(INVALID, where, shown, message))
    return errs
