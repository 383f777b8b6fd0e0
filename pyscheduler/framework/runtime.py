"""Running a profile's plugins at each extension point (kube's ``frameworkImpl``).

:class:`Framework` holds one profile's plugins per point, in the configured order, and runs
them with kube's rules:

* PreFilter: every plugin runs; a rejection stops the attempt (the plugin is recorded), Skip
  marks the plugin's Filter as not to run, the node sets intersect.
* PostFilter: in order, until one answers Success; UnschedulableAndUnresolvable stops the rest;
  the reasons of the others are kept for the pod's message, in the configured order (kube joins
  them with ", " after the filters' diagnosis). A result may leave the later plugins fewer
  choices (which may run, which nodes they see); a plugin that says it cannot help
  (``may_help``) runs last, for its reasons only.
* PreScore: every plugin runs; Skip marks its Score as not to run.
* Reserve: in order; the first that fails makes every Reserve plugin's unreserve run, in
  reverse order (kube's ``RunReservePluginsUnreserve``), and the attempt fails. The plugins
  that answer at once run on the loop, in the scheduling cycle, as kube runs Reserve.
* Permit: in order; the first rejection rejects; Wait holds the pod (the longest timeout of
  the plugins that said it) until it is allowed, rejected or timed out.
* PreBind: in order; the first failure fails the binding.
* Bind: in order until one does not answer Skip; all skipping is an error.
* PostBind: every plugin, after a successful binding; what they raise is reported only.

A plugin that raises answers ``Error`` (its exception kept): a fault, not a verdict, and the
pod is retried. Each point's time is recorded in
``scheduler_framework_extension_point_duration_seconds`` with the status it ended with, and in
the attempts sampled for it (:data:`SAMPLE_PLUGINS` in the cycle state) each plugin's time in
``scheduler_plugin_execution_duration_seconds``, as kube samples them.

Answers worked out elsewhere (:data:`~pyscheduler.framework.interface.Deferred`): at PreFilter
and PostFilter the run ends with Pending and hands the awaitable back (:attr:`Run.deferred`);
the caller awaits it off the loop and runs the point again with the answer (``answers``). At
Reserve the rest of the point is handed back from the first such plugin on, and the binding
cycle awaits it first (:meth:`Framework.run_reserve`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pyscheduler.framework.interface import (
    BindPlugin,
    CycleContext,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
)
from pyscheduler.framework.nodetable import BoolArray
from pyscheduler.framework.status import (
    SUCCESS,
    Code,
    PostFilterResult,
    PreFilterResult,
    Status,
    as_status,
)

if TYPE_CHECKING:
    from pyscheduler.framework.pipeline import Filtered

__all__ = ["SAMPLE_PLUGINS", "Framework", "Run"]

#: Record a point's time: (extension point, status code's name, seconds).
Observe = Callable[[str, str, float], None]
#: Record one plugin's time at a point: (plugin, extension point, status code's name, seconds).
ObservePlugin = Callable[[str, str, str, float], None]
#: Cycle state: True when this attempt records every plugin's time (kube samples about one
#: cycle in ten for ``scheduler_plugin_execution_duration_seconds``); the caller sets it.
SAMPLE_PLUGINS = "Framework/sample-plugins"
#: Report what a plugin raised where it cannot fail the pod (unreserve, post-bind):
#: (extension point, plugin, pod key, the exception).
OnFault = Callable[[str, str, str, BaseException], None]

T = TypeVar("T")


@dataclass(slots=True)
class Run:
    """How a point ended: its status (the plugin that decided it recorded), what it produced,
    and, when a plugin answers elsewhere, that plugin and the awaitable of its answer."""

    status: Status = SUCCESS
    prefilter: PreFilterResult = field(default_factory=PreFilterResult)
    postfilter: PostFilterResult | None = None
    #: Plugins whose coupled Filter (after PreFilter) or Score (after PreScore) must not run.
    skipped: frozenset[str] = frozenset()
    #: PostFilter: the reasons of the plugins that tried and could not help, in order.
    reasons: tuple[str, ...] = ()
    #: PostFilter: the plugins that ran and could not help.
    tried: frozenset[str] = frozenset()
    deferred: tuple[str, Awaitable[Any]] | None = None


def _status(answer: Status | None) -> Status:
    return SUCCESS if answer is None else answer


def _may_help(plugin: PostFilterPlugin, ctx: CycleContext) -> bool:
    """A PostFilter plugin's own guess whether it can help the pod at all (True when it has
    none, or the guess fails: then it simply runs in its turn)."""
    guess = getattr(plugin, "may_help", None)
    if guess is None:
        return True
    try:
        return bool(guess(ctx))
    except Exception:
        return True


@dataclass(slots=True)
class Framework:
    """One profile's plugins at the points after Filter/Score (those two run in the
    vectorised :class:`~pyscheduler.framework.pipeline.Pipeline`)."""

    profile: str
    pre_filter: Sequence[PreFilterPlugin] = ()
    post_filter: Sequence[PostFilterPlugin] = ()
    pre_score: Sequence[PreScorePlugin] = ()
    reserve_plugins: Sequence[ReservePlugin] = ()
    permit: Sequence[PermitPlugin] = ()
    pre_bind: Sequence[PreBindPlugin] = ()
    bind: Sequence[BindPlugin] = ()
    post_bind: Sequence[PostBindPlugin] = ()
    observe: Observe | None = None
    observe_plugin: ObservePlugin | None = None
    on_fault: OnFault | None = None

    # -- the scheduling cycle (on the loop) ------------------------------------------------

    def run_pre_filter(self, ctx: CycleContext,
                       answers: Mapping[str, Any] | None = None) -> Run:
        start = time.perf_counter()
        nodes, skipped = PreFilterResult(), set()
        for plugin in self.pre_filter:
            began = time.perf_counter()
            got = self._call(plugin.name, answers, plugin.pre_filter, ctx)
            if isinstance(got, Run):
                self._timed(ctx, plugin.name, "PreFilter", got.status, began)
                return self._ended("PreFilter", start, got)
            result, status = cast("tuple[PreFilterResult | None, Status | None]", got)
            status = _status(status)
            self._timed(ctx, plugin.name, "PreFilter", status, began)
            if status.skipped:
                skipped.add(plugin.name)
            elif not status.success:
                return self._ended("PreFilter", start, Run(status.with_plugin(plugin.name)))
            nodes = nodes.merge(result)
        return self._ended("PreFilter", start, Run(prefilter=nodes, skipped=frozenset(skipped)))

    def run_post_filter(self, ctx: CycleContext, filtered: Filtered) -> Run:
        """The PostFilter plugins for a pod no node fits, in order, until one answers Success
        (it made room, or placed the pod); UnschedulableAndUnresolvable stops the rest, Error
        too. A plugin's result may leave the later ones fewer choices (``only``: which of
        them may still run; ``nodes``: which nodes they may consider). A plugin whose
        ``may_help(ctx)`` says False runs after the others, only to say why it cannot help.
        The reasons of the plugins that could not help are kept in the configured order, and
        the last result any of them gave (kube's "last meaningful result")."""
        start = time.perf_counter()
        order = {plugin.name: i for i, plugin in enumerate(self.post_filter)}
        reasons: dict[str, str] = {}
        last: list[PostFilterResult] = []  # the last result a plugin that did not help gave
        only: frozenset[str] | None = None
        rejector = ""
        tried: set[str] = set()

        def ended(status: Status, postfilter: PostFilterResult | None = None,
                  deferred: tuple[str, Awaitable[Any]] | None = None) -> Run:
            kept = tuple(reasons[name] for name in sorted(reasons, key=order.__getitem__))
            if status.rejected and status.code is not Code.PENDING:
                status = Status(status.code, kept, status.plugin)
            return self._ended("PostFilter", start, Run(
                status, postfilter=postfilter if postfilter is not None else (
                    last[-1] if last else None), reasons=kept, deferred=deferred,
                tried=frozenset(tried)))

        def attempt(plugin: PostFilterPlugin) -> Run | None:
            nonlocal only, filtered, rejector
            began = time.perf_counter()
            got = self._call(plugin.name, None, plugin.post_filter, ctx, filtered)
            if isinstance(got, Run):
                self._timed(ctx, plugin.name, "PostFilter", got.status, began)
                return ended(got.status, deferred=got.deferred)
            answer, status = cast("tuple[PostFilterResult | None, Status | None]", got)
            status = _status(status)
            self._timed(ctx, plugin.name, "PostFilter", status, began)
            if status.success:
                return ended(SUCCESS, answer or PostFilterResult())
            if status.skipped:
                return None
            if not status.rejected or status.code is Code.PENDING:
                # Wait or Pending are no PostFilter answers: kube counts them as errors.
                return ended(Status(Code.ERROR, status.reasons, plugin.name,
                                    status.error or status.as_error()))
            tried.add(plugin.name)
            if status.message:
                reasons[plugin.name] = status.message
            if answer is not None:
                last.append(answer)
                if answer.only is not None:
                    only = answer.only if only is None else only & answer.only
                if answer.nodes is not None:
                    filtered = filtered.narrowed(answer.nodes)
            if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return ended(Status(status.code, (), plugin.name))
            rejector = rejector or plugin.name
            return None

        later: list[PostFilterPlugin] = []
        for plugin in self.post_filter:
            if only is not None and plugin.name not in only:
                continue
            if not _may_help(plugin, ctx):
                later.append(plugin)
                continue
            run = attempt(plugin)
            if run is not None:
                return run
        for plugin in later:
            if only is None or plugin.name in only:
                run = attempt(plugin)
                if run is not None:
                    return run
        return ended(Status(Code.UNSCHEDULABLE, (), rejector))

    def run_pre_score(self, ctx: CycleContext, feasible: BoolArray) -> Run:
        start = time.perf_counter()
        skipped = set()
        for plugin in self.pre_score:
            began = time.perf_counter()
            try:
                status = _status(plugin.pre_score(ctx, feasible))
            except Exception as exc:
                status = as_status(exc)
            self._timed(ctx, plugin.name, "PreScore", status, began)
            if status.skipped:
                skipped.add(plugin.name)
            elif not status.success:
                return self._ended("PreScore", start, Run(status.with_plugin(plugin.name)))
        return self._ended("PreScore", start, Run(skipped=frozenset(skipped)))

    def _call(self, name: str, answers: Mapping[str, Any] | None, fn: Any, *args: Any) -> Any:
        """A plugin's answer (one already worked out elsewhere first), or the Run that ends
        the point: Pending with the awaitable, or Error for what it raised."""
        if answers is not None and name in answers:
            return answers[name]
        try:
            got = fn(*args)
        except Exception as exc:
            return Run(as_status(exc).with_plugin(name))
        if inspect.isawaitable(got):
            return Run(Status(Code.PENDING, (f"waiting for {name}",), name),
                       deferred=(name, got))
        return got

    # -- the binding cycle (off the loop) --------------------------------------------------

    def run_reserve(self, ctx: CycleContext, node: str) -> Status | Awaitable[Status]:
        """Every Reserve plugin in order, until the first failure, which is the answer (the
        caller then runs :meth:`unreserve`, as kube's scheduling cycle does). The plugins
        that answer at once run here, on the loop, before any other pod's cycle (what they
        reserve, no other pod can take); from the first that answers elsewhere on, the rest
        is the awaitable returned, which the binding cycle awaits first."""
        start = time.perf_counter()
        for i, plugin in enumerate(self.reserve_plugins):
            began = time.perf_counter()
            try:
                got = plugin.reserve(ctx, node)
            except Exception as exc:
                got = as_status(exc)
            if inspect.isawaitable(got):
                return self._reserve_rest(ctx, node, i, got, start, began)
            status = _status(got)
            self._timed(ctx, plugin.name, "Reserve", status, began)
            if not status.success:
                return self._ended_status("Reserve", start, status.with_plugin(plugin.name))
        self._observe("Reserve", SUCCESS, start)
        return SUCCESS

    async def reserve(self, ctx: CycleContext, node: str) -> Status:
        """:meth:`run_reserve` awaited to the end, and :meth:`unreserve` after a failure."""
        status = await _answer(self.run_reserve(ctx, node))
        if not status.success:
            await self.unreserve(ctx, node)
        return status

    async def _reserve_rest(self, ctx: CycleContext, node: str, first: int,
                            pending: Awaitable[Status | None], start: float,
                            began: float) -> Status:
        for i in range(first, len(self.reserve_plugins)):
            plugin = self.reserve_plugins[i]
            if i != first:
                began = time.perf_counter()
            try:
                got = pending if i == first else plugin.reserve(ctx, node)
                status = _status(await _answer(got))
            except Exception as exc:
                status = as_status(exc)
            self._timed(ctx, plugin.name, "Reserve", status, began)
            if not status.success:
                return self._ended_status("Reserve", start, status.with_plugin(plugin.name))
        self._observe("Reserve", SUCCESS, start)
        return SUCCESS

    async def run_permit(self, ctx: CycleContext, node: str) -> tuple[Status, float]:
        """Every Permit plugin in order: the first rejection is the answer; otherwise Wait
        (the first plugin that said so recorded, the longest timeout) when any said Wait,
        else Success."""
        start = time.perf_counter()
        waiting: Status | None = None
        timeout = 0.0
        for plugin in self.permit:
            began = time.perf_counter()
            try:
                status, seconds = await _answer(plugin.permit(ctx, node))
                status = _status(status)
            except Exception as exc:
                status, seconds = as_status(exc), 0.0
            self._timed(ctx, plugin.name, "Permit", status, began)
            if status.waiting:
                waiting = waiting or status.with_plugin(plugin.name)
                timeout = max(timeout, seconds)
            elif not status.success:
                status = status.with_plugin(plugin.name)
                self._observe("Permit", status, start)
                return status, 0.0
        status = waiting or SUCCESS
        self._observe("Permit", status, start)
        return status, timeout

    async def unreserve(self, ctx: CycleContext, node: str) -> None:
        """Every Reserve plugin's unreserve, in reverse order; what one raises is logged and
        the others still run."""
        start = time.perf_counter()
        for plugin in reversed(self.reserve_plugins):
            began = time.perf_counter()
            status = SUCCESS
            try:
                await _answer(plugin.unreserve(ctx, node))
            except Exception as exc:
                status = as_status(exc)
                self._fault("Unreserve", plugin.name, ctx, exc)
            self._timed(ctx, plugin.name, "Unreserve", status, began)
        self._observe("Unreserve", SUCCESS, start)

    async def run_pre_bind(self, ctx: CycleContext, node: str) -> Status:
        start = time.perf_counter()
        for plugin in self.pre_bind:
            began = time.perf_counter()
            status = await _guarded(plugin.name, plugin.pre_bind(ctx, node))
            self._timed(ctx, plugin.name, "PreBind", status, began)
            if not status.success and not status.skipped:
                self._observe("PreBind", status, start)
                return status
        self._observe("PreBind", SUCCESS, start)
        return SUCCESS

    async def run_bind(self, ctx: CycleContext, node: str) -> Status:
        start = time.perf_counter()
        for plugin in self.bind:
            began = time.perf_counter()
            status = await _guarded(plugin.name, plugin.bind(ctx, node))
            self._timed(ctx, plugin.name, "Bind", status, began)
            if status.skipped:
                continue
            self._observe("Bind", status, start)
            return status
        status = Status(Code.ERROR, ("no bind plugin bound the pod",))
        self._observe("Bind", status, start)
        return status

    async def run_post_bind(self, ctx: CycleContext, node: str) -> None:
        start = time.perf_counter()
        for plugin in self.post_bind:
            began = time.perf_counter()
            status = SUCCESS
            try:
                await plugin.post_bind(ctx, node)
            except Exception as exc:
                status = as_status(exc)
                self._fault("PostBind", plugin.name, ctx, exc)
            self._timed(ctx, plugin.name, "PostBind", status, began)
        self._observe("PostBind", SUCCESS, start)

    # -- metrics ---------------------------------------------------------------------------

    def _ended(self, point: str, start: float, run: Run) -> Run:
        self._observe(point, run.status, start)
        return run

    def _ended_status(self, point: str, start: float, status: Status) -> Status:
        self._observe(point, status, start)
        return status

    def _observe(self, point: str, status: Status, start: float) -> None:
        if self.observe is not None:
            self.observe(point, str(status.code), time.perf_counter() - start)

    def _timed(self, ctx: CycleContext, plugin: str, point: str, status: Status,
               began: float) -> None:
        """One plugin's time at ``point``, in the attempts sampled for it."""
        if self.observe_plugin is not None and ctx.state.get(SAMPLE_PLUGINS):
            self.observe_plugin(plugin, point, str(status.code), time.perf_counter() - began)

    def _fault(self, point: str, plugin: str, ctx: CycleContext, exc: BaseException) -> None:
        if self.on_fault is not None:
            self.on_fault(point, plugin, ctx.pod.key, exc)


async def _answer(got: T | Awaitable[T]) -> T:
    if inspect.isawaitable(got):
        return await cast("Awaitable[T]", got)
    return got


async def _guarded(name: str, call: Awaitable[Status | None]) -> Status:
    try:
        status = _status(await call)
    except Exception as exc:
        status = as_status(exc)
    return status if status.success or status.skipped else status.with_plugin(name)
