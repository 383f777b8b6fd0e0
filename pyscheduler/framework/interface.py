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

The other extension points, in the order an attempt meets them (kube's ``ScheduleOne``). Each
answers a :class:`~pyscheduler.framework.status.Status` (``None`` is Success):

* **PreEnqueue** — before the pod enters the active queue; cheap, no I/O. A rejection parks the
  pod until one of the plugin's registered events.
* **QueueSort** — the order of the active queue (one plugin per profile).
* **PreFilter** — once per attempt, before Filter: may reject the pod outright, compute state
  for its Filter (``ctx.state``), answer Skip (its Filter does not run for this pod), or narrow
  the candidate nodes (:class:`~pyscheduler.framework.status.PreFilterResult`; the results of
  all PreFilter plugins intersect).
* **Filter**, **Score** — vectorised, above.
* **PostFilter** — only when no node passed the filters, in the configured order, until one
  answers Success (it made room: preemption nominating a node, bursting choosing a virtual
  node). UnschedulableAndUnresolvable stops the others. Sees why each node failed.
* **PreScore** — once, over the feasible rows, before Score; Skip: its Score does not run.
* **Reserve** / **Unreserve** — the chosen node's room is taken (assumed in the cache, claims
  and devices assumed) before binding, so that the next attempt cannot take it too. A failure
  at any later point runs every Reserve plugin's ``unreserve``, in reverse order; unreserve is
  idempotent and never fails.
* **Permit** — allow, reject, or Wait (with a timeout). A waiting pod keeps its reservation;
  the :class:`Handle` lets any plugin list, allow and reject waiting pods.
* **PreBind**, **Bind**, **PostBind** — the binding cycle, off the scheduling loop: PreBind may
  write to the API (volumes, labels) and fail the binding; the Bind plugins run in order until
  one does not answer Skip; PostBind is informational.

Where kube's points return at once, a plugin here may also answer with an awaitable
(:data:`Deferred`): its answer is worked out elsewhere (a WebAssembly fragment on its own
thread). The framework does not block the loop for it: a deferred PreFilter or PostFilter
answer ends the attempt (Pending) and the pod is tried again with it; deferred Reserve and
Permit answers are awaited at the start of the binding cycle, the node's room reserved
meanwhile.

:class:`EnqueueExtensions` says which cluster events may make a pod a plugin rejected
schedulable again (kube's ``EventsToRegister``, with queueing hints): the queue moves a parked
pod only for an event one of its rejecting plugins registered.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, TypeVar

import numpy as np

from pyscheduler.api.labels import LabelSelector
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.pod import PodInfo
from pyscheduler.framework.status import PostFilterResult, PreFilterResult, Status

if TYPE_CHECKING:
    from pyscheduler.framework.lifecycle import WaitingPod
    from pyscheduler.framework.pipeline import Filtered

__all__ = [
    "MAX_NODE_SCORE",
    "ActionType",
    "BindPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "CycleContext",
    "Deferred",
    "EnqueueExtensions",
    "FilterPlugin",
    "FilterResult",
    "Handle",
    "PermitPlugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterPlugin",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueueingHint",
    "QueueingHintFn",
    "Reason",
    "ReservePlugin",
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


T = TypeVar("T")

#: An answer now, or one worked out elsewhere (see the module's notes).
Deferred: TypeAlias = "T | Awaitable[T]"


class PreEnqueuePlugin(Protocol):
    name: ClassVar[str]

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Whether ``pod`` may enter the active queue now. No I/O: it runs on every pod add
        and update."""


class QueueSortPlugin(Protocol):
    name: ClassVar[str]

    def less(self, a: PodInfo, a_since: float, b: PodInfo, b_since: float) -> bool:
        """Whether ``a`` (queued since ``a_since``) is tried before ``b``."""


class PreFilterPlugin(Protocol):
    name: ClassVar[str]

    def pre_filter(self, ctx: CycleContext
                   ) -> Deferred[tuple[PreFilterResult | None, Status | None]]:
        """Once per attempt, before Filter: state for the Filter, Skip, a rejection of the
        whole pod (its reasons are the diagnosis), or fewer candidate nodes."""


class PostFilterPlugin(Protocol):
    name: ClassVar[str]

    def post_filter(self, ctx: CycleContext, filtered: Filtered
                    ) -> Deferred[tuple[PostFilterResult | None, Status | None]]:
        """For a pod no node passed the filters (``filtered`` says why each failed, and asks
        the filters again about a row): make room (Success, with the node nominated), place
        the pod (Success, with the node chosen), or say why it could not (Unschedulable: the
        reasons go into the pod's message, the next plugin runs; UnschedulableAndUnresolvable:
        none runs). A result on a failure may narrow what the later plugins may do.

        A plugin may also have ``may_help(ctx) -> bool``, a cheap guess: when False, it runs
        after the others, only to say why it cannot help."""


class PreScorePlugin(Protocol):
    name: ClassVar[str]

    def pre_score(self, ctx: CycleContext, feasible: BoolArray) -> Status | None:
        """Once, over the feasible rows, before Score: state for the Score, or Skip."""


class ReservePlugin(Protocol):
    name: ClassVar[str]

    def reserve(self, ctx: CycleContext, node: str) -> Deferred[Status | None]:
        """Take the room ``node`` needs for the pod before it is bound. A rejection fails the
        attempt, and every Reserve plugin's :meth:`unreserve` runs."""

    def unreserve(self, ctx: CycleContext, node: str) -> Deferred[None]:
        """Give the room back. Idempotent; never fails; runs in reverse plugin order, also
        for a plugin whose own reserve did not run or failed."""


class PermitPlugin(Protocol):
    name: ClassVar[str]

    def permit(self, ctx: CycleContext, node: str) -> Deferred[tuple[Status | None, float]]:
        """Allow the binding (Success), reject it, or hold the pod (Wait, with the timeout in
        seconds: past it the pod is rejected). The pod is bound once every Permit plugin
        that said Wait has allowed it through the :class:`Handle`."""


class PreBindPlugin(Protocol):
    name: ClassVar[str]

    async def pre_bind(self, ctx: CycleContext, node: str) -> Status | None:
        """Before Bind, off the loop: write what binding needs (volumes, labels); a failure
        unreserves the pod and tries it again."""


class BindPlugin(Protocol):
    name: ClassVar[str]

    async def bind(self, ctx: CycleContext, node: str) -> Status | None:
        """Bind the pod to ``node``, or answer Skip to leave it to the next Bind plugin."""


class PostBindPlugin(Protocol):
    name: ClassVar[str]

    async def post_bind(self, ctx: CycleContext, node: str) -> None:
        """After a successful binding; informational (clean-up, events)."""


class ActionType(enum.Flag):
    """What happened to an object, as kube's ``framework.ActionType`` has it."""

    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_NODE_ANNOTATION = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT
              | UPDATE_NODE_CONDITION | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL
              | UPDATE_POD_SCALE_DOWN | UPDATE_POD_TOLERATION
              | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A kind of change: the resource (kube's names: ``Pod``, ``Node``,
    ``PersistentVolumeClaim``, ``ResourceClaim``, ...) and what happened to it."""

    resource: str
    action: ActionType

    def matches(self, other: ClusterEvent) -> bool:
        """Whether ``other`` (an event that happened) is one this registration covers."""
        return self.resource in (other.resource, "*") and bool(self.action & other.action)


class QueueingHint(enum.Enum):
    SKIP = "QueueSkip"
    QUEUE = "Queue"


#: Whether an event (the object before and after; None for an add or a delete) may make
#: ``pod`` schedulable. Raising counts as Queue, as kube counts a hint's error.
QueueingHintFn = Callable[[PodInfo, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None  # None: every such event may help


class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """The events that may make a pod this plugin rejected schedulable."""


class Handle(Protocol):
    """What the framework lends its plugins (kube's ``framework.Handle``): the pods waiting
    at Permit."""

    def waiting_pods(self) -> Iterable[WaitingPod]: ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def allow_waiting_pod(self, uid: str, plugin: str) -> bool:
        """Allow on ``plugin``'s behalf; the pod is bound once no plugin holds it. False when
        it is not waiting for that plugin."""

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        """Reject on ``plugin``'s behalf: the pod is unreserved and tried again."""
