"""Which nodes a pod or a volume may use, by Kubernetes' rules, for the embedded cluster's
controllers.

kube-controller-manager decides this with the helpers of ``k8s.io/component-helpers``:

* a node selector (``nodeSelectorTerms``, the shape of a pod's required node affinity and of a
  PersistentVolume's ``nodeAffinity.required``) matches a node when any of its terms does; a term
  matches when all its ``matchExpressions`` match the node's labels and all its ``matchFields``
  match the node's fields (only ``metadata.name``). A term with neither matches nothing, and a
  term that does not parse (an unknown operator, a ``Gt`` without one integer, an invalid label
  value, a field requirement with other than one value) is skipped, as
  ``nodeaffinity.NewNodeSelector`` skips it (``corev1/nodeaffinity/nodeaffinity.go``);
* a pod's required node affinity is its ``nodeSelector`` map (every pair must be a node label)
  and the node selector of ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``
  (``nodeaffinity.GetRequiredNodeAffinity``);
* a toleration tolerates a taint when the effects agree (an empty effect tolerates every effect),
  the keys agree (an empty key with ``Exists`` tolerates every key) and, for ``Equal`` (the
  default operator), the values agree (``Toleration.ToleratesTaint``);
  ``untolerated_taint`` finds the first taint of the given effects that no toleration tolerates
  (``v1helper.FindMatchingUntoleratedTaint``).

This is deliberately the simulator's own implementation, not the scheduler's plugins: the
embedded cluster is the scheduler's test double, and a rule shared with the code under test
would hide the very bugs the tests are there to find.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pyscheduler.api.validation import is_qualified_name, is_valid_label_value

__all__ = [
    "NAME_FIELD",
    "node_selector_matches",
    "pod_fits_node",
    "tolerates",
    "untolerated_taint",
]

Obj = dict[str, Any]

#: The one node field a ``matchFields`` requirement may name.
NAME_FIELD = "metadata.name"

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_RANGE = (-(2**63), 2**63 - 1)


def _int64(text: str) -> int | None:
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_RANGE[0] <= value <= _INT64_RANGE[1] else None


def _expression_matches(req: Any, labels: Mapping[str, str]) -> bool | None:
    """One ``matchExpressions`` requirement: True/False, or None when it does not parse."""
    if not isinstance(req, dict):
        return None
    key, op = req.get("key"), req.get("operator")
    values = req.get("values") or []
    if not isinstance(key, str) or is_qualified_name(key) or not isinstance(values, list) \
            or not all(isinstance(v, str) for v in values):
        return None
    if op in ("In", "NotIn"):
        if not values or any(is_valid_label_value(v) for v in values):
            return None
        present = key in labels and str(labels[key]) in values
        return present if op == "In" else not present
    if op in ("Exists", "DoesNotExist"):
        if values:
            return None
        return (key in labels) is (op == "Exists")
    if op in ("Gt", "Lt"):
        bound = _int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        actual = _int64(labels[key]) if key in labels else None
        if actual is None:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return None


def _field_matches(req: Any, name: str) -> bool | None:
    """One ``matchFields`` requirement (``NodeSelectorRequirementsAsFieldSelector``)."""
    if not isinstance(req, dict) or req.get("key") != NAME_FIELD:
        return None
    values = req.get("values") or []
    if req.get("operator") not in ("In", "NotIn") or not isinstance(values, list) \
            or len(values) != 1:
        return None
    return (values[0] == name) is (req["operator"] == "In")


def _term_matches(term: Any, labels: Mapping[str, str], name: str) -> bool | None:
    if not isinstance(term, dict):
        return None
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return None
    if not expressions and not fields:
        return False
    result = True
    for req in expressions:
        ok = _expression_matches(req, labels)
        if ok is None:
            return None
        result = result and ok
    for req in fields:
        ok = _field_matches(req, name)
        if ok is None:
            return None
        result = result and ok
    return result


def node_selector_matches(selector: Any, node: Mapping[str, Any]) -> bool:
    """Whether a ``NodeSelector`` (``{"nodeSelectorTerms": [...]}``) selects ``node``."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    name = str(meta.get("name") or "")
    return any(_term_matches(term, labels, name) is True
               for term in (terms if isinstance(terms, list) else ()))


def pod_fits_node(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod's ``nodeSelector`` and required node affinity both match ``node``."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    if isinstance(selector, dict) and any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") \
        if isinstance(affinity, dict) else None
    return required is None or node_selector_matches(required, node)


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(taints: Iterable[Mapping[str, Any]],
                      tolerations: Iterable[Mapping[str, Any]],
                      effects: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The first taint with one of ``effects`` that no toleration tolerates, or None."""
    tolerations = [t for t in tolerations if isinstance(t, dict)]
    for taint in taints:
        if isinstance(taint, dict) and taint.get("effect") in effects \
                and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
