"""``pyscheduler run``: wire the scheduler, its informers, leader election and health server.

Start-up order: validate the configuration (done by the caller), connect, serve ``/healthz`` and
``/metrics`` at once (``/readyz`` fails until the informers have synced), sync the informers,
then either compete for the lease or, with leader election off, start scheduling.

Like kube-scheduler, a replica that loses the lease stops scheduling immediately (the loop and
the bindings in flight are cancelled) and exits with an error, so its supervisor restarts it as
a clean standby; :attr:`SchedulerApp.lost_leadership` tells in-process callers.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib

import structlog

from pyscheduler.config import SchedulerConfig
from pyscheduler.kube.client import KubeClient
from pyscheduler.kube.leader import LeaderElector
from pyscheduler.metrics import HealthServer, SchedulerMetrics
from pyscheduler.scheduler import Scheduler
from pyscheduler.wasm.manager import FragmentManager
from pyscheduler.wasm.storage import StorageConfig
from pyscheduler.wasm.vm import Limits

__all__ = ["SchedulerApp"]

log = structlog.get_logger("pyscheduler.runner")


class SchedulerApp:
    def __init__(self, config: SchedulerConfig, client: KubeClient) -> None:
        self.config = config
        self.client = client
        self.metrics = SchedulerMetrics(profile=config.scheduler_name)
        self.scheduler = Scheduler(client, config, metrics=self.metrics)
        self.health = HealthServer(self.metrics, host=config.metrics_host,
                                   port=config.metrics_port)
        self.health.add_readiness_check("informers-synced", lambda: self.scheduler.synced)
        f = config.fragments
        self.fragments = FragmentManager(
            self.scheduler.cache.table, client=client, runtime=f.runtime,
            limits=Limits(memory_bytes=f.memory_mib * 2**20, fuel=f.fuel,
                          timeout_seconds=f.timeout_seconds),
            default=config.schedule_fragment, metrics=self.metrics,
            on_ready=self.scheduler.fragment_ready, writes_status=lambda: self.leading)
        self.scheduler.select = self.fragments.select
        self.lost_leadership = asyncio.Event()
        self.elector: LeaderElector | None = None
        self._loop_task: asyncio.Task[None] | None = None

    async def _storage_config(self) -> StorageConfig:
        s = self.config.storage
        access, secret = s.access_key, s.secret_key
        if s.credentials_secret is not None:
            ref = s.credentials_secret
            obj = await self.client.get(f"/api/v1/namespaces/{ref.namespace}/secrets/{ref.name}")
            data = obj.get("data") or {}
            try:
                access = base64.b64decode(data["accessKey"]).decode()
                secret = base64.b64decode(data["secretKey"]).decode()
            except (KeyError, ValueError) as exc:
                raise ValueError(f"storage.credentialsSecret {ref.namespace}/{ref.name}: needs "
                                 f"keys accessKey and secretKey ({exc})") from None
        return StorageConfig(endpoint=s.endpoint, access_key=access, secret_key=secret,
                             secure=s.secure, region=s.region,
                             allowed_file_dirs=s.allowed_file_dirs, max_bytes=s.max_bytes,
                             timeout_seconds=s.timeout_seconds)

    async def start(self) -> None:
        await self.health.start()
        self.fragments.storage = await self._storage_config()
        await self.scheduler.start_informers()
        await self.fragments.start()
        le = self.config.leader_election
        if not le.enabled:
            self.metrics.set_leader(True)
            self._loop_task = asyncio.get_running_loop().create_task(self.scheduler.run_loop())
            return
        self.elector = LeaderElector(
            self.client, namespace=le.lease_namespace, name=le.lease_name,
            identity=le.identity, lease_duration=le.lease_duration_seconds,
            renew_deadline=le.renew_deadline_seconds, retry_period=le.retry_period_seconds,
            on_started_leading=self._lead, on_stopped_leading=self._lost)
        self.elector.start()

    async def _lead(self) -> None:
        self.metrics.set_leader(True)
        await self.scheduler.run_loop()

    def _lost(self) -> None:
        self.metrics.set_leader(False)
        log.error("leader election lost: stopped scheduling")
        self.lost_leadership.set()

    @property
    def leading(self) -> bool:
        return self.elector.is_leader if self.elector is not None else True

    async def stop(self, *, release: bool = True) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self.elector is not None:
            await self.elector.stop(release=release)
        await self.scheduler.stop()
        await self.fragments.stop()
        await self.health.stop()

    async def run_until(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (0) or leadership is lost (1)."""
        await self.start()
        stop_wait = asyncio.ensure_future(stop.wait())
        lost_wait = asyncio.ensure_future(self.lost_leadership.wait())
        await asyncio.wait({stop_wait, lost_wait}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        lost_wait.cancel()
        lost = self.lost_leadership.is_set()
        await self.stop(release=not lost)
        return 1 if lost else 0
