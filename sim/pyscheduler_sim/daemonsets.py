"""``apps/v1`` DaemonSets: what kube-apiserver stores and what the DaemonSet controller decides.

The API server side (``pkg/apis/apps``, ``pkg/registry/apps/daemonset``):

* defaulting: ``updateStrategy: RollingUpdate`` with ``maxUnavailable: 1`` and ``maxSurge: 0``,
  ``revisionHistoryLimit: 10`` (the pod template is defaulted as every pod spec is);
* a new DaemonSet starts with the status counts that have no ``omitempty`` at zero and
  template generation 1, which apps/v1 shows in the ``deprecated.daemonset.template.generation``
  annotation; every change of the template adds one;
* validation (``ValidateDaemonSetSpec``): the selector must match the template's labels and
  not be empty, the pods must restart ``Always`` and have no ``activeDeadlineSeconds``, and a
  rolling update needs exactly one of ``maxUnavailable`` and ``maxSurge`` non-zero; the
  selector cannot change.

The controller side (``pkg/controller/daemon``), pure so the controller loop
(:mod:`pyscheduler_sim.daemonset_controller`) only does I/O:

* :func:`should_run` is ``NodeShouldRunDaemonPod``: the template's node name, node selector and
  required node affinity must match the node, and its taints must be tolerated by the
  template's tolerations plus the ones every daemon pod gets
  (:data:`DAEMON_TOLERATIONS`: not-ready and unreachable ``NoExecute`` forever, disk, memory
  and PID pressure, unschedulable, and network-unavailable for host-network pods,
  ``NoSchedule``). A node with an untolerated ``NoSchedule`` taint gets no new daemon pod but
  keeps the one it has; an untolerated ``NoExecute`` taint removes it.
* :func:`new_pod` is the pod for a node: the template with those tolerations, the
  ``controller-revision-hash`` and ``pod-template-generation`` labels, the DaemonSet as
  controller, and a required node affinity ``matchFields metadata.name In [<node>]`` replacing
  the template's required terms (``ReplaceDaemonSetPodNodeNameNodeAffinity``). It has no
  ``nodeName``: since 1.12 daemon pods are placed by the scheduler their template names.
* :func:`target_node` maps a daemon pod to its node: its ``nodeName``, else the node its
  ``matchFields`` term names (``GetTargetNodeName``).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pyscheduler.api import validation as v
from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.validation import FieldError
from pyscheduler_sim import validation as ov
from pyscheduler_sim.controller_utils import owner_ref
from pyscheduler_sim.nodematch import NAME_FIELD, pod_fits_node, untolerated_taint

__all__ = [
    "DAEMON_TOLERATIONS",
    "HASH_LABEL",
    "TEMPLATE_GENERATION_ANNOTATION",
    "TEMPLATE_GENERATION_LABEL",
    "default_daemonset",
    "new_pod",
    "prepare_for_create",
    "prepare_for_update",
    "should_run",
    "target_node",
    "template_generation",
    "validate_daemonset",
]

Obj = dict[str, Any]

#: apps/v1 shows the DaemonSet's internal ``spec.templateGeneration`` in this annotation.
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
#: On daemon pods: the template generation and the template's hash they were made from.
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
HASH_LABEL = "controller-revision-hash"

#: ``AddOrUpdateDaemonPodTolerations``, in kube's order.
DAEMON_TOLERATIONS: tuple[Obj, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
_HOST_NETWORK_TOLERATION: Obj = {"key": "node.kubernetes.io/network-unavailable",
                                 "operator": "Exists", "effect": "NoSchedule"}

_PERCENT = re.compile(r"[0-9]+%")
_PERCENT_ERROR = ("a valid percent string must be a numeric string followed by an ending '%' "
                  "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")


# -- the API server's side ----------------------------------------------------------------------

def default_daemonset(obj: Obj) -> None:
    """``SetDefaults_DaemonSet`` (apps/v1); the pod template is defaulted by the caller."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
            rolling = strategy["rollingUpdate"]
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


def template_generation(obj: Obj) -> int:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(
        TEMPLATE_GENERATION_ANNOTATION, "0")
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0


def _set_template_generation(obj: Obj, generation: int) -> None:
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    annotations[TEMPLATE_GENERATION_ANNOTATION] = str(generation)


def prepare_for_create(obj: Obj) -> None:
    """``PrepareForCreate``: template generation 1 and the status without ``omitempty``."""
    _set_template_generation(obj, 1)
    obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                     "desiredNumberScheduled": 0, "numberReady": 0}


def prepare_for_update(obj: Obj, old: Obj) -> None:
    """``PrepareForUpdate``: the template generation is the server's; a new template bumps it."""
    generation = template_generation(old)
    if (obj.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
        generation += 1
    _set_template_generation(obj, generation)


def _int_or_percent(value: object, path: str, errs: list[FieldError]) -> int:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``; the value as a number
    (a percentage without its sign) for the zero checks."""
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            errs.append(v.invalid(path, value, _PERCENT_ERROR))
            return -1
        number = int(value[:-1])
        if number > 100:
            errs.append(v.invalid(path, value, "must not be greater than 100%"))
        return number
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            errs.append(v.invalid(path, value, "must be greater than or equal to 0"))
        return value
    return 0


def _validate_rolling_update(rolling: object, errs: list[FieldError]) -> None:
    """``ValidateRollingUpdateDaemonSet``."""
    path = "spec.updateStrategy.rollingUpdate"
    if not isinstance(rolling, dict):
        errs.append(v.required(path))
        return
    unavailable = _int_or_percent(rolling.get("maxUnavailable"), path + ".maxUnavailable", errs)
    surge = _int_or_percent(rolling.get("maxSurge"), path + ".maxSurge", errs)
    if unavailable and surge:
        errs.append(v.invalid(path + ".maxSurge", rolling.get("maxSurge"),
                              "may not be set when maxUnavailable is non-zero"))
    elif not unavailable and not surge:
        errs.append(v.required(path + ".maxUnavailable", "cannot be 0 when maxSurge is 0"))


def validate_daemonset(obj: Obj) -> list[FieldError]:
    """``ValidateDaemonSetSpec`` (metadata is checked by the generic validation)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [v.required("spec")]
    errs: list[FieldError] = []
    selector = spec.get("selector")
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    assert isinstance(template, dict)
    labels = (template.get("metadata") or {}).get("labels") or {}
    try:
        if not label_selector_from_dict(selector).matches(labels):
            errs.append(v.invalid("spec.template.metadata.labels", labels,
                                  "`selector` does not match template `labels`"))
    except SelectorError as exc:
        errs.append(v.invalid("spec.selector", selector, str(exc)))
    if isinstance(selector, dict) and not (selector.get("matchLabels")
                                           or selector.get("matchExpressions")):
        errs.append(v.invalid("spec.selector", selector,
                              "empty selector is invalid for daemonset"))
    errs.extend(v.validate_labels(labels, "spec.template.metadata.labels"))
    pod_spec = template.get("spec")
    errs.extend(ov.validate_pod_spec(pod_spec, "spec.template.spec"))
    errs.extend(ov.validate_long_running_template(pod_spec, "DaemonSet"))
    for key in ("minReadySeconds", "revisionHistoryLimit"):
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            errs.append(v.invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    strategy = spec.get("updateStrategy") if isinstance(spec.get("updateStrategy"), dict) else {}
    assert isinstance(strategy, dict)
    kind = strategy.get("type")
    if kind == "RollingUpdate":
        _validate_rolling_update(strategy.get("rollingUpdate"), errs)
    elif kind != "OnDelete":
        errs.append(v.not_supported("spec.updateStrategy", strategy,
                                    ("RollingUpdate", "OnDelete")))
    return errs


# -- the controller's decisions -----------------------------------------------------------------

def _with_daemon_tolerations(pod_spec: Obj) -> Obj:
    """``AddOrUpdateDaemonPodTolerations``: a toleration matching one of the daemon ones in
    key, operator, value and effect is replaced by it; the others are appended."""
    spec = copy.deepcopy(pod_spec)
    tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
    wanted = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork") is True:
        wanted.append(_HOST_NETWORK_TOLERATION)
    for toleration in wanted:
        for i, existing in enumerate(tolerations):
            if all((existing.get(k) or "") == (toleration.get(k) or "")
                   for k in ("key", "operator", "value", "effect")):
                tolerations[i] = dict(toleration)
                break
        else:
            tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations
    return spec


def _template_spec(ds: Obj) -> Obj:
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def should_run(ds: Obj, node: Obj) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (a daemon pod should be created on ``node``, an existing one
    may stay)."""
    spec = _with_daemon_tolerations(_template_spec(ds))
    name = (node.get("metadata") or {}).get("name")
    if spec.get("nodeName") not in (None, "", name) or not pod_fits_node(spec, node):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or []
    tolerations = spec["tolerations"]
    if untolerated_taint(taints, tolerations, ("NoSchedule", "NoExecute")) is None:
        return True, True
    return False, untolerated_taint(taints, tolerations, ("NoExecute",)) is None


def target_node(pod: Obj) -> str:
    """``GetTargetNodeName``: where a daemon pod runs or will run."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or ():
        for req in (term or {}).get("matchFields") or ():
            values = req.get("values") or []
            if req.get("key") == NAME_FIELD and req.get("operator") == "In" \
                    and len(values) == 1:
                return str(values[0])
    return ""


def new_pod(ds: Obj, node: str, revision_hash: str) -> Obj:
    """The daemon pod for ``node`` (``CreatePodTemplate``, the node affinity replaced, and
    ``GetPodFromTemplate``)."""
    template = (ds.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    meta = ds["metadata"]
    labels = dict(tmeta.get("labels") or {})
    labels[TEMPLATE_GENERATION_LABEL] = str(template_generation(ds))
    labels[HASH_LABEL] = revision_hash
    pod_meta: Obj = {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                     "labels": labels,
                     "ownerReferences": [owner_ref(ds, "DaemonSet", "apps/v1")]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    spec = _with_daemon_tolerations(_template_spec(ds))
    term = {"matchFields": [{"key": NAME_FIELD, "operator": "In", "values": [node]}]}
    affinity = spec.get("affinity")
    if not isinstance(affinity, dict):
        affinity = spec["affinity"] = {}
    node_affinity = affinity.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        node_affinity = affinity["nodeAffinity"] = {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        required["nodeSelectorTerms"] = [term]
    else:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [term]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
