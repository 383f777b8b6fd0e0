"""VolumeZone: a pod goes only where its bound volumes' zones and regions are.

kube's ``volumezone`` plugin (``volume_zone.go``), for the pod's ``persistentVolumeClaim``
volumes (not generic ephemeral ones):

* **For the pod** (PreFilter; fails every node, ``UnschedulableAndUnresolvable``): each claim
  must exist (``persistentvolumeclaim "data" not found``). A claim naming a volume needs that
  volume (``persistentvolume "pv-1" not found``). A claim naming none is skipped when its
  class binds ``WaitForFirstConsumer`` (VolumeBinding chooses its volume per node); otherwise
  it is an error: ``PersistentVolumeClaim had no pv name and storageClass name`` without a
  class, ``storageclass.storage.k8s.io "fast" not found``, or ``PersistentVolume had no name``
  (an ``Immediate`` claim the PV controller has not bound yet).
* **Per node**: a volume labelled with a zone or region (``topology.kubernetes.io/zone``,
  ``topology.kubernetes.io/region`` or their deprecated ``failure-domain.beta.kubernetes.io/``
  forms; a value may list several, joined by ``__``; a list with an empty entry is ignored)
  can only be used on a node carrying one of those values under the same key — for a
  deprecated key the node's GA label is read when the node lacks the deprecated one. A node
  without any of the four labels passes (a single-zone cluster's nodes need not be
  labelled). Other nodes fail with ``node(s) had no available volume zone``
  (``UnschedulableAndUnresolvable``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray, NodeTable
from pyscheduler.framework.volumes import WAIT_FOR_FIRST_CONSUMER, claim_refs, not_found

__all__ = ["ERR_REASON", "NAME", "TOPOLOGY_LABELS", "VolumeZone"]

NAME = "VolumeZone"
ERR_REASON = "node(s) had no available volume zone"
TOPOLOGY_LABELS = ("failure-domain.beta.kubernetes.io/zone",
                   "failure-domain.beta.kubernetes.io/region",
                   "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
#: translateToGALabel
_GA = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
       "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}

NO_NAMES = "PersistentVolumeClaim had no pv name and storageClass name"
NO_VOLUME = "PersistentVolume had no name"


def zones(label: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: the ``__``-separated values, trimmed; None when one is empty."""
    out = set()
    for zone in label.split("__"):
        zone = zone.strip()
        if not zone:
            return None
        out.add(zone)
    return frozenset(out)


def _topologies(ctx: CycleContext) -> list[tuple[str, frozenset[str]]] | str:
    """``getPVbyPod``: the (label key, values) the pod's bound volumes require, or the
    problem that holds on every node."""
    pod, catalog = ctx.pod, ctx.table.volumes
    out: list[tuple[str, frozenset[str]]] = []
    for ref in claim_refs(pod):
        if ref.ephemeral:
            continue
        claim = catalog.claims.get((pod.namespace, ref.name))
        if claim is None:
            return not_found("persistentvolumeclaim", ref.name)
        if not claim.volume_name:
            if not claim.storage_class:
                return NO_NAMES
            sc = catalog.classes.get(claim.storage_class)
            if sc is None:
                return not_found("storageclass.storage.k8s.io", claim.storage_class)
            if sc.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return NO_VOLUME
        volume = catalog.volumes.get(claim.volume_name)
        if volume is None:
            return not_found("persistentvolume", claim.volume_name)
        for key in TOPOLOGY_LABELS:
            label = volume.labels.get(key)
            values = zones(label) if label is not None else None
            if values is not None:
                out.append((key, values))
    return out


def _any_value(table: NodeTable, key: str, values: frozenset[str]) -> BoolArray:
    rows = np.zeros(table.n, np.bool_)
    for value in values:
        rows |= table.label_mask(key, value)
    return rows


class VolumeZone:
    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("StorageClass", ActionType.ADD),
                on("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                on("PersistentVolumeClaim", ActionType.ADD | ActionType.UPDATE),
                on("PersistentVolume", ActionType.ADD | ActionType.UPDATE))

    def filter(self, ctx: CycleContext) -> FilterResult:
        if not ctx.pod.claims:
            return FilterResult.all_pass()
        topologies = _topologies(ctx)
        if isinstance(topologies, str):
            # kube's PreFilter: the pod is rejected before any node is looked at.
            return FilterResult(np.zeros(ctx.n, np.bool_),
                                [Reason(topologies, ctx.nodes().copy(), True, prefilter=True)])
        if not topologies:
            return FilterResult.all_pass()
        table = ctx.table
        labelled = np.zeros(table.n, np.bool_)
        for key in TOPOLOGY_LABELS:
            labelled |= table.has_label(key)
        fits = np.ones(table.n, np.bool_)
        for key, values in topologies:
            here = _any_value(table, key, values)
            ga = _GA.get(key)
            if ga is not None:
                has = table.has_label(key)
                here = (has & here) | (~has & _any_value(table, ga, values))
            fits &= here
        passed = ~labelled | fits
        return FilterResult(passed, [Reason(ERR_REASON, ~passed & ctx.nodes(), True)])
