"""Workload objects (Services, ReplicationControllers, ReplicaSets, StatefulSets) as the
informers decode them, for the default topology spread constraints, and :func:`feed_workload`,
which hands one to a :class:`~pyscheduler.spread_defaults.WorkloadSelectors` as its informer
would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyscheduler.spread_defaults import WorkloadSelectors

__all__ = ["feed_workload", "replica_set", "replication_controller", "service",
           "stateful_set"]

Obj = dict[str, Any]


def _object(api_version: str, kind: str, name: str, namespace: str, spec: Obj) -> Obj:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "resourceVersion": "1"},
            "spec": spec}


def service(name: str, selector: Mapping[str, str] | None, namespace: str = "default") -> Obj:
    spec: Obj = {"ports": [{"port": 80}]}
    if selector is not None:
        spec["selector"] = dict(selector)
    return _object("v1", "Service", name, namespace, spec)


def replication_controller(name: str, selector: Mapping[str, str] | None,
                           namespace: str = "default") -> Obj:
    spec: Obj = {"replicas": 1}
    if selector is not None:
        spec["selector"] = dict(selector)
    return _object("v1", "ReplicationController", name, namespace, spec)


def replica_set(name: str, selector: Obj | None, namespace: str = "default") -> Obj:
    spec: Obj = {"replicas": 1}
    if selector is not None:
        spec["selector"] = selector
    return _object("apps/v1", "ReplicaSet", name, namespace, spec)


def stateful_set(name: str, selector: Obj | None, namespace: str = "default") -> Obj:
    spec: Obj = {"replicas": 1, "serviceName": name}
    if selector is not None:
        spec["selector"] = selector
    return _object("apps/v1", "StatefulSet", name, namespace, spec)


def feed_workload(selectors: WorkloadSelectors, obj: Obj) -> None:
    """What the informer of ``obj``'s kind does when the object is added (or updated)."""
    setter = {"Service": selectors.set_service,
              "ReplicationController": selectors.set_replication_controller,
              "ReplicaSet": selectors.set_replica_set,
              "StatefulSet": selectors.set_stateful_set}[obj["kind"]]
    setter(obj)
