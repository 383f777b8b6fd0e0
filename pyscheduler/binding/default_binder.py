"""DefaultBinder (Bind): the pod's ``binding`` subresource, as kube's ``defaultbinder`` writes
it, within the scheduler's concurrency bound, retried on transient errors. After a 409 or 404
the pod is read again to learn what became of it: bound there by an earlier attempt that timed
out (success), bound elsewhere, deleted — or still pending (a retry)."""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar

import structlog

from pyscheduler.binding.outcome import BOUND_ELSEWHERE, POD_GONE
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.pod import PodInfo
from pyscheduler.framework.status import Code, Status
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import ApiStatusError, ConflictError, NotFoundError, is_retryable
from pyscheduler.metrics import SchedulerMetrics

__all__ = ["BIND_RETRIES", "DefaultBinder"]

log = structlog.get_logger("pyscheduler.scheduler")

BIND_RETRIES = 3
#: Not bound now: the pod goes back to the queue (logged here; no condition is written).
RETRY = Status(Code.ERROR, ("binding failed",))


class DefaultBinder:
    name: ClassVar[str] = "DefaultBinder"

    def __init__(self, client: KubeClient, *, concurrency: int, timeout_seconds: float,
                 metrics: SchedulerMetrics | None = None) -> None:
        self.client = client
        self.slots = asyncio.Semaphore(concurrency)
        self.timeout = timeout_seconds
        self.metrics = metrics

    async def bind(self, ctx: CycleContext, node: str) -> Status | None:
        pod = ctx.pod
        try:
            async with self.slots:
                start = time.perf_counter()
                status = await self._with_retries(pod, node)
                if self.metrics is not None:
                    self.metrics.bind_duration.observe(time.perf_counter() - start)
            return status
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("binding failed", pod=pod.key, node=node)
            return RETRY

    async def _with_retries(self, pod: PodInfo, node: str) -> Status | None:
        delay = 0.1
        unanswered = False  # an earlier attempt got no answer: it may have bound the pod
        for attempt in range(BIND_RETRIES + 1):
            try:
                await self.client.bind(pod.namespace, pod.name, node, uid=pod.uid,
                                       timeout=self.timeout)
                return None
            except (ConflictError, NotFoundError) as exc:
                outcome = await self._what_became_of(pod, node)
                if unanswered and outcome is None and isinstance(exc, ConflictError):
                    # Our own earlier attempt did bind it (its answer was lost): no second
                    # binding of anyone's, and no Conflict to count.
                    log.info("an earlier binding attempt that got no answer did bind the pod",
                             pod=pod.key, node=node)
                else:
                    self._count(exc)
                return outcome
            except ApiStatusError as exc:
                self._count(exc)
                unanswered = True
                if not is_retryable(exc):
                    log.warning("binding refused", pod=pod.key, node=node, error=exc.message)
                    return RETRY
            except Exception as exc:  # transport errors, timeouts
                self._count(exc)
                unanswered = True
                if not is_retryable(exc):
                    log.warning("binding failed", pod=pod.key, node=node, error=str(exc))
                    return RETRY
            if attempt < BIND_RETRIES:
                await asyncio.sleep(delay)
                delay *= 2
        log.warning("binding kept failing; requeueing", pod=pod.key, node=node)
        return RETRY

    def _count(self, exc: BaseException) -> None:
        if self.metrics is not None:
            reason = exc.reason if isinstance(exc, ApiStatusError) else type(exc).__name__
            self.metrics.bind_errors.labels(reason=reason).inc()

    async def _what_became_of(self, pod: PodInfo, node: str) -> Status | None:
        try:
            current = await self.client.get(api_path("v1", "pods", namespace=pod.namespace,
                                                     name=pod.name))
        except NotFoundError:
            return POD_GONE
        except Exception:
            return RETRY
        meta = current.get("metadata") or {}
        if meta.get("uid") != pod.uid:
            return POD_GONE  # deleted and recreated: the new pod comes through the informer
        bound_to = (current.get("spec") or {}).get("nodeName")
        if bound_to == node:
            return None  # an earlier attempt that timed out did succeed
        if bound_to:
            return BOUND_ELSEWHERE
        return RETRY
