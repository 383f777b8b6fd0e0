"""Prometheus metrics and the ``/metrics`` ``/healthz`` ``/livez`` ``/readyz`` server.

Design
------
* **kube-scheduler's names.** Every metric that has a kube-scheduler counterpart reuses its name,
  label names, buckets and help text exactly (``pkg/scheduler/metrics/metrics.go``, subsystem
  ``scheduler``), so dashboards, recording rules and alerts written for kube-scheduler work
  unchanged. Buckets are computed the way client_golang's ``ExponentialBuckets`` computes them
  (repeated multiplication), so even the float rounding of the ``le`` labels matches. Metrics that
  only this scheduler has are prefixed ``pyscheduler_``.
* **One registry per instance.** :class:`SchedulerMetrics` owns a private ``CollectorRegistry``:
  nothing goes to prometheus_client's global registry, so tests (and an embedded simulation
  running several schedulers) can build as many instances as they like. The registry also holds
  the process collectors (``process_cpu_seconds_total``, ``process_resident_memory_bytes``...) that
  the kubernetes-mixin scheduler dashboard reads.
* **Series exist from the start.** Label sets with a known, small domain (attempt results, queue
  names, cache entry kinds, rebalance outcomes, pods bound at the first attempt) are created at
  zero when the instance is built, those of an informer, a cloud pool or a fragment when it is
  configured or loaded (``init_informers``, ``init_pools``, ``init_fragment``), so ``rate()``,
  ``increase()`` and absence alerts behave from the first scrape: a counter whose series is
  born at 1 shows no increase, and an alert on "any trap in the last 10 minutes" would miss the
  first trap.
* **No ``*_created`` series.** prometheus_client adds a ``<name>_created`` sample to counters and
  histograms; kube-scheduler exposes none, and they would double the series count of every
  counter. The exposition filters them out without touching prometheus_client's global switch.
* **Plugin timings are sampled.** Like kube-scheduler, ``plugin_execution_duration_seconds`` is
  recorded for about :data:`PLUGIN_METRICS_SAMPLE_PERCENT` % of scheduling cycles; the loop asks
  :meth:`SchedulerMetrics.should_record_plugin_metrics` once per cycle. Counts in that histogram
  are therefore a sample, not totals.

:class:`HealthServer` serves the registry and the health endpoints on one aiohttp server, with
kube's health-check conventions: ``/readyz`` answers ``ok`` when every registered check passes and
otherwise lists each check as ``[+]name ok`` / ``[-]name failed: reason withheld`` followed by
``readyz check failed`` (``?verbose`` lists them on success too, ``?exclude=name`` skips one, and
``/readyz/<name>`` runs a single check). A failing endpoint answers 503 (kube answers 500; 503 is
what load balancers and probes conventionally read as "not ready", and both are failures to the
kubelet). ``/healthz`` and ``/livez`` answer ``ok`` as long as the event loop serves requests and
every liveness check passes; by default there is none.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from pyscheduler import __version__
from pyscheduler.settings import DEFAULT_SCHEDULER_NAME

__all__ = [
    "ALGORITHM_BUCKETS",
    "ATTEMPT_BUCKETS",
    "ATTEMPT_RESULTS",
    "AttemptResult",
    "BIND_BUCKETS",
    "CACHE_TYPES",
    "CacheType",
    "EXTENSION_POINTS",
    "EXTENSION_POINT_BUCKETS",
    "FRAGMENT_CALL_RESULTS",
    "FRAGMENT_STAGES",
    "HealthCheck",
    "HealthServer",
    "PLUGIN_BUCKETS",
    "PLUGIN_METRICS_SAMPLE_PERCENT",
    "POD_ATTEMPTS_BUCKETS",
    "QUEUES",
    "QueueName",
    "REBALANCE_RESULTS",
    "REBALANCE_STRATEGIES",
    "SHADOW_DISAGREEMENTS",
    "SLI_BUCKETS",
    "SchedulerMetrics",
    "exponential_buckets",
]

log = structlog.get_logger("pyscheduler.metrics")

AttemptResult = Literal["scheduled", "unschedulable", "error"]
QueueName = Literal["active", "backoff", "unschedulable", "gated"]
CacheType = Literal["assumed_pods", "pods", "nodes"]
#: A health check: True when healthy. It runs on the event loop, so it must be quick and never block.
HealthCheck = Callable[[], bool]

ATTEMPT_RESULTS: Final[tuple[AttemptResult, ...]] = ("scheduled", "unschedulable", "error")
QUEUES: Final[tuple[QueueName, ...]] = ("active", "backoff", "unschedulable", "gated")
CACHE_TYPES: Final[tuple[CacheType, ...]] = ("assumed_pods", "pods", "nodes")
#: Values of the ``extension_point`` label, spelled as kube-scheduler spells them.
EXTENSION_POINTS: Final[tuple[str, ...]] = (
    "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "ScoreExtensionNormalize",
    "Reserve", "Unreserve", "Permit", "PreBind", "Bind", "PostBind",
)
#: Values of ``pyscheduler_fragment_calls_total``'s ``result`` label: ``ok``, then every kind of
#: failed call (:class:`pyscheduler.wasm.errors.CallError`), and ``quarantined`` for a call not
#: made because the fragment is quarantined.
FRAGMENT_CALL_RESULTS: Final[tuple[str, ...]] = (
    "ok", "trap", "fuel", "timeout", "memory", "return", "output", "quarantined")
#: Values of the fragment metrics' ``stage`` label.
FRAGMENT_STAGES: Final[tuple[str, ...]] = (
    "filter", "score", "prefilter", "postfilter", "reserve", "unreserve", "permit", "prebind",
    "postbind")
#: Values of ``pyscheduler_fragment_shadow_disagreements_total``'s ``kind`` label.
SHADOW_DISAGREEMENTS: Final[tuple[str, ...]] = ("feasible", "node", "error")
#: Values of ``pyscheduler_rebalance_moves_total``'s ``strategy`` and ``result`` labels.
REBALANCE_STRATEGIES: Final[tuple[str, ...]] = ("copy", "evict")
REBALANCE_RESULTS: Final[tuple[str, ...]] = ("ok", "failed")
#: kube-scheduler's pluginMetricsSamplePercent (pkg/scheduler/schedule_one.go).
PLUGIN_METRICS_SAMPLE_PERCENT: Final = 10


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` upper bounds ``start``, ``start*factor``, ... computed like client_golang.

    client_golang multiplies repeatedly rather than computing ``start * factor**i``; doing the
    same keeps every bound bit-identical to kube-scheduler's, hence identical ``le`` labels.
    """
    if count < 1 or start <= 0 or factor <= 1:
        raise ValueError(f"exponential_buckets needs count >= 1, start > 0 and factor > 1, "
                         f"got start={start}, factor={factor}, count={count}")
    bounds: list[float] = []
    for _ in range(count):
        bounds.append(start)
        start *= factor
    return tuple(bounds)


# Bucket layouts, each named after the kube-scheduler metric that defines it.
#: 1 ms to ~16 s: scheduling_attempt_duration_seconds and scheduling_algorithm_duration_seconds.
ATTEMPT_BUCKETS: Final = exponential_buckets(0.001, 2, 15)
ALGORITHM_BUCKETS: Final = ATTEMPT_BUCKETS
#: 10 ms to ~88 min: pod_scheduling_sli_duration_seconds.
SLI_BUCKETS: Final = exponential_buckets(0.01, 2, 20)
#: 1 to 16 attempts: pod_scheduling_attempts.
POD_ATTEMPTS_BUCKETS: Final = exponential_buckets(1, 2, 5)
#: 0.1 ms to ~200 ms: framework_extension_point_duration_seconds.
EXTENSION_POINT_BUCKETS: Final = exponential_buckets(0.0001, 2, 12)
#: 10 µs to ~22 ms, factor 1.5 for finer steps: plugin_execution_duration_seconds.
PLUGIN_BUCKETS: Final = exponential_buckets(0.00001, 1.5, 20)
#: 1 ms to ~16 s for our bind histogram, the same layout as kube's attempt histograms.
BIND_BUCKETS: Final = ATTEMPT_BUCKETS
#: 10 ms to ~20 min, doubling: a pod held at permit (up to fragments.maxPermitWaitSeconds).
PERMIT_WAIT_BUCKETS: Final = exponential_buckets(0.01, 2, 17)
#: 10 µs to ~0.65 s, doubling: one fragment stage call (pyscheduler_fragment_*).
FRAGMENT_CALL_BUCKETS: Final = exponential_buckets(0.00001, 2, 17)


class _WithoutCreatedSeries:
    """A view of a registry without the ``*_created`` samples (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        for metric in self._registry.collect():
            # Each collect() builds fresh Metric objects, so filtering in place is safe.
            metric.samples = [sample for sample in metric.samples
                              if not sample.name.endswith("_created")]
            yield metric


class SchedulerMetrics:
    """Every metric the scheduler exposes, registered in a registry of its own.

    ``profile`` fills kube's ``profile`` label; it defaults to the scheduler name, which is what
    kube-scheduler uses as the profile name. The attributes are prometheus_client metrics, used
    directly (``metrics.pending_pods.labels("active").set(3)``) or through the helpers below,
    which fill the profile label for you.
    """

    def __init__(self, profile: str = DEFAULT_SCHEDULER_NAME, *, version: str = __version__,
                 process_metrics: bool = True, rng: random.Random | None = None) -> None:
        self.profile = profile
        self.registry = CollectorRegistry(auto_describe=True)
        self._exposition = _WithoutCreatedSeries(self.registry)
        self._rng = rng or random.Random()
        self._leading = False
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        registry = self.registry

        # ---- kube-scheduler's metrics (same name, labels, buckets and help) ----------------
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], registry=registry)
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=ATTEMPT_BUCKETS, registry=registry)
        self.scheduling_algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            buckets=ALGORITHM_BUCKETS, registry=registry)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulablePods that the scheduler attempted to schedule and failed; "
            "'gated' is the number of unschedulable pods that the scheduler never attempted to "
            "schedule because they are gated.",
            ["queue"], registry=registry)
        self.pod_scheduling_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.",
            ["attempts"], buckets=SLI_BUCKETS, registry=registry)
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=POD_ATTEMPTS_BUCKETS, registry=registry)
        self.framework_extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=EXTENSION_POINT_BUCKETS,
            registry=registry)
        #: Sampled: recorded only in cycles where should_record_plugin_metrics() said yes.
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=PLUGIN_BUCKETS, registry=registry)
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], registry=registry)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now", registry=registry)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims",
            buckets=(1, 2, 4, 8, 16, 32, 64), registry=registry)
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"], registry=registry)

        # ---- this scheduler's own -----------------------------------------------------------
        self.leader = Gauge(
            "pyscheduler_leader",
            "1 while this process holds the leader lease and schedules, 0 otherwise.",
            registry=registry)
        self.leader_transitions = Counter(
            "pyscheduler_leader_transitions_total",
            "Number of times this process gained or lost the leader lease.",
            registry=registry)
        self.bind_errors = Counter(
            "pyscheduler_bind_errors_total",
            "Number of failed binding calls, by reason; the pod is forgotten and requeued.",
            ["reason"], registry=registry)
        self.bind_duration = Histogram(
            "pyscheduler_bind_duration_seconds",
            "Latency of the binding call to the API server, in seconds, successful or not.",
            buckets=BIND_BUCKETS, registry=registry)
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit (a fragment's), by result: Success when allowed, "
            "Unschedulable when rejected, timed out or the pod was deleted.",
            ["result"], buckets=PERMIT_WAIT_BUCKETS, registry=registry)
        self.permit_waiting = Gauge(
            "pyscheduler_permit_waiting_pods",
            "Number of pods reserved on a node and held at a fragment's permit.",
            registry=registry)
        self.informer_relists = Counter(
            "pyscheduler_informer_relists_total",
            "Number of full relists an informer made (start-up, or a watch expired with 410).",
            ["resource"], registry=registry)
        self.informer_reconnects = Counter(
            "pyscheduler_informer_reconnects_total",
            "Number of times an informer re-opened a watch that ended or failed.",
            ["resource"], registry=registry)
        self.events_dropped = Counter(
            "pyscheduler_events_dropped_total",
            "Number of Kubernetes Events the scheduler gave up emitting (queue full or API "
            "errors); scheduling is not affected.",
            registry=registry)
        # ---- WebAssembly fragments --------------------------------------------------------
        self.fragment_calls = Counter(
            "pyscheduler_fragment_calls_total",
            "Number of calls into scheduling fragments, by fragment resource, stage and result "
            "(ok, or the failure kind: trap, fuel, timeout, memory, return, output; "
            "quarantined: not called, the fragment is quarantined).",
            ["fragment", "stage", "result"], registry=registry)
        self.fragment_call_duration = Histogram(
            "pyscheduler_fragment_call_duration_seconds",
            "Latency of one fragment stage call over all nodes (host work included), in "
            "seconds.", ["fragment", "stage"], buckets=FRAGMENT_CALL_BUCKETS, registry=registry)
        self.fragment_loads = Counter(
            "pyscheduler_fragment_loads_total",
            "Number of fragment loads, by fragment resource and result (success, failure).",
            ["fragment", "result"], registry=registry)
        self.fragment_load_failed = Gauge(
            "pyscheduler_fragment_load_failed",
            "1 while the newest generation of a fragment resource failed to validate or load "
            "(an earlier version, if any, keeps serving); 0 once a generation loads.",
            ["fragment"], registry=registry)
        self.fragment_info = Gauge(
            "pyscheduler_fragment_info",
            "1 for every fragment version serving, with its digest and runtime.",
            ["fragment", "name", "version", "digest", "runtime"], registry=registry)
        self.fragment_quarantined = Gauge(
            "pyscheduler_fragment_quarantined",
            "1 while a fragment is quarantined (not called after consecutive failed calls), "
            "0 while it is called.", ["fragment"], registry=registry)
        self.fragment_log_dropped = Counter(
            "pyscheduler_fragment_log_lines_dropped_total",
            "Number of wssp.log lines of a fragment not written to the scheduler's log "
            "(beyond fragments.logLinesPerSecond).", ["fragment"], registry=registry)
        self.fragment_shadow_disagreements = Counter(
            "pyscheduler_fragment_shadow_disagreements_total",
            "Number of pods for which a shadow fragment would have decided differently from "
            "the active logic, by fragment and what differed (feasible, node).",
            ["fragment", "kind"], registry=registry)
        self.fragment_shadow_evaluations = Counter(
            "pyscheduler_fragment_shadow_evaluations_total",
            "Number of pods a shadow fragment was evaluated for.",
            ["fragment"], registry=registry)
        # ---- cloud bursting ------------------------------------------------------------------
        self.bursts = Counter(
            "pyscheduler_virtual_bursts_total",
            "Number of pods bound to a cloud pool's virtual node because no real node fit.",
            ["pool"], registry=registry)
        self.virtual_pods = Gauge(
            "pyscheduler_virtual_pods",
            "Pods on virtual nodes, by pool and phase.", ["pool", "phase"], registry=registry)
        self.cloud_requests = Counter(
            "pyscheduler_cloud_requests_total",
            "Calls to the cloud adapter, by pool, operation and result (ok, unavailable, "
            "rejected, not_found).", ["pool", "operation", "result"], registry=registry)
        self.cloud_request_duration = Histogram(
            "pyscheduler_cloud_request_duration_seconds",
            "Latency of calls to the cloud adapter, retries included, in seconds.",
            ["pool", "operation"], buckets=ATTEMPT_BUCKETS, registry=registry)
        self.cloud_orphans_collected = Counter(
            "pyscheduler_cloud_orphans_collected_total",
            "Cloud instances deleted because no pod owned them any more.", ["pool"],
            registry=registry)
        self.cloud_orphan_instances = Gauge(
            "pyscheduler_cloud_orphan_instances",
            "Cloud instances seen without a pod at the last full listing of the pool, waiting "
            "for the orphan grace period or for a delete that keeps failing.", ["pool"],
            registry=registry)
        self.cloud_cost_per_hour = Gauge(
            "pyscheduler_cloud_cost_per_hour",
            "Estimated cost per hour of the instances running in each pool (the pool's "
            "prices times the instances' requests).", ["pool"], registry=registry)
        self.rebalance_moves = Counter(
            "pyscheduler_rebalance_moves_total",
            "Virtual pods moved back to real nodes, by strategy (copy, evict) and result.",
            ["strategy", "result"], registry=registry)
        self.build_info = Gauge(
            "pyscheduler_build_info",
            "Always 1; the version label names the running pyscheduler version.",
            ["version"], registry=registry)

        if process_metrics:
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)

        self.build_info.labels(version).set(1)
        for result in ATTEMPT_RESULTS:
            self.schedule_attempts.labels(result, profile)
            self.scheduling_attempt_duration.labels(result, profile)
        for queue in QUEUES:
            self.pending_pods.labels(queue)
        for kind in CACHE_TYPES:
            self.cache_size.labels(kind)
        # Most pods are bound at their first attempt: that series of the SLI histogram exists
        # from the start (others appear with the first pod that needed that many attempts).
        self.pod_scheduling_sli_duration.labels("1")
        for strategy in REBALANCE_STRATEGIES:
            for outcome in REBALANCE_RESULTS:
                self.rebalance_moves.labels(strategy, outcome)

    # ---- helpers --------------------------------------------------------------------------

    def init_pools(self, pools: Iterable[str]) -> None:
        """Create the per-pool series of the configured cloud pools at zero."""
        for pool in pools:
            self.bursts.labels(pool)
            self.cloud_orphans_collected.labels(pool)
            self.cloud_orphan_instances.labels(pool)
            self.cloud_cost_per_hour.labels(pool)

    def init_informers(self, resources: Iterable[str]) -> None:
        """Create the relist and reconnect series of the scheduler's informers at zero."""
        for resource in resources:
            self.informer_relists.labels(resource)
            self.informer_reconnects.labels(resource)

    def init_fragment(self, fragment: str, stages: Iterable[str], *,
                      shadow: str | None = None) -> None:
        """Create a loaded fragment's call series at zero, one per stage and result, and for a
        shadow version (named ``shadow`` in the shadow metrics) its evaluation series."""
        for stage in stages:
            for result in FRAGMENT_CALL_RESULTS:
                self.fragment_calls.labels(fragment, stage, result)
        self.fragment_quarantined.labels(fragment).set(0)
        self.fragment_log_dropped.labels(fragment)
        if shadow is not None:
            self.fragment_shadow_evaluations.labels(shadow)
            for kind in SHADOW_DISAGREEMENTS:
                self.fragment_shadow_disagreements.labels(shadow, kind)

    def set_fragment_load_result(self, fragment: str, *, ok: bool) -> None:
        """Count one load of ``fragment`` and remember whether its newest generation failed."""
        self.fragment_loads.labels(fragment, "success" if ok else "failure").inc()
        self.fragment_load_failed.labels(fragment).set(0 if ok else 1)

    def forget_fragment(self, fragment: str, *, shadow: str | None = None) -> None:
        """Drop the series of a deleted fragment resource (its counters too: a deleted
        resource's failures must not keep an alert firing, nor its series accumulate)."""
        label_sets: list[tuple[Any, tuple[str, ...]]] = [
            (self.fragment_load_failed, (fragment,)), (self.fragment_quarantined, (fragment,)),
            (self.fragment_log_dropped, (fragment,))]
        if shadow is not None:
            label_sets.append((self.fragment_shadow_evaluations, (shadow,)))
            label_sets += [(self.fragment_shadow_disagreements, (shadow, kind))
                           for kind in SHADOW_DISAGREEMENTS]
        label_sets += [(self.fragment_loads, (fragment, result))
                       for result in ("success", "failure")]
        for stage in FRAGMENT_STAGES:
            label_sets.append((self.fragment_call_duration, (fragment, stage)))
            label_sets += [(self.fragment_calls, (fragment, stage, result))
                           for result in FRAGMENT_CALL_RESULTS]
        for family, labels in label_sets:
            self._children.pop((id(family), labels), None)
            try:
                family.remove(*labels)
            except KeyError:
                pass  # never created

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, remembered: the scheduling loop observes the same few
        label sets for every pod, and the client's label lookup is not free."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe_attempt(self, result: AttemptResult, seconds: float,
                        profile: str | None = None) -> None:
        """Count one scheduling attempt and its latency (kube's PodScheduled/PodUnschedulable),
        for ``profile`` (None: this registry's default profile)."""
        profile = profile or self.profile
        self._child(self.schedule_attempts, result, profile).inc()
        self._child(self.scheduling_attempt_duration, result, profile).observe(seconds)

    def count_incoming(self, queue: str, event: str) -> None:
        """One pod added to ``queue`` because of ``event``."""
        self._child(self.queue_incoming_pods, queue, event).inc()

    def observe_fragment_call(self, fragment: str, stage: str, result: str,
                              seconds: float) -> None:
        """Count one fragment stage call and its latency."""
        self._child(self.fragment_calls, fragment, stage, result).inc()
        self._child(self.fragment_call_duration, fragment, stage).observe(seconds)

    def observe_pod_scheduled(self, *, attempts: int, sli_seconds: float) -> None:
        """Record a pod bound after ``attempts`` attempts, ``sli_seconds`` after it was queued."""
        self.pod_scheduling_attempts.observe(attempts)
        self._child(self.pod_scheduling_sli_duration, str(attempts)).observe(sli_seconds)

    def observe_extension_point(self, extension_point: str, status: str, seconds: float,
                                profile: str | None = None) -> None:
        """Record the time all plugins (or fragments) of one extension point took together."""
        self._child(self.framework_extension_point_duration, extension_point, status,
                    profile or self.profile).observe(seconds)

    def observe_plugin(self, plugin: str, extension_point: str, status: str,
                       seconds: float) -> None:
        """Record one plugin's time at one extension point (call only in sampled cycles)."""
        self._child(self.plugin_execution_duration, plugin, extension_point, status
                    ).observe(seconds)

    def should_record_plugin_metrics(self) -> bool:
        """Whether this scheduling cycle records per-plugin timings (about 10 % of cycles)."""
        return self._rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT

    def set_pending_pods(self, *, active: int, backoff: int, unschedulable: int,
                         gated: int = 0) -> None:
        """Set the four queue gauges at once."""
        for queue, count in (("active", active), ("backoff", backoff),
                             ("unschedulable", unschedulable), ("gated", gated)):
            self.pending_pods.labels(queue).set(count)

    def set_permit_waiting(self, count: int) -> None:
        self.permit_waiting.set(count)

    def set_cache_size(self, *, nodes: int, pods: int, assumed_pods: int) -> None:
        """Set the three cache-size gauges at once."""
        for kind, count in (("nodes", nodes), ("pods", pods), ("assumed_pods", assumed_pods)):
            self.cache_size.labels(kind).set(count)

    def set_leader(self, leading: bool) -> None:
        """Record whether this process leads; a change counts as a leader transition."""
        if leading != self._leading:
            self._leading = leading
            self.leader_transitions.inc()
        self.leader.set(1 if leading else 0)

    def render(self) -> bytes:
        """The registry in the Prometheus text format (without ``*_created`` series)."""
        return generate_latest(self._exposition)


class HealthServer:
    """An aiohttp server for ``/metrics``, ``/healthz``, ``/livez`` and ``/readyz``.

    ``port`` is the requested port until :meth:`start`, then the port actually bound (useful when
    0 asked for any free port). An empty ``host`` listens on every interface.
    """

    def __init__(self, metrics: SchedulerMetrics, *, host: str = "127.0.0.1",
                 port: int = 10259) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._readiness: dict[str, HealthCheck] = {}
        self._liveness: dict[str, HealthCheck] = {}
        self._failing: dict[str, tuple[str, ...]] = {}
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        for endpoint in ("healthz", "livez", "readyz"):
            app.router.add_get(f"/{endpoint}", self._all_checks_handler(endpoint))
            app.router.add_get(f"/{endpoint}/{{name}}", self._one_check_handler(endpoint))
        self._app = app

    # ---- checks ---------------------------------------------------------------------------

    def add_readiness_check(self, name: str, check: HealthCheck) -> None:
        """Make ``/readyz`` fail while ``check()`` returns False (or raises)."""
        self._add(self._readiness, name, check)

    def add_liveness_check(self, name: str, check: HealthCheck) -> None:
        """Make ``/livez`` and ``/healthz`` fail while ``check()`` returns False (or raises)."""
        self._add(self._liveness, name, check)

    @staticmethod
    def _add(checks: dict[str, HealthCheck], name: str, check: HealthCheck) -> None:
        if not name or "/" in name or name == "ping" or name != name.strip():
            raise ValueError(f"a health check name must be non-empty, without '/' or spaces "
                             f"around it, and not 'ping'; got {name!r}")
        if name in checks:
            raise ValueError(f"a health check named {name!r} is already registered")
        checks[name] = check

    def _checks(self, endpoint: str) -> dict[str, HealthCheck]:
        return self._readiness if endpoint == "readyz" else self._liveness

    @staticmethod
    def _run(check: HealthCheck) -> str | None:
        """None when the check passes, else why it failed (for the log, never for the body)."""
        try:
            return None if check() else "returned false"
        except Exception as exc:  # a broken check is a failing check, never a broken server
            return f"raised {exc!r}"

    def _note(self, endpoint: str, failing: dict[str, str]) -> None:
        # Log transitions only: probes poll every few seconds and a steady state says nothing new.
        names = tuple(failing)
        if names != self._failing.get(endpoint, ()):
            self._failing[endpoint] = names
            if failing:
                log.info("health checks failing", endpoint=endpoint, checks=failing)
            else:
                log.info("health checks passing", endpoint=endpoint)

    # ---- handlers -------------------------------------------------------------------------

    async def _serve_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _all_checks_handler(self, endpoint: str) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            checks = self._checks(endpoint)
            excluded = {name for value in request.query.getall("exclude", [])
                        for name in value.split(",") if name}
            lines = ["[+]ping ok"]
            failing: dict[str, str] = {}
            for name, check in checks.items():
                if name in excluded:
                    lines.append(f"[+]{name} excluded: ok")
                elif (reason := self._run(check)) is None:
                    lines.append(f"[+]{name} ok")
                else:
                    # The reason goes to the log only: these endpoints are unauthenticated.
                    lines.append(f"[-]{name} failed: reason withheld")
                    failing[name] = reason
            unknown = sorted(excluded - checks.keys())
            if unknown:
                quoted = ", ".join(f'"{name}"' for name in unknown)
                lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
            self._note(endpoint, failing)
            if failing:  # always verbose on failure, as kube is
                lines.append(f"{endpoint} check failed")
                return _text("\n".join(lines) + "\n", status=503)
            if "verbose" in request.query:
                lines.append(f"{endpoint} check passed")
                return _text("\n".join(lines) + "\n")
            return _text("ok")
        return handler

    def _one_check_handler(self, endpoint: str) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            name = request.match_info["name"]
            if name == "ping":
                return _text("ok")
            check = self._checks(endpoint).get(name)
            if check is None:
                return _text(f"no {endpoint} check named {name!r}\n", status=404)
            if self._run(check) is None:
                return _text("ok")
            return _text(f"[-]{name} failed: reason withheld\n", status=503)
        return handler

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on ``host:port``; afterwards ``port`` holds the port actually bound."""
        if self._runner is not None:
            raise RuntimeError("the health server is already started")
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host or None, self.port)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise OSError(exc.errno, f"cannot listen on {self.host or '*'}:{self.port} for "
                                     f"/metrics and health checks: {why}") from None
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        for address in runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                self.port = int(address[1])
                break
        log.info("health server listening", host=self.host or "*", port=self.port)

    async def stop(self) -> None:
        """Stop listening and close open connections; calling it again does nothing."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def _text(body: str, *, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/plain", charset="utf-8")
