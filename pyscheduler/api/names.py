"""Every name pyscheduler shows to the world, defined once.

Labels, annotations, prefixes and taints are part of the public interface (the README's tables):
users select on them, write them on their pods, and see them on nodes and pods the scheduler
touches. Each is spelled here and nowhere else; modules import what they use.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BURST_ANNOTATION",
    "BURST_ATTEMPT_ANNOTATION",
    "DECISION_ANNOTATION",
    "DEFAULT_SCHEDULER_NAME",
    "DELETION_COST_ANNOTATION",
    "EXPLAIN_ANNOTATION",
    "FRAGMENT_ANNOTATION",
    "INSTANCE_ANNOTATION",
    "MAX_INSTANCE_CPU_ANNOTATION",
    "MAX_INSTANCE_MEMORY_ANNOTATION",
    "MOVED_FROM_ANNOTATION",
    "MOVE_ANNOTATION",
    "NEVER",
    "PLATFORM_LABEL",
    "POOL_LABEL",
    "PRICE_ANNOTATION",
    "PROVIDER_TAINT_KEY",
    "REBALANCE_ANNOTATION",
    "REPLACES_ANNOTATION",
    "ROLE_AGENT",
    "ROLE_LABEL",
    "TAG_POD_NAME",
    "TAG_POD_NAMESPACE",
    "TAG_POD_UID",
    "TAG_POOL",
    "TYPE_LABEL",
    "TYPE_VIRTUAL_KUBELET",
    "VIRTUAL_LABEL",
    "VIRTUAL_NODE_PREFIX",
    "virtual_node_name",
]

#: ``spec.schedulerName`` of the pods pyscheduler schedules (configurable: ``schedulerName``).
DEFAULT_SCHEDULER_NAME: Final = "pyscheduler"

# -- pods: what users write ----------------------------------------------------------------------

#: The ``WsspSchedulerConfiguration`` (``<name>-v<x.y.z>`` or ``<name>``) that schedules a pod.
FRAGMENT_ANNOTATION: Final = "wssp/schedulefragment"
#: ``"true"``: the scheduler writes its decision into :data:`DECISION_ANNOTATION`.
EXPLAIN_ANNOTATION: Final = "wssp/explain"
#: ``"never"``: the pod never goes to a virtual node.
BURST_ANNOTATION: Final = "wssp/burst"
#: ``"never"``: the rebalancer never moves the pod off its virtual node.
REBALANCE_ANNOTATION: Final = "wssp/rebalance"
#: The value of the opt-out annotations above.
NEVER: Final = "never"
#: The cloud platform a pod must run on when it bursts (a pool's ``platform``).
PLATFORM_LABEL: Final = "wssp/cloud-platform"

# -- pods: what the scheduler writes ----------------------------------------------------------------

#: The scheduler's decision (JSON), for pods with :data:`EXPLAIN_ANNOTATION`.
DECISION_ANNOTATION: Final = "wssp/decision"
#: ``"true"`` on a pod the scheduler placed on a virtual node.
VIRTUAL_LABEL: Final = "wssp/virtual-node"
#: The cloud pool of a virtual node (its label), and of a pod's instance (the cloud's tag).
POOL_LABEL: Final = "wssp/cloud-pool"
#: ``<pool>/<instance id>`` of a virtual pod's cloud instance.
INSTANCE_ANNOTATION: Final = "wssp/cloud-instance"
#: Which try, counting pools, the copy of a refused bare pod is.
BURST_ATTEMPT_ANNOTATION: Final = "wssp/burst-attempt"
#: On such a copy: ``<first pod's name> (<pod it replaces> <uid>)``.
REPLACES_ANNOTATION: Final = "wssp/replaces"
#: On a pod moved back from a virtual node: ``<original name> (<original uid>)``.
MOVED_FROM_ANNOTATION: Final = "wssp/moved-from"
#: On a virtual pod being moved back (JSON): the move in flight, for any leader to finish.
MOVE_ANNOTATION: Final = "wssp/move"
#: Kubernetes' own: which pod of a ReplicaSet goes first when it scales down.
DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"

# -- virtual nodes ----------------------------------------------------------------------------------

#: A pool's virtual node is ``wssp-virtual-<pool>``.
VIRTUAL_NODE_PREFIX: Final = "wssp-virtual-"
TYPE_LABEL: Final = "type"
TYPE_VIRTUAL_KUBELET: Final = "virtual-kubelet"
ROLE_LABEL: Final = "kubernetes.io/role"
ROLE_AGENT: Final = "agent"
#: ``virtual-kubelet.io/provider=<platform>:NoSchedule`` on every virtual node.
PROVIDER_TAINT_KEY: Final = "virtual-kubelet.io/provider"
#: On a virtual node: the largest instance its pool runs (quantities), as the cloud reports them.
MAX_INSTANCE_CPU_ANNOTATION: Final = "wssp/max-instance-cpu"
MAX_INSTANCE_MEMORY_ANNOTATION: Final = "wssp/max-instance-memory"
#: On a virtual node: the pool's price per CPU-hour (decimal), which orders moves back.
PRICE_ANNOTATION: Final = "wssp/price-per-cpu-hour"

# -- cloud instances: the tags the provider gives them ------------------------------------------------

TAG_POD_UID: Final = "wssp/pod-uid"
TAG_POD_NAMESPACE: Final = "wssp/pod-namespace"
TAG_POD_NAME: Final = "wssp/pod-name"
TAG_POOL: Final = POOL_LABEL


def virtual_node_name(pool: str) -> str:
    """The Node that stands for ``pool``: ``wssp-virtual-<pool>``."""
    return f"{VIRTUAL_NODE_PREFIX}{pool}"
