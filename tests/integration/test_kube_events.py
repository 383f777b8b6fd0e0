"""EventRecorder against the embedded API server: kube-scheduler-shaped events, series
aggregation, rate limiting, and failures that never reach the caller."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kubernetes import client as k8s

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.events import EventRecorder
from pyscheduler_sim.harness import BackgroundCluster
from tests.integration.test_kube_client import closed_port, pod, run


async def events_about(client: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = await client.list(api_path("events.k8s.io/v1", "events", namespace=namespace),
                               {"fieldSelector": f"regarding.name={name}"})
    items: list[dict[str, Any]] = listed["items"]
    return items


def test_scheduled_event_is_visible_through_core_v1(cluster: BackgroundCluster,
                                                    core: k8s.CoreV1Api, namespace: str) -> None:
    async def body() -> dict[str, Any]:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            created = await client.create(api_path("v1", "pods", namespace=namespace), pod("web"))
            recorder = EventRecorder(client, reporting_controller="pyscheduler",
                                     reporting_instance="host_1234")
            recorder.start()
            recorder.record(created, type_="Normal", reason="Scheduled", action="Binding",
                            note=f"Successfully assigned {namespace}/web to node-0")
            assert await recorder.flush()
            await recorder.stop()
            assert recorder.created == 1 and recorder.failed == 0
            return created

    created = run(body)
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=web")
    assert len(events.items) == 1
    event = events.items[0]
    assert event.reason == "Scheduled" and event.type == "Normal" and event.action == "Binding"
    assert event.message == f"Successfully assigned {namespace}/web to node-0"
    assert event.reporting_component == "pyscheduler"
    assert event.reporting_instance == "host_1234"
    assert event.involved_object.kind == "Pod"
    assert event.involved_object.uid == created["metadata"]["uid"]
    assert event.event_time is not None
    assert event.metadata.name.startswith("web.")


def test_a_retry_storm_becomes_one_event_with_a_series(cluster: BackgroundCluster,
                                                       namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            created = await client.create(api_path("v1", "pods", namespace=namespace),
                                          pod("stuck"))
            recorder = EventRecorder(client, reporting_instance="me")
            recorder.start()
            note = "0/3 nodes are available: 3 Insufficient cpu."
            for _ in range(20):
                recorder.record(created, type_="Warning", reason="FailedScheduling",
                                action="Scheduling", note=note)
                await asyncio.sleep(0)
            # Before the interval elapses only the creation reached the server.
            await asyncio.sleep(0.2)
            events = await events_about(client, namespace, "stuck")
            assert len(events) == 1 and recorder.created == 1
            await recorder.stop()  # flushes the pending series count
            events = await events_about(client, namespace, "stuck")
            assert len(events) == 1
            event = events[0]
            assert event["reason"] == "FailedScheduling" and event["type"] == "Warning"
            assert event["note"] == note and event["reportingController"] == "pyscheduler"
            assert event["regarding"]["uid"] == created["metadata"]["uid"]
            assert event["series"]["count"] == 20 and event["series"]["lastObservedTime"]
            assert recorder.aggregated == 19 and recorder.series_updates == 1

            # A different message is a different event.
            recorder.start()
            recorder.record(created, type_="Warning", reason="FailedScheduling",
                            action="Scheduling", note="0/3 nodes are available: 3 node(s) had "
                            "untolerated taint.")
            await recorder.stop()
            assert len(await events_about(client, namespace, "stuck")) == 2
    run(body)


def test_series_updates_are_paced(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            created = await client.create(api_path("v1", "pods", namespace=namespace),
                                          pod("paced"))
            recorder = EventRecorder(client, reporting_instance="me", series_interval=0.3)
            recorder.start()
            try:
                for _ in range(30):  # 30 records over ~0.9 s
                    recorder.record(created, type_="Warning", reason="FailedScheduling",
                                    action="Scheduling", note="nope")
                    await asyncio.sleep(0.03)
                await asyncio.sleep(0.4)
                events = await events_about(client, namespace, "paced")
                assert len(events) == 1 and events[0]["series"]["count"] == 30
                # One create plus at most one series write per interval.
                assert 2 <= recorder.series_updates <= 5
            finally:
                await recorder.stop()
    run(body)


def test_rate_limit_paces_creates_and_only_a_full_queue_drops(
        cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            created = await client.create(api_path("v1", "pods", namespace=namespace),
                                          pod("noisy"))
            recorder = EventRecorder(client, reporting_instance="me", qps=20, burst=3,
                                     max_queue=10)
            recorder.start()
            started = time.monotonic()
            for i in range(13):  # the writer cannot run in between: 10 queue, 3 are dropped
                recorder.record(created, type_="Normal", reason="Test", action="Testing",
                                note=f"distinct {i}")
            assert await recorder.flush(timeout=10)
            # 3 at once, the other 7 paced at 20 per second: none of the queued ones is lost.
            assert time.monotonic() - started >= 7 / 20 * 0.9
            assert recorder.created == 10 and recorder.dropped_queue_full == 3
            notes = sorted(e["note"] for e in await events_about(client, namespace, "noisy"))
            assert notes == sorted(f"distinct {i}" for i in range(10))
            await recorder.stop()
    run(body)


def test_failures_are_logged_never_raised(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            dead = client.with_config(host=f"https://127.0.0.1:{closed_port()}")
            recorder = EventRecorder(dead, reporting_instance="me", retries=1)
            recorder.start()
            ref = {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": "p",
                   "uid": "u"}
            recorder.record(ref, type_="Warning", reason="FailedScheduling",
                            action="Scheduling", note="x")
            recorder.record({"no": "metadata"}, type_="Bogus", reason="R",  # type: ignore[arg-type]
                            action="A", note="y")
            await recorder.stop()
            assert recorder.failed == 2 and recorder.created == 0
            await dead.close()
    run(body)


def test_long_notes_are_truncated_to_the_api_limit(cluster: BackgroundCluster,
                                                   namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            created = await client.create(api_path("v1", "pods", namespace=namespace),
                                          pod("long"))
            recorder = EventRecorder(client, reporting_instance="me")
            recorder.start()
            recorder.record(created, type_="Warning", reason="FailedScheduling",
                            action="Scheduling", note="é" * 2000)
            await recorder.stop()
            assert recorder.created == 1
            (event,) = await events_about(client, namespace, "long")
            assert len(event["note"].encode()) <= 1024
    run(body)
