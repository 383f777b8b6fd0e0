"""A pool that keeps refusing a pod's instance: remember it, and give the pod a try in the next
pool.

When the provider gives up on a pod (its pool refused the instance ``create_retries`` times:
quota, capacity, a size it does not run) it marks the pod Failed and calls
:class:`RefusalHandler`. The handler records the refusal on the pool's virtual node row
(:meth:`Placement.pool_refused`): pods at least as large skip that pool for ``ttl`` seconds, so a
controller's replacement pod goes to the next pool. A bare pod has no controller to replace it,
so the handler makes the replacement itself: a copy, unbound, named ``<name>-p<attempt>`` (a
pod's node cannot change), at most one per further pool the pod may use — a pod whose
``wssp/cloud-platform`` label allows one pool only gets no copy, and an event says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from pyscheduler.api.names import (
    BURST_ATTEMPT_ANNOTATION,
    INSTANCE_ANNOTATION,
    PLATFORM_LABEL,
    POOL_LABEL,
    REPLACES_ANNOTATION,
    VIRTUAL_LABEL,
)
from pyscheduler.framework.pod import PodSpecError, pod_info
from pyscheduler.kube.errors import AlreadyExistsError, KubeError
from pyscheduler.virtual.node import PoolConfig
from pyscheduler.virtual.types import Placement
from pyscheduler.kube.client import api_path

__all__ = ["REFUSAL_TTL_SECONDS", "RefusalHandler", "next_pool_pod", "pools_for"]

log = structlog.get_logger("pyscheduler.virtual.refusals")

REFUSAL_TTL_SECONDS = 300.0
_MAX_NAME = 253
Obj = dict[str, Any]


def pools_for(pod: Mapping[str, Any], pools: Sequence[PoolConfig]) -> list[PoolConfig]:
    """The configured pools ``pod`` may burst to (its ``wssp/cloud-platform`` label)."""
    platform = ((pod.get("metadata") or {}).get("labels") or {}).get(PLATFORM_LABEL)
    return [p for p in pools if platform is None or p.platform == platform]


def next_pool_pod(pod: Mapping[str, Any], pools: int) -> dict[str, Any] | None:
    """The copy of a bare pod whose pool kept refusing it, to be scheduled again (the refused
    pool is skipped): ``None`` for a pod a controller owns (the controller replaces it), a pod
    being deleted, or one that has already had a try in each of the ``pools`` it may use."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") or any(
            ref.get("controller") for ref in meta.get("ownerReferences") or ()):
        return None
    annotations = dict(meta.get("annotations") or {})
    try:
        attempt = int(annotations.get(BURST_ATTEMPT_ANNOTATION, "1")) + 1
    except ValueError:
        attempt = 2
    if attempt > pools:
        return None
    original = str(meta.get("name", ""))
    replaces = annotations.get(REPLACES_ANNOTATION)
    if replaces:  # a copy of a copy keeps the first pod's name as its base
        original = replaces.split(" ", 1)[0]
    suffix = f"-p{attempt}"
    name = original[:_MAX_NAME - len(suffix)].rstrip("-.") + suffix
    annotations.pop(INSTANCE_ANNOTATION, None)
    annotations[BURST_ATTEMPT_ANNOTATION] = str(attempt)
    annotations[REPLACES_ANNOTATION] = f"{original} ({meta.get('name')} {meta.get('uid', '')})"
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if k not in (VIRTUAL_LABEL, POOL_LABEL)}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    out_meta: dict[str, Any] = {"name": name, "namespace": meta.get("namespace"),
                                "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": out_meta, "spec": spec}


class RefusalHandler:
    """The provider's ``on_create_failed``: see the module docstring."""

    def __init__(self, placement: Placement, pools: Sequence[PoolConfig], *,
                 ttl: float = REFUSAL_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.placement = placement
        self.pools = tuple(pools)
        self.ttl = ttl
        self.clock = clock

    async def __call__(self, pod: Obj) -> None:
        try:
            info = pod_info(pod)
        except PodSpecError as exc:
            if exc.partial is None:
                return
            info = exc.partial
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        self.placement.pool_refused(node, info.requests.get("cpu", 0),
                                    info.requests.get("memory", 0), self.clock() + self.ttl)
        await self._retry_in_next_pool(pod)

    async def _retry_in_next_pool(self, pod: Obj) -> None:
        """A bare pod the cloud refused: its copy is scheduled again and skips that pool."""
        recorder = self.placement.recorder
        usable = pools_for(pod, self.pools)
        replacement = next_pool_pod(pod, len(usable))
        meta = pod.get("metadata") or {}
        owned = any(ref.get("controller") for ref in meta.get("ownerReferences") or ())
        if replacement is None:
            if not owned and not meta.get("deletionTimestamp"):
                platform = (meta.get("labels") or {}).get(PLATFORM_LABEL)
                which = f" of platform {platform}" if platform else ""
                recorder.record(pod, type_="Warning", reason="BurstRetryExhausted",
                                action="Burst",
                                note=f"no other pool{which} to try: the pod had a try in each "
                                     f"of the {len(usable)} it may use")
            return
        new_meta = replacement["metadata"]
        try:
            await self.placement.client.create(
                api_path("v1", "pods", namespace=new_meta["namespace"]), replacement)
        except AlreadyExistsError:
            pass  # made before a restart: the copy exists already
        except KubeError as exc:
            recorder.record(pod, type_="Warning", reason="BurstRetryFailed", action="Burst",
                            note=f"could not create {new_meta['name']} to try the next pool: "
                                 f"{exc}")
            return
        recorder.record(pod, type_="Normal", reason="BurstRetry", action="Burst",
                        note=f"created {new_meta['name']} to try the next pool (attempt "
                             f"{new_meta['annotations'][BURST_ATTEMPT_ANNOTATION]} of "
                             f"{len(usable)})")
