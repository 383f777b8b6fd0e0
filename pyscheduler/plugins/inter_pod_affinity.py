"""InterPodAffinity: place pods near, or away from, other pods (filter + score).

Semantics are kube-scheduler's ``interpodaffinity`` plugin (``filtering.go``, ``scoring.go``),
evaluated for every node at once with numpy. A *domain* is a (topology key, value) pair; a
term "holds in a domain" when some existing pod matching it runs on a node of that domain.

Filter — a node is charged to the first check it fails, in kube's order:

1. The incoming pod's required affinity terms (``node(s) didn't match pod affinity rules``,
   unresolvable). Only existing pods matching **all** the terms count (kube's
   ``updateWithAffinityTerms``); a node passes when it has every term's topology key and, for
   every term, such a pod runs in the node's domain of that key. First pod of a group: when no
   such pod runs on any node carrying a term's key, and the incoming pod matches all its own
   terms, every node with all the keys passes.
2. The incoming pod's required anti-affinity terms (``node(s) didn't match pod anti-affinity
   rules``): a node fails when, for some term, a pod matching that term runs in its domain.
   Nodes without the term's key pass that term.
3. Existing pods' required anti-affinity (symmetry; ``node(s) didn't satisfy existing pods
   anti-affinity rules``): for every existing pod with a required anti-affinity term matching
   the incoming pod, nodes in the same domain (by that term's key) as the existing pod fail.

Score — kube's PreScore/Score/NormalizeScore: a weight accumulates per domain, then each node
sums the weights of its domains (one per topology key it carries):

* for each preferred affinity term of the incoming pod, ``+weight`` per matching existing pod,
  in that pod's domain; preferred anti-affinity terms ``-weight``;
* for each existing pod: ``+hardPodAffinityWeight`` (default 1) per required affinity term that
  matches the incoming pod, ``+weight`` per preferred affinity term, ``-weight`` per preferred
  anti-affinity term matching it (skipped entirely, like kube's
  ``ignorePreferredTermsOfExistingPods``, when so configured and the incoming pod has no
  preferred terms).

Normalization is min-max over the scored nodes: ``int64(100 * (float64(s - min) /
float64(max - min)))``, 0 everywhere when ``max == min``.

Namespaces of a term: its ``namespaces`` list plus, with a ``namespaceSelector``, the namespaces
the cycle's resolver (``ctx.namespaces``) returns for it; an empty selector (``{}``) means every
namespace. Terms without either mean the owning pod's namespace (resolved at parse time).
Inter-pod affinity counts terminating pods too (kube does not skip them here).

Counting pods matching the incoming pod's terms uses the table's incremental match counters
(``count_matching``), then per-domain sums over the topology key
(:class:`~pyscheduler.plugins.pod_topology_spread.Domains`: a zone key costs one sorted
``reduceat`` and a few label masks, a hostname key with one domain per node works on the
per-row counts directly). Existing pods' terms come from
:class:`ExistingTermIndex`: per distinct term, how many pods carrying it run on each row,
refreshed only for rows where a pod carrying terms came or went since the last call; matching
the incoming pod is then one selector test per distinct term that could select its namespace,
not per pod. This index would
naturally live in the NodeTable (kube's ``PodsWithAffinity`` /
``PodsWithRequiredAntiAffinity``); it is kept here until the table grows it.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import namespace_and_labels, on
from pyscheduler.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from pyscheduler.api.labels import LabelSelector
from pyscheduler.framework.interface import (
    MAX_NODE_SCORE,
    CycleContext,
    FilterResult,
    Reason,
)
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.pod import AffinityTerm, PodInfo, has_affinity_terms
from pyscheduler.plugins.pod_topology_spread import DomainCache

__all__ = [
    "DEFAULT_HARD_POD_AFFINITY_WEIGHT",
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "PREFERRED_AFFINITY",
    "PREFERRED_ANTI_AFFINITY",
    "REQUIRED_AFFINITY",
    "REQUIRED_ANTI_AFFINITY",
    "ExistingTermIndex",
    "InterPodAffinity",
]

NAME = "InterPodAffinity"

ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = \
    "node(s) didn't satisfy existing pods anti-affinity rules"

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1

Namespaces = frozenset[str] | None  # None: every namespace


# -- terms and namespaces -----------------------------------------------------------------------

def _term_namespaces(ctx: CycleContext, term: AffinityTerm) -> Namespaces:
    """The namespaces a term selects pods from (kube merges the namespaceSelector's
    namespaces into the list; an empty selector matches every namespace)."""
    sel = term.namespace_selector
    if sel is None or sel.matches_nothing:
        return term.namespaces
    if sel.empty:
        return None
    return term.namespaces | ctx.namespaces(sel)


def _matches(term: AffinityTerm, namespaces: Namespaces, pod: PodInfo) -> bool:
    """kube's ``AffinityTerm.Matches``."""
    return (namespaces is None or pod.namespace in namespaces) \
        and term.selector.matches(pod.labels)


def _match_counts(table: NodeTable, selector: LabelSelector, selector_key: str,
                  namespaces: Namespaces) -> IntArray:
    """Per row, existing pods matching ``selector`` in ``namespaces``."""
    if selector.matches_nothing or (namespaces is not None and not namespaces):
        # A nil selector matches nothing; its canonical text ("") is the empty selector's,
        # so it must never reach the table's counters.
        return np.zeros(table.n, np.int64)
    return table.count_matching(selector, selector_key, namespaces)


# -- existing pods' terms -----------------------------------------------------------------------

REQUIRED_ANTI_AFFINITY, REQUIRED_AFFINITY, PREFERRED_AFFINITY, PREFERRED_ANTI_AFFINITY = range(4)


class ExistingTermIndex:
    """Per distinct (anti-)affinity term of existing pods, how many pods carrying it run on each
    row; kept current from the table's ``term_row_generation`` (rows where a pod with terms
    came or went).

    ``groups[kind]`` maps an :class:`AffinityTerm` to an int64 array over the table's capacity.
    Kinds: :data:`REQUIRED_ANTI_AFFINITY`, :data:`REQUIRED_AFFINITY`,
    :data:`PREFERRED_AFFINITY`, :data:`PREFERRED_ANTI_AFFINITY`. A pod listing the same term
    twice counts twice, as kube processes every term.

    :meth:`candidates` answers the terms of a kind that may select a pod of a namespace: a
    term naming its namespaces (most terms: the owning pod's own) is filed under each of them,
    a term with a namespace selector under every namespace. An incoming pod is then tested
    against the terms that could select it, not against every distinct term in the cluster.
    """

    __slots__ = ("_table", "_seen", "_capacity", "_rows", "_totals", "groups", "_by_namespace")

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._seen = -1
        self._capacity = 0
        self._rows: dict[int, list[tuple[int, AffinityTerm]]] = {}
        self._totals: dict[tuple[int, AffinityTerm], int] = {}
        self.groups: tuple[dict[AffinityTerm, IntArray], ...] = ({}, {}, {}, {})
        # Per kind, built on demand and dropped when the kind's terms change: namespace ->
        # its terms, and under None the terms with a namespace selector.
        self._by_namespace: list[dict[str | None, list[AffinityTerm]] | None] = [None] * 4

    def candidates(self, kind: int, namespace: str) -> list[AffinityTerm]:
        """The terms of ``kind`` that may select a pod in ``namespace`` (a superset: the
        caller still tests each with :func:`_matches`). Their order is not :attr:`groups`':
        what callers do with them (or-ing rows, adding weights) does not depend on it."""
        by_namespace = self._by_namespace[kind]
        if by_namespace is None:
            by_namespace = self._by_namespace[kind] = {}
            for term in self.groups[kind]:
                sel = term.namespace_selector
                if sel is not None and not sel.matches_nothing:
                    by_namespace.setdefault(None, []).append(term)
                else:
                    for ns in term.namespaces:
                        by_namespace.setdefault(ns, []).append(term)
        own = by_namespace.get(namespace, [])
        selected = by_namespace.get(None, [])
        return own + selected if own and selected else own or selected

    def sync(self, table: NodeTable) -> None:
        if table is not self._table:
            self._table, self._seen, self._capacity = table, -1, table.capacity
            self._rows, self._totals = {}, {}
            self.groups = ({}, {}, {}, {})
            self._by_namespace = [None] * 4
        if table.capacity != self._capacity:
            for kind in self.groups:
                for term, counts in kind.items():
                    grown = np.zeros(table.capacity, np.int64)
                    grown[: len(counts)] = counts
                    kind[term] = grown
            self._capacity = table.capacity
        if table.term_generation == self._seen:
            return  # no pod with terms came or went (pods without terms do not matter)
        changed = np.flatnonzero(table.term_row_generation[: table.n] > self._seen)
        for slot in changed.tolist():
            self._rescan(table, slot)
        self._seen = table.term_generation

    def _rescan(self, table: NodeTable, slot: int) -> None:
        if not table.term_pods[slot] and slot not in self._rows:
            return  # no terms before, none now
        entries: list[tuple[int, AffinityTerm]] = []
        if table.valid[slot]:
            for pod in table.pods[slot].values():
                if not has_affinity_terms(pod):
                    continue
                entries.extend((REQUIRED_ANTI_AFFINITY, t) for t in pod.anti_affinity)
                entries.extend((REQUIRED_AFFINITY, t) for t in pod.affinity)
                entries.extend((PREFERRED_AFFINITY, t) for t in pod.preferred_affinity)
                entries.extend((PREFERRED_ANTI_AFFINITY, t) for t in pod.preferred_anti_affinity)
        old = self._rows.get(slot, [])
        if entries == old:  # the usual change: a pod without terms came or went
            return
        for kind, term in old:
            self.groups[kind][term][slot] -= 1
            key = (kind, term)
            left = self._totals[key] - 1
            if left:
                self._totals[key] = left
            else:
                del self._totals[key]
                del self.groups[kind][term]
                self._by_namespace[kind] = None
        for kind, term in entries:
            counts = self.groups[kind].get(term)
            if counts is None:
                counts = self.groups[kind][term] = np.zeros(self._capacity, np.int64)
                self._by_namespace[kind] = None
            counts[slot] += 1
            key = (kind, term)
            self._totals[key] = self._totals.get(key, 0) + 1
        if entries:
            self._rows[slot] = entries
        else:
            self._rows.pop(slot, None)


class InterPodAffinity:
    """Filter and score plugin.

    ``hard_pod_affinity_weight`` (0..100, kube's ``hardPodAffinityWeight``) is the score an
    existing pod's *required* affinity term adds when the incoming pod matches it;
    ``ignore_preferred_terms_of_existing_pods`` skips scoring entirely for pods without
    preferred terms of their own (kube's ``ignorePreferredTermsOfExistingPods``).
    """

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (ClusterEventWithHint(ClusterEvent("Pod", ActionType.ADD
                                                  | ActionType.UPDATE_POD_LABEL
                                                  | ActionType.DELETE), may_satisfy_affinity),
                on("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL))

    def __init__(self, *, hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
                 ignore_preferred_terms_of_existing_pods: bool = False) -> None:
        if not 0 <= hard_pod_affinity_weight <= 100:
            raise ValueError("hard_pod_affinity_weight: must be in the range 0-100, got "
                             f"{hard_pod_affinity_weight}")
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods
        self.index = ExistingTermIndex()
        self._domains = DomainCache()

    # -- filter --------------------------------------------------------------------------------

    def filter(self, ctx: CycleContext) -> FilterResult:
        pod, table = ctx.pod, ctx.table
        self.index.sync(table)
        n = table.n
        groups = self.index.groups[REQUIRED_ANTI_AFFINITY]
        existing: list[tuple[AffinityTerm, IntArray]] = [
            (term, groups[term][:n])
            for term in self.index.candidates(REQUIRED_ANTI_AFFINITY, pod.namespace)
            if _matches(term, _term_namespaces(ctx, term), pod)]
        if not pod.affinity and not pod.anti_affinity and not existing:
            return FilterResult.all_pass()
        # A node is charged to the first check it fails, in kube's order.
        failed: BoolArray | None = None
        reasons: list[Reason] = []

        def charge(message: str, bad: BoolArray | None, unresolvable: bool = False) -> None:
            nonlocal failed
            if bad is None:
                return
            fails = bad if failed is None else bad & ~failed
            if fails.any():
                reasons.append(Reason(message, fails, unresolvable))
                failed = fails if failed is None else failed | fails

        if pod.affinity:
            charge(ERR_REASON_AFFINITY_RULES_NOT_MATCH,
                   table.valid[:n] & ~self._affinity_satisfied(ctx), unresolvable=True)
        if pod.anti_affinity:
            bad: BoolArray | None = None
            for term in pod.anti_affinity:
                counts = _match_counts(table, term.selector, term.selector_key,
                                       _term_namespaces(ctx, term))
                if counts.any():
                    hit = self._domains.get(table, term.topology_key).hits(counts)
                    bad = hit if bad is None else bad | hit
            charge(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, bad)
        if existing:
            bad = None
            for term, rows in existing:
                hit = self._domains.get(table, term.topology_key).hits(rows)
                bad = hit if bad is None else bad | hit
            charge(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, bad)
        if failed is None:
            return FilterResult.all_pass()
        return FilterResult(~failed, reasons)

    def _affinity_satisfied(self, ctx: CycleContext) -> BoolArray:
        pod, table = ctx.pod, ctx.table
        terms = pod.affinity
        namespaces = [_term_namespaces(ctx, t) for t in terms]
        # Existing pods count only when they match ALL the terms: one conjunctive selector
        # over the intersection of the terms' namespaces.
        together: Namespaces = None
        for ns in namespaces:
            if ns is not None:
                together = ns if together is None else together & ns
        if any(t.selector.matches_nothing for t in terms):
            counts = np.zeros(table.n, np.int64)
        else:
            if len(terms) == 1:
                selector, key = terms[0].selector, terms[0].selector_key
            else:
                selector = LabelSelector([r for t in terms for r in t.selector.requirements])
                key = str(selector)
            counts = _match_counts(table, selector, key, together)
        ok: BoolArray = table.valid[: table.n]
        all_exist: BoolArray | None = None
        any_domain = False
        matched = bool(counts.any())
        for term in terms:
            d = self._domains.get(table, term.topology_key)
            ok = ok & d.has
            exists = d.hits(counts) if matched else np.zeros(table.n, np.bool_)
            any_domain = any_domain or bool(exists.any())
            all_exist = exists if all_exist is None else all_exist & exists
        if any_domain:
            assert all_exist is not None
            return ok & all_exist
        # First pod of a group: nothing anywhere matches; allow when it matches itself.
        if all(_matches(t, ns, pod) for t, ns in zip(terms, namespaces)):
            return ok
        return np.zeros(table.n, np.bool_)

    # -- score ---------------------------------------------------------------------------------

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        pod, table = ctx.pod, ctx.table
        n = table.n
        out = np.zeros(n, np.int64)
        own = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not own:
            return out
        self.index.sync(table)
        by_key: dict[str, IntArray] = {}

        def add(term: AffinityTerm, per_row: IntArray, weight: int) -> None:
            sums = self._domains.get(table, term.topology_key).sums(per_row) * weight
            acc = by_key.get(term.topology_key)
            if acc is None:
                by_key[term.topology_key] = sums
            else:
                acc += sums

        for sign, own_terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for term in own_terms:
                counts = _match_counts(table, term.selector, term.selector_key,
                                       _term_namespaces(ctx, term))
                if counts.any():
                    add(term, counts, sign * term.weight)
        groups = self.index.groups
        kinds: list[tuple[int, int | None]] = [(PREFERRED_AFFINITY, None),
                                               (PREFERRED_ANTI_AFFINITY, None)]
        if self.hard_pod_affinity_weight > 0:
            kinds.insert(0, (REQUIRED_AFFINITY, self.hard_pod_affinity_weight))
        for kind, fixed_weight in kinds:
            for term in self.index.candidates(kind, pod.namespace):
                if not _matches(term, _term_namespaces(ctx, term), pod):
                    continue
                rows = groups[kind][term]
                weight = fixed_weight if fixed_weight is not None else term.weight
                if kind == PREFERRED_ANTI_AFFINITY:
                    weight = -weight
                add(term, rows[:n], weight)
        if not by_key:
            return out
        raw = np.zeros(n, np.int64)
        for key, acc in by_key.items():
            raw += acc.take(self._domains.get(table, key).ids1)
        scored = feasible[:n] & table.valid[:n]
        if not scored.any():
            return out
        values = raw[scored]
        low, high = int(values.min()), int(values.max())
        if high > low:
            # Go: int64(float64(MaxNodeScore) * (float64(s-min) / float64(max-min)))
            scaled = float(MAX_NODE_SCORE) * ((values - low).astype(np.float64) / float(high - low))
            out[scored] = scaled.astype(np.int64)
        return out


def may_satisfy_affinity(pod: PodInfo, old: object, new: object) -> QueueingHint:
    """Whether a pod changing may let ``pod`` in (kube's ``isSchedulableAfterPodChange``): a
    pod added helps only one of ``pod``'s required affinity terms select (an anti-affinity
    conflict, ``pod``'s or an existing pod's, is never solved by one more pod); a pod deleted
    or relabelled may always help."""
    if old is not None:
        return QueueingHint.QUEUE
    added = namespace_and_labels(new)
    if added is None:
        return QueueingHint.QUEUE
    namespace, labels = added
    for term in pod.affinity:
        if (term.namespace_selector is not None or namespace in term.namespaces) \
                and term.selector.matches(labels):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP
