"""EventRecorder's aggregation rules on a fake client and a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

from pyscheduler.kube import errors
from pyscheduler.kube.events import EventRecorder

POD = {"kind": "Pod", "apiVersion": "v1",
       "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"}}


class FakeEvents:
    def __init__(self) -> None:
        self.writes: list[tuple[str, str, dict[str, Any]]] = []
        self.missing: set[str] = set()

    async def create(self, path: str, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.writes.append(("create", path, obj))
        return obj

    async def patch(self, path: str, patch: dict[str, Any], patch_type: str = "merge",
                    **_: Any) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        if name in self.missing:
            raise errors.NotFoundError(404, "NotFound", f'events "{name}" not found')
        self.writes.append(("patch", path, patch))
        return patch


def recorder(fake: FakeEvents, now: list[float], **options: Any) -> EventRecorder:
    return EventRecorder(fake, reporting_instance="me", clock=lambda: now[0],  # type: ignore[arg-type]
                         **options)


def failed(rec: EventRecorder, note: str = "0/3 nodes are available") -> None:
    rec.record(POD, type_="Warning", reason="FailedScheduling", action="Scheduling", note=note)


def test_repeats_within_the_window_patch_the_series_outside_it_create_anew() -> None:
    async def body() -> None:
        fake, now = FakeEvents(), [0.0]
        rec = recorder(fake, now, series_window=600, series_interval=30)
        rec.start()
        failed(rec)
        assert await rec.flush()
        now[0] += 10
        failed(rec)
        failed(rec)
        assert await rec.flush()
        kinds = [w[0] for w in fake.writes]
        assert kinds == ["create", "patch"]
        created, patch = fake.writes[0][2], fake.writes[1][2]
        assert created["metadata"]["namespace"] == "ns" and "series" not in created
        assert fake.writes[1][1].endswith("/namespaces/ns/events/" + created["metadata"]["name"])
        assert patch["series"]["count"] == 3
        now[0] += 601  # the window has passed since the last occurrence
        failed(rec)
        await rec.stop()
        assert [w[0] for w in fake.writes] == ["create", "patch", "create"]
        assert fake.writes[2][2]["metadata"]["name"] != created["metadata"]["name"]
    asyncio.run(body())


def test_a_vanished_event_is_recreated_with_its_count() -> None:
    async def body() -> None:
        fake, now = FakeEvents(), [0.0]
        rec = recorder(fake, now)
        rec.start()
        failed(rec)
        assert await rec.flush()
        fake.missing.add(fake.writes[0][2]["metadata"]["name"])
        failed(rec)
        await rec.stop()
        assert [w[0] for w in fake.writes] == ["create", "create"]
        assert fake.writes[1][2]["series"]["count"] == 2
    asyncio.run(body())


def test_cache_is_bounded_and_evicted_counts_are_still_written() -> None:
    async def body() -> None:
        fake, now = FakeEvents(), [0.0]
        rec = recorder(fake, now, max_series=2)
        rec.start()
        failed(rec, "a")
        assert await rec.flush()
        failed(rec, "a")  # pending count for "a"
        failed(rec, "b")
        failed(rec, "c")  # evicts "a", whose count must still reach the server
        await rec.stop()
        patches = [w[2] for w in fake.writes if w[0] == "patch"]
        assert patches and patches[0]["series"]["count"] == 2
        assert len([w for w in fake.writes if w[0] == "create"]) == 3
    asyncio.run(body())
