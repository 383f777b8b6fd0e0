"""Run the embedded cluster on a background thread, for synchronous callers.

Tests (and users' own test suites) that drive the cluster with blocking clients — the
``kubernetes`` client, ``kubectl`` in a subprocess — start it with :class:`BackgroundCluster`::

    with BackgroundCluster(ClusterSpec.with_nodes(3), workdir=tmp_path) as c:
        subprocess.run(["kubectl", "--kubeconfig", c.kubeconfig, "get", "nodes"])
        c.call(lambda: c.cluster.registry.store.rv)   # run code on the cluster's loop

The cluster's state belongs to its event loop thread; :meth:`BackgroundCluster.call` is the
thread-safe way to touch it directly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pyscheduler_sim.cluster import Cluster, ClusterSpec

__all__ = ["BackgroundCluster"]

T = TypeVar("T")


class BackgroundCluster:
    def __init__(self, spec: ClusterSpec, workdir: str | Path, **cluster_args: Any) -> None:
        self.spec = spec
        self.workdir = Path(workdir)
        self.kubeconfig = self.workdir / "kubeconfig"
        self.ca_file = self.workdir / "ca.crt"
        self._cluster_args = cluster_args
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="embedded-cluster",
                                        daemon=True)
        self.cluster: Cluster

    def __enter__(self) -> BackgroundCluster:
        self._thread.start()

        async def start() -> Cluster:
            cluster = Cluster(self.spec, **self._cluster_args)
            await cluster.start()
            return cluster

        self.cluster = asyncio.run_coroutine_threadsafe(start(), self.loop).result(60)
        self.cluster.write_kubeconfig(self.kubeconfig)
        self.ca_file.write_bytes(self.cluster.server.certs.ca_pem)
        return self

    def __exit__(self, *exc: object) -> None:
        stopping = asyncio.run_coroutine_threadsafe(self.cluster.stop(), self.loop)
        try:
            stopping.result(30)
        except concurrent.futures.TimeoutError:  # not the builtin TimeoutError before 3.11
            raise TimeoutError("the embedded cluster did not stop within 30 s; its tasks:\n"
                               + self._task_stacks()) from None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def _task_stacks(self) -> str:
        async def stacks() -> str:
            out = []
            for task in asyncio.all_tasks():
                frames = task.get_stack(limit=8)
                where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
                out.append(f"  {task.get_name()}: {where}")
            return "\n".join(out)
        try:
            return asyncio.run_coroutine_threadsafe(stacks(), self.loop).result(5)
        except Exception as exc:  # the loop itself is stuck
            return f"  (cannot list them: the loop does not answer: {exc!r})"

    kind = "embedded"

    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def token(self) -> str:
        return self.cluster.token

    def compact(self) -> None:
        """Compact the store's history at its current revision (see ``Store.compact``)."""
        self.call(lambda: self.cluster.registry.store.compact())

    def call(self, fn: Callable[[], T], timeout: float = 30) -> T:
        """Run ``fn`` on the cluster's event loop and return its result."""
        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)
