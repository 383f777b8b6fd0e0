"""PodTopologySpread: spread a workload's pods evenly over topology domains (filter + score).

Semantics are kube-scheduler's ``podtopologyspread`` plugin (``filtering.go``, ``scoring.go``,
``common.go``), evaluated for every node at once with numpy instead of node by node.

Filter (``whenUnsatisfiable: DoNotSchedule`` constraints)
    For each hard constraint, matching pods are counted per domain of its ``topologyKey`` over
    the *eligible* nodes: nodes that carry the topology keys of **all** hard constraints and
    that pass the constraint's node inclusion policies (``nodeAffinityPolicy: Honor``, the
    default: the pod's ``nodeSelector`` and required node affinity; ``nodeTaintsPolicy: Honor``:
    no untolerated ``NoSchedule``/``NoExecute`` taint; default ``Ignore``). Counted pods are in
    the incoming pod's namespace, match the constraint's selector (``matchLabelKeys`` already
    merged in by :func:`~pyscheduler.framework.pod.pod_info`) and are not terminating
    (``countPodsMatchSelector`` skips pods with a deletion timestamp, kubernetes#87621). An
    eligible node registers its domain even when it holds no matching pod, so a domain with
    zero pods counts towards the global minimum.

    The global minimum is the smallest per-domain count, or 0 when fewer domains exist than
    ``minDomains`` (1 when unset). A node fails when ``count[its domain] + selfMatch - min >
    maxSkew`` (``selfMatch`` = 1 when the incoming pod matches the selector) with kube's
    ``node(s) didn't match pod topology spread constraints``, or, when it lacks the topology
    key, with ``... (missing required label)`` (unresolvable). Like kube, constraints are
    checked in order and a node is charged to the first one it fails.

Score (``whenUnsatisfiable: ScheduleAnyway`` constraints)
    kube's PreScore/Score/NormalizeScore arithmetic, reproduced exactly: feasible nodes lacking
    any soft topology key are *ignored* (score 0). Per constraint, a weight ``log(size + 2)``
    where ``size`` is the number of distinct domains among the scored feasible nodes (for the
    ``kubernetes.io/hostname`` key: the number of scored feasible nodes). Per-domain counts are
    taken over *all* nodes that have every soft key, pass the inclusion policies and sit in a
    domain of some scored feasible node; for the hostname key the count is simply the node's
    own matching pods (no inclusion policies, as in kube). A node's raw score is
    ``int64(round(sum(float64(count) * weight + float64(maxSkew - 1))))`` with Go's
    half-away-from-zero rounding; normalization is ``100 * (max + min - score) // max`` over the
    scored nodes (``100`` for all when ``max == 0``), ignored nodes get 0. Floating point
    operations run in Go's order, so results agree bit for bit with kube on platforms where Go
    does not fuse multiply-add (amd64 by default); ``math.log`` is the C library's, which may
    differ from Go's ``math.Log`` in the last ulp (it would change a score only on an exact
    ``.5`` tie).

Default constraints: kube gives a pod without constraints of its own default ones
(``defaultingType: System`` or a configured ``List``); :mod:`pyscheduler.spread_defaults` adds
them to the pod the attempt sees, so this plugin sees them as the pod's own. Constraints marked
``system_default`` change one thing, as ``pl.systemDefaulted`` does in kube's ``PreScore``
(``requireAllTopologies`` false): feasible nodes lacking a soft topology key are scored, not
ignored. Such a node gets no term for the key it lacks, and counts as the domain ``""`` when
the topology's size is taken (a missing label reads as the empty value in Go), so a cluster
without zone labels still spreads by hostname.

Required node affinity for ``nodeAffinityPolicy: Honor`` is computed here from the pod's
``nodeSelector`` and required node affinity terms, with the table's label indexes (kube's
lazy-error rules: an empty or unparseable term selects no node). When the pod has such
constraints and the cycle state already holds a mask under ``"NodeAffinity/required"`` (a
NodeAffinity filter that ran first), that mask is used instead; it must hold exactly the pod's
own nodeSelector + required terms (kube's ``GetRequiredNodeAffinity``), not any profile-level
added affinity. The computed mask and the untolerated-taints mask are memoized in the cycle
state, so filter and score share them.

Vectorization: no loop runs over nodes. :class:`Domains` (cached per label key until labels
change) gives each row its domain id; per-domain sums are one ``np.add.reduceat`` over rows
sorted by domain; the rows of a few hit domains are the OR of their label masks, of many a
lookup by domain id; a hostname-like key (one node per domain) works on per-row arrays
directly. With one soft non-hostname constraint every node of a domain scores alike, so the
score arithmetic runs per domain in plain Python and one ``take`` maps it back onto rows.
Python loops run only over the pod's constraints and over domains. :class:`Domains` serves
InterPodAffinity too; it would sit naturally in the NodeTable.

Terminating pods: the table's match counters count every pod on a node, terminating ones
included. Until the table can leave them out (see :class:`_TerminatingPods`), the plugin keeps
a small index of terminating pods per row, refreshed from ``row_generation`` for the rows that
changed since the last call, and subtracts them.
"""

from __future__ import annotations

import math
import re
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from pyscheduler.framework.events import namespace_and_labels, on
from pyscheduler.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from pyscheduler.framework.interface import (
    MAX_NODE_SCORE,
    CycleContext,
    FilterResult,
    Reason,
)
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.pod import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    SpreadConstraint,
)

__all__ = [
    "DO_NOT_SCHEDULE",
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "HOSTNAME_KEY",
    "NAME",
    "NODE_AFFINITY_STATE_KEY",
    "SCHEDULE_ANYWAY",
    "DomainCache",
    "Domains",
    "PodTopologySpread",
    "required_node_affinity_mask",
    "untolerated_taints_mask",
]

NAME = "PodTopologySpread"

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
HOSTNAME_KEY = "kubernetes.io/hostname"

# Cycle-state keys: a mask another plugin may provide, and this plugin's own memo.
NODE_AFFINITY_STATE_KEY = "NodeAffinity/required"
_AFFINITY_MEMO = NAME + "/nodeAffinity"
_TAINTS_MEMO = NAME + "/untoleratedTaints"

# kube's DoNotScheduleTaintsFilterFunc: the effects that keep a pod off a node.
_DO_NOT_SCHEDULE_EFFECTS = frozenset(("NoSchedule", "NoExecute"))

FloatArray = npt.NDArray[np.float64]
_INT64 = re.compile(r"[+-]?[0-9]+")


# -- node inclusion policies --------------------------------------------------------------------

def _parse_int64(s: str) -> int | None:
    """Go's ``strconv.ParseInt(s, 10, 64)``: optional sign, decimal digits, int64 range."""
    if not _INT64.fullmatch(s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def _requirement_mask(table: NodeTable, r: NodeSelectorRequirement) -> BoolArray | None:
    """Rows satisfying one ``matchExpressions`` requirement; None when kube could not parse it
    (its lazy-error selector then skips the whole term)."""
    n = table.n
    op = r.operator
    if op in ("Exists", "DoesNotExist"):
        if r.values:
            return None
        present: BoolArray = np.array(table.has_label(r.key), np.bool_)
        return present if op == "Exists" else ~present
    if op in ("In", "NotIn"):
        if not r.values:
            return None
        hit = np.zeros(n, np.bool_)
        for v in r.values:
            hit |= table.label_mask(r.key, v)
        # NotIn also selects nodes without the label (labels.Requirement semantics).
        return hit if op == "In" else ~hit
    if op in ("Gt", "Lt"):
        bound = _parse_int64(r.values[0]) if len(r.values) == 1 else None
        if bound is None:
            return None
        hit = np.zeros(n, np.bool_)
        # One test per distinct label value, not per node.
        for v, rows in table.label_index.get(r.key, {}).items():
            x = _parse_int64(v)
            if x is not None and (x > bound if op == "Gt" else x < bound):
                hit |= rows[:n]
        return hit
    return None


def _field_mask(table: NodeTable, r: NodeSelectorRequirement) -> BoolArray | None:
    """``matchFields``: only ``metadata.name`` In/NotIn with exactly one value parses."""
    if r.key != "metadata.name" or r.operator not in ("In", "NotIn") or len(r.values) != 1:
        return None
    hit = np.zeros(table.n, np.bool_)
    slot = table.slots.get(r.values[0])
    if slot is not None and slot < table.n:
        hit[slot] = True
    return hit if r.operator == "In" else ~hit


def _term_mask(table: NodeTable, term: NodeSelectorTerm) -> BoolArray | None:
    """Rows matching a nodeSelectorTerm; None: no row (an empty or unparseable term)."""
    mask: BoolArray | None = None
    for r in term.match_expressions:
        m = _requirement_mask(table, r)
        if m is None:
            return None
        mask = m if mask is None else mask & m
    for r in term.match_fields:
        m = _field_mask(table, r)
        if m is None:
            return None
        mask = m if mask is None else mask & m
    return mask


def required_node_affinity_mask(table: NodeTable, pod: PodInfo) -> BoolArray:
    """Rows matching the pod's nodeSelector AND its required node affinity (terms ORed):
    kube's ``nodeaffinity.GetRequiredNodeAffinity(pod).Match``, vectorized."""
    mask: BoolArray = np.array(table.valid[: table.n], np.bool_)
    for key, value in pod.node_selector.items():
        mask &= table.label_mask(key, value)
    if pod.required_terms:
        anyterm = np.zeros(table.n, np.bool_)
        for term in pod.required_terms:
            m = _term_mask(table, term)
            if m is not None:
                anyterm |= m
        mask &= anyterm
    return mask


def untolerated_taints_mask(table: NodeTable, pod: PodInfo) -> BoolArray:
    """Rows with a NoSchedule/NoExecute taint the pod does not tolerate (kube's
    ``FindMatchingUntoleratedTaint`` with ``DoNotScheduleTaintsFilterFunc``)."""
    out = np.zeros(table.n, np.bool_)
    for taint, rows in table.taint_index.items():
        if taint.effect not in _DO_NOT_SCHEDULE_EFFECTS:
            continue
        if any(t.tolerates(taint.key, taint.value, taint.effect) for t in pod.tolerations):
            continue
        out |= rows[: table.n]
    return out


# -- terminating pods ---------------------------------------------------------------------------

class _TerminatingPods:
    """Terminating pods per row, kept current from the table's ``row_generation``.

    A stopgap: the table's match counters should skip terminating pods themselves (see the
    module docstring). Only rows changed since the last sync are rescanned, so the steady
    cost is one row per scheduled pod.
    """

    __slots__ = ("_table", "_seen", "rows")

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._seen = -1
        self.rows: dict[int, list[PodInfo]] = {}

    def sync(self, table: NodeTable) -> dict[int, list[PodInfo]]:
        if table is not self._table:
            self._table, self._seen, self.rows = table, -1, {}
        elif table.generation == self._seen:
            return self.rows
        changed = np.flatnonzero(table.row_generation[: table.n] > self._seen)
        for slot in changed.tolist():
            deleting = [p for p in table.pods[slot].values() if p.deleting] \
                if table.valid[slot] else []
            if deleting:
                self.rows[slot] = deleting
            else:
                self.rows.pop(slot, None)
        self._seen = table.generation
        return self.rows


# -- topology domains ---------------------------------------------------------------------------

_FEW_DOMAINS = 8  # up to this many hit domains, OR their label masks instead of a lookup


class Domains:
    """The topology domains of one label key, in the shapes the vectorized code wants.

    Per-domain arrays have ``count + 1`` entries: index ``d + 1`` for domain ``d`` and index 0
    (always zero) for rows without the label, holes included, so ``array.take(ids1)`` maps them
    back onto rows. Per-domain sums use a row order sorted by domain, cached with the labels,
    and one ``np.add.reduceat`` (cheaper than ``np.bincount`` with weights). ``one_node_each``
    tells a hostname-like key (every domain a single node) apart: there, a per-row quantity
    already is the per-domain one.
    """

    __slots__ = ("key", "values", "ids1", "has", "everywhere", "one_node_each", "_order",
                 "_starts", "_table")

    def __init__(self, table: NodeTable, key: str) -> None:
        ids, values = table.domains(key)
        self._table = table
        self.key = key
        self.values = values
        self.ids1: npt.NDArray[np.intp] = ids.astype(np.intp) + 1
        self.has: BoolArray = table.has_label(key)
        labelled = int(np.count_nonzero(self.has))
        # Every node carries the key (node additions and removals change labels, so this
        # stays true as long as the cached object lives).
        self.everywhere = labelled == int(np.count_nonzero(table.valid[: table.n]))
        self.one_node_each = len(values) == labelled
        # Rows sorted by domain (unlabelled first); each domain's block starts at _starts[d].
        self._order = np.argsort(self.ids1, kind="stable")
        self._starts = np.searchsorted(self.ids1[self._order], np.arange(1, len(values) + 1))

    @property
    def count(self) -> int:
        return len(self.values)

    def sums(self, per_row: IntArray) -> IntArray:
        """``per_row`` summed by domain (index 0: zero)."""
        out = np.zeros(self.count + 1, np.int64)
        if self.one_node_each:
            out[self.ids1] = per_row  # one row per domain: a scatter, no sum
            out[0] = 0
        elif self.count:
            out[1:] = np.add.reduceat(per_row.take(self._order), self._starts)
        return out

    def any(self, per_row: BoolArray) -> BoolArray:
        """Whether some row of each domain is set in ``per_row`` (index 0: False)."""
        out = np.zeros(self.count + 1, np.bool_)
        if self.count:
            out[1:] = np.logical_or.reduceat(per_row.take(self._order), self._starts)
        return out

    def rows(self, hot: BoolArray) -> BoolArray:
        """Rows whose domain is marked in ``hot`` (indexed like :meth:`sums`; ``hot[0]`` is
        treated as False)."""
        if self.count <= _FEW_DOMAINS:
            picked = [d for d, h in enumerate(hot[1:].tolist()) if h]
        elif np.count_nonzero(hot[1:]) <= _FEW_DOMAINS:
            picked = np.flatnonzero(hot[1:]).tolist()
        else:
            picked = None
        if picked is not None and len(picked) <= _FEW_DOMAINS:
            out = np.zeros(self._table.n, np.bool_)
            for d in picked:
                out |= self._table.label_mask(self.key, self.values[d])
            return out
        lookup = hot.copy()
        lookup[0] = False
        found: BoolArray = lookup.take(self.ids1)
        return found

    def hits(self, per_row: IntArray) -> BoolArray:
        """Rows whose domain holds a positive total of ``per_row`` (non-negative)."""
        if self.one_node_each:
            mine: BoolArray = (per_row > 0) & self.has
            return mine
        return self.rows(self.sums(per_row) > 0)


class DomainCache:
    """:class:`Domains` per label key, rebuilt when the table's labels change."""

    __slots__ = ("_table", "_generation", "_n", "_cache")

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._generation = -1
        self._n = -1
        self._cache: dict[str, Domains] = {}

    def get(self, table: NodeTable, key: str) -> Domains:
        if (table is not self._table or table.label_generation != self._generation
                or table.n != self._n):
            self._table, self._generation, self._n = table, table.label_generation, table.n
            self._cache = {}
        d = self._cache.get(key)
        if d is None:
            d = self._cache[key] = Domains(table, key)
        return d


# -- arithmetic helpers -------------------------------------------------------------------------

def _round_half_up(x: float) -> int:
    """Go's ``math.Round`` for a non-negative float (exact: ``x - floor(x)`` is)."""
    t = math.floor(x)
    return t + 1 if x - t >= 0.5 else t


def _go_round(x: FloatArray) -> IntArray:
    """Go's ``math.Round`` (half away from zero; numpy's ``round`` is half to even)."""
    t = np.trunc(x)
    up = (np.abs(x - t) >= 0.5).astype(np.float64)
    out: IntArray = (t + np.copysign(up, x)).astype(np.int64)
    return out


class PodTopologySpread:
    """Filter and score plugin; keeps only caches (domains, terminating pods) between calls."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on): a pod its constraints count changing, a node's domain."""
        return (ClusterEventWithHint(ClusterEvent("Pod", ActionType.ADD
                                                  | ActionType.UPDATE_POD_LABEL
                                                  | ActionType.UPDATE_POD_TOLERATION
                                                  | ActionType.DELETE), involved_in_spread),
                on("Node", ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                   | ActionType.UPDATE_NODE_TAINT))

    def __init__(self) -> None:
        self._terminating = _TerminatingPods()
        self._domains = DomainCache()

    # -- shared pieces -------------------------------------------------------------------------

    def _included(self, ctx: CycleContext, c: SpreadConstraint) -> BoolArray | None:
        """Rows passing the constraint's node inclusion policies; None: every row."""
        mask: BoolArray | None = None
        if c.node_affinity_policy == HONOR and (ctx.pod.node_selector or ctx.pod.required_terms):
            mask = self._affinity(ctx)
        if c.node_taints_policy == HONOR:
            if _TAINTS_MEMO not in ctx.state:
                found = untolerated_taints_mask(ctx.table, ctx.pod)
                ctx.state[_TAINTS_MEMO] = ~found if found.any() else None
            tolerated: BoolArray | None = ctx.state[_TAINTS_MEMO]
            if tolerated is not None:
                mask = tolerated if mask is None else mask & tolerated
        return mask

    @staticmethod
    def _affinity(ctx: CycleContext) -> BoolArray:
        given = ctx.state.get(NODE_AFFINITY_STATE_KEY)
        if isinstance(given, np.ndarray) and given.shape[0] >= ctx.table.n:
            mask: BoolArray = given[: ctx.table.n]
            return mask
        memo = ctx.state.get(_AFFINITY_MEMO)
        if memo is None:
            memo = ctx.state[_AFFINITY_MEMO] = required_node_affinity_mask(ctx.table, ctx.pod)
        result: BoolArray = memo
        return result

    def _counts(self, ctx: CycleContext, c: SpreadConstraint) -> IntArray:
        """Per row: non-terminating pods of the incoming pod's namespace matching ``c``."""
        table, pod = ctx.table, ctx.pod
        if c.selector.matches_nothing:
            # An absent labelSelector selects nothing; its canonical text ("") is the empty
            # selector's too, so never ask the table's counters about it.
            return np.zeros(table.n, np.int64)
        counts = table.count_matching(c.selector, c.selector_key, frozenset((pod.namespace,)))
        terminating = self._terminating.sync(table)
        if terminating:
            fixed: IntArray = np.array(counts, np.int64)
            for slot, pods in terminating.items():
                for p in pods:
                    if p.namespace == pod.namespace and c.selector.matches(p.labels):
                        fixed[slot] -= 1
            return fixed
        return counts

    def _domain_counts(self, ctx: CycleContext, c: SpreadConstraint, d: Domains,
                       eligible: BoolArray | None) -> tuple[IntArray, BoolArray | None]:
        """Matching pods per domain over the ``eligible`` rows (None: every row with the key),
        and which domains hold an eligible row (None: all of them)."""
        counts = self._counts(ctx, c)
        if eligible is None:
            return d.sums(counts), None
        return d.sums(counts * eligible), d.any(eligible)

    # -- filter --------------------------------------------------------------------------------

    def filter(self, ctx: CycleContext) -> FilterResult:
        hard = [c for c in ctx.pod.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE]
        if not hard:
            return FilterResult.all_pass()
        table = ctx.table
        valid = table.valid[: table.n]
        domains = [self._domains.get(table, c.topology_key) for c in hard]
        has_all = domains[0].has
        for d in domains[1:]:
            has_all = has_all & d.has
        single = len(hard) == 1
        decided: BoolArray | None = None  # rows already charged to an earlier constraint
        missing: BoolArray | None = None
        skewed: BoolArray | None = None
        for c, d in zip(hard, domains):
            # kube checks constraints in order and stops at the first failure of a node.
            lacks = None if d.everywhere else valid & ~d.has
            if lacks is not None and decided is not None:
                lacks &= ~decided
            included = self._included(ctx, c)
            eligible = None if single and included is None else \
                has_all if included is None else has_all & included
            per_domain, present = self._domain_counts(ctx, c, d, eligible)
            if present is None:
                domain_count = d.count
                observed = per_domain[1:]
            else:
                domain_count = int(np.count_nonzero(present))
                observed = per_domain[present]
            min_domains = c.min_domains if c.min_domains is not None else 1
            if domain_count == 0 or domain_count < min_domains:
                global_min = 0
            else:
                global_min = int(observed.min())
            self_match = 1 if c.selector.matches(ctx.pod.labels) else 0
            fails = d.rows(per_domain > c.max_skew + global_min - self_match)
            if decided is not None:
                fails &= ~decided
            skewed = fails if skewed is None else skewed | fails
            if lacks is not None:
                missing = lacks if missing is None else missing | lacks
            if not single:
                now = fails if lacks is None else fails | lacks
                decided = now if decided is None else decided | now
        assert skewed is not None
        reasons = []
        if skewed.any():
            reasons.append(Reason(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed))
        if missing is not None and missing.any():
            reasons.append(Reason(ERR_REASON_NODE_LABEL_NOT_MATCH, missing, unresolvable=True))
            skewed = skewed | missing
        if not reasons:
            return FilterResult.all_pass()
        return FilterResult(~skewed, reasons)

    # -- score ---------------------------------------------------------------------------------

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        soft = [c for c in ctx.pod.spread if c.when_unsatisfiable == SCHEDULE_ANYWAY]
        table = ctx.table
        n = table.n
        if not soft:
            return np.zeros(n, np.int64)
        domains = [self._domains.get(table, c.topology_key) for c in soft]
        # kube's requireAllTopologies: false only for the system defaults (then every soft
        # constraint of the pod is one of them), so that nodes without a zone label still get
        # hostname spreading.
        require_all = not any(c.system_default for c in soft)
        has_all = domains[0].has
        for d in domains[1:]:
            has_all = has_all & d.has
        # Feasible nodes missing a soft key are kube's IgnoredNodes: scored 0.
        scored = feasible[:n] & (has_all if require_all else table.valid[:n])
        scored_count = int(np.count_nonzero(scored))
        if scored_count == 0:
            return np.zeros(n, np.int64)
        c, d = soft[0], domains[0]
        if len(soft) == 1 and c.topology_key != HOSTNAME_KEY and require_all:
            return self._score_by_domain(ctx, c, d, scored)
        total = np.zeros(n, np.float64)
        for c, d in zip(soft, domains):
            included = self._included(ctx, c)
            if c.topology_key == HOSTNAME_KEY:
                # kube counts the node's own pods here, without inclusion policies.
                weight = math.log(scored_count + 2)
                per_node = self._counts(ctx, c).astype(np.float64)
            elif require_all:
                candidate = d.any(scored)
                weight = math.log(int(np.count_nonzero(candidate)) + 2)
                eligible = has_all if included is None else has_all & included
                # Sums of domains holding no scored node are computed but never read.
                per_domain, _ = self._domain_counts(ctx, c, d, eligible)
                per_node = per_domain.take(d.ids1).astype(np.float64)
            else:
                weight, per_node = self._counts_without_key(ctx, c, d, scored, included)
            # Go: score += float64(cnt)*tpWeight + float64(maxSkew-1), for the keys the node has
            term = per_node * weight + float(c.max_skew - 1)
            if not require_all and not d.everywhere:
                term = np.where(d.has, term, 0.0)
            total = total + term
        raw = _go_round(total[scored])
        out = np.zeros(n, np.int64)
        out[scored] = _normalize(raw, raw)
        return out

    def _counts_without_key(self, ctx: CycleContext, c: SpreadConstraint, d: Domains,
                            scored: BoolArray, included: BoolArray | None
                            ) -> tuple[float, FloatArray]:
        """The weight and per-row domain counts of a non-hostname constraint when nodes lacking
        topology keys are scored (kube's ``requireAllTopologies`` false). kube reads a missing
        label as the value ``""``: a scored node without the key adds the domain ``""`` to the
        size of the topology, and the matching pods of every node without the key (passing the
        inclusion policies) count towards that domain — which only a node labelled with the
        empty value itself ever reads, since a node without the key gets no term for it."""
        table = ctx.table
        valid = table.valid[: table.n]
        lacks = valid & ~d.has
        empty = d.values.index("") + 1 if "" in d.values else 0
        hit = d.any(scored)
        scored_lacking = bool(np.any(scored & lacks))
        if scored_lacking and empty:
            hit[empty] = True
        size = int(np.count_nonzero(hit[1:])) + (1 if scored_lacking and not empty else 0)
        eligible = valid if included is None else valid & included
        counts = self._counts(ctx, c) * eligible
        per_domain = d.sums(counts)
        if empty:
            per_domain[empty] += int(counts[lacks].sum())
        per_node: FloatArray = per_domain.take(d.ids1).astype(np.float64)
        return math.log(size + 2), per_node

    def _score_by_domain(self, ctx: CycleContext, c: SpreadConstraint, d: Domains,
                         scored: BoolArray) -> IntArray:
        """One non-hostname constraint: every node of a domain scores alike, so the arithmetic
        runs per domain (in plain Python: domains are few) and only the final lookup touches
        every row."""
        candidate = d.any(scored).tolist()
        weight = math.log(sum(candidate) + 2)
        included = self._included(ctx, c)
        per_domain, _ = self._domain_counts(ctx, c, d, included & d.has
                                            if included is not None else None)
        skew = float(c.max_skew - 1)
        # Go: int64(math.Round(float64(cnt)*tpWeight + float64(maxSkew-1))); never negative.
        raw = [_round_half_up(cnt * weight + skew) for cnt in per_domain.tolist()]
        seen = [r for r, hit in zip(raw, candidate) if hit]
        high, low = max(max(seen), 0), min(seen)
        if high == 0:
            lut = [MAX_NODE_SCORE] * len(raw)
        else:
            lut = [MAX_NODE_SCORE * (high + low - r) // high for r in raw]
        lut[0] = 0
        out: IntArray = np.array(lut, np.int64).take(d.ids1)
        out *= scored
        return out


def _normalize(raw: IntArray, seen: IntArray) -> IntArray:
    """kube's NormalizeScore: ``100 * (max + min - s) // max``, with min and max over the scored
    values ``seen`` (max starting from 0), or 100 for all when max is 0."""
    high = max(int(seen.max()), 0)
    if high == 0:
        return np.full(len(raw), MAX_NODE_SCORE, np.int64)
    low = int(seen.min())
    out: IntArray = MAX_NODE_SCORE * (high + low - raw) // high
    return out


def involved_in_spread(pod: PodInfo, old: object, new: object) -> QueueingHint:
    """kube's ``isSchedulableAfterPodChange``: a pod changing matters to ``pod`` only when it
    is in ``pod``'s namespace and one of ``pod``'s DoNotSchedule constraints selects it (before
    or after the change). A pod rejected through default constraints, or an event without its
    pod, is queued."""
    constraints = [c for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]
    seen = [found for found in (namespace_and_labels(old), namespace_and_labels(new))
            if found is not None]
    if not constraints or not seen:
        return QueueingHint.QUEUE
    for namespace, labels in seen:
        if namespace == pod.namespace and any(c.selector.matches(labels) for c in constraints):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP
