"""The scheduling algorithm: filter every node, score the feasible ones, pick the best.

:class:`Pipeline` runs a :class:`Profile`'s filter plugins (the feasibility mask is the AND of
their masks) and score plugins (the total is the weighted sum of their 0..100 scores) over the
whole node table, then selects the highest-scoring feasible node, breaking ties at random with a
seedable generator.

**Stage overrides** are the seam for per-pod scheduling logic (WebAssembly fragments): a
:class:`StageOverride` may *replace* the filter stage (only its verdict counts) or *extend* it
(its verdict is ANDed with the built-ins), and likewise replace or extend the score stage with a
weight; an extending score may also stand in for a named subset of the built-in score plugins
(``score_replaces``: those do not count for the pod while the override's score does). The
override is chosen per pod by the caller.

**Diagnosis** is computed only when it is needed (nothing fits, or an explanation was asked for):
like kube-scheduler, each node is charged to the *first* filter plugin, in profile order, that
rejected it, and the reasons are counted into kube's message,
``0/N nodes are available: 3 Insufficient cpu, 2 node(s) didn't match Pod's node
affinity/selector.``

``percentageOfNodesToScore`` follows kube-scheduler: when below 100, only the first K feasible
nodes from a rotating start index are scored (K at least 100 nodes, adaptive when 0).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

from pyscheduler.framework.interface import (
    CycleContext,
    FilterPlugin,
    FilterResult,
    ScorePlugin,
)
from pyscheduler.framework.lifecycle import Lifecycle
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable, RowView

__all__ = [
    "Diagnosis",
    "EvaluateFn",
    "EvaluateNowFn",
    "FilterOutcome",
    "Filtered",
    "Pipeline",
    "Profile",
    "ScheduleResult",
    "Selection",
    "StageFailed",
    "StageOverride",
    "StageUnavailable",
    "explain",
    "nodes_to_score",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
_NEVER = np.iinfo(np.int64).min  # a total no feasible node can have (masks the infeasible)

# A stage function; an override's may return None to defer to the built-in stage.
FilterFn = Callable[[CycleContext], FilterResult | None]
ScoreFn = Callable[[CycleContext, BoolArray], IntArray | None]
# Resolve an override whose stages may not simply run on the loop (see StageOverride.evaluate).
EvaluateFn = Callable[[CycleContext, BoolArray], Awaitable["StageOverride"]]
EvaluateNowFn = Callable[[CycleContext, BoolArray], "StageOverride | None"]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    filters: tuple[FilterPlugin, ...]
    scores: tuple[tuple[ScorePlugin, int], ...]
    percentage_of_nodes_to_score: int = 100
    # Plugins whose answer for a node depends only on that node's row and the pod: the
    # pipeline may recompute them for changed rows only (see Pipeline._incremental).
    row_local_filters: frozenset[str] = frozenset()
    row_local_scores: frozenset[str] = frozenset()
    # Filters that hold whatever a stage override answers: an override that replaces the
    # filter stage replaces the others (policy), never these (safety).
    invariant_filters: frozenset[str] = frozenset()


class _RowLocalMemo:
    """Combined row-local verdicts and weighted scores for one pod signature: each row-local
    score plugin's weighted scores (``parts``), and their sums leaving out a set of plugins
    (``sums``; the empty set: all of them), kept for the sets asked for."""

    __slots__ = ("n", "generation", "feasible", "parts", "sums")

    def __init__(self, n: int, generation: int, feasible: BoolArray,
                 parts: dict[str, IntArray]) -> None:
        self.n = n
        self.generation = generation
        self.feasible = feasible
        self.parts = parts
        self.sums: dict[frozenset[str], IntArray] = {}

    def score(self, without: frozenset[str]) -> IntArray:
        """The sum of the row-local scores but those of ``without`` (kept up to date from now
        on: :meth:`Pipeline._recompute` updates every sum it holds)."""
        total = self.sums.get(without)
        if total is None:
            total = np.zeros(self.n, np.int64)
            for name, part in self.parts.items():
                if name not in without:
                    total += part
            self.sums[without] = total
        return total


def row_local_signature(ctx: CycleContext) -> tuple[object, ...]:
    """Everything of the pod that row-local plugins read: pods with equal signatures get equal
    row-local answers on equal rows."""
    pod = ctx.pod
    return (tuple(ctx.request.tolist()), pod.nonzero_cpu, pod.nonzero_memory, pod.tolerations,
            pod.node_name, tuple(sorted(pod.node_selector.items())), pod.required_terms,
            pod.host_ports, ctx.virtual_pass)


@dataclass(frozen=True, slots=True)
class StageOverride:
    """Per-pod replacement or extension of the filter and/or score stage.

    ``evaluate``, when set, means the stages may not simply run on the scheduling loop (a
    WebAssembly fragment's calls may take up to their deadline): the scheduler first tries
    ``evaluate_now(ctx, base)`` — ``base`` being :meth:`Pipeline.base_feasible`, the rows the
    override's score stage may consider — which answers at once when the calls may run on the
    loop (they are known to be short), and otherwise None; then it awaits
    ``evaluate(ctx, base)``. Either resolves to an override whose stage functions return
    answers already computed. :meth:`Pipeline.schedule` refuses an override that still has
    ``evaluate``.
    """

    name: str
    filter: FilterFn | None = None
    filter_mode: Literal["replace", "extend"] = "replace"
    score: ScoreFn | None = None
    score_mode: Literal["replace", "extend"] = "replace"
    score_weight: int = 1
    #: built-in score plugins that this override's score (mode "extend") stands in for: they
    #: do not count for the pod, unless the override's score defers to the built-ins
    score_replaces: frozenset[str] = frozenset()
    evaluate: EvaluateFn | None = None
    evaluate_now: EvaluateNowFn | None = None
    #: the pod's logic at post-filter, reserve, permit, pre-bind and post-bind (None: none)
    lifecycle: Lifecycle | None = None
    #: the stages this override's fragment took and what each answered, for the pod's
    #: explanation (``(("prefilter", "pass"), ("filter", "ok"))``; set once resolved)
    answered: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Selection:
    """The overrides chosen for one pod: ``active`` decides (``None``: the built-in profile);
    each of ``shadows`` is evaluated beside it and decides nothing."""

    active: StageOverride | None
    shadows: tuple[StageOverride, ...] = ()


class StageUnavailable(Exception):
    """The pod selects stage logic that cannot serve now (missing, loading, failed): it waits."""


class StageFailed(Exception):
    """An override failed for this pod and its policy says the pod must not be placed."""


@dataclass(slots=True)
class Diagnosis:
    nodes: int
    reasons: collections.Counter[str]
    unresolvable: bool  # every rejected node failed for a reason no pod move can fix
    prefilter: str = ""  # a rejection before any node was looked at (kube's PreFilterMsg)
    #: The filters that rejected a node, or the pod (kube's UnschedulablePlugins): only the
    #: events they registered move the pod back.
    plugins: frozenset[str] = frozenset()

    def message(self) -> str:
        """kube-scheduler's FitError text."""
        head = f"0/{self.nodes} nodes are available"
        if self.prefilter:
            return f"{head}: {self.prefilter}."
        parts = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        return f"{head}: {', '.join(parts)}." if parts else f"{head}."


@dataclass(slots=True)
class FilterOutcome:
    feasible: BoolArray
    valid: BoolArray
    results: list[tuple[str, FilterResult]] = field(default_factory=list)

    def diagnose(self) -> Diagnosis:
        remaining = self.valid.copy()
        reasons: collections.Counter[str] = collections.Counter()
        # kube runs every PreFilter before any Filter: a rejection of the pod as a whole wins,
        # whichever plugin's filter turned down the nodes first here.
        prefilter, by = next(((r.message, name) for name, result in self.results
                              for r in result.reasons
                              if r.prefilter and r.failed[: len(remaining)].any()), ("", ""))
        rejectors = {by} if by else set()
        all_unresolvable = True
        for name, result in self.results:
            if result.passed is None:
                continue
            rejected = remaining & ~result.passed
            if not rejected.any():
                continue
            rejectors.add(name)
            charged = np.zeros_like(rejected)
            for reason in result.reasons:
                hit = rejected & reason.failed[: len(rejected)]
                count = int(hit.sum())
                if count:
                    reasons[reason.message] += count
                    charged |= hit

                    if not reason.unresolvable:
                        all_unresolvable = False
            uncharged = int((rejected & ~charged).sum())
            if uncharged:
                reasons["node(s) were rejected by a filter"] += uncharged
                all_unresolvable = False
            remaining &= result.passed
        return Diagnosis(int(self.valid.sum()), reasons, all_unresolvable and bool(reasons),
                         prefilter, frozenset(rejectors))


@dataclass(slots=True)
class ScheduleResult:
    node: str | None
    slot: int
    filtered: FilterOutcome
    total: IntArray | None = None
    per_plugin: dict[str, IntArray] | None = None
    feasible_count: int = 0
    filter_seconds: float = 0.0
    score_seconds: float = 0.0
    # (extension point, plugin) -> seconds, when the attempt was sampled for plugin metrics
    plugin_seconds: dict[tuple[str, str], float] | None = None
    # False when nothing fit and the filters' reasons were not worked out (schedule's
    # diagnose=False): ``filtered`` then says only that no node is feasible.
    diagnosed: bool = True


@dataclass(slots=True)
class Filtered:
    """What a PostFilter plugin is handed for a pod no node fits (kube's node-to-status map,
    and the means to ask the filters again): why each node failed, worked out on first use
    (:attr:`result`; the fast path does not), narrowed to the nodes an earlier PostFilter
    plugin allowed (:attr:`outcome`), and the filters asked again about one row once the
    plugin changed something there (:meth:`fits_row`, :meth:`verify`)."""

    pipeline: Pipeline
    ctx: CycleContext
    first: ScheduleResult
    #: the pod's logic with its answers (resolved), and as selected (before evaluation)
    override: StageOverride | None = None
    logic: StageOverride | None = None
    explain: bool = False
    sample: bool = False
    #: the nodes the plugin may consider (None: every node)
    nodes: frozenset[str] | None = None
    _diagnosed: ScheduleResult | None = field(default=None, init=False)

    @property
    def result(self) -> ScheduleResult:
        """The attempt with the filters' reasons worked out (a second, full run when the fast
        path found no node and did not say why)."""
        if self._diagnosed is None:
            result = self.first
            if not result.diagnosed:
                result = self.pipeline.schedule(self.ctx, self.override, sample=self.sample)
            self._diagnosed = result
        return self._diagnosed

    @property
    def outcome(self) -> FilterOutcome:
        """Why each node failed, the nodes outside :attr:`nodes` left out."""
        outcome = self.result.filtered
        if self.nodes is None:
            return outcome
        keep = np.zeros_like(outcome.valid)
        slots = self.ctx.table.slots
        for name in self.nodes:
            slot = slots.get(name)
            if slot is not None and slot < len(keep):
                keep[slot] = outcome.valid[slot]
        return FilterOutcome(outcome.feasible, keep, outcome.results)

    def narrowed(self, nodes: frozenset[str]) -> Filtered:
        """The same, for ``nodes`` only (and those already allowed)."""
        kept = dataclasses.replace(self, nodes=nodes if self.nodes is None
                                   else self.nodes & nodes)
        kept._diagnosed = self._diagnosed
        return kept

    @property
    def dry_run_logic(self) -> StageOverride | None:
        """The pod's logic as a dry run may use it: without a filter stage of its own (that
        answered for the table as it was; :meth:`verify` asks it again)."""
        override = self.override
        return override if override is None or override.filter is None else None

    @property
    def needs_verify(self) -> bool:
        """Whether the pod's own filter must be asked again about a row that now fits."""
        return self.override is not None and self.override.filter is not None

    def fits_row(self, slot: int, why: bool = True) -> list[str] | None:
        """:meth:`Pipeline.fits_row` for the pod on the table as it is now."""
        ctx = self.ctx
        fresh = CycleContext.for_pod(ctx.pod, ctx.table, ctx.namespaces)
        return self.pipeline.fits_row(fresh, slot, self.dry_run_logic, why=why)

    def verify(self, slot: int) -> bool:
        """Whether the pod's own logic accepts row ``slot`` on the table as it is now: asked
        on the loop, and False when it cannot answer there."""
        logic = self.logic
        if logic is None:
            return True
        ctx = self.ctx
        fresh = CycleContext.for_pod(ctx.pod, ctx.table, ctx.namespaces)
        resolved: StageOverride | None = logic
        if logic.evaluate is not None:
            resolved = None if logic.evaluate_now is None else logic.evaluate_now(
                fresh, self.pipeline.score_base(fresh, logic))
        if resolved is None or resolved.filter is None:
            return resolved is not None
        answer = resolved.filter(fresh)
        return answer is None or answer.passed is None or bool(answer.passed[slot])


def nodes_to_score(n: int, percentage: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind."""
    if n < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return n
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50 - n // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(n * adaptive // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Pipeline:
    MEMO_SIZE = 64

    def __init__(self, profile: Profile, *, seed: int | None = None,
                 incremental: bool = True) -> None:
        self.profile = profile
        self.rng = np.random.default_rng(seed)
        self._next_start = 0
        self.incremental = incremental and bool(profile.row_local_filters
                                                or profile.row_local_scores)
        self._memo: collections.OrderedDict[tuple[object, ...], _RowLocalMemo] = \
            collections.OrderedDict()
        self._rl_filters = tuple(p for p in profile.filters
                                 if p.name in profile.row_local_filters)
        self._other_filters = tuple(p for p in profile.filters
                                    if p.name not in profile.row_local_filters)
        self._rl_scores = tuple((p, w) for p, w in profile.scores
                                if w and p.name in profile.row_local_scores)
        self._other_scores = tuple((p, w) for p, w in profile.scores
                                   if w and p.name not in profile.row_local_scores)
        self._builtin_filters: tuple[tuple[str, FilterFn], ...] = tuple(
            (p.name, p.filter) for p in profile.filters)
        self._invariant_filters = tuple((name, fn) for name, fn in self._builtin_filters
                                        if name in profile.invariant_filters)
        self._policy_filters = tuple((name, fn) for name, fn in self._builtin_filters
                                     if name not in profile.invariant_filters)
        self._builtin_scores: tuple[tuple[str, ScoreFn, int], ...] = tuple(
            (p.name, p.score, w) for p, w in profile.scores if w)

    def _row_local(self, ctx: CycleContext) -> _RowLocalMemo:
        """Row-local verdicts and scores for every row, recomputing only rows that changed
        since the last pod with the same signature (kube-scheduler once had an "equivalence
        cache" for the same purpose; here it is exact because the rows say when they changed)."""
        table = ctx.table
        n = table.n
        key = row_local_signature(ctx)
        memo = self._memo.get(key)
        if memo is not None and memo.n == n:
            if memo.generation == table.generation:
                self._memo.move_to_end(key)
                return memo
            rows = table.changed_since(memo.generation)
        else:
            rows = np.arange(n)
            memo = _RowLocalMemo(n, 0, np.zeros(n, np.bool_),
                                 {p.name: np.zeros(n, np.int64) for p, _ in self._rl_scores})
            self._memo[key] = memo
            if len(self._memo) > self.MEMO_SIZE:
                self._memo.popitem(last=False)
        self._memo.move_to_end(key)
        if len(rows):
            self._recompute(ctx, rows, memo)
        memo.generation = table.generation
        return memo

    SCALAR_ROWS = 8

    def _recompute(self, ctx: CycleContext, rows: npt.NDArray[np.intp],
                   memo: _RowLocalMemo) -> None:
        """Row-local answers for ``rows``. Plugins with per-row methods (``filter_row``,
        ``score_row``) answer a handful of rows without array operations, whose fixed cost
        would dominate; the others run vectorized over a view of just those rows."""
        table = ctx.table
        # Rows that are no candidates of this pass (virtual rows in the first, real ones in
        # the burst pass) are masked out by _builtin_feasible: not worth an answer. A row that
        # changes side changes, and is recomputed then.
        rows = ctx.candidate_rows(rows)
        if not len(rows):
            return
        scalar = len(rows) <= self.SCALAR_ROWS
        array_filters = [p for p in self._rl_filters
                         if not (scalar and hasattr(p, "filter_row"))]
        array_scores = [(p, w) for p, w in self._rl_scores
                        if not (scalar and hasattr(p, "score_row"))]
        feasible = table.valid[rows].copy()
        parts: dict[str, IntArray] = {}  # weighted scores of the rows, per plugin
        if array_filters or array_scores:
            view = RowView(table, rows)
            sub = CycleContext(ctx.pod, cast(NodeTable, view), ctx.request, ctx.namespaces, {},
                               virtual_pass=ctx.virtual_pass)
            for plugin in array_filters:
                result = plugin.filter(sub)
                if result.passed is not None:
                    feasible &= result.passed
            for scorer, weight in array_scores:
                parts[scorer.name] = scorer.score(sub, feasible)[: len(rows)] * weight
        if scalar:
            slots = rows.tolist()
            for plugin in self._rl_filters:
                check = getattr(plugin, "filter_row", None)
                if check is not None:
                    for i, slot in enumerate(slots):
                        if feasible[i] and not check(ctx, slot):
                            feasible[i] = False
            for scorer, weight in self._rl_scores:
                one = getattr(scorer, "score_row", None)
                if one is not None:
                    parts[scorer.name] = np.array([one(ctx, slot) * weight for slot in slots],
                                                  np.int64)
        memo.feasible[rows] = feasible
        for name, part in parts.items():
            memo.parts[name][rows] = part
        for without, total in memo.sums.items():
            kept = [part for name, part in parts.items() if name not in without]
            total[rows] = sum(kept[1:], kept[0]) if kept else 0

    def _incremental(self, ctx: CycleContext,
                     override: StageOverride | None = None) -> ScheduleResult | None:
        """The fast path; None when nothing fits (the caller reruns in full to diagnose).
        ``override`` may only *extend* stages here (the built-ins still decide)."""
        t0 = time.perf_counter()
        memo = self._row_local(ctx)
        feasible = self._builtin_feasible(ctx, memo)
        if override is not None and override.filter is not None:
            extra = override.filter(ctx)
            if extra is not None and extra.passed is not None:
                feasible &= extra.passed[: len(feasible)]
        feasible = self._limit(feasible)
        count = int(feasible.sum())
        if count == 0:
            return None
        t1 = time.perf_counter()
        outcome = FilterOutcome(feasible, ctx.nodes())
        if count == 1:
            slot = int(np.flatnonzero(feasible)[0])
            return ScheduleResult(ctx.table.names[slot], slot, outcome, feasible_count=1,
                                  filter_seconds=t1 - t0)
        extra_scores: IntArray | None = None
        if override is not None and override.score is not None:
            extra_scores = override.score(ctx, feasible)
        without = override.score_replaces if override is not None \
            and extra_scores is not None else frozenset()
        total = memo.score(without).copy()
        for scorer, weight in self._other_scores:
            if scorer.name not in without:
                total += scorer.score(ctx, feasible)[: len(total)] * weight
        if extra_scores is not None:
            assert override is not None
            total += extra_scores[: len(total)] * override.score_weight
        slot = self._select(feasible, total)
        return ScheduleResult(ctx.table.names[slot], slot, outcome, total, None, count,
                              filter_seconds=t1 - t0, score_seconds=time.perf_counter() - t1)

    def base_feasible(self, ctx: CycleContext, override: StageOverride) -> BoolArray:
        """The rows ``override``'s score stage may consider besides its own filter's verdicts:
        the built-in filters' answer when the override extends the filter stage or has none,
        every node when it replaces it."""
        if override.filter is not None and override.filter_mode == "replace":
            nodes: BoolArray = ctx.nodes().copy()
            return nodes
        if not self.incremental:
            return self.filter(ctx).feasible
        return self._builtin_feasible(ctx, self._row_local(ctx), keep=True)

    def score_base(self, ctx: CycleContext, override: StageOverride) -> BoolArray:
        """The rows ``override``'s score stage is evaluated over (its ``evaluate``'s base):
        :meth:`base_feasible`, or every candidate row when it has no score stage."""
        if override.score is None:
            return ctx.nodes()
        return self.base_feasible(ctx, override)

    _BASE = "pipeline.builtin-feasible"

    def _builtin_feasible(self, ctx: CycleContext, memo: _RowLocalMemo, *,
                          keep: bool = False) -> BoolArray:
        """The built-in filters' answer (incremental path), computed once per context and table
        generation: an attempt that asked for it before evaluating its override gets the same
        array back when it schedules, without running the filters twice."""
        cached = ctx.state.get(self._BASE)
        generation = ctx.table.generation
        if cached is not None and cached[0] == generation:
            kept: BoolArray = cached[1].copy()
            return kept
        feasible: BoolArray = memo.feasible & ctx.nodes()  # the rows of this pass
        for plugin in self._other_filters:
            result = plugin.filter(ctx)
            if result.passed is not None:
                feasible &= result.passed[: len(feasible)]
        if keep:
            ctx.state[self._BASE] = (generation, feasible.copy())
        return feasible

    def _select(self, feasible: BoolArray, total: IntArray) -> int:
        masked = np.where(feasible, total, _NEVER)
        ties = np.flatnonzero(masked == masked.max())
        return int(ties[0] if len(ties) == 1 else ties[self.rng.integers(len(ties))])

    def filter(self, ctx: CycleContext, override: StageOverride | None = None,
               timings: dict[tuple[str, str], float] | None = None) -> FilterOutcome:
        valid = ctx.nodes().copy()
        feasible = valid.copy()
        outcome = FilterOutcome(feasible, valid)
        replace = override is not None and override.filter is not None \
            and override.filter_mode == "replace"
        # Replacing the filter stage replaces the policy filters; the invariants always run.
        stages: collections.deque[tuple[str, FilterFn]] = collections.deque(
            self._invariant_filters if replace else self._builtin_filters)
        if override is not None and override.filter is not None:
            stages.append((override.name, override.filter))
        while stages:
            name, fn = stages.popleft()
            if timings is not None:
                t0 = time.perf_counter()
                result = fn(ctx)
                timings[("Filter", name)] = time.perf_counter() - t0
            else:
                result = fn(ctx)
            if result is None:
                # The override defers to the built-in stage (a fragment's failure policy
                # "Default"): in replace mode the other built-ins run now; in extend mode
                # they ran.
                if replace:
                    stages.extend(self._policy_filters)
                continue
            outcome.results.append((name, result))
            if result.passed is not None:
                feasible &= result.passed[: len(feasible)]
        return outcome

    def fits_row(self, ctx: CycleContext, slot: int, override: StageOverride | None = None,
                 *, why: bool = True) -> list[str] | None:
        """Whether ``ctx.pod`` passes every filter of :meth:`filter` on one row: None when it
        does, else the reasons of the first filter that rejects it (an empty list when ``why``
        is False and a per-row check said no). Preemption's dry run asks this once per change
        it tries: row-local filters look at that row only, the others at the whole table."""
        replace = override is not None and override.filter is not None \
            and override.filter_mode == "replace"
        names = self.profile.invariant_filters if replace else None
        if override is not None and override.filter is not None:
            result = override.filter(ctx)
            if result is None:
                names = None  # deferred to the built-in stage: every built-in filter runs
            elif result.passed is not None and not result.passed[slot]:
                return _row_reasons(result, slot)
        sub: CycleContext | None = None  # the one row, for row-local filters
        for plugin in self.profile.filters:
            if names is not None and plugin.name not in names:
                continue
            if plugin.name in self.profile.row_local_filters:
                check = getattr(plugin, "filter_row", None)
                if check is not None and not why:
                    if not check(ctx, slot):
                        return []
                    continue
                if sub is None:
                    view = RowView(ctx.table, np.array([slot], np.intp))
                    sub = CycleContext(ctx.pod, cast(NodeTable, view), ctx.request,
                                       ctx.namespaces, {}, virtual_pass=ctx.virtual_pass)
                result, index = plugin.filter(sub), 0
            else:
                result, index = plugin.filter(ctx), slot
            if result.passed is not None and not result.passed[index]:
                return _row_reasons(result, index)
        return None

    def score(self, ctx: CycleContext, feasible: BoolArray,
              override: StageOverride | None = None, *, keep_per_plugin: bool = False,
              timings: dict[tuple[str, str], float] | None = None,
              ) -> tuple[IntArray, dict[str, IntArray]]:
        total = np.zeros(len(feasible), np.int64)
        per_plugin: dict[str, IntArray] = {}
        replace = override is not None and override.score is not None \
            and override.score_mode == "replace"
        # An extending score standing in for some built-ins: those run only if it defers.
        stood_in = override.score_replaces if override is not None and not replace \
            and override.score is not None else frozenset()
        stages: collections.deque[tuple[str, ScoreFn, int]] = collections.deque(
            () if replace else (s for s in self._builtin_scores if s[0] not in stood_in))
        if override is not None and override.score is not None:
            stages.append((override.name, override.score, override.score_weight))
        while stages:
            name, fn, weight = stages.popleft()
            if timings is not None:
                t0 = time.perf_counter()
                scores = fn(ctx, feasible)
                timings[("Score", name)] = time.perf_counter() - t0
            else:
                scores = fn(ctx, feasible)
            if scores is None:  # deferred to the built-in stage, as in filter()
                if replace:
                    stages.extend(self._builtin_scores)
                elif stood_in:
                    stages.extend(s for s in self._builtin_scores if s[0] in stood_in)
                continue
            scores = scores[: len(feasible)]
            total += scores * weight
            if keep_per_plugin:
                per_plugin[name] = scores
        return total, per_plugin

    def _limit(self, feasible: BoolArray) -> BoolArray:
        """Keep only the first K feasible rows from a rotating start (percentageOfNodesToScore)."""
        if self.profile.percentage_of_nodes_to_score >= 100:
            return feasible
        count = int(feasible.sum())
        k = nodes_to_score(int(len(feasible)), self.profile.percentage_of_nodes_to_score)
        if count <= k:
            return feasible
        rows = np.flatnonzero(feasible)
        start = int(np.searchsorted(rows, self._next_start % len(feasible)))
        chosen = np.roll(rows, -start)[:k]
        self._next_start = int(chosen[-1]) + 1
        limited = np.zeros_like(feasible)
        limited[chosen] = True
        return limited

    def schedule(self, ctx: CycleContext, override: StageOverride | None = None, *,
                 explain: bool = False, sample: bool = False,
                 diagnose: bool = True) -> ScheduleResult:
        """One attempt. ``sample`` also times every plugin (for plugin metrics). With
        ``diagnose`` False, an attempt that finds no node on the fast path says so without
        working out why (a second, full run would): the caller may not need to know."""
        if override is not None and override.evaluate is not None:
            raise ValueError(f"stage override {override.name} runs off the scheduling loop: "
                             "schedule with what its evaluate() resolves to")
        t0 = time.perf_counter()
        extends_only = override is None or (
            (override.filter is None or override.filter_mode == "extend")
            and (override.score is None or override.score_mode == "extend"))
        if self.incremental and extends_only and not explain and not sample:
            fast = self._incremental(ctx, override)
            if fast is not None:
                return fast
            if not diagnose:
                nodes = ctx.nodes()
                return ScheduleResult(None, -1, FilterOutcome(np.zeros(len(nodes), np.bool_),
                                                              nodes), diagnosed=False,
                                      filter_seconds=time.perf_counter() - t0)
        timings: dict[tuple[str, str], float] | None = {} if sample else None
        t0 = time.perf_counter()
        filtered = self.filter(ctx, override, timings)
        feasible = self._limit(filtered.feasible)
        t1 = time.perf_counter()
        count = int(feasible.sum())
        if count == 0:
            return ScheduleResult(None, -1, filtered, filter_seconds=t1 - t0,
                                  plugin_seconds=timings)
        if count == 1 and not explain:
            slot = int(np.flatnonzero(feasible)[0])
            return ScheduleResult(ctx.table.names[slot], slot, filtered, feasible_count=1,
                                  filter_seconds=t1 - t0, plugin_seconds=timings)
        total, per_plugin = self.score(ctx, feasible, override, keep_per_plugin=explain,
                                       timings=timings)
        slot = self._select(feasible, total)
        return ScheduleResult(ctx.table.names[slot], slot, filtered, total,
                              per_plugin if explain else None, count,
                              filter_seconds=t1 - t0, score_seconds=time.perf_counter() - t1,
                              plugin_seconds=timings)


def _row_reasons(result: FilterResult, index: int) -> list[str]:
    """The messages of ``result``'s reasons that hold for row ``index``."""
    found = [r.message for r in result.reasons if index < len(r.failed) and r.failed[index]]
    return found or ["node(s) were rejected by a filter"]


def explain(result: ScheduleResult, table_names: Sequence[str], top: int = 3) -> dict[str, object]:
    """The ``wssp/decision`` explanation: feasible count, failure reasons by count, top nodes
    with their per-plugin scores."""
    diagnosis = result.filtered.diagnose()
    out: dict[str, object] = {
        "feasibleNodes": int(result.filtered.feasible.sum()),
        "nodes": diagnosis.nodes,
        "failures": dict(diagnosis.reasons),
        "selected": result.node,
    }
    if result.total is not None:
        feasible = result.filtered.feasible
        rows = np.flatnonzero(feasible)
        order = rows[np.argsort(-result.total[rows], kind="stable")][:top]
        out["top"] = [
            {"node": table_names[int(r)], "score": int(result.total[r]),
             "plugins": {name: int(s[r]) for name, s in (result.per_plugin or {}).items()}}
            for r in order
        ]
    return out
