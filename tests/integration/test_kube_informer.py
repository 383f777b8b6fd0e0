"""Informer against the embedded API server: paging, handlers, dropped watches, 410 relists."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.informer import Informer
from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from tests.integration.test_kube_client import configmap, run


class Recorder:
    """Handlers that log every call, and a model rebuilt only from what they saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (kind, name, resourceVersion)
        self.model: dict[str, str] = {}              # name -> resourceVersion

    def handlers(self) -> dict[str, Any]:
        return {"on_add": self.add, "on_update": self.update, "on_delete": self.delete}

    @staticmethod
    def _id(obj: dict[str, Any]) -> tuple[str, str]:
        return obj["metadata"]["name"], obj["metadata"]["resourceVersion"]

    def add(self, obj: dict[str, Any]) -> None:
        name, rv = self._id(obj)
        assert name not in self.model, f"add of {name} which is already known"
        self.model[name] = rv
        self.calls.append(("add", name, rv))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        name, rv = self._id(new)
        assert self.model.get(name) == old["metadata"]["resourceVersion"], \
            f"update of {name} from a state the handlers never saw"
        self.model[name] = rv
        self.calls.append(("update", name, rv))

    def delete(self, obj: dict[str, Any]) -> None:
        name, rv = self._id(obj)
        assert name in self.model, f"delete of {name} which was never added"
        del self.model[name]
        self.calls.append(("delete", name, rv))

    def names(self, kind: str) -> list[str]:
        return [name for k, name, _ in self.calls if k == kind]


async def server_state(client: KubeClient, collection: str) -> dict[str, str]:
    listed = await client.list(collection)
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in listed["items"]}


async def eventually(predicate: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_initial_list_is_paged_and_handlers_run_in_order(cluster: BackgroundCluster,
                                                         namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            for i in range(12):
                await client.create(collection, configmap(f"cm-{i:02d}", i=str(i)))
            pages: list[Any] = []
            list_page = client.list

            async def counting_list(path: str, params: Any = None, **kw: Any) -> Any:
                pages.append(dict(params or {}))
                return await list_page(path, params, **kw)
            client.list = counting_list  # type: ignore[method-assign]

            seen = Recorder()
            informer = Informer(client, collection, page_size=5, **seen.handlers())
            informer.start()
            try:
                await asyncio.wait_for(informer.synced.wait(), 5)
                assert len(pages) == 3 and "continue" in pages[1] and pages[0]["limit"] == 5
                assert seen.names("add") == [f"cm-{i:02d}" for i in range(12)]
                assert set(informer.objects) == {f"{namespace}/cm-{i:02d}" for i in range(12)}
                assert informer.objects[f"{namespace}/cm-00"]["kind"] == "ConfigMap"
                assert informer.resource_version

                path = api_path("v1", "configmaps", namespace=namespace, name="new")
                await client.create(collection, configmap("new"))
                await client.patch(path, {"data": {"v": "2"}})
                await client.delete(path)
                await eventually(lambda: "new" in seen.names("delete"), what="the delete")
                assert [(k, n) for k, n, _ in seen.calls[12:]] == [
                    ("add", "new"), ("update", "new"), ("delete", "new")]
                assert f"{namespace}/new" not in informer.objects
                assert seen.model == await server_state(client, collection)
                assert informer.relists == 0 and informer.reconnects == 0
            finally:
                await informer.stop()
    run(body)


def test_label_selector_narrows_and_late_handlers_get_replay(cluster: BackgroundCluster,
                                                             namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            mine = {**configmap("mine"), "metadata": {"name": "mine", "labels": {"app": "x"}}}
            await client.create(collection, mine)
            await client.create(collection, configmap("other"))
            informer = Informer(client, collection, label_selector="app=x")
            informer.start()
            try:
                await asyncio.wait_for(informer.synced.wait(), 5)
                late = Recorder()
                informer.add_handlers(**late.handlers())
                assert late.names("add") == ["mine"]
                gone = Recorder()
                registration = informer.add_handlers(**gone.handlers())
                informer.remove_handlers(registration)
                # The object stops matching: the informer sees it as deleted.
                await client.patch(api_path("v1", "configmaps", namespace=namespace,
                                            name="mine"), {"metadata": {"labels": None}})
                await eventually(lambda: late.names("delete") == ["mine"], what="the delete")
                assert informer.objects == {}
                # A removed registration hears nothing after its replay.
                assert [k for k, _, _ in gone.calls] == ["add"]
            finally:
                await informer.stop()
    run(body)


async def _churn(client: KubeClient, namespace: str, count: int, dropper: Any) -> None:
    """Create, update and delete objects while ``dropper`` cuts the watches now and then."""
    def path(i: int) -> str:
        return api_path("v1", "configmaps", namespace=namespace, name=f"cm-{i:03d}")
    for i in range(count):
        await client.create(api_path("v1", "configmaps", namespace=namespace),
                            configmap(f"cm-{i:03d}"))
        if i % 3 == 2:
            await client.patch(path(i - 1), {"data": {"n": str(i)}})
        if i % 5 == 4:
            await client.delete(path(i - 4))
        if i % 8 == 7:
            await dropper()
        await asyncio.sleep(0.005)


def _dropped_watch_loses_nothing(cluster: BackgroundCluster, namespace: str,
                                 abrupt: bool) -> Informer:
    async def body() -> Informer:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            seen = Recorder()
            informer = Informer(client, collection, backoff_initial=0.05, **seen.handlers())
            informer.start()
            drops: list[int] = []

            async def drop() -> None:
                before = informer.watches
                drops.append(await asyncio.to_thread(cluster.call, lambda: (
                    cluster.cluster.server.drop_watches(abrupt=abrupt))))
                # Go on once the informer watches again: a drop that lands while it is between
                # two watches still ends with a new one, so each drop counts one watch.
                await eventually(lambda: informer.watches > before,
                                 what="the informer to watch again")
            try:
                await asyncio.wait_for(informer.synced.wait(), 5)
                await _churn(client, namespace, 40, drop)
                expected = await server_state(client, collection)
                await eventually(lambda: seen.model == expected, what="the informer to catch up")
                assert sum(drops) >= 3  # the watches really were cut
                created = [f"cm-{i:03d}" for i in range(40)]
                assert seen.names("add") == created  # each exactly once, in order
                assert seen.names("delete") == [f"cm-{i - 4:03d}" for i in range(40)
                                                 if i % 5 == 4]
                assert {k.split("/")[1]: o["metadata"]["resourceVersion"]
                        for k, o in informer.objects.items()} == expected
                assert informer.relists == 0  # resumed from history, never relisted
                assert informer.watches >= 4
                return informer
            finally:
                await informer.stop()
    return run(body)


@pytest.mark.embedded_only("drops the embedded server's watches")
def test_clean_watch_drop_loses_nothing(cluster: BackgroundCluster, namespace: str) -> None:
    _dropped_watch_loses_nothing(cluster, namespace, abrupt=False)


@pytest.mark.embedded_only("cuts the embedded server's watch connections")
def test_abrupt_watch_drop_loses_nothing(cluster: BackgroundCluster, namespace: str) -> None:
    informer = _dropped_watch_loses_nothing(cluster, namespace, abrupt=True)
    assert informer.reconnects >= 1


class TcpProxy:
    """A loopback TCP proxy that can hold back the server's bytes and cut every connection.

    ``pause()`` stops forwarding server→client (what was read is held, not delivered);
    ``cut()`` closes all connections, throwing held bytes away, and forwards again.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.paused = False
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._resumed = asyncio.Event()
        self._resumed.set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def pause(self) -> None:
        self.paused = True
        self._resumed.clear()

    def resume(self) -> None:
        self.paused = False
        self._resumed.set()

    def cut(self) -> None:
        for client_writer, upstream_writer in list(self._conns):
            for w in (client_writer, upstream_writer):
                w.transport.abort()
        self._conns.clear()
        self.paused = False
        self._resumed.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._conns.add(pair)
        for task in (self._pump(reader, up_writer, pair, hold=False),
                     self._pump(up_reader, writer, pair, hold=True)):
            t = asyncio.get_running_loop().create_task(task)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    pair: Any, hold: bool) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if hold and self.paused:
                    await self._resumed.wait()
                    if pair not in self._conns:
                        return  # cut while held: the bytes are lost, as on a dead link
                writer.write(data)
                await writer.drain()
            if pair in self._conns:
                writer.close()


@contextlib.asynccontextmanager
async def behind_a_proxy(cluster: BackgroundCluster) -> AsyncIterator[
        tuple[KubeClient, TcpProxy, str, Recorder, Informer]]:
    """A client straight to ``cluster``, and an informer on its default configmaps (not yet
    started) that reaches it through a :class:`TcpProxy` the test can pause or cut."""
    async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as direct:
        proxy = TcpProxy(cluster.cluster.server.host, cluster.cluster.server.port)
        port = await proxy.start()
        proxied = direct.with_config(host=f"https://127.0.0.1:{port}")
        collection = api_path("v1", "configmaps", namespace="default")
        seen = Recorder()
        informer = Informer(proxied, collection, backoff_initial=0.05, **seen.handlers())
        try:
            yield direct, proxy, collection, seen, informer
        finally:
            await informer.stop()
            await proxy.close()
            await proxied.close()


def test_expired_watch_relists_and_delivers_missed_deletes(tmp_path: Path) -> None:
    spec = ClusterSpec(pools=[PoolSpec(name="n", count=1)])
    with BackgroundCluster(spec, tmp_path, history=5) as small:
        async def body() -> None:
            async with behind_a_proxy(small) as (direct, proxy, collection, seen, informer):
                for i in range(3):
                    await direct.create(collection, configmap(f"old-{i}"))
                informer.start()
                await asyncio.wait_for(informer.synced.wait(), 5)
                await direct.create(collection, configmap("kept"))
                await eventually(lambda: "kept" in seen.model, what="the watch")
                proxy.pause()
                # While the informer hears nothing: delete what it knows, write more than
                # the server's history holds, then cut the connection.
                for i in range(3):
                    await direct.delete(api_path("v1", "configmaps", namespace="default",
                                                 name=f"old-{i}"))
                await direct.patch(api_path("v1", "configmaps", namespace="default",
                                            name="kept"), {"data": {"v": "2"}})
                for i in range(8):
                    await direct.create(collection, configmap(f"new-{i}"))
                await asyncio.sleep(0.1)  # the server has sent them to the proxy
                assert "new-0" not in seen.model
                proxy.cut()
                expected = await server_state(direct, collection)
                await eventually(lambda: seen.model == expected, what="the relist")
                assert informer.relists == 1 and informer.reconnects >= 1
                assert sorted(seen.names("delete")) == ["old-0", "old-1", "old-2"]
                assert [c for c in seen.calls if c[1] == "kept"][-1][0] == "update"
                assert seen.names("add")[-8:] == [f"new-{i}" for i in range(8)]
        run(body)


def test_a_lagging_watch_is_cut_off_and_the_informer_relists(tmp_path: Path) -> None:
    """kube-apiserver closes a watch whose reader stops taking events; the embedded cluster
    does too (a stream blocked writing for slow_watcher_seconds while 100 events wait). The
    informer reads what it was sent, sees the watch end, and catches up: here, with a history
    too short to resume from, by relisting."""
    spec = ClusterSpec(pools=[PoolSpec(name="n", count=1)])
    with BackgroundCluster(spec, tmp_path, history=20, slow_watcher_seconds=0.3) as small:
        async def body() -> None:
            async with behind_a_proxy(small) as (direct, proxy, collection, seen, informer):
                informer.start()
                await asyncio.wait_for(informer.synced.wait(), 5)
                await direct.create(collection, configmap("first"))
                await eventually(lambda: "first" in seen.model, what="the watch")
                proxy.pause()  # the reader stops taking bytes: the server's writes block
                bulk = "x" * 200_000
                for i in range(300):  # 60 MB: more than every socket buffer on the way
                    await direct.create(collection, configmap(f"big-{i}", v=bulk))
                server = small.cluster.server
                await asyncio.sleep(0.5)  # blocked for longer than the limit
                await direct.create(collection, configmap("last"))
                proxy.resume()
                await eventually(lambda: server.slow_watchers_closed == 1,
                                 what="the lagging watch to be cut off")
                expected = await server_state(direct, collection)
                await eventually(lambda: seen.model == expected, timeout=30,
                                 what="the informer to catch up")
                assert informer.relists == 1  # the history no longer reached back
                assert server.slow_watchers_closed == 1  # the new watch keeps up
        run(body)


def test_stopped_informer_resumes_where_it_left_off(cluster: BackgroundCluster,
                                                    namespace: str) -> None:
    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            seen = Recorder()
            informer = Informer(client, collection, **seen.handlers())
            informer.start()
            await asyncio.wait_for(informer.synced.wait(), 5)
            await informer.stop()
            await client.create(collection, configmap("while-stopped"))
            informer.start()
            try:
                await eventually(lambda: "while-stopped" in seen.model, what="the resume")
                assert informer.lists == 1  # resumed the watch: no second list
            finally:
                await informer.stop()
    run(body)
