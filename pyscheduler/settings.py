"""The scheduler's settings: frozen, slotted dataclasses and the defaults they start from.

:mod:`pyscheduler.config` builds a :class:`SchedulerConfig` from a YAML/JSON document (and
checks every field); everything else reads these values and parses nothing. Defaults follow
kube-scheduler's default profile where one exists (see :mod:`pyscheduler.config`).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeGuard

from pyscheduler.api import names

__all__ = [
    "ASSUMED_POD_TTL_SECONDS",
    "BIND_CONCURRENCY",
    "BIND_TIMEOUT_SECONDS",
    "DEFAULT_FILTER_PLUGINS",
    "DEFAULT_LEASE_NAMESPACE",
    "DEFAULT_METRICS_ADDRESS",
    "DEFAULT_SCHEDULER_NAME",
    "DEFAULT_SCHEDULE_FRAGMENT",
    "DEFAULT_SCORE_WEIGHTS",
    "DefaultSpreadConstraint",
    "FILTER_PLUGINS",
    "FragmentsConfig",
    "LEADER_ELECTION_JITTER",
    "LOG_LEVELS",
    "InterPodAffinityConfig",
    "LeaderElectionConfig",
    "MAX_BIND_CONCURRENCY",
    "PodTopologySpreadConfig",
    "PREEMPTION_ORDERS",
    "PREEMPTION_VICTIMS",
    "PreemptionConfig",
    "MAX_CALL_TIMEOUT_MILLISECONDS",
    "MAX_RESOURCE_WEIGHT",
    "MAX_SCORE_WEIGHT",
    "MAX_SHAPE_SCORE",
    "MAX_SHAPE_UTILIZATION",
    "PluginsConfig",
    "RebalancerConfig",
    "ResourceWeight",
    "PROFILE_FIELDS",
    "SCORE_PLUGINS",
    "SPREAD_DEFAULTING_TYPES",
    "SYSTEM_DEFAULT_SPREAD_CONSTRAINTS",
    "SCORING_STRATEGY_TYPES",
    "SchedulerConfig",
    "ScorePlugin",
    "ScoringStrategy",
    "SecretRef",
    "StorageSettings",
    "UtilizationShapePoint",
    "VirtualNodesConfig",
    "VirtualPool",
    "default_identity",
    "is_int",
    "render_value",
]

DEFAULT_SCHEDULER_NAME: Final = names.DEFAULT_SCHEDULER_NAME
DEFAULT_METRICS_ADDRESS: Final = "127.0.0.1:10259"
#: The fragment for pods without the wssp/schedulefragment annotation (shipped in the package).
DEFAULT_SCHEDULE_FRAGMENT: Final = "default:v1.0.0"
DEFAULT_LEASE_NAMESPACE: Final = "kube-system"
BIND_CONCURRENCY: Final = 16
BIND_TIMEOUT_SECONDS: Final = 10.0
ASSUMED_POD_TTL_SECONDS: Final = 30.0
#: The longest call deadline a fragment may have (``fragments.maxTimeoutMilliseconds`` may only
#: lower it); the CRD's maximum for ``spec.limits.timeoutMilliseconds`` is the same number.
MAX_CALL_TIMEOUT_MILLISECONDS: Final = 1000

#: Filter plugins this scheduler implements, in the order kube-scheduler's default profile runs them.
FILTER_PLUGINS: Final[tuple[str, ...]] = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
)
DEFAULT_FILTER_PLUGINS: Final = FILTER_PLUGINS

#: Score plugins and their weights in kube-scheduler's default profile (pkg/scheduler/apis/config/v1
#: default_plugins.go).
DEFAULT_SCORE_WEIGHTS: Final[Mapping[str, int]] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
SCORE_PLUGINS: Final[tuple[str, ...]] = tuple(DEFAULT_SCORE_WEIGHTS)

#: ``LeastAllocated``, ``MostAllocated`` and ``RequestedToCapacityRatio`` are kube's
#: NodeResourcesFit strategies; ``MostFreeMemory`` is the burst design's rule (among fitting
#: nodes, the most free memory wins).
SCORING_STRATEGY_TYPES: Final[tuple[str, ...]] = (
    "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio", "MostFreeMemory")
#: RequestedToCapacityRatio's shape: utilization in percent, score 0..10 (kube's
#: ``MaxCustomPriorityScore``; scores are multiplied by 10 to the 0..100 node score range).
MAX_SHAPE_UTILIZATION: Final = 100
MAX_SHAPE_SCORE: Final = 10
LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "warning", "error")

MAX_SCORE_WEIGHT: Final = 100
MAX_RESOURCE_WEIGHT: Final = 100
MAX_BIND_CONCURRENCY: Final = 1024

# client-go's leaderelection.JitterFactor: a retry may come up to 1.2 retry periods after the last.
LEADER_ELECTION_JITTER: Final = 1.2

# kube-scheduler's numFeasibleNodesToFind constants (pkg/scheduler/schedule_one.go).
_MIN_FEASIBLE_NODES_TO_FIND: Final = 100
_MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: Final = 5
_BASE_PERCENTAGE_OF_NODES_TO_SCORE: Final = 50



def default_identity() -> str:
    """A leader-election identity unique to this process: ``<hostname>_<uuid>``, as kube does."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


# --------------------------------------------------------------------------------------------
# The configuration values


@dataclass(frozen=True, slots=True)
class ScorePlugin:
    """An enabled score plugin and its weight in the weighted sum of normalized scores.

    A weight of 0 keeps the plugin listed but makes its score count for nothing.
    """

    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class PluginsConfig:
    """Which built-in plugins run: filters in order, score plugins with their weights."""

    filter: tuple[str, ...] = DEFAULT_FILTER_PLUGINS
    score: tuple[ScorePlugin, ...] = tuple(
        ScorePlugin(name, weight) for name, weight in DEFAULT_SCORE_WEIGHTS.items())
    #: Whether the profile bursts to cloud pools (CloudBurst at PostFilter) when virtual nodes
    #: are enabled.
    cloud_burst: bool = True

    @property
    def score_weights(self) -> dict[str, int]:
        """The score plugins as a ``name -> weight`` dict (a fresh copy)."""
        return {plugin.name: plugin.weight for plugin in self.score}


@dataclass(frozen=True, slots=True)
class ResourceWeight:
    """A resource that the scoring strategy looks at, and its weight (1–100)."""

    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    """A point of RequestedToCapacityRatio's scoring function: a resource used to
    ``utilization`` percent (0–100) scores ``score`` (0–10)."""

    utilization: int
    score: int


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """How NodeResourcesFit scores a node (kube's ``scoringStrategy``). ``shape`` is
    ``requestedToCapacityRatio.shape``: set exactly when ``type`` is RequestedToCapacityRatio."""

    type: str = "LeastAllocated"
    resources: tuple[ResourceWeight, ...] = (ResourceWeight("cpu", 1), ResourceWeight("memory", 1))
    shape: tuple[UtilizationShapePoint, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Lease-based leader election, with client-go's default timings.

    ``identity`` defaults to a value unique to this process, computed when the value is built.
    """

    enabled: bool = True
    lease_name: str = DEFAULT_SCHEDULER_NAME
    lease_namespace: str = DEFAULT_LEASE_NAMESPACE
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    identity: str = field(default_factory=default_identity)


@dataclass(frozen=True, slots=True)
class FragmentsConfig:
    """Defaults for every fragment (a resource's ``spec.limits`` and ``spec.runtime`` win), the
    largest call deadline a resource may ask for, the rate of a fragment's log lines, and when
    a failing fragment is quarantined."""

    runtime: str = "wasmtime"
    fuel: int = 500_000_000
    timeout_seconds: float = 0.25
    memory_mib: int = 64
    max_timeout_seconds: float = MAX_CALL_TIMEOUT_MILLISECONDS / 1000
    log_lines_per_second: float = 10.0
    log_burst: int = 100
    quarantine_after_failures: int = 5
    quarantine_seconds: float = 30.0
    call_thread_nice: int = 10
    inline_call_seconds: float = 0.005
    #: the longest a pod may wait at a fragment's permit (kube-scheduler's cap is 15 min)
    max_permit_wait_seconds: float = 300.0


@dataclass(frozen=True, slots=True)
class SecretRef:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """Where fragments come from: the S3/MinIO endpoint and credentials (given here, or read at
    start-up from a Secret with keys ``accessKey`` and ``secretKey``), the directories
    ``file://`` URLs may name, the web servers ``http(s)://`` URLs may name (``host`` or
    ``host:port``; none by default) and whether those may resolve to non-public addresses, and
    the size and time limits of one fetch."""

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    secure: bool = False
    region: str | None = None
    credentials_secret: SecretRef | None = None
    allowed_file_dirs: tuple[str, ...] = ()
    max_bytes: int = 16 * 2**20
    timeout_seconds: float = 10.0
    allowed_http_hosts: tuple[str, ...] = ()
    allow_private_addresses: bool = False


@dataclass(frozen=True, slots=True)
class VirtualPool:
    name: str
    platform: str
    max_pods: int | None = None
    #: Labels of the pool's virtual node besides pyscheduler's own: where the pool is
    #: (``topology.kubernetes.io/region``, ``.../zone``), which spread and affinity rules read.
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class VirtualNodesConfig:
    """Cloud bursting: the pools (in fallback order) behind virtual nodes, and the cloud
    adapter's endpoint. Off unless ``enabled``."""

    enabled: bool = False
    cloud_url: str = ""
    cloud_token: str | None = None
    cloud_timeout_seconds: float = 5.0
    pools: tuple[VirtualPool, ...] = ()
    heartbeat_seconds: float = 10.0
    refresh_seconds: float = 15.0     # how often each pool's quota (and so its health) is read
    not_ready_after_seconds: float = 120.0
    orphan_grace_seconds: float = 60.0
    reconcile_seconds: float = 10.0


@dataclass(frozen=True, slots=True)
class RebalancerConfig:
    """Moving virtual pods back to real nodes (used when virtual nodes are enabled)."""

    enabled: bool = True
    interval_seconds: float = 30.0
    min_cloud_seconds: float = 60.0
    max_moves_per_cycle: int = 10
    max_moves_per_namespace: int = 5
    ready_timeout_seconds: float = 120.0
    dry_run: bool = False


PREEMPTION_ORDERS: Final = ("PreemptThenBurst", "BurstThenPreempt")
PREEMPTION_VICTIMS: Final = ("OwnPods", "AllPods")


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    """kube's DefaultPreemption post-filter: what a pod that fits no node may evict.

    ``order`` says what a pod that fits no real node tries first when cloud pools are
    configured: evicting lower-priority pods from a real node (kube's behaviour), or a cloud
    pool. ``victims`` limits the pods that may be evicted to this scheduler's own (the default:
    pyscheduler touches only its own pods) or lets it evict any lower-priority pod as
    kube-scheduler does. Pods on virtual nodes are never victims.
    """

    enabled: bool = True
    order: str = "PreemptThenBurst"
    victims: str = "OwnPods"
    #: kube's DefaultPreemptionArgs: how many candidate nodes a dry run looks for.
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100


SPREAD_DEFAULTING_TYPES: Final = ("System", "List")


@dataclass(frozen=True, slots=True)
class DefaultSpreadConstraint:
    """One of PodTopologySpread's ``defaultConstraints``: a topology spread constraint without
    a label selector (each pod's is deduced from the Services, ReplicationControllers,
    ReplicaSets and StatefulSets that select it). ``None`` policies mean the API's defaults
    (``nodeAffinityPolicy: Honor``, ``nodeTaintsPolicy: Ignore``)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule, ScheduleAnyway
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None


#: kube-scheduler's ``systemDefaultConstraints`` (podtopologyspread/plugin.go).
SYSTEM_DEFAULT_SPREAD_CONSTRAINTS: Final = (
    DefaultSpreadConstraint(3, "kubernetes.io/hostname", "ScheduleAnyway"),
    DefaultSpreadConstraint(5, "topology.kubernetes.io/zone", "ScheduleAnyway"),
)


@dataclass(frozen=True, slots=True)
class InterPodAffinityConfig:
    """kube's InterPodAffinityArgs."""

    #: The score a node gets per required affinity term of an existing pod that the incoming
    #: pod matches (0..100).
    hard_pod_affinity_weight: int = 1
    #: Score only with the incoming pod's own preferred terms (and skip when it has none).
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass(frozen=True, slots=True)
class PodTopologySpreadConfig:
    """kube's PodTopologySpreadArgs: the constraints a pod without its own
    ``topologySpreadConstraints`` gets. ``System`` (kube's default) gives
    :data:`SYSTEM_DEFAULT_SPREAD_CONSTRAINTS` and scores nodes lacking a topology key instead of
    ignoring them; ``List`` gives ``default_constraints`` (none: no defaulting)."""

    defaulting_type: str = "System"
    default_constraints: tuple[DefaultSpreadConstraint, ...] = ()

    @property
    def constraints(self) -> tuple[DefaultSpreadConstraint, ...]:
        """The default constraints in effect."""
        if self.defaulting_type == "System":
            return SYSTEM_DEFAULT_SPREAD_CONSTRAINTS
        return self.default_constraints


#: The fields of :class:`SchedulerConfig` that are a profile's own; the others are the
#: process's, shared by every profile.
PROFILE_FIELDS: Final = ("scheduler_name", "plugins", "scoring_strategy",
                         "percentage_of_nodes_to_score", "preemption", "pod_topology_spread",
                         "inter_pod_affinity")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The whole scheduler configuration. Build it with :func:`load_config` or :func:`parse_config`."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    plugins: PluginsConfig = field(default_factory=PluginsConfig)
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)
    #: 100 scores every feasible node; 0 selects kube's adaptive percentage.
    percentage_of_nodes_to_score: int = 100
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    bind_concurrency: int = BIND_CONCURRENCY
    bind_timeout_seconds: float = BIND_TIMEOUT_SECONDS
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    pod_max_in_unschedulable_pods_seconds: float = 300.0
    assumed_pod_ttl_seconds: float = ASSUMED_POD_TTL_SECONDS
    log_level: str = "info"
    #: Seeds the random tie-break between equally scored nodes; None draws a fresh seed.
    seed: int | None = None
    #: The fragment for pods without ``wssp/schedulefragment`` (``name:vX.Y.Z``); None: none.
    schedule_fragment: str | None = DEFAULT_SCHEDULE_FRAGMENT
    fragments: FragmentsConfig = field(default_factory=FragmentsConfig)
    storage: StorageSettings = field(default_factory=StorageSettings)
    virtual_nodes: VirtualNodesConfig = field(default_factory=VirtualNodesConfig)
    rebalancer: RebalancerConfig = field(default_factory=RebalancerConfig)
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)
    pod_topology_spread: PodTopologySpreadConfig = field(default_factory=PodTopologySpreadConfig)
    inter_pod_affinity: InterPodAffinityConfig = field(default_factory=InterPodAffinityConfig)
    #: The profiles after this one (a KubeSchedulerConfiguration's ``profiles[1:]``): each
    #: differs from this one only in its scheduler name and its plugins' settings
    #: (:data:`PROFILE_FIELDS`).
    more_profiles: tuple[SchedulerConfig, ...] = ()

    @property
    def profiles(self) -> tuple[SchedulerConfig, ...]:
        """Every profile this scheduler serves, this one first (without ``more_profiles``)."""
        if not self.more_profiles:
            return (self,)
        return (dataclasses.replace(self, more_profiles=()), *self.more_profiles)

    @property
    def scheduler_names(self) -> frozenset[str]:
        """The ``schedulerName`` of every profile: the pods this scheduler serves."""
        return frozenset(p.scheduler_name for p in self.profiles)

    @property
    def metrics_host(self) -> str:
        """Host part of ``metrics_address`` (IPv6 without brackets; "" means every interface)."""
        return self.metrics_address.rpartition(":")[0].removeprefix("[").removesuffix("]")

    @property
    def metrics_port(self) -> int:
        """Port part of ``metrics_address`` (0 means any free port)."""
        return int(self.metrics_address.rpartition(":")[2])  # checked by the parser

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """How many feasible nodes to look for among ``num_all_nodes`` before scoring.

        The same rule as kube-scheduler's ``numFeasibleNodesToFind``: every node below 100 nodes or
        at 100 %; otherwise the configured percentage, or the adaptive one (50 % minus 1 % per 125
        nodes, at least 5 %) when it is 0; never fewer than 100 nodes.
        """
        if num_all_nodes < _MIN_FEASIBLE_NODES_TO_FIND or self.percentage_of_nodes_to_score >= 100:
            return num_all_nodes
        percentage = self.percentage_of_nodes_to_score
        if percentage <= 0:
            percentage = max(_BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_all_nodes // 125,
                             _MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
        return max(num_all_nodes * percentage // 100, _MIN_FEASIBLE_NODES_TO_FIND)


# Values in messages, for every parser of user input (this configuration, fragment resources).

def render_value(value: object, *, mapping: str = "a mapping") -> str:
    """The value as a user wrote it in YAML/JSON, for "got ..." in messages (a mapping is named
    ``mapping``: "a mapping" in YAML files, "an object" for API resources)."""
    if isinstance(value, Mapping):
        return mapping
    if isinstance(value, (list, tuple)):
        return "a list"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_int(value: object) -> TypeGuard[int]:
    """True for integers proper: YAML's true/false are bools, which Python counts as ints."""
    return isinstance(value, int) and not isinstance(value, bool)
