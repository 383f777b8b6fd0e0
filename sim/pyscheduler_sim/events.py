"""One store for events, two APIs: ``core/v1`` Event and ``events.k8s.io/v1`` Event.

kube-apiserver keeps a single kind of event object and serves it through both APIs, converting
field names on the way in and out; an event written by kube-scheduler through
``events.k8s.io/v1`` shows up in ``kubectl describe pod``, which reads ``core/v1``. The embedded
server does the same: events are stored in the ``core/v1`` shape and converted for the other API.

=================================  ==========================
events.k8s.io/v1                   core/v1
=================================  ==========================
regarding                          involvedObject
note                               message
reportingController                reportingComponent
deprecatedSource                   source
deprecatedFirstTimestamp           firstTimestamp
deprecatedLastTimestamp            lastTimestamp
deprecatedCount                    count
=================================  ==========================

Other fields (eventTime, series, action, reason, related, type, reportingInstance) share names.

:func:`event_about` builds the core/v1 Event a controller records about an object (the
kubelet's pod events are built by :func:`pyscheduler_sim.kubelet.pod_event`).
"""

from __future__ import annotations

import time
from typing import Any

from pyscheduler_sim.selectors import FieldSelector

__all__ = ["event_about", "field_selector_to_core", "from_core", "to_core"]

_NEW_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_NEW = {v: k for k, v in _NEW_TO_CORE.items()}
NEW_API_VERSION = "events.k8s.io/v1"


def to_core(obj: dict[str, Any]) -> dict[str, Any]:
    out = {_NEW_TO_CORE.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


def from_core(obj: dict[str, Any]) -> dict[str, Any]:
    out = {_CORE_TO_NEW.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = NEW_API_VERSION, "Event"
    return out


def field_selector_to_core(selector: FieldSelector) -> FieldSelector:
    """Field selectors of the new API, in terms of the stored core fields."""
    def name(field: str) -> str:
        if field.startswith("regarding."):
            return "involvedObject." + field[len("regarding."):]
        return "reportingComponent" if field == "reportingController" else field
    return FieldSelector((name(f), op, v) for f, op, v in selector.requirements)


def event_about(obj: dict[str, Any], reason: str, message: str, component: str, now: str,
                type_: str = "Normal") -> dict[str, Any]:
    """A core/v1 Event about ``obj`` from ``component``, as client-go's recorder writes it
    (events about cluster-scoped objects go to the ``default`` namespace)."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or ""
    involved = {"kind": obj.get("kind", ""), "name": meta["name"], "uid": meta.get("uid", ""),
                "apiVersion": obj.get("apiVersion", ""),
                "resourceVersion": meta.get("resourceVersion", "")}
    if namespace:
        involved["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{time.time_ns():x}",
                         "namespace": namespace or "default"},
            "involvedObject": involved, "reason": reason, "message": message,
            "source": {"component": component}, "firstTimestamp": now, "lastTimestamp": now,
            "count": 1, "type": type_, "eventTime": None, "reportingComponent": component,
            "reportingInstance": ""}
