"""The plugin registry: names to built-in plugins, and a configuration to a profile.

One instance per plugin serves both extension points (NodeResourcesFit filters and scores with
the same object), as in kube-scheduler, so the per-cycle state a plugin computes while
filtering is reused when it scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyscheduler.settings import SchedulerConfig
from pyscheduler.framework.interface import FilterPlugin, ScorePlugin
from pyscheduler.framework.pipeline import Profile
from pyscheduler.plugins.balanced_allocation import BalancedAllocation
from pyscheduler.plugins.burst_eligible import BurstEligible
from pyscheduler.plugins.cloud_platform import CloudPlatform
from pyscheduler.plugins.image_locality import ImageLocality
from pyscheduler.plugins.instance_limits import InstanceLimits
from pyscheduler.plugins.inter_pod_affinity import InterPodAffinity
from pyscheduler.plugins.node_affinity import NodeAffinity
from pyscheduler.plugins.node_name import NodeName
from pyscheduler.plugins.node_ports import NodePorts
from pyscheduler.plugins.node_ready import NodeReady
from pyscheduler.plugins.node_resources_fit import NodeResourcesFit
from pyscheduler.plugins.node_unschedulable import NodeUnschedulable
from pyscheduler.plugins.node_volume_limits import NodeVolumeLimits
from pyscheduler.plugins.pod_topology_spread import PodTopologySpread
from pyscheduler.plugins.pool_order import PoolOrder
from pyscheduler.plugins.pool_refusals import PoolRefusals
from pyscheduler.plugins.taint_toleration import TaintToleration
from pyscheduler.plugins.volume_binding import VolumeBinding
from pyscheduler.plugins.volume_restrictions import VolumeRestrictions
from pyscheduler.plugins.volume_zone import VolumeZone

__all__ = ["BURST_FILTERS", "FACTORIES", "INVARIANT_FILTERS", "build_burst_profile",
           "build_profile", "build_profiles"]

#: Filters that hold whatever a fragment answers (ABI.md §5.1): node Ready and not cordoned,
#: NoSchedule/NoExecute taints tolerated, host ports free, resources and pod count fit, the
#: pod's volumes bindable and attachable there. They run even when a configuration leaves them
#: out of plugins.filter.
INVARIANT_FILTERS = (NodeUnschedulable.name, TaintToleration.name, NodePorts.name,
                     NodeResourcesFit.name, VolumeRestrictions.name, NodeVolumeLimits.name,
                     VolumeBinding.name, VolumeZone.name, NodeReady.name)
#: The burst pass's own filters (all of them invariant too).
BURST_FILTERS = (BurstEligible.name, CloudPlatform.name, InstanceLimits.name,
                 PoolRefusals.name, PoolOrder.name)


def _fit(config: SchedulerConfig) -> NodeResourcesFit:
    strategy = config.scoring_strategy
    return NodeResourcesFit(strategy=strategy.type,
                            resources=[(r.name, r.weight) for r in strategy.resources],
                            shape=[(p.utilization, p.score) for p in strategy.shape])


FACTORIES: dict[str, Callable[[SchedulerConfig], Any]] = {
    NodeUnschedulable.name: lambda c: NodeUnschedulable(),
    NodeName.name: lambda c: NodeName(),
    TaintToleration.name: lambda c: TaintToleration(),
    NodeAffinity.name: lambda c: NodeAffinity(),
    NodePorts.name: lambda c: NodePorts(),
    NodeResourcesFit.name: _fit,
    PodTopologySpread.name: lambda c: PodTopologySpread(),
    InterPodAffinity.name: lambda c: InterPodAffinity(
        hard_pod_affinity_weight=c.inter_pod_affinity.hard_pod_affinity_weight,
        ignore_preferred_terms_of_existing_pods=(
            c.inter_pod_affinity.ignore_preferred_terms_of_existing_pods)),
    BalancedAllocation.name: lambda c: BalancedAllocation(),
    ImageLocality.name: lambda c: ImageLocality(),
    NodeReady.name: lambda c: NodeReady(),
    VolumeRestrictions.name: lambda c: VolumeRestrictions(),
    NodeVolumeLimits.name: lambda c: NodeVolumeLimits(),
    VolumeBinding.name: lambda c: VolumeBinding(),
    VolumeZone.name: lambda c: VolumeZone(),
    BurstEligible.name: lambda c: BurstEligible(),
    CloudPlatform.name: lambda c: CloudPlatform(),
    InstanceLimits.name: lambda c: InstanceLimits(),
    PoolRefusals.name: lambda c: PoolRefusals(),
    PoolOrder.name: lambda c: PoolOrder([p.name for p in c.virtual_nodes.pools]),
}

# Row-local plugins: a node's answer depends on that node's row and the pod only (and the pass).
# Scores normalized over all nodes (NodeAffinity, TaintToleration, PodTopologySpread,
# InterPodAffinity, MostFreeMemory) and cross-node filters are not row-local; nor is
# ImageLocality (an image's spread counts the nodes listing it: a node's score moves when
# another node pulls or drops the image, and the pipeline's row-local memo is keyed by a pod
# signature without images); nor are filters that read more of the pod than the pipeline's
# signature of it (BurstEligible, CloudPlatform) or the clock (PoolRefusals).
_ROW_LOCAL_FILTERS = frozenset({NodeUnschedulable.name, NodeName.name, TaintToleration.name,
                                NodeAffinity.name, NodePorts.name, NodeResourcesFit.name,
                                NodeReady.name, InstanceLimits.name, PoolOrder.name})


class _Instances:
    """One instance per plugin name, shared by the profiles built from one configuration."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self._made: dict[str, Any] = {}

    def __call__(self, name: str) -> Any:
        if name not in self._made:
            factory = FACTORIES.get(name)
            if factory is None:
                raise ValueError(f"unknown plugin {name!r}; known plugins: "
                                 f"{', '.join(sorted(FACTORIES))}")
            self._made[name] = factory(self.config)
        return self._made[name]


def _filter_names(config: SchedulerConfig) -> list[str]:
    """The configured filters, then the invariant ones the configuration left out."""
    names = list(config.plugins.filter)
    names += [n for n in INVARIANT_FILTERS if n not in names]
    return names


def build_profile(config: SchedulerConfig, instances: _Instances | None = None) -> Profile:
    """The profile of the first pass: the configured plugins over the real nodes."""
    get = instances or _Instances(config)
    filters: tuple[FilterPlugin, ...] = tuple(get(n) for n in _filter_names(config))
    scores: tuple[tuple[ScorePlugin, int], ...] = tuple(
        (get(p.name), p.weight) for p in config.plugins.score)
    row_local_scores = {BalancedAllocation.name}
    if config.scoring_strategy.type != "MostFreeMemory":
        row_local_scores.add(NodeResourcesFit.name)
    return Profile(config.scheduler_name, filters, scores,
                   config.percentage_of_nodes_to_score,
                   row_local_filters=_ROW_LOCAL_FILTERS,
                   row_local_scores=frozenset(row_local_scores),
                   invariant_filters=frozenset(INVARIANT_FILTERS))


def build_burst_profile(config: SchedulerConfig,
                        instances: _Instances | None = None) -> Profile:
    """The profile of the burst pass, over the cloud pools' virtual nodes: every filter of the
    first pass plus the burst filters, and the pools' configured order as the only score."""
    get = instances or _Instances(config)
    names = _filter_names(config) + list(BURST_FILTERS)
    filters: tuple[FilterPlugin, ...] = tuple(get(n) for n in names)
    return Profile(f"{config.scheduler_name}/burst", filters, ((get(PoolOrder.name), 1),),
                   row_local_filters=_ROW_LOCAL_FILTERS,
                   row_local_scores=frozenset({PoolOrder.name}),
                   invariant_filters=frozenset(INVARIANT_FILTERS + BURST_FILTERS))


def build_profiles(config: SchedulerConfig) -> tuple[Profile, Profile | None]:
    """Both passes' profiles, sharing plugin instances (the burst pass's only when virtual
    nodes are enabled)."""
    instances = _Instances(config)
    burst = build_burst_profile(config, instances) if config.virtual_nodes.enabled else None
    return build_profile(config, instances), burst
