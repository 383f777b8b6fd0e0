"""The only package that talks to a Kubernetes API server.

* :mod:`~pyscheduler.kube.client` — :class:`KubeClient`, async HTTP (aiohttp) with raw JSON
  (orjson) answers; the official ``kubernetes`` package only loads configuration.
* :mod:`~pyscheduler.kube.errors` — the error hierarchy (``NotFoundError``, ``ConflictError``,
  ``GoneError``, ``TransportError``, ...) and :func:`is_retryable`.
* :mod:`~pyscheduler.kube.informer` — list+watch into a dict, with handlers, resuming and
  relisting as client-go's reflector does.
* :mod:`~pyscheduler.kube.events` — ``events.k8s.io/v1`` Events with series aggregation and a
  rate limit.
* :mod:`~pyscheduler.kube.leader` — Lease-based leader election.

Nothing else in the project imports ``aiohttp`` for the API server or the ``kubernetes``
package; the layering is checked by import-linter.
"""

from __future__ import annotations

from pyscheduler.kube.client import ConnectionConfig, KubeClient, api_path, load_config
from pyscheduler.kube.errors import (
    AlreadyExistsError,
    ApiStatusError,
    ConfigError,
    ConflictError,
    GoneError,
    KubeError,
    NotFoundError,
    TransportError,
    is_retryable,
)
from pyscheduler.kube.events import EventRecorder
from pyscheduler.kube.informer import Informer, object_key
from pyscheduler.kube.leader import LeaderElector

__all__ = [
    "AlreadyExistsError",
    "ApiStatusError",
    "ConfigError",
    "ConflictError",
    "ConnectionConfig",
    "EventRecorder",
    "GoneError",
    "Informer",
    "KubeClient",
    "KubeError",
    "LeaderElector",
    "NotFoundError",
    "TransportError",
    "api_path",
    "is_retryable",
    "load_config",
    "object_key",
]
