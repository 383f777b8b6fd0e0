"""The leader's health endpoints and metrics, and the leader-election Lease."""

from __future__ import annotations

import datetime
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import E2EConfig, pause_pod, wait_for


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (http only)
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@pytest.fixture(scope="module")
def metrics_url(e2e: E2EConfig) -> str:
    if e2e.metrics_url is None:
        pytest.skip("E2E_METRICS_URL is not set: the metrics endpoint cannot be reached")
    return e2e.metrics_url.rstrip("/")


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value)
            for family in text_string_to_metric_families(text) for s in family.samples]


def _value(samples: list[tuple[str, dict[str, str], float]], name: str,
           **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(value for sample, have, value in samples
               if sample == name and all(have.get(k) == v for k, v in labels.items()))


@pytest.mark.parametrize("path", ["/livez", "/readyz", "/healthz"])
def test_health_endpoints_answer_ok(metrics_url: str, path: str) -> None:
    status, body = _get(metrics_url + path)
    assert status == 200, f"{path}: {status} {body}"


def test_metrics_count_the_scheduled_pod_and_the_default_fragment(
        metrics_url: str, core: client.CoreV1Api, namespace: str, e2e: E2EConfig) -> None:
    core.create_namespaced_pod(namespace, pause_pod("counted", e2e))
    wait_for(lambda: core.read_namespaced_pod("counted", namespace).spec.node_name,
             timeout=e2e.timeout, what="pod counted to be bound")

    def scraped() -> Any:
        status, text = _get(metrics_url + "/metrics")
        assert status == 200, f"/metrics: {status}"
        samples = _samples(text)
        # The bind completes before the attempt is counted: poll until it is.
        return samples if _value(samples, "scheduler_schedule_attempts_total",
                                 result="scheduled", profile=e2e.scheduler_name) >= 1 else None

    samples = wait_for(scraped, timeout=e2e.timeout,
                       what="scheduler_schedule_attempts_total{result=scheduled} >= 1")
    assert _value(samples, "pyscheduler_leader") == 1, \
        "E2E_METRICS_URL must be the leader's endpoint"
    assert _value(samples, "scheduler_cache_size", type="nodes") >= 1
    names = {name for name, _, _ in samples}
    for family in ("scheduler_scheduling_attempt_duration_seconds_bucket",
                   "scheduler_pending_pods", "scheduler_queue_incoming_pods_total"):
        assert family in names, f"{family} missing from /metrics"
    if e2e.default_fragment is not None:
        # The shipped module runs natively (runtime "native", no calls); another build of it
        # runs in WebAssembly and is called.
        serving = [labels for name, labels, value in samples
                   if name == "pyscheduler_fragment_info" and value == 1
                   and labels.get("fragment") == e2e.default_fragment]
        assert serving, f"the packaged fragment {e2e.default_fragment} is not serving"
        if serving[0].get("runtime") != "native":
            calls = _value(samples, "pyscheduler_fragment_calls_total",
                           fragment=e2e.default_fragment, stage="filter", result="ok")
            assert calls >= 1, f"the packaged fragment {e2e.default_fragment} was never called"


def _find_lease(coordination: client.CoordinationV1Api, e2e: E2EConfig) -> Any | None:
    if e2e.lease_namespace is not None:
        try:
            return coordination.read_namespaced_lease(e2e.lease_name, e2e.lease_namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
    found = [lease for lease in coordination.list_lease_for_all_namespaces(
        field_selector=f"metadata.name={e2e.lease_name}").items]
    assert len(found) <= 1, (f"Leases named {e2e.lease_name} in several namespaces: set "
                             f"E2E_LEASE_NAMESPACE")
    return found[0] if found else None


def test_the_leader_holds_and_renews_its_lease(api: client.ApiClient, core: client.CoreV1Api,
                                               e2e: E2EConfig) -> None:
    coordination = client.CoordinationV1Api(api)
    lease = wait_for(lambda: _find_lease(coordination, e2e), timeout=e2e.timeout,
                     what=f"the Lease {e2e.lease_name}")
    holder = lease.spec.holder_identity
    assert holder, f"Lease {lease.metadata.name} has no holder"
    assert (lease.spec.lease_duration_seconds or 0) > 0
    first: datetime.datetime = lease.spec.renew_time
    assert first is not None

    def renewed() -> Any:
        again = coordination.read_namespaced_lease(lease.metadata.name,
                                                   lease.metadata.namespace)
        return again if again.spec.renew_time != first else None

    again = wait_for(renewed, timeout=max(3.0 * lease.spec.lease_duration_seconds, 10.0),
                     what=f"Lease {lease.metadata.name} to be renewed")
    assert again.spec.holder_identity == holder, "the leader changed during the test"
    assert again.spec.renew_time > first
    if e2e.scheduler_namespace is not None:
        # The identity is <hostname>_<uuid>, and a pod's hostname is its name.
        pods = core.list_namespaced_pod(e2e.scheduler_namespace).items
        names = {pod.metadata.name for pod in pods}
        assert holder.split("_", 1)[0] in names, \
            f"the holder {holder} is none of the pods in {e2e.scheduler_namespace}: {names}"


def test_every_scheduler_replica_is_ready(core: client.CoreV1Api, e2e: E2EConfig) -> None:
    if e2e.scheduler_namespace is None:
        pytest.skip("E2E_NAMESPACE is not set: the scheduler's pods are not known")
    pods = core.list_namespaced_pod(e2e.scheduler_namespace,
                                    label_selector=e2e.scheduler_selector).items
    assert pods, f"no pods match {e2e.scheduler_selector} in {e2e.scheduler_namespace}"
    for pod in pods:
        ready = [c for c in pod.status.conditions or [] if c.type == "Ready"]
        assert ready and ready[0].status == "True", f"{pod.metadata.name} is not Ready"
        container = pod.spec.containers[0]
        context = container.security_context
        assert context is not None and context.read_only_root_filesystem, \
            f"{pod.metadata.name}: the container should run with a read-only root filesystem"
        pod_context = pod.spec.security_context
        non_root = (context.run_as_non_root if context.run_as_non_root is not None
                    else pod_context.run_as_non_root if pod_context else None)
        assert non_root, f"{pod.metadata.name}: runAsNonRoot should be set"
