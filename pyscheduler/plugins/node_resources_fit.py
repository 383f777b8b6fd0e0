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

from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    BoolArray,
    IntArray,
)

__all__ = [
    "DEFAULT_RESOURCES",
    "LEAST_ALLOCATED",
    "MAX_RESOURCE_WEIGHT",
    "MOST_ALLOCATED",
    "MOST_FREE_MEMORY",
    "NAME",
    "STRATEGIES",
    "TOO_MANY_PODS",
    "NodeResourcesFit",
    "insufficient",
    "is_extended_resource",
]

NAME = "NodeResourcesFit"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
MOST_FREE_MEMORY = "MostFreeMemory"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, MOST_FREE_MEMORY)

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
    """Filter on free resources; score with LeastAllocated, MostAllocated or MostFreeMemory."""

    name: ClassVar[str] = NAME

    def __init__(self, *, strategy: str = LEAST_ALLOCATED,
                 resources: Sequence[tuple[str, int]] = DEFAULT_RESOURCES,
                 ignored_resources: Iterable[str] = (),
                 ignored_resource_groups: Iterable[str] = ()) -> None:
        self.strategy = strategy
        self.resources = _validated(strategy, resources)
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
        allocatable = table.allocatable[:n]
        requested = table.requested[:n]
        too_many = requested[:, PODS] + 1 > allocatable[:, PODS]
        failed = too_many.copy()
        reasons = [Reason(TOO_MANY_PODS, too_many)]
        for column in np.flatnonzero(request).tolist():
            if column == PODS:
                continue
            amount = int(request[column])
            resource = table.resources[column]
            if self._ignored(resource):
                continue
            alloc = allocatable[:, column]
            short = amount > alloc - requested[:, column]
            if not short.any():
                continue
            failed |= short
            message = insufficient(resource)
            hopeless = short & (amount > alloc)
            if hopeless.any():
                reasons.append(Reason(message, short & ~hopeless))
                reasons.append(Reason(message, hopeless, True))
            else:
                reasons.append(Reason(message, short))
        return FilterResult(~failed, reasons)

    # -- score ---------------------------------------------------------------------------------

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        if self.strategy == MOST_FREE_MEMORY:
            return self._most_free_memory(ctx, feasible)
        table, n, request = ctx.table, ctx.n, ctx.request
        least = self.strategy == LEAST_ALLOCATED
        # Gather the scored resources as (n, k) matrices so each step is one array operation.
        alloc_cols: list[IntArray] = []
        req_cols: list[IntArray] = []
        weights: list[int] = []
        for resource, weight in self.resources:
            if resource == "cpu":
                alloc_cols.append(table.allocatable[:n, CPU])
                req_cols.append(table.nonzero[:n, 0] + ctx.pod.nonzero_cpu)
            elif resource == "memory":
                alloc_cols.append(table.allocatable[:n, MEMORY])
                req_cols.append(table.nonzero[:n, 1] + ctx.pod.nonzero_memory)
            else:
                column = table.resource_index.get(resource)
                if column is None or column == PODS:
                    continue  # no node has it / not a scorable resource: alloc 0 everywhere
                amount = int(request[column]) if column < len(request) else 0
                if amount == 0 and column != EPHEMERAL_STORAGE:
                    continue  # kube bypasses extended resources the pod does not request
                alloc_cols.append(table.allocatable[:n, column])
                req_cols.append(table.requested[:n, column] + amount)
            weights.append(weight)
        if not weights:
            return ctx.zeros()
        alloc = np.stack(alloc_cols, axis=1).astype(np.float64)
        req = np.stack(req_cols, axis=1).astype(np.float64)
        w = np.asarray(weights, np.float64)
        present = alloc > 0
        all_present = bool(present.all())
        safe = alloc if all_present else np.where(present, alloc, 1.0)
        # kube's integer arithmetic, done in float64: every value here is an integer below
        # 2**53, so the floored quotients are exactly Go's int64 divisions.
        if least:
            part = np.maximum(np.floor((alloc - req) * MAX_NODE_SCORE / safe), 0.0)
        else:
            part = np.floor(np.minimum(req, alloc) * MAX_NODE_SCORE / safe)
        if all_present:
            out: IntArray = np.floor((part @ w) / w.sum()).astype(np.int64)
            return out
        weight_sum = present @ w
        total = (part * present) @ w
        out = np.where(weight_sum > 0, np.floor(total / np.maximum(weight_sum, 1.0)), 0.0
                       ).astype(np.int64)
        return out

    def _most_free_memory(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        n = ctx.n
        free = ctx.table.allocatable[:n, MEMORY] - ctx.table.requested[:n, MEMORY] \
            - ctx.request[MEMORY]
        free = np.maximum(free, 0)
        scored = feasible[:n] & ctx.nodes()
        top = int(np.max(free, where=scored, initial=0))
        if top == 0:
            return ctx.zeros()
        out: IntArray = np.where(scored, free * MAX_NODE_SCORE // top, 0)
        return out
