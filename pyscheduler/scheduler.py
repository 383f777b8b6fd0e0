"""The scheduling loop: pop a pod, run the pipeline, assume, bind in the background.

It reads like kube-scheduler's ``schedule_one.go``:

1. **pop** the next pod from the queue (priority, then age);
2. **schedule**: build the cycle context and run the pipeline over every real node; when none
   fits, run the **PostFilter** plugins (:mod:`pyscheduler.postfilter`): the pod's fragment,
   whose answer bounds the others, then DefaultPreemption and CloudBurst (the burst pass: the
   same filters over the cloud pools' virtual nodes) in the configured order;
3. on success **assume** the pod on the chosen node in the cache (the next pod already sees the
   capacity taken — a pool's quota as much as a node's) and run **Reserve**: the plugins that
   answer at once (VolumeBinding) on the loop, before the next pod's cycle;
4. the **binding cycle**, in a task of its own with bounded concurrency: the rest of Reserve,
   **Permit** (a pod told to wait is held until allowed, rejected or timed out), **PreBind**
   (the fragment's labels, VirtualNodeLabel, VolumeBinding), **Bind** (DefaultBinder), and
   **PostBind** (:class:`~pyscheduler.framework.runtime.Framework` applies kube's rules at
   each point; the plugins are in :mod:`pyscheduler.binding`);
5. on failure record why: the ``PodScheduled=False`` condition (reason ``Unschedulable``) and a
   ``FailedScheduling`` event with kube's message (the filters' diagnosis, then the reasons of
   the PostFilter plugins), then park the pod until the cluster changes.

Every failure after Reserve has one undo (:meth:`Scheduler._undo`): every Reserve plugin's
unreserve in reverse order, the assumption forgotten, the pod requeued with the reason — or
dropped from the queue when it is gone or was bound elsewhere. DefaultBinder re-reads a pod
after a 409/404 (bound elsewhere, gone, or to be retried) and retries 5xx and timeouts with
backoff; a binding that timed out but actually succeeded shows up naming *our* node, and
counts as success. No pod is bound twice and no node over-committed: the binding subresource
refuses an assigned pod, and the cache counts assumed pods until the informer confirms them.

Informers feed the cache (nodes, virtual ones included; pods assigned to nodes, whoever bound
them) and the queue (our unassigned pods). Only the leader schedules; losing the lease cancels
the loop and the bindings in flight at once. The rebalancer hears about pods on virtual nodes
and freed capacity through :class:`PlacementObserver`, and asks for placements through the
small interface this class offers (:meth:`try_placement`, :meth:`reserve`, :meth:`release`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import orjson
import structlog

from pyscheduler.api.names import (
    DECISION_ANNOTATION,
    EXPLAIN_ANNOTATION,
    VIRTUAL_LABEL,
    VIRTUAL_NODE_PREFIX,
    virtual_node_name,
)
from pyscheduler.api.labels import LabelSelector
from pyscheduler.api.times import rfc3339
from pyscheduler.settings import SchedulerConfig
from pyscheduler.binding import fragment as fragment_stages
from pyscheduler.binding.default_binder import DefaultBinder
from pyscheduler.binding.outcome import BOUND_ELSEWHERE, POD_GONE, ends_the_pod
from pyscheduler.binding.virtual_node_label import VirtualNodeLabel
from pyscheduler.framework import events
from pyscheduler.framework.events import ClusterListener
from pyscheduler.framework.cache import Cache
from pyscheduler.framework.runtime import SAMPLE_PLUGINS, Framework
from pyscheduler.framework.status import SUCCESS, Code, Status
from pyscheduler.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleContext,
)
from pyscheduler.framework.lifecycle import Lifecycle, UnreserveCause, WaitingRoom
from pyscheduler.framework.nodetable import BoolArray, NodeInfo, node_info
from pyscheduler.framework.pipeline import (
    Filtered,
    Pipeline,
    ScheduleResult,
    Selection,
    StageFailed,
    StageOverride,
    StageUnavailable,
    explain,
)
from pyscheduler.framework.pod import PodInfo, PodSpecError, pod_info
from pyscheduler.framework.queue import QueuedPod, SchedulingQueue
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.events import EventRecorder
from pyscheduler.kube.informer import Informer, drop_managed_fields, slim_pod
from pyscheduler.metrics import AttemptResult, SchedulerMetrics
from pyscheduler.plugins.registry import build_profiles
from pyscheduler.postfilter.bursting import CloudBurst
from pyscheduler.postfilter.preemption import Preemption
from pyscheduler.spread_defaults import SpreadDefaults
from pyscheduler.volume_binder import VolumeBinder

__all__ = ["PlacementObserver", "Scheduler"]

log = structlog.get_logger("pyscheduler.scheduler")

BIND_RETRIES = 3
# The PodScheduled=False reason for an attempt that failed on a fault, not for lack of a node
# (kube-scheduler writes its SchedulerError reason the same way).
SCHEDULER_ERROR = "SchedulerError"

Obj = dict[str, Any]
# Chooses the stage overrides for a pod; raises StageUnavailable when the pod must wait.
SelectFn = Callable[[PodInfo], Selection]
NO_SELECTION = Selection(None)


class PlacementObserver(Protocol):
    """What the scheduler tells the rebalancer (which implements this; the scheduler knows it
    by this interface only)."""

    def pod_seen(self, obj: Obj) -> None:
        """A pod on a virtual node, as the cluster shows it now."""

    def pod_gone(self, uid: str) -> None:
        """A pod was deleted."""

    def capacity_freed(self) -> None:
        """Real capacity may have freed up (a pod deleted, a node added or grown)."""

    def steer(self, pod: PodInfo) -> str | None:
        """Just before ``pod`` is scheduled: the node reserved for it (the replacement of a pod
        the rebalancer evicted), its reservation released; None for any other pod."""


_NO_NOMINEES = contextlib.nullcontext()


def _scheduled_condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def steered(result: ScheduleResult, slots: Mapping[str, int], node: str) -> ScheduleResult:
    """``result`` pointing at ``node`` instead, when ``node`` passed the filters (else as is)."""
    slot = slots.get(node)
    feasible = result.filtered.feasible
    if slot is None or slot >= len(feasible) or not feasible[slot]:
        return result
    return dataclasses.replace(result, node=node, slot=slot)


@dataclass(eq=False, slots=True)
class SchedulingProfile:
    """One profile (a KubeSchedulerConfiguration profile): its Filter and Score pipeline, its
    framework at the other points (the binding plugins shared by every profile), its default
    spread constraints and its burst pass."""

    name: str
    config: SchedulerConfig
    pipeline: Pipeline
    framework: Framework
    spread_defaults: SpreadDefaults
    bursting: CloudBurst | None


class Scheduler:
    """The scheduling loop and what it owns (queue, cache, pipelines, bindings); it implements
    :class:`pyscheduler.virtual.types.Placement` for the virtual package."""

    #: Hears about pods on virtual nodes and freed capacity (the rebalancer), when there is one.
    observer: PlacementObserver | None

    def __init__(self, client: KubeClient, config: SchedulerConfig, *,
                 metrics: SchedulerMetrics | None = None,
                 select: SelectFn | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.config = config
        self.name = config.scheduler_name
        self.metrics = metrics
        self.clock = clock
        self.select = select
        self.bursts = 0
        self.observer: PlacementObserver | None = None
        self.cache = Cache(assumed_ttl=config.assumed_pod_ttl_seconds, clock=clock)
        self.queue = SchedulingQueue(
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            max_in_unschedulable=config.pod_max_in_unschedulable_pods_seconds,
            clock=clock, on_event=self._queue_event)
        #: Every profile's scheduler name: the pods this scheduler serves.
        self.names = config.scheduler_names
        self.recorder = EventRecorder(client, reporting_controller=self.name,
                                      reporting_instance=config.leader_election.identity)
        # Pods held at a fragment's permit; a release may leave room for pods that wait.
        self.permits = WaitingRoom(
            on_release=lambda outcome: self.queue.move_all_to_active("PermitReleased"))
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.bad_pods: dict[str, str] = {}  # uid -> parse problem already reported
        self._binds: set[asyncio.Task[None]] = set()
        self._attempts: set[asyncio.Task[None]] = set()  # attempts awaiting a fragment
        self._housekeeping_task: asyncio.Task[None] | None = None
        self._pods = Informer(client, api_path("v1", "pods"), name="pods",
                              on_add=self._pod_added, transform=lambda obj: slim_pod(
                                  obj, keep_whole_on=_virtual_node),
                              on_update=self._pod_updated, on_delete=self._pod_deleted)
        self._nodes = Informer(client, api_path("v1", "nodes"), name="nodes",
                               transform=drop_managed_fields, on_add=self._node_set,
                               on_update=lambda old, new: self._node_set(new, old),
                               on_delete=self._node_deleted)
        self._namespaces = Informer(client, api_path("v1", "namespaces"), name="namespaces",
                                    on_add=self._namespace_set,
                                    on_update=lambda old, new: self._namespace_set(new),
                                    on_delete=self._namespace_deleted)
        # kube's DefaultPreemption post-filter, and the nominations it leaves, shared by the
        # profiles that preempt (None: none does).
        self.preemption = Preemption(client, config, self.recorder, self.cache.table,
                                     metrics=metrics, waiting=self.permits) \
            if any(p.preemption.enabled for p in config.profiles) else None
        self.informers: tuple[Informer, ...] = (self._nodes, self._namespaces, self._pods)
        if self.preemption is not None:
            self.informers += (self.preemption.informer,)
        # Claims, volumes, classes and CSI nodes for the volume plugins; claims bound first.
        self.volume_binder = VolumeBinder(
            client, self.cache.table,
            on_change=self.queue.cluster_event)
        self.informers += self.volume_binder.informers
        # The points after Score (Filter and Score run in the pipelines); the binding plugins
        # are the same for every profile.
        self.fragment = fragment_stages.Fragment(client)
        binding = {
            "reserve_plugins": (self.volume_binder, self.fragment),
            "permit": (self.fragment,),
            "pre_bind": (self.fragment, VirtualNodeLabel(client), self.volume_binder),
            "bind": (DefaultBinder(client, concurrency=config.bind_concurrency,
                                   timeout_seconds=config.bind_timeout_seconds,
                                   metrics=metrics),),
            "post_bind": (self.fragment, self.volume_binder),
        }
        # kube's default topology spread constraints, for pods that declare none: one per set
        # of PodTopologySpreadArgs (most often one for every profile).
        spreads: dict[object, SpreadDefaults] = {}
        #: The profiles by scheduler name (one unless a KubeSchedulerConfiguration has more).
        self.profiles: dict[str, SchedulingProfile] = {
            p.scheduler_name: self._build_profile(p, binding, spreads) for p in config.profiles}
        for spread in spreads.values():
            self.informers += spread.informers
        self._first = self.profiles[config.scheduler_name]
        # A parked pod goes back for the events the plugins that rejected it registered.
        self.queue.registrations = self._registrations()
        #: The plugins (and the waiting room) that keep state per pod or node.
        self._listeners: tuple[ClusterListener, ...] = _listeners(
            self.permits, self.preemption, self.volume_binder, self.fragment,
            *(plugin for profile in self.profiles.values()
              for plugin in (*profile.framework.post_filter, *profile.pipeline.profile.filters)))
        self.scheduled = 0
        self.failed = 0
        self._exported: dict[tuple[str, str], int] = {}

    def _build_profile(self, settings: SchedulerConfig, binding: Mapping[str, Any],
                       spreads: dict[object, SpreadDefaults]) -> SchedulingProfile:
        name = settings.scheduler_name
        profile, burst_profile = build_profiles(settings)
        # The burst pass: the same filters over the pools' virtual nodes (None: no pools, or
        # the profile does not burst).
        bursting = CloudBurst(burst_profile, seed=settings.seed) \
            if burst_profile is not None and settings.plugins.cloud_burst else None
        preemption: Any = None
        if settings.preemption.enabled and self.preemption is not None:
            preemption = self.preemption if name == self.config.scheduler_name \
                else self.preemption.for_profile(settings)
        # After the pod's fragment (whose answer bounds the others): preemption and bursting,
        # in the configured order.
        post_filter = tuple(p for p in (preemption, bursting) if p is not None)
        if settings.preemption.order == "BurstThenPreempt":
            post_filter = post_filter[::-1]
        metrics = self.metrics
        framework = Framework(
            name, post_filter=(self.fragment, *post_filter), **binding,
            observe=functools.partial(_observe_point, metrics, name)
            if metrics is not None else None,
            observe_plugin=metrics.observe_plugin if metrics is not None else None,
            on_fault=_plugin_fault)
        spread_key = (settings.pod_topology_spread, "PodTopologySpread" in settings.plugins.filter
                      or "PodTopologySpread" in settings.plugins.score_weights)
        spread = spreads.get(spread_key)
        if spread is None:
            spread = spreads[spread_key] = SpreadDefaults.for_scheduler(self.client, settings)
        return SchedulingProfile(name, settings, Pipeline(profile, seed=settings.seed),
                                 framework, spread, bursting)

    def _registrations(self) -> dict[str, tuple[ClusterEventWithHint, ...]]:
        """Every profile's rejecting plugins and the events each registered (a plugin that
        registers nothing is left out: every event but an assigned pod's moves its pods)."""
        found: dict[str, tuple[ClusterEventWithHint, ...]] = {}
        for profile in self.profiles.values():
            plugins: list[Any] = list(profile.pipeline.profile.filters)
            if profile.bursting is not None:
                plugins.append(profile.bursting)
            for plugin in plugins:
                register = getattr(plugin, "events_to_register", None)
                if register is not None:
                    found[plugin.name] = tuple(register())
        return found

    def _profile_of(self, pod: PodInfo) -> SchedulingProfile:
        """The profile that schedules ``pod`` (by its ``schedulerName``)."""
        return self.profiles.get(pod.scheduler_name) or self._first

    # The first profile's parts (the only profile's, most often).

    @property
    def pipeline(self) -> Pipeline:
        return self._first.pipeline

    @pipeline.setter
    def pipeline(self, pipeline: Pipeline) -> None:
        self._first.pipeline = pipeline

    @property
    def framework(self) -> Framework:
        return self._first.framework

    @framework.setter
    def framework(self, framework: Framework) -> None:
        self._first.framework = framework

    @property
    def spread_defaults(self) -> SpreadDefaults:
        return self._first.spread_defaults

    @property
    def bursting(self) -> CloudBurst | None:
        return self._first.bursting

    # -- informer handlers ---------------------------------------------------------------------

    @property
    def pods_informer(self) -> Informer:
        """The informer of every pod in the cluster, for others in the process to share."""
        return self._pods

    def _queue_event(self, queue: str, event: str) -> None:
        if self.metrics is not None:
            self.metrics.count_incoming(queue, event)

    def _is_ours(self, obj: Obj) -> bool:
        spec = obj.get("spec")
        return isinstance(spec, dict) and spec.get("schedulerName") in self.names

    def _pod_added(self, obj: Obj, event: bool = True) -> None:
        try:
            self._apply_pod(obj, event)
        except Exception as exc:
            # The informer would log and go on; a pod of ours must not vanish with it.
            log.exception("handling a pod event failed", pod=_key(obj))
            spec = obj.get("spec")
            if self._is_ours(obj) and not (isinstance(spec, dict) and spec.get("nodeName")):
                self._report_bad_pod(obj, f"{type(exc).__name__}: {exc}")

    def _is_virtual(self, node: str) -> bool:
        """Whether ``node`` is a cloud pool's virtual node (a virtual row of the table)."""
        table = self.cache.table
        slot = table.slots.get(node)
        return slot is not None and bool(table.virtual[slot])

    def _apply_pod(self, obj: Obj, event: bool = True) -> None:
        spec = obj.get("spec") or {}
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        phase = (obj.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if node or meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
            for listener in self._listeners:
                listener.pod_settled(uid)
        if node:
            # The label as well as the node: the pods informer may deliver a pod before the
            # nodes informer has delivered its virtual node (a new leader's first lists).
            if self.observer is not None and (self._is_virtual(node) or (
                    meta.get("labels") or {}).get(VIRTUAL_LABEL) == "true"):
                self.observer.pod_seen(obj)
            if phase not in ("Succeeded", "Failed") and self.cache.confirm(
                    uid, node, meta.get("labels") or {}):
                # Our own binding coming back: already counted, nothing to parse.
                self.queue.cluster_event(events.ASSIGNED_POD_ADD, None, obj, "AssignedPodAdd")
                return
            if self.queue.waiting(uid):
                self.queue.delete(uid)
            if phase in ("Succeeded", "Failed"):
                self.cache.remove_pod(uid)
                self.queue.cluster_event(events.ASSIGNED_POD_DELETE, obj, None,
                                         "AssignedPodDelete")
                return
            try:
                self.cache.add_pod(pod_info(obj))
            except PodSpecError as exc:
                # A pod already running somewhere still uses its node; count what we can.
                log.warning("assigned pod has an invalid spec", pod=_key(obj), error=str(exc))
                if exc.partial is not None:
                    self.cache.add_pod(exc.partial)
            if event:
                self.queue.cluster_event(events.ASSIGNED_POD_ADD, None, obj, "AssignedPodAdd")
            return
        if not self._is_ours(obj) or meta.get("deletionTimestamp") or phase in (
                "Succeeded", "Failed"):
            return
        try:
            pod = pod_info(obj)
        except PodSpecError as exc:
            self._report_bad_pod(obj, str(exc))
            return
        self.bad_pods.pop(uid, None)
        if self.cache.is_assumed(uid):
            return  # our binding is in flight; the bound version will follow
        for listener in self._listeners:
            listener.pod_pending(pod)
        self.queue.add(pod)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        spec = new.get("spec") or {}
        node = spec.get("nodeName")
        if node and old.get("spec") == spec and not _finished(new):
            uid = str((new.get("metadata") or {}).get("uid"))
            if self._is_virtual(node):
                if not self.cache.is_assumed(uid):
                    # Status or metadata of a pod already counted on its virtual node (the
                    # provider reporting its instance): nothing to count again, nothing to parse.
                    if self.observer is not None:
                        self.observer.pod_seen(new)
                    return
            elif self.cache.refresh(uid, node, new):
                # A status write of a pod counted on its node (the kubelet starting it): most
                # updates a cluster sends, and nothing the cache counts changed.
                return
        action = _assigned_pod_update(old, new) if node and (old.get("spec") or {}).get(
            "nodeName") == node else None
        if action is None:
            self._pod_added(new)
            return
        # An assigned pod changed (labels, resources, tolerations): counted anew, and the
        # pods that change may help told.
        self._pod_added(new, event=False)
        self.queue.cluster_event(ClusterEvent(events.POD, action), old, new, "AssignedPodUpdate")

    def _pod_deleted(self, obj: Obj) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if self.observer is not None:
            self.observer.pod_gone(uid)
        self.queue.delete(uid)
        self.bad_pods.pop(uid, None)
        for listener in self._listeners:
            listener.pod_gone(uid)
        if self.cache.remove_pod(uid) is not None:
            self.queue.cluster_event(events.ASSIGNED_POD_DELETE, obj, None, "AssignedPodDelete")
            if self.observer is not None:
                self.observer.capacity_freed()

    def _node_set(self, obj: Obj, old: Obj | None = None) -> None:
        info = node_info(obj)
        table = self.cache.table
        before = table.infos[table.slots[info.name]] if info.name in table.slots else None
        self.cache.set_node(info)
        if before is None:
            self.queue.cluster_event(events.NODE_ADD, None, info, "NodeAdd")
        else:
            action = events.node_update(before, info)
            if action is None:
                return  # a heartbeat: nothing scheduling reads changed
            self.queue.cluster_event(ClusterEvent(events.NODE, action), before, info,
                                     "NodeUpdate")
        if self.observer is not None and info.pool is None:
            self.observer.capacity_freed()

    def _node_deleted(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        for listener in self._listeners:
            listener.node_gone(name)
        slot = self.cache.table.slots.get(name)
        info = self.cache.table.infos[slot] if slot is not None else None
        self.cache.remove_node(name)
        if info is not None:
            self.queue.cluster_event(events.NODE_DELETE, info, None, "NodeDelete")

    def _namespace_set(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        self.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})

    def _namespace_deleted(self, obj: Obj) -> None:
        self.namespace_labels.pop(str((obj.get("metadata") or {}).get("name")), None)

    def _namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        return frozenset(ns for ns, labels in self.namespace_labels.items()
                         if selector.matches(labels))

    # -- running -------------------------------------------------------------------------------

    def start_informers(self) -> Awaitable[Any]:
        """Start the informers (their tasks are in :attr:`tasks` from now on); await the
        result for all of them to have synced."""
        for informer in self.informers:
            informer.start()
        return asyncio.gather(*(i.synced.wait() for i in self.informers))

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    @property
    def tasks(self) -> dict[str, asyncio.Task[Any]]:
        """The long-lived tasks running now (informers; housekeeping and the event recorder
        while scheduling), for the process to watch."""
        out = {f"informer {i.name}": i.task for i in self.informers if i.task is not None}
        if self._housekeeping_task is not None:
            out["housekeeping"] = self._housekeeping_task
        if self.recorder.task is not None:
            out["event recorder"] = self.recorder.task
        return out

    async def stop(self) -> None:
        self.queue.close()
        for task in list(self._binds) + list(self._attempts):
            task.cancel()
        for informer in self.informers:
            await informer.stop()
        if self.preemption is not None:
            await self.preemption.stop()
        await self.recorder.stop()

    def begin(self) -> None:
        """Start what scheduling needs beside the loop: the event recorder and housekeeping
        (idempotent; :meth:`run_loop` calls it)."""
        self.recorder.start()
        if self._housekeeping_task is None or self._housekeeping_task.done():
            self._housekeeping_task = asyncio.get_running_loop().create_task(
                self._housekeeping(), name="scheduler housekeeping")

    async def run_loop(self) -> None:
        """Schedule until cancelled (the caller cancels when leadership is lost)."""
        self.begin()
        housekeeping = self._housekeeping_task
        try:
            while True:
                entry = await self.queue.pop()
                self.schedule_one(entry)
                # Let informer events and bindings run between pods.
                await asyncio.sleep(0)
        finally:
            if housekeeping is not None:
                housekeeping.cancel()
            for task in list(self._binds) + list(self._attempts):
                task.cancel()

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                for pod in self.cache.expire():
                    log.warning("assumed pod expired without confirmation", pod=pod.key)
                if self.metrics is not None:
                    self.metrics.set_pending_pods(**self.queue.counts())
                    self.metrics.set_cache_size(**self.cache.sizes())
                    self.metrics.set_permit_waiting(len(self.permits))
                    self._export_counters()
            except Exception:  # a fault here must not end the housekeeping for good
                log.exception("scheduler housekeeping failed")

    def _export_counters(self) -> None:
        """Carry the informers' and the event recorder's plain counters into Prometheus."""
        assert self.metrics is not None
        current = {("relists", i.name): i.relists for i in self.informers}
        current.update({("reconnects", i.name): i.reconnects for i in self.informers})
        current[("events_dropped", "")] = self.recorder.dropped_queue_full + self.recorder.failed
        for key, value in current.items():
            delta = value - self._exported.get(key, 0)
            if delta <= 0:
                continue
            self._exported[key] = value
            what, resource = key
            if what == "relists":
                self.metrics.informer_relists.labels(resource=resource).inc(delta)
            elif what == "reconnects":
                self.metrics.informer_reconnects.labels(resource=resource).inc(delta)
            else:
                self.metrics.events_dropped.inc(delta)

    # -- one pod -------------------------------------------------------------------------------

    def schedule_one(self, entry: QueuedPod) -> None:
        """One attempt for ``entry``'s pod. Never raises: whatever goes wrong is that pod's
        problem (:meth:`_attempt_failed`), and the loop goes on with the next pod.

        A pod whose stage logic runs off the loop (a fragment) continues in a task of its own
        (:meth:`_schedule_offloaded`); the loop pops the next pod meanwhile."""
        start = time.perf_counter()
        try:
            pod = entry.pod
            # A replacement of a pod the rebalancer evicted: its reservation is freed for it,
            # and it goes to the reserved node when that node passes the filters.
            steer = self.observer.steer(pod) if self.observer is not None else None
            # The pod's logic sees the nominations that count for it, as the filters do.
            with self._nominees(pod):
                selection, ctx, active, ready = self._logic_now(pod)
                if not ready:
                    assert selection.active is not None
                    self._spawn_attempt(entry, self._schedule_offloaded(
                        entry, selection, selection.active, steer, start))
                    return
                self._decide(entry, ctx, selection, active, steer, start)
        except Exception as exc:
            self._attempt_failed(entry, exc, start)

    def _logic_now(self, pod: PodInfo) -> tuple[Selection, CycleContext,
                                                 StageOverride | None, bool]:
        """The pod's selection, a context, and its active logic ready for the pipeline — or,
        as the last value False, the news that the logic must be evaluated off the loop first
        (:meth:`_resolve`). Raises what selecting or evaluating the pod's logic raises."""
        selection = self.select(pod) if self.select is not None else NO_SELECTION
        active = selection.active
        # The attempt sees the pod with its default spread constraints (the queue's is kept).
        ctx = CycleContext.for_pod(self._profile_of(pod).spread_defaults.view(pod),
                                   self.cache.table, self._namespaces_matching)
        if active is None or active.evaluate is None:
            return selection, ctx, active, True
        resolved = self._resolve_now(ctx, active)
        return selection, ctx, resolved, resolved is not None

    def _resolve_now(self, ctx: CycleContext, override: StageOverride) -> StageOverride | None:
        """``override`` evaluated on the loop when it allows that (its calls are known to be
        short), else None."""
        if override.evaluate_now is None:
            return None
        pipeline = self._profile_of(ctx.pod).pipeline
        return override.evaluate_now(ctx, pipeline.score_base(ctx, override))

    async def _resolve(self, pod: PodInfo,
                       override: StageOverride) -> tuple[CycleContext, StageOverride]:
        """``override`` evaluated off the loop; returns it resolved, with a fresh context on
        the table as it is when the answers came (what the rest of the attempt must see)."""
        assert override.evaluate is not None
        table = self.cache.table
        profile = self._profile_of(pod)
        pod = profile.spread_defaults.view(pod)
        ctx = CycleContext.for_pod(pod, table, self._namespaces_matching)
        resolved = await override.evaluate(ctx, profile.pipeline.score_base(ctx, override))
        return CycleContext.for_pod(pod, table, self._namespaces_matching), resolved

    async def _schedule_offloaded(self, entry: QueuedPod, selection: Selection,
                                  active: StageOverride, steer: str | None,
                                  start: float) -> None:
        """The rest of an attempt whose stage override must be evaluated off the loop: the
        override's calls are awaited, then everything else runs at once on the current table,
        so the built-in filters and the host's checks see every pod assumed meanwhile."""
        try:
            pod = entry.pod
            ctx, resolved = await self._resolve(pod, active)
            if not self.queue.pending(pod.uid):
                self.queue.done(pod.uid)
                return  # deleted (or bound by someone else) while the fragment decided
            self._decide(entry, ctx, selection, resolved, steer, start)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._attempt_failed(entry, exc, start)

    def _decide(self, entry: QueuedPod, ctx: CycleContext, selection: Selection,
                active: StageOverride | None, steer: str | None, start: float) -> None:
        """Run the pipeline for ``entry``'s pod — over the real nodes, then, if none fits,
        preemption and the cloud pools' virtual nodes in the configured order — and act on
        the result: assume and bind, nominate and evict, or report the pod unschedulable.
        Pods nominated by an earlier preemption count where they were nominated meanwhile.
        Raises only for faults (the caller reports them)."""
        pod = entry.pod
        if self.preemption is None:
            self._decide_now(entry, ctx, selection, active, steer, start)
            return
        if steer is None:
            steer = self.preemption.nominated(pod.uid)  # kube tries the nominated node first
        with self._nominees(pod):
            self._decide_now(entry, ctx, selection, active, steer, start)

    def _nominees(self, pod: PodInfo) -> contextlib.AbstractContextManager[None]:
        """The table with the nominations that count for ``pod`` (only), within the block."""
        if self.preemption is None or not self.preemption.nominations:
            return _NO_NOMINEES  # nothing to count or take off: most attempts
        return self.preemption.counting_nominees(self.cache.table, pod)

    def _decide_now(self, entry: QueuedPod, ctx: CycleContext, selection: Selection,
                    active: StageOverride | None, steer: str | None, start: float) -> None:
        pod = entry.pod
        profile = self._profile_of(pod)
        wants_explain = pod.annotations.get(EXPLAIN_ANNOTATION) == "true"
        sample = self.metrics is not None and self.metrics.should_record_plugin_metrics()
        # Why no node fits is worked out only when a PostFilter plugin or the message needs it.
        result = profile.pipeline.schedule(ctx, active, explain=wants_explain, sample=sample,
                                           diagnose=False)
        if steer is not None and result.node is not None and result.node != steer:
            result = steered(result, self.cache.table.slots, steer)
        for shadow in selection.shadows:
            self._evaluate_shadow(pod, shadow, active, result)
        if self.metrics is not None:
            self._observe_stages(result, profile.name)
        decision = explain(result, self.cache.table.names) if wants_explain else None
        if decision is not None and active is not None and active.name.startswith("fragment:"):
            decision["fragment"] = {"name": active.name.removeprefix("fragment:"),
                                    "answered": dict(active.answered)}
        lifecycle = active.lifecycle if active is not None else None
        node = result.node
        if node is None:
            ctx.state[SAMPLE_PLUGINS] = sample
            fragment_stages.attach(ctx, lifecycle, _fragment_answers(decision, lifecycle.name)
                                   if decision is not None and lifecycle is not None else None)
            filtered = Filtered(profile.pipeline, ctx, result, active, selection.active,
                                wants_explain, sample)
            run = profile.framework.run_post_filter(ctx, filtered)
            if run.deferred is not None:
                # The pod's fragment answers off the loop: the attempt is made again with it.
                self._spawn_attempt(entry, self._post_filter_offloaded(entry, run.deferred[1]))
                return
            error = run.status.as_error() if run.status.failed else None
            if error is not None:
                raise error
            post = run.postfilter
            if decision is not None and post is not None and post.explanation is not None:
                decision = {**post.explanation, "realNodes": decision}
            if run.status.success and post is not None:
                node = post.node
            if node is None:
                # kube's FitError text: the filters' diagnosis, then the PostFilter reasons.
                diagnosis = filtered.result.filtered.diagnose()
                message = diagnosis.message()
                if run.reasons:
                    message = f"{message} {', '.join(run.reasons)}"
                self.failed += 1
                self._observe("unschedulable", start, pod)
                # Back for what may help: the filters that said no, the burst pass and the
                # pod's own post-filter logic if they ran.
                self.queue.requeue_unschedulable(pod.uid, diagnosis.plugins | (
                    run.tried & {CloudBurst.name, fragment_stages.Fragment.name}))
                self._spawn(self._set_unschedulable(pod, message, "Unschedulable", decision))
                return
        for listener in self._listeners:
            listener.pod_settled(pod.uid)  # assumed: pending no longer
        self._reserve(entry, node, decision, lifecycle, start, sample)

    async def _post_filter_offloaded(self, entry: QueuedPod, answer: Awaitable[Any]) -> None:
        """Await a PostFilter answer worked out off the loop (the plugin keeps it), then make
        the attempt again, on the table as it is now."""
        start = time.perf_counter()
        try:
            await answer
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._attempt_failed(entry, exc, start)
            return
        if not self.queue.pending(entry.pod.uid):
            self.queue.done(entry.pod.uid)
            self.fragment.forget(entry.pod.uid)
            return
        self.schedule_one(entry)

    # -- what the virtual package asks (pyscheduler.virtual.types.Placement) --------------------

    def reserve(self, pod: PodInfo, node: str) -> bool:
        """Hold ``pod``'s requests on ``node`` in the cache (an assumed placeholder)."""
        if node not in self.cache.table.slots:
            return False
        self.cache.assume(pod, node)
        return True

    def release(self, uid: str) -> None:
        self.cache.forget(uid)

    def most_room(self) -> tuple[int, int]:
        """The most free cpu and the most free memory on any one real node (not necessarily
        the same node)."""
        table = self.cache.table
        n = table.n
        real = table.valid[:n] & ~table.virtual[:n]
        if not real.any():
            return 0, 0
        cols = [table.resource_index["cpu"], table.resource_index["memory"]]
        free = table.allocatable[:n, cols] - table.requested[:n, cols]
        most = free[real].max(axis=0)
        return int(most[0]), int(most[1])

    def pool_refused(self, node: str, cpu_millis: int, memory_bytes: int,
                     until: float) -> None:
        self.cache.table.refuse(node, cpu_millis, memory_bytes, until)

    def pool_price(self, pool: str) -> float:
        table = self.cache.table
        slot = table.slots.get(virtual_node_name(pool))
        return float(table.price[slot]) if slot is not None else 0.0

    async def try_placement(self, pod: PodInfo) -> str | None:
        """The node this scheduler would choose for ``pod`` now (its fragment included), or
        None; nothing is assumed. Raises what selecting or evaluating the pod's logic raises."""
        selection, ctx, active, ready = self._logic_now(pod)
        if not ready:
            assert selection.active is not None
            ctx, active = await self._resolve(pod, selection.active)
        with self._nominees(pod):
            return self._profile_of(pod).pipeline.schedule(ctx, active).node

    def _attempt_failed(self, entry: QueuedPod, exc: Exception, start: float) -> None:
        """An attempt that ended in an exception: the pod's problem, never the loop's."""
        pod = entry.pod
        self.failed += 1
        if isinstance(exc, StageUnavailable):
            # The pod's fragment is missing, loading or failed: it waits, visibly, and comes
            # back when a fragment becomes Ready (fragment_ready).
            self._observe("unschedulable", start, pod)
            self.queue.requeue_unschedulable(pod.uid)
            self._spawn(self._set_unschedulable(pod, str(exc), "Unschedulable"))
        elif isinstance(exc, StageFailed):  # a fragment failed and its failure policy is Fail
            self._observe("unschedulable", start, pod)
            self.queue.requeue_backoff(pod.uid)
            self._spawn(self._set_unschedulable(pod, str(exc), "Unschedulable"))
        else:  # a fault: a plugin's, the cache's or ours
            log.exception("scheduling attempt failed", pod=pod.key)
            self._observe("error", start, pod)
            self.queue.requeue_backoff(pod.uid)
            self._spawn(self._set_unschedulable(
                pod, f"scheduling failed: {type(exc).__name__}: {exc}", SCHEDULER_ERROR))

    def _spawn_attempt(self, entry: QueuedPod, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._attempts.add(task)
        task.add_done_callback(self._attempts.discard)

    def _evaluate_shadow(self, pod: PodInfo, shadow: StageOverride,
                         active: StageOverride | None, result: ScheduleResult) -> None:
        """Evaluate ``shadow`` for ``pod`` and count where it would have decided otherwise than
        the active logic: a different feasible set, or a chosen node the shadow does not rank
        best. A shadow that runs off the loop answers later; both decisions are then taken
        again on the table of that moment, so that they compare like with like."""
        profile = self._profile_of(pod)
        ctx = CycleContext.for_pod(profile.spread_defaults.view(pod), self.cache.table,
                                   self._namespaces_matching)
        if shadow.evaluate is not None:
            try:
                resolved = self._resolve_now(ctx, shadow)
            except Exception:
                resolved = None  # the shadow's problem: evaluated off the loop, reported there
            if resolved is None:
                self._spawn(self._evaluate_shadow_offloaded(pod, shadow, active))
                return
            shadow = resolved
        try:
            other: ScheduleResult | None = profile.pipeline.schedule(ctx, shadow)
        except Exception as exc:  # a shadow never affects scheduling
            other = None
            log.warning("shadow evaluation failed", pod=pod.key, fragment=shadow.name,
                        error=str(exc))
        self._count_shadow(pod, shadow, result, other)

    async def _evaluate_shadow_offloaded(self, pod: PodInfo, shadow: StageOverride,
                                         active: StageOverride | None) -> None:
        assert shadow.evaluate is not None
        other: ScheduleResult | None = None
        result: ScheduleResult | None = None
        try:
            ctx, resolved = await self._resolve(pod, shadow)
            table = self.cache.table
            profile = self._profile_of(pod)
            result = profile.pipeline.schedule(
                CycleContext.for_pod(profile.spread_defaults.view(pod), table,
                                     self._namespaces_matching), active)
            other = profile.pipeline.schedule(ctx, resolved)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a shadow never affects scheduling
            log.warning("shadow evaluation failed", pod=pod.key, fragment=shadow.name,
                        error=str(exc))
        self._count_shadow(pod, shadow, result, other)

    def _count_shadow(self, pod: PodInfo, shadow: StageOverride,
                      active: ScheduleResult | None, other: ScheduleResult | None) -> None:
        if other is None or active is None:
            kinds = ["error"]
        else:
            kinds = []
            if not np.array_equal(other.filtered.feasible, active.filtered.feasible):
                kinds.append("feasible")
            if active.node is None or other.node is None:
                if active.node != other.node:
                    kinds.append("node")
            elif other.node != active.node and (
                    other.total is None or other.total[active.slot] != other.total[other.slot]):
                kinds.append("node")
        if self.metrics is not None:
            self.metrics.fragment_shadow_evaluations.labels(shadow.name).inc()
            for kind in kinds:
                self.metrics.fragment_shadow_disagreements.labels(shadow.name, kind).inc()
        if kinds and other is not None and active is not None:
            log.info("shadow disagreement", pod=pod.key, fragment=shadow.name, kinds=kinds,
                     active_node=active.node, shadow_node=other.node,
                     active_feasible=int(active.filtered.feasible.sum()),
                     shadow_feasible=int(other.filtered.feasible.sum()))

    def fragment_ready(self, resource: str) -> None:
        """A fragment became Ready: pods waiting for one are worth another attempt."""
        self.queue.move_all_to_active("FragmentReady")

    def _observe_stages(self, result: ScheduleResult, profile: str) -> None:
        assert self.metrics is not None
        self.metrics.scheduling_algorithm_duration.observe(
            result.filter_seconds + result.score_seconds)
        status = "Success" if result.node is not None else "Unschedulable"
        self.metrics.observe_extension_point("Filter", status, result.filter_seconds, profile)
        if result.score_seconds:
            self.metrics.observe_extension_point("Score", "Success", result.score_seconds,
                                                 profile)
        for (point, plugin), seconds in (result.plugin_seconds or {}).items():
            self.metrics.observe_plugin(plugin, point, "Success", seconds)

    def _observe(self, result: AttemptResult, start: float, pod: PodInfo | None = None) -> None:
        """Count an attempt, under the profile of ``pod`` (the first profile without one)."""
        if self.metrics is not None:
            self.metrics.observe_attempt(result, time.perf_counter() - start,
                                         self._profile_of(pod).name if pod else None)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    # -- Reserve, then the binding cycle (kube's schedulingCycle tail and bindingCycle) --------

    def _reserve(self, entry: QueuedPod, node: str, decision: Obj | None,
                 lifecycle: Lifecycle | None, start: float, sample: bool = False) -> None:
        """Assume the pod on ``node`` and run Reserve: its plugins that answer at once run
        here, on the loop; the binding cycle (awaiting the rest first) runs in a task.
        ``sample``: the attempt records every plugin's time."""
        pod = entry.pod
        self.cache.assume(pod, node)
        ctx = self._context(pod)
        ctx.state[SAMPLE_PLUGINS] = sample
        fragment_stages.attach(ctx, lifecycle, _fragment_answers(decision, lifecycle.name)
                               if decision is not None and lifecycle is not None else None)
        reserved = self._profile_of(pod).framework.run_reserve(ctx, node)
        if isinstance(reserved, Status) and not reserved.success:
            self.failed += 1
            self._observe("unschedulable", start, pod)
            self._spawn(self._undo(ctx, node, reserved, UnreserveCause.REFUSED, "Reserve",
                                   decision))
            return
        self._observe("scheduled", start, pod)
        self._spawn(self._binding_cycle(entry, ctx, node, reserved, decision))

    async def _binding_cycle(self, entry: QueuedPod, ctx: CycleContext, node: str,
                             reserved: Status | Awaitable[Status], decision: Obj | None) -> None:
        """The rest of Reserve, Permit (waiting when told to), PreBind, Bind, PostBind; every
        failure after Reserve has one undo (:meth:`_undo`)."""
        status = reserved if isinstance(reserved, Status) else await reserved
        if not status.success:
            await self._undo(ctx, node, status, UnreserveCause.REFUSED, "Reserve", decision)
            return
        status, cause = await self._permit(ctx, node)
        if not status.success:
            await self._undo(ctx, node, status, cause, "Permit", decision)
            return
        framework = self._profile_of(ctx.pod).framework
        status = await framework.run_pre_bind(ctx, node)
        if not status.success:
            await self._undo(ctx, node, status, _cause(status, UnreserveCause.REFUSED),
                             "PreBind", decision)
            return
        status = await framework.run_bind(ctx, node)
        if not status.success:
            await self._undo(ctx, node, status, _cause(status, UnreserveCause.BIND_FAILED),
                             "Bind", decision)
            return
        self._bound(entry, node)
        if decision is not None:
            await self._annotate_decision(ctx.pod, decision)
        await framework.run_post_bind(ctx, node)

    async def _permit(self, ctx: CycleContext, node: str) -> tuple[Status, UnreserveCause]:
        """Permit, and the wait it may ask for (kube's WaitOnPermit): Success, or why not and
        the unreserve cause that goes with it."""
        status, timeout = await self._profile_of(ctx.pod).framework.run_permit(ctx, node)
        if not status.waiting:
            return status, UnreserveCause.DENIED
        pod = ctx.pod
        holder = str(ctx.state.get(fragment_stages.PERMIT_HOLDER, status.plugin))
        held = self.permits.enter(pod, node, holder, timeout)
        self.recorder.record(pod.raw, type_="Normal", reason="WaitingOnPermit",
                             action="Scheduling", note=status.message)
        began = time.perf_counter()
        how, message = await self.permits.wait(held)
        if self.metrics is not None:
            self.metrics.permit_wait_duration.labels(
                "Success" if how == "allow" else "Unschedulable").observe(
                time.perf_counter() - began)
        self.fragment.permit_ended(ctx, how, message)
        if how == "allow":
            return SUCCESS, UnreserveCause.DENIED
        if how == "gone":
            return POD_GONE, UnreserveCause.GONE
        return Status(Code.UNSCHEDULABLE, (message,), status.plugin), \
            UnreserveCause.TIMEOUT if how == "timeout" else UnreserveCause.DENIED

    async def _undo(self, ctx: CycleContext, node: str, status: Status, cause: UnreserveCause,
                    point: str, decision: Obj | None) -> None:
        """The one undo for a failure after Reserve: every Reserve plugin's unreserve (in
        reverse order), the assumed pod forgotten, and the pod back to the queue with why —
        unless it is gone or bound by someone else."""
        pod = ctx.pod
        ctx.state[fragment_stages.UNRESERVE_CAUSE] = cause
        await self._profile_of(pod).framework.unreserve(ctx, node)
        self.cache.forget(pod.uid)
        ended = ends_the_pod(status)
        if ended is POD_GONE:
            self.queue.delete(pod.uid)
            return
        if ended is BOUND_ELSEWHERE:
            self.queue.done(pod.uid)
            return
        if status.failed and status.error is None:
            # A write that did not go through (its plugin logged why): try again shortly.
            self.queue.requeue_backoff(pod.uid, "BindFailure")
            return
        message = status.message
        if status.error is not None:
            error = status.error
            log.error("plugin failed", pod=pod.key, node=node, plugin=status.plugin,
                      extension_point=point, exc_info=error)
            message = f"scheduling failed: {type(error).__name__}: {error}"
        self.queue.requeue_backoff(pod.uid, "PermitRejected" if point == "Permit"
                                   else "ScheduleAttemptFailure")
        await self._set_unschedulable(pod, message, "Unschedulable", decision)

    def _context(self, pod: PodInfo) -> CycleContext:
        return CycleContext.for_pod(pod, self.cache.table, self._namespaces_matching)

    def _bound(self, entry: QueuedPod, node: str) -> None:
        """A pod bound (to a real or a virtual node): count it, leave the queue, tell."""
        pod = entry.pod
        self.cache.finish_binding(pod.uid)
        for listener in self._listeners:
            listener.pod_settled(pod.uid)
        self.scheduled += 1
        self.queue.done(pod.uid)
        note = f"Successfully assigned {pod.key} to {node}"
        table = self.cache.table
        slot = table.slots.get(node)
        info = table.infos[slot] if slot is not None else None
        pool = info.pool if info is not None else None
        if pool is not None:
            note += f" (no real node fits: burst to cloud pool {pool})"
            self.bursts += 1
            if self.metrics is not None:
                self.metrics.bursts.labels(pool).inc()
        if self.metrics is not None:
            self.metrics.observe_pod_scheduled(
                attempts=entry.attempts, sli_seconds=self.clock() - entry.initial_attempt)
        self.recorder.record(pod.raw, type_="Normal", reason="Scheduled", action="Binding",
                             note=note)

    async def _set_unschedulable(self, pod: PodInfo, message: str, reason: str,
                                 decision: Obj | None = None) -> None:
        self.recorder.record(pod.raw, type_="Warning", reason="FailedScheduling",
                             action="Scheduling", note=message)
        current = _scheduled_condition(pod.raw)
        if current is None or current.get("status") != "False" or \
                current.get("message") != message or current.get("reason") != reason:
            condition = {"type": "PodScheduled", "status": "False", "reason": reason,
                         "message": message, "lastProbeTime": None,
                         "lastTransitionTime": rfc3339()}
            try:
                await self.client.patch_pod_status(pod.namespace, pod.name,
                                                   {"status": {"conditions": [condition]}})
            except Exception as exc:
                log.info("could not record the unschedulable condition", pod=pod.key,
                         error=str(exc))
        if decision is not None:
            await self._annotate_decision(pod, decision)

    async def _annotate_decision(self, pod: PodInfo, decision: Obj) -> None:
        try:
            await self.client.patch(
                _pod_path(pod),
                {"metadata": {"annotations": {DECISION_ANNOTATION: orjson.dumps(
                    decision).decode()}}}, "merge")
        except Exception as exc:
            log.info("could not record the decision", pod=pod.key, error=str(exc))

    def _report_bad_pod(self, obj: Obj, problem: str) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if self.bad_pods.get(uid) == problem:
            return
        self.bad_pods[uid] = problem
        message = f"pod cannot be scheduled as written: {problem}"
        log.warning("unschedulable pod spec", pod=_key(obj), problem=problem)
        placeholder = PodInfo(uid=uid, namespace=str(meta.get("namespace") or ""),
                              name=str(meta.get("name") or ""), labels={},
                              scheduler_name=self.name, node_name="", priority=0,
                              creation="", phase="Pending", deleting=False, gated=False,
                              requests={}, nonzero_cpu=0, nonzero_memory=0, raw=obj)
        self._spawn(self._set_unschedulable(placeholder, message, "Unschedulable"))


def _listeners(*candidates: object) -> tuple[ClusterListener, ...]:
    """Each listener among ``candidates`` once, in order."""
    found: dict[int, ClusterListener] = {}
    for candidate in candidates:
        if isinstance(candidate, ClusterListener):
            found.setdefault(id(candidate), candidate)
    return tuple(found.values())


def _assigned_pod_update(old: Obj, new: Obj) -> ActionType | None:
    """What changed on an assigned pod that may help pods waiting (kube's
    ``AssignedPodUpdate`` actions), from the objects; None: nothing such."""
    action = ActionType(0)
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        action |= ActionType.UPDATE_POD_LABEL
    before, after = old.get("spec") or {}, new.get("spec") or {}
    if before.get("containers") != after.get("containers"):
        action |= ActionType.UPDATE_POD_SCALE_DOWN  # resized in place: it may have shrunk
    if before.get("tolerations") != after.get("tolerations"):
        action |= ActionType.UPDATE_POD_TOLERATION
    return action or None


def _cause(status: Status, rejected: UnreserveCause) -> UnreserveCause:
    """The unreserve cause of a failed PreBind or Bind: the pod gone, a write that did not go
    through (a bind failure), or ``rejected``."""
    if ends_the_pod(status) is POD_GONE:
        return UnreserveCause.GONE
    if status.failed and status.error is None:
        return UnreserveCause.BIND_FAILED
    return rejected


def _observe_point(metrics: SchedulerMetrics, profile: str, point: str, status: str,
                   seconds: float) -> None:
    metrics.observe_extension_point(point, status, seconds, profile)


def _plugin_fault(point: str, plugin: str, pod: str, exc: BaseException) -> None:
    """A plugin that raised where it cannot fail the pod (Unreserve, PostBind): logged."""
    log.warning("plugin failed", extension_point=point, plugin=plugin, pod=pod,
                error=str(exc))


def _fragment_answers(decision: Obj, fragment: str) -> dict[str, str]:
    """The explanation's record of what the pod's fragment answered, stage by stage."""
    record = decision.setdefault("fragment", {"name": fragment, "answered": {}})
    answered: dict[str, str] = record["answered"]
    return answered


def _virtual_node(node: str) -> bool:
    """Whether ``node`` names a cloud pool's virtual node (whose pods' status the virtual-node
    provider reads in full from the shared pods informer)."""
    return node.startswith(VIRTUAL_NODE_PREFIX)


def _finished(obj: Obj) -> bool:
    """Whether the pod is terminal or being deleted."""
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed") or bool(
        (obj.get("metadata") or {}).get("deletionTimestamp"))


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _pod_path(pod: PodInfo) -> str:
    return api_path("v1", "pods", namespace=pod.namespace, name=pod.name)
