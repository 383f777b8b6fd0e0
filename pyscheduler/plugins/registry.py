"""The plugin registry: names to built-in plugins, and a configuration to a profile.

One instance per plugin serves both extension points (NodeResourcesFit filters and scores with
the same object), as in kube-scheduler, so the per-cycle state a plugin computes while
filtering is reused when it scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyscheduler.config import SchedulerConfig
from pyscheduler.framework.interface import FilterPlugin, ScorePlugin
from pyscheduler.framework.pipeline import Profile
from pyscheduler.plugins.balanced_allocation import BalancedAllocation
from pyscheduler.plugins.inter_pod_affinity import InterPodAffinity
from pyscheduler.plugins.node_affinity import NodeAffinity
from pyscheduler.plugins.node_name import NodeName
from pyscheduler.plugins.node_ports import NodePorts
from pyscheduler.plugins.node_resources_fit import NodeResourcesFit
from pyscheduler.plugins.node_unschedulable import NodeUnschedulable
from pyscheduler.plugins.pod_topology_spread import PodTopologySpread
from pyscheduler.plugins.taint_toleration import TaintToleration

__all__ = ["FACTORIES", "build_profile"]


def _fit(config: SchedulerConfig) -> NodeResourcesFit:
    strategy = config.scoring_strategy
    return NodeResourcesFit(strategy=strategy.type,
                            resources=[(r.name, r.weight) for r in strategy.resources])


FACTORIES: dict[str, Callable[[SchedulerConfig], Any]] = {
    NodeUnschedulable.name: lambda c: NodeUnschedulable(),
    NodeName.name: lambda c: NodeName(),
    TaintToleration.name: lambda c: TaintToleration(),
    NodeAffinity.name: lambda c: NodeAffinity(),
    NodePorts.name: lambda c: NodePorts(),
    NodeResourcesFit.name: _fit,
    PodTopologySpread.name: lambda c: PodTopologySpread(),
    InterPodAffinity.name: lambda c: InterPodAffinity(),
    BalancedAllocation.name: lambda c: BalancedAllocation(),
}


def build_profile(config: SchedulerConfig) -> Profile:
    instances: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in instances:
            factory = FACTORIES.get(name)
            if factory is None:
                raise ValueError(f"unknown plugin {name!r}; known plugins: "
                                 f"{', '.join(sorted(FACTORIES))}")
            instances[name] = factory(config)
        return instances[name]

    filters: tuple[FilterPlugin, ...] = tuple(get(n) for n in config.plugins.filter)
    scores: tuple[tuple[ScorePlugin, int], ...] = tuple(
        (get(p.name), p.weight) for p in config.plugins.score)
    # Row-local plugins: a node's answer depends on that node's row and the pod only.
    # Scores normalized over all nodes (NodeAffinity, TaintToleration, PodTopologySpread,
    # InterPodAffinity, MostFreeMemory) and cross-node filters are not row-local.
    row_local_filters = frozenset({NodeUnschedulable.name, NodeName.name, TaintToleration.name,
                                   NodeAffinity.name, NodePorts.name, NodeResourcesFit.name})
    row_local_scores = {BalancedAllocation.name}
    if config.scoring_strategy.type != "MostFreeMemory":
        row_local_scores.add(NodeResourcesFit.name)
    return Profile(config.scheduler_name, filters, scores,
                   config.percentage_of_nodes_to_score,
                   row_local_filters=row_local_filters,
                   row_local_scores=frozenset(row_local_scores))
