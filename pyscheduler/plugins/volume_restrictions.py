"""VolumeRestrictions: a ``ReadWriteOncePod`` claim serves one pod in the whole cluster.

kube's ``volumerestrictions`` plugin (``volume_restrictions.go``), for the pod's
``persistentVolumeClaim`` volumes: each claim must exist, else every node fails with
``persistentvolumeclaim "data" not found`` (``UnschedulableAndUnresolvable``). While any pod
that uses one of its ``ReadWriteOncePod`` claims exists on a node, the pod fits nowhere: ``node
has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode``. The
status is ``Unschedulable`` (resolvable), so a pod of higher priority may preempt the one using
the claim: the preemption dry run takes that pod off its node and the claim is free again.

Deviations: kube's checks of in-tree GCE PD, AWS EBS, RBD and iSCSI inline volumes sharing a
disk are not implemented (those volume types are migrated to CSI drivers). A claim counts as
in use when any pod mounts it, also as a generic ephemeral volume (kube counts
``persistentVolumeClaim`` volumes only; an ephemeral volume's claim is the pod's own).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.volumes import READ_WRITE_ONCE_POD, claim_refs, not_found

__all__ = ["ERR_REASON_RWOP", "NAME", "VolumeRestrictions"]

NAME = "VolumeRestrictions"
ERR_REASON_RWOP = ("node has pod using PersistentVolumeClaim with the same name and "
                   "ReadWriteOncePod access mode")


class VolumeRestrictions:
    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Pod", ActionType.DELETE),
                on("Node", ActionType.ADD),
                on("PersistentVolumeClaim", ActionType.ADD))

    def filter(self, ctx: CycleContext) -> FilterResult:
        pod = ctx.pod
        if not pod.claims:
            return FilterResult.all_pass()
        table = ctx.table
        in_use = False
        for ref in claim_refs(pod):
            if ref.ephemeral:
                continue
            key = (pod.namespace, ref.name)
            claim = table.volumes.claims.get(key)
            if claim is None:
                # kube's PreFilter: the pod is rejected before any node is looked at.
                return FilterResult(np.zeros(ctx.n, np.bool_),
                                    [Reason(not_found("persistentvolumeclaim", ref.name),
                                            ctx.nodes().copy(), True, prefilter=True)])
            if READ_WRITE_ONCE_POD in claim.access_modes and table.claim_users.get(key, 0) > 0:
                in_use = True
        if in_use:
            return FilterResult.single(~ctx.nodes(), ERR_REASON_RWOP)
        return FilterResult.all_pass()
