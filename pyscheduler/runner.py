"""``pyscheduler run``: wire the scheduler, its informers, leader election and health server.

Start-up order: validate the configuration (done by the caller), connect, serve ``/healthz`` and
``/metrics`` at once (``/readyz`` fails until the informers have synced), sync the informers,
then either compete for the lease or, with leader election off, start scheduling.

Like kube-scheduler, a replica that loses the lease stops scheduling immediately (the loop and
the bindings in flight are cancelled) and exits with an error, so its supervisor restarts it as
a clean standby; :attr:`SchedulerApp.lost_leadership` tells in-process callers.

Never healthy-but-dead: every long-lived task (informers, the scheduling loop and its
housekeeping, the event recorder, leader election, the fragment manager's and the virtual
nodes' loops) is watched by a :class:`~pyscheduler.kube.tasks.Supervisor`. If one ends — a bug,
or anything cancelling it — ``/readyz`` and ``/livez`` fail at once, scheduling stops, the Lease
is released and the process exits 1, so a standby takes over.

Stopping works in every state: a stop request during start-up (the API server unreachable,
informers never synced) cancels the start, and :meth:`SchedulerApp.stop` gives each step a time
limit, so ``pyscheduler run`` ends within seconds of SIGTERM.
"""

from __future__ import annotations

import asyncio
import base64
import gc
from typing import TYPE_CHECKING, Any

import structlog

from pyscheduler.settings import SchedulerConfig
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.leader import LeaderElector
from pyscheduler.kube.tasks import Supervisor, bounded, cancel_and_wait
from pyscheduler.metrics import HealthServer, SchedulerMetrics
from pyscheduler.scheduler import Scheduler
from pyscheduler.wasm.manager import FragmentManager
from pyscheduler.wasm.storage import StorageConfig

if TYPE_CHECKING:
    from pyscheduler.virtual.cloud import HttpCloudAdapter
    from pyscheduler.virtual.node import VirtualNodeManager
    from pyscheduler.virtual.provider import VirtualPodProvider
    from pyscheduler.virtual.rebalancer import Rebalancer

__all__ = ["SchedulerApp"]

log = structlog.get_logger("pyscheduler.runner")

#: How long the garbage collector may pause while the initial lists are read (``freeze_heap``).
SYNC_GC_PAUSE_SECONDS = 60.0

# How long releasing the Lease, and each other stop step, may take before stop goes on without.
STOP_STEP_SECONDS = 3.0


class SchedulerApp:
    def __init__(self, config: SchedulerConfig, client: KubeClient, *,
                 freeze_heap: bool = False) -> None:
        """``freeze_heap``: the process is this scheduler's own (``pyscheduler run``); once
        the informers have synced, what the initial lists built lives as long as the process
        (the caches of every node and pod) and is moved out of the garbage collector's way
        (``gc.freeze``: full collections no longer walk it)."""
        self.config = config
        self.freeze_heap = freeze_heap
        self.client = client
        self.metrics = SchedulerMetrics(profile=config.scheduler_name)
        vn = config.virtual_nodes
        if vn.enabled:
            self.metrics.init_pools(p.name for p in vn.pools)
        self.scheduler = Scheduler(client, config, metrics=self.metrics)
        self.metrics.init_informers(i.name for i in self.scheduler.informers)
        self.health = HealthServer(self.metrics, host=config.metrics_host,
                                   port=config.metrics_port)
        self.health.add_readiness_check("informers-synced", lambda: self.scheduler.synced)
        self.supervisor = Supervisor(self._core_task_ended)
        self.core_failed = asyncio.Event()
        for add in (self.health.add_readiness_check, self.health.add_liveness_check):
            add("core-tasks", lambda: self.supervisor.failure is None)
        self.fragments = FragmentManager(
            self.scheduler.cache.table, client=client, settings=config.fragments,
            default=config.schedule_fragment, metrics=self.metrics,
            on_ready=self.scheduler.fragment_ready, writes_status=lambda: self.leading,
            waiting=self.scheduler.permits)
        self.scheduler.select = self.fragments.select
        self.cloud: HttpCloudAdapter | None = None
        self.virtual_nodes: VirtualNodeManager | None = None
        self.provider: VirtualPodProvider | None = None
        self.rebalancer: Rebalancer | None = None
        self.lost_leadership = asyncio.Event()
        self._stopping = False  # stop() called: stepping down is then expected, not a loss
        self.elector: LeaderElector | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._leading_task: asyncio.Task[Any] | None = None
        if vn.enabled:
            self._wire_virtual_nodes()

    def _wire_virtual_nodes(self) -> None:
        # Imported here: most schedulers run without cloud pools, and start faster without.
        from pyscheduler.virtual.cloud import HttpCloudAdapter
        from pyscheduler.virtual.node import PoolConfig, VirtualNodeManager
        from pyscheduler.virtual.provider import VirtualPodProvider
        from pyscheduler.virtual.rebalancer import Rebalancer
        from pyscheduler.virtual.refusals import RefusalHandler

        vn = self.config.virtual_nodes
        metrics = self.metrics

        def observe(pool: str, operation: str, result: str, seconds: float) -> None:
            metrics.cloud_requests.labels(pool, operation, result).inc()
            metrics.cloud_request_duration.labels(pool, operation).observe(seconds)

        self.cloud = HttpCloudAdapter(vn.cloud_url, token=vn.cloud_token,
                                      timeout=vn.cloud_timeout_seconds, metrics_hook=observe)
        pools = [PoolConfig(p.name, p.platform, p.max_pods, p.labels) for p in vn.pools]
        self.virtual_nodes = VirtualNodeManager(
            self.client, self.cloud, pools, heartbeat_seconds=vn.heartbeat_seconds,
            refresh_seconds=vn.refresh_seconds,
            not_ready_after_seconds=vn.not_ready_after_seconds)
        self.provider = VirtualPodProvider(
            self.client, self.cloud, pools, recorder=self.scheduler.recorder,
            on_create_failed=RefusalHandler(self.scheduler, pools),
            orphan_grace_seconds=vn.orphan_grace_seconds,
            reconcile_seconds=vn.reconcile_seconds, metrics=self.metrics,
            pods=self.scheduler.pods_informer)
        self.rebalancer = Rebalancer(self.scheduler, self.config.rebalancer)
        self.scheduler.observer = self.rebalancer

    async def _storage_config(self) -> StorageConfig:
        s = self.config.storage
        access, secret = s.access_key, s.secret_key
        if s.credentials_secret is not None:
            ref = s.credentials_secret
            obj = await self.client.get(api_path("v1", "secrets", namespace=ref.namespace,
                                                 name=ref.name))
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
                             timeout_seconds=s.timeout_seconds,
                             allowed_http_hosts=s.allowed_http_hosts,
                             allow_private_addresses=s.allow_private_addresses)

    async def start(self) -> None:
        await self.health.start()
        self.fragments.storage = await self._storage_config()
        self.fragments.supervisor = self.supervisor
        resume: asyncio.TimerHandle | None = None
        if self.freeze_heap:
            # The initial lists build what lives as long as the process, and every collection
            # would walk all of it once more (a fifth of the sync at 150,000 pods): the
            # collector pauses until the heap is frozen, at most SYNC_GC_PAUSE_SECONDS (an
            # API server that cannot be reached must not let garbage pile up meanwhile).
            gc.disable()
            resume = asyncio.get_running_loop().call_later(SYNC_GC_PAUSE_SECONDS, gc.enable)
        informers = self.scheduler.start_informers()
        self.supervisor.watch_all(self.scheduler.tasks)
        try:
            await informers
        finally:
            if resume is not None:
                resume.cancel()
                gc.freeze()
                gc.enable()
        await self.fragments.start()
        self.supervisor.watch_all(self.fragments.tasks)
        le = self.config.leader_election
        if not le.enabled:
            self.metrics.set_leader(True)
            self._loop_task = asyncio.get_running_loop().create_task(self._lead(),
                                                                     name="leading")
            return
        self.elector = LeaderElector(
            self.client, namespace=le.lease_namespace, name=le.lease_name,
            identity=le.identity, lease_duration=le.lease_duration_seconds,
            renew_deadline=le.renew_deadline_seconds, retry_period=le.retry_period_seconds,
            on_started_leading=self._lead, on_stopped_leading=self._lost)
        self.supervisor.watch("leader election", self.elector.start())

    async def _lead(self) -> None:
        self.metrics.set_leader(True)
        self._leading_task = asyncio.current_task()
        self.supervisor.watch("scheduling loop", self._leading_task)
        self.fragments.republish()
        # The virtual-kubelet role (virtual nodes, their pods' instances) and the rebalancer
        # act on the cluster: only the leader runs them, as it alone schedules.
        if self.virtual_nodes is not None:
            await self.virtual_nodes.start()
            self.supervisor.watch_all(self.virtual_nodes.tasks)
        if self.provider is not None:
            await self.provider.start()
            self.supervisor.watch_all(self.provider.tasks)
        if self.rebalancer is not None:
            self.rebalancer.start()
            self.supervisor.watch_all(self.rebalancer.tasks)
        self.scheduler.begin()
        self.supervisor.watch_all(self.scheduler.tasks)
        await self.scheduler.run_loop()

    def _lost(self) -> None:
        self.metrics.set_leader(False)
        self.supervisor.stop()  # what ends now ends because leadership did
        if self._stopping:
            log.info("stopped leading: shutting down")
        else:
            log.error("leader election lost: stopped scheduling")
        self.lost_leadership.set()

    def _core_task_ended(self, name: str, why: str) -> None:
        """A long-lived task ended: stop scheduling now; run_until then stops the rest,
        releases the Lease and exits 1."""
        self.metrics.set_leader(False)
        # Leading on with a dead part would bind on a stale view (or not at all).
        if self._leading_task is not None:
            self._leading_task.cancel()
        self.core_failed.set()

    @property
    def leading(self) -> bool:
        if self.supervisor.failure is not None:
            return False
        if not self.config.leader_election.enabled:
            return True
        return self.elector is not None and self.elector.is_leader

    async def stop(self, *, release: bool = True) -> None:
        """Stop everything, each step within :data:`STOP_STEP_SECONDS` (an API server that does
        not answer must not hold the process)."""
        self._stopping = True
        self.supervisor.stop()
        await cancel_and_wait(self._loop_task)
        if self.elector is not None:
            await self._step("leader election", self.elector.stop(release=release))
        if self.rebalancer is not None:
            await self._step("rebalancer", self.rebalancer.stop())
        if self.provider is not None:
            await self._step("virtual pod provider", self.provider.stop())
        if self.virtual_nodes is not None:
            await self._step("virtual nodes", self.virtual_nodes.stop())
        if self.cloud is not None:
            await self._step("cloud adapter", self.cloud.close())
        await self._step("scheduler", self.scheduler.stop())
        await self._step("fragments", self.fragments.stop())
        await self._step("health server", self.health.stop())

    async def _step(self, what: str, work: Any) -> None:
        try:
            await bounded(work, STOP_STEP_SECONDS)
        except asyncio.TimeoutError:
            log.warning("stopping took too long; going on without it", part=what,
                        seconds=STOP_STEP_SECONDS)
        except Exception:
            log.exception("stopping failed; going on", part=what)

    async def run_until(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (0), leadership is lost (1) or a core task ended (1).

        ``stop`` is honoured during start-up too. A failure to start (the metrics port taken,
        a configuration the cluster refuses) raises after everything started is stopped."""
        stop_wait = asyncio.ensure_future(stop.wait())
        failed_wait = asyncio.ensure_future(self.core_failed.wait())
        starting = asyncio.ensure_future(self.start())
        try:
            await asyncio.wait({stop_wait, failed_wait, starting},
                               return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                await cancel_and_wait(starting)
                if not self.core_failed.is_set():
                    log.info("stop requested during start-up")
                    await self.stop()
                    return 0
            elif starting.exception() is not None:
                await self.stop()
                starting.result()  # raises
            lost_wait = asyncio.ensure_future(self.lost_leadership.wait())
            await asyncio.wait({stop_wait, lost_wait, failed_wait},
                               return_when=asyncio.FIRST_COMPLETED)
            lost_wait.cancel()
        finally:
            stop_wait.cancel()
            failed_wait.cancel()
        if self.core_failed.is_set():
            failure = self.supervisor.failure
            log.error("stopping: a core task ended", task=failure[0] if failure else "?",
                      why=failure[1] if failure else "?")
            await self.stop(release=True)
            return 1
        lost = self.lost_leadership.is_set()
        await self.stop(release=not lost)
        return 1 if lost else 0
