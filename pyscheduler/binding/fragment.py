"""The pod's fragment at the points after Filter and Score, as one plugin (``Fragment``):
PostFilter, Reserve and Unreserve, Permit, PreBind (the labels and annotations it adds) and
PostBind. The fragment is
chosen per pod: the scheduling cycle puts its :class:`~pyscheduler.framework.lifecycle.Lifecycle`
in the cycle state (:func:`attach`); a pod without one is skipped at every point.

The fragment's answers come with its failure policy applied already; what is left to map:
a refusal (or ``StageFailed``, policy Fail) is Unschedulable with the fragment's message, a
fault raises (the framework makes it an Error). What it answered is recorded, stage by stage,
in the pod's explanation when one was asked for.

At PostFilter the fragment runs first, and its answer bounds what the other PostFilter
plugins may do: ``default`` leaves them as configured, ``preempt`` lets only DefaultPreemption
run, ``burst`` only CloudBurst, ``nominate <node>`` only DefaultPreemption on that node,
``wait`` none (UnschedulableAndUnresolvable). An answer the fragment must work out off the loop
is awaited there and kept for the pod's next attempt, which follows at once."""

from __future__ import annotations

import collections
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pyscheduler.binding.pod_metadata import patch_pod_metadata
from pyscheduler.framework.events import ClusterListener
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.lifecycle import (
    Lifecycle,
    PostFilterAnswer,
    PostFilterChoice,
    UnreserveCause,
)
from pyscheduler.framework.pipeline import StageFailed
from pyscheduler.framework.status import Code, PostFilterResult, Status
from pyscheduler.kube.client import KubeClient
from pyscheduler.postfilter import BURSTING, PREEMPTION

if TYPE_CHECKING:
    from pyscheduler.framework.pipeline import Filtered

__all__ = ["PERMIT_HOLDER", "UNRESERVE_CAUSE", "Fragment", "attach"]

_LIFECYCLE = "Fragment/lifecycle"
_ANSWERS = "Fragment/answers"
#: Cycle state: why the pod is unreserved (an UnreserveCause), set by the binding cycle.
UNRESERVE_CAUSE = "Unreserve/cause"
#: Cycle state: the name a pod held at Permit waits under (other pods of the same fragment
#: allow or reject it by that name).
PERMIT_HOLDER = "Permit/holder"

SKIP = Status(Code.SKIP)
#: At most this many post-filter answers worked out off the loop wait for their attempt.
ANSWERS_KEPT = 4096

PostFilterAnswered = tuple[PostFilterResult | None, Status]


def attach(ctx: CycleContext, lifecycle: Lifecycle | None,
           answers: dict[str, str] | None = None) -> None:
    """Give the binding cycle ``ctx`` the pod's fragment (and where to record its answers)."""
    if lifecycle is not None:
        ctx.state[_LIFECYCLE] = lifecycle
        if answers is not None:
            ctx.state[_ANSWERS] = answers


def _of(ctx: CycleContext) -> Lifecycle | None:
    lifecycle: Lifecycle | None = ctx.state.get(_LIFECYCLE)
    return lifecycle


def _record(ctx: CycleContext, stage: str, text: str) -> None:
    answers: dict[str, str] | None = ctx.state.get(_ANSWERS)
    if answers is not None:
        answers[stage] = text


def _refused(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE, (message,))


class _Answer(Protocol):
    def describe(self) -> str: ...


A = TypeVar("A", bound=_Answer)


async def _ask(ctx: CycleContext, stage: str, call: Awaitable[A]) -> A | Status:
    """The fragment's answer at ``stage`` (recorded), or the refusal its failure policy
    Fail makes of a failed call."""
    try:
        answer = await call
    except StageFailed as exc:
        return _refused(str(exc))
    _record(ctx, stage, answer.describe())
    return answer


def _post_filter_result(lifecycle: Lifecycle, answer: PostFilterAnswer) -> PostFilterAnswered:
    """A post-filter answer as the framework takes it: never a success of its own (the
    fragment chooses among the other plugins; it makes no room itself)."""
    reasons = (f"{lifecycle.name}: {answer.message}",) if answer.message else ()
    choice = answer.choice
    if choice is PostFilterChoice.WAIT:
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)
    result: PostFilterResult | None = None
    if choice is PostFilterChoice.PREEMPT:
        result = PostFilterResult(only=frozenset({PREEMPTION}))
    elif choice is PostFilterChoice.BURST:
        result = PostFilterResult(only=frozenset({BURSTING}))
    elif choice is PostFilterChoice.NOMINATE:
        result = PostFilterResult(only=frozenset({PREEMPTION}), nodes=frozenset(
            {answer.node}) if answer.node else None)
    return result, Status(Code.UNSCHEDULABLE, reasons)


class Fragment(ClusterListener):
    name: ClassVar[str] = "Fragment"

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        # uid -> a post-filter answer worked out off the loop, for the pod's next attempt
        self._answered: collections.OrderedDict[str, PostFilterAnswer] = \
            collections.OrderedDict()

    def post_filter(self, ctx: CycleContext, filtered: Filtered
                    ) -> PostFilterAnswered | Awaitable[PostFilterAnswered]:
        lifecycle = _of(ctx)
        if lifecycle is None or "postfilter" not in lifecycle.stages:
            return None, SKIP
        answer = self._answered.pop(ctx.pod.uid, None)
        if answer is None:
            answer = lifecycle.postfilter_now(ctx)  # StageFailed: an Error of this plugin
        if answer is None:
            return self._post_filter_later(ctx, lifecycle)
        _record(ctx, "postfilter", answer.describe())
        return _post_filter_result(lifecycle, answer)

    async def _post_filter_later(self, ctx: CycleContext,
                                 lifecycle: Lifecycle) -> PostFilterAnswered:
        """The answer off the loop, kept for the attempt the scheduler makes next."""
        answer = await lifecycle.postfilter(ctx)
        self._answered[ctx.pod.uid] = answer
        while len(self._answered) > ANSWERS_KEPT:
            self._answered.popitem(last=False)
        return _post_filter_result(lifecycle, answer)

    def forget(self, uid: str) -> None:
        """The pod is bound or gone: no answer of its fragment waits for it any more."""
        self._answered.pop(uid, None)

    def pod_settled(self, uid: str) -> None:
        self.forget(uid)

    def pod_gone(self, uid: str) -> None:
        self.forget(uid)

    async def reserve(self, ctx: CycleContext, node: str) -> Status | None:
        lifecycle = _of(ctx)
        if lifecycle is None:
            return None
        answer = await _ask(ctx, "reserve", lifecycle.reserve(ctx, node))
        if isinstance(answer, Status):
            return answer
        return None if answer.ok else _refused(answer.message)

    async def unreserve(self, ctx: CycleContext, node: str) -> None:
        lifecycle = _of(ctx)
        if lifecycle is None or "unreserve" not in lifecycle.stages:
            return
        cause = ctx.state.get(UNRESERVE_CAUSE, UnreserveCause.REFUSED)
        await lifecycle.unreserve(ctx, node, cause)

    async def permit(self, ctx: CycleContext, node: str) -> tuple[Status | None, float]:
        lifecycle = _of(ctx)
        if lifecycle is None:
            return None, 0.0
        answer = await _ask(ctx, "permit", lifecycle.permit(ctx, node))
        if isinstance(answer, Status):
            return answer, 0.0
        if answer.kind == "deny":
            return _refused(answer.message), 0.0
        if answer.kind == "wait":
            ctx.state[PERMIT_HOLDER] = lifecycle.name
            message = answer.message or (f"reserved on {node}, waiting up to "
                                         f"{answer.timeout:g}s at permit of fragment "
                                         f"{lifecycle.name}")
            return Status(Code.WAIT, (message,)), answer.timeout
        return None, 0.0

    def permit_ended(self, ctx: CycleContext, how: str, message: str) -> None:
        """Record how a wait at this plugin's Permit ended."""
        answers: dict[str, str] | None = ctx.state.get(_ANSWERS)
        if answers is not None and "permit" in answers:
            answers["permit"] += f"; {how}" + (f": {message}" if message else "")

    async def pre_bind(self, ctx: CycleContext, node: str) -> Status | None:
        lifecycle = _of(ctx)
        if lifecycle is None:
            return SKIP
        answer = await _ask(ctx, "prebind", lifecycle.prebind(ctx, node))
        if isinstance(answer, Status):
            return answer
        if not answer.ok:
            return _refused(answer.message)
        meta: dict[str, Any] = {}
        if answer.labels:
            meta["labels"] = dict(answer.labels)
        if answer.annotations:
            meta["annotations"] = dict(answer.annotations)
        if not meta:
            return None
        return await patch_pod_metadata(self.client, ctx.pod, meta)

    async def post_bind(self, ctx: CycleContext, node: str) -> None:
        lifecycle = _of(ctx)
        if lifecycle is not None and "postbind" in lifecycle.stages:
            await lifecycle.postbind(ctx, node)
