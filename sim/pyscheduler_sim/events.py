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

from pyscheduler.api import validation as v
from pyscheduler.api.validation import FieldError
from pyscheduler_sim.selectors import FieldSelector

__all__ = ["event_about", "field_selector_to_core", "from_core", "to_core",
           "validate_new_api_update"]

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


# What an update through events.k8s.io/v1 may not change, as kube names it (the core fields;
# ``reason`` is checked twice there, so it is reported twice).
_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp",
              "lastTimestamp", "count", "reason", "type", "eventTime", "action", "related",
              "reportingComponent", "reportingInstance")
_FIELD_NAMES = {"reportingComponent": "reportingController"}


def validate_new_api_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """``ValidateEventUpdate`` for a request through events.k8s.io/v1 (over the stored core
    forms): what the event says is immutable; the core API may still change it."""
    errs = []
    for key in _IMMUTABLE:
        if new.get(key) != old.get(key):
            value = new.get(key)
            shown = value if isinstance(value, (str, int)) else v.Verbatim(v.go_json(value))
            errs.append(v.invalid(_FIELD_NAMES.get(key, key), shown, "field is immutable"))
    return errs
