"""Plain reference implementations of PodTopologySpread and InterPodAffinity, node by node.

Written straight from kube-scheduler's ``podtopologyspread`` and ``interpodaffinity`` plugins,
with the same shape: a PreFilter/PreScore pass over every node and pod that fills maps keyed by
topology value or (key, value) pair, then a Filter/Score per node, then NormalizeScore. No
numpy, no table indexes, no shared helpers with the vectorized plugins: the differential tests
compare the two for every node.

Input is a list of :class:`Row` (one per table slot; ``node`` is None for a hole) read from a
NodeTable by :func:`rows_of`, and namespace labels for ``namespaceSelector`` terms. Filter
verdicts are ``None`` (passes) or ``(message, unresolvable)``; scores are ints per row (0 for
rows that are not scored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from pyscheduler.api.labels import LabelSelector
from pyscheduler.framework.nodetable import NodeInfo, NodeTable
from pyscheduler.framework.pod import (
    AffinityTerm,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    SpreadConstraint,
)

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "EXISTING_ANTI_AFFINITY",
    "MISSING_LABEL",
    "SPREAD",
    "Row",
    "Verdict",
    "affinity_filter",
    "affinity_score",
    "rows_of",
    "spread_filter",
    "spread_score",
]

SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

HOSTNAME = "kubernetes.io/hostname"
MAX_NODE_SCORE = 100
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

Verdict = tuple[str, bool] | None


@dataclass
class Row:
    node: NodeInfo | None
    pods: list[PodInfo] = field(default_factory=list)

    @property
    def labels(self) -> Mapping[str, str]:
        return self.node.labels if self.node is not None else {}


def rows_of(table: NodeTable) -> list[Row]:
    return [Row(table.infos[slot] if table.valid[slot] else None,
                list(table.pods[slot].values()) if table.valid[slot] else [])
            for slot in range(table.n)]


# -- kube helpers -------------------------------------------------------------------------------

def _go_round(x: float) -> int:
    return int(Decimal(x).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _int64(text: str) -> int | None:
    s = text[1:] if text[:1] in "+-" else text
    if not s or not s.isascii() or not s.isdigit():
        return None
    v = int(text)
    return v if -(2**63) <= v < 2**63 else None


def _requirement(r: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool | None:
    """One node selector requirement against a node's labels; None: unparseable."""
    if r.operator == "In":
        return labels.get(r.key) in r.values if r.values else None
    if r.operator == "NotIn":
        return (r.key not in labels or labels[r.key] not in r.values) if r.values else None
    if r.operator == "Exists":
        return r.key in labels if not r.values else None
    if r.operator == "DoesNotExist":
        return r.key not in labels if not r.values else None
    if r.operator in ("Gt", "Lt"):
        bound = _int64(r.values[0]) if len(r.values) == 1 else None
        if bound is None:
            return None
        if r.key not in labels:
            return False
        v = _int64(labels[r.key])
        return v is not None and (v > bound if r.operator == "Gt" else v < bound)
    return None


def _term(term: NodeSelectorTerm, node: NodeInfo) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    for r in term.match_expressions:
        if not _requirement(r, node.labels):
            return False
    for r in term.match_fields:
        if r.key != "metadata.name" or len(r.values) != 1 or r.operator not in ("In", "NotIn"):
            return False
        if (node.name == r.values[0]) != (r.operator == "In"):
            return False
    return True


def required_node_affinity(pod: PodInfo, node: NodeInfo) -> bool:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)``."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_terms:
        return any(_term(t, node) for t in pod.required_terms)
    return True


def _untolerated(pod: PodInfo, node: NodeInfo) -> bool:
    return any(taint.effect in ("NoSchedule", "NoExecute")
               and not any(t.tolerates(taint.key, taint.value, taint.effect)
                           for t in pod.tolerations)
               for taint in node.taints)


# -- PodTopologySpread --------------------------------------------------------------------------

def _count_pods_match_selector(pods: Sequence[PodInfo], selector: LabelSelector,
                               namespace: str) -> int:
    return sum(1 for p in pods
               if not p.deleting and p.namespace == namespace and selector.matches(p.labels))


def _inclusion(c: SpreadConstraint, pod: PodInfo, node: NodeInfo) -> bool:
    if c.node_affinity_policy == "Honor" and not required_node_affinity(pod, node):
        return False
    if c.node_taints_policy == "Honor" and _untolerated(pod, node):
        return False
    return True


def spread_filter(rows: Sequence[Row], pod: PodInfo) -> list[Verdict]:
    constraints = [c for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]
    if not constraints:
        return [None] * len(rows)
    # PreFilter: matching pods per topology value, over nodes holding every topology key.
    tp_counts: list[dict[str, int]] = [{} for _ in constraints]
    for row in rows:
        node = row.node
        if node is None or any(c.topology_key not in node.labels for c in constraints):
            continue
        for i, c in enumerate(constraints):
            if not _inclusion(c, pod, node):
                continue
            value = node.labels[c.topology_key]
            tp_counts[i][value] = tp_counts[i].get(value, 0) + \
                _count_pods_match_selector(row.pods, c.selector, pod.namespace)
    minimums = []
    for i, c in enumerate(constraints):
        minimum = min(tp_counts[i].values(), default=MAX_INT32)
        if len(tp_counts[i]) < (c.min_domains if c.min_domains is not None else 1):
            minimum = 0
        minimums.append(minimum)
    # Filter, node by node.
    out: list[Verdict] = []
    for row in rows:
        verdict: Verdict = None
        if row.node is not None:
            for i, c in enumerate(constraints):
                here = row.node.labels.get(c.topology_key)
                if here is None:
                    verdict = (MISSING_LABEL, True)
                    break
                self_match = 1 if c.selector.matches(pod.labels) else 0
                skew = tp_counts[i].get(here, 0) + self_match - minimums[i]
                if skew > c.max_skew:
                    verdict = (SPREAD, False)
                    break
        out.append(verdict)
    return out


def spread_score(rows: Sequence[Row], pod: PodInfo, feasible: Sequence[bool]) -> list[int]:
    constraints = [c for c in pod.spread if c.when_unsatisfiable == "ScheduleAnyway"]
    scores = [0] * len(rows)
    if not constraints:
        return scores
    filtered = [i for i, row in enumerate(rows) if feasible[i] and row.node is not None]
    # PreScore: only the system defaults let nodes lack a topology key.
    require_all = not any(c.system_default for c in constraints)
    # initPreScoreState
    ignored: set[int] = set()
    tp_counts: list[dict[str, int]] = [{} for _ in constraints]
    topo_size = [0] * len(constraints)
    for i in filtered:
        labels = rows[i].labels
        if require_all and any(c.topology_key not in labels for c in constraints):
            ignored.add(i)
            continue
        for j, c in enumerate(constraints):
            if c.topology_key == HOSTNAME:
                continue
            value = labels.get(c.topology_key, "")  # Go: a missing label reads as ""
            if value not in tp_counts[j]:
                tp_counts[j][value] = 0
                topo_size[j] += 1
    weights = []
    for j, c in enumerate(constraints):
        size = len(filtered) - len(ignored) if c.topology_key == HOSTNAME else topo_size[j]
        weights.append(math.log(float(size + 2)))
    # PreScore over all nodes.
    for row in rows:
        node = row.node
        if node is None or (require_all and any(c.topology_key not in node.labels
                                                for c in constraints)):
            continue
        for j, c in enumerate(constraints):
            if not _inclusion(c, pod, node):
                continue
            value = node.labels.get(c.topology_key, "")
            if value not in tp_counts[j]:
                continue
            tp_counts[j][value] += _count_pods_match_selector(row.pods, c.selector, pod.namespace)
    # Score
    raw: dict[int, int] = {}
    for i in filtered:
        if i in ignored:
            raw[i] = 0
            continue
        total = 0.0
        for j, c in enumerate(constraints):
            if c.topology_key not in rows[i].labels:
                continue
            value = rows[i].labels[c.topology_key]
            if c.topology_key == HOSTNAME:
                cnt = _count_pods_match_selector(rows[i].pods, c.selector, pod.namespace)
            else:
                cnt = tp_counts[j][value]
            total += float(cnt) * weights[j] + float(c.max_skew - 1)
        raw[i] = _go_round(total)
    # NormalizeScore
    min_score, max_score = MAX_INT64, 0
    for i in filtered:
        if i in ignored:
            continue
        min_score = min(min_score, raw[i])
        max_score = max(max_score, raw[i])
    for i in filtered:
        if i in ignored:
            scores[i] = 0
        elif max_score == 0:
            scores[i] = MAX_NODE_SCORE
        else:
            scores[i] = MAX_NODE_SCORE * (max_score + min_score - raw[i]) // max_score
    return scores


# -- InterPodAffinity ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Term:
    """kube's framework.AffinityTerm: namespaces, namespace selector (None: Nothing)."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str
    weight: int

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str] | None) -> bool:
        in_ns = pod.namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(ns_labels or {}))
        return in_ns and self.selector.matches(pod.labels)


def _plain(t: AffinityTerm, weight: int | None = None) -> _Term:
    return _Term(t.selector, t.namespaces, t.namespace_selector, t.topology_key,
                 t.weight if weight is None else weight)


def _merged(t: AffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]) -> _Term:
    """mergeAffinityTermNamespacesIfNotEmpty: the namespaceSelector's namespaces join the list
    and the selector becomes Nothing, unless it is empty (matches everything)."""
    term = _plain(t)
    sel = term.namespace_selector
    if sel is None or sel.empty:
        return term
    names = {ns for ns, labels in namespace_labels.items() if sel.matches(labels)}
    return _Term(term.selector, term.namespaces | names, None, term.topology_key, term.weight)


def _update(m: dict[tuple[str, str], int], labels: Mapping[str, str], key: str) -> None:
    if key in labels:
        pair = (key, labels[key])
        m[pair] = m.get(pair, 0) + 1


def affinity_filter(rows: Sequence[Row], pod: PodInfo,
                    namespace_labels: Mapping[str, Mapping[str, str]]) -> list[Verdict]:
    affinity = [_merged(t, namespace_labels) for t in pod.affinity]
    anti = [_merged(t, namespace_labels) for t in pod.anti_affinity]
    own_ns_labels = namespace_labels.get(pod.namespace, {})
    # PreFilter
    existing_anti: dict[tuple[str, str], int] = {}
    for row in rows:
        for existing in row.pods:
            for theirs in existing.anti_affinity:
                if _plain(theirs).matches(pod, own_ns_labels):
                    _update(existing_anti, row.labels, theirs.topology_key)
    affinity_counts: dict[tuple[str, str], int] = {}
    anti_counts: dict[tuple[str, str], int] = {}
    for row in rows:
        for existing in row.pods:
            if affinity and all(t.matches(existing, None) for t in affinity):
                for t in affinity:
                    _update(affinity_counts, row.labels, t.topology_key)
            for t in anti:
                if t.matches(existing, None):
                    _update(anti_counts, row.labels, t.topology_key)
    if not existing_anti and not affinity and not anti:
        return [None] * len(rows)
    self_match = bool(affinity) and all(t.matches(pod, None) for t in affinity)
    out: list[Verdict] = []
    for row in rows:
        if row.node is None:
            out.append(None)
            continue
        labels = row.labels
        # satisfyPodAffinity
        ok = True
        pods_exist = True
        for t in affinity:
            if t.topology_key not in labels:
                ok = False
                break
            if affinity_counts.get((t.topology_key, labels[t.topology_key]), 0) <= 0:
                pods_exist = False
        if ok and not pods_exist:
            ok = not affinity_counts and self_match
        if not ok:
            out.append((AFFINITY, True))
            continue
        # satisfyPodAntiAffinity
        if any(t.topology_key in labels
               and anti_counts.get((t.topology_key, labels[t.topology_key]), 0) > 0
               for t in anti):
            out.append((ANTI_AFFINITY, False))
            continue
        # satisfyExistingPodsAntiAffinity
        if any(existing_anti.get((k, v), 0) > 0 for k, v in labels.items()):
            out.append((EXISTING_ANTI_AFFINITY, False))
            continue
        out.append(None)
    return out


def affinity_score(rows: Sequence[Row], pod: PodInfo, feasible: Sequence[bool],
                   namespace_labels: Mapping[str, Mapping[str, str]], *,
                   hard_pod_affinity_weight: int = 1,
                   ignore_preferred_terms_of_existing_pods: bool = False) -> list[int]:
    scores = [0] * len(rows)
    has_constraints = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
    if ignore_preferred_terms_of_existing_pods and not has_constraints:
        return scores
    preferred = [_merged(t, namespace_labels) for t in pod.preferred_affinity]
    preferred_anti = [_merged(t, namespace_labels) for t in pod.preferred_anti_affinity]
    own_ns_labels = namespace_labels.get(pod.namespace, {})
    topology_score: dict[str, dict[str, int]] = {}

    def process(term: _Term, weight: int, target: PodInfo,
                ns_labels: Mapping[str, str] | None, labels: Mapping[str, str],
                multiplier: int) -> None:
        if term.matches(target, ns_labels) and term.topology_key in labels:
            values = topology_score.setdefault(term.topology_key, {})
            value = labels[term.topology_key]
            values[value] = values.get(value, 0) + weight * multiplier

    for row in rows:
        if row.node is None:
            continue
        labels = row.labels
        candidates = row.pods if has_constraints else [
            p for p in row.pods if p.affinity or p.anti_affinity or p.preferred_affinity
            or p.preferred_anti_affinity]
        for existing in candidates:
            if not labels:
                continue
            for t in preferred:
                process(t, t.weight, existing, None, labels, 1)
            for t in preferred_anti:
                process(t, t.weight, existing, None, labels, -1)
            if hard_pod_affinity_weight > 0:
                for a in existing.affinity:
                    process(_plain(a), hard_pod_affinity_weight, pod, own_ns_labels, labels, 1)
            for a in existing.preferred_affinity:
                process(_plain(a), a.weight, pod, own_ns_labels, labels, 1)
            for a in existing.preferred_anti_affinity:
                process(_plain(a), a.weight, pod, own_ns_labels, labels, -1)
    if not topology_score:
        return scores
    filtered = [i for i, row in enumerate(rows) if feasible[i] and row.node is not None]
    raw: dict[int, int] = {}
    for i in filtered:
        total = 0
        for key, values in topology_score.items():
            if key in rows[i].labels:
                total += values.get(rows[i].labels[key], 0)
        raw[i] = total
    if not filtered:
        return scores
    low, high = min(raw.values()), max(raw.values())
    for i in filtered:
        f = 0.0
        if high - low > 0:
            f = float(MAX_NODE_SCORE) * (float(raw[i] - low) / float(high - low))
        scores[i] = int(f)
    return scores
