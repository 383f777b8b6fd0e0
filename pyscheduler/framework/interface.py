"""Extension points of the scheduling pipeline, and the values they exchange.

Like kube-scheduler's framework (``framework/interface.go``), plugins are small objects with a
``name`` and one method per extension point. Unlike it, a plugin sees *every* node in one call:
it receives a :class:`CycleContext` (the pod, its request vector, the :class:`NodeTable`) and
answers with arrays over the table's rows.

Filter (predicate) contract — :meth:`FilterPlugin.filter` returns a :class:`FilterResult`:

* ``passed``: boolean row mask of nodes that pass, or ``None`` when the plugin does not apply to
  this pod (every node passes; the pipeline skips the AND).
* ``reasons``: why nodes failed, as (message, mask of rows failing for it, unresolvable). The
  messages are kube-scheduler's (``Insufficient cpu``, ``node(s) didn't match Pod's node
  affinity/selector``) because users grep for them. ``unresolvable`` marks reasons that no change
  short of editing the pod or node spec can fix (kube's ``UnschedulableAndUnresolvable``).
  A node may carry several reasons of one plugin (cpu *and* memory short).

Score (priority) contract — :meth:`ScorePlugin.score` returns an int64 array over rows with
values in ``0..MAX_NODE_SCORE`` for the feasible rows (other rows are ignored), already
normalized the way the plugin's kube counterpart normalizes (``NormalizeScore``). The pipeline
multiplies by the plugin's weight and sums.

Outcomes are values (a :class:`FilterResult` with its :class:`Reason` s, a score array);
exceptions are for faults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from pyscheduler.api.labels import LabelSelector
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.pod import PodInfo

__all__ = [
    "MAX_NODE_SCORE",
    "CycleContext",
    "FilterPlugin",
    "FilterResult",
    "Reason",
    "ScorePlugin",
]

MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class Reason:
    message: str
    failed: BoolArray
    unresolvable: bool = False
    #: The pod is rejected before any node is looked at (kube's PreFilter returning
    #: Unschedulable): the message is the whole diagnosis, not a count of nodes.
    prefilter: bool = False


@dataclass(slots=True)
class FilterResult:
    passed: BoolArray | None
    reasons: list[Reason] = field(default_factory=list)

    @classmethod
    def all_pass(cls) -> FilterResult:
        return cls(None)

    @classmethod
    def single(cls, passed: BoolArray, message: str, unresolvable: bool = False) -> FilterResult:
        """Every failing row fails for the same reason."""
        return cls(passed, [Reason(message, ~passed, unresolvable)])


NamespaceResolver = Callable[[LabelSelector], frozenset[str]]


@dataclass(slots=True)
class CycleContext:
    """Everything one scheduling attempt of one pod may look at."""

    pod: PodInfo
    table: NodeTable
    request: IntArray
    # Namespaces whose labels match a selector (for namespaceSelector in affinity terms).
    namespaces: NamespaceResolver = field(default=lambda sel: frozenset())
    # Per-attempt scratch space shared between a plugin's filter and score (kube's CycleState).
    state: dict[str, Any] = field(default_factory=dict)
    # The burst pass: the cloud pools' virtual nodes are the candidates, not the real ones.
    virtual_pass: bool = False

    @classmethod
    def for_pod(cls, pod: PodInfo, table: NodeTable,
                namespaces: NamespaceResolver | None = None, *,
                virtual_pass: bool = False) -> CycleContext:
        ctx = cls(pod, table, table.request_vector(pod), virtual_pass=virtual_pass)
        if namespaces is not None:
            ctx.namespaces = namespaces
        return ctx

    @property
    def n(self) -> int:
        return self.table.n

    def nodes(self) -> BoolArray:
        """The candidate rows of this pass: rows holding a real node (holes left by removed
        nodes excluded), or in the burst pass rows holding a virtual node."""
        table = self.table
        valid = table.valid[: table.n]
        if not getattr(table, "virtual_count", 1):  # a table without virtual rows: all of them
            return valid if not self.virtual_pass else np.zeros(table.n, np.bool_)
        virtual = table.virtual[: table.n]
        rows: BoolArray = valid & virtual if self.virtual_pass else valid & ~virtual
        return rows

    def candidate_rows(self, rows: IntArray) -> IntArray:
        """Those of ``rows`` that :meth:`nodes` holds, looking at those rows only."""
        table = self.table
        keep = table.valid[rows]
        if getattr(table, "virtual_count", 1):
            keep &= table.virtual[rows] == self.virtual_pass
        elif self.virtual_pass:
            return rows[:0]
        picked: IntArray = rows[keep]
        return picked

    def zeros(self) -> IntArray:
        return np.zeros(self.table.n, np.int64)


class FilterPlugin(Protocol):
    name: ClassVar[str]

    def filter(self, ctx: CycleContext) -> FilterResult: ...


class ScorePlugin(Protocol):
    name: ClassVar[str]

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray: ...
