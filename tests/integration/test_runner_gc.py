"""``pyscheduler run`` (``freeze_heap``): the garbage collector pauses while the initial lists
are read, then the heap they built is frozen and collection resumes; an API server that cannot
be reached does not keep the collector paused for longer than the pause allows."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyscheduler import runner
from pyscheduler.config import parse_config
from pyscheduler.kube.client import ConnectionConfig, KubeClient
from pyscheduler.runner import SchedulerApp
from pyscheduler_sim.harness import BackgroundCluster


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    yield
    gc.enable()
    gc.unfreeze()


def test_the_heap_is_frozen_once_synced_and_collection_resumes(
        cluster: BackgroundCluster, tmp_path: Path) -> None:
    async def run() -> tuple[bool, int]:
        client = await KubeClient.from_kubeconfig(str(cluster.kubeconfig))
        app = SchedulerApp(parse_config({"metricsAddress": "127.0.0.1:0",
                                         "schedulerName": "gc-test"}, "test"), client,
                           freeze_heap=True)
        try:
            await app.start()
            return gc.isenabled(), gc.get_freeze_count()
        finally:
            await app.stop()
            await client.close()

    enabled, frozen = asyncio.run(run())
    assert enabled and frozen > 0


def test_an_unreachable_api_server_does_not_keep_the_collector_paused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "SYNC_GC_PAUSE_SECONDS", 0.5)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def run() -> tuple[bool, bool]:
        client = KubeClient(ConnectionConfig(host=f"http://127.0.0.1:{port}"))
        app = SchedulerApp(parse_config({"metricsAddress": "127.0.0.1:0"}, "test"), client,
                           freeze_heap=True)
        start = asyncio.create_task(app.start())
        await asyncio.sleep(0.2)
        paused = not gc.isenabled()
        await asyncio.sleep(0.6)
        resumed = gc.isenabled() and not start.done()
        start.cancel()
        await asyncio.gather(start, return_exceptions=True)
        await app.stop()
        await client.close()
        return paused, resumed

    paused, resumed = asyncio.run(run())
    assert paused, "the collector was not paused during the initial lists"
    assert resumed, "the collector stayed paused while the lists could not be read"
