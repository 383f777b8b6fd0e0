"""The resource types the embedded API server serves, and their discovery documents.

A :class:`ResourceType` is the server's whole knowledge of a resource: where it lives in the URL
space, whether it is namespaced, its kind and verbs, and which subresources exist. Built-in types
are listed in :data:`BUILTIN`; custom resources are added and removed at run time when
CustomResourceDefinitions are created and deleted (:func:`from_crd`).

Discovery documents (legacy ``APIResourceList``/``APIGroupList`` and the aggregated
``apidiscovery.k8s.io/v2`` form that kubectl asks for first) are rendered from the same data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from pyscheduler_sim.schema import CompiledSchema, compile_schema

__all__ = [
    "BUILTIN",
    "ResourceType",
    "aggregated_discovery",
    "api_group_list",
    "api_resource_list",
    "from_crd",
    "openapi_v3_group_version",
    "openapi_v3_root",
]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # subresource name -> (kind of its body, verbs)
    subresources: dict[str, tuple[str, str, str, tuple[str, ...]]] = field(default_factory=dict)
    # Resources whose spec changes bump metadata.generation (all but a few built-ins).
    has_spec: bool = True
    # For custom resources: the CRD version's additionalPrinterColumns.
    printer_columns: tuple[dict[str, Any], ...] = ()
    custom: bool = False
    # For custom resources: the version's compiled openAPIV3Schema (defaulting, pruning,
    # validation), or None to accept anything.
    schema: CompiledSchema | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _sub(group: str, version: str, kind: str, *verbs: str) -> tuple[str, str, str, tuple[str, ...]]:
    return (group, version, kind, verbs)


def _status(group: str, version: str, kind: str) -> tuple[str, str, str, tuple[str, ...]]:
    return _sub(group, version, kind, "get", "patch", "update")


def _scale() -> tuple[str, str, str, tuple[str, ...]]:
    return _sub("autoscaling", "v1", "Scale", "get", "patch", "update")


BUILTIN: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",),
                 verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
                 subresources={"status": _status("", "v1", "Namespace")}, has_spec=False),
    ResourceType("", "v1", "nodes", "Node", False, "node", ("no",),
                 subresources={"status": _status("", "v1", "Node")}, has_spec=False),
    ResourceType("", "v1", "pods", "Pod", True, "pod", ("po",), ("all",),
                 subresources={
                     "status": _status("", "v1", "Pod"),
                     "binding": _sub("", "v1", "Binding", "create"),
                     "eviction": _sub("policy", "v1", "Eviction", "create"),
                 }, has_spec=False),
    ResourceType("", "v1", "bindings", "Binding", True, "binding", verbs=("create",)),
    ResourceType("", "v1", "events", "Event", True, "event", ("ev",), has_spec=False),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",), has_spec=False),
    ResourceType("", "v1", "secrets", "Secret", True, "secret", has_spec=False),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",),
                 has_spec=False),
    ResourceType("", "v1", "services", "Service", True, "service", ("svc",), ("all",),
                 subresources={"status": _status("", "v1", "Service")}, has_spec=False),
    ResourceType("", "v1", "endpoints", "Endpoints", True, "endpoints", ("ep",), has_spec=False),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, "resourcequota", ("quota",),
                 subresources={"status": _status("", "v1", "ResourceQuota")}, has_spec=False),
    ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True,
                 "replicationcontroller", ("rc",), ("all",),
                 subresources={"status": _status("", "v1", "ReplicationController"),
                               "scale": _scale()}),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, "persistentvolume",
                 ("pv",), subresources={"status": _status("", "v1", "PersistentVolume")},
                 has_spec=False),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True,
                 "persistentvolumeclaim", ("pvc",),
                 subresources={"status": _status("", "v1", "PersistentVolumeClaim")},
                 has_spec=False),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, "event", ("ev",), has_spec=False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease", has_spec=False),
    ResourceType("apps", "v1", "deployments", "Deployment", True, "deployment", ("deploy",),
                 ("all",), subresources={"status": _status("apps", "v1", "Deployment"),
                                         "scale": _scale()}),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, "replicaset", ("rs",), ("all",),
                 subresources={"status": _status("apps", "v1", "ReplicaSet"), "scale": _scale()}),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, "statefulset", ("sts",),
                 ("all",), subresources={"status": _status("apps", "v1", "StatefulSet"),
                                         "scale": _scale()}),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, "daemonset", ("ds",), ("all",),
                 subresources={"status": _status("apps", "v1", "DaemonSet")}),
    ResourceType("batch", "v1", "jobs", "Job", True, "job", (), ("all",),
                 subresources={"status": _status("batch", "v1", "Job")}),
    # RBAC objects are stored and validated; nothing is authorized by them (see the README).
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False,
                 "clusterrole", has_spec=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                 False, "clusterrolebinding", has_spec=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, "role",
                 has_spec=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True,
                 "rolebinding", has_spec=False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
                 "poddisruptionbudget", ("pdb",),
                 subresources={"status": _status("policy", "v1", "PodDisruptionBudget")}),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False,
                 "priorityclass", ("pc",), has_spec=False),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, "storageclass",
                 ("sc",), has_spec=False),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False, "csinode",
                 has_spec=False),
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False, "csidriver",
                 has_spec=False),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                 "CustomResourceDefinition", False, "customresourcedefinition", ("crd", "crds"),
                 ("api-extensions",),
                 subresources={"status": _status("apiextensions.k8s.io", "v1",
                                                 "CustomResourceDefinition")}),
)


def from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The served versions of a CustomResourceDefinition, as resource types."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    namespaced = spec.get("scope") == "Namespaced"
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources: dict[str, tuple[str, str, str, tuple[str, ...]]] = {}
        declared = version.get("subresources") or {}
        if "status" in declared:
            subresources["status"] = _status(group, version["name"], names.get("kind", ""))
        if "scale" in declared:
            subresources["scale"] = _scale()
        out.append(ResourceType(
            group=group,
            version=version["name"],
            plural=names.get("plural", ""),
            kind=names.get("kind", ""),
            namespaced=namespaced,
            singular=names.get("singular") or names.get("kind", "").lower(),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=subresources,
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            custom=True,
            schema=compile_schema((version.get("schema") or {}).get("openAPIV3Schema")),
        ))
    return out


def _api_resource(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub, (group, version, kind, verbs) in rt.subresources.items():
        entry: dict[str, Any] = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": kind,
            "verbs": list(verbs),
        }
        if group != rt.group or version != rt.version:
            entry["group"] = group
            entry["version"] = version
        out.append(entry)
    return out


def api_resource_list(group_version: str, types: list[ResourceType]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [r for rt in types for r in _api_resource(rt)],
    }


def api_group_list(groups: dict[str, list[str]]) -> dict[str, Any]:
    """``groups`` maps a group name to its versions, preferred first."""
    items = []
    for name, versions in groups.items():
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        items.append({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": items}


def aggregated_discovery(groups: dict[str, dict[str, list[ResourceType]]]) -> dict[str, Any]:
    """An ``apidiscovery.k8s.io/v2`` APIGroupDiscoveryList for the given groups.

    ``groups`` maps group name -> version -> resource types; the core group is ``""``.
    """
    items = []
    for name, versions in groups.items():
        version_items = []
        for version, types in versions.items():
            resources = []
            for rt in types:
                res: dict[str, Any] = {
                    "resource": rt.plural,
                    "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
                    "scope": "Namespaced" if rt.namespaced else "Cluster",
                    "singularResource": rt.singular,
                    "verbs": list(rt.verbs),
                }
                if rt.short_names:
                    res["shortNames"] = list(rt.short_names)
                if rt.categories:
                    res["categories"] = list(rt.categories)
                if rt.subresources:
                    res["subresources"] = [
                        {"subresource": sub,
                         "responseKind": {"group": g, "version": v, "kind": k},
                         "verbs": list(verbs)}
                        for sub, (g, v, k, verbs) in rt.subresources.items()
                    ]
                resources.append(res)
            version_items.append({"version": version, "resources": resources,
                                  "freshness": "Current"})
        items.append({"metadata": {"name": name, "creationTimestamp": None},
                      "versions": version_items})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root(groups: dict[str, dict[str, list[ResourceType]]]) -> dict[str, Any]:
    """The ``/openapi/v3`` discovery document: one entry per group-version."""
    paths = {}
    for group, versions in groups.items():
        for version, types in versions.items():
            gv = _gv_path(group, version)
            digest = hashlib.sha256(",".join(sorted(
                f"{t.plural}:{t.kind}" for t in types)).encode()).hexdigest()[:16].upper()
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}


def openapi_v3_group_version(group: str, version: str,
                             types: list[ResourceType]) -> dict[str, Any]:
    """A minimal OpenAPI v3 document for one group-version.

    It carries what clients read from it: each object path with its PATCH operation, tagged
    with ``x-kubernetes-group-version-kind`` and the ``fieldValidation`` query parameter (kubectl
    checks for it before it relies on server-side field validation). Object schemas are not
    published.
    """
    paths: dict[str, Any] = {}
    for rt in types:
        if rt.plural == "bindings":
            continue
        base = "/" + _gv_path(group, version)
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        params = [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for name in ("dryRun", "fieldManager", "fieldValidation", "force")]
        op = {"operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch",
              "x-kubernetes-group-version-kind": gvk, "parameters": params,
              "responses": {"200": {"description": "OK"}}}
        paths[f"{base}{scope}/{rt.plural}/{{name}}"] = {"patch": op}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths, "components": {"schemas": {}}}
