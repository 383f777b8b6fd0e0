"""Pods that ask for pyscheduler get a node, and pods that fit nowhere are reported as kube does."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.e2e.conftest import (
    E2EConfig,
    events_for,
    pause_pod,
    pod_condition,
    reporter,
    wait_for,
)


def test_a_pod_is_bound_by_pyscheduler_and_runs(core: client.CoreV1Api, namespace: str,
                                                e2e: E2EConfig) -> None:
    core.create_namespaced_pod(namespace, pause_pod("single", e2e))

    def running() -> Any:
        pod = core.read_namespaced_pod("single", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = wait_for(running, timeout=e2e.timeout, what="pod single to be Running")
    assert pod.spec.node_name, "a Running pod has a node"
    node = core.read_node(pod.spec.node_name)
    assert not node.spec.unschedulable
    scheduled = pod_condition(pod, "PodScheduled")
    assert scheduled is not None and scheduled.status == "True"
    events = wait_for(lambda: events_for(core, namespace, "single", "Scheduled"),
                      timeout=e2e.timeout, what="a Scheduled event for pod single")
    assert {reporter(event) for event in events} == {e2e.scheduler_name}
    assert any(pod.spec.node_name in (event.message or "") for event in events), \
        [event.message for event in events]


def test_a_deployment_gets_all_its_replicas_placed_and_ready(
        core: client.CoreV1Api, apps: client.AppsV1Api, namespace: str, e2e: E2EConfig) -> None:
    template = pause_pod("web", e2e, labels={"app": "web"})
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": template["metadata"], "spec": template["spec"]}},
    }
    apps.create_namespaced_deployment(namespace, deployment)

    def ready() -> Any:
        status = apps.read_namespaced_deployment_status("web", namespace).status
        return status if (status.ready_replicas or 0) == 3 else None

    wait_for(ready, timeout=e2e.timeout, what="deployment web to have 3 ready replicas")
    pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
    live = [p for p in pods if p.metadata.deletion_timestamp is None]
    assert len(live) == 3
    for pod in live:
        assert pod.spec.scheduler_name == e2e.scheduler_name
        assert pod.spec.node_name, f"{pod.metadata.name} is not bound"
        events = wait_for(lambda: events_for(core, namespace, pod.metadata.name, "Scheduled"),
                          timeout=e2e.timeout, what=f"a Scheduled event for {pod.metadata.name}")
        assert {reporter(event) for event in events} == {e2e.scheduler_name}


def test_a_pod_that_fits_nowhere_is_reported_unschedulable(
        core: client.CoreV1Api, namespace: str, e2e: E2EConfig) -> None:
    # A thousand CPUs fit no node and, with wssp/burst "never", no virtual node either.
    core.create_namespaced_pod(namespace, pause_pod(
        "too-big", e2e, cpu="1000", annotations={"wssp/burst": "never"}))

    def unschedulable() -> Any:
        condition = pod_condition(core.read_namespaced_pod("too-big", namespace),
                                  "PodScheduled")
        return condition if condition is not None and condition.status == "False" else None

    condition = wait_for(unschedulable, timeout=e2e.timeout,
                         what="pod too-big to get PodScheduled=False")
    assert condition.reason == "Unschedulable"
    assert "Insufficient cpu" in (condition.message or ""), condition.message
    events = wait_for(lambda: events_for(core, namespace, "too-big", "FailedScheduling"),
                      timeout=e2e.timeout, what="a FailedScheduling event for pod too-big")
    assert {reporter(event) for event in events} == {e2e.scheduler_name}
    message = events[0].message or ""
    assert "nodes are available" in message and "Insufficient cpu" in message, message
    assert events[0].type == "Warning"
    assert core.read_namespaced_pod("too-big", namespace).spec.node_name is None
