"""NodeAffinity: ``nodeSelector`` and node affinity, required (filter) and preferred (score).

Reproduces the behaviour of kube-scheduler's ``pkg/scheduler/framework/plugins/nodeaffinity`` and the matching rules
of ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``:

* **Filter.** A node passes when it has every ``nodeSelector`` label with exactly that value
  (``labels.SelectorFromSet``) *and* matches at least one required ``nodeSelectorTerm``. Within a
  term, every ``matchExpressions`` requirement and every ``matchFields`` requirement must hold.
  Failures are ``node(s) didn't match Pod's node affinity/selector``,
  ``UnschedulableAndUnresolvable``.
* **Operators.** ``In`` (label present with one of the values), ``NotIn`` (label absent, or its
  value none of them), ``Exists``, ``DoesNotExist``, ``Gt`` / ``Lt`` (label present and its value
  parses as a base-10 int64, like Go's ``strconv.ParseInt``, strictly greater / smaller than the
  single requirement value; labels that are not integers never match). ``matchFields`` supports
  only ``metadata.name`` with ``In`` / ``NotIn`` and exactly one value.
* **Terms that can never match.** An empty term (no expressions, no fields) selects no node, and a
  term that kube cannot parse (``Gt`` with a non-integer, ``matchFields`` with several values,
  ``In``/``NotIn`` with a value that is not a valid label value — which pod validation lets
  through) selects no node either: kube's lazy-error selector reports the parse error and skips
  the term.
* **PreFilter node names.** When *every* required term pins ``metadata.name In``, kube's PreFilter
  narrows the candidates to the union of those names and the framework reports every other node
  as ``node(s) didn't satisfy plugin(s) [NodeAffinity]``; when that union is empty the pod fails
  outright with ``pod affinity terms conflict``. Both outcomes are reproduced here, per row.
* **Score.** The sum of the weights of the preferred terms a node matches (weight-0 and empty
  terms are skipped), normalized with ``helper.DefaultNormalizeScore(100, reverse=false)`` over
  the scored nodes: ``score * 100 // max`` with integer arithmetic; all zero stays zero.

Deliberate difference: a preferred term kube cannot parse makes kube's PreScore fail the whole
attempt; here it simply matches no node (pod parsing already rejects such terms, so this only
guards against PodInfo built by hand).

Vectorized: every requirement is a boolean row mask assembled from the table's label indexes
(``label_mask``, ``has_label``; ``Gt``/``Lt`` and long ``In`` lists decide per *distinct* value
and, for keys with many values, spread the answers over the rows with one look-up through the
table's cached domain ids), combined with numpy AND/OR; Python loops only run over the pod's
terms and requirements and a key's distinct values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import ClassVar, cast

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.api.validation import is_valid_label_value
from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable, RowView
from pyscheduler.framework.pod import NodeSelectorRequirement, NodeSelectorTerm

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_POD",
    "ERR_REASON_PREFILTER",
    "NAME",
    "NodeAffinity",
    "node_selector_mask",
    "parse_int64",
    "prefilter_node_names",
]

NAME = "NodeAffinity"

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
#: What kube's framework says about nodes a PreFilter result left out (``schedule_one.go``).
ERR_REASON_PREFILTER = f"node(s) didn't satisfy plugin(s) [{NAME}]"

_NAME_FIELD = "metadata.name"
_INT64 = re.compile(r"[+-]?[0-9]+")


@lru_cache(maxsize=4096)
def parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: None when it is not a base-10 int64."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def prefilter_node_names(terms: tuple[NodeSelectorTerm, ...]) -> frozenset[str] | None:
    """kube's NodeAffinity PreFilter: the node names every required term pins, or None.

    Per term, the intersection of its ``metadata.name In`` value sets; over terms (ORed), the
    union. None when some term has no such requirement (any node may match that term).
    """
    names: set[str] | None = None
    for term in terms:
        term_names: set[str] | None = None
        for r in term.match_fields:
            if r.key == _NAME_FIELD and r.operator == "In":
                values = set(r.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names = term_names if names is None else names | term_names
    return None if names is None else frozenset(names)


#: Above this many distinct values of a key, a per-value predicate is evaluated through the
#: table's cached domain ids (one gather) rather than by OR-ing one mask per value.
_DOMAIN_LOOKUP_MIN_VALUES = 8


def _label_value_mask(table: NodeTable, n: int, key: str,
                      accept: Callable[[str], bool]) -> BoolArray:
    """Rows having label ``key`` with a value ``accept`` approves."""
    index = table.label_index.get(key)
    if not index:
        return np.zeros(n, np.bool_)
    if len(index) >= _DOMAIN_LOOKUP_MIN_VALUES and isinstance(table, NodeTable):
        ids, values = table.domains(key)
        lookup = np.zeros(len(values) + 1, np.bool_)  # the extra False serves id -1 (no label)
        lookup[:-1] = [accept(v) for v in values]
        out: BoolArray = lookup[ids]
        return out
    out = np.zeros(n, np.bool_)
    for value, mask in index.items():
        if accept(value):
            out |= mask[:n]
    return out


def _values_mask(table: NodeTable, n: int, key: str, values: tuple[str, ...]) -> BoolArray:
    """Rows whose label ``key`` has one of ``values`` (possibly a read-only table view)."""
    if len(values) == 1:
        return table.label_mask(key, values[0])
    if len(values) >= _DOMAIN_LOOKUP_MIN_VALUES:
        return _label_value_mask(table, n, key, frozenset(values).__contains__)
    index: Mapping[str, BoolArray] = table.label_index.get(key) or {}
    out = np.zeros(n, np.bool_)
    for v in set(values):
        mask = index.get(v)
        if mask is not None:
            out |= mask[:n]
    return out


def _expression_mask(table: NodeTable, n: int, r: NodeSelectorRequirement) -> BoolArray | None:
    """Rows satisfying one ``matchExpressions`` requirement; None when it cannot be parsed."""
    op = r.operator
    if op in ("In", "NotIn") and (not r.values or not _valid_values(r.values)):
        # labels.NewRequirement refuses a value that is not a valid label value, and kube's
        # lazy-error selector then skips the whole term: even NotIn matches no node.
        return None
    if op == "In":
        return _values_mask(table, n, r.key, r.values)
    if op == "NotIn":
        return ~_values_mask(table, n, r.key, r.values)
    if op == "Exists":
        return table.has_label(r.key) if not r.values else None
    if op == "DoesNotExist":
        return ~table.has_label(r.key) if not r.values else None
    if op in ("Gt", "Lt"):
        bound = parse_int64(r.values[0]) if len(r.values) == 1 else None
        if bound is None:
            return None
        if op == "Gt":
            return _label_value_mask(table, n, r.key, lambda v: _greater(v, bound))
        return _label_value_mask(table, n, r.key, lambda v: _less(v, bound))
    return None


def _valid_values(values: tuple[str, ...]) -> bool:
    return not any(is_valid_label_value(v) for v in values)


def _greater(value: str, bound: int) -> bool:
    number = parse_int64(value)
    return number is not None and number > bound


def _less(value: str, bound: int) -> bool:
    number = parse_int64(value)
    return number is not None and number < bound


def _field_mask(table: NodeTable, n: int, r: NodeSelectorRequirement) -> BoolArray | None:
    """Rows satisfying one ``matchFields`` requirement; None when it cannot be parsed."""
    if r.key != _NAME_FIELD or r.operator not in ("In", "NotIn") or len(r.values) != 1:
        return None
    out = np.zeros(n, np.bool_)
    slot = table.slots.get(r.values[0])
    if slot is not None and slot < n:
        out[slot] = True
    return out if r.operator == "In" else ~out


def _term_mask(table: NodeTable, n: int, term: NodeSelectorTerm) -> BoolArray | None:
    """Rows matching a node selector term (possibly a read-only view); None: matches no row."""
    acc: BoolArray | None = None
    for r in term.match_expressions:
        m = _expression_mask(table, n, r)
        if m is None:
            return None
        acc = m if acc is None else acc & m
    for r in term.match_fields:
        m = _field_mask(table, n, r)
        if m is None:
            return None
        acc = m if acc is None else acc & m
    return acc  # None for an empty term, which selects nothing


def node_selector_mask(table: NodeTable, n: int,
                       terms: tuple[NodeSelectorTerm, ...]) -> BoolArray:
    """Rows matching any of ``terms`` (a NodeSelector: terms ORed, each term's requirements
    ANDed, an empty term matching nothing) — for node affinity, and for the node affinity of
    volumes and storage classes' allowed topologies."""
    out = np.zeros(n, np.bool_)
    for term in terms:
        m = _term_mask(table, n, term)
        if m is not None:
            out |= m
    return out


def _normalize(raw: IntArray, scored: BoolArray) -> IntArray:
    """``helper.DefaultNormalizeScore(MaxNodeScore, false, ...)`` over the ``scored`` rows
    (rows not scored stay within 0..100 but are otherwise meaningless)."""
    top = int(raw[scored].max(initial=0))
    if top == 0:
        return np.zeros(len(raw), np.int64)
    raw *= MAX_NODE_SCORE
    raw //= top
    out: IntArray = np.minimum(raw, MAX_NODE_SCORE, out=raw)
    return out


class NodeAffinity:
    """Filter on ``nodeSelector`` + required node affinity; score preferred node affinity."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),)

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path): immediate
        for pods without node constraints, else the vectorized rules on a one-row view."""
        pod = ctx.pod
        if not pod.node_selector and not pod.required_terms:
            return True
        view = RowView(ctx.table, np.array([slot], np.intp))
        result = self.filter(CycleContext(pod, cast(NodeTable, view), ctx.request,
                                          ctx.namespaces, {}, virtual_pass=ctx.virtual_pass))
        return result.passed is None or bool(result.passed[0])

    def filter(self, ctx: CycleContext) -> FilterResult:
        pod, table, n = ctx.pod, ctx.table, ctx.n
        if not pod.node_selector and not pod.required_terms:
            return FilterResult.all_pass()
        pinned = prefilter_node_names(pod.required_terms)
        if pinned is not None and not pinned:
            return FilterResult(np.zeros(n, np.bool_),
                                [Reason(ERR_REASON_CONFLICT, np.ones(n, np.bool_), True)])
        passed: BoolArray | None = None
        for key, value in pod.node_selector.items():
            m = table.label_mask(key, value)
            passed = m if passed is None else passed & m
        if pod.required_terms:
            m = node_selector_mask(table, n, pod.required_terms)
            passed = m if passed is None else passed & m
        assert passed is not None
        passed = np.array(passed, np.bool_)  # never hand out a view of the table's index
        failed = ~passed
        if pinned is None:
            return FilterResult(passed, [Reason(ERR_REASON_POD, failed, True)])
        candidates = np.zeros(n, np.bool_)
        for node_name in pinned:
            slot = table.slots.get(node_name)
            if slot is not None and slot < n:
                candidates[slot] = True
        return FilterResult(passed, [Reason(ERR_REASON_POD, failed & candidates, True),
                                     Reason(ERR_REASON_PREFILTER, failed & ~candidates, True)])

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        terms = ctx.pod.preferred_terms
        if not terms:
            return ctx.zeros()  # kube's PreScore returns Skip: the plugin adds nothing
        table, n = ctx.table, ctx.n
        raw = ctx.zeros()
        for weight, term in terms:
            if weight == 0:
                continue
            m = _term_mask(table, n, term)
            if m is not None:
                np.add(raw, weight, out=raw, where=m)
        return _normalize(raw, feasible[:n] & ctx.nodes())
