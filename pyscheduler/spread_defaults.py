"""Default topology spread constraints: what kube-scheduler's PodTopologySpread gives a pod
that declares none (PodTopologySpreadArgs ``defaultingType``, ``defaultConstraints``).

A pod without ``topologySpreadConstraints`` of its own gets, for the attempt only, the default
constraints in effect — kube's system defaults (``{maxSkew: 3, kubernetes.io/hostname}`` and
``{maxSkew: 5, topology.kubernetes.io/zone}``, both ``ScheduleAnyway``) or the configured list —
with one label selector deduced for it as kube's ``helper.DefaultSelector`` deduces it:

* the union of the ``spec.selector`` maps of the Services of the pod's namespace that select
  the pod (a Service without a selector selects nothing);
* with the selector of the pod's controller (its ``ownerReferences`` entry with
  ``controller: true``): a ``v1`` ReplicationController's map is merged into that union; an
  ``apps/v1`` ReplicaSet's or StatefulSet's label selector adds its requirements (an invalid
  one adds nothing). A controller of another kind or version, or one not (yet) known, adds
  nothing.

If that selector is empty the pod gets no default constraints. Constraints from the system
defaults are marked :attr:`~pyscheduler.framework.pod.SpreadConstraint.system_default`, which
the plugin reads as kube reads ``systemDefaulted``. The queue's :class:`PodInfo` is never
changed: :meth:`SpreadDefaults.view` gives a copy for the attempt's cycle context.

Informers list and watch Services, ReplicationControllers, ReplicaSets and StatefulSets (raw
JSON, as every informer here) into :class:`WorkloadSelectors`, which keeps only their parsed
selectors, per namespace: a look-up costs the Services of one namespace and one dictionary
look-up for the controller, never a walk over the cluster. Its ``generation`` moves only when a
selector changes (a ReplicaSet's status updates do not), and answers are cached by what they
depend on (namespace, labels, controller) until it moves: the pods of one ReplicaSet share one
answer, and the repeated attempts of a pending pod cost a dictionary look-up.

kube does not requeue pods when these objects change (PodTopologySpread registers no events
for them), and neither does this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pyscheduler.api.labels import (
    EQUALS,
    LabelSelector,
    Requirement,
    SelectorError,
    label_selector_from_dict,
)
from pyscheduler.framework.pod import PodInfo, SpreadConstraint
from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.informer import Informer
from pyscheduler.settings import DefaultSpreadConstraint, PodTopologySpreadConfig, SchedulerConfig

__all__ = ["SpreadDefaults", "WorkloadSelectors", "owner_of"]

Obj = dict[str, Any]

#: The controller kinds whose selector counts, by (group, version, kind), as kube's
#: ``rcKind``, ``rsKind``, ``ssKind``.
REPLICATION_CONTROLLER = ("", "v1", "ReplicationController")
REPLICA_SET = ("apps", "v1", "ReplicaSet")
STATEFUL_SET = ("apps", "v1", "StatefulSet")

#: The most cached answers kept between two changes of the selectors.
MAX_CACHED = 16384


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "", ""
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _string_map(value: object) -> dict[str, str] | None:
    """A ``map[string]string`` selector; None when absent or not one."""
    if not isinstance(value, Mapping):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return dict(value)


def _requirements(selector: object) -> tuple[Requirement, ...] | None:
    """``LabelSelectorAsSelector(...).Requirements()`` of a ``spec.selector``; None when it does
    not parse (kube then adds nothing; so does an absent selector, which has no requirements)."""
    if selector is not None and not isinstance(selector, Mapping):
        return None
    try:
        parsed = label_selector_from_dict(selector)
    except SelectorError:
        return None
    return parsed.requirements


def owner_of(pod: PodInfo) -> tuple[str, str, str, str] | None:
    """(group, version, kind, name) of the pod's controller: its ``ownerReferences`` entry with
    ``controller: true`` (kube's ``GetControllerOfNoCopy``); None without one, or when its
    ``apiVersion`` is no group/version."""
    meta = pod.raw.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        api_version = ref.get("apiVersion")
        api_version = api_version if isinstance(api_version, str) else ""
        # schema.ParseGroupVersion: "" and "v1" have no group; more than one "/" is an error.
        if api_version.count("/") > 1:
            return None
        group, _, version = api_version.rpartition("/")
        return group, version, str(ref.get("kind") or ""), str(ref.get("name") or "")
    return None


class WorkloadSelectors:
    """The selectors of Services, ReplicationControllers, ReplicaSets and StatefulSets, per
    namespace and name; :meth:`default_selector` is kube's ``DefaultSelector``."""

    __slots__ = ("generation", "services", "replication_controllers", "replica_sets",
                 "stateful_sets")

    def __init__(self) -> None:
        #: Moves whenever a selector is added, changed or removed.
        self.generation = 0
        self.services: dict[str, dict[str, dict[str, str]]] = {}
        self.replication_controllers: dict[str, dict[str, dict[str, str] | None]] = {}
        self.replica_sets: dict[str, dict[str, tuple[Requirement, ...] | None]] = {}
        self.stateful_sets: dict[str, dict[str, tuple[Requirement, ...] | None]] = {}

    # -- informer events -----------------------------------------------------------------------

    def _put(self, index: dict[str, dict[str, Any]], obj: Mapping[str, Any],
             value: Any) -> None:
        namespace, name = _meta(obj)
        if not name:
            return
        names = index.setdefault(namespace, {})
        if name in names and names[name] == value:
            return  # a status or metadata update: nothing the default selector reads
        names[name] = value
        self.generation += 1

    def _drop(self, index: dict[str, dict[str, Any]], obj: Mapping[str, Any]) -> None:
        namespace, name = _meta(obj)
        names = index.get(namespace)
        if names is None or name not in names:
            return
        del names[name]
        if not names:
            del index[namespace]
        self.generation += 1

    def set_service(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        selector = _string_map(spec.get("selector")) if isinstance(spec, Mapping) else None
        # A Service without a selector selects nothing (GetPodServices skips it); an empty one
        # adds no label either.
        if selector:
            self._put(self.services, obj, selector)
        else:
            self._drop(self.services, obj)

    def delete_service(self, obj: Mapping[str, Any]) -> None:
        self._drop(self.services, obj)

    def set_replication_controller(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        self._put(self.replication_controllers, obj,
                  _string_map(spec.get("selector")) if isinstance(spec, Mapping) else None)

    def delete_replication_controller(self, obj: Mapping[str, Any]) -> None:
        self._drop(self.replication_controllers, obj)

    def set_replica_set(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        self._put(self.replica_sets, obj,
                  _requirements(spec.get("selector")) if isinstance(spec, Mapping) else ())

    def delete_replica_set(self, obj: Mapping[str, Any]) -> None:
        self._drop(self.replica_sets, obj)

    def set_stateful_set(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        self._put(self.stateful_sets, obj,
                  _requirements(spec.get("selector")) if isinstance(spec, Mapping) else ())

    def delete_stateful_set(self, obj: Mapping[str, Any]) -> None:
        self._drop(self.stateful_sets, obj)

    # -- the look-up ---------------------------------------------------------------------------

    def default_selector(self, pod: PodInfo) -> LabelSelector:
        """kube's ``helper.DefaultSelector`` for ``pod`` (empty: nothing selects it)."""
        namespace, labels = pod.namespace, pod.labels
        label_set: dict[str, str] = {}
        for selector in self.services.get(namespace, {}).values():
            if all(labels.get(k) == v for k, v in selector.items()):
                label_set.update(selector)
        requirements = _from_set(label_set)
        owner = owner_of(pod)
        if owner is None:
            return LabelSelector(requirements)
        group, version, kind, name = owner
        gvk = (group, version, kind)
        if gvk == REPLICATION_CONTROLLER:
            found = self.replication_controllers.get(namespace, {})
            if name in found:
                label_set.update(found[name] or {})
                requirements = _from_set(label_set)
        elif gvk in (REPLICA_SET, STATEFUL_SET):
            index = self.replica_sets if gvk == REPLICA_SET else self.stateful_sets
            extra = index.get(namespace, {}).get(name)
            if extra:
                requirements = requirements + extra
        return LabelSelector(requirements)


def _from_set(label_set: Mapping[str, str]) -> tuple[Requirement, ...]:
    """``labels.Set.AsSelector()``: one equality per pair."""
    return tuple((k, EQUALS, (v,)) for k, v in label_set.items())


class SpreadDefaults:
    """The default spread constraints of pods, from the configuration and the workload objects
    the informers keep (none when the defaults in effect are empty or PodTopologySpread is
    off; then there are no informers either)."""

    def __init__(self, client: KubeClient | None, settings: PodTopologySpreadConfig, *,
                 enabled: bool = True, selectors: WorkloadSelectors | None = None) -> None:
        self.settings = settings
        self.templates: tuple[DefaultSpreadConstraint, ...] = \
            settings.constraints if enabled else ()
        self.system = settings.defaulting_type == "System"
        self.selectors = selectors if selectors is not None else WorkloadSelectors()
        # (namespace, labels, controller) -> constraints, while the selectors stay as they are.
        self._cache: dict[tuple[Any, ...], tuple[SpreadConstraint, ...]] = {}
        self._cached_generation = -1
        self.informers: tuple[Informer, ...] = ()
        if client is not None and self.templates:
            s = self.selectors
            self.informers = (
                Informer(client, api_path("v1", "services"), name="services",
                         on_add=s.set_service, on_update=lambda _, new: s.set_service(new),
                         on_delete=s.delete_service),
                Informer(client, api_path("v1", "replicationcontrollers"),
                         name="replicationcontrollers", on_add=s.set_replication_controller,
                         on_update=lambda _, new: s.set_replication_controller(new),
                         on_delete=s.delete_replication_controller),
                Informer(client, api_path("apps/v1", "replicasets"), name="replicasets",
                         on_add=s.set_replica_set,
                         on_update=lambda _, new: s.set_replica_set(new),
                         on_delete=s.delete_replica_set),
                Informer(client, api_path("apps/v1", "statefulsets"), name="statefulsets",
                         on_add=s.set_stateful_set,
                         on_update=lambda _, new: s.set_stateful_set(new),
                         on_delete=s.delete_stateful_set),
            )

    @classmethod
    def for_scheduler(cls, client: KubeClient, config: SchedulerConfig) -> SpreadDefaults:
        """The defaults a scheduler with ``config`` applies: only when PodTopologySpread runs
        (as a filter or a score plugin), as kube builds them only inside that plugin."""
        enabled = "PodTopologySpread" in config.plugins.filter or \
            "PodTopologySpread" in config.plugins.score_weights
        return cls(client, config.pod_topology_spread, enabled=enabled)

    def constraints(self, pod: PodInfo) -> tuple[SpreadConstraint, ...]:
        """kube's ``buildDefaultConstraints`` for ``pod`` (both actions): empty when the pod has
        constraints of its own, no defaults are in effect, or nothing selects it.

        The answer depends only on the pod's namespace, labels and controller, and on the
        selectors known: it is cached by those while no selector changes, so the pods of one
        workload (and the repeated attempts of one pod) share one answer."""
        if pod.spread or not self.templates:
            return ()
        generation = self.selectors.generation
        if generation != self._cached_generation or len(self._cache) >= MAX_CACHED:
            self._cache.clear()
            self._cached_generation = generation
        key = (pod.namespace, frozenset(pod.labels.items()), owner_of(pod))
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._build(pod)
        return found

    def _build(self, pod: PodInfo) -> tuple[SpreadConstraint, ...]:
        selector = self.selectors.default_selector(pod)
        if selector.empty:
            return ()
        key = str(selector)
        return tuple(SpreadConstraint(
            max_skew=t.max_skew, topology_key=t.topology_key,
            when_unsatisfiable=t.when_unsatisfiable, selector=selector, selector_key=key,
            min_domains=t.min_domains,
            node_affinity_policy=t.node_affinity_policy or "Honor",
            node_taints_policy=t.node_taints_policy or "Ignore",
            match_label_keys=(), system_default=self.system) for t in self.templates)

    def view(self, pod: PodInfo) -> PodInfo:
        """``pod`` as an attempt sees it: itself, or a copy carrying its default constraints
        (the queue's object is left as it is)."""
        constraints = self.constraints(pod)
        return dataclasses.replace(pod, spread=constraints) if constraints else pod
