"""``rbac.authorization.k8s.io/v1`` objects as kube-apiserver stores them: defaults and validation.

The embedded cluster authorizes nothing (one token can do everything), but it stores Roles,
ClusterRoles and their bindings so that manifests written for a real cluster apply unchanged and
read back as kube would return them. The rules reproduced are those of
``pkg/apis/rbac/validation`` and ``pkg/apis/rbac/v1/defaults.go``:

* names are path segments (``system:kube-scheduler`` is a valid name; ``.``, ``..``, ``/`` and
  ``%`` are not), not DNS subdomains;
* a policy rule needs verbs, and either resources with API groups or non-resource URLs (never
  both; never non-resource URLs in a namespaced Role);
* a binding's ``roleRef`` names a Role or ClusterRole of this API group (a ClusterRoleBinding only
  a ClusterRole) and cannot change afterwards; subjects are ServiceAccounts, Users or Groups, and
  a ServiceAccount bound cluster-wide needs its namespace;
* ``roleRef.apiGroup`` and the API group of User and Group subjects default to this group.
"""

from __future__ import annotations

from typing import Any

from pyscheduler.api import validation as v
from pyscheduler.api.labels import SelectorError, label_selector_from_dict
from pyscheduler.api.validation import FieldError

__all__ = [
    "GROUP",
    "default_binding",
    "validate_binding",
    "validate_binding_update",
    "validate_name",
    "validate_role",
]

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")

Obj = dict[str, Any]


def validate_name(value: object, path: str) -> list[FieldError]:
    """``ValidateRBACName`` (``path.IsValidPathSegmentName``)."""
    if not isinstance(value, str):
        return [v.invalid(path, value, "must be a string")]
    if value in (".", ".."):
        return [v.invalid(path, value, f"may not be '{value}'")]
    return [v.invalid(path, value, f"may not contain '{c}'") for c in ("/", "%") if c in value]


def default_binding(obj: Obj) -> None:
    """``SetDefaults_RoleBinding``/``ClusterRoleBinding`` and ``SetDefaults_Subject``."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = GROUP
    for subject in obj.get("subjects") or ():
        if isinstance(subject, dict) and not subject.get("apiGroup") \
                and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = GROUP


def _strings(value: object, path: str, errs: list[FieldError]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        errs.append(v.invalid(path, value, "must be a list of strings"))
        return []
    return value


def _validate_rule(rule: object, path: str, namespaced: bool) -> list[FieldError]:
    """``ValidatePolicyRule``."""
    if not isinstance(rule, dict):
        return [v.invalid(path, rule, "must be an object")]
    errs: list[FieldError] = []
    verbs = _strings(rule.get("verbs"), path + ".verbs", errs)
    groups = _strings(rule.get("apiGroups"), path + ".apiGroups", errs)
    resources = _strings(rule.get("resources"), path + ".resources", errs)
    names = _strings(rule.get("resourceNames"), path + ".resourceNames", errs)
    urls = _strings(rule.get("nonResourceURLs"), path + ".nonResourceURLs", errs)
    if not verbs:
        errs.append(v.required(path + ".verbs", "verbs must contain at least one value"))
    if urls:
        if namespaced:
            errs.append(v.invalid(path + ".nonResourceURLs", urls,
                                  "namespaced rules cannot apply to non-resource URLs"))
        if groups or resources or names:
            errs.append(v.invalid(path + ".nonResourceURLs", urls,
                                  "rules cannot apply to both regular resources and non-resource "
                                  "URLs"))
        return errs
    if not groups:
        errs.append(v.required(path + ".apiGroups",
                               "resource rules must supply at least one api group"))
    if not resources:
        errs.append(v.required(path + ".resources",
                               "resource rules must supply at least one resource"))
    return errs


def validate_role(obj: Obj, namespaced: bool) -> list[FieldError]:
    """``ValidateRole`` / ``ValidateClusterRole`` (metadata is checked by the caller)."""
    errs: list[FieldError] = []
    rules = obj.get("rules")
    if rules is not None and not isinstance(rules, list):
        return [v.invalid("rules", rules, "must be a list")]
    for i, rule in enumerate(rules or ()):
        errs.extend(_validate_rule(rule, f"rules[{i}]", namespaced))
    aggregation = obj.get("aggregationRule")
    if not namespaced and aggregation is not None:
        selectors = aggregation.get("clusterRoleSelectors") if isinstance(aggregation, dict) \
            else None
        if not selectors:
            errs.append(v.required("aggregationRule.clusterRoleSelectors",
                                   "at least one clusterRoleSelector required if aggregationRule "
                                   "is non-nil"))
        for i, selector in enumerate(selectors if isinstance(selectors, list) else ()):
            try:
                label_selector_from_dict(selector)
            except (SelectorError, ValueError, TypeError) as exc:
                errs.append(v.invalid(f"aggregationRule.clusterRoleSelectors[{i}]", selector,
                                      str(exc)))
    return errs


def _validate_subject(subject: object, path: str, namespaced: bool) -> list[FieldError]:
    """``ValidateRoleBindingSubject``."""
    if not isinstance(subject, dict):
        return [v.invalid(path, subject, "must be an object")]
    errs: list[FieldError] = []
    name = subject.get("name") or ""
    kind = subject.get("kind")
    group = subject.get("apiGroup") or ""
    if not name:
        errs.append(v.required(path + ".name"))
    if kind == "ServiceAccount":
        if name:
            errs.extend(v.validate_dns1123_subdomain(name, path + ".name"))
        if group:
            errs.append(v.not_supported(path + ".apiGroup", group, ("",)))
        if not namespaced and not subject.get("namespace"):
            errs.append(v.required(path + ".namespace"))
    elif kind in ("User", "Group"):
        if group != GROUP:
            errs.append(v.not_supported(path + ".apiGroup", group, (GROUP,)))
    else:
        errs.append(v.not_supported(path + ".kind", kind, SUBJECT_KINDS))
    return errs


def validate_binding(obj: Obj, namespaced: bool) -> list[FieldError]:
    """``ValidateRoleBinding`` / ``ValidateClusterRoleBinding`` (metadata by the caller)."""
    errs: list[FieldError] = []
    ref = obj.get("roleRef")
    if not isinstance(ref, dict):
        errs.append(v.required("roleRef"))
        ref = {}
    if ref.get("apiGroup") != GROUP:
        errs.append(v.not_supported("roleRef.apiGroup", ref.get("apiGroup") or "", (GROUP,)))
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if ref.get("kind") not in kinds:
        errs.append(v.not_supported("roleRef.kind", ref.get("kind") or "", kinds))
    name = ref.get("name") or ""
    if not name:
        errs.append(v.required("roleRef.name"))
    else:
        errs.extend(validate_name(name, "roleRef.name"))
    subjects = obj.get("subjects")
    if subjects is not None and not isinstance(subjects, list):
        return errs + [v.invalid("subjects", subjects, "must be a list")]
    for i, subject in enumerate(subjects or ()):
        errs.extend(_validate_subject(subject, f"subjects[{i}]", namespaced))
    return errs


def validate_binding_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidateRoleBindingUpdate``: the role a binding grants never changes."""
    if new.get("roleRef") != old.get("roleRef"):
        # kube validates its internal type, whose JSON has the Go field names.
        given = new.get("roleRef")
        ref: Obj = given if isinstance(given, dict) else {}
        internal = {"APIGroup": ref.get("apiGroup", ""), "Kind": ref.get("kind", ""),
                    "Name": ref.get("name", "")}
        return [v.invalid("roleRef", v.Verbatim(v.go_json(internal)),
                          "cannot change roleRef")]
    return []
