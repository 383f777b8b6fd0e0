"""DefaultPreemption: when no node fits a pod, find a node where evicting pods of lower
priority makes it fit (kube's ``defaultpreemption`` post-filter plugin and the ``Evaluator``
of ``pkg/scheduler/framework/preemption``).

The steps are kube's:

1. **Eligibility** (``PodEligibleToPreemptOthers``): a pod with ``preemptionPolicy: Never``
   does not preempt; nor does a pod nominated to a node on which pods it may preempt are still
   terminating because of a preemption (it waits for them), unless that node has become
   unusable for it for a reason no eviction fixes.
2. **Potential nodes**: the nodes whose filter failure an eviction might fix — every rejected
   node except those whose first failing filter said *unresolvable*.
3. **Dry run** (``DryRunPreemption`` + ``SelectVictimsOnNode``), from a random offset over the
   potential nodes, until ``max(minCandidateNodesPercentage % of them,
   minCandidateNodesAbsolute)`` candidates are found with at least one that violates no
   PodDisruptionBudget: on each node, every pod of lower priority that may be evicted is taken
   off; if the pod then passes **every filter** (the same pipeline, so spread, affinity, ports
   and fragments count) the pods are put back one at a time, the most important first (higher
   priority, then earlier start), PDB-violating ones before the others, and each one that lets
   the pod still fit is reprieved. The rest are the node's victims.
4. **Choice** (``pickOneNodeForPreemption``): the fewest PDB violations, then the lowest
   highest victim priority, the smallest sum of priorities, the fewest victims, the latest
   start among the highest-priority victims, then the first.

The dry run changes the node table — it takes pods off and puts them back — because the
filters read the table: that is what keeps one rule per filter (no second copy "for
preemption"). The table has one owner, the scheduling loop; every change is undone before
:meth:`DefaultPreemption.preempt` returns, whatever happens.

Which pods may be evicted is the caller's to say (``may_evict``): the scheduler allows its own
pods only unless configured otherwise, and never pods on virtual nodes (which are not rows of
the real pass anyway). Acting on the choice — recording the nomination, evicting — is the
scheduler's (:mod:`pyscheduler.scheduler`); this module does no I/O.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pyscheduler.api.labels import LabelSelector, label_selector_from_dict
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import BoolArray, NodeTable
from pyscheduler.framework.pipeline import FilterOutcome
from pyscheduler.framework.pod import (
    PodInfo,
    nominated_node,
    preempts_never,
    start_time,
    terminating_by_preemption,
)
from pyscheduler.plugins.node_resources_fit import TOO_MANY_PODS, insufficient

__all__ = [
    "NAME",
    "NOT_HELPFUL",
    "NOT_VERIFIED",
    "NO_VICTIMS",
    "Candidate",
    "DefaultPreemption",
    "DisruptionBudget",
    "FitsFn",
    "PreemptionResult",
    "VerifyFn",
    "importance",
    "pick_one_node",
]

NAME = "DefaultPreemption"

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."

#: kube adds this to every priority before summing them, so that sums of negative priorities
#: still order nodes with fewer victims first.
_PRIORITY_OFFSET = 2**31

#: fits(slot, why) -> None when the pod passes every filter on that row of the table as it is
#: now, else the reasons it fails there (possibly none when ``why`` is False).
FitsFn = Callable[[int, bool], "list[str] | None"]
#: verify(slot) -> whether a check that cannot run at every step of the dry run (a fragment's
#: filter) accepts the pod on that row of the table as it is now.
VerifyFn = Callable[[int], bool]
#: How many of the best candidates a verification may turn down before preemption gives up.
VERIFY_CANDIDATES = 3
NOT_VERIFIED = "the pod's stage logic rejects every candidate node even with the victims gone"


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """What preemption reads of a PodDisruptionBudget."""

    namespace: str
    selector: LabelSelector
    allowed: int
    disrupted: frozenset[str]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> DisruptionBudget:
        """From a ``policy/v1`` object. A budget whose selector cannot be read selects no
        pod, as in kube (it "does not match the pod")."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        try:
            selector = label_selector_from_dict(spec.get("selector"))
        except Exception:
            selector = LabelSelector(nothing=True)
        allowed = status.get("disruptionsAllowed")
        return cls(str(meta.get("namespace") or ""), selector,
                   allowed if isinstance(allowed, int) else 0,
                   frozenset(status.get("disruptedPods") or ()))

    def selects(self, pod: PodInfo) -> bool:
        # An empty (or absent) selector selects nothing here, unlike elsewhere.
        return pod.namespace == self.namespace and not self.selector.empty \
            and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node and the pods to evict from it, the most important first."""

    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    """What one preemption attempt came to.

    ``candidate`` is the chosen node and its victims, or None. ``message`` is kube's
    post-filter message (empty on success); ``clear_nomination`` says whether the pod's
    nomination, if any, must be cleared (kube's ``NominatingMode``: nothing was found), as
    opposed to kept (the pod is waiting for its earlier victims, or may not preempt)."""

    candidate: Candidate | None
    message: str
    clear_nomination: bool = False


def importance(pod: PodInfo) -> tuple[int, str]:
    """Sort key, most important first: higher priority, then earlier start (kube's
    ``MoreImportantPod``)."""
    return -pod.priority, start_time(pod)


def _split_by_budgets(pods: Sequence[PodInfo], budgets: Sequence[DisruptionBudget]
                      ) -> tuple[list[PodInfo], list[PodInfo]]:
    """The pods whose eviction would exceed a budget, and the others, each in the order given
    (kube's ``filterPodsWithPDBViolation``: budgets are spent in that order)."""
    allowed = [b.allowed for b in budgets]
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for pod in pods:
        violates = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if not budget.selects(pod) or pod.name in budget.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violates = True
        (violating if violates else others).append(pod)
    return violating, others


def _earliest_top_start(victims: Sequence[PodInfo]) -> str:
    """The earliest start among the victims of the highest priority."""
    top = max(v.priority for v in victims)
    return min(start_time(v) for v in victims if v.priority == top)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """kube's ``pickOneNodeForPreemption`` over non-empty ``candidates``."""
    criteria: tuple[Callable[[Candidate], Any], ...] = (
        lambda c: -c.pdb_violations,
        lambda c: -max(v.priority for v in c.victims),
        lambda c: -sum(v.priority + _PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_top_start(c.victims),
    )
    left = list(candidates)
    for criterion in criteria:
        if len(left) == 1:
            break
        scores = [criterion(c) for c in left]
        best = max(scores)
        left = [c for c, s in zip(left, scores) if s == best]
    return left[0]


def _first_failures(outcome: FilterOutcome) -> tuple[BoolArray, BoolArray]:
    """Rows rejected by their first failing filter for a reason an eviction might fix, and
    rows rejected for an unresolvable one (kube records only a node's first failing status)."""
    remaining = outcome.valid.copy()
    resolvable = np.zeros_like(remaining)
    unresolvable = np.zeros_like(remaining)
    for _, result in outcome.results:
        for reason in result.reasons:
            if reason.prefilter and reason.failed[: len(remaining)].any():
                # The pod was turned down as a whole (kube's PreFilter): every node has that
                # status.
                return (np.zeros_like(remaining), remaining) if reason.unresolvable \
                    else (remaining, np.zeros_like(remaining))
    for _, result in outcome.results:
        if result.passed is None:
            continue
        rejected = remaining & ~result.passed[: len(remaining)]
        if not rejected.any():
            continue
        hard = np.zeros_like(rejected)
        for reason in result.reasons:
            if reason.unresolvable:
                hard |= reason.failed[: len(rejected)]
        hard &= rejected
        unresolvable |= hard
        resolvable |= rejected & ~hard
        remaining &= result.passed[: len(remaining)]
    return resolvable, unresolvable


class DefaultPreemption:
    """One instance per scheduler; :meth:`preempt` per pod that fits nowhere."""

    name = NAME

    def __init__(self, *, min_candidate_nodes_percentage: int = 10,
                 min_candidate_nodes_absolute: int = 100,
                 rng: np.random.Generator | None = None) -> None:
        self.percentage = min_candidate_nodes_percentage
        self.absolute = min_candidate_nodes_absolute
        self.rng = rng or np.random.default_rng()

    def candidates_wanted(self, potential: int) -> int:
        """kube's ``calculateNumCandidates``."""
        return min(max(potential * self.percentage // 100, self.absolute), potential)

    def ineligible(self, pod: PodInfo, table: NodeTable,
                   may_evict: Callable[[PodInfo], bool],
                   nominated_unresolvable: bool) -> str | None:
        """Why ``pod`` may not preempt now, or None (kube's ``PodEligibleToPreemptOthers``)."""
        if preempts_never(pod):
            return NEVER
        node = nominated_node(pod)
        slot = table.slots.get(node) if node else None
        if slot is None or nominated_unresolvable:
            return None
        for other in table.pods[slot].values():
            if other.priority < pod.priority and may_evict(other) \
                    and terminating_by_preemption(other):
                return TERMINATING
        return None

    def preempt(self, ctx: CycleContext, outcome: FilterOutcome, fits: FitsFn,
                may_evict: Callable[[PodInfo], bool],
                budgets: Iterable[DisruptionBudget] = (),
                verify: VerifyFn | None = None) -> PreemptionResult:
        """Find the node and victims for ``ctx.pod``, given the outcome of its filters
        (``outcome``) and a way to run them again on one row (``fits``). ``verify``, when
        given, must also accept the chosen node with its victims gone (a fragment's filter,
        too costly to ask at every step of the dry run, is asked once per candidate tried, up
        to :data:`VERIFY_CANDIDATES`). Changes nothing that outlives the call."""
        pod = ctx.pod
        table = ctx.table
        resolvable, unresolvable = _first_failures(outcome)
        nominated = table.slots.get(nominated_node(pod)) if nominated_node(pod) else None
        why_not = self.ineligible(pod, table, may_evict, nominated is not None
                                  and bool(unresolvable[nominated]))
        if why_not is not None:
            return PreemptionResult(None, why_not)
        total = int(outcome.valid.sum())
        potential = np.flatnonzero(resolvable)
        if len(potential) == 0:
            return PreemptionResult(None, _no_node_message(
                total, collections.Counter({NOT_HELPFUL: total})), clear_nomination=True)
        if not any(p < pod.priority for p in table.priorities):
            # No pod of lower priority anywhere: no node has a victim (the dry run's answer,
            # without looking at every pod).
            nobody = collections.Counter({NO_VICTIMS: len(potential),
                                          NOT_HELPFUL: total - len(potential)})
            return PreemptionResult(None, _no_node_message(total, nobody),
                                    clear_nomination=True)
        budget_list = list(budgets)
        by_resources = _only_resources_change(pod)
        approximate: set[str] = set()
        wanted = self.candidates_wanted(len(potential))
        offset = int(self.rng.integers(len(potential)))
        clean: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: collections.Counter[str] = collections.Counter()
        checked = 0
        for i in range(len(potential)):
            slot = int(potential[(offset + i) % len(potential)])
            checked += 1
            if by_resources and not table.term_pods[slot]:
                found = self._victims_by_resources(ctx, slot, may_evict, budget_list)
                if isinstance(found, Candidate):
                    approximate.add(found.node)
            else:
                found = self._victims_on(ctx, slot, fits, may_evict, budget_list)
            if isinstance(found, list):
                statuses.update(found)
                continue
            (violating if found.pdb_violations else clean).append(found)
            if clean and len(clean) + len(violating) >= wanted:
                break
        found_all = clean + violating
        if not found_all:
            # Nodes not tried (none: the loop ends early only with candidates) and nodes no
            # eviction helps count as "not helpful", as kube's absent-node status.
            statuses[NOT_HELPFUL] += total - checked
            return PreemptionResult(None, _no_node_message(total, statuses),
                                    clear_nomination=True)
        turned_down = 0
        while found_all and turned_down < VERIFY_CANDIDATES:
            best = pick_one_node(found_all)
            found_all = [c for c in found_all if c is not best]
            if best.node in approximate:
                # Worked out from resources alone: the filters must agree with the victims
                # gone, or the node gets the full dry run.
                approximate.discard(best.node)
                if not self._holds(table, best, lambda slot: fits(slot, False) is None):
                    exact = self._victims_on(ctx, table.slots[best.node], fits, may_evict,
                                             budget_list)
                    if isinstance(exact, Candidate):
                        found_all.append(exact)
                    continue
            if verify is None or self._holds(table, best, verify):
                return PreemptionResult(best, "")
            turned_down += 1
        if turned_down:
            return PreemptionResult(None, NOT_VERIFIED, clear_nomination=True)
        statuses[NOT_HELPFUL] += total - sum(statuses.values())
        return PreemptionResult(None, _no_node_message(total, statuses), clear_nomination=True)

    def _victims_by_resources(self, ctx: CycleContext, slot: int,
                              may_evict: Callable[[PodInfo], bool],
                              budgets: Sequence[DisruptionBudget]) -> Candidate | list[str]:
        """:meth:`_victims_on` for a pod whose fit on this node only resources decide (see
        :func:`_only_resources_change`): the same reprieve order, in arithmetic on the node's
        requested column instead of filter runs. The caller confirms the chosen candidate
        with the filters."""
        pod, table = ctx.pod, ctx.table
        potential = [p for p in table.pods[slot].values()
                     if p.priority < pod.priority and may_evict(p)]
        if not potential:
            return [NO_VICTIMS]
        request = ctx.request
        width = len(request)
        asked = request > 0
        allocatable = table.allocatable[slot, :width]
        used = table.requested[slot, :width].copy()
        vectors = {p.uid: table.request_vector(p)[:width] for p in potential}
        for vector in vectors.values():
            used -= vector
        lacking = asked & (used + request > allocatable)
        if lacking.any():  # even with every evictable pod gone
            return _shortfall(table, lacking)
        potential.sort(key=importance)
        violating, others = _split_by_budgets(potential, budgets)
        victims: list[PodInfo] = []
        violations = 0
        for group, violates in ((violating, True), (others, False)):
            for victim in group:
                back = used + vectors[victim.uid]
                if bool(np.all(~asked | (back + request <= allocatable))):
                    used = back  # reprieved
                else:
                    victims.append(victim)
                    violations += violates
        if violating and others:
            victims.sort(key=importance)
        return _candidate(table.names[slot], victims, violations)

    @staticmethod
    def _holds(table: NodeTable, candidate: Candidate, check: VerifyFn) -> bool:
        """``check`` of the candidate's node with its victims gone (and back after)."""
        slot = table.slots[candidate.node]
        off: list[PodInfo] = []
        try:
            for victim in candidate.victims:
                if table.remove_pod(slot, victim.uid) is not None:
                    off.append(victim)
            return check(slot)
        finally:
            for victim in off:
                table.add_pod(slot, victim)

    def _victims_on(self, ctx: CycleContext, slot: int, fits: FitsFn,
                    may_evict: Callable[[PodInfo], bool],
                    budgets: Sequence[DisruptionBudget]) -> Candidate | list[str]:
        """kube's ``SelectVictimsOnNode``: the candidate on ``slot``, or why there is none."""
        pod = ctx.pod
        table = ctx.table
        potential = [p for p in table.pods[slot].values()
                     if p.priority < pod.priority and may_evict(p)]
        if not potential:
            return [NO_VICTIMS]
        short = _short_even_without(table, slot, ctx, potential)
        if short:
            return short
        off: dict[str, PodInfo] = {}
        try:
            for victim in potential:
                table.remove_pod(slot, victim.uid)
                off[victim.uid] = victim
            failing = fits(slot, True)
            if failing is not None:
                return failing
            potential.sort(key=importance)
            violating, others = _split_by_budgets(potential, budgets)
            victims: list[PodInfo] = []
            violations = 0
            for group, violates in ((violating, True), (others, False)):
                for victim in group:
                    table.add_pod(slot, victim)
                    del off[victim.uid]
                    if fits(slot, False) is not None:
                        table.remove_pod(slot, victim.uid)
                        off[victim.uid] = victim
                        victims.append(victim)
                        violations += violates
            if violating and others:
                victims.sort(key=importance)
            return _candidate(table.names[slot], victims, violations)
        finally:
            for victim in off.values():
                table.add_pod(slot, victim)


def _candidate(node: str, victims: list[PodInfo], violations: int) -> Candidate | list[str]:
    """The candidate, or kube's status for a node that fits with no victim at all (the
    filters that failed there answered for another state of the cluster)."""
    if not victims:
        return [f'expected at least one victim pod on node "{node}"']
    return Candidate(node, tuple(victims), violations)


def _only_resources_change(pod: PodInfo) -> bool:
    """Whether evicting pods from a node can change the pod's fit there through its resources
    only: it asks for no host port, no required pod (anti-)affinity, no hard spread, no claim
    (a node whose pods carry affinity terms is looked at in full anyway)."""
    return not (pod.host_ports or pod.affinity or pod.anti_affinity or pod.claims
                or any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.spread))


def _short_even_without(table: NodeTable, slot: int, ctx: CycleContext,
                        evictable: Sequence[PodInfo]) -> list[str]:
    """The resources the node lacks for the pod even with every evictable pod gone (checked
    before the dry run: most nodes that cannot be helped are found here, without running the
    filters)."""
    request = ctx.request
    width = len(request)
    freed = np.zeros_like(request)
    for victim in evictable:
        freed += table.request_vector(victim)[:width]
    free = table.allocatable[slot, :width] - table.requested[slot, :width] + freed
    return _shortfall(table, (request > 0) & (request > free))


def _shortfall(table: NodeTable, lacking: BoolArray) -> list[str]:
    """NodeResourcesFit's reasons for the resource columns in ``lacking``."""
    short: list[str] = []
    for index in np.flatnonzero(lacking):
        name = table.resources[int(index)]
        short.append(TOO_MANY_PODS if name == "pods" else insufficient(name))
    return short


def _no_node_message(total: int, statuses: collections.Counter[str]) -> str:
    """kube's FitError text for the dry run's node statuses."""
    parts = sorted(f"{count} {reason}" for reason, count in statuses.items() if count)
    head = f"0/{total} nodes are available"
    return f"{head}: {', '.join(parts)}." if parts else f"{head}."
