"""Tests for pyscheduler.metrics, read the way Prometheus reads them: over loopback HTTP."""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from pyscheduler import __version__
from pyscheduler.metrics import (
    ATTEMPT_BUCKETS,
    HealthServer,
    SchedulerMetrics,
    exponential_buckets,
)

T = TypeVar("T")
LOOPBACK = "127.0.0.1"


async def fetch(server: HealthServer, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{LOOPBACK}:{server.port}{path}") as response:
            return response.status, response.headers["Content-Type"], await response.text()


def with_server(metrics: SchedulerMetrics,
                body: Callable[[HealthServer], Awaitable[T]],
                setup: Callable[[HealthServer], None] = lambda server: None) -> T:
    """Run ``body`` against a real server on a free loopback port, then stop the server."""
    async def run() -> T:
        server = HealthServer(metrics, host=LOOPBACK, port=0)
        setup(server)
        async with server:
            return await body(server)
    return asyncio.run(run())


def scrape(metrics: SchedulerMetrics) -> str:
    async def body(server: HealthServer) -> str:
        status, content_type, text = await fetch(server, "/metrics")
        assert status == 200
        assert content_type == CONTENT_TYPE_LATEST
        return text
    return with_server(metrics, body)


def populated() -> SchedulerMetrics:
    """Every metric with at least one sample, so every label set shows in the exposition."""
    metrics = SchedulerMetrics(process_metrics=False)
    metrics.observe_attempt("scheduled", 0.003)
    metrics.scheduling_algorithm_duration.observe(0.002)
    metrics.set_pending_pods(active=3, backoff=2, unschedulable=1, gated=0)
    metrics.observe_pod_scheduled(attempts=2, sli_seconds=1.5)
    metrics.observe_extension_point("Filter", "Success", 0.0002)
    metrics.observe_plugin("NodeAffinity", "Filter", "Success", 0.00003)
    metrics.queue_incoming_pods.labels("active", "PodAdd").inc()
    metrics.set_cache_size(nodes=5, pods=40, assumed_pods=1)
    metrics.set_leader(True)
    metrics.bind_errors.labels("Conflict").inc()
    metrics.bind_duration.observe(0.01)
    metrics.informer_relists.labels("pods").inc()
    metrics.informer_reconnects.labels("nodes").inc()
    metrics.events_dropped.inc()
    return metrics


@pytest.fixture(scope="module")
def exposition() -> str:
    return scrape(populated())


def kube_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor ** i for i in range(count)]


METRICS = [
    # name as exposed, type, label names (without le), bucket bounds or None, help text
    pytest.param(
        "scheduler_schedule_attempts_total", "counter", {"result", "profile"}, None,
        "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could "
        "not be scheduled, while 'error' means an internal scheduler problem.",
        id="schedule_attempts_total"),
    pytest.param(
        "scheduler_scheduling_attempt_duration_seconds", "histogram", {"result", "profile"},
        kube_buckets(0.001, 2, 15),
        "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
        id="scheduling_attempt_duration_seconds"),
    pytest.param(
        "scheduler_scheduling_algorithm_duration_seconds", "histogram", set(),
        kube_buckets(0.001, 2, 15), "Scheduling algorithm latency in seconds",
        id="scheduling_algorithm_duration_seconds"),
    pytest.param(
        "scheduler_pending_pods", "gauge", {"queue"}, None,
        "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
        "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
        "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the "
        "number of unschedulable pods that the scheduler never attempted to schedule because "
        "they are gated.", id="pending_pods"),
    pytest.param(
        "scheduler_pod_scheduling_sli_duration_seconds", "histogram", {"attempts"},
        kube_buckets(0.01, 2, 20),
        "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
        "queue and might involve multiple scheduling attempts.",
        id="pod_scheduling_sli_duration_seconds"),
    pytest.param(
        "scheduler_pod_scheduling_attempts", "histogram", set(), [1, 2, 4, 8, 16],
        "Number of attempts to successfully schedule a pod.", id="pod_scheduling_attempts"),
    pytest.param(
        "scheduler_framework_extension_point_duration_seconds", "histogram",
        {"extension_point", "status", "profile"}, kube_buckets(0.0001, 2, 12),
        "Latency for running all plugins of a specific extension point.",
        id="framework_extension_point_duration_seconds"),
    pytest.param(
        "scheduler_plugin_execution_duration_seconds", "histogram",
        {"plugin", "extension_point", "status"}, kube_buckets(0.00001, 1.5, 20),
        "Duration for running a plugin at a specific extension point.",
        id="plugin_execution_duration_seconds"),
    pytest.param(
        "scheduler_queue_incoming_pods_total", "counter", {"queue", "event"}, None,
        "Number of pods added to scheduling queues by event and queue type.",
        id="queue_incoming_pods_total"),
    pytest.param(
        "scheduler_cache_size", "gauge", {"type"}, None,
        "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
        id="cache_size"),
    pytest.param("pyscheduler_leader", "gauge", set(), None, None, id="leader"),
    pytest.param("pyscheduler_leader_transitions_total", "counter", set(), None, None,
                 id="leader_transitions_total"),
    pytest.param("pyscheduler_bind_errors_total", "counter", {"reason"}, None, None,
                 id="bind_errors_total"),
    pytest.param("pyscheduler_bind_duration_seconds", "histogram", set(),
                 kube_buckets(0.001, 2, 15), None, id="bind_duration_seconds"),
    pytest.param("pyscheduler_informer_relists_total", "counter", {"resource"}, None, None,
                 id="informer_relists_total"),
    pytest.param("pyscheduler_informer_reconnects_total", "counter", {"resource"}, None, None,
                 id="informer_reconnects_total"),
    pytest.param("pyscheduler_events_dropped_total", "counter", set(), None, None,
                 id="events_dropped_total"),
    pytest.param("pyscheduler_build_info", "gauge", {"version"}, None, None, id="build_info"),
]


@pytest.mark.parametrize(("name", "kind", "labels", "buckets", "help_text"), METRICS)
def test_metric_is_exposed_like_kube(exposition: str, name: str, kind: str, labels: set[str],
                                     buckets: list[float] | None,
                                     help_text: str | None) -> None:
    lines = exposition.splitlines()
    assert f"# TYPE {name} {kind}" in lines
    help_line = next(line for line in lines if line.startswith(f"# HELP {name} "))
    if help_text is not None:
        assert help_line == f"# HELP {name} {help_text}"
    else:
        assert len(help_line) > len(f"# HELP {name} ") + 10  # our own metrics say something

    family_name = name.removesuffix("_total") if kind == "counter" else name
    family = next(f for f in text_string_to_metric_families(exposition)
                  if f.name == family_name)
    assert family.type == kind
    assert family.samples, f"{name} has no sample"
    for sample in family.samples:
        assert set(sample.labels) - {"le"} == labels

    if buckets is not None:
        first = family.samples[0].labels
        series = [s for s in family.samples if s.name == f"{name}_bucket"
                  and {k: v for k, v in s.labels.items() if k != "le"}
                  == {k: v for k, v in first.items() if k != "le"}]
        bounds = [s.labels["le"] for s in series]
        assert bounds[-1] == "+Inf"
        assert [float(b) for b in bounds[:-1]] == pytest.approx(buckets, rel=1e-12)


def test_attempt_bucket_labels_are_kubes_exactly(exposition: str) -> None:
    bounds = [line.split('le="')[1].split('"')[0] for line in exposition.splitlines()
              if line.startswith("scheduler_scheduling_algorithm_duration_seconds_bucket")]
    assert bounds == ["0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128",
                      "0.256", "0.512", "1.024", "2.048", "4.096", "8.192", "16.384", "+Inf"]


@pytest.mark.parametrize(("start", "factor", "count", "expected"), [
    pytest.param(1, 2, 5, (1, 2, 4, 8, 16), id="pod attempts"),
    pytest.param(0.01, 2, 20, None, id="sli"),
    pytest.param(0.00001, 1.5, 20, None, id="plugin execution"),
])
def test_exponential_buckets_multiply_like_client_golang(
        start: float, factor: float, count: int, expected: tuple[float, ...] | None) -> None:
    bounds = exponential_buckets(start, factor, count)
    assert len(bounds) == count
    # client_golang: bucket[i] = start; start *= factor (repeated multiplication, not powers).
    value = start
    for bound in bounds:
        assert bound == value
        value *= factor
    if expected is not None:
        assert bounds == expected
    assert ATTEMPT_BUCKETS[-1] == 16.384


@pytest.mark.parametrize(("start", "factor", "count"), [
    pytest.param(0, 2, 5, id="zero start"),
    pytest.param(1, 1, 5, id="factor one"),
    pytest.param(1, 2, 0, id="no buckets"),
])
def test_exponential_buckets_rejects_bad_layouts(start: float, factor: float, count: int) -> None:
    with pytest.raises(ValueError, match="exponential_buckets needs"):
        exponential_buckets(start, factor, count)


@pytest.mark.parametrize(("line"), [
    pytest.param('scheduler_schedule_attempts_total{profile="pyscheduler",result="scheduled"} 1.0',
                 id="attempt counted with the default profile"),
    pytest.param('scheduler_schedule_attempts_total{profile="pyscheduler",result="unschedulable"}'
                 ' 0.0', id="unschedulable exists at zero"),
    pytest.param('scheduler_schedule_attempts_total{profile="pyscheduler",result="error"} 0.0',
                 id="error exists at zero"),
    pytest.param('scheduler_pending_pods{queue="active"} 3.0', id="active queue"),
    pytest.param('scheduler_pending_pods{queue="backoff"} 2.0', id="backoff queue"),
    pytest.param('scheduler_pending_pods{queue="unschedulable"} 1.0', id="unschedulable queue"),
    pytest.param('scheduler_pending_pods{queue="gated"} 0.0', id="gated queue"),
    pytest.param('scheduler_cache_size{type="nodes"} 5.0', id="cache nodes"),
    pytest.param('scheduler_cache_size{type="pods"} 40.0', id="cache pods"),
    pytest.param('scheduler_cache_size{type="assumed_pods"} 1.0', id="cache assumed pods"),
    pytest.param('scheduler_pod_scheduling_sli_duration_seconds_count{attempts="2"} 1.0',
                 id="sli by attempts"),
    pytest.param('scheduler_framework_extension_point_duration_seconds_count{extension_point='
                 '"Filter",profile="pyscheduler",status="Success"} 1.0', id="extension point"),
    pytest.param('scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 1.0',
                 id="incoming pods"),
    pytest.param("pyscheduler_leader 1.0", id="leading"),
    pytest.param("pyscheduler_leader_transitions_total 1.0", id="one transition"),
    pytest.param(f'pyscheduler_build_info{{version="{__version__}"}} 1.0', id="build info"),
])
def test_sample_values(exposition: str, line: str) -> None:
    assert line in exposition.splitlines()


def test_no_created_series(exposition: str) -> None:
    assert "_created" not in exposition


def test_profile_label_follows_the_scheduler_name() -> None:
    metrics = SchedulerMetrics("gpu-scheduler", process_metrics=False)
    metrics.observe_attempt("unschedulable", 0.5)
    text = scrape(metrics)
    assert ('scheduler_schedule_attempts_total{profile="gpu-scheduler",result="unschedulable"} '
            "1.0") in text.splitlines()
    assert 'profile="pyscheduler"' not in text


def test_instances_do_not_share_a_registry() -> None:
    first, second = SchedulerMetrics(process_metrics=False), SchedulerMetrics(process_metrics=False)
    first.events_dropped.inc(5)
    assert "pyscheduler_events_dropped_total 5.0" in scrape(first).splitlines()
    assert "pyscheduler_events_dropped_total 0.0" in scrape(second).splitlines()


@pytest.mark.skipif(sys.platform != "linux", reason="process metrics come from /proc")
def test_process_metrics_for_the_dashboards() -> None:
    lines = scrape(SchedulerMetrics()).splitlines()
    for name, kind in (("process_cpu_seconds_total", "counter"),
                       ("process_resident_memory_bytes", "gauge"), ("python_info", "gauge")):
        assert f"# TYPE {name} {kind}" in lines
    assert "process_resident_memory_bytes" not in scrape(SchedulerMetrics(process_metrics=False))


@pytest.mark.parametrize(("changes", "leader", "transitions"), [
    pytest.param([], 0, 0, id="starts as follower"),
    pytest.param([False, False], 0, 0, id="staying follower is no transition"),
    pytest.param([True], 1, 1, id="gaining the lease"),
    pytest.param([True, True, False], 0, 2, id="gaining then losing"),
])
def test_leader_transitions(changes: list[bool], leader: int, transitions: int) -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    for leading in changes:
        metrics.set_leader(leading)
    text = scrape(metrics).splitlines()
    assert f"pyscheduler_leader {leader:.1f}" in text
    assert f"pyscheduler_leader_transitions_total {transitions:.1f}" in text


def test_plugin_metrics_are_sampled_about_one_cycle_in_ten() -> None:
    metrics = SchedulerMetrics(process_metrics=False, rng=random.Random(1))
    sampled = sum(metrics.should_record_plugin_metrics() for _ in range(10_000))
    assert 800 < sampled < 1200


# ---- health endpoints -------------------------------------------------------------------------

READY_FAILED = ("[+]ping ok\n[+]leader-elected ok\n[-]informers-synced failed: reason withheld\n"
                "readyz check failed\n")


@pytest.mark.parametrize(("synced", "path", "status", "body"), [
    pytest.param(False, "/readyz", 503, READY_FAILED, id="not ready lists checks"),
    pytest.param(False, "/readyz?verbose", 503, READY_FAILED, id="not ready verbose"),
    pytest.param(False, "/readyz?exclude=informers-synced", 200, "ok", id="failing excluded"),
    pytest.param(False, "/readyz?verbose&exclude=informers-synced", 200,
                 "[+]ping ok\n[+]leader-elected ok\n[+]informers-synced excluded: ok\n"
                 "readyz check passed\n", id="excluded verbose"),
    pytest.param(False, "/readyz/informers-synced", 503,
                 "[-]informers-synced failed: reason withheld\n", id="one failing check"),
    pytest.param(False, "/readyz/leader-elected", 200, "ok", id="one passing check"),
    pytest.param(False, "/readyz/ping", 200, "ok", id="ping"),
    pytest.param(False, "/readyz/nonesuch", 404, "no readyz check named 'nonesuch'\n",
                 id="unknown check"),
    pytest.param(False, "/healthz", 200, "ok", id="alive while not ready"),
    pytest.param(False, "/livez", 200, "ok", id="livez while not ready"),
    pytest.param(True, "/readyz", 200, "ok", id="ready"),
    pytest.param(True, "/readyz?verbose", 200,
                 "[+]ping ok\n[+]leader-elected ok\n[+]informers-synced ok\nreadyz check passed\n",
                 id="ready verbose"),
    pytest.param(True, "/readyz?exclude=nonesuch&verbose", 200,
                 "[+]ping ok\n[+]leader-elected ok\n[+]informers-synced ok\n"
                 'warn: some health checks cannot be excluded: no matches for "nonesuch"\n'
                 "readyz check passed\n", id="excluding an unknown check warns"),
    pytest.param(True, "/livez?verbose", 200, "[+]ping ok\nlivez check passed\n",
                 id="livez verbose"),
])
def test_health_endpoints(synced: bool, path: str, status: int, body: str) -> None:
    def setup(server: HealthServer) -> None:
        server.add_readiness_check("leader-elected", lambda: True)
        server.add_readiness_check("informers-synced", lambda: synced)

    async def run(server: HealthServer) -> tuple[int, str, str]:
        return await fetch(server, path)

    got_status, content_type, got_body = with_server(
        SchedulerMetrics(process_metrics=False), run, setup)
    assert (got_status, got_body) == (status, body)
    assert content_type == "text/plain; charset=utf-8"


def test_readiness_fails_then_passes() -> None:
    state = {"synced": False}

    def broken() -> bool:
        raise RuntimeError("cache exploded")

    async def run(server: HealthServer) -> list[tuple[int, str]]:
        seen = []
        server.add_readiness_check("informers-synced", lambda: state["synced"])
        status, _, body = await fetch(server, "/readyz")
        seen.append((status, body))
        state["synced"] = True
        status, _, body = await fetch(server, "/readyz")
        seen.append((status, body))
        server.add_liveness_check("cache", broken)
        status, _, body = await fetch(server, "/healthz")
        seen.append((status, body))
        return seen

    assert with_server(SchedulerMetrics(process_metrics=False), run) == [
        (503, "[+]ping ok\n[-]informers-synced failed: reason withheld\nreadyz check failed\n"),
        (200, "ok"),
        (503, "[+]ping ok\n[-]cache failed: reason withheld\nhealthz check failed\n"),
    ]


@pytest.mark.parametrize("name", [
    pytest.param("", id="empty"),
    pytest.param("a/b", id="slash"),
    pytest.param("ping", id="reserved"),
    pytest.param(" padded", id="spaces"),
    pytest.param("informers-synced", id="duplicate"),
])
def test_bad_check_names_are_refused(name: str) -> None:
    server = HealthServer(SchedulerMetrics(process_metrics=False), host=LOOPBACK, port=0)
    server.add_readiness_check("informers-synced", lambda: True)
    with pytest.raises(ValueError, match="health check"):
        server.add_readiness_check(name, lambda: True)


def test_port_zero_binds_a_free_port_and_stop_closes_it() -> None:
    async def run() -> None:
        server = HealthServer(SchedulerMetrics(process_metrics=False), host=LOOPBACK, port=0)
        await server.start()
        assert server.port > 0
        with pytest.raises(RuntimeError, match="already started"):
            await server.start()
        assert (await fetch(server, "/livez"))[0] == 200
        await server.stop()
        await server.stop()  # a second stop does nothing
        with pytest.raises(aiohttp.ClientConnectionError):
            await fetch(server, "/livez")
    asyncio.run(run())
