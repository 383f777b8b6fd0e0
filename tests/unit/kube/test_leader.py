"""LeaderElector's decisions, step by step, on an in-memory Lease and a fake clock.

Expiry is judged by the observer's own clock since it last saw the record change, never from
the timestamps in the Lease (written by other machines' clocks)."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from typing import Any

from pyscheduler.kube import errors
from pyscheduler.kube.leader import LeaderElector

PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"


class FakeLeases:
    """get/create/update of one Lease with resourceVersion checks, like the API server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.writes = 0

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if self.lease is None:
            raise errors.NotFoundError(404, "NotFound", "not found")
        return copy.deepcopy(self.lease)

    async def create(self, path: str, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        if self.lease is not None:
            raise errors.AlreadyExistsError(409, "AlreadyExists", "exists")
        return self._store(obj)

    async def update(self, path: str, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert path == PATH and self.lease is not None
        if obj["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise errors.ConflictError(409, "Conflict", "the object has been modified")
        return self._store(obj)

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.writes += 1
        self.lease = copy.deepcopy(obj)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


def elector(leases: FakeLeases, identity: str, now: list[float],
            epoch: dt.datetime | None = None) -> LeaderElector:
    """An elector whose wall clock reads ``epoch`` (default: today) plus the fake seconds."""
    start = epoch or dt.datetime.now(dt.timezone.utc)
    return LeaderElector(leases, namespace="ns", name="l", identity=identity,  # type: ignore[arg-type]
                         lease_duration=15, renew_deadline=10, retry_period=2,
                         clock=lambda: now[0],
                         wall_clock=lambda: start + dt.timedelta(seconds=now[0]))


def test_expiry_is_judged_by_the_observers_clock() -> None:
    async def body() -> None:
        leases = FakeLeases()
        now = [100.0]
        # "a" writes timestamps from a clock far in the past: irrelevant to "b".
        a = elector(leases, "a", now, epoch=dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc))
        b = elector(leases, "b", now)
        assert await a.try_acquire_or_renew()
        spec = leases.lease["spec"]  # type: ignore[index]
        assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
        assert spec["renewTime"].startswith("2001-01-01T")

        assert not await b.try_acquire_or_renew()  # first sight: valid for 15 s from now
        now[0] += 14.0
        assert not await b.try_acquire_or_renew()
        # "a" renews; "b" notices the change on its next read and starts counting again.
        a._leading = True  # as the loop would be after acquiring
        now[0] += 1.0
        assert await a.try_acquire_or_renew()
        now[0] += 1.0
        assert not await b.try_acquire_or_renew()
        now[0] += 14.9
        assert not await b.try_acquire_or_renew()
        now[0] += 0.2
        assert await b.try_acquire_or_renew()
        spec = leases.lease["spec"]  # type: ignore[index]
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
        assert spec["acquireTime"] == spec["renewTime"]
        assert b.leader_identity == "b"
    asyncio.run(body())


def test_renewal_keeps_acquire_time_and_uses_the_fast_path() -> None:
    async def body() -> None:
        leases = FakeLeases()
        now = [0.0]
        a = elector(leases, "a", now)
        assert await a.try_acquire_or_renew()
        acquired = leases.lease["spec"]["acquireTime"]  # type: ignore[index]
        a._leading = True
        writes = leases.writes
        assert await a.try_acquire_or_renew()
        assert leases.writes == writes + 1
        spec = leases.lease["spec"]  # type: ignore[index]
        assert spec["acquireTime"] == acquired and spec["leaseTransitions"] == 0
    asyncio.run(body())


def test_conflicting_writers_one_wins() -> None:
    async def body() -> None:
        leases = FakeLeases()
        now = [0.0]
        a, b = elector(leases, "a", now), elector(leases, "b", now)
        results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
        assert sorted(results) == [False, True]
    asyncio.run(body())


def test_released_lease_is_taken_at_once() -> None:
    async def body() -> None:
        leases = FakeLeases()
        now = [0.0]
        a, b = elector(leases, "a", now), elector(leases, "b", now)
        assert await a.try_acquire_or_renew()
        a._leading = True
        assert not await b.try_acquire_or_renew()
        assert await a.release()
        assert not a._leading
        spec = leases.lease["spec"]  # type: ignore[index]
        assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
        assert await b.try_acquire_or_renew()  # no waiting: the holder is empty
        assert leases.lease["spec"]["leaseTransitions"] == 1  # type: ignore[index]
    asyncio.run(body())
