"""NodeVolumeLimits: no node gets more volumes of a CSI driver than it can attach.

kube's ``nodevolumelimits`` CSI plugin (``csi.go``): a node's ``CSINode`` says, per driver, how
many volumes it can attach (``spec.drivers[].allocatable.count``). The pod's claims
(``persistentVolumeClaim`` and generic ephemeral volumes) must exist — else every node fails
with ``looking up PVC ns/data: persistentvolumeclaim "data" not found``
(``UnschedulableAndUnresolvable``, from Filter: node by node in kube, not PreFilter), and an
ephemeral volume's claim must be the pod's own (kube returns an Error status; here an
unresolvable reason with kube's message).

A claim counts as one volume of a driver: a claim naming an existing CSI volume counts as that
volume (``spec.csi.driver`` and ``volumeHandle``; a non-CSI volume does not count); a claim
naming no volume, or one that does not exist, counts as a new volume of its class's
provisioner (no class, or a class that does not exist: not counted). Volumes are counted once
each: those of the pods already on the node, plus the new pod's not attached there yet. A node
that would go over for a driver with a limit fails with ``node(s) exceed max volume count``
(``Unschedulable``: preempting pods that use volumes can make room). Nodes without a CSINode,
and drivers without a limit, are not limited.

Not implemented: in-tree volumes migrated to CSI (their translation to a CSI driver),
``VolumeAttachment`` objects of the node counted as attached volumes, limits published as
``attachable-volumes-*`` node resources, and the error kube raises for a pod already on the
node whose ephemeral claim it does not own (its volume is counted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import IntArray, NodeTable
from pyscheduler.framework.pod import PodInfo
from pyscheduler.framework.volumes import (
    Claim,
    VolumeCatalog,
    claim_refs,
    not_found,
    not_owner,
)

__all__ = ["ERR_REASON", "NAME", "NodeVolumeLimits"]

NAME = "NodeVolumeLimits"
ERR_REASON = "node(s) exceed max volume count"

_NO_LIMIT = -1
# A claim not bound to a volume yet counts as a volume of this handle (kube prefixes a random
# string, so that no real volume handle collides with it).
_PENDING = "\x00pending:"


def _volume(catalog: VolumeCatalog, claim: Claim) -> tuple[str, str] | None:
    """``getCSIDriverInfo``: the (driver, volume handle) ``claim`` counts as, if any."""
    volume = catalog.volume_of(claim)
    if volume is not None:
        if volume.csi_driver and volume.handle:
            return volume.csi_driver, volume.handle
        return None
    # getCSIDriverInfoFromSC
    sc = catalog.classes.get(claim.storage_class) if claim.storage_class else None
    if sc is None or not sc.provisioner:
        return None
    return sc.provisioner, f"{_PENDING}{claim.namespace}/{claim.name}"


def _volumes(catalog: VolumeCatalog, namespace: str,
             claims: Iterable[str]) -> dict[str, set[str]]:
    """CSI driver -> volume handles, for the existing claims among ``claims``."""
    out: dict[str, set[str]] = {}
    for name in claims:
        claim = catalog.claims.get((namespace, name))
        found = _volume(catalog, claim) if claim is not None else None
        if found is not None:
            out.setdefault(found[0], set()).add(found[1])
    return out


def _wanted(ctx: CycleContext) -> dict[str, set[str]] | str:
    """The new pod's volumes by driver, or the problem that holds on every node."""
    pod, catalog = ctx.pod, ctx.table.volumes
    out: dict[str, set[str]] = {}
    for ref in claim_refs(pod):
        claim = catalog.claims.get((pod.namespace, ref.name))
        if claim is None:
            return (f"looking up PVC {pod.namespace}/{ref.name}: "
                    f"{not_found('persistentvolumeclaim', ref.name)}")
        if ref.ephemeral and claim.owner_uid != pod.uid:
            return not_owner(pod, ref.name)
        found = _volume(catalog, claim)
        if found is not None:
            out.setdefault(found[0], set()).add(found[1])
    return out


def _attached(catalog: VolumeCatalog, pods: Iterable[PodInfo], driver: str) -> set[str]:
    handles: set[str] = set()
    for pod in pods:
        if pod.claims:
            handles |= _volumes(catalog, pod.namespace, pod.claims).get(driver, set())
    return handles


class NodeVolumeLimits:
    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("CSINode", ActionType.ADD | ActionType.UPDATE),
                on("Pod", ActionType.DELETE),
                on("PersistentVolumeClaim", ActionType.ADD),
                on("VolumeAttachment", ActionType.DELETE))

    def __init__(self) -> None:
        self._limits: dict[str, IntArray] = {}
        self._key: tuple[int, int, int, int] = (-1, -1, -1, -1)

    def _limit_column(self, table: NodeTable, driver: str) -> IntArray:
        """Per row, the node's attach limit for ``driver`` (``-1``: none), rebuilt when CSI
        nodes or the table's layout change."""
        catalog = table.volumes
        key = (id(table), catalog.csi_generation, table.layout_generation, table.n)
        if key != self._key:
            self._key, self._limits = key, {}
        column = self._limits.get(driver)
        if column is None:
            column = np.full(table.n, _NO_LIMIT, np.int64)
            for node, limits in catalog.csi_limits.items():
                slot = table.slots.get(node)
                if slot is not None and slot < table.n and driver in limits:
                    column[slot] = limits[driver]
            self._limits[driver] = column
        return column

    def filter(self, ctx: CycleContext) -> FilterResult:
        pod, table = ctx.pod, ctx.table
        if not pod.claims:
            return FilterResult.all_pass()
        wanted = _wanted(ctx)
        if isinstance(wanted, str):
            return FilterResult(np.zeros(ctx.n, np.bool_),
                                [Reason(wanted, ctx.nodes().copy(), True)])
        if not wanted or not table.volumes.csi_limits:
            return FilterResult.all_pass()
        n = table.n
        over = np.zeros(n, np.bool_)
        using = table.claim_count[:n] > 0
        for driver, handles in wanted.items():
            limit = self._limit_column(table, driver)[:n]
            limited = limit != _NO_LIMIT
            if not limited.any():
                continue
            # Rows whose pods use no claim attach nothing: only the new volumes count.
            over |= limited & ~using & (len(handles) > limit)
            # A row's attached volumes are at most the claims its pods mount: only rows where
            # those and the new volumes together could pass the limit need counting.
            could = table.claim_count[:n] + len(handles) > limit
            for slot in np.flatnonzero(limited & using & ~over & could).tolist():
                attached = _attached(table.volumes, table.pods[slot].values(), driver)
                # Only a driver the pod adds volumes of is checked: a node already over its
                # limit still takes a pod whose volumes are all attached there.
                added = handles - attached
                if added and len(attached) + len(added) > limit[slot]:
                    over[slot] = True
        if not over.any():
            return FilterResult.all_pass()
        return FilterResult.single(~over, ERR_REASON)
