"""NodeResourcesBalancedAllocation: prefer nodes whose resources stay evenly used.

Reproduces the behaviour of kube-scheduler's ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go``
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

Vectorized: one pass per configured resource over the table's columns; the default
two-resource case is a short, branch-free sequence of array operations, with rows lacking a
resource (allocatable 0, including holes) patched afterwards.
"""

from __future__ import annotations

import math
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

    def _columns(self, ctx: CycleContext) -> tuple[list[tuple[int, int]], bool]:
        """The scored (column, pod request) pairs, and whether the pod requests none of the
        configured resources (a best-effort pod, which is not scored)."""
        table, request = ctx.table, ctx.request
        columns: list[tuple[int, int]] = []
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
        return columns, best_effort

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        table, n = ctx.table, ctx.n
        columns, best_effort = self._columns(ctx)
        if best_effort:
            return ctx.zeros()
        if len(columns) < 2:
            return np.full(n, MAX_NODE_SCORE, np.int64)  # at most one fraction: std 0
        fractions: list[tuple[_FloatArray, BoolArray | None]] = []
        for column, amount in columns:
            alloc = table.allocatable[:n, column]
            used = table.requested[:n, column] + amount
            present: BoolArray | None = alloc > 0
            if present is not None and present.all():
                present = None  # every row has it (the common case): no masking needed
                fraction = used / alloc  # int64 / int64: both converted to float64 first
            else:
                fraction = used / np.maximum(alloc, 1)
            np.minimum(fraction, 1.0, out=fraction)
            fractions.append((fraction, present))
        if len(fractions) == 2:
            return self._two(n, fractions[0], fractions[1])
        return self._many(n, fractions)

    @staticmethod
    def _two(n: int, a: tuple[_FloatArray, BoolArray | None],
             b: tuple[_FloatArray, BoolArray | None]) -> IntArray:
        """kube's two-resource case, ``std = |(f1 - f2) / 2|``; rows lacking either resource
        have at most one fraction and score 100."""
        std = np.subtract(a[0], b[0], out=a[0])
        std /= 2
        np.abs(std, out=std)
        score = np.subtract(1.0, std, out=std)
        score *= MAX_NODE_SCORE
        out: IntArray = score.astype(np.int64)  # truncation, like Go's int64()
        has_a, has_b = a[1], b[1]
        if has_a is not None and has_b is not None:
            out[~(has_a & has_b)] = MAX_NODE_SCORE
        elif has_a is not None:
            out[~has_a] = MAX_NODE_SCORE
        elif has_b is not None:
            out[~has_b] = MAX_NODE_SCORE
        return out

    def score_row(self, ctx: CycleContext, slot: int) -> int:
        """:meth:`score` for one row with Python floats (the same IEEE operations in the same
        order), for the pipeline's incremental path; must agree with :meth:`score`."""
        table = ctx.table
        columns, best_effort = self._columns(ctx)
        if best_effort:
            return 0
        fractions: list[float] = []
        for column, amount in columns:
            alloc = int(table.allocatable[slot, column])
            if alloc > 0:
                used = int(table.requested[slot, column]) + amount
                fractions.append(min(used / alloc, 1.0))
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            squares = 0.0
            for f in fractions:
                squares += (f - mean) * (f - mean)
            std = math.sqrt(squares / len(fractions))
        else:
            std = 0.0
        return int((1.0 - std) * MAX_NODE_SCORE)

    @staticmethod
    def _many(n: int, fractions: list[tuple[_FloatArray, BoolArray | None]]) -> IntArray:
        """The general case: the fractions present on each row, in resource order."""
        everywhere = np.ones(n, np.bool_)
        count = np.zeros(n, np.int64)
        total = np.zeros(n, np.float64)
        first = np.zeros(n, np.float64)
        second = np.zeros(n, np.float64)
        for fraction, present in fractions:
            has = everywhere if present is None else present
            total += np.where(has, fraction, 0.0)
            first = np.where(has & (count == 0), fraction, first)
            second = np.where(has & (count == 1), fraction, second)
            count += has
        std = np.where(count == 2, np.abs((first - second) / 2), 0.0)
        many = count > 2
        if many.any():
            divisor = np.maximum(count, 1).astype(np.float64)
            mean = total / divisor
            squares = np.zeros(n, np.float64)
            for fraction, present in fractions:
                has = everywhere if present is None else present
                deviation = fraction - mean
                squares += np.where(has, deviation * deviation, 0.0)
            std = np.where(many, np.sqrt(squares / divisor), std)
        out: IntArray = ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
        return out
