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
* StatefulSet and Job defaulting and validation (``pkg/apis/apps`` and ``pkg/apis/batch``): a
  StatefulSet's pods always restart, its claim templates need an access mode and a storage
  request, and only some of its spec may change; a Job's pods never restart ``Always``, its
  selector is generated from its uid (with the ``batch.kubernetes.io/job-name`` and
  ``controller-uid`` labels on its template) unless ``manualSelector`` is set, and its template
  cannot change. No controller runs these: they are stored as a real API server stores them.
* Secrets: ``stringData`` is merged into base64 ``data`` on every write (it is write-only, as in
  kube), keys are checked, the type defaults to ``Opaque``.
* ResourceQuota hard limits and scope selectors; RBAC objects (:mod:`pyscheduler_sim.rbac`).
* CustomResourceDefinition naming rules and the status conditions that mark it established.
* DaemonSets (:mod:`pyscheduler_sim.daemonsets`), ReplicationControllers
  (:mod:`pyscheduler_sim.replicationcontrollers`), PriorityClasses
  (:mod:`pyscheduler_sim.priority`) and the storage kinds: PersistentVolumes,
  PersistentVolumeClaims, StorageClasses, CSINodes and CSIDrivers
  (:mod:`pyscheduler_sim.storage`), dispatched from here.

The admission plugins that read other objects (Priority, DefaultStorageClass, ...) are not
here: they need the store, and the registry runs them (:mod:`pyscheduler_sim.admission`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from pyscheduler.api.quantity import QuantityError, parse_quantity
from pyscheduler.api import validation as v
from pyscheduler_sim import daemonsets, priority, rbac, replicationcontrollers, storage
from pyscheduler_sim import validation as ov
from pyscheduler_sim.resources import ResourceType
from pyscheduler_sim.schema import validate_crd_schema
from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.validation import FieldError

__all__ = [
    "admit_custom",
    "default_pod_spec",
    "pod_qos_class",
    "prepare_for_create",
    "prepare_for_update",
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
    """Admission plugins that touch every new pod and need no other object: ServiceAccount,
    DefaultTolerationSeconds (Priority runs in the registry: it reads PriorityClasses)."""
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
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
    errs.extend(ov.validate_pod_spec(template.get("spec"), "spec.template.spec"))
    return errs


def _validate_workload_update(new: Obj, old: Obj) -> list[FieldError]:
    new_sel = (new.get("spec") or {}).get("selector")
    old_sel = (old.get("spec") or {}).get("selector")
    if new_sel != old_sel:
        return [FieldError("FieldValueInvalid", "spec.selector", new_sel, "field is immutable")]
    return []


# -- statefulsets -----------------------------------------------------------------------------

_RETENTION = ("Retain", "Delete")
_STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy",
                        "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds")


def _default_statefulset(obj: Obj) -> None:
    """``SetDefaults_StatefulSet`` (apps/v1), and the claim templates' ``volumeMode``."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            strategy.setdefault("rollingUpdate", {})
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            rolling.setdefault("partition", 0)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    if isinstance(retention, dict):
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
    for claim in spec.get("volumeClaimTemplates") or ():
        if isinstance(claim, dict) and isinstance(claim.get("spec"), dict):
            claim["spec"].setdefault("volumeMode", "Filesystem")
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.get("spec"))  # type: ignore[arg-type]


def _validate_claim_template(claim: object, path: str) -> list[FieldError]:
    """``ValidatePersistentVolumeClaimTemplate``: a name, and the claim spec rules."""
    if not isinstance(claim, dict):
        return [v.invalid(path, claim, "must be an object")]
    errs: list[FieldError] = []
    meta = claim.get("metadata") if isinstance(claim.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if not meta.get("name"):
        errs.append(v.required(path + ".metadata.name", "name or generateName is required"))
    else:
        errs.extend(v.validate_dns1123_subdomain(meta["name"], path + ".metadata.name"))
    errs.extend(storage.validate_claim_spec(claim.get("spec") or {}, path + ".spec"))
    return errs


def _validate_statefulset(obj: Obj) -> list[FieldError]:
    """``ValidateStatefulSetSpec``."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [v.required("spec")]
    selector = spec.get("selector")
    if isinstance(selector, dict) and not (selector.get("matchLabels")
                                           or selector.get("matchExpressions")):
        return [v.invalid("spec.selector", selector, "empty selector is invalid for statefulset")]
    errs = _validate_workload(obj)
    policy = spec.get("podManagementPolicy")
    if policy not in ("OrderedReady", "Parallel"):
        errs.append(v.invalid("spec.podManagementPolicy", policy,
                              "must be 'OrderedReady' or 'Parallel'"))
    strategy = spec.get("updateStrategy") if isinstance(spec.get("updateStrategy"), dict) else {}
    assert isinstance(strategy, dict)
    kind = strategy.get("type")
    if kind not in ("RollingUpdate", "OnDelete"):
        errs.append(v.invalid("spec.updateStrategy", strategy,
                              "must be 'RollingUpdate' or 'OnDelete'"))
    elif kind == "OnDelete" and strategy.get("rollingUpdate") is not None:
        errs.append(v.invalid("spec.updateStrategy.rollingUpdate", strategy["rollingUpdate"],
                              "only allowed for updateStrategy 'RollingUpdate'"))
    else:
        partition = (strategy.get("rollingUpdate") or {}).get("partition", 0)
        if not isinstance(partition, int) or partition < 0:
            errs.append(v.invalid("spec.updateStrategy.rollingUpdate.partition", partition,
                                  "must be greater than or equal to 0"))
    retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    for key in ("whenDeleted", "whenScaled"):
        value = retention.get(key) if isinstance(retention, dict) else None
        if value not in _RETENTION:
            errs.append(v.not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{key}",
                                        value, _RETENTION))
    service = spec.get("serviceName")
    if service:
        errs.extend(v.validate_dns1123_label(service, "spec.serviceName"))
    pod_spec = (spec.get("template") or {}).get("spec") \
        if isinstance(spec.get("template"), dict) else None
    errs.extend(ov.validate_long_running_template(pod_spec, "StatefulSet"))
    claims = spec.get("volumeClaimTemplates")
    for i, claim in enumerate(claims if isinstance(claims, list) else ()):
        errs.extend(_validate_claim_template(claim, f"spec.volumeClaimTemplates[{i}]"))
    return errs


def _validate_statefulset_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateStatefulSetUpdate``: only some of the spec may change."""
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    rest = {k: val for k, val in ns.items() if k not in _STATEFULSET_MUTABLE}
    old_rest = {k: val for k, val in os_.items() if k not in _STATEFULSET_MUTABLE}
    if rest != old_rest:
        return [v.forbidden("spec", "updates to statefulset spec for fields other than "
                                    "'replicas', 'ordinals', 'template', 'updateStrategy', "
                                    "'revisionHistoryLimit', "
                                    "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
                                    "are forbidden")]
    return []


# -- jobs -------------------------------------------------------------------------------------

JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_JOB_IMMUTABLE = ("selector", "template", "completionMode", "completions", "podFailurePolicy",
                  "backoffLimitPerIndex", "manualSelector")


def _manual_selector(spec: Obj) -> bool:
    return spec.get("manualSelector") is True


def _default_job(obj: Obj) -> None:
    """``SetDefaults_Job`` (batch/v1), then the generated selector of the Job strategy (kube
    generates it from the uid unless ``manualSelector`` is true)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy",
                    "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    default_pod_spec(template.get("spec"))  # type: ignore[arg-type]
    template_meta = template.setdefault("metadata", {})
    if not isinstance(template_meta, dict):
        return
    meta = obj.get("metadata") or {}
    # kube's defaulting makes the Job's labels the template's very map, so the labels the
    # strategy then adds to the template land on the Job too.
    shared = isinstance(template_meta.get("labels"), dict) and bool(template_meta["labels"]) \
        and not meta.get("labels")
    if shared:
        meta["labels"] = dict(template_meta["labels"])
    if _manual_selector(spec):
        return
    labels = template_meta.setdefault("labels", {})
    if not isinstance(labels, dict):
        return
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, str(meta.get("name") or ""))
    for key in CONTROLLER_UID_LABELS:
        labels.setdefault(key, str(meta.get("uid") or ""))
    if shared:
        meta["labels"] = dict(labels)
    selector = spec.get("selector")
    if selector is None:
        selector = spec["selector"] = {}
    if isinstance(selector, dict):
        match = selector.setdefault("matchLabels", {})
        if isinstance(match, dict):
            match.setdefault(CONTROLLER_UID_LABELS[1], str(meta.get("uid") or ""))


def _validate_job(obj: Obj) -> list[FieldError]:
    """``ValidateJob``: counts, the pod template and the (generated) selector."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [v.required("spec")]
    errs: list[FieldError] = []
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            errs.append(v.invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        errs.append(v.invalid("spec.activeDeadlineSeconds", deadline,
                              "must be greater than 0"))
    if spec.get("completionMode") not in ("NonIndexed", "Indexed"):
        errs.append(v.not_supported("spec.completionMode", spec.get("completionMode"),
                                    ("NonIndexed", "Indexed")))
    template = spec.get("template")
    if not isinstance(template, dict):
        return errs + [v.required("spec.template")]
    labels = (template.get("metadata") or {}).get("labels") or {}
    errs.extend(v.validate_labels(labels, "spec.template.metadata.labels"))
    pod_spec = template.get("spec")
    errs.extend(ov.validate_pod_spec(pod_spec, "spec.template.spec"))
    policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, dict) else None
    if policy == "Always":  # kube's validateJobSpec says it this way, not "Unsupported"
        errs.append(v.required("spec.template.spec.restartPolicy",
                               'valid values: "OnFailure", "Never"'))
    elif policy not in _JOB_RESTART_POLICIES:
        errs.append(v.not_supported("spec.template.spec.restartPolicy", policy,
                                    _JOB_RESTART_POLICIES))
    selector = spec.get("selector")
    if selector is None:
        return errs + [v.required("spec.selector")]
    try:
        matches = label_selector_from_dict(selector).matches(labels)
    except SelectorError as exc:
        return errs + [v.invalid("spec.selector", selector, str(exc))]
    if not matches:
        errs.append(v.invalid("spec.template.metadata.labels", labels,
                              "`selector` does not match template `labels`"))
    if not _manual_selector(spec):
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if selector != {"matchLabels": {CONTROLLER_UID_LABELS[1]: uid}}:
            errs.append(v.invalid("spec.selector", selector, "`selector` not auto-generated"))
    return errs


def _validate_job_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateJobSpecUpdate``: what the controller relies on cannot change."""
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    return [v.invalid(f"spec.{key}", ns.get(key), "field is immutable")
            for key in _JOB_IMMUTABLE if ns.get(key) != os_.get(key)]


# -- secrets and quotas -----------------------------------------------------------------------

_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_ERROR = ("a valid config key must consist of alphanumeric characters, '-', '_' or "
                     "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                     "validation is '[-._a-zA-Z0-9]+')")
_QUOTA_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort",
                 "PriorityClass", "VolumeAttributesClass", "CrossNamespacePodAffinity")


def _convert_secret(obj: Obj) -> None:
    """The v1 Secret conversion: ``stringData`` (write-only) is merged into ``data``, winning
    over a ``data`` key of the same name."""
    obj.setdefault("type", "Opaque")
    strings = obj.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in strings.items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()


def _validate_secret(obj: Obj) -> list[FieldError]:
    data = obj.get("data")
    if data is None:
        return []
    if not isinstance(data, dict):
        return [v.invalid("data", data, "must be an object")]
    errs: list[FieldError] = []
    for key, value in data.items():
        if not _CONFIG_KEY.fullmatch(key) or len(key) > 253:
            errs.append(v.invalid(f"data[{key}]", key, _CONFIG_KEY_ERROR))
        bad = base64_error_offset(str(value).encode())
        if bad is not None:  # kube cannot decode the bytes: 400, as its JSON decoder words it
            raise ov.UndecodableValue(f"illegal base64 data at input byte {bad}")
    return errs


_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def base64_error_offset(src: bytes) -> int | None:
    """Where Go's padded standard base64 decoder finds ``src`` corrupt (the offset its
    ``CorruptInputError`` carries), or None when it decodes. Newlines are skipped, as Go
    skips them."""
    si, n = 0, len(src)
    while True:
        j = 0
        while j < 4:
            if si == n:
                if j == 0:
                    return None
                return si - j  # a quantum cut short: padding was due
            c = src[si]
            si += 1
            if c in _BASE64:
                j += 1
                continue
            if c in b"\r\n":
                continue
            if c != ord("=") or j < 2:
                return si - 1
            if j == 2:  # "==" is due: the first is read
                while si < n and src[si] in b"\r\n":
                    si += 1
                if si == n:
                    return n
                if src[si] != ord("="):
                    return si - 1
                si += 1
            while si < n and src[si] in b"\r\n":
                si += 1
            return si if si < n else None  # anything after the padding is garbage


def _validate_resource_quota(obj: Obj) -> list[FieldError]:
    """``ValidateResourceQuotaSpec``: hard limits, scopes and the scope selector, with kube's
    paths (a selector's errors name ``matchExpressions`` without an index) and values (the
    internal types' JSON)."""
    spec = obj.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return [v.invalid("spec", spec, "must be an object")]
    errs = ov.validate_resource_list(spec.get("hard"), "spec.hard")
    hard = sorted(spec.get("hard") or {}) if isinstance(spec.get("hard"), dict) else []
    given = spec.get("scopes")
    scopes: list[Any] = given if isinstance(given, list) else []
    shown = v.Verbatim(v.go_json(scopes or None))
    for scope in scopes:
        if scope not in _QUOTA_SCOPES:
            errs.append(v.invalid("spec.scopes", shown, "unsupported scope"))
        errs.extend(v.invalid("spec.scopes", shown, "unsupported scope applied to resource")
                    for name in hard if not _scope_fits(scope, name))
    errs.extend(v.invalid("spec.scopes", shown, "conflicting scopes")
                for pair in _CONFLICTING_SCOPES if pair <= set(scopes))
    selector = spec.get("scopeSelector")
    if not isinstance(selector, dict):
        return errs
    expressions = selector.get("matchExpressions")
    expressions = [e for e in expressions if isinstance(e, dict)] \
        if isinstance(expressions, list) else []
    path = "spec.scopeSelector.matchExpressions"
    internal = v.Verbatim(v.go_json({"MatchExpressions": [
        {"ScopeName": e.get("scopeName", ""), "Operator": e.get("operator", ""),
         "Values": e.get("values")} for e in expressions] or None}))
    for expr in expressions:
        name, op, values = expr.get("scopeName"), expr.get("operator"), expr.get("values") or []
        if name not in _QUOTA_SCOPES:
            errs.append(v.invalid(path + ".scopeName", name, "unsupported scope"))
        errs.extend(v.invalid(path, internal, "unsupported scope applied to resource")
                    for resource in hard if not _scope_fits(name, resource))
        if name in _EXISTS_ONLY_SCOPES and op != "Exists":
            errs.append(v.invalid(path + ".operator", op, _EXISTS_ONLY_DETAIL))
        if op in ("In", "NotIn"):
            if not values:
                errs.append(v.required(path + ".values", "must be at least one value when "
                                       "`operator` is 'In' or 'NotIn' for scope selector"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(v.invalid(path + ".values", values, "must be no value when "
                                      "`operator` is 'Exist' or 'DoesNotExist' for scope "
                                      "selector"))
        else:
            errs.append(v.invalid(path + ".operator", op, "not a valid selector operator"))
    named = {e.get("scopeName") for e in expressions}
    errs.extend(v.invalid(path, v.Verbatim(v.go_json(scopes or None)), "conflicting scopes")
                for pair in _CONFLICTING_SCOPES if pair <= named)
    return errs


_CONFLICTING_SCOPES = (frozenset({"BestEffort", "NotBestEffort"}),
                       frozenset({"Terminating", "NotTerminating"}))
_EXISTS_ONLY_SCOPES = frozenset({"BestEffort", "NotBestEffort", "Terminating", "NotTerminating",
                                 "CrossNamespacePodAffinity"})
_EXISTS_ONLY_DETAIL = ("must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
                       "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                       "ResourceQuotaScopeNotBestEffort or "
                       "ResourceQuotaScopeCrossNamespacePodAffinity")
_POD_QUOTA = frozenset({"pods", "cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu",
                        "requests.memory"})
_STANDARD_QUOTA = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
    "persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers"})


def _scope_fits(scope: Any, resource: str) -> bool:
    """``IsResourceQuotaScopeValidForResource``, for the standard quota resources it checks."""
    if resource not in _STANDARD_QUOTA and not resource.startswith(("hugepages-",
                                                                    "requests.hugepages-")):
        return True
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass",
                 "CrossNamespacePodAffinity"):
        return resource in _POD_QUOTA
    if scope == "BestEffort":
        return resource == "pods"
    if scope == "VolumeAttributesClass":
        return resource in ("persistentvolumeclaims", "requests.storage")
    return True


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

_STORAGE_KINDS = frozenset((("", "PersistentVolume"), ("", "PersistentVolumeClaim"),
                            (storage.GROUP, "StorageClass"), (storage.GROUP, "CSIDriver"),
                            (storage.GROUP, "CSINode")))


def _default(rt: ResourceType, obj: Obj) -> None:
    """Defaulting that applies to every write (kube defaults each object it decodes)."""
    key = (rt.group, rt.kind)
    if key == ("", "Secret"):
        _convert_secret(obj)
    elif key in _STORAGE_KINDS:
        storage.default(rt.kind, obj)
    elif key == (priority.GROUP, "PriorityClass"):
        priority.default_class(obj)
    elif key in (("apps", "DaemonSet"), ("", "ReplicationController")):
        if rt.kind == "DaemonSet":
            daemonsets.default_daemonset(obj)
        else:
            replicationcontrollers.default_replication_controller(obj)
        template = (obj.get("spec") or {}).get("template")
        if isinstance(template, dict):
            default_pod_spec(template.get("spec"))  # type: ignore[arg-type]
    elif key == ("apps", "StatefulSet"):
        _default_statefulset(obj)
    elif key == ("batch", "Job"):
        _default_job(obj)
    elif key in ((rbac.GROUP, "RoleBinding"), (rbac.GROUP, "ClusterRoleBinding")):
        rbac.default_binding(obj)


def prepare_for_create(rt: ResourceType, obj: Obj, now: str) -> None:
    """Defaulting, admission and status reset for a new object (its uid is already set)."""
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
    if (rt.group, kind) in _STORAGE_KINDS:
        storage.prepare_for_create(kind, obj, now)
        return
    _default(rt, obj)
    if (rt.group, kind) == (priority.GROUP, "PriorityClass"):
        priority.prepare_class_for_create(obj)
        return
    if rt.group == "apps" and kind == "DaemonSet":
        daemonsets.prepare_for_create(obj)
        return
    if rt.group == "" and kind == "ReplicationController":
        replicationcontrollers.prepare_for_create(obj)
        return
    if rt.group == "apps" and kind == "StatefulSet":
        # replicas and availableReplicas are the status fields without omitempty.
        obj["status"] = {"replicas": 0, "availableReplicas": 0}
        return
    if rt.group == "batch" and kind == "Job":
        obj["status"] = {}
        return
    if rt.has_status:
        # Types with a status subresource ignore status on create (kube resets it).
        if rt.group != "" or kind == "ResourceQuota":
            obj.pop("status", None)


def prepare_for_update(rt: ResourceType, obj: Obj, old: Obj, now: str) -> None:
    """Defaulting for a replacement object (``old`` is what is stored)."""
    if (rt.group, rt.kind) in _STORAGE_KINDS:
        storage.prepare_for_update(rt.kind, obj, old, now)
        return
    _default(rt, obj)
    if (rt.group, rt.kind) == ("apps", "DaemonSet"):
        daemonsets.prepare_for_update(obj, old)


def _micro_times(obj: Obj, *paths: tuple[str, ...]) -> list[FieldError]:
    """A ``metav1.MicroTime`` kube cannot decode is a 400 (raised), not a field error."""
    ov.check_micro_times(obj, *paths)
    return []


_CREATE_VALIDATORS: dict[tuple[str, str], Callable[[Obj], list[FieldError]]] = {
    ("", "Pod"): ov.validate_pod,
    ("", "Node"): ov.validate_node,
    ("", "Namespace"): ov.validate_namespace,
    ("apps", "Deployment"): _validate_workload,
    ("apps", "ReplicaSet"): _validate_workload,
    ("apps", "StatefulSet"): _validate_statefulset,
    ("apps", "DaemonSet"): daemonsets.validate_daemonset,
    ("", "ReplicationController"): replicationcontrollers.validate_replication_controller,
    ("batch", "Job"): _validate_job,
    ("", "Secret"): _validate_secret,
    ("", "Event"): lambda obj: _micro_times(obj, ("eventTime",), ("series", "lastObservedTime")),
    ("coordination.k8s.io", "Lease"): lambda obj: _micro_times(
        obj, ("spec", "acquireTime"), ("spec", "renewTime")),
    ("", "ResourceQuota"): _validate_resource_quota,
    (rbac.GROUP, "Role"): lambda obj: rbac.validate_role(obj, namespaced=True),
    (rbac.GROUP, "ClusterRole"): lambda obj: rbac.validate_role(obj, namespaced=False),
    (rbac.GROUP, "RoleBinding"): lambda obj: rbac.validate_binding(obj, namespaced=True),
    (rbac.GROUP, "ClusterRoleBinding"): lambda obj: rbac.validate_binding(obj, namespaced=False),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _validate_crd,
    (priority.GROUP, "PriorityClass"): priority.validate_class,
    ("", "PersistentVolume"): storage.validate_volume,
    ("", "PersistentVolumeClaim"): storage.validate_claim,
    (storage.GROUP, "StorageClass"): storage.validate_storage_class,
    (storage.GROUP, "CSINode"): storage.validate_csinode,
    (storage.GROUP, "CSIDriver"): storage.validate_csidriver,
}

_UPDATE_VALIDATORS: dict[tuple[str, str], Callable[[Obj, Obj], list[FieldError]]] = {
    ("", "Pod"): _validate_pod_update,
    ("apps", "Deployment"): _validate_workload_update,
    ("apps", "ReplicaSet"): _validate_workload_update,
    ("apps", "StatefulSet"): lambda new, old: (_validate_workload_update(new, old)
                                               or _validate_statefulset_update(new, old)),
    ("apps", "DaemonSet"): _validate_workload_update,
    ("batch", "Job"): _validate_job_update,
    (priority.GROUP, "PriorityClass"): priority.validate_class_update,
    ("", "PersistentVolume"): storage.validate_volume_update,
    ("", "PersistentVolumeClaim"): storage.validate_claim_update,
    (storage.GROUP, "StorageClass"): storage.validate_storage_class_update,
    (storage.GROUP, "CSINode"): storage.validate_csinode_update,
    (storage.GROUP, "CSIDriver"): storage.validate_csidriver_update,
    (rbac.GROUP, "RoleBinding"): rbac.validate_binding_update,
    (rbac.GROUP, "ClusterRoleBinding"): rbac.validate_binding_update,
}


def admit_custom(rt: ResourceType, obj: Obj) -> list[str]:
    """Defaulting and pruning of a custom object by its CRD schema; returns pruned paths."""
    if rt.schema is None or rt.schema.accepts_everything:
        return []
    rt.schema.default(obj)
    return rt.schema.prune(obj)


def validate_create(rt: ResourceType, obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """The errors of a new ``obj`` (or of an update of ``old``: its transition rules run)."""
    errs: list[FieldError] = []
    if rt.group == rbac.GROUP:
        errs = ov.validate_generic(obj, rt.namespaced, name_validator=rbac.validate_name)
    elif (rt.group, rt.kind) not in (("", "Pod"), ("", "Node"), ("", "Namespace")):
        errs = ov.validate_generic(obj, rt.namespaced)
    extra = _CREATE_VALIDATORS.get((rt.group, rt.kind))
    if extra is not None:
        errs.extend(extra(obj))
    if rt.custom and rt.schema is not None:
        errs.extend(rt.schema.validate(obj, old))
    return errs


def validate_update(rt: ResourceType, new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_create(rt, new, old)
    if errs:
        return errs
    update = _UPDATE_VALIDATORS.get((rt.group, rt.kind))
    if update is not None:
        return update(new, old)
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
