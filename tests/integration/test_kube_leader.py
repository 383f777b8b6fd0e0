"""LeaderElector against the embedded API server, with short durations (lease 2 s, renew
deadline 1.5 s, retry 0.2 s)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.leader import LeaderElector
from pyscheduler_sim.harness import BackgroundCluster
from tests.integration.test_kube_client import closed_port, run
from tests.integration.test_kube_informer import eventually

LEASE = 2.0
RENEW = 1.5
RETRY = 0.2


class Candidate:
    """One elector with its own client, logging its transitions with loop timestamps."""

    def __init__(self, client: KubeClient, namespace: str, identity: str) -> None:
        self.log: list[tuple[str, float]] = []
        self.elector = LeaderElector(
            client, namespace=namespace, name="pyscheduler", identity=identity,
            lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY,
            on_started_leading=lambda: self._note("started"),
            on_stopped_leading=lambda: self._note("stopped"))

    def _note(self, what: str) -> None:
        self.log.append((what, asyncio.get_running_loop().time()))

    @property
    def leading(self) -> bool:
        return self.elector.is_leader


@asynccontextmanager
async def candidates(cluster: BackgroundCluster, namespace: str,
                     *identities: str) -> AsyncIterator[list[Candidate]]:
    clients = [await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) for _ in identities]
    group = [Candidate(c, namespace, i) for c, i in zip(clients, identities)]
    try:
        yield group
    finally:
        for c in group:
            await c.elector.stop(release=False)
        for client in clients:
            await client.close()


async def lease(client: KubeClient, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = (await client.get(api_path(
        "coordination.k8s.io/v1", "leases", namespace=namespace, name="pyscheduler")))["spec"]
    return spec


async def exactly_one_leads(group: list[Candidate], seconds: float) -> Candidate:
    await eventually(lambda: any(c.leading for c in group), timeout=5, what="a leader")
    deadline = asyncio.get_running_loop().time() + seconds
    leaders = set()
    while asyncio.get_running_loop().time() < deadline:
        now_leading = [c for c in group if c.leading]
        assert len(now_leading) <= 1, "two leaders at once"
        leaders.update(id(c) for c in now_leading)
        await asyncio.sleep(0.02)
    assert len(leaders) == 1, "leadership changed hands without a reason"
    return next(c for c in group if c.leading)


def test_one_leader_and_takeover_after_it_stops_renewing(cluster: BackgroundCluster,
                                                         namespace: str) -> None:
    async def body() -> None:
        async with candidates(cluster, namespace, "a", "b") as group:
            for c in group:
                c.elector.start()
            leader = await exactly_one_leads(group, 0.6)
            other = next(c for c in group if c is not leader)
            spec = await lease(leader.elector.client, namespace)
            assert spec["holderIdentity"] == leader.elector.identity
            assert spec["leaseDurationSeconds"] == 2 and spec["leaseTransitions"] == 0
            assert spec["acquireTime"].endswith("Z") and "." in spec["renewTime"]

            # The leader vanishes without releasing: the other waits out the lease.
            await leader.elector.stop(release=False)
            assert leader.log[-1][0] == "stopped" and not leader.leading
            gone = asyncio.get_running_loop().time()
            await eventually(lambda: other.leading, timeout=LEASE + 3, what="the takeover")
            took = asyncio.get_running_loop().time() - gone
            # Not before the lease ran out (it was renewed up to one retry period before the
            # stop), and not much after (loop latency on a busy machine aside).
            assert LEASE - RETRY * 1.5 < took < LEASE + 2.0
            spec = await lease(other.elector.client, namespace)
            assert spec["holderIdentity"] == other.elector.identity
            assert spec["leaseTransitions"] == 1
    run(body)


def test_release_hands_over_quickly(cluster: BackgroundCluster, namespace: str) -> None:
    async def body() -> None:
        async with candidates(cluster, namespace, "a", "b") as group:
            for c in group:
                c.elector.start()
            leader = await exactly_one_leads(group, 0.3)
            other = next(c for c in group if c is not leader)
            released = asyncio.get_running_loop().time()
            await leader.elector.stop()  # releases
            await eventually(lambda: other.leading, timeout=LEASE, what="the takeover")
            # Faster than waiting out the lease (which the release itself just renewed).
            assert asyncio.get_running_loop().time() - released < LEASE * 0.75
            spec = await lease(other.elector.client, namespace)
            assert spec["holderIdentity"] == other.elector.identity
    run(body)


def test_leader_that_cannot_renew_stops_at_the_deadline(cluster: BackgroundCluster,
                                                        namespace: str) -> None:
    async def body() -> None:
        async with candidates(cluster, namespace, "a") as (only,):
            only.elector.start()
            await eventually(lambda: only.leading, timeout=5, what="leadership")
            # Cut it off from the API server: every renewal now fails to connect.
            working = only.elector.client
            only.elector.client = working.with_config(host=f"https://127.0.0.1:{closed_port()}")
            cut = asyncio.get_running_loop().time()
            await eventually(lambda: only.log[-1][0] == "stopped", timeout=RENEW + 2,
                             what="on_stopped_leading")
            assert not only.leading
            # The last renewal succeeded at most one retry period (plus a slow reply) before the
            # cut; leadership must end within the renew deadline of it, without waiting for
            # the lease to expire. The margin only absorbs loop latency on a busy machine.
            elapsed = only.log[-1][1] - cut
            assert RENEW - RETRY * 2 <= elapsed <= RENEW + 0.4
            await only.elector.client.close()
            only.elector.client = working
    run(body)


def test_leader_whose_lease_is_taken_behind_its_back_stops(cluster: BackgroundCluster,
                                                           namespace: str) -> None:
    async def body() -> None:
        async with candidates(cluster, namespace, "a") as (only,):
            only.elector.start()
            await eventually(lambda: only.leading, timeout=5, what="leadership")
            await only.elector.client.patch(
                api_path("coordination.k8s.io/v1", "leases", namespace=namespace,
                         name="pyscheduler"),
                {"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30}})
            taken = asyncio.get_running_loop().time()
            await eventually(lambda: only.log[-1][0] == "stopped", timeout=RENEW,
                             what="on_stopped_leading")
            assert only.log[-1][1] - taken < RENEW * 0.75  # at once, not at the deadline
            assert only.elector.leader_identity == "intruder"
            await asyncio.sleep(RETRY * 3)
            assert not only.leading  # the intruder's lease is valid: no retake
    run(body)


def test_coroutine_leader_work_is_cancelled_on_loss(cluster: BackgroundCluster,
                                                    namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            cancelled = asyncio.Event()

            async def lead() -> None:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise
            elector = LeaderElector(client, namespace=namespace, name="work", identity="x",
                                    lease_duration=LEASE, renew_deadline=RENEW,
                                    retry_period=RETRY, on_started_leading=lead)
            elector.start()
            await eventually(lambda: elector.is_leader, timeout=5, what="leadership")
            await elector.stop()
            await asyncio.wait_for(cancelled.wait(), 1)
            spec = (await client.get(api_path("coordination.k8s.io/v1", "leases",
                                              namespace=namespace, name="work")))["spec"]
            assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    run(body)


@pytest.mark.parametrize(("lease", "renew", "retry", "message"), [
    pytest.param(2, 2, 0.2, "less than lease_duration", id="renew deadline not below lease"),
    pytest.param(2, 1, 1, "greater than 1.2", id="no room for a jittered retry"),
    pytest.param(0.5, 0.4, 0.1, "at least 1 second", id="lease below a second"),
])
def test_timings_are_validated(lease: float, renew: float, retry: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElector(None, namespace="n", name="l", identity="i",  # type: ignore[arg-type]
                      lease_duration=lease, renew_deadline=renew, retry_period=retry)
