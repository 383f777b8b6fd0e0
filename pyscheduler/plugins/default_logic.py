"""The default logic's scoring (``scheduleFragment: default:v1.0.0``), in native code.

The default logic is the published default rule — labels match, taints are tolerated,
resources fit, the node with the most free memory wins — on top of kube-scheduler's rules:

* **Filter**: nothing of its own. The rule's checks (not cordoned unless tolerated, NoSchedule /
  NoExecute taints tolerated, nodeSelector and required node affinity, pod count and requested
  resources fit) are exactly the built-in NodeUnschedulable, TaintToleration, NodeAffinity and
  NodeResourcesFit filters, which run for every pod anyway (the default fragment's filter
  extends them: ANDing the same verdicts changes nothing).
* **Score**: "most free memory" *in place of* kube's resource scores — NodeResourcesFit's score
  (LeastAllocated by default) and NodeResourcesBalancedAllocation — and of ImageLocality (not
  a preference of the pod: where images differ it would pull a pod away from the node with the
  most free memory); the pod's own preferences keep their kube weights: preferred node affinity
  (NodeAffinity), preferred pod affinity and anti-affinity (InterPodAffinity), ScheduleAnyway
  spread including the system defaults (PodTopologySpread) and PreferNoSchedule taints
  (TaintToleration). Most free memory counts with weight :data:`MOST_FREE_MEMORY_WEIGHT`, the
  combined weight of the two resource scores it replaces in kube's default profile, so the
  balance between resources and preferences is kube's. A pod without preferences lands on the
  feasible node with the most free memory (ties at random).

:class:`IncrementalMostFreeMemory` is the native default logic's score: the answers of
:func:`most_free_memory`, the built-in ``MostFreeMemory`` strategy and the default fragment's
``wssp_score`` (``fragments/default/default.c``) bit for bit: ``free = max(0, allocatable
memory - requested memory - the pod's memory request)`` with actual requests, and
``free * 100 // max(free)`` over the scored nodes, 0 everywhere when that maximum is 0.
"""

from __future__ import annotations

import collections
from typing import Final

import numpy as np
import numpy.typing as npt

from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext
from pyscheduler.framework.nodetable import MEMORY, BoolArray, IntArray, NodeTable
from pyscheduler.plugins.balanced_allocation import NAME as BALANCED_ALLOCATION
from pyscheduler.plugins.image_locality import NAME as IMAGE_LOCALITY
from pyscheduler.plugins.node_resources_fit import NAME as NODE_RESOURCES_FIT
from pyscheduler.plugins.node_resources_fit import most_free_memory

__all__ = ["MOST_FREE_MEMORY_WEIGHT", "REPLACED_SCORES", "IncrementalMostFreeMemory",
           "most_free_memory"]

#: The built-in score plugins the default logic's score stands in for.
REPLACED_SCORES: Final = frozenset({NODE_RESOURCES_FIT, BALANCED_ALLOCATION, IMAGE_LOCALITY})
#: The weight of "most free memory": kube's NodeResourcesFit (1) + BalancedAllocation (1).
MOST_FREE_MEMORY_WEIGHT: Final = 2

_NO_ROWS: Final[npt.NDArray[np.intp]] = np.zeros(0, np.intp)


class _Memo:
    """Most free memory for one memory request, as of one table generation and candidacy:
    ``top`` is the largest free memory among the candidates, ``n_top`` how many have it."""

    __slots__ = ("table", "n", "generation", "free", "candidate", "candidate_bytes", "top",
                 "n_top", "scores")

    def __init__(self, table: NodeTable, n: int) -> None:
        self.table = table
        self.n = n
        self.generation = -1
        self.free: IntArray = np.zeros(n, np.int64)
        self.candidate: BoolArray = np.zeros(n, np.bool_)
        self.candidate_bytes = b""
        self.top = 0
        self.n_top = 0
        self.scores: IntArray = np.zeros(n, np.int64)

    def find_top(self) -> None:
        values = self.free[self.candidate]
        self.top = int(values.max(initial=0))
        self.n_top = int(np.count_nonzero(values == self.top)) if len(values) else 0

    def rescale(self) -> None:
        if self.top == 0:
            self.scores = np.zeros(self.n, np.int64)
            return
        scores = self.free * MAX_NODE_SCORE
        scores //= self.top
        self.scores = scores


class IncrementalMostFreeMemory:
    """:func:`most_free_memory` (the same answers on the scored rows), recomputed only where
    something changed since the last pod with the same memory request: rows whose node changed
    (the table says which) and rows whose candidacy changed, each looked at on its own; every
    score is rescaled only when the maximum moved (as the default fragment does, ABI §4.3).
    The native default logic's score: per pod it costs a few small operations instead of
    passes of integer divisions over every node."""

    MEMO_SIZE = 8
    FEW_ROWS = 32

    def __init__(self) -> None:
        self._memos: collections.OrderedDict[int, _Memo] = collections.OrderedDict()

    def __call__(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        table, n = ctx.table, ctx.n
        request = int(ctx.request[MEMORY])
        candidate = feasible[:n]
        memo = self._memos.get(request)
        if memo is None or memo.table is not table or memo.n != n:
            memo = _Memo(table, n)
            self._memos[request] = memo
            if len(self._memos) > self.MEMO_SIZE:
                self._memos.popitem(last=False)
            self._full(memo, ctx, candidate, request)
        else:
            self._memos.move_to_end(request)
            # Most pods score the rows the previous one did: the byte comparison says so
            # for a fraction of the element-wise one's cost.
            same = candidate.tobytes() == memo.candidate_bytes
            rows: npt.NDArray[np.intp] = _NO_ROWS if same \
                else np.flatnonzero(candidate != memo.candidate)
            if memo.generation != table.generation:
                changed = table.changed_since(memo.generation)  # ascending, each once
                rows = changed if same else np.union1d(rows, changed)
                memo.generation = table.generation
            if len(rows) > self.FEW_ROWS:  # array operations over every row are cheaper
                self._full(memo, ctx, candidate, request)
            elif len(rows):
                self._update(memo, ctx, candidate, request, rows.tolist())
        out: IntArray = memo.scores.copy()  # the caller may keep it (an explanation)
        return out

    @staticmethod
    def _full(memo: _Memo, ctx: CycleContext, candidate: BoolArray, request: int) -> None:
        table, n = ctx.table, memo.n
        free = table.allocatable[:n, MEMORY] - table.requested[:n, MEMORY]
        free -= request
        np.maximum(free, 0, out=free)
        memo.free, memo.candidate = free, candidate.copy()
        memo.candidate_bytes = candidate.tobytes()
        memo.generation = table.generation
        memo.find_top()
        memo.rescale()

    @staticmethod
    def _update(memo: _Memo, ctx: CycleContext, candidate: BoolArray, request: int,
                rows: list[int]) -> None:
        alloc, used = ctx.table.allocatable, ctx.table.requested
        free, was = memo.free, memo.candidate
        old_top = top = memo.top
        n_top = memo.n_top
        for row in rows:
            if was[row] and free[row] == top:
                n_top -= 1
            value = max(int(alloc[row, MEMORY]) - int(used[row, MEMORY]) - request, 0)
            free[row] = value
            now = bool(candidate[row])
            was[row] = now
            if not now:
                continue
            if value > top:
                top, n_top = value, 1
            elif value == top:
                n_top += 1
        memo.top, memo.n_top = top, n_top
        memo.candidate_bytes = was.tobytes()
        if n_top <= 0:  # the maximum's last holders shrank or left: look for it again
            memo.find_top()
        if memo.top != old_top:
            memo.rescale()
        elif memo.top:
            for row in rows:
                memo.scores[row] = int(free[row]) * MAX_NODE_SCORE // memo.top
