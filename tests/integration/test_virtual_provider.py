"""The virtual-kubelet role against the embedded cluster and the simulated cloud, both over real
loopback HTTP: virtual node shape and lease, pods running as instances, deletion, orphans,
vanished instances, refusals, a cloud outage, a provider restart mid-burst and a pod deleted
while its instance is being created.

Pods are bound directly (``spec.nodeName`` = the virtual node), as the scheduler would bind them.
Each test has its own simulated cloud and pool names, so virtual nodes never collide; intervals
are short and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import NotFoundError
from pyscheduler.kube.events import EventRecorder
from pyscheduler.kube.informer import Informer
from pyscheduler_sim.cluster import ClusterSpec
from pyscheduler_sim.cluster import PoolSpec as NodePoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler.virtual.cloud import HttpCloudAdapter
from pyscheduler_sim.cloud import BackgroundCloudSim, PoolSpec
from pyscheduler.virtual.node import PoolConfig, VirtualNodeManager
from pyscheduler.api.names import INSTANCE_ANNOTATION
from pyscheduler.virtual.provider import METRIC_ORPHANS_COLLECTED, VirtualPodProvider
from pyscheduler.virtual.types import (
    FAILED,
    SUCCEEDED,
    ContainerSpec,
    Instance,
    InstanceRequest,
)

T = TypeVar("T")
Obj = dict[str, Any]
GIB = 1 << 30
EVENTS = "events.k8s.io/v1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    spec = ClusterSpec(pools=[NodePoolSpec(name="node", count=1)], pod_start_seconds=0.05,
                       pod_termination_seconds=0.2, lease_renew_seconds=2.0)
    with BackgroundCluster(spec, tmp_path_factory.mktemp("virtual")) as c:
        yield c


def run(fn: Callable[[], Awaitable[T]], timeout: float = 25.0) -> T:
    async def body() -> T:
        return await asyncio.wait_for(fn(), timeout)
    return asyncio.run(body())


def pool_name() -> str:
    return f"p{uuid.uuid4().hex[:8]}"


def cloud_pool(name: str, **fields: Any) -> PoolSpec:
    values: dict[str, Any] = {
        "platform": "azure", "cpu_millis": 8_000, "memory_bytes": 16 * GIB, "instances": 20,
        "max_instance_cpu_millis": 2_000, "max_instance_memory_bytes": 4 * GIB,
        "creation_latency_seconds": 0.2, "price_per_cpu_hour": 0.05, "ip_prefix": "100.70.0."}
    values.update(fields)
    return PoolSpec(name=name, **values)


def pod(name: str, node: str, *, cpu: str = "250m", memory: str = "256Mi",
        grace: int | None = None) -> Obj:
    spec: Obj = {"nodeName": node, "schedulerName": "no-such-scheduler", "containers": [{
        "name": "app", "image": "nginx:1.27", "command": ["nginx"],
        "args": ["-g", "daemon off;"],
        "env": [{"name": "MODE", "value": "burst"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "t"}}}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def eventually(predicate: Callable[[], Awaitable[T | None]], *, timeout: float = 10.0,
                     what: str = "condition", interval: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await predicate()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@dataclass
class Env:
    """One test's world: a client, the simulated cloud, its adapter, a namespace."""

    client: KubeClient
    cloud: BackgroundCloudSim
    adapter: HttpCloudAdapter
    recorder: EventRecorder
    namespace: str
    pools: list[PoolConfig]
    hooked: list[Obj] = field(default_factory=list)

    @property
    def pool(self) -> PoolConfig:
        return self.pools[0]

    def provider(self, **options: Any) -> VirtualPodProvider:
        async def hook(p: Obj) -> None:
            self.hooked.append(p)
        settings: dict[str, Any] = {
            "recorder": self.recorder, "orphan_grace_seconds": 30.0, "reconcile_seconds": 0.3,
            "status_poll_seconds": 0.1, "create_retries": 2, "retry_backoff_seconds": 0.05,
            "retry_backoff_max_seconds": 0.2, "cloud_timeout_seconds": 3.0,
            "on_create_failed": hook}
        settings.update(options)
        return VirtualPodProvider(self.client, self.adapter, self.pools, **settings)

    async def create_pod(self, body: Obj) -> Obj:
        return await self.client.create(api_path("v1", "pods", namespace=self.namespace), body)

    async def get_pod(self, name: str) -> Obj | None:
        try:
            return await self.client.get(api_path("v1", "pods", namespace=self.namespace,
                                                  name=name))
        except NotFoundError:
            return None

    async def instances(self, pool: str | None = None) -> list[Instance]:
        return list(await self.adapter.list(pool or self.pool.name))

    def sim(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(SimCloud)`` on the simulator's loop."""
        return self.cloud.call(lambda: fn(self.cloud.sim))

    async def events(self, reason: str) -> list[Obj]:
        await self.recorder.flush(timeout=2.0)
        listed = await self.client.list(api_path(EVENTS, "events", namespace=self.namespace))
        return [e for e in listed["items"] if e.get("reason") == reason]

    async def all_running(self, names: Sequence[str], timeout: float = 10.0) -> list[Obj]:
        """Wait until every named pod is Running; the pods then."""
        async def check() -> list[Obj] | None:
            pods = [await self.get_pod(n) for n in names]
            if all(p and p["status"].get("phase") == "Running" for p in pods):
                return [p for p in pods if p]
            return None
        return await eventually(check, timeout=timeout, what="pods running")

    async def phase(self, name: str) -> str:
        p = await self.get_pod(name)
        return str(((p or {}).get("status") or {}).get("phase") or "")


@contextlib.asynccontextmanager
async def world(cluster: BackgroundCluster, *pools: PoolSpec,
                breaker_reset_seconds: float = 0.2) -> AsyncIterator[Env]:
    specs = list(pools) or [cloud_pool(pool_name())]
    with BackgroundCloudSim(specs, seed=1) as cloud:
        client = await KubeClient.from_kubeconfig(str(cluster.kubeconfig))
        adapter = HttpCloudAdapter(cloud.url, timeout=1.0, retries=0,
                                   breaker_reset_seconds=breaker_reset_seconds)
        recorder = EventRecorder(client, reporting_instance="virtual-provider-test")
        recorder.start()
        namespace = f"v-{uuid.uuid4().hex[:8]}"
        await client.create(api_path("v1", "namespaces"), {"metadata": {"name": namespace}})
        try:
            yield Env(client, cloud, adapter, recorder, namespace,
                      [PoolConfig(s.name, s.platform) for s in specs])
        finally:
            await recorder.stop(timeout=2.0)
            await adapter.close()
            await client.close()


@contextlib.asynccontextmanager
async def started(provider: VirtualPodProvider) -> AsyncIterator[VirtualPodProvider]:
    await provider.start()
    try:
        assert await provider.wait_primed(10.0), "provider did not prime"
        yield provider
    finally:
        await provider.stop()


def condition(obj: Obj, type_: str) -> Obj:
    return next((c for c in (obj.get("status") or {}).get("conditions") or ()
                 if c.get("type") == type_), {})


# -- the virtual node ---------------------------------------------------------------------------

def test_virtual_node_shape_capacity_and_lease(cluster: BackgroundCluster) -> None:
    name = pool_name()

    async def body() -> None:
        async with world(cluster, cloud_pool(name, instances=30)) as env:
            pools = [PoolConfig(name, "azure", max_pods=12)]
            manager = VirtualNodeManager(env.client, env.adapter, pools, heartbeat_seconds=0.2,
                                         refresh_seconds=0.2)
            await manager.start()
            node_path = api_path("v1", "nodes", name=f"wssp-virtual-{name}")
            lease_path = api_path("coordination.k8s.io/v1", "leases",
                                  namespace="kube-node-lease", name=f"wssp-virtual-{name}")
            try:
                node = await env.client.get(node_path)
                labels = node["metadata"]["labels"]
                assert labels["type"] == "virtual-kubelet"
                assert labels["kubernetes.io/role"] == "agent"
                assert labels["kubernetes.io/hostname"] == f"wssp-virtual-{name}"
                assert labels["wssp/cloud-platform"] == "azure"
                assert labels["wssp/cloud-pool"] == name
                assert node["spec"]["taints"] == [{"key": "virtual-kubelet.io/provider",
                                                   "value": "azure", "effect": "NoSchedule"}]
                # The pool's quota; pods capped by max_pods.
                assert node["status"]["capacity"] == {"cpu": "8", "memory": "16Gi",
                                                      "pods": "12"}
                assert node["status"]["allocatable"] == node["status"]["capacity"]
                assert condition(node, "Ready")["status"] == "True"
                assert node["status"]["nodeInfo"]["operatingSystem"] == "linux"
                lease = await env.client.get(lease_path)
                assert lease["spec"]["holderIdentity"] == f"wssp-virtual-{name}"
                assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
                first = lease["spec"]["renewTime"]

                async def renewed() -> bool:
                    current = await env.client.get(lease_path)
                    return bool(current["spec"]["renewTime"] != first)
                await eventually(renewed, timeout=3.0, what="lease renewal")
                # Someone else's taint survives a restart of the manager, which adopts the node.
                await env.client.patch(node_path, {"spec": {"taints": [
                    *node["spec"]["taints"], {"key": "other", "effect": "NoSchedule"}]}})
            finally:
                await manager.stop()
            again = VirtualNodeManager(env.client, env.adapter, pools, heartbeat_seconds=0.2,
                                       refresh_seconds=0.2)
            await again.start()
            await again.stop()
            node = await env.client.get(node_path)
            assert {t["key"] for t in node["spec"]["taints"]} == \
                {"virtual-kubelet.io/provider", "other"}
            assert node["status"]["capacity"]["pods"] == "12"
    run(body)


def test_cloud_outage_keeps_the_node_ready_until_the_threshold_and_loses_no_pod(
        cluster: BackgroundCluster) -> None:
    async def body() -> None:
        async with world(cluster) as env:
            manager = VirtualNodeManager(env.client, env.adapter, env.pools,
                                         heartbeat_seconds=0.1, refresh_seconds=0.1,
                                         not_ready_after_seconds=1.5,
                                         cloud_timeout_seconds=1.0)
            node_path = api_path("v1", "nodes", name=env.pool.node_name)
            lease_path = api_path("coordination.k8s.io/v1", "leases",
                                  namespace="kube-node-lease", name=env.pool.node_name)

            async def ready() -> str:
                return str(condition(await env.client.get(node_path), "Ready").get("status"))

            await manager.start()
            try:
                async with started(env.provider()):
                    assert await ready() == "True"
                    env.sim(lambda s: s.set_faults(env.pool.name, down=True))
                    down_at = time.monotonic()
                    await env.create_pod(pod("during-outage", env.pool.node_name))
                    # Transient errors: still Ready, and the lease is still renewed.
                    renew = (await env.client.get(lease_path))["spec"]["renewTime"]
                    await asyncio.sleep(0.8)
                    assert await ready() == "True"
                    assert (await env.client.get(lease_path))["spec"]["renewTime"] != renew
                    assert await env.phase("during-outage") == "Pending"

                    async def not_ready() -> Obj | None:
                        node = await env.client.get(node_path)
                        c = condition(node, "Ready")
                        return c if c.get("status") == "False" else None
                    c = await eventually(not_ready, timeout=5.0, what="NotReady")
                    assert time.monotonic() - down_at >= 1.5
                    assert c["reason"] == "CloudUnavailable"
                    assert "unavailable" in c["message"] and env.pool.name in c["message"]
                    assert not manager.is_ready(env.pool.name)
                    failures = await env.events("ProviderCreateFailed")
                    assert failures and "unavailable" in failures[0]["note"]
                    assert failures[0]["note"].startswith(
                        f"create instance - in pool {env.pool.name}: ")

                    env.sim(lambda s: s.clear_faults())

                    async def is_ready() -> bool:
                        return await ready() == "True"
                    await eventually(is_ready, timeout=5.0, what="Ready again")

                    # The pod created during the outage was never lost: it runs now.
                    async def running() -> bool:
                        return await env.phase("during-outage") == "Running"
                    await eventually(running, timeout=8.0, what="pod running after outage")
                    assert len(await env.instances()) == 1
            finally:
                await manager.stop()
    run(body)


# -- pods ---------------------------------------------------------------------------------------

def test_pods_run_with_the_instance_ip_and_are_deleted_with_their_instance(
        cluster: BackgroundCluster) -> None:
    async def body() -> None:
        async with world(cluster) as env, started(env.provider()) as provider:
            node = env.pool.node_name
            names = ["web-0", "web-1", "web-2"]
            for name in names:
                await env.create_pod(pod(name, node))
            pods = await env.all_running(names)
            instances = {i.pod_uid: i for i in await env.instances()}
            assert len(instances) == 3
            for p in pods:
                status = p["status"]
                inst = instances[p["metadata"]["uid"]]
                assert status["podIP"] == status["hostIP"] == inst.ip
                assert inst.ip.startswith("100.70.0.")
                assert status["startTime"]
                [cs] = status["containerStatuses"]
                assert cs["ready"] is True and cs["restartCount"] == 0
                assert "startedAt" in cs["state"]["running"]
                for type_ in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
                    assert condition(p, type_)["status"] == "True", type_
                for type_ in ("ContainersReady", "Ready"):
                    # True, and nothing left of the ContainersNotReady it was while Pending.
                    assert "reason" not in condition(p, type_), condition(p, type_)
                    assert "message" not in condition(p, type_), condition(p, type_)
                assert p["metadata"]["annotations"][INSTANCE_ANNOTATION] == \
                    f"{env.pool.name}/{inst.id}"
                # The request: requests, plain env only, the pod UID as key.
                assert (inst.cpu_millis, inst.memory_bytes) == (250, 256 << 20)

            created = await env.events("ProviderCreate")
            assert {e["regarding"]["name"] for e in created} == set(names)
            assert all(e["note"] == f"create instance {instances[e['regarding']['uid']].id} in "
                       f"pool {env.pool.name}: created (Pending)" for e in created)
            running = await env.events("ProviderRunning")
            assert sorted(e["note"] for e in running) == sorted(
                f"get instance {inst.id} in pool {env.pool.name}: running, IP {inst.ip}"
                for inst in instances.values())
            unsupported = await env.events("ProviderUnsupported")
            assert unsupported and "TOKEN (secretKeyRef)" in unsupported[0]["note"]

            # A graceful delete: the instance goes first, then the provider removes the pod.
            victim = pods[0]
            await env.client.delete(api_path("v1", "pods", namespace=env.namespace,
                                             name="web-0"))

            async def gone() -> bool:
                return await env.get_pod("web-0") is None
            await eventually(gone, what="pod removed")
            assert victim["metadata"]["uid"] not in {i.pod_uid for i in await env.instances()}
            deleted = await env.events("ProviderDelete")
            assert [e["note"] for e in deleted] == [
                f"delete instance {instances[victim['metadata']['uid']].id} in pool "
                f"{env.pool.name}: deleted (pod deleted)"]

            # A finished instance finishes its pod and frees its quota.
            inst = instances[pods[1]["metadata"]["uid"]]
            env.sim(lambda s: s.finish(inst.id, SUCCEEDED))

            async def succeeded() -> bool:
                return await env.phase("web-1") == "Succeeded"
            await eventually(succeeded, what="pod Succeeded")

            async def freed() -> bool:
                return inst.id not in {i.id for i in await env.instances()}
            await eventually(freed, what="finished instance deleted")
            inst = instances[pods[2]["metadata"]["uid"]]
            env.sim(lambda s: s.finish(inst.id, FAILED, "exit code 3"))

            async def failed() -> Obj | None:
                p = await env.get_pod("web-2")
                return p if p and p["status"]["phase"] == "Failed" else None
            p = await eventually(failed, what="pod Failed")
            assert p["status"]["message"] == "exit code 3"
            assert provider.counters["instances_created"] == 3
    run(body)


@pytest.mark.embedded_only("reads the embedded server's audit log")
def test_each_status_is_written_once_with_the_instance_annotation(
        cluster: BackgroundCluster) -> None:
    """An instance that is Running at once costs its pod one write: the status and the
    instance annotation go together through pods/status. Syncs that run again before the
    informer shows that write (the ProviderCreate event, the status poll) do not repeat it."""
    log: list[Any] = []
    server = cluster.cluster.server

    async def body() -> None:
        async with world(cluster, cloud_pool(pool_name(), creation_latency_seconds=0)) as env, \
                started(env.provider(status_poll_seconds=0.02)):
            node = env.pool.node_name
            names = [f"once-{i}" for i in range(8)]
            cluster.call(lambda: setattr(server, "audit_log", log))
            for name in names:
                await env.create_pod(pod(name, node))
            pods = await env.all_running(names)
            instances = {i.pod_uid: i.id for i in await env.instances()}
            for p in pods:
                assert p["metadata"]["annotations"][INSTANCE_ANNOTATION] == \
                    f"{env.pool.name}/{instances[p['metadata']['uid']]}"
            await asyncio.sleep(0.5)  # several status polls and re-syncs later
            cluster.call(lambda: setattr(server, "audit_log", None))
            base = f"/api/v1/namespaces/{env.namespace}/pods/"
            writes: dict[str, list[str]] = {}
            for r in log:
                if r.method == "PATCH" and r.path.startswith(base):
                    name, _, sub = r.path[len(base):].partition("/")
                    writes.setdefault(name, []).append(sub or "pod")
            assert writes == {name: ["status"] for name in names}
    try:
        run(body)
    finally:
        cluster.call(lambda: setattr(server, "audit_log", None))


def test_orphan_instance_is_collected_after_the_grace_period(cluster: BackgroundCluster) -> None:
    async def body() -> None:
        async with world(cluster) as env:
            # An instance whose pod never existed here (left by a crash, say).
            orphan = await env.adapter.create(InstanceRequest(
                pool=env.pool.name, pod_uid=str(uuid.uuid4()), namespace=env.namespace,
                name="ghost", containers=(ContainerSpec("app", "busybox", cpu_millis=100),)))
            provider = env.provider(orphan_grace_seconds=1.5)
            async with started(provider):
                await env.create_pod(pod("kept", env.pool.node_name))
                started_at = time.monotonic()

                async def collected() -> bool:
                    return orphan.id not in {i.id for i in await env.instances()}
                await asyncio.sleep(0.6)
                assert not await collected(), "collected before the grace period"
                await eventually(collected, timeout=5.0, what="orphan collected")
                assert time.monotonic() - started_at >= 1.0
                assert provider.counters[METRIC_ORPHANS_COLLECTED] == 1
                # The pod's own instance was not touched.
                [kept] = await env.instances()
                assert kept.name == "kept"
                assert await env.phase("kept") == "Running"
                deleted = await env.events("ProviderDelete")
                assert [e["note"] for e in deleted] == [
                    f"delete instance {orphan.id} in pool {env.pool.name}: deleted (orphan: its "
                    "pod is gone)"]
    run(body)


def test_vanished_instance_fails_the_pod_with_not_found(cluster: BackgroundCluster) -> None:
    async def body() -> None:
        async with world(cluster) as env, started(env.provider()):
            await env.create_pod(pod("lost", env.pool.node_name))

            async def running() -> bool:
                return await env.phase("lost") == "Running"
            await eventually(running, what="pod running")
            [inst] = await env.instances()
            env.sim(lambda s: s.vanish(inst.id))

            async def failed() -> Obj | None:
                p = await env.get_pod("lost")
                return p if p and p["status"]["phase"] == "Failed" else None
            p = await eventually(failed, what="pod Failed")
            assert p["status"]["reason"] == "NotFound"
            assert inst.id in p["status"]["message"]
            assert condition(p, "Ready")["status"] == "False"
            [event] = await env.events("ProviderInstanceNotFound")
            assert event["note"] == (f"get instance {inst.id} in pool {env.pool.name}: not "
                                     "found; pod marked Failed")
            assert await env.instances() == []
    run(body)


def test_refused_create_is_retried_then_fails_the_pod(cluster: BackgroundCluster) -> None:
    async def body() -> None:
        async with world(cluster, cloud_pool(pool_name(), instances=1)) as env:
            async with started(env.provider()) as provider:
                node = env.pool.node_name
                await env.create_pod(pod("first", node))

                async def running() -> bool:
                    return await env.phase("first") == "Running"
                await eventually(running, what="first pod running")
                await env.create_pod(pod("second", node))          # over the instance quota
                await env.create_pod(pod("huge", node, cpu="3"))   # over the instance limit

                async def both_failed() -> list[Obj] | None:
                    pods = [await env.get_pod("second"), await env.get_pod("huge")]
                    return [p for p in pods if p] if all(
                        p and p["status"]["phase"] == "Failed" for p in pods) else None
                second, huge = await eventually(both_failed, what="pods Failed")
                assert second["status"]["reason"] == huge["status"]["reason"] == \
                    "ProviderFailed"
                assert "QuotaExceeded" in second["status"]["message"]
                assert "LimitExceeded" in huge["status"]["message"]
                notes = [e["note"] for e in await env.events("ProviderCreateFailed")
                         if e["regarding"]["name"] == "second"]
                # The first attempt and create_retries retries: one event each.
                assert len(notes) == 3, notes
                assert notes[0].startswith(f"create instance - in pool {env.pool.name}: "
                                           "rejected (QuotaExceeded)")
                assert any("giving up after 3 attempts" in n for n in notes)
                assert {p["metadata"]["name"] for p in env.hooked} == {"second", "huge"}
                assert provider.counters["pods_failed_provider"] == 2
                assert len(await env.instances()) == 1
    run(body)


@pytest.mark.parametrize("shared", [False, True], ids=["own informers", "shared informer"])
def test_provider_restart_mid_burst_makes_no_duplicate_and_leaves_no_orphan(
        cluster: BackgroundCluster, shared: bool) -> None:
    """Stopped mid-burst and started again: with its own informers (a process restart), or
    on an informer of every pod that keeps running across the restart (a leadership change
    in the scheduler's process, where the provider shares the scheduler's informer)."""
    async def body() -> None:
        async with world(cluster, cloud_pool(pool_name(), creation_latency_seconds=0.3)) as env, \
                contextlib.AsyncExitStack() as stack:
            options: dict[str, Any] = {}
            if shared:
                informer = Informer(env.client, api_path("v1", "pods", namespace=env.namespace))
                informer.start()
                stack.push_async_callback(informer.stop)
                options["pods"] = informer
            node = env.pool.node_name
            names = [f"burst-{i}" for i in range(12)]
            # Slow creates, few workers: the burst is in flight when the provider stops.
            env.sim(lambda s: s.set_faults(env.pool.name, latency_seconds=0.15))
            first = env.provider(workers=3, **options)
            await first.start()
            assert await first.wait_primed(10.0)
            for name in names:
                await env.create_pod(pod(name, node))

            async def some_created() -> bool:
                return len(await env.instances()) >= 3
            await eventually(some_created, what="part of the burst created")
            await first.stop()
            half = len(await env.instances())
            assert half < len(names), "the burst finished before the restart"

            second = env.provider(workers=3, orphan_grace_seconds=0.5, **options)
            async with started(second):
                await env.all_running(names, timeout=15.0)
                env.sim(lambda s: s.clear_faults())
                await asyncio.sleep(1.0)   # two reconciles past the orphan grace
                instances = await env.instances()
                pods = [await env.get_pod(n) for n in names]
                uids = {p["metadata"]["uid"] for p in pods if p}
                assert len(instances) == len(names)                     # no duplicate
                assert {i.pod_uid for i in instances} == uids           # no orphan
                for p in pods:
                    assert p is not None
                    annotation = p["metadata"]["annotations"][INSTANCE_ANNOTATION]
                    assert annotation.split("/", 1)[1] in {i.id for i in instances}
                assert second.counters[METRIC_ORPHANS_COLLECTED] == 0
    run(body)


def test_pod_deleted_while_its_instance_is_created_leaves_no_orphan(
        cluster: BackgroundCluster) -> None:
    async def body() -> None:
        async with world(cluster) as env, started(env.provider()) as provider:
            node = env.pool.node_name
            # Every cloud call now takes 0.6 s: the pods are deleted mid-create.
            env.sim(lambda s: s.set_faults(env.pool.name, latency_seconds=0.6))
            await env.create_pod(pod("forced", node))
            await env.create_pod(pod("graceful", node, grace=30))

            async def creating() -> bool:
                stats = env.cloud.stats()["pools"][env.pool.name]
                return int(stats.get("create", 0)) >= 2
            await eventually(creating, what="creates in flight")
            path = api_path("v1", "pods", namespace=env.namespace, name="forced")
            await env.client.delete(path, grace_period_seconds=0)
            await env.client.delete(api_path("v1", "pods", namespace=env.namespace,
                                             name="graceful"))
            assert await env.get_pod("forced") is None

            async def clean() -> bool:
                return not await env.instances() and await env.get_pod("graceful") is None
            await eventually(clean, timeout=10.0, what="no instance left")
            # Removed by the provider right after the create returned, not by the
            # orphan collector (whose grace is 30 s here).
            assert provider.counters[METRIC_ORPHANS_COLLECTED] == 0
            assert provider.counters["instances_created"] == 2
            assert provider.counters["instances_deleted"] == 2
    run(body)
