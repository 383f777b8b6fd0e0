"""Field selectors with Kubernetes' syntax, semantics and error texts.

Field selectors (``?fieldSelector=spec.nodeName=,status.phase!=Failed``) are parsed by
:func:`parse_field_selector` into ``(field, op, value)`` requirements, op ``=`` or ``!=``; values
may be empty and may contain ``\\,``, ``\\=`` and ``\\\\`` escapes. Which fields an object offers is
resource specific: :func:`object_fields` extracts them (``metadata.name`` and
``metadata.namespace`` for everything, plus e.g. ``spec.nodeName`` for pods),
:func:`supported_fields` lists them and :func:`check_field_selector` rejects a selector naming an
unsupported field -- raising :class:`~pyscheduler.api.labels.SelectorError` with the message
kube-apiserver puts in its 400 Bad Request, e.g. ``field label not supported: foo`` -- and applies
Kubernetes' field renames (``spec.host`` -> ``spec.nodeName`` for pods).

Label selectors live in :mod:`pyscheduler.api.labels`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from pyscheduler.api.labels import EQUALS, NOT_EQUALS, SelectorError
from pyscheduler.api.validation import go_quote

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "check_field_selector",
    "object_fields",
    "parse_field_selector",
    "supported_fields",
]

FieldRequirement = tuple[str, str, str]
"""``(field, operator, value)`` of one field selector requirement; operator ``=`` or ``!=``."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape(value: str) -> str:
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    slash = False
    for ch in value:
        if slash:
            if ch not in "\\,=":
                raise ValueError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            slash = False
        elif ch == "\\":
            slash = True
        elif ch in ",=":
            raise ValueError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if slash:
        raise ValueError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


class FieldSelector:
    """An immutable field selector: an AND of ``field=value`` / ``field!=value`` terms."""

    __slots__ = ("_eq", "_ne", "fields", "requirements")

    requirements: tuple[FieldRequirement, ...]
    fields: frozenset[str]

    def __init__(self, requirements: Iterable[FieldRequirement] = ()) -> None:
        self.requirements = tuple(requirements)
        self.fields = frozenset(f for f, _, _ in self.requirements)
        self._eq = tuple((f, v) for f, op, v in self.requirements if op != NOT_EQUALS)
        self._ne = tuple((f, v) for f, op, v in self.requirements if op == NOT_EQUALS)

    @property
    def empty(self) -> bool:
        """True when the selector matches everything."""
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether an object with these field values (see :func:`object_fields`) is selected.

        A field missing from ``fields`` counts as the empty string.
        """
        for f, v in self._eq:
            if fields.get(f, "") != v:
                return False
        for f, v in self._ne:
            if fields.get(f, "") == v:
                return False
        return True

    def requires_exact_match(self, field: str) -> str | None:
        """The value ``field`` must equal (``spec.nodeName=n1`` -> ``"n1"``), else None."""
        for f, v in self._eq:
            if f == field:
                return v
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape(v)}" for f, op, v in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash(self.requirements)


def _split_terms(s: str) -> list[str]:
    terms: list[str] = []
    start = 0
    slash = False
    for i, ch in enumerate(s):
        if slash:
            slash = False
        elif ch == "\\":
            slash = True
        elif ch == ",":
            terms.append(s[start:i])
            start = i + 1
    terms.append(s[start:])
    return terms


_TERM_OP = re.compile("!=|==|=")


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``(lhs, op, raw rhs)`` split at the first operator, as ``splitTerm`` does."""
    m = _TERM_OP.search(term)
    return None if m is None else (term[:m.start()], m.group(), term[m.end():])


@lru_cache(maxsize=1024)
def parse_field_selector(s: str) -> FieldSelector:
    """Parse ``field=value,field!=value`` (``==`` is ``=``; ``\\,`` ``\\=`` ``\\\\`` escape values).

    Raises :class:`SelectorError` with Kubernetes' message.
    """
    if not s:
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for part in sorted(_split_terms(s)):
        if not part:
            continue
        term = _split_term(part)
        if term is None:
            raise SelectorError(f"invalid selector: '{s}'; can't understand '{part}'", selector=s)
        field, op, raw = term
        try:
            value = _unescape(raw)
        except ValueError as exc:
            raise SelectorError(f"{exc} (in field selector \"{s}\")", reason=str(exc), selector=s) from None
        reqs.append((field, NOT_EQUALS if op == NOT_EQUALS else EQUALS, value))
    return FieldSelector(reqs)


# ---------------------------------------------------------------- per-resource fields

_META = ("metadata.name", "metadata.namespace")
_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
_POD_FIELDS = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
               "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName")

# Resources with their own field-label conversion in kube-apiserver.
_SUPPORTED: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset(_META + _POD_FIELDS),
    ("", "nodes"): frozenset(("metadata.name", "spec.unschedulable")),
    ("", "namespaces"): frozenset(("metadata.name", "status.phase")),
    ("", "events"): frozenset(_META + tuple("involvedObject." + f for f in _INVOLVED)
                              + ("reason", "reportingComponent", "source", "type")),
    ("events.k8s.io", "events"): frozenset(_META + tuple("regarding." + f for f in _INVOLVED)
                                           + ("reason", "reportingController", "source", "type")),
    ("", "secrets"): frozenset(_META + ("type",)),
    ("", "services"): frozenset(_META + ("spec.clusterIP", "spec.type")),
    ("", "replicationcontrollers"): frozenset(_META + ("status.replicas",)),
    ("apps", "replicasets"): frozenset(_META + ("status.replicas",)),
    ("batch", "jobs"): frozenset(_META + ("status.successful",)),
}
_DEFAULT_FIELDS = frozenset(_META)
_RENAMES: dict[tuple[str, str], dict[str, str]] = {("", "pods"): {"spec.host": "spec.nodeName"}}
_BUILTIN_GROUPS = frozenset((
    "", "apps", "batch", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io",
    "storage.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "node.k8s.io",
    "events.k8s.io", "certificates.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
    "apiregistration.k8s.io", "flowcontrol.apiserver.k8s.io", "resource.k8s.io", "authentication.k8s.io",
    "authorization.k8s.io", "internal.apiserver.k8s.io", "storagemigration.k8s.io",
))


def supported_fields(plural: str, group: str) -> frozenset[str]:
    """Field labels a field selector may use for this resource."""
    return _SUPPORTED.get((group, plural), _DEFAULT_FIELDS)


def check_field_selector(selector: FieldSelector, plural: str, group: str) -> FieldSelector:
    """Vet a parsed field selector for a resource, as kube-apiserver does before listing.

    Returns the selector with Kubernetes' legacy field names translated
    (``spec.host`` -> ``spec.nodeName`` for pods).  Raises
    :class:`SelectorError` -- to be answered with ``400 BadRequest`` and
    ``err.reason`` as the message -- for the first unsupported field:
    ``field label not supported: foo``, or for built-in resources without a
    conversion of their own ``"foo" is not a known field selector: only
    "metadata.name", "metadata.namespace"``.
    """
    if selector.empty:
        return selector
    supported = supported_fields(plural, group)
    renames = _RENAMES.get((group, plural), {})
    reqs: list[FieldRequirement] = []
    for f, op, v in selector.requirements:
        f = renames.get(f, f)
        if f not in supported:
            if (group, plural) not in _SUPPORTED and group in _BUILTIN_GROUPS:
                msg = f'{go_quote(f)} is not a known field selector: only "metadata.name", "metadata.namespace"'
            else:
                msg = f"field label not supported: {f}"
            raise SelectorError(msg, selector=str(selector))
        reqs.append((f, op, v))
    return selector if not renames else FieldSelector(reqs)


def _d(v: object) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _s(v: object) -> str:
    return v if isinstance(v, str) else ""


def _count(v: object) -> str:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else "0"


def _pod_fields(obj: dict[str, Any], out: dict[str, str]) -> None:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    ips = status.get("podIPs")
    ip = _s(_d(ips[0]).get("ip")) if isinstance(ips, list) and ips else _s(status.get("podIP"))
    out.update({
        "spec.nodeName": _s(spec.get("nodeName")),
        "spec.restartPolicy": _s(spec.get("restartPolicy")),
        "spec.schedulerName": _s(spec.get("schedulerName")),
        "spec.serviceAccountName": _s(spec.get("serviceAccountName")),
        "spec.hostNetwork": "true" if spec.get("hostNetwork") is True else "false",
        "status.phase": _s(status.get("phase")),
        "status.podIP": ip,
        "status.nominatedNodeName": _s(status.get("nominatedNodeName")),
    })


def _node_fields(obj: dict[str, Any], out: dict[str, str]) -> None:
    out["spec.unschedulable"] = "true" if _d(obj.get("spec")).get("unschedulable") is True else "false"


def _event_fields(ref_key: str, prefix: str, reporter: str, source_key: str) -> Callable[[dict[str, Any], dict[str, str]], None]:
    def extract(obj: dict[str, Any], out: dict[str, str]) -> None:
        ref = _d(obj.get(ref_key))
        for f in _INVOLVED:
            out[prefix + f] = _s(ref.get(f))
        reporting = _s(obj.get(reporter))
        out["reason"] = _s(obj.get("reason"))
        out["type"] = _s(obj.get("type"))
        out[reporter] = reporting
        out["source"] = _s(_d(obj.get(source_key)).get("component")) or reporting
    return extract


def _phase(obj: dict[str, Any], out: dict[str, str]) -> None:
    out["status.phase"] = _s(_d(obj.get("status")).get("phase"))


def _replicas(obj: dict[str, Any], out: dict[str, str]) -> None:
    out["status.replicas"] = _count(_d(obj.get("status")).get("replicas"))


def _secret(obj: dict[str, Any], out: dict[str, str]) -> None:
    out["type"] = _s(obj.get("type"))


def _service(obj: dict[str, Any], out: dict[str, str]) -> None:
    spec = _d(obj.get("spec"))
    out["spec.clusterIP"] = _s(spec.get("clusterIP"))
    out["spec.type"] = _s(spec.get("type"))


def _job(obj: dict[str, Any], out: dict[str, str]) -> None:
    out["status.successful"] = _count(_d(obj.get("status")).get("succeeded"))


_EXTRACTORS: dict[tuple[str, str], Callable[[dict[str, Any], dict[str, str]], None]] = {
    ("", "pods"): _pod_fields,
    ("", "nodes"): _node_fields,
    ("", "namespaces"): _phase,
    ("", "events"): _event_fields("involvedObject", "involvedObject.", "reportingComponent", "source"),
    ("events.k8s.io", "events"): _event_fields("regarding", "regarding.", "reportingController", "deprecatedSource"),
    ("", "secrets"): _secret,
    ("", "services"): _service,
    ("", "replicationcontrollers"): _replicas,
    ("apps", "replicasets"): _replicas,
    ("batch", "jobs"): _job,
}


def object_fields(plural: str, group: str, obj: dict[str, Any]) -> dict[str, str]:
    """The selectable fields of an object (``ToSelectableFields``); absent values are ``""``.

    Booleans are ``"true"``/``"false"`` and counts (``status.replicas``) are
    decimal strings, ``"0"`` when absent, as Go's zero values print.
    """
    meta = _d(obj.get("metadata"))
    out = {"metadata.name": _s(meta.get("name")), "metadata.namespace": _s(meta.get("namespace"))}
    extract = _EXTRACTORS.get((group, plural))
    if extract is not None:
        extract(obj, out)
    return out
