"""kube-scheduler's own configuration file, ``KubeSchedulerConfiguration``, read as it is.

A kube-scheduler user's file (``apiVersion: kubescheduler.config.k8s.io/v1``, ``kind:
KubeSchedulerConfiguration``) is turned into this scheduler's settings document (the
``scheduler.yaml`` form that :mod:`pyscheduler.config` validates), with kube's rules:

* **Plugins** are merged with the default profile as kube merges them (``mergePluginSet``):
  the default ``multiPoint`` list minus what ``disabled`` names (``"*"``: all of them), an
  ``enabled`` plugin of the defaults replacing it in place (its weight), others appended; then
  ``multiPoint`` is expanded to every point each plugin implements, unless disabled at that
  point, a plugin configured at a point of its own taking its place there (kube's
  ``expandMultiPointPlugins``). A Score weight of 0 or none is 1, as in kube.
* **pluginConfig** carries each plugin's arguments: ``NodeResourcesFitArgs``
  (``scoringStrategy``), ``PodTopologySpreadArgs``, ``DefaultPreemptionArgs``,
  ``InterPodAffinityArgs``. A plugin named twice, or unknown, is an error, and so are arguments
  not served here (NodeAffinity's ``addedAffinity``, VolumeBinding's).
* **Errors** are kube's: the field's path and kube's words (``profiles[0].schedulerName:
  Required value``, ``FilterPlugin "Foo" does not exist``), every problem at once.

What this scheduler adds goes in a second YAML document of the same file: a ``scheduler.yaml``
mapping without ``apiVersion`` (fragments, storage, virtual nodes, the rebalancer, ...); the
fields the KubeSchedulerConfiguration owns may not be set there too.

Deliberate differences, each for safety: a profile without ``schedulerName`` is
``pyscheduler``'s, not ``default-scheduler`` (a file written for kube-scheduler must not make
this scheduler take every pod of the cluster unasked); the lease defaults to this scheduler's
own, and kube-scheduler's lease (``kube-system/kube-scheduler``) is refused: holding it would
stop the cluster's scheduler. The filters that hold whatever a fragment answers (resources,
taints, ports, node readiness, volumes) run even when a profile disables them, as in
``scheduler.yaml``. ``parallelism``, ``clientConnection`` (but ``kubeconfig``), profiling and
``delayCacheUntilActive`` are checked and have no effect here (the scheduling loop is one
thread; the client paces itself).

**Several profiles** are served by one process, as kube-scheduler serves them: one queue and
one cache (no node over-committed whichever profile placed what), each ``schedulerName`` with
its own plugins and arguments; the process's settings (lease, bind pool, fragments, cloud
pools) are shared. A profile without ``CloudBurst`` never bursts. The profiles decide as
kube's would: no default fragment runs unless the second document names one
(``scheduleFragment``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyscheduler.api import names
from pyscheduler.settings import render_value

__all__ = ["API_VERSION", "BURSTING_KEY", "KIND", "PLUGIN_POINTS", "Translated",
           "is_kube_scheduler_configuration", "kube_path", "translate"]

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
KIND: Final = "KubeSchedulerConfiguration"
GROUP: Final = "kubescheduler.config.k8s.io"
#: In the translated settings: whether the profile's postFilter has CloudBurst (taken out
#: before the settings are parsed).
BURSTING_KEY: Final = "@cloudBurst"

#: The extension points of a profile's ``plugins``, with kube's plugin type names.
POINTS: Final = {
    "preEnqueue": "PreEnqueuePlugin", "queueSort": "QueueSortPlugin",
    "preFilter": "PreFilterPlugin", "filter": "FilterPlugin", "postFilter": "PostFilterPlugin",
    "preScore": "PreScorePlugin", "score": "ScorePlugin", "reserve": "ReservePlugin",
    "permit": "PermitPlugin", "preBind": "PreBindPlugin", "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
}

#: Every plugin this scheduler has, and the points it implements (kube's, and its own).
PLUGIN_POINTS: Final[Mapping[str, frozenset[str]]] = {
    "SchedulingGates": frozenset({"preEnqueue"}),
    "PrioritySort": frozenset({"queueSort"}),
    "NodeUnschedulable": frozenset({"filter"}),
    "NodeName": frozenset({"filter"}),
    "TaintToleration": frozenset({"filter", "preScore", "score"}),
    "NodeAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodePorts": frozenset({"preFilter", "filter"}),
    "NodeResourcesFit": frozenset({"preFilter", "filter", "preScore", "score"}),
    "VolumeRestrictions": frozenset({"preFilter", "filter"}),
    "NodeVolumeLimits": frozenset({"preFilter", "filter"}),
    "VolumeBinding": frozenset({"preFilter", "filter", "reserve", "preBind"}),
    "VolumeZone": frozenset({"preFilter", "filter"}),
    "PodTopologySpread": frozenset({"preFilter", "filter", "preScore", "score"}),
    "InterPodAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "DefaultPreemption": frozenset({"postFilter"}),
    "NodeResourcesBalancedAllocation": frozenset({"preScore", "score"}),
    "ImageLocality": frozenset({"score"}),
    "DefaultBinder": frozenset({"bind"}),
    # this scheduler's own
    "NodeReady": frozenset({"filter"}),
    "CloudBurst": frozenset({"postFilter"}),
    "VirtualNodeLabel": frozenset({"preBind"}),
}

#: kube 1.36's default profile (``getDefaultPlugins``), as far as this scheduler has the
#: plugins, and its own (NodeReady, CloudBurst, VirtualNodeLabel).
DEFAULT_MULTI_POINT: Final[tuple[tuple[str, int | None], ...]] = (
    ("SchedulingGates", None), ("PrioritySort", None), ("NodeUnschedulable", None),
    ("NodeName", None), ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", None),
    ("NodeResourcesFit", 1), ("VolumeRestrictions", None), ("NodeVolumeLimits", None),
    ("VolumeBinding", None), ("VolumeZone", None), ("PodTopologySpread", 2),
    ("InterPodAffinity", 2), ("DefaultPreemption", None), ("CloudBurst", None),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", None),
    ("NodeReady", None), ("VirtualNodeLabel", None),
)

#: kube's plugins this scheduler does not have (yet): named, they are refused as such.
NOT_HERE: Final = frozenset({"DynamicResources", "NodeDeclaredFeatures", "GangScheduling",
                             "TopologyPlacementGenerator", "PodGroupPodsCount"})

#: Plugins that must run at their points here (the queue, the cache and the binding cycle
#: depend on them; VirtualNodeLabel is how a pod on a cloud pool is known as one): a profile
#: may not leave them out.
REQUIRED: Final = (("preEnqueue", "SchedulingGates"), ("queueSort", "PrioritySort"),
                   ("reserve", "VolumeBinding"), ("preBind", "VolumeBinding"),
                   ("preBind", "VirtualNodeLabel"), ("bind", "DefaultBinder"))

_TOP_FIELDS: Final = ("apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
                      "enableProfiling", "enableContentionProfiling",
                      "percentageOfNodesToScore", "podInitialBackoffSeconds",
                      "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive")
_PROFILE_FIELDS: Final = ("schedulerName", "percentageOfNodesToScore", "plugins",
                          "pluginConfig")
_PLUGINS_FIELDS: Final = (*POINTS, "multiPoint", "placementGenerate", "placementScore")
_LEADER_FIELDS: Final = ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                         "resourceLock", "resourceName", "resourceNamespace")
_CLIENT_FIELDS: Final = ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")
#: Each plugin's arguments: the fields kube's ``<Plugin>Args`` has, and where they go in the
#: settings document (None: the args as a whole).
_ARGS: Final[Mapping[str, tuple[tuple[str, ...], str | None]]] = {
    "NodeResourcesFit": (("scoringStrategy", "ignoredResources", "ignoredResourceGroups"),
                         None),
    "PodTopologySpread": (("defaultConstraints", "defaultingType"), "podTopologySpread"),
    "DefaultPreemption": (("minCandidateNodesPercentage", "minCandidateNodesAbsolute"),
                          "preemption"),
    "InterPodAffinity": (("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"),
                         "interPodAffinity"),
}
#: Fields of the settings document the KubeSchedulerConfiguration owns.
OWNED: Final = ("schedulerName", "plugins", "scoringStrategy", "percentageOfNodesToScore",
                "podInitialBackoffSeconds", "podMaxBackoffSeconds", "podTopologySpread",
                "interPodAffinity", "leaderElection")
#: kube-scheduler's own lease, which this scheduler must never take.
KUBE_SCHEDULER_LEASE: Final = ("kube-system", "kube-scheduler")

_DURATION: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                        "h": 3600.0}


def is_kube_scheduler_configuration(doc: object) -> bool:
    return isinstance(doc, Mapping) and (doc.get("kind") == KIND or str(
        doc.get("apiVersion", "")).startswith(GROUP + "/"))


@dataclass(frozen=True, slots=True)
class Translated:
    """A settings document per profile, the problems found (path, kube's message), and for
    the settings' own checks, per profile, the kube path of each settings field they may
    name."""

    profiles: list[dict[str, Any]]
    problems: list[tuple[str, str]]
    paths: list[dict[str, str]]


def parse_duration(text: object) -> float | None:
    """A Go duration (``15s``, ``1m30s``, ``500ms``) in seconds; None when it is not one."""
    if not isinstance(text, str) or not text:
        return None
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return total if pos == len(text) else None


class _Translator:
    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []
        self.paths: dict[str, str] = {}
        self.profile_paths: list[dict[str, str]] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def invalid(self, path: str, value: object, why: str) -> None:
        self.fail(path, f"Invalid value: {render_value(value)}: {why}")

    def mapping(self, value: object, path: str, known: Sequence[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.invalid(path, value, "must be an object")
            return {}
        for key in value:
            if key not in known:
                self.fail(f"{path}.{key}" if path else str(key),
                          f'unknown field "{key}"; known fields: {", ".join(known)}')
        return {k: v for k, v in value.items() if k in known}

    def named(self, value: object, path: str, known: Sequence[str]
              ) -> list[tuple[str, Mapping[str, Any], str]]:
        """A list of objects with a ``name``: (path, object, name) of each that has one."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.invalid(path, value, "must be a list of objects with a name")
            return []
        out = []
        for i, item in enumerate(value):
            where = f"{path}[{i}]"
            entry = self.mapping(item, where, known)
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                self.fail(f"{where}.name", "Required value")
            else:
                out.append((where, entry, name))
        return out

    def integer(self, section: Mapping[str, Any], key: str, path: str) -> int | None:
        value = section.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.invalid(path, value, "must be an integer")
            return None
        return value

    def boolean(self, section: Mapping[str, Any], key: str, path: str) -> bool | None:
        value = section.get(key)
        if value is not None and not isinstance(value, bool):
            self.invalid(path, value, "must be true or false")
            return None
        return value

    # -- the document ---------------------------------------------------------------------

    def translate(self, doc: Mapping[str, Any],
                  extra: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        top = self.mapping(doc, "", _TOP_FIELDS)
        version = top.get("apiVersion")
        if version != API_VERSION:
            self.fail("apiVersion", f'no kind "{KIND}" is registered for version '
                                    f'{render_value(version)}; use "{API_VERSION}"')
        if top.get("kind") != KIND:
            self.fail("kind", f"Invalid value: {render_value(top.get('kind'))}: must be "
                              f'"{KIND}"')
        out: dict[str, Any] = {}
        parallelism = self.integer(top, "parallelism", "parallelism")
        if parallelism is not None and parallelism <= 0:
            self.invalid("parallelism", parallelism,
                         "should be an integer value greater than zero")
        for key in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
            self.boolean(top, key, key)
        if "clientConnection" in top:
            client = self.mapping(top["clientConnection"], "clientConnection", _CLIENT_FIELDS)
            if client.get("kubeconfig"):
                self.fail("clientConnection.kubeconfig",
                          "Forbidden: name the kubeconfig on the command line (--kubeconfig), "
                          "or run in the cluster with its service account")
        if top.get("extenders"):
            self.fail("extenders", "Forbidden: scheduler extenders are not supported here: "
                                   "write the logic as a fragment (wssp/schedulefragment)")
        percentage = self.integer(top, "percentageOfNodesToScore", "percentageOfNodesToScore")
        if percentage is not None:
            if 0 <= percentage <= 100:
                out["percentageOfNodesToScore"] = percentage
            else:
                self.invalid("percentageOfNodesToScore", percentage,
                             "not in valid range [0-100]")
        initial = self.integer(top, "podInitialBackoffSeconds", "podInitialBackoffSeconds")
        maximum = self.integer(top, "podMaxBackoffSeconds", "podMaxBackoffSeconds")
        if initial is not None and initial <= 0:
            self.invalid("podInitialBackoffSeconds", initial, "must be greater than 0")
            initial = None
        if maximum is not None and maximum < (initial if initial is not None else 1):
            self.invalid("podMaxBackoffSeconds", maximum,
                         "must be greater than or equal to PodInitialBackoffSeconds")
            maximum = None
        if initial is not None:
            out["podInitialBackoffSeconds"] = initial
        if maximum is not None:
            out["podMaxBackoffSeconds"] = maximum
        out["leaderElection"] = self.leader_election(top.get("leaderElection"))
        shared = dict(self.paths)
        extra = dict(extra or {})
        victims = self.extra_preemption(extra)
        for key in OWNED:
            if key in extra:
                self.fail(key, f"Forbidden: set by the {KIND} of this file; remove it from the "
                               "second document")
                del extra[key]
        profiles = top.get("profiles")
        if profiles is None:
            profiles = [{}]
        if not isinstance(profiles, list) or not profiles:
            self.fail("profiles", "Required value")
            profiles = []
        settings: list[dict[str, Any]] = []
        seen: dict[str, int] = {}
        # The profiles decide as kube's would: no default fragment unless one is named.
        extra.setdefault("scheduleFragment", None)
        for i, value in enumerate(profiles):
            self.paths = dict(shared)
            one: dict[str, Any] = {**extra, **out}
            self.profile(value, f"profiles[{i}]", one)
            if victims is not None:
                one["preemption"]["victims"] = victims
            name = one.get("schedulerName", names.DEFAULT_SCHEDULER_NAME)
            if name in seen:
                self.fail(f"profiles[{i}].schedulerName",
                          f'Duplicate value: "profiles[{seen[name]}].schedulerName"')
            seen.setdefault(name, i)
            settings.append(one)
            self.profile_paths.append(self.paths)
        return settings

    def extra_preemption(self, extra: dict[str, Any]) -> object:
        """The second document's ``preemption``: its ``victims`` rule alone (the rest is the
        profiles' DefaultPreemption)."""
        given = extra.pop("preemption", None)
        if given is None:
            return None
        section = self.mapping(given, "preemption", ("victims", "enabled", "order",
                                                     "minCandidateNodesPercentage",
                                                     "minCandidateNodesAbsolute"))
        for key in section:
            if key != "victims":
                self.fail(f"preemption.{key}", f"Forbidden: set by the {KIND} of this file "
                                               "(DefaultPreemption in a profile's postFilter "
                                               "and pluginConfig)")
        return section.get("victims")

    def leader_election(self, value: object) -> dict[str, Any]:
        path = "leaderElection"
        section = {} if value is None else self.mapping(value, path, _LEADER_FIELDS)
        out: dict[str, Any] = {}
        elect = self.boolean(section, "leaderElect", f"{path}.leaderElect")
        if elect is not None:
            out["enabled"] = elect
        lock = section.get("resourceLock")
        if lock is not None and lock != "leases" and elect is not False:
            self.invalid(f"{path}.resourceLock", lock, 'resourceLock value must be "leases"')
        for key, native in (("leaseDuration", "leaseDurationSeconds"),
                            ("renewDeadline", "renewDeadlineSeconds"),
                            ("retryPeriod", "retryPeriodSeconds")):
            if key not in section:
                continue
            seconds = parse_duration(section[key])
            if seconds is None or seconds <= 0:
                self.invalid(f"{path}.{key}", section[key],
                             "must be a positive duration, such as 15s")
            else:
                out[native] = seconds
                self.paths[f"leaderElection.{native}"] = f"{path}.{key}"
        name = section.get("resourceName")
        namespace = section.get("resourceNamespace")
        if name is not None:
            out["leaseName"] = name
            self.paths["leaderElection.leaseName"] = f"{path}.resourceName"
        if namespace is not None:
            out["leaseNamespace"] = namespace
            self.paths["leaderElection.leaseNamespace"] = f"{path}.resourceNamespace"
        if (namespace or "kube-system", name) == KUBE_SCHEDULER_LEASE:
            self.invalid(f"{path}.resourceName", name,
                         "kube-system/kube-scheduler is kube-scheduler's own lease: holding it "
                         "would stop the cluster's scheduler; name a lease of this "
                         "scheduler's own (the default)")
        return out

    # -- a profile ------------------------------------------------------------------------

    def profile(self, value: object, path: str, out: dict[str, Any]) -> None:
        section = self.mapping(value, path, _PROFILE_FIELDS)
        name = section.get("schedulerName")
        if name == "":
            self.fail(f"{path}.schedulerName", "Required value")
        elif name is not None:
            out["schedulerName"] = name
            self.paths["schedulerName"] = f"{path}.schedulerName"
        percentage = self.integer(section, "percentageOfNodesToScore",
                                  f"{path}.percentageOfNodesToScore")
        if percentage is not None:
            if 0 <= percentage <= 100:
                out["percentageOfNodesToScore"] = percentage
            else:
                self.invalid(f"{path}.percentageOfNodesToScore", percentage,
                             "not in valid range [0-100]")
        points = self.plugins(section.get("plugins"), f"{path}.plugins")
        self.settings_of(points, path, out)
        self.plugin_config(section.get("pluginConfig"), f"{path}.pluginConfig", points, out)

    def plugin_set(self, value: object, path: str) -> tuple[list[tuple[str, int | None, str]],
                                                             list[str]]:
        """``enabled`` (name, weight, path) and ``disabled`` names of one point."""
        section = {} if value is None else self.mapping(value, path, ("enabled", "disabled"))
        enabled: list[tuple[str, int | None, str]] = []
        disabled: list[str] = []
        for key in ("enabled", "disabled"):
            for where, plugin, plugin_name in self.named(section.get(key), f"{path}.{key}",
                                                         ("name", "weight")):
                if key == "disabled":
                    disabled.append(plugin_name)
                    continue
                weight = self.integer(plugin, "weight", f"{where}.weight")
                enabled.append((plugin_name, weight, where))
        return enabled, disabled

    def plugins(self, value: object, path: str) -> dict[str, list[tuple[str, int | None, str]]]:
        """Every point's plugins in order, with their weights, as kube's framework ends up
        with them."""
        section = {} if value is None else self.mapping(value, path, _PLUGINS_FIELDS)
        for key in ("placementGenerate", "placementScore"):
            if section.get(key):
                self.fail(f"{path}.{key}", "Forbidden: needs kube's alpha "
                                           "TopologyAwareWorkloadScheduling, not served here")
        custom = {point: self.plugin_set(section.get(point), f"{path}.{point}")
                  for point in ("multiPoint", *POINTS)}
        # mergePluginSet over the defaults (which only have multiPoint)
        enabled, disabled = custom["multiPoint"]
        default = [(n, w, f"{path}.multiPoint") for n, w in DEFAULT_MULTI_POINT]
        multi = self.merged(default, enabled, disabled)
        for name, _, where in multi:
            self.known(name, "multiPoint", where)
        result: dict[str, list[tuple[str, int | None, str]]] = {}
        for point, type_name in POINTS.items():
            specific, off = custom[point]
            for name, _, where in specific:
                if self.known(name, point, where) and point not in PLUGIN_POINTS[name]:
                    self.fail(where, f'plugin "{name}" does not extend {type_name} plugin')
            specific = [p for p in specific if point in PLUGIN_POINTS.get(p[0], ())]
            chosen = specific
            if "*" not in off:
                names = [p[0] for p in specific]
                override = [p for p in specific if p[0] in {m[0] for m in multi}]
                from_multi = [m for m in multi if point in PLUGIN_POINTS.get(m[0], ())
                              and m[0] not in off and m[0] not in names]
                rest = [p for p in specific if p not in override]
                chosen = override + from_multi + rest
            seen: set[str] = set()
            for name, _, where in chosen:
                if name in seen:
                    self.fail(where, f'plugin "{name}" already registered as "{type_name}"')
                seen.add(name)
            result[point] = chosen
        return result

    def merged(self, default: list[tuple[str, int | None, str]],
               enabled: list[tuple[str, int | None, str]],
               disabled: list[str]) -> list[tuple[str, int | None, str]]:
        """kube's ``mergePluginSet``."""
        off = set(disabled)
        by_name = {p[0]: p for p in enabled}
        out: list[tuple[str, int | None, str]] = []
        replaced: set[str] = set()
        if "*" not in off:
            for plugin in default:
                if plugin[0] in off:
                    continue
                if plugin[0] in by_name:
                    out.append(by_name[plugin[0]])
                    replaced.add(plugin[0])
                else:
                    out.append(plugin)
        out += [p for p in enabled if p[0] not in replaced]
        return out

    def known(self, name: str, point: str, where: str) -> bool:
        if name in PLUGIN_POINTS:
            return True
        type_name = POINTS.get(point, "MultiPoint plugin")
        if name in NOT_HERE:
            self.fail(where, f'{type_name} "{name}" does not exist: not implemented by '
                             "pyscheduler yet")
        else:
            self.fail(where, f'{type_name} "{name}" does not exist; known plugins: '
                             f'{", ".join(sorted(PLUGIN_POINTS))}')
        return False

    def settings_of(self, points: Mapping[str, list[tuple[str, int | None, str]]], path: str,
                    out: dict[str, Any]) -> None:
        for point, needed in REQUIRED:
            if needed not in [p[0] for p in points[point]]:
                self.fail(f"{path}.plugins.{point}", f'Forbidden: "{needed}" cannot be '
                                                     "left out here: this scheduler's "
                                                     f"{point} depends on it")
        # NodeReady holds always (with the other invariant filters): not a setting.
        filters = [(name, where) for name, _, where in points["filter"] if name != "NodeReady"]
        out["plugins"] = {
            "filter": [name for name, _ in filters],
            "score": {name: {"weight": weight or 1} for name, weight, _ in points["score"]},
        }
        for i, (name, _, where) in enumerate(points["score"]):
            self.paths[f"plugins.score.{name}.weight"] = f"{where}.weight"
            self.paths[f"plugins.score.{name}"] = where
        for i, (_, where) in enumerate(filters):
            self.paths[f"plugins.filter[{i}]"] = where
        post = [name for name, _, _ in points["postFilter"]]
        preemption: dict[str, Any] = out.setdefault("preemption", {})
        preemption["enabled"] = "DefaultPreemption" in post
        if "DefaultPreemption" in post and "CloudBurst" in post:
            preemption["order"] = "PreemptThenBurst" if post.index(
                "DefaultPreemption") < post.index("CloudBurst") else "BurstThenPreempt"
        out[BURSTING_KEY] = "CloudBurst" in post

    def plugin_config(self, value: object, path: str,
                      points: Mapping[str, list[tuple[str, int | None, str]]],
                      out: dict[str, Any]) -> None:
        seen: set[str] = set()
        for where, entry, name in self.named(value, path, ("name", "args")):
            if name in seen:
                self.fail(where, f"Duplicate value: {render_value(name)}")
                continue
            seen.add(name)
            if name not in PLUGIN_POINTS:
                self.fail(f"{where}.name", f'Invalid value: "{name}": no such plugin; known '
                                           f'plugins: {", ".join(sorted(PLUGIN_POINTS))}')
                continue
            fields, target = _ARGS.get(name, ((), None))
            args = entry.get("args") or {}
            if not isinstance(args, Mapping):
                self.invalid(f"{where}.args", args, "has to match plugin args")
                continue
            kind = args.get("kind")
            if kind is not None and kind != f"{name}Args":
                self.invalid(f"{where}.args.kind", kind, f'must be "{name}Args"')
            args_version = args.get("apiVersion")
            if args_version is not None and args_version != API_VERSION:
                self.invalid(f"{where}.args.apiVersion", args_version,
                             f'must be "{API_VERSION}"')
            rest = {k: v for k, v in args.items() if k not in ("kind", "apiVersion")}
            if not fields:
                if rest:
                    self.fail(f"{where}.args", f"Forbidden: {name} takes no arguments here "
                                               f"(got {', '.join(map(str, rest))})")
                continue
            given = self.mapping(rest, f"{where}.args", fields)
            if name == "NodeResourcesFit":
                for unused in ("ignoredResources", "ignoredResourceGroups"):
                    if given.get(unused):
                        self.fail(f"{where}.args.{unused}", "Forbidden: not supported here: "
                                                            "every requested resource counts")
                if "scoringStrategy" in given:
                    out["scoringStrategy"] = given["scoringStrategy"]
                    self.paths["scoringStrategy"] = f"{where}.args.scoringStrategy"
            elif target is not None and given:
                section: dict[str, Any] = out.setdefault(target, {})
                section.update(given)
                self.paths[target] = f"{where}.args"


def translate(doc: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> Translated:
    """The settings documents, one per profile, for a KubeSchedulerConfiguration (and the
    second document of the file, ``extra``), with the problems found."""
    translator = _Translator()
    settings = translator.translate(doc, extra)
    return Translated(settings, translator.problems, translator.profile_paths)


def kube_path(paths: Mapping[str, str], native: str) -> str:
    """The KubeSchedulerConfiguration path of a settings field (the longest known prefix)."""
    best = ""
    for prefix in paths:
        if (native == prefix or native.startswith(prefix + ".") or native.startswith(
                prefix + "[")) and len(prefix) > len(best):
            best = prefix
    if not best:
        return native
    return paths[best] + native[len(best):]



def _go_duration(seconds: float) -> str:
    """Seconds as a Go duration (``15s``, ``1.5s``)."""
    return f"{seconds:g}s"


def from_settings(settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``scheduler.yaml`` document (as :func:`pyscheduler.config.dump_config` writes it) as
    the two documents of the same configuration: a KubeSchedulerConfiguration, and the
    settings it does not hold. Reading them back gives the same configuration. Raises
    ValueError for what a KubeSchedulerConfiguration cannot say (a fractional back-off)."""
    rest = dict(settings)
    for key in ("podInitialBackoffSeconds", "podMaxBackoffSeconds"):
        if not float(rest[key]).is_integer():
            raise ValueError(f"{key}: {rest[key]:g} is no whole number of seconds, which a "
                             f"{KIND} needs")
    plugins = rest.pop("plugins")
    preemption = rest.pop("preemption")
    post_filter: dict[str, Any] = {}
    if not preemption["enabled"]:
        post_filter = {"disabled": [{"name": "DefaultPreemption"}]}
    elif preemption["order"] == "BurstThenPreempt":
        post_filter = {"disabled": [{"name": "*"}],
                       "enabled": [{"name": "CloudBurst"}, {"name": "DefaultPreemption"}]}
    profile_plugins: dict[str, Any] = {
        "filter": {"disabled": [{"name": "*"}],
                   "enabled": [{"name": name} for name in plugins["filter"]]},
        "score": {"disabled": [{"name": "*"}],
                  "enabled": [{"name": name, "weight": spec["weight"]}
                              for name, spec in plugins["score"].items()]},
    }
    if post_filter:
        profile_plugins["postFilter"] = post_filter
    election = rest.pop("leaderElection")
    rest.pop("schedulerName")
    kube = {
        "apiVersion": API_VERSION, "kind": KIND,
        "percentageOfNodesToScore": rest.pop("percentageOfNodesToScore"),
        "podInitialBackoffSeconds": int(rest.pop("podInitialBackoffSeconds")),
        "podMaxBackoffSeconds": int(rest.pop("podMaxBackoffSeconds")),
        "leaderElection": {
            "leaderElect": election["enabled"], "resourceLock": "leases",
            "resourceName": election["leaseName"],
            "resourceNamespace": election["leaseNamespace"],
            "leaseDuration": _go_duration(election["leaseDurationSeconds"]),
            "renewDeadline": _go_duration(election["renewDeadlineSeconds"]),
            "retryPeriod": _go_duration(election["retryPeriodSeconds"]),
        },
        "profiles": [{
            "schedulerName": settings["schedulerName"],
            "plugins": profile_plugins,
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {
                    "scoringStrategy": rest.pop("scoringStrategy")}},
                {"name": "PodTopologySpread", "args": rest.pop("podTopologySpread")},
                {"name": "DefaultPreemption", "args": {
                    key: preemption[key] for key in ("minCandidateNodesPercentage",
                                                     "minCandidateNodesAbsolute")}},
                {"name": "InterPodAffinity", "args": rest.pop("interPodAffinity")},
            ],
        }],
    }
    if "identity" in election:
        raise ValueError("leaderElection.identity: a KubeSchedulerConfiguration has none; "
                         "leave it out (each process picks its own)")
    rest["preemption"] = {"victims": preemption["victims"]}
    return [kube, rest]
