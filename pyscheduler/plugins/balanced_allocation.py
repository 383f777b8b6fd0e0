"""NodeResourcesBalancedAllocation: prefer nodes whose resources stay evenly used.

Copies kube-scheduler's ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go``
(``balancedResourceScorer``) with ``resource_allocation.go``:

* For each configured resource (default cpu and memory) with ``allocatable > 0``, the fraction
  ``(requested + pod request) / allocatable`` as a float64, capped at 1. Unlike
  NodeResourcesFit's score, *requested* here is the node's **actual** request sum and the pod's
  actual request (``useRequested: true``): no 100m / 200Mi defaults.
* With two fractions, ``std = |f1 - f2| / 2``; with more, the population standard deviation
  ``sqrt(sum((f - mean)^2) / count)`` summed in resource order; with fewer, 0.
* Score ``int64((1 - std) * 100)`` (truncation), not normalized further.
* A pod that requests none of the resources (a best-effort pod) is not scored at all — kube's
  PreScore returns ``Skip`` so that best-effort pods do not pile onto one node
  (kubernetes/kubernetes#129138); here that is a zero score on every node.
* An extended resource the pod does not request is left out (kube bypasses it), ``pods`` is never
  scored, and ephemeral-storage is always considered when the node has it.

The float operations are done in the same order as kube's Go code, so the truncated integer
scores agree exactly (IEEE 754 double arithmetic is the same in numpy and Go).

Vectorized: one pass per configured resource over the table's columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext
from pyscheduler.framework.nodetable import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    BoolArray,
    IntArray,
    NodeTable,
)

__all__ = ["DEFAULT_RESOURCES", "NAME", "BalancedAllocation"]

NAME = "NodeResourcesBalancedAllocation"

DEFAULT_RESOURCES: tuple[str, ...] = ("cpu", "memory")

_FloatArray = npt.NDArray[np.float64]
_FIXED_COLUMNS = {"cpu": CPU, "memory": MEMORY, "ephemeral-storage": EPHEMERAL_STORAGE}


class BalancedAllocation:
    """Score: ``(1 - std(requested fractions)) * 100`` over the configured resources."""

    name: ClassVar[str] = NAME

    def __init__(self, *, resources: Sequence[str] = DEFAULT_RESOURCES) -> None:
        names = tuple(resources)
        for i, resource in enumerate(names):
            if not isinstance(resource, str) or not resource:
                raise ValueError(f"{NAME}.resources[{i}]: must be a non-empty resource name")
            if resource in names[:i]:
                raise ValueError(f"{NAME}.resources[{i}]: duplicate resource {resource!r}")
        if not names:
            raise ValueError(f"{NAME}.resources: at least one resource is required")
        self.resources = names

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        table, n, request = ctx.table, ctx.n, ctx.request
        columns: list[tuple[int, int]] = []  # (column, pod request)
        best_effort = True
        for resource in self.resources:
            column = _FIXED_COLUMNS.get(resource, table.resource_index.get(resource))
            if column is None or column == PODS:
                continue
            amount = int(request[column]) if column < len(request) else 0
            best_effort = best_effort and amount == 0
            if amount == 0 and column not in (CPU, MEMORY, EPHEMERAL_STORAGE):
                continue  # an extended resource the pod does not request: bypassed
            columns.append((column, amount))
        if best_effort:
            return ctx.zeros()
        if len(columns) == 2:
            fast = self._two_resources(table, n, columns)
            if fast is not None:
                return fast
        fractions: list[tuple[_FloatArray, BoolArray]] = []
        count = np.zeros(n, np.int64)
        total = np.zeros(n, np.float64)
        first = np.zeros(n, np.float64)
        second = np.zeros(n, np.float64)
        for column, amount in columns:
            alloc = table.allocatable[:n, column]
            present = alloc > 0
            used = (table.requested[:n, column] + amount).astype(np.float64)
            fraction = np.minimum(used / np.where(present, alloc, 1).astype(np.float64), 1.0)
            fractions.append((fraction, present))
            total += np.where(present, fraction, 0.0)
            first = np.where(present & (count == 0), fraction, first)
            second = np.where(present & (count == 1), fraction, second)
            count += present
        std = np.where(count == 2, np.abs((first - second) / 2), 0.0)
        many = count > 2
        if many.any():
            divisor = np.maximum(count, 1).astype(np.float64)
            mean = total / divisor
            squares = np.zeros(n, np.float64)
            for fraction, present in fractions:
                deviation = fraction - mean
                squares += np.where(present, deviation * deviation, 0.0)
            std = np.where(many, np.sqrt(squares / divisor), std)
        out: IntArray = ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
        return out

    @staticmethod
    def _two_resources(table: NodeTable, n: int, columns: list[tuple[int, int]]
                       ) -> IntArray | None:
        """The common case (cpu and memory, both present on every node) in a few matrix
        operations; the same float64 operations in the same order as the general path."""
        cols = [c for c, _ in columns]
        alloc = table.allocatable[:n, cols]
        if not bool((alloc > 0).all()):
            return None
        used = (table.requested[:n, cols] + np.asarray([a for _, a in columns], np.int64)
                ).astype(np.float64)
        fraction = np.minimum(used / alloc.astype(np.float64), 1.0)
        std = np.abs((fraction[:, 0] - fraction[:, 1]) / 2)
        out: IntArray = ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
        return out
