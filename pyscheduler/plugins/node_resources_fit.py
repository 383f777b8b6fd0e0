"""NodeResourcesFit: the node must have room for the pod's requests; score by allocation.

**Filter** — kube-scheduler's ``fitsRequest`` (``pkg/scheduler/framework/plugins/noderesources/
fit.go``), one reason per shortfall, so a node may fail for several:

* ``Too many pods`` when the node already runs ``allocatable.pods`` pods; checked for every pod.
* For each resource the pod requests a non-zero amount of (cpu, memory, ephemeral-storage, then
  extended resources), ``Insufficient <resource>`` when ``request > allocatable - requested``
  (``requested`` sums the *actual* requests of the node's pods, assumed ones included).
* Like current kube (``InsufficientResource.Unresolvable``), a shortfall is
  ``UnschedulableAndUnresolvable`` when the request exceeds the node's whole allocatable
  (preempting every pod would not make room), plain ``Unschedulable`` otherwise; the two cases
  are reported as two reasons with the same message and disjoint rows, so the "0/N nodes are
  available" counts are unaffected. ``Too many pods`` is never unresolvable.
* ``ignored_resources`` / ``ignored_resource_groups`` (kube's ``ignoredResources`` /
  ``ignoredResourceGroups``) skip the check of *extended* resources by full name or by the part
  before ``/``.

**Score** — ``strategy``:

* ``LeastAllocated`` / ``MostAllocated``: kube's ``leastResourceScorer`` / ``mostResourceScorer``
  over ``resources`` (name, weight). For cpu and memory, *requested* is the node's **non-zero**
  request sum plus the pod's non-zero request (containers without a request count 100m / 200Mi,
  ``resource_allocation.go``); for other resources the actual sums. Per resource, with
  ``alloc > 0``: least = ``(alloc - req) * 100 // alloc`` (0 when ``req > alloc``), most =
  ``min(req, alloc) * 100 // alloc``; the node score is ``sum(score * weight) // sum(weight)``
  over the resources with ``alloc > 0`` (0 when none). An extended resource the pod does not
  request is left out of the average entirely, as kube does; ``pods`` is never scored.
* ``RequestedToCapacityRatio``: kube's ``requestedToCapacityRatioScorer``
  (``requested_to_capacity_ratio.go``) over ``resources`` with the same requested / allocatable
  pairs as above. Per resource with ``alloc > 0``: utilization ``req * 100 // alloc`` (100 when
  ``req > alloc``) is mapped through ``shape``, a broken-linear function given as points
  (utilization 0..100 strictly increasing, score 0..10; scores are multiplied by 10 to the node
  score range) — flat before the first point and after the last, linear in between with Go's
  integer division (truncation toward zero) — see :func:`broken_linear`. Only resources scoring
  more than 0 count, their weight included (kube's ``if resourceScore > 0``); the node score is
  ``round(sum(score * weight) / sum(weight))`` rounding halves up (Go's ``math.Round``), 0 when
  nothing counts. ``shape: [{0, 0}, {100, 10}]`` bin-packs like MostAllocated, ``[{0, 10},
  {100, 0}]`` spreads like LeastAllocated.
* ``MostFreeMemory`` (ours: the bursting design's rule "among matching nodes, the one with the
  most free memory wins"): ``free = allocatable - requested - request`` memory, using actual
  requests, clamped at 0, then scaled so that the scored node with the most free memory gets 100
  and the others ``free * 100 // max`` (all 0 when none has any).

All arithmetic is int64 integer arithmetic, matching kube's ``int64`` code bit for bit.

Vectorized: each check and each resource's score is a handful of numpy operations over the
table's ``allocatable`` / ``requested`` / ``nonzero`` columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    BoolArray,
    IntArray,
)
from pyscheduler.settings import MAX_SHAPE_SCORE, MAX_SHAPE_UTILIZATION

__all__ = [
    "DEFAULT_RESOURCES",
    "LEAST_ALLOCATED",
    "MAX_RESOURCE_WEIGHT",
    "MOST_ALLOCATED",
    "MOST_FREE_MEMORY",
    "NAME",
    "REQUESTED_TO_CAPACITY_RATIO",
    "STRATEGIES",
    "TOO_MANY_PODS",
    "NodeResourcesFit",
    "broken_linear",
    "insufficient",
    "is_extended_resource",
    "most_free_memory",
]

NAME = "NodeResourcesFit"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
MOST_FREE_MEMORY = "MostFreeMemory"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO, MOST_FREE_MEMORY)

DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
MAX_RESOURCE_WEIGHT = 100

TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    """kube's reason for a resource shortfall: ``Insufficient cpu``."""
    return f"Insufficient {resource}"


def is_extended_resource(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: qualified, outside ``kubernetes.io/``, not a quota
    ``requests.`` name (the name itself was validated when the pod was admitted)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _go_div(a: int, b: int) -> int:
    """Go's integer division: truncation toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """kube's ``helper.BuildBrokenLinearFunction`` at ``p``, for (utilization, score) points
    with strictly increasing utilization: the first score up to the first point, the last
    after the last point, linear in between with Go's integer arithmetic."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + _go_div((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


def _validated_shape(shape: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """kube's ``validateFunctionShape``."""
    where = f"{NAME}.scoringStrategy.requestedToCapacityRatio.shape"
    out = tuple(shape)
    if not out:
        raise ValueError(f"{where}: at least one point must be specified")
    for i, point in enumerate(out):
        if not (isinstance(point, tuple) and len(point) == 2):
            raise ValueError(f"{where}[{i}]: must be a (utilization, score) pair, got {point!r}")
        for field, value, top in (("utilization", point[0], MAX_SHAPE_UTILIZATION),
                                  ("score", point[1], MAX_SHAPE_SCORE)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                raise ValueError(f"{where}[{i}].{field}: must be an integer from 0 to {top}, "
                                 f"got {value!r}")
        if i and out[i - 1][0] >= point[0]:
            raise ValueError(f"{where}[{i}].utilization: utilization values must be sorted in "
                             f"increasing order, got {point[0]} after {out[i - 1][0]}")
    return out


def _validated(strategy: str, resources: Iterable[tuple[str, int]]
               ) -> tuple[tuple[str, int], ...]:
    where = f"{NAME}.scoringStrategy"
    if strategy not in STRATEGIES:
        raise ValueError(f"{where}.type: {strategy!r} is not supported; "
                         f"use one of {', '.join(STRATEGIES)}")
    out = tuple(resources)
    seen: set[str] = set()
    for i, item in enumerate(out):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError(f"{where}.resources[{i}]: must be a (name, weight) pair, "
                             f"got {item!r}")
        name, weight = item
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.resources[{i}].name: must be a non-empty string")
        if name in seen:
            raise ValueError(f"{where}.resources[{i}].name: duplicate resource {name!r}")
        seen.add(name)
        if isinstance(weight, bool) or not isinstance(weight, int) \
                or not 1 <= weight <= MAX_RESOURCE_WEIGHT:
            raise ValueError(f"{where}.resources[{i}].weight: must be an integer from 1 to "
                             f"{MAX_RESOURCE_WEIGHT}, got {weight!r}")
    if not out and strategy != MOST_FREE_MEMORY:
        raise ValueError(f"{where}.resources: at least one resource is required for {strategy}")
    return out


class NodeResourcesFit:
    """Filter on free resources; score with LeastAllocated, MostAllocated,
    RequestedToCapacityRatio (``shape``: (utilization, score) points) or MostFreeMemory."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Pod", ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                on("Node", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE))

    def __init__(self, *, strategy: str = LEAST_ALLOCATED,
                 resources: Sequence[tuple[str, int]] = DEFAULT_RESOURCES,
                 shape: Sequence[tuple[int, int]] = (),
                 ignored_resources: Iterable[str] = (),
                 ignored_resource_groups: Iterable[str] = ()) -> None:
        self.strategy = strategy
        self.resources = _validated(strategy, resources)
        self.shape: tuple[tuple[int, int], ...] = ()
        if strategy == REQUESTED_TO_CAPACITY_RATIO:
            self.shape = _validated_shape(shape)
        elif shape:
            raise ValueError(f"{NAME}.scoringStrategy.requestedToCapacityRatio: only used with "
                             f"type {REQUESTED_TO_CAPACITY_RATIO}, not {strategy}")
        # The shape as node scores (x10) at every utilization 0..100: one lookup per resource.
        scaled = [(u, s * (MAX_NODE_SCORE // MAX_SHAPE_SCORE)) for u, s in self.shape]
        self._shape_scores: IntArray = np.array(
            [broken_linear(scaled, p) for p in range(MAX_SHAPE_UTILIZATION + 1)] if scaled else [],
            np.int64)
        self.ignored_resources = frozenset(ignored_resources)
        self.ignored_resource_groups = frozenset(ignored_resource_groups)

    def _ignored(self, resource: str) -> bool:
        if not (self.ignored_resources or self.ignored_resource_groups) \
                or not is_extended_resource(resource):
            return False
        return resource in self.ignored_resources \
            or resource.split("/", 1)[0] in self.ignored_resource_groups

    # -- filter --------------------------------------------------------------------------------

    def filter(self, ctx: CycleContext) -> FilterResult:
        table, n, request = ctx.table, ctx.n, ctx.request
        allocatable, requested = table.allocatable, table.requested
        too_many = requested[:n, PODS] >= allocatable[:n, PODS]  # pods + 1 > allowed pods
        failed = too_many.copy()
        reasons = [Reason(TOO_MANY_PODS, too_many)]
        for column in np.flatnonzero(request).tolist():
            if column == PODS or column >= allocatable.shape[1]:
                continue
            resource = table.resources[column]
            if self._ignored(resource):
                continue
            amount = request[column]
            alloc = allocatable[:n, column]
            short = alloc - requested[:n, column] < amount  # request > allocatable - requested
            if not short.any():
                continue
            failed |= short
            message = insufficient(resource)
            hopeless = short & (alloc < amount)
            if hopeless.any():
                reasons.append(Reason(message, short & ~hopeless))
                reasons.append(Reason(message, hopeless, True))
            else:
                reasons.append(Reason(message, short))
        return FilterResult(~failed, reasons)

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row, without array operations: the pipeline's
        incremental path re-checks the few rows that changed since the last pod of the same
        shape, where numpy's per-call cost would dominate. Must agree with :meth:`filter`
        (tests/unit/plugins check both against the reference)."""
        table, request = ctx.table, ctx.request
        alloc, used = table.allocatable, table.requested
        if used[slot, PODS] >= alloc[slot, PODS]:
            return False
        for column, amount in enumerate(request.tolist()):
            if not amount or column == PODS or column >= alloc.shape[1]:
                continue
            if self._ignored(table.resources[column]):
                continue
            if alloc[slot, column] - used[slot, column] < amount:
                return False
        return True

    # -- score ---------------------------------------------------------------------------------

    def score_row(self, ctx: CycleContext, slot: int) -> int:
        """:meth:`score` for one row (LeastAllocated / MostAllocated /
        RequestedToCapacityRatio), in integer arithmetic."""
        table, pod = ctx.table, ctx.pod
        least = self.strategy == LEAST_ALLOCATED
        ratio = self.strategy == REQUESTED_TO_CAPACITY_RATIO
        total = weight_sum = 0
        for resource, weight in self.resources:
            if resource == "cpu":
                alloc = int(table.allocatable[slot, CPU])
                req = int(table.nonzero[slot, 0]) + pod.nonzero_cpu
            elif resource == "memory":
                alloc = int(table.allocatable[slot, MEMORY])
                req = int(table.nonzero[slot, 1]) + pod.nonzero_memory
            else:
                column = table.resource_index.get(resource)
                if column is None or column == PODS:
                    continue
                amount = int(ctx.request[column]) if column < len(ctx.request) else 0
                if amount == 0 and column != EPHEMERAL_STORAGE:
                    continue
                alloc = int(table.allocatable[slot, column])
                req = int(table.requested[slot, column]) + amount
            if alloc == 0:
                continue  # left out of the average, weight included
            if ratio:
                utilization = min(req * MAX_SHAPE_UTILIZATION // alloc, MAX_SHAPE_UTILIZATION)
                part = int(self._shape_scores[utilization])
                if part > 0:  # a resource scoring 0 leaves its weight out too
                    total += part * weight
                    weight_sum += weight
                continue
            part = max(alloc - req, 0) if least else min(req, alloc)
            total += part * MAX_NODE_SCORE // alloc * weight
            weight_sum += weight
        if ratio:  # math.Round(total / weight_sum): halves away from zero
            return (2 * total + weight_sum) // (2 * weight_sum) if weight_sum else 0
        return total // weight_sum if weight_sum else 0

    def _usage(self, ctx: CycleContext, resource: str) -> tuple[IntArray, IntArray] | None:
        """(allocatable, requested including the pod) for one scored resource, or None when
        the resource is left out for every node (``calculateResourceAllocatableRequest``)."""
        table, n = ctx.table, ctx.n
        if resource == "cpu":
            return table.allocatable[:n, CPU], table.nonzero[:n, 0] + ctx.pod.nonzero_cpu
        if resource == "memory":
            return table.allocatable[:n, MEMORY], table.nonzero[:n, 1] + ctx.pod.nonzero_memory
        column = table.resource_index.get(resource)
        if column is None or column == PODS:
            return None  # no node has it / not a scorable resource: allocatable 0 everywhere
        amount = int(ctx.request[column]) if column < len(ctx.request) else 0
        if amount == 0 and column != EPHEMERAL_STORAGE:
            return None  # kube bypasses extended resources the pod does not request
        return table.allocatable[:n, column], table.requested[:n, column] + amount

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        if self.strategy == MOST_FREE_MEMORY:
            return self._most_free_memory(ctx, feasible)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            return self._requested_to_capacity_ratio(ctx)
        least = self.strategy == LEAST_ALLOCATED
        total: IntArray | None = None
        weight_sum = 0
        scored: list[tuple[IntArray, int]] = []  # (allocatable, weight) of scored resources
        without: list[IntArray] = []  # per scored resource, the rows without it (alloc 0)
        for resource, weight in self.resources:
            usage = self._usage(ctx, resource)
            if usage is None:
                continue
            alloc, req = usage
            # least: (alloc - req) * 100 // alloc, 0 when over-committed;
            # most: min(req, alloc) * 100 // alloc.
            if least:
                part = np.subtract(alloc, req, out=req)
                np.maximum(part, 0, out=part)
            else:
                part = np.minimum(req, alloc, out=req)
            part *= MAX_NODE_SCORE
            missing = np.flatnonzero(alloc == 0)
            # Rows without the resource score 0 for it (part is 0 there: divide by 1).
            part //= np.maximum(alloc, 1) if len(missing) else alloc
            if weight != 1:
                part *= weight
            total = part if total is None else np.add(total, part, out=total)
            weight_sum += weight
            scored.append((alloc, weight))
            without.append(missing)
        if total is None:
            return ctx.zeros()
        # Rows lacking some resource leave its weight out of the average: redo those few.
        odd = np.unique(np.concatenate(without)) if any(len(w) for w in without) else None
        sums = total[odd] if odd is not None else None
        total //= weight_sum
        if odd is not None and sums is not None:
            weights = np.zeros(len(odd), np.int64)
            for alloc, weight in scored:
                weights += (alloc[odd] > 0) * weight
            total[odd] = np.where(weights > 0, sums // np.maximum(weights, 1), 0)
        return total

    def _requested_to_capacity_ratio(self, ctx: CycleContext) -> IntArray:
        total = ctx.zeros()
        weights = ctx.zeros()
        for resource, weight in self.resources:
            usage = self._usage(ctx, resource)
            if usage is None:
                continue
            alloc, req = usage
            # Utilization in percent: req * 100 // alloc, 100 when over-committed; rows
            # without the resource (alloc 0) are masked out below.
            req *= MAX_SHAPE_UTILIZATION
            req //= np.maximum(alloc, 1)
            np.minimum(req, MAX_SHAPE_UTILIZATION, out=req)
            part = self._shape_scores[req]
            counts = (part > 0) & (alloc > 0)
            part *= weight
            total += np.where(counts, part, 0)
            weights += counts * weight
        # math.Round(total / weights) for positive values: floor(total / weights + 1/2).
        out: IntArray = np.where(weights > 0,
                                 (2 * total + weights) // np.maximum(2 * weights, 1), 0)
        return out

    def _most_free_memory(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        return most_free_memory(ctx, feasible)


def most_free_memory(ctx: CycleContext, feasible: BoolArray) -> IntArray:
    """The MostFreeMemory score, 0..100 per row: the scored (``feasible``) row with the most
    free memory after the pod gets 100, the others in proportion (rows not scored: anything
    from 0 to 100). The default logic's score too (:mod:`pyscheduler.plugins.default_logic`)."""
    n = ctx.n
    table = ctx.table
    free = table.allocatable[:n, MEMORY] - table.requested[:n, MEMORY]
    free -= ctx.request[MEMORY]
    np.maximum(free, 0, out=free)
    # Holes have no allocatable memory (free 0): they cannot raise the maximum.
    top = int(free[feasible[:n]].max(initial=0))
    if top == 0:
        return ctx.zeros()
    free *= MAX_NODE_SCORE
    free //= top
    out: IntArray = np.minimum(free, MAX_NODE_SCORE, out=free)
    return out
