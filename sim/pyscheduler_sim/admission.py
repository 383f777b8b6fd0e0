"""Admission plugins of the embedded API server that need the rest of the cluster.

kube-apiserver admits every write in two passes around the object's own validation: the
*mutating* plugins may change the object, then the object is defaulted and validated, then the
*validating* plugins may refuse it (``k8s.io/apiserver/pkg/admission``). Plugins that need no
other object (ServiceAccount, DefaultTolerationSeconds) live with their kinds' strategies in
:mod:`pyscheduler_sim.strategies`. The ones that read other objects implement
:class:`AdmissionPlugin` and are called by the registry:

* Priority (:mod:`pyscheduler_sim.priority`): resolves a new pod's ``priorityClassName`` and
  allows one ``globalDefault`` PriorityClass;
* DefaultStorageClass and StorageObjectInUseProtection (:mod:`pyscheduler_sim.storage`): a new
  claim without a class gets the default one, new claims and volumes get their protection
  finalizers;
* PodTopologyLabels (:class:`PodTopologyLabels`, on by default in kube 1.36): a pod
  created on a node, or bound to one, gets the node's ``topology.kubernetes.io/zone`` and
  ``region`` labels.

Calls on subresources (``status``, ``binding``, ...) are not admitted: every plugin here
ignores them in kube too, but for PodTopologyLabels' binding, which the registry's bind calls. A plugin refuses with :func:`forbidden` (403, as
``admission.NewForbidden`` answers), naming the object as kube does before a generated name
exists (its ``generateName``).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pyscheduler_sim import errors
from pyscheduler_sim.resources import ResourceType

__all__ = ["AdmissionPlugin", "Operation", "PodTopologyLabels", "forbidden", "request_name"]

Obj = dict[str, Any]

#: The operations admission sees (DELETE has no plugin here).
Operation = Literal["CREATE", "UPDATE"]


class AdmissionPlugin(Protocol):
    def admit(self, operation: Operation, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Mutating admission: may change ``obj``; raises :class:`errors.ApiError` to refuse.

        On CREATE it runs before the name is generated and the object defaulted."""

    def validate(self, operation: Operation, rt: ResourceType, obj: Obj,
                 old: Obj | None) -> None:
        """Validating admission, once ``obj`` passed validation: may only refuse."""


def request_name(obj: Obj) -> str:
    """The name admission errors carry (``admission.extractResourceName``): the object's name,
    else its ``generateName``, else ``Unknown``."""
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "Unknown")


def forbidden(rt: ResourceType, obj: Obj, why: str) -> errors.ApiError:
    """``admission.NewForbidden``: ``pods "web-1" is forbidden: <why>``."""
    return errors.forbidden(rt.group, rt.plural, request_name(obj), why)


#: The node labels kube's PodTopologyLabels plugin copies onto pods.
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")


class PodTopologyLabels:
    """A pod placed on a node carries the node's zone and region labels, overwriting its own,
    so that workloads can read their topology through the downward API."""

    def __init__(self, node_labels: Any) -> None:
        #: ``node_labels(name)``: a node's labels, or None when there is no such node.
        self.node_labels = node_labels

    def labels_for(self, node: str) -> dict[str, str]:
        labels = self.node_labels(node) or {}
        return {k: labels[k] for k in TOPOLOGY_LABELS if k in labels}

    def admit(self, operation: Operation, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        if operation != "CREATE" or (rt.group, rt.kind) != ("", "Pod"):
            return
        node = (obj.get("spec") or {}).get("nodeName") if isinstance(obj.get("spec"), dict) \
            else None
        if not node or not isinstance(node, str):
            return
        copied = self.labels_for(node)
        meta = obj.get("metadata")
        if copied and isinstance(meta, dict):
            labels = meta.get("labels")
            meta["labels"] = {**(labels if isinstance(labels, dict) else {}), **copied}

    def validate(self, operation: Operation, rt: ResourceType, obj: Obj,
                 old: Obj | None) -> None:
        return None
