"""Writing labels and annotations on a pod before it is bound (PreBind plugins' one API call)."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from pyscheduler.binding.outcome import POD_GONE
from pyscheduler.framework.pod import PodInfo
from pyscheduler.framework.status import Code, Status
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.errors import NotFoundError

__all__ = ["patch_pod_metadata"]

log = structlog.get_logger("pyscheduler.scheduler")


async def patch_pod_metadata(client: KubeClient, pod: PodInfo,
                             metadata: dict[str, Any]) -> Status | None:
    """Merge ``metadata`` (labels, annotations) into the pod; None when written,
    :data:`POD_GONE`, or an Error (a retry; logged here)."""
    try:
        await client.patch(api_path("v1", "pods", namespace=pod.namespace, name=pod.name),
                           {"metadata": metadata})
    except NotFoundError:
        return POD_GONE
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("could not label the pod before binding", pod=pod.key, error=str(exc))
        return Status(Code.ERROR, ("could not label the pod before binding",))
    return None
