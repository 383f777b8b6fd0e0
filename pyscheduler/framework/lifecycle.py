"""The extension points after filtering and scoring, as the scheduler sees them.

kube-scheduler's framework has, beyond PreFilter/Filter/Score, a **PostFilter** point (what to do
when no node fits), **Reserve/Unreserve** (claim the chosen node's room, give it back), **Permit**
(allow, deny, or hold the pod before it is bound, up to a timeout), **PreBind** and **PostBind**.
Per-pod logic (a WebAssembly fragment) can take part in each through a :class:`Lifecycle`, which
a :class:`~pyscheduler.framework.pipeline.StageOverride` carries. The answers are plain values;
what they may do is bounded by the scheduler (they narrow, never widen):

* a post-filter answer only chooses among what the scheduler would do anyway (preempt, burst,
  wait, or preempt on one node), and the host chooses the victims;
* reserve and permit can only delay or refuse a placement that the host already reserved — the
  pod stays counted on its node from reserve until it is bound or unreserved, so no node is
  over-committed while it waits;
* pre-bind can only add labels and annotations the fragment's resource allows.

:class:`WaitingRoom` holds the pods a permit answer told to wait: their bindings wait on it while
the scheduling loop goes on with other pods. A wait ends when the fragment (answering for another
pod) allows or rejects it, when it times out, when the pod is deleted, or when the scheduler
stops leading; every end but *allow* is followed by unreserve and a requeue.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pyscheduler.framework.events import ClusterListener
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.pod import PodInfo

__all__ = [
    "Lifecycle",
    "PermitAnswer",
    "PostFilterAnswer",
    "PostFilterChoice",
    "PreBindAnswer",
    "ReserveAnswer",
    "UnreserveCause",
    "WaitOutcome",
    "WaitingPod",
    "WaitingRoom",
    "waiting_lines",
]


class PostFilterChoice(enum.Enum):
    """What to do for a pod no real node fits."""

    DEFAULT = "default"    # the configured order of preemption and bursting
    PREEMPT = "preempt"    # preemption only, no bursting
    BURST = "burst"        # bursting only, no preemption
    WAIT = "wait"          # neither: the pod stays pending
    NOMINATE = "nominate"  # preemption on one named node only


class UnreserveCause(enum.IntEnum):
    """Why a reserved pod is given back its room (the ABI's ``cause`` values)."""

    REFUSED = 1   # a stage after reserve (reserve itself, pre-bind) refused it
    DENIED = 2    # permit denied it (its answer, or a reject for a waiting pod)
    TIMEOUT = 3   # its permit wait timed out
    BIND_FAILED = 4
    GONE = 5      # the pod was deleted, or the scheduler stopped leading


@dataclass(frozen=True, slots=True)
class PostFilterAnswer:
    choice: PostFilterChoice = PostFilterChoice.DEFAULT
    node: str | None = None  # NOMINATE: the node to preempt on
    message: str = ""

    def describe(self) -> str:
        what = self.choice.value + (f" {self.node}" if self.node else "")
        return f"{what}: {self.message}" if self.message else what


@dataclass(frozen=True, slots=True)
class ReserveAnswer:
    ok: bool = True
    message: str = ""

    def describe(self) -> str:
        return "ok" if self.ok else f"reject: {self.message}"


@dataclass(frozen=True, slots=True)
class PermitAnswer:
    kind: Literal["allow", "deny", "wait"] = "allow"
    timeout: float = 0.0  # wait: seconds, already bounded by the scheduler's maximum
    message: str = ""

    def describe(self) -> str:
        if self.kind == "wait":
            return f"wait {self.timeout:g}s" + (f": {self.message}" if self.message else "")
        return self.kind + (f": {self.message}" if self.message else "")


@dataclass(frozen=True, slots=True)
class PreBindAnswer:
    ok: bool = True
    message: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        if not self.ok:
            return f"reject: {self.message}"
        added = [f"label {k}={v}" for k, v in sorted(self.labels.items())]
        added += [f"annotation {k}" for k in sorted(self.annotations)]
        return "ok" + (f" ({', '.join(added)})" if added else "")


class Lifecycle(Protocol):
    """A pod's logic at the extension points after filtering. Every method answers (a failed
    call has had its failure policy applied already) and raises only
    :class:`~pyscheduler.framework.pipeline.StageFailed` (policy ``Fail``) or for faults."""

    name: str
    stages: frozenset[str]

    def postfilter_now(self, ctx: CycleContext) -> PostFilterAnswer | None:
        """The post-filter answer computed on the loop, or None when it must be awaited."""

    async def postfilter(self, ctx: CycleContext) -> PostFilterAnswer: ...

    async def reserve(self, ctx: CycleContext, node: str) -> ReserveAnswer: ...

    async def unreserve(self, ctx: CycleContext, node: str, cause: UnreserveCause) -> None: ...

    async def permit(self, ctx: CycleContext, node: str) -> PermitAnswer: ...

    async def prebind(self, ctx: CycleContext, node: str) -> PreBindAnswer: ...

    async def postbind(self, ctx: CycleContext, node: str) -> None: ...


WaitOutcome = Literal["allow", "reject", "timeout", "gone"]


@dataclass(eq=False)
class WaitingPod:
    pod: PodInfo
    node: str
    fragment: str
    since: float
    deadline: float
    future: asyncio.Future[tuple[WaitOutcome, str]]


class WaitingRoom(ClusterListener):
    """The pods held at permit, by uid. Lives on the scheduling loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 on_release: Callable[[WaitOutcome], None] | None = None) -> None:
        self.clock = clock
        self.on_release = on_release
        self._pods: dict[str, WaitingPod] = {}
        # fragment -> its waiting text, until the room changes (every call of the fragment's
        # stages is given it: built once per change, not once per call)
        self._lines: dict[str, bytes] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def enter(self, pod: PodInfo, node: str, fragment: str, timeout: float) -> WaitingPod:
        """Hold ``pod`` (reserved on ``node``) for ``fragment``; await :meth:`wait` on it."""
        now = self.clock()
        waiting = WaitingPod(pod, node, fragment, now, now + timeout,
                             asyncio.get_running_loop().create_future())
        self._pods[pod.uid] = waiting
        self._lines.pop(fragment, None)
        return waiting

    async def wait(self, waiting: WaitingPod) -> tuple[WaitOutcome, str]:
        """How the wait ended, and the message that goes with it. Cancelling the caller ends
        the wait too (the pod leaves the room)."""
        try:
            timeout = max(waiting.deadline - self.clock(), 0.0)
            return await asyncio.wait_for(asyncio.shield(waiting.future), timeout)
        except asyncio.TimeoutError:  # TimeoutError from 3.11 on
            return "timeout", (f"rejected due to timeout after waiting "
                               f"{waiting.deadline - waiting.since:g}s at permit of fragment "
                               f"{waiting.fragment}")
        finally:
            if self._pods.get(waiting.pod.uid) is waiting:
                del self._pods[waiting.pod.uid]
                self._lines.pop(waiting.fragment, None)
            outcome = waiting.future.result()[0] if waiting.future.done() else "timeout"
            if not waiting.future.done():
                waiting.future.cancel()
            if self.on_release is not None:
                self.on_release(outcome)

    def _end(self, uid: str, fragment: str | None, outcome: WaitOutcome, message: str) -> bool:
        waiting = self._pods.get(uid)
        if waiting is None or (fragment is not None and waiting.fragment != fragment) \
                or waiting.future.done():
            return False
        waiting.future.set_result((outcome, message))
        return True

    def allow(self, fragment: str, uid: str) -> bool:
        """Let a pod waiting at ``fragment``'s permit go on; False when it is not waiting."""
        return self._end(uid, fragment, "allow", "")

    def reject(self, fragment: str, uid: str, message: str) -> bool:
        """Refuse a pod waiting at ``fragment``'s permit; False when it is not waiting."""
        return self._end(uid, fragment, "reject", message)

    def preempted(self, uid: str, message: str) -> bool:
        """Refuse a waiting pod chosen as a preemption victim, whichever fragment holds it
        (kube rejects a waiting victim rather than deleting it)."""
        return self._end(uid, None, "reject", message)

    def pod_gone(self, uid: str) -> None:
        self.gone(uid)

    def gone(self, uid: str, message: str = "the pod was deleted") -> bool:
        """End the wait of a pod that was deleted, whichever fragment holds it."""
        return self._end(uid, None, "gone", message)

    def of(self, fragment: str) -> list[WaitingPod]:
        """The pods waiting at ``fragment``'s permit, in the order they began waiting."""
        return [w for w in self._pods.values() if w.fragment == fragment]

    def lines(self, fragment: str) -> bytes:
        """The ABI's ``waiting`` text for ``fragment``: one line per waiting pod,
        ``<uid> <namespace>/<name> <node> <k=v,k=v>``."""
        text = self._lines.get(fragment)
        if text is None:
            text = self._lines[fragment] = waiting_lines((w.pod, w.node)
                                                         for w in self.of(fragment))
        return text


def waiting_lines(pods: Iterable[tuple[PodInfo, str]]) -> bytes:
    """The ABI's ``waiting`` text: ``<uid> <namespace>/<name> <node> <k=v,k=v>`` per pod."""
    return "\n".join(
        f"{pod.uid} {pod.namespace}/{pod.name} {node} "
        + ",".join(f"{k}={v}" for k, v in sorted(pod.labels.items()))
        for pod, node in pods).encode()
