"""DefaultPreemption, the PostFilter plugin: preemption, and what it leaves behind —
nominations and disruption budgets.

:class:`~pyscheduler.plugins.default_preemption.DefaultPreemption` decides (no I/O);
:class:`Preemption` is the plugin around it, and the scheduler's hand for the rest:

* **PostFilter.** Victims are looked for on the nodes the filters rejected (a dry run: the
  filters asked again with the victims gone, the pod's own filter asked about the node
  chosen); on success the pod is nominated and the victims evicted in the background, and the
  attempt ends unschedulable, as kube's does — the pod is tried again once room is made.
  Otherwise the reason is kube's, after ``preemption:``. ``may_help`` is False when no pod of
  lower priority runs anywhere (most clusters run most pods at one priority): the plugin then
  runs after the other PostFilter plugins, only to say why it cannot help.
* **Nominations.** A pod that preempted is *nominated* to the node it made room on
  (``status.nominatedNodeName``). Until it is bound there, every pod of equal or lower priority
  is scheduled as if the nominee already ran on that node (:meth:`Preemptor.counting_nominees`),
  so lower-priority pods do not take the room its victims free — kube's
  ``RunFilterPluginsWithNominatedPods``. Nominations are read back from the pods' status, so
  a scheduler that starts (or takes over leadership) honours those of its predecessor.
* **Order of the writes** (the safety rule "every move can be finished by any leader"): the
  nomination is written on the preemptor *before* any victim is touched. A leader killed in
  between leaves a nominated pod with its victims still running; the next leader counts the
  nomination and, the victims not yet terminating, preempts again — never a victim evicted
  with no record of why.
* **Evicting** a victim (kube's ``prepareCandidate``): the ``DisruptionTarget`` condition
  (reason ``PreemptionByScheduler``), then a graceful ``DELETE`` with the victim's uid as a
  precondition (a pod recreated under the same name is not touched), and a ``Preempted`` event
  on it. Lower-priority pods nominated to the same node lose their nomination.
* **Disruption budgets** come from a PodDisruptionBudget informer.

Which pods may be victims: those of this scheduler (the house rule "only our own"), or any
lower-priority pod when ``preemption.victims`` is ``AllPods`` (kube-scheduler's behaviour).
Pods on virtual nodes never are: preemption looks at real nodes only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator
from typing import Any, ClassVar
from dataclasses import dataclass

import numpy as np
import structlog

from pyscheduler.api.times import rfc3339
from pyscheduler.framework.events import ClusterListener
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.lifecycle import WaitingRoom
from pyscheduler.framework.nodetable import NodeTable
from pyscheduler.framework.pipeline import Filtered
from pyscheduler.framework.pod import PodInfo, nominated_node, preempts_never
from pyscheduler.framework.status import SUCCESS, Code, PostFilterResult, Status
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import ConflictError, NotFoundError
from pyscheduler.kube.events import EventRecorder, Obj
from pyscheduler.kube.informer import Informer
from pyscheduler.metrics import SchedulerMetrics
from pyscheduler.plugins.default_preemption import (
    Candidate,
    DefaultPreemption,
    DisruptionBudget,
    PreemptionResult,
)
from pyscheduler.postfilter import PREEMPTION
from pyscheduler.settings import SchedulerConfig

__all__ = ["Nomination", "Preemption", "ProfilePreemption"]

log = structlog.get_logger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class Nomination:
    pod: PodInfo
    node: str


class Preemption(ClusterListener):
    name: ClassVar[str] = PREEMPTION

    def __init__(self, client: KubeClient, config: SchedulerConfig, recorder: EventRecorder,
                 table: NodeTable, *, metrics: SchedulerMetrics | None = None,
                 waiting: WaitingRoom | None = None) -> None:
        self.client = client
        # Pods held at a fragment's permit: a victim among them is rejected, not deleted.
        self.waiting = waiting
        # Every profile's pods are this scheduler's own.
        self.scheduler_names = config.scheduler_names
        self.recorder = recorder
        self.metrics = metrics
        self.seed = config.seed
        self.all_pods = config.preemption.victims == "AllPods"
        self.plugin = self.decider(config)
        self.table = table
        self.nominations: dict[str, Nomination] = {}
        self._by_priority: dict[int, set[str]] = {}
        self._placed: dict[str, int] = {}  # uid -> the row its nominated pod is counted on
        self.budgets: dict[str, DisruptionBudget] = {}
        self.informer = Informer(client, api_path("policy/v1", "poddisruptionbudgets"),
                                 name="poddisruptionbudgets", on_add=self._budget_set,
                                 on_update=lambda old, new: self._budget_set(new),
                                 on_delete=self._budget_deleted)
        self._tasks: set[asyncio.Task[None]] = set()
        # Victims this scheduler is evicting or evicted, until they are gone: another
        # preemptor whose dry run still counts one of them (the informer has not shown it
        # terminating yet) does not evict it again, nor record a second Preempted event.
        self._evicting: set[str] = set()
        self.preempted = 0  # victims evicted

    # -- budgets -------------------------------------------------------------------------------

    @staticmethod
    def _budget_key(obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def _budget_set(self, obj: Obj) -> None:
        self.budgets[self._budget_key(obj)] = DisruptionBudget.from_object(obj)

    def _budget_deleted(self, obj: Obj) -> None:
        self.budgets.pop(self._budget_key(obj), None)

    # -- nominations ---------------------------------------------------------------------------
    #
    # A nominated pod stays counted on its nominated node in the table all along (like an
    # assumed pod, but pending): the next pods see the room taken without any work per attempt.
    # While one pod is scheduled, the nominations that must not count for it are taken off for
    # the attempt: its own, and those of lower priority (kube counts nominated pods of equal or
    # higher priority only).

    def _record(self, nomination: Nomination) -> None:
        uid = nomination.pod.uid
        self._drop(uid)
        self.nominations[uid] = nomination
        self._by_priority.setdefault(nomination.pod.priority, set()).add(uid)
        self._place(nomination)

    def _drop(self, uid: str) -> None:
        nomination = self.nominations.pop(uid, None)
        if nomination is None:
            return
        self._unplace(uid)
        same = self._by_priority.get(nomination.pod.priority)
        if same is not None:
            same.discard(uid)
            if not same:
                del self._by_priority[nomination.pod.priority]

    def _place(self, nomination: Nomination) -> None:
        table, uid = self.table, nomination.pod.uid
        slot = table.slots.get(nomination.node)
        if slot is None or table.virtual[slot] or uid in table.pods[slot]:
            return
        table.add_pod(slot, nomination.pod)
        self._placed[uid] = slot

    def _unplace(self, uid: str) -> bool:
        slot = self._placed.pop(uid, None)
        return slot is not None and self.table.remove_pod(slot, uid) is not None

    def pod_pending(self, pod: PodInfo) -> None:
        """A pending pod of ours as the informer shows it: its nomination is what its status
        says (a nomination this process made and has not written yet stays)."""
        node = nominated_node(pod)
        current = self.nominations.get(pod.uid)
        if node and (current is None or current.node != node):
            self._record(Nomination(pod, node))

    def pod_settled(self, uid: str) -> None:
        self.forget(uid)

    def pod_gone(self, uid: str) -> None:
        self.forget(uid)
        self._evicting.discard(uid)

    def forget(self, uid: str) -> None:
        """The pod is bound, assumed, or gone: it is counted where it is, if anywhere."""
        self._drop(uid)

    def node_gone(self, node: str) -> None:
        """The nominations to a node that left the cluster are void (before the node's row
        is emptied, so they do not linger with its pods)."""
        for uid in [u for u, n in self.nominations.items() if n.node == node]:
            self._drop(uid)

    def nominated(self, uid: str) -> str | None:
        nomination = self.nominations.get(uid)
        return nomination.node if nomination is not None else None

    @contextlib.contextmanager
    def counting_nominees(self, table: NodeTable, pod: PodInfo) -> Iterator[None]:
        """Within the block, every other nominated pod of at least ``pod``'s priority counts
        on its nominated node, and no other (kube's ``RunFilterPluginsWithNominatedPods``).
        The nominations are as before when the block ends, whatever happens, except those
        made or dropped within it."""
        taken: list[Nomination] = []
        try:
            own = self.nominations.get(pod.uid)
            if own is not None and self._unplace(pod.uid):
                taken.append(own)
            for priority in [p for p in self._by_priority if p < pod.priority]:
                for uid in self._by_priority[priority]:
                    if self._unplace(uid):
                        taken.append(self.nominations[uid])
            yield
        finally:
            for nomination in taken:
                if self.nominations.get(nomination.pod.uid) is nomination:
                    self._place(nomination)

    # -- deciding ------------------------------------------------------------------------------

    def may_help(self, ctx: CycleContext) -> bool:
        """Whether preempting for the pod may find anything: it may preempt, and some pod of
        lower priority runs somewhere."""
        pod = ctx.pod
        return not preempts_never(pod) and any(p < pod.priority for p in ctx.table.priorities)

    def may_evict(self, pod: PodInfo) -> bool:
        return self.all_pods or pod.scheduler_name in self.scheduler_names

    def decider(self, profile: SchedulerConfig) -> DefaultPreemption:
        """kube's decision with ``profile``'s DefaultPreemptionArgs."""
        settings = profile.preemption
        return DefaultPreemption(
            min_candidate_nodes_percentage=settings.min_candidate_nodes_percentage,
            min_candidate_nodes_absolute=settings.min_candidate_nodes_absolute,
            rng=np.random.default_rng(self.seed))

    def for_profile(self, profile: SchedulerConfig) -> ProfilePreemption:
        """The plugin for one more profile: its own arguments, these nominations."""
        return ProfilePreemption(self, self.decider(profile))

    def post_filter(self, ctx: CycleContext, filtered: Filtered,
                    decider: DefaultPreemption | None = None
                    ) -> tuple[PostFilterResult | None, Status]:
        """Preempt for ``ctx.pod`` (nominees counted by the caller): on success the
        nomination is recorded at once and written, and the victims evicted, in the
        background (:meth:`carry_out`)."""
        pod = ctx.pod
        result = self.preempt(ctx, filtered, decider)
        if result.candidate is not None:
            self.spawn(self.carry_out(pod, result.candidate))
            return PostFilterResult(nominated_node=result.candidate.node), SUCCESS
        if result.clear_nomination and nominated_node(pod):
            self.spawn(self.clear(pod))
        reasons = (f"preemption: {result.message}",) if result.message else ()
        return None, Status(Code.UNSCHEDULABLE, reasons)

    def preempt(self, ctx: CycleContext, filtered: Filtered,
                decider: DefaultPreemption | None = None) -> PreemptionResult:
        """The decision alone (no write): on success the nomination is recorded here, and
        :meth:`carry_out` must follow.

        The pod's logic answered for the table as it was: its own filter stage is left out of
        the dry run (the built-in filters decide where evictions help) and asked again about
        the chosen node with the victims gone (``filtered.verify``)."""
        if self.metrics is not None:
            self.metrics.preemption_attempts.inc()
        pod = ctx.pod
        result = (decider or self.plugin).preempt(
            ctx, filtered.outcome, filtered.fits_row, self.may_evict, self.budgets.values(),
            verify=filtered.verify if filtered.needs_verify else None)
        if result.candidate is not None:
            self._record(Nomination(pod, result.candidate.node))
        elif result.clear_nomination:
            self._drop(pod.uid)
        return result

    # -- acting --------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def carry_out(self, pod: PodInfo, candidate: Candidate) -> None:
        """Write the nomination, then evict the victims; clear the nominations of
        lower-priority pods nominated to the same node. Never raises."""
        node = candidate.node
        try:
            await self._write_nomination(pod, node)
        except NotFoundError:
            self.forget(pod.uid)
            return  # the preemptor is gone: nobody to make room for
        except Exception as exc:
            # Nothing evicted without the record of why: the pod tries again.
            log.warning("could not record the nomination; not preempting", pod=pod.key,
                        node=node, error=str(exc))
            self.forget(pod.uid)
            return
        if self.metrics is not None:
            self.metrics.preemption_victims.observe(len(candidate.victims))
        await asyncio.gather(*(self._evict(pod, victim, node) for victim in candidate.victims))
        lower = [n.pod for uid, n in list(self.nominations.items())
                 if n.node == node and uid != pod.uid and n.pod.priority < pod.priority]
        for other in lower:
            self.forget(other.uid)
            try:
                await self._write_nomination(other, None)
            except Exception as exc:
                log.info("could not clear a nomination", pod=other.key, error=str(exc))

    async def clear(self, pod: PodInfo) -> None:
        """Clear ``pod``'s nomination in its status (nothing to preempt for it any more)."""
        try:
            await self._write_nomination(pod, None)
        except Exception as exc:
            log.info("could not clear a nomination", pod=pod.key, error=str(exc))

    async def _write_nomination(self, pod: PodInfo, node: str | None) -> None:
        await self.client.patch_pod_status(pod.namespace, pod.name,
                                           {"status": {"nominatedNodeName": node}})

    async def _evict(self, preemptor: PodInfo, victim: PodInfo, node: str) -> None:
        if victim.deleting or victim.uid in self._evicting:
            return  # already on its way out
        self._evicting.add(victim.uid)
        condition = {"type": DISRUPTION_TARGET, "status": "True",
                     "reason": PREEMPTION_BY_SCHEDULER,
                     "message": f"{preemptor.scheduler_name}: preempting to accommodate a "
                                "higher priority pod",
                     # Without it kube-controller-manager's disruption controller takes the
                     # condition for a stale one (set at the zero time) and resets it to False
                     # if it looks before the deletion lands.
                     "lastTransitionTime": rfc3339()}
        path = api_path("v1", "pods", namespace=victim.namespace, name=victim.name)
        if self.waiting is not None and self.waiting.preempted(
                victim.uid, f"preempted by pod {preemptor.uid} on node {node}"):
            # Not bound yet: its room is given back and it is scheduled again (as kube
            # rejects a waiting victim instead of deleting it) — a victim again, maybe, later.
            self._evicting.discard(victim.uid)
            self.preempted += 1
            log.info("preempted a pod waiting at permit", pod=victim.key,
                     preemptor=preemptor.key, node=node)
            return
        try:
            await self.client.patch_pod_status(victim.namespace, victim.name,
                                               {"status": {"conditions": [condition]}})
            await self.client.delete(path, uid=victim.uid)
        except (NotFoundError, ConflictError):
            return  # gone already, or another pod by that name now
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._evicting.discard(victim.uid)  # still running: a later preemption may try
            log.warning("could not preempt a pod", pod=victim.key, preemptor=preemptor.key,
                        error=str(exc))
            return
        self.preempted += 1
        log.info("preempted", pod=victim.key, preemptor=preemptor.key, node=node)
        self.recorder.record(victim.raw, type_="Normal", reason="Preempted",
                             action="Preempting",
                             note=f"Preempted by pod {preemptor.uid} on node {node}",
                             related=preemptor.raw)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class ProfilePreemption:
    """DefaultPreemption for a profile after the first: that profile's arguments, and the
    nominations, budgets and evictions every profile shares."""

    name: ClassVar[str] = PREEMPTION

    def __init__(self, shared: Preemption, decider: DefaultPreemption) -> None:
        self.shared = shared
        self.decider = decider

    def may_help(self, ctx: CycleContext) -> bool:
        return self.shared.may_help(ctx)

    def post_filter(self, ctx: CycleContext,
                    filtered: Filtered) -> tuple[PostFilterResult | None, Status]:
        return self.shared.post_filter(ctx, filtered, self.decider)
