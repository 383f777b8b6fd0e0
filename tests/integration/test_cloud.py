"""The HTTP cloud adapter against the simulated cloud, over real loopback HTTP (no mocks):
lifecycle, idempotency, quota and limits, vanished instances, transient failures, retries,
the circuit breaker, timeouts, authentication, pagination and cloud files."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pyscheduler.virtual import cloud as cloud_module
from pyscheduler.virtual.cloud import HttpCloudAdapter
from pyscheduler_sim.cloud import (
    BackgroundCloudSim,
    CloudConfigError,
    PoolSpec,
    default_pools,
    load_cloud_file,
)
from pyscheduler.virtual.types import (
    FAILED,
    PENDING,
    RUNNING,
    CloudAdapter,
    CloudError,
    ContainerSpec,
    Instance,
    InstanceRequest,
)
from tests.integration.test_kube_client import closed_port

T = TypeVar("T")
GIB = 1 << 30


def run(fn: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
    """Run one async test body on a fresh loop, bounded."""
    async def bounded() -> T:
        return await asyncio.wait_for(fn(), timeout)
    return asyncio.run(bounded())


def pools() -> list[PoolSpec]:
    return [
        PoolSpec(name="aci", platform="azure", cpu_millis=2_000, memory_bytes=8 * GIB,
                 instances=10, max_instance_cpu_millis=1_000, max_instance_memory_bytes=2 * GIB,
                 creation_latency_seconds=0.2, price_per_cpu_hour=0.05, price_per_gib_hour=0.01,
                 ip_prefix="100.64.0."),
        PoolSpec(name="eci", platform="alibaba", creation_latency_seconds=0.0),
    ]


@pytest.fixture
def cloud() -> Iterator[BackgroundCloudSim]:
    with BackgroundCloudSim(pools(), seed=7) as c:
        yield c


def request(pool: str = "aci", uid: str | None = None, cpu: int = 500,
            memory: int = GIB // 2, name: str = "web") -> InstanceRequest:
    return InstanceRequest(
        pool=pool, pod_uid=uid or str(uuid.uuid4()), namespace="default", name=name,
        containers=(ContainerSpec(name="app", image="nginx:1.27", command=("nginx",),
                                  args=("-g", "daemon off;"), env={"A": "1"},
                                  cpu_millis=cpu, memory_bytes=memory),),
        tags={"cluster": "test"})


def as_protocol(client: HttpCloudAdapter) -> CloudAdapter:
    """Type-checked: the adapter satisfies the protocol."""
    return client


def adapter(cloud: BackgroundCloudSim, **options: Any) -> HttpCloudAdapter:
    settings: dict[str, Any] = {"timeout": 2.0, "retries": 3, "backoff_initial": 0.01,
                                "backoff_max": 0.05}
    settings.update(options)
    client = HttpCloudAdapter(cloud.url, **settings)
    as_protocol(client)
    return client


def http(cloud: BackgroundCloudSim, method: str, path: str, body: Any = None,
         token: str | None = None) -> tuple[int, Any]:
    """A plain request (admin controls, raw contract checks)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(cloud.url + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


def requests_seen(cloud: BackgroundCloudSim, pool: str | None = None) -> int:
    status, stats = http(cloud, "GET", "/admin/stats")
    assert status == 200
    if pool is None:
        return int(stats["requests"])
    return sum(stats["pools"][pool].values())


def faults(cloud: BackgroundCloudSim, **body: Any) -> None:
    status, answer = http(cloud, "POST", "/admin/faults", body)
    assert status == 200, answer


async def wait_running(client: HttpCloudAdapter, pool: str, instance_id: str,
                       timeout: float = 3.0) -> Instance:
    deadline = time.monotonic() + timeout
    while True:
        inst = await client.get(pool, instance_id)
        if inst.phase != PENDING or time.monotonic() > deadline:
            return inst
        await asyncio.sleep(0.02)


# -- lifecycle ---------------------------------------------------------------------------------

def test_round_trip_create_get_list_delete(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            req = request(cpu=500, memory=GIB)
            inst = await client.create(req)
            assert inst.phase == PENDING and inst.ip == ""
            assert (inst.pool, inst.pod_uid, inst.namespace, inst.name) == (
                "aci", req.pod_uid, "default", "web")
            assert (inst.cpu_millis, inst.memory_bytes) == (500, GIB)
            assert inst.price_per_hour == pytest.approx(0.5 * 0.05 + 1 * 0.01)
            assert inst.containers == (("app", False, 0),)
            assert inst.created_at == pytest.approx(time.time(), abs=5)

            running = await wait_running(client, "aci", inst.id)
            assert running.phase == RUNNING
            assert running.ip.startswith("100.64.0.")
            assert running.started_at >= running.created_at
            assert running.containers == (("app", True, 0),)

            listed = await client.list("aci")
            assert [i.id for i in listed] == [inst.id]
            assert await client.list("eci") == []

            cap = await client.capacity("aci")
            assert (cap.pool, cap.platform) == ("aci", "azure")
            assert (cap.cpu_millis, cap.memory_bytes, cap.instances) == (2_000, 8 * GIB, 10)
            assert (cap.used_cpu_millis, cap.used_memory_bytes, cap.used_instances) == (
                500, GIB, 1)
            assert (cap.max_instance_cpu_millis, cap.max_instance_memory_bytes) == (
                1_000, 2 * GIB)
            assert cap.price_per_cpu_hour == 0.05 and cap.price_per_gib_hour == 0.01

            await client.delete("aci", inst.id)
            with pytest.raises(CloudError) as info:
                await client.get("aci", inst.id)
            assert info.value.kind == "not_found" and info.value.status == 404
            assert await client.list("aci") == []
            assert (await client.capacity("aci")).used_instances == 0
    run(body)


def test_zero_latency_pool_is_running_at_once(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            inst = await client.create(request("eci"))
            assert inst.phase == RUNNING and inst.ip.startswith("100.65.")
    run(body)


def test_create_is_idempotent_by_pod_uid(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            req = request(uid="uid-1")
            first = await client.create(req)
            again = await client.create(req)
            assert again.id == first.id
            # Same UID, different body: still the existing instance.
            other = await client.create(request(uid="uid-1", cpu=100, name="other"))
            assert other.id == first.id and other.cpu_millis == 500
            cap = await client.capacity("aci")
            assert cap.used_instances == 1 and cap.used_cpu_millis == 500
    run(body)
    # On the wire: 201 for the new instance, 200 for the existing one.
    new = {"podUid": "uid-2", "namespace": "default", "name": "x",
           "containers": [{"name": "app", "image": "busybox", "cpuMillis": 100,
                           "memoryBytes": 1024}]}
    status, first = http(cloud, "POST", "/v1/pools/aci/instances", new)
    assert status == 201
    status, second = http(cloud, "POST", "/v1/pools/aci/instances", new)
    assert status == 200 and second["id"] == first["id"]


def test_quota_exhausted_mid_burst(cloud: BackgroundCloudSim) -> None:
    """Ten concurrent 500m creates against a 2-CPU quota: four instances, six clean 409s."""
    async def body() -> None:
        async with adapter(cloud) as client:
            results = await asyncio.gather(*(client.create(request(name=f"p{i}"))
                                             for i in range(10)), return_exceptions=True)
            made = [r for r in results if isinstance(r, Instance)]
            refused = [r for r in results if isinstance(r, CloudError)]
            assert len(made) == 4 and len(refused) == 6
            for err in refused:
                assert (err.kind, err.reason, err.status) == ("rejected", "QuotaExceeded", 409)
                assert "cpu" in err.message
            listed = await client.list("aci")
            assert sorted(i.id for i in listed) == sorted(i.id for i in made)
            cap = await client.capacity("aci")
            assert (cap.used_cpu_millis, cap.used_instances) == (2_000, 4)
            assert cap.used_memory_bytes == 4 * (GIB // 2)
            # Refusals are not retried: one request per create.
            assert requests_seen(cloud, "aci") == 10 + 2
            # Room again after a delete.
            await client.delete("aci", made[0].id)
            await client.create(request(name="late"))
    run(body)


def test_instance_count_quota(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            for i in range(10):
                await client.create(request(cpu=100, memory=1024, name=f"s{i}"))
            with pytest.raises(CloudError) as info:
                await client.create(request(cpu=100, memory=1024, name="s10"))
            assert info.value.reason == "QuotaExceeded" and "instances" in info.value.message
    run(body)


def test_per_instance_limit(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            for cpu, memory in ((1_001, GIB), (500, 2 * GIB + 1)):
                with pytest.raises(CloudError) as info:
                    await client.create(request(cpu=cpu, memory=memory))
                err = info.value
                assert (err.kind, err.reason, err.status) == ("rejected", "LimitExceeded", 422)
            assert requests_seen(cloud, "aci") == 2   # never retried
            assert (await client.capacity("aci")).used_instances == 0
            # Exactly at the limit is fine.
            await client.create(request(cpu=1_000, memory=2 * GIB))
    run(body)


def test_delete_is_idempotent(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            inst = await client.create(request())
            await client.delete("aci", inst.id)
            await client.delete("aci", inst.id)
            await client.delete("aci", "aci-never-existed")
            with pytest.raises(CloudError) as info:
                await client.delete("nope", inst.id)
            assert (info.value.kind, info.value.reason) == ("rejected", "PoolNotFound")
    run(body)


def test_unknown_pool_is_rejected_not_not_found(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            for call in (client.get("nope", "x"), client.create(request("nope")),
                         client.list("nope"), client.capacity("nope")):
                with pytest.raises(CloudError) as info:
                    await call
                assert (info.value.kind, info.value.reason, info.value.status) == (
                    "rejected", "PoolNotFound", 404)
    run(body)


def test_vanished_instance_is_not_found(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            inst = await client.create(request())
            status, _ = http(cloud, "DELETE", f"/admin/instances/{inst.id}")
            assert status == 204
            with pytest.raises(CloudError) as info:
                await client.get("aci", inst.id)
            assert info.value.kind == "not_found" and info.value.reason == "InstanceNotFound"
            assert await client.list("aci") == []
            await client.delete("aci", inst.id)  # still fine
            # The pod UID is free again: a new create makes a new instance.
            again = await client.create(request(uid=inst.pod_uid))
            assert again.id != inst.id
    run(body)
    assert http(cloud, "DELETE", "/admin/instances/aci-00000099")[0] == 404


def test_failed_instance_reports_phase_and_keeps_its_quota(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud) as client:
            inst = await client.create(request())
            await wait_running(client, "aci", inst.id)
            status, answer = http(cloud, "POST", f"/admin/instances/{inst.id}/fail",
                                  {"message": "OOMKilled"})
            assert status == 200 and answer["phase"] == FAILED
            got = await client.get("aci", inst.id)
            assert got.phase == FAILED and got.message == "OOMKilled"
            assert got.containers == (("app", False, 0),)
            assert (await client.capacity("aci")).used_instances == 1
    run(body)


def test_list_follows_continue_tokens(cloud: BackgroundCloudSim,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cloud_module, "LIST_PAGE_SIZE", 3)

    async def body() -> None:
        async with adapter(cloud) as client:
            made = [await client.create(request("eci", name=f"p{i}")) for i in range(8)]
            listed = await client.list("eci")
            assert [i.id for i in listed] == sorted(i.id for i in made)
    run(body)
    assert cloud.stats()["pools"]["eci"]["list"] == 3   # pages of 3, 3 and 2
    status, page = http(cloud, "GET", "/v1/pools/eci/instances?limit=5")
    assert status == 200 and len(page["items"]) == 5 and page["continue"]
    status, rest = http(cloud, "GET", f"/v1/pools/eci/instances?limit=5&continue="
                        f"{page['continue']}")
    assert len(rest["items"]) == 3 and rest["continue"] == ""
    status, err = http(cloud, "GET", "/v1/pools/eci/instances?limit=zero")
    assert status == 400 and err["error"]["reason"] == "InvalidRequest"


# -- transient failures, retries and the circuit breaker ---------------------------------------

def test_transient_create_failures_are_retried(cloud: BackgroundCloudSim) -> None:
    faults(cloud, pool="aci", failNext=2)

    async def body() -> None:
        async with adapter(cloud, retries=3) as client:
            inst = await client.create(request(uid="flaky"))
            assert inst.pod_uid == "flaky"
    run(body)
    assert cloud.stats()["pools"]["aci"]["create"] == 3
    assert len(cloud.call(lambda: cloud.sim.list("aci"))) == 1


def test_failure_rate_one_exhausts_retries(cloud: BackgroundCloudSim) -> None:
    faults(cloud, pool="aci", failureRate=1.0)

    async def body() -> None:
        async with adapter(cloud, retries=2) as client:
            started = time.monotonic()
            with pytest.raises(CloudError) as info:
                await client.create(request())
            assert time.monotonic() - started < 1.0
            err = info.value
            assert (err.kind, err.reason, err.status) == ("unavailable", "TransientFailure", 503)
    run(body)
    assert cloud.stats()["pools"]["aci"]["create"] == 3
    assert cloud.call(lambda: cloud.sim.list("aci")) == []


def test_random_failures_never_duplicate_instances(cloud: BackgroundCloudSim) -> None:
    faults(cloud, pool="eci", failureRate=0.5)

    async def body() -> list[Instance | BaseException]:
        async with adapter(cloud, retries=2, breaker_failures=1000) as client:
            return await asyncio.gather(*(client.create(request("eci", uid=f"u{i}"))
                                          for i in range(20)), return_exceptions=True)
    results = run(body)
    made = [r for r in results if isinstance(r, Instance)]
    for r in results:
        assert isinstance(r, Instance) or (isinstance(r, CloudError)
                                           and r.kind == "unavailable")
    assert made, "with three tries at 50% some creates succeed"
    creates = cloud.stats()["pools"]["eci"]["create"]
    assert creates > 20      # some were retried
    on_server = cloud.call(lambda: cloud.sim.list("eci"))
    assert sorted(i.pod_uid for i in on_server) == sorted(i.pod_uid for i in made)


def test_api_down_opens_the_circuit_then_recovers(cloud: BackgroundCloudSim) -> None:
    faults(cloud, pool="aci", down=True)
    hook: list[tuple[str, str, str]] = []

    async def body() -> None:
        async with adapter(cloud, retries=2, breaker_failures=5, breaker_reset_seconds=0.5,
                           metrics_hook=lambda p, o, r, s: hook.append((p, o, r))) as client:
            # 3 attempts, all 503.
            started = time.monotonic()
            with pytest.raises(CloudError) as info:
                await client.get("aci", "aci-1")
            assert time.monotonic() - started < 1.0
            assert (info.value.kind, info.value.status) == ("unavailable", 503)
            assert requests_seen(cloud, "aci") == 3
            # 2 more attempts reach the threshold of 5: the circuit opens mid-call.
            with pytest.raises(CloudError) as info:
                await client.list("aci")
            assert info.value.kind == "unavailable"
            assert requests_seen(cloud, "aci") == 5
            assert client.breaker("aci").state == "open"

            # Open: fail fast, no request reaches the server.
            started = time.monotonic()
            for _ in range(5):
                with pytest.raises(CloudError) as info:
                    await client.create(request())
                assert (info.value.kind, info.value.reason) == ("unavailable", "CircuitOpen")
                assert "circuit open" in info.value.message
            assert time.monotonic() - started < 0.1
            assert requests_seen(cloud, "aci") == 5

            # Per pool: eci is unaffected.
            assert await client.list("eci") == []

            # Half-open while still down: one trial request, which reopens the circuit.
            await asyncio.sleep(0.55)
            with pytest.raises(CloudError):
                await client.capacity("aci")
            assert requests_seen(cloud, "aci") == 6
            assert client.breaker("aci").state == "open"

            # The API comes back; after the reset period the trial succeeds and closes it.
            faults(cloud, pool="aci", down=False)
            with pytest.raises(CloudError) as info:
                await client.capacity("aci")
            assert info.value.reason == "CircuitOpen"
            await asyncio.sleep(0.55)
            assert (await client.capacity("aci")).pool == "aci"
            assert client.breaker("aci").state == "closed"
            inst = await client.create(request())
            assert inst.pool == "aci"
    run(body)
    assert ("aci", "create", "circuit_open") in hook
    assert ("aci", "get", "unavailable") in hook
    assert ("aci", "capacity", "ok") in hook and ("eci", "list", "ok") in hook


def test_cancelled_trial_lets_the_next_call_try(cloud: BackgroundCloudSim) -> None:
    faults(cloud, pool="aci", down=True)

    async def body() -> None:
        async with adapter(cloud, retries=0, breaker_failures=1,
                           breaker_reset_seconds=0.2) as client:
            with pytest.raises(CloudError):
                await client.capacity("aci")
            assert client.breaker("aci").state == "open"
            faults(cloud, pool="aci", down=False, latencySeconds=1.0)
            await asyncio.sleep(0.25)
            trial = asyncio.create_task(client.capacity("aci"))   # the half-open trial
            await asyncio.sleep(0.1)
            with pytest.raises(CloudError) as info:
                await client.capacity("aci")                     # refused while it runs
            assert info.value.reason == "CircuitOpen"
            trial.cancel()
            with pytest.raises(asyncio.CancelledError):
                await trial
            faults(cloud, pool="aci", latencySeconds=0.0)
            assert (await client.capacity("aci")).pool == "aci"  # the next trial, admitted
            assert client.breaker("aci").state == "closed"
    run(body)


def test_refusals_do_not_trip_the_breaker(cloud: BackgroundCloudSim) -> None:
    async def body() -> None:
        async with adapter(cloud, breaker_failures=2) as client:
            for _ in range(5):
                with pytest.raises(CloudError) as info:
                    await client.get("aci", "aci-missing")
                assert info.value.kind == "not_found"
                with pytest.raises(CloudError) as info:
                    await client.create(request(cpu=5_000))
                assert info.value.reason == "LimitExceeded"
            assert client.breaker("aci").state == "closed"
    run(body)


def test_timeouts_are_unavailable_within_bounded_time(cloud: BackgroundCloudSim) -> None:
    faults(cloud, pool="aci", latencySeconds=2.0)

    async def body() -> None:
        async with adapter(cloud, timeout=0.2, retries=1) as client:
            started = time.monotonic()
            with pytest.raises(CloudError) as info:
                await client.create(request())
            elapsed = time.monotonic() - started
            assert (info.value.kind, info.value.reason) == ("unavailable", "Timeout")
            assert 0.4 <= elapsed < 1.0
    run(body)
    assert cloud.stats()["pools"]["aci"]["create"] == 2
    status, _ = http(cloud, "DELETE", "/admin/faults")
    assert status == 200


def test_connection_refused_is_unavailable() -> None:
    async def body() -> None:
        client = HttpCloudAdapter(f"http://127.0.0.1:{closed_port()}", retries=1,
                                  backoff_initial=0.01, backoff_max=0.02)
        try:
            started = time.monotonic()
            with pytest.raises(CloudError) as info:
                await client.capacity("aci")
            assert (info.value.kind, info.value.reason) == ("unavailable", "ConnectionFailed")
            assert time.monotonic() - started < 1.0
        finally:
            await client.close()
    run(body)


# -- authentication and the raw contract -------------------------------------------------------

def test_bearer_token() -> None:
    with BackgroundCloudSim(pools(), token="s3cret") as cloud:
        async def body() -> None:
            async with adapter(cloud) as anonymous:
                with pytest.raises(CloudError) as info:
                    await anonymous.capacity("aci")
                assert (info.value.kind, info.value.reason, info.value.status) == (
                    "rejected", "Unauthorized", 401)
            async with adapter(cloud, token="s3cret") as client:
                assert (await client.capacity("aci")).pool == "aci"
        run(body)
        assert cloud.stats()["requests"] == 2         # the 401 was not retried
        assert http(cloud, "GET", "/admin/stats")[0] == 401
        assert http(cloud, "GET", "/admin/stats", token="s3cret")[0] == 200
        assert http(cloud, "GET", "/healthz")[0] == 200


def test_invalid_bodies_get_the_error_shape(cloud: BackgroundCloudSim) -> None:
    status, err = http(cloud, "POST", "/v1/pools/aci/instances",
                       {"podUid": "u", "namespace": "d", "name": "n", "containers": []})
    assert status == 400
    assert err == {"error": {"status": 400, "reason": "InvalidRequest",
                             "message": "body.containers: at least one container is required"}}
    status, err = http(cloud, "POST", "/v1/pools/aci/instances",
                       {"podUid": "u", "namespace": "d", "name": "n",
                        "containers": [{"name": "a", "image": "i", "cpuMillis": "1"}]})
    assert status == 400 and "cpuMillis" in err["error"]["message"]
    status, err = http(cloud, "GET", "/v1/nothing-here")
    assert status == 404 and err["error"]["reason"] == "NotFound"
    status, listing = http(cloud, "GET", "/v1/pools")
    assert status == 200 and [p["pool"] for p in listing["items"]] == ["aci", "eci"]
    status, err = http(cloud, "POST", "/admin/faults", {"failureRate": 2})
    assert status == 400


# -- cloud files and the command line ----------------------------------------------------------

GOOD = """\
cloudPools:
- name: aci
  platform: azure
  cpu: "100"
  memory: 400Gi
  instances: 50
  maxInstanceCpu: 4000m
  maxInstanceMemory: 16Gi
  creationLatencySeconds: 2
  failureRate: 0.1
  pricePerCpuHour: 0.0486
  pricePerGiBHour: 0.0053
- name: eci
  platform: alibaba
"""


def test_cloud_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "cloud.yaml"
    path.write_text(GOOD)
    aci, eci = load_cloud_file(path)
    assert aci == PoolSpec(name="aci", platform="azure", cpu_millis=100_000,
                           memory_bytes=400 * GIB, instances=50, max_instance_cpu_millis=4_000,
                           max_instance_memory_bytes=16 * GIB, creation_latency_seconds=2.0,
                           failure_rate=0.1, price_per_cpu_hour=0.0486,
                           price_per_gib_hour=0.0053, ip_prefix="100.64.")
    assert (eci.name, eci.platform, eci.ip_prefix) == ("eci", "alibaba", "100.65.")
    assert [p.name for p in default_pools()] == ["aci", "eci"]
    assert [p.platform for p in default_pools()] == ["azure", "alibaba"]


@pytest.mark.parametrize("text,expected", [
    ("cloudPools:\n- name: aci\n  failureRate: 1.5\n", "cloudPools[0] (aci).failureRate"),
    ("cloudPools:\n- name: aci\n  memory: lots\n", "cloudPools[0] (aci).memory: not a quantity"),
    ("cloudPools:\n- name: aci\n  instances: '3'\n", "cloudPools[0] (aci).instances: expected"),
    ("cloudPools:\n- name: aci\n  cpu: -1\n", "cloudPools[0] (aci).cpu: must not be negative"),
    ("cloudPools:\n- name: aci\n  colour: blue\n", "cloudPools[0]: unknown field(s): colour"),
    ("cloudPools:\n- platform: azure\n", "cloudPools[0].name: required"),
    ("cloudPools:\n- name: Big_Pool\n", "cloudPools[0].name: must be a DNS label"),
    ("cloudPools:\n- name: a\n- name: a\n", "cloudPools[1].name: duplicate pool name"),
    ("cloudPools:\n- name: a\n  ipPrefix: 10.1.2\n", "cloudPools[0] (a).ipPrefix"),
    ("cloudPools:\n- name: a\n  ipPrefix: 10.1.2.\n  instances: 300\n",
     "cloudPools[0] (a).ipPrefix: '10.1.2.' has fewer addresses"),
    ("cloudPools:\n- name: a\n  creationLatencySeconds: true\n",
     "cloudPools[0] (a).creationLatencySeconds: expected"),
    ("cloudPools: []\n", "at least one pool"),
    ("nodePools: []\n", "unknown field(s): nodePools"),
    ("- 1\n", "expected a mapping"),
    ("cloudPools: [\n", "not valid YAML"),
])
def test_bad_cloud_file_names_the_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "cloud.yaml"
    path.write_text(text)
    with pytest.raises(CloudConfigError) as info:
        load_cloud_file(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value)


def test_missing_cloud_file(tmp_path: Path) -> None:
    with pytest.raises(CloudConfigError, match="cannot read cloud file"):
        load_cloud_file(tmp_path / "absent.yaml")


SERVE = """
import argparse, sys
from pyscheduler_sim.cloud import add_cli
parser = argparse.ArgumentParser()
add_cli(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def _serve(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen([sys.executable, "-c", SERVE, "cloud-sim", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def test_cli_serve_prints_url_and_serves(tmp_path: Path) -> None:
    path = tmp_path / "cloud.yaml"
    path.write_text(GOOD)
    proc = _serve("--host", "127.0.0.1", "--port", "0", "--pools", str(path))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.removeprefix("listening on ")
        with urllib.request.urlopen(url + "/v1/pools/aci", timeout=5) as resp:
            assert json.loads(resp.read())["instances"] == 50
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_cli_serve_bad_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "cloud.yaml"
    path.write_text("cloudPools:\n- name: aci\n  failureRate: 2\n")
    proc = _serve("--pools", str(path))
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 2
    assert "cloudPools[0] (aci).failureRate" in err and out == ""
