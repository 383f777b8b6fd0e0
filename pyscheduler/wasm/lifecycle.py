"""A fragment at the extension points after filtering: :class:`FragmentLifecycle` turns the
guest's answers (:class:`~pyscheduler.wasm.abi.StageAnswer`) into the scheduler's
(:mod:`pyscheduler.framework.lifecycle`), applying what the host enforces on the way:

* the failure policy of a failed call (``Fail``: the pod is not placed; ``Ignore`` and
  ``Default``: the stage has no effect — there is no built-in logic to fall back to);
* a post-filter may name only a real node that exists;
* a permit wait is at most ``fragments.maxPermitWaitSeconds``;
* a pre-bind may set only the keys its resource allows (``spec.stages.prebind``), with valid
  label values; anything else fails the call;
* ``allow``/``reject`` commands reach only pods waiting at this fragment's own permit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import structlog

from pyscheduler.api.validation import is_qualified_name, is_valid_label_value
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.lifecycle import (
    PermitAnswer,
    PostFilterAnswer,
    PostFilterChoice,
    PreBindAnswer,
    ReserveAnswer,
    UnreserveCause,
    WaitingRoom,
)
from pyscheduler.framework.nodetable import BoolArray
from pyscheduler.wasm.abi import StageAnswer
from pyscheduler.wasm.errors import CallError
from pyscheduler.wasm.resource import FragmentSpec, StageSpec

if TYPE_CHECKING:
    from pyscheduler.wasm.fragment import Fragment

__all__ = ["FragmentLifecycle", "apply_commands", "narrowed", "patch_problem",
           "prefilter_narrowing"]

log = structlog.get_logger("pyscheduler.wasm")

_CHOICES = (PostFilterChoice.DEFAULT, PostFilterChoice.PREEMPT, PostFilterChoice.BURST,
            PostFilterChoice.WAIT, PostFilterChoice.NOMINATE)
#: Stages whose failure only gets logged and counted: they are notifications.
_NOTIFICATIONS = frozenset({"unreserve", "postbind"})

ObserveFn = Callable[[str, str, float], None]   # stage, result, seconds
FailedFn = Callable[[str, CallError], None]     # raises StageFailed under policy Fail


def prefilter_narrowing(answer: StageAnswer | CallError | None, n: int, resource: str,
                        same: BoolArray | None = None) -> FilterResult | None:
    """What a prefilter answer leaves of ``n`` rows (None: all of them). A rejection fails
    every row with the pod-wide reason (kube's PreFilter message); a restriction fails the rows
    it left out. ``same``: the rows that still hold the node the guest saw."""
    if not isinstance(answer, StageAnswer) or answer.code == 0:
        return None
    if answer.code == 1:
        message = answer.message or f"rejected by fragment {resource}"
        return FilterResult(np.zeros(n, np.bool_),
                            [Reason(message, np.ones(n, np.bool_), prefilter=True)])
    rows = _fit(answer.rows if answer.rows is not None else np.zeros(0, np.bool_), n).copy()
    if same is not None:
        rows &= same  # a row that changed node meanwhile was not the one the guest kept
    message = answer.message or f"node(s) didn't satisfy plugin(s) [{resource}]"
    return FilterResult(rows, [Reason(message, ~rows)])


def narrowed(verdict: FilterResult, narrowing: FilterResult) -> FilterResult:
    """``verdict`` judged only on the rows a prefilter kept (as kube's filters run only on
    the nodes a PreFilter result names): the prefilter's reasons first."""
    keep = narrowing.passed
    assert keep is not None
    n = len(keep)
    passed = keep if verdict.passed is None else _fit(verdict.passed, n) & keep
    return FilterResult(passed, list(narrowing.reasons) + [
        Reason(r.message, _fit(r.failed, n) & keep, r.unresolvable, r.prefilter)
        for r in verdict.reasons])


def _fit(mask: BoolArray, n: int) -> BoolArray:
    """``mask`` over ``n`` rows: cut, or padded with False."""
    if len(mask) >= n:
        return mask[:n]
    out = np.zeros(n, np.bool_)
    out[: len(mask)] = mask
    return out


def patch_problem(allowed: StageSpec, kind: str, key: str, value: str) -> str | None:
    """Why a pre-bind may not set the ``kind`` (label/annotation) ``key`` to ``value``."""
    problems = is_qualified_name(key)
    if problems:
        return f"{kind} key {key!r} is not valid: {problems[0]}"
    if kind == "label" and is_valid_label_value(value):
        return f"label {key}: value {value!r} is not valid: {is_valid_label_value(value)[0]}"
    if not allowed.allows(kind, key):
        entries = allowed.allowed_labels if kind == "label" else allowed.allowed_annotations
        field = "allowedLabels" if kind == "label" else "allowedAnnotations"
        return f"{kind} {key} is not allowed (spec.stages.prebind.{field}: " \
               f"{', '.join(entries) or 'none'})"
    return None


def apply_commands(room: WaitingRoom, resource: str, answer: StageAnswer) -> None:
    """An answer's ``allow``/``reject`` commands, for pods waiting at ``resource``'s permit."""
    for verb, uid in answer.commands:
        if verb == "allow":
            room.allow(resource, uid)
        elif verb == "reject":
            room.reject(resource, uid, answer.message or f"rejected by fragment {resource}")


class FragmentLifecycle:
    """One loaded fragment's post-filter, reserve/unreserve, permit, pre-bind and post-bind."""

    def __init__(self, spec: FragmentSpec, fragment: Fragment, room: WaitingRoom, *,
                 max_wait_seconds: float, observe: ObserveFn, failed: FailedFn) -> None:
        self.name = spec.resource_name
        self.stages = frozenset(fragment.stages) - {"prefilter"}
        self.spec = spec
        self.fragment = fragment
        self.room = room
        self.max_wait_seconds = max_wait_seconds
        self.observe = observe
        self.failed = failed
        self.prebind_spec = spec.lifecycle.get("prebind") or StageSpec("extend")

    # -- calls ---------------------------------------------------------------------------------

    def _inputs(self, stage: str, ctx: CycleContext, node: str | None,
                cause: UnreserveCause | None) -> tuple[int | None, bytes, int]:
        """The call's node row, waiting-pods text and unreserve cause."""
        slot = ctx.table.slots.get(node) if node is not None else None
        waiting = b"" if stage == "prebind" else self.room.lines(self.name)
        return slot, waiting, int(cause or 0)

    async def _call(self, stage: str, ctx: CycleContext, node: str | None = None,
                    cause: UnreserveCause | None = None) -> StageAnswer | None:
        """The guest's answer (its commands applied), or None when the call failed and the
        failure policy says the stage has no effect."""
        start = time.perf_counter()
        row, waiting, why = self._inputs(stage, ctx, node, cause)
        result = await self.fragment.call(stage, ctx, node_row=row, waiting=waiting, cause=why)
        return self.settle(stage, result, time.perf_counter() - start)

    def settle(self, stage: str, result: StageAnswer | CallError,
               seconds: float) -> StageAnswer | None:
        """Count the call, apply the failure policy to a failed one (raising StageFailed
        under ``Fail`` for a stage that decides), apply the commands of a good one."""
        if isinstance(result, CallError):
            self.observe(stage, result.kind, seconds)
            if stage in _NOTIFICATIONS:
                log.warning("fragment call failed", fragment=self.name, stage=stage,
                            kind=result.kind, error=result.message)
                return None
            self.failed(stage, result)
            return None
        self.observe(stage, "ok", seconds)
        apply_commands(self.room, self.name, result)
        return result


    # -- post-filter ---------------------------------------------------------------------------

    def postfilter_answer(self, ctx: CycleContext,
                          answer: StageAnswer | None) -> PostFilterAnswer:
        if answer is None:
            return PostFilterAnswer()
        choice = _CHOICES[answer.code]
        node = None
        if choice is PostFilterChoice.NOMINATE:
            table = ctx.table
            row = answer.value
            if row >= table.n or not table.valid[row] or table.virtual[row]:
                self.failed("postfilter", CallError(
                    "output", f"wssp_postfilter named row {row}, which is not a real node"))
                return PostFilterAnswer()
            node = table.names[row]
        return PostFilterAnswer(choice, node, answer.message)

    def postfilter_now(self, ctx: CycleContext) -> PostFilterAnswer | None:
        start = time.perf_counter()
        _, waiting, _ = self._inputs("postfilter", ctx, None, None)
        result = self.fragment.call_now("postfilter", ctx, waiting=waiting)
        if result is None:
            return None
        return self.postfilter_answer(
            ctx, self.settle("postfilter", result, time.perf_counter() - start))

    async def postfilter(self, ctx: CycleContext) -> PostFilterAnswer:
        return self.postfilter_answer(ctx, await self._call("postfilter", ctx))

    # -- reserve, permit, binding --------------------------------------------------------------

    async def reserve(self, ctx: CycleContext, node: str) -> ReserveAnswer:
        if "reserve" not in self.stages:
            return ReserveAnswer()
        answer = await self._call("reserve", ctx, node)
        if answer is None or answer.code == 0:
            return ReserveAnswer()
        return ReserveAnswer(False, answer.message or f"rejected by fragment {self.name}")

    async def unreserve(self, ctx: CycleContext, node: str, cause: UnreserveCause) -> None:
        if "unreserve" in self.stages:
            await self._call("unreserve", ctx, node, cause)

    async def permit(self, ctx: CycleContext, node: str) -> PermitAnswer:
        if "permit" not in self.stages:
            return PermitAnswer()
        answer = await self._call("permit", ctx, node)
        if answer is None or answer.code == 0:
            return PermitAnswer()
        if answer.code == 1:
            return PermitAnswer("deny", message=answer.message
                                or f"rejected by fragment {self.name}")
        if any(verb == "allow" and uid == ctx.pod.uid for verb, uid in answer.commands):
            return PermitAnswer()
        timeout = min(answer.value / 1000, self.max_wait_seconds)
        return PermitAnswer("wait", timeout, answer.message)

    async def prebind(self, ctx: CycleContext, node: str) -> PreBindAnswer:
        if "prebind" not in self.stages:
            return PreBindAnswer()
        answer = await self._call("prebind", ctx, node)
        if answer is None:
            return PreBindAnswer()
        if answer.code == 1:
            return PreBindAnswer(False, answer.message or f"rejected by fragment {self.name}")
        patch: dict[str, dict[str, str]] = {"label": {}, "annotation": {}}
        for verb, argument in answer.commands:
            key, _, value = argument.partition("=")
            problem = patch_problem(self.prebind_spec, verb, key, value)
            if problem is not None:
                self.failed("prebind", CallError("output", problem))
                return PreBindAnswer()  # policy Ignore/Default: no patch at all
            patch[verb][key] = value
        return PreBindAnswer(True, answer.message, patch["label"], patch["annotation"])

    async def postbind(self, ctx: CycleContext, node: str) -> None:
        if "postbind" in self.stages:
            await self._call("postbind", ctx, node)
