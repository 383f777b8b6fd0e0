"""Per-kind behaviour of the embedded API server: defaulting, admission and validation.

kube-apiserver gives each resource a *strategy* (``PrepareForCreate``, ``Validate``,
``PrepareForUpdate``, ``ValidateUpdate``) and runs admission plugins before storing. This module
reproduces the part of that which the scheduler and its users can observe:

* Pod defaulting (``restartPolicy``, ``schedulerName: default-scheduler``,
  ``terminationGracePeriodSeconds``, requests defaulted from limits, ...), the
  DefaultTolerationSeconds admission plugin (not-ready/unreachable ``NoExecute`` tolerations for
  300 s), the QoS class, and the initial ``Pending`` status.
* Pod update rules: the spec is immutable except for the fields kube allows, and ``nodeName`` can
  only be set through the ``binding`` subresource.
* Deployment/ReplicaSet defaulting and their selector rules.
* CustomResourceDefinition naming rules and the status conditions that mark it established.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyscheduler.api.quantity import QuantityError, parse_quantity
from pyscheduler.api import validation as v
from pyscheduler.sim.resources import ResourceType
from pyscheduler.sim.schema import validate_crd_schema
from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.validation import FieldError

__all__ = [
    "admit_custom",
    "default_pod_spec",
    "pod_qos_class",
    "prepare_for_create",
    "validate_create",
    "validate_update",
]

Obj = dict[str, Any]


# -- pods -------------------------------------------------------------------------------------

def _default_container(c: Obj) -> None:
    if not isinstance(c, dict):
        return
    image = str(c.get("image", ""))
    if "imagePullPolicy" not in c:
        tag = image.rsplit("/", 1)[-1]
        c["imagePullPolicy"] = "IfNotPresent" if (":" in tag and not tag.endswith(":latest")) \
            or "@" in image else "Always"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    resources = c.setdefault("resources", {})
    if isinstance(resources, dict):
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            # Kubernetes defaults each missing request to its limit.
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in limits.items():
                    requests.setdefault(name, value)
    for port in c.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def default_pod_spec(spec: Obj) -> None:
    """The defaulting kube-apiserver applies to a PodSpec (also inside pod templates)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            _default_container(c)


def _admit_pod(spec: Obj) -> None:
    """Admission plugins that touch every new pod: ServiceAccount, Priority,
    DefaultTolerationSeconds."""
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = spec["tolerations"] = []
    if not isinstance(tolerations, list):
        return
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(isinstance(t, dict) and t.get("key") == key
                   and t.get("effect") in ("NoExecute", "", None) for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300})


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError):
        return None


def pod_qos_class(spec: Obj) -> str:
    """Guaranteed, Burstable or BestEffort, by Kubernetes' rules (v1/qos GetPodQOS)."""
    containers = [c for key in ("containers", "initContainers")
                  for c in spec.get(key) or () if isinstance(c, dict)]
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        compute = {k for k in (*requests, *limits) if k in ("cpu", "memory")}
        if compute:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or _quantity(requests.get(name, limits[name])) \
                    != _quantity(limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


_POD_MUTABLE = (
    "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
    "to 1 if it was previously negative)"
)


def _validate_pod_update(new: Obj, old: Obj) -> list[FieldError]:
    ns, os_ = dict(new.get("spec") or {}), dict(old.get("spec") or {})
    errs: list[FieldError] = []
    if ns.get("nodeName") != os_.get("nodeName"):
        # kube-scheduler and every other scheduler must use the binding subresource.
        errs.append(FieldError("FieldValueForbidden", "spec.nodeName", ns.get("nodeName"),
                               "may not be changed after the pod is created; use the binding "
                               "subresource"))
        return errs
    gates_old = os_.get("schedulingGates") or []
    gates_new = ns.get("schedulingGates") or []
    if any(g not in gates_old for g in gates_new):
        errs.append(FieldError("FieldValueForbidden", "spec.schedulingGates", None,
                               "only deletion is allowed, but found new scheduling gate"))
    tol_old = os_.get("tolerations") or []
    tol_new = ns.get("tolerations") or []
    if any(t not in tol_new for t in tol_old):
        errs.append(FieldError("FieldValueForbidden", "spec.tolerations", None,
                               "existing toleration can not be modified except its "
                               "tolerationSeconds"))
    # Blank out the mutable fields and compare what remains.
    for spec in (ns, os_):
        for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates",
                    "terminationGracePeriodSeconds"):
            spec.pop(key, None)
        for ckey in ("containers", "initContainers"):
            spec[ckey] = [{**c, "image": None} if isinstance(c, dict) else c
                          for c in spec.get(ckey) or ()]
    if ns != os_ and not errs:
        errs.append(FieldError("FieldValueForbidden", "spec", None, _POD_MUTABLE.split(
            "Forbidden: ", 1)[1]))
    return errs


# -- apps -------------------------------------------------------------------------------------

def _default_workload(obj: Obj, kind: str) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    if kind == "Deployment":
        spec.setdefault("strategy", {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.get("spec"))  # type: ignore[arg-type]


def _validate_workload(obj: Obj) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("FieldValueRequired", "spec", None, "")]
    errs: list[FieldError] = []
    replicas = spec.get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        errs.append(FieldError("FieldValueInvalid", "spec.replicas", replicas,
                               "must be greater than or equal to 0"))
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels")
                                              or selector.get("matchExpressions")):
        errs.append(FieldError("FieldValueRequired", "spec.selector", None, ""))
        return errs
    template = spec.get("template")
    if not isinstance(template, dict):
        errs.append(FieldError("FieldValueRequired", "spec.template", None, ""))
        return errs
    labels = (template.get("metadata") or {}).get("labels") or {}
    try:
        matches = label_selector_from_dict(selector).matches(labels)
    except SelectorError as exc:
        errs.append(FieldError("FieldValueInvalid", "spec.selector", selector, str(exc)))
        return errs
    if not matches:
        errs.append(FieldError("FieldValueInvalid", "spec.template.metadata.labels", labels,
                               "`selector` does not match template `labels`"))
    errs.extend(v.validate_labels(labels, "spec.template.metadata.labels"))
    errs.extend(v.validate_pod_spec(template.get("spec"), "spec.template.spec"))
    return errs


def _validate_workload_update(new: Obj, old: Obj) -> list[FieldError]:
    new_sel = (new.get("spec") or {}).get("selector")
    old_sel = (old.get("spec") or {}).get("selector")
    if new_sel != old_sel:
        return [FieldError("FieldValueInvalid", "spec.selector", new_sel, "field is immutable")]
    return []


# -- custom resource definitions --------------------------------------------------------------

def _validate_crd(obj: Obj) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("FieldValueRequired", "spec", None, "")]
    errs: list[FieldError] = []
    group = spec.get("group")
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    assert isinstance(names, dict)
    plural, kind = names.get("plural"), names.get("kind")
    if not isinstance(group, str) or not group or "." not in group:
        errs.append(FieldError("FieldValueInvalid", "spec.group", group,
                               "should be a domain with at least one dot"))
    if not isinstance(plural, str) or not plural:
        errs.append(FieldError("FieldValueRequired", "spec.names.plural", None, ""))
    else:
        errs.extend(v.validate_dns1123_label(plural, "spec.names.plural"))
    if not isinstance(kind, str) or not kind:
        errs.append(FieldError("FieldValueRequired", "spec.names.kind", None, ""))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errs.append(FieldError("FieldValueNotSupported", "spec.scope", spec.get("scope"),
                               'supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        errs.append(FieldError("FieldValueRequired", "spec.versions",
                               None, "must have exactly one version marked as storage version"))
    else:
        storage = [ver for ver in versions if isinstance(ver, dict) and ver.get("storage")]
        if len(storage) != 1:
            errs.append(FieldError("FieldValueInvalid", "spec.versions", versions,
                                   "must have exactly one version marked as storage version"))
    for i, ver in enumerate(versions if isinstance(versions, list) else ()):
        schema = ((ver.get("schema") or {}) if isinstance(ver, dict) else {}).get(
            "openAPIV3Schema")
        if schema is not None:
            errs.extend(validate_crd_schema(
                schema, f"spec.versions[{i}].schema.openAPIV3Schema"))
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        errs.append(FieldError("FieldValueInvalid", "metadata.name", name,
                               'must be spec.names.plural+"."+spec.group'))
    return errs


def _establish_crd(obj: Obj, now: str) -> None:
    spec = obj.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    obj["status"] = {
        "acceptedNames": names,
        "storedVersions": [ver["name"] for ver in spec.get("versions") or ()
                           if isinstance(ver, dict) and ver.get("storage")],
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    }


# -- dispatch ---------------------------------------------------------------------------------

def prepare_for_create(rt: ResourceType, obj: Obj, now: str) -> None:
    """Defaulting, admission and status reset for a new object."""
    kind = rt.kind
    if rt.group == "" and kind == "Pod":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_pod_spec(spec)
            _admit_pod(spec)
            obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(spec)}
        return
    if rt.group == "" and kind == "Namespace":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        return
    if rt.group == "apps" and kind in ("Deployment", "ReplicaSet"):
        _default_workload(obj, kind)
        # ReplicaSetStatus.replicas is the one status field without omitempty.
        obj["status"] = {"replicas": 0} if kind == "ReplicaSet" else {}
        return
    if rt.group == "apiextensions.k8s.io":
        _establish_crd(obj, now)
        return
    if rt.has_status and rt.group != "":
        # Types with a status subresource ignore status on create (kube resets it).
        obj.pop("status", None)


_CREATE_VALIDATORS: dict[tuple[str, str], Callable[[Obj], list[FieldError]]] = {
    ("", "Pod"): v.validate_pod,
    ("", "Node"): v.validate_node,
    ("", "Namespace"): v.validate_namespace,
    ("apps", "Deployment"): _validate_workload,
    ("apps", "ReplicaSet"): _validate_workload,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _validate_crd,
}


def admit_custom(rt: ResourceType, obj: Obj) -> list[str]:
    """Defaulting and pruning of a custom object by its CRD schema; returns pruned paths."""
    if rt.schema is None or rt.schema.accepts_everything:
        return []
    rt.schema.default(obj)
    return rt.schema.prune(obj)


def validate_create(rt: ResourceType, obj: Obj) -> list[FieldError]:
    errs = v.validate_generic(obj, rt.namespaced) if (rt.group, rt.kind) not in (
        ("", "Pod"), ("", "Node"), ("", "Namespace")) else []
    extra = _CREATE_VALIDATORS.get((rt.group, rt.kind))
    if extra is not None:
        errs.extend(extra(obj))
    if rt.custom and rt.schema is not None:
        errs.extend(rt.schema.validate(obj))
    return errs


def validate_update(rt: ResourceType, new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_create(rt, new)
    if errs:
        return errs
    if rt.group == "" and rt.kind == "Pod":
        return _validate_pod_update(new, old)
    if rt.group == "apps" and rt.kind in ("Deployment", "ReplicaSet"):
        return _validate_workload_update(new, old)
    if rt.group == "apiextensions.k8s.io":
        for path in (("group",), ("names", "plural"), ("scope",)):
            a: Any = new.get("spec") or {}
            b: Any = old.get("spec") or {}
            for part in path:
                a, b = (a or {}).get(part), (b or {}).get(part)
            if a != b:
                return [FieldError("FieldValueInvalid", "spec." + ".".join(path), a,
                                   "field is immutable")]
    return []
