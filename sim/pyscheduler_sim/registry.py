"""REST semantics of the embedded API server, independent of HTTP.

:class:`Registry` is what kube-apiserver's generic registry plus its resource-specific REST
handlers are: create, get, list, update, patch, delete and watch for every served type, and the
``binding``, ``eviction``, ``status`` and ``scale`` subresources. The HTTP layer
(:mod:`pyscheduler_sim.server`) only decodes requests and encodes answers; the simulated kubelets
and controllers call the registry directly, so they obey exactly the rules clients do.

Behaviour reproduced from kube-apiserver (and where):

* metadata: uid, creationTimestamp, generateName (5 random characters from kube's alphabet),
  generation bumped on spec changes; an update that changes nothing writes nothing.
* optimistic concurrency: a PUT or PATCH carrying a stale ``resourceVersion`` gets 409 Conflict.
* deletion: preconditions (uid, resourceVersion); finalizers keep an object with a
  deletionTimestamp until the last one is removed; ``Orphan`` and ``Foreground`` propagation add
  the ``orphan`` / ``foregroundDeletion`` finalizers that the garbage collector honours; bound
  pods are deleted gracefully (the kubelet finishes the deletion), unbound ones at once.
* binding: 409 when the pod is already assigned or being deleted.
* eviction: PodDisruptionBudgets are honoured, 429 when no disruption is allowed.
* admission, in kube-apiserver's order: a namespaced object's namespace must exist and not be
  terminating (NamespaceLifecycle), then the mutating plugins that read other objects run
  (:mod:`pyscheduler_sim.admission`: Priority, DefaultStorageClass,
  StorageObjectInUseProtection), then defaulting and validation, then the validating plugins.
* a new cluster has the system PriorityClasses, which cannot be deleted one by one.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

import orjson

from pyscheduler_sim import errors, events, priority, storage, strategies
from pyscheduler_sim.admission import AdmissionPlugin, Operation, PodTopologyLabels
from pyscheduler_sim.patch import PatchError, apply_patch
from pyscheduler_sim.resources import BUILTIN, ResourceType, from_crd
from pyscheduler.api.labels import LabelSelector, label_selector_from_dict
from pyscheduler_sim.selectors import FieldSelector
from pyscheduler_sim.store import Store, Stored, Watcher
from pyscheduler_sim.validation import UndecodableValue
from pyscheduler.api.validation import FieldError

__all__ = ["Registry", "now_rfc3339"]

Obj = dict[str, Any]

# kube's utilrand alphabet: no vowels (no words) and no confusable characters.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_NAME_TRIES = 8
_MAX_GENERATED_PREFIX = 63 - 5

CORE_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


_last_second: list[Any] = [-1, ""]


def _format_second(second: int) -> str:
    """RFC 3339 at whole seconds (kube's metav1.Time precision), the last answer remembered."""
    if _last_second[0] != second:
        _last_second[1] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        _last_second[0] = second
    return str(_last_second[1])


def now_rfc3339(clock: Callable[[], float] | None = None) -> str:
    return _format_second(int(time.time() if clock is None else clock()))


def _uuid4() -> str:
    """A random (version 4) UUID string, as ``str(uuid.uuid4())`` but without its object."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    x = b.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _rfc3339_after(seconds: float) -> str:
    return _format_second(int(time.time() + seconds))


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


class _Converter:
    """A resource served from another resource's storage, converted in and out."""

    __slots__ = ("storage", "to_storage", "from_storage", "validate_update")

    def __init__(self, storage: ResourceType, to_storage: Callable[[Obj], Obj],
                 from_storage: Callable[[Obj], Obj],
                 validate_update: Callable[[Obj, Obj], list[FieldError]] | None = None) -> None:
        self.storage = storage
        self.to_storage = to_storage
        self.from_storage = from_storage
        #: The rules of an update through this resource, over the stored forms (new, old).
        self.validate_update = validate_update


class Registry:
    """Every served resource type and the operations on them."""

    def __init__(self, store: Store | None = None, *, rng: random.Random | None = None) -> None:
        self.store = store or Store()
        self.rng = rng or random.Random()
        # (group, version, plural) -> type; several versions may share one table.
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.listeners: list[Callable[[str, ResourceType, Obj], None]] = []
        for rt in BUILTIN:
            self.add_type(rt)
        self.pods = self.type("", "v1", "pods")
        self.namespaces = self.type("", "v1", "namespaces")
        self.nodes = self.type("", "v1", "nodes")
        self.crds = self.type("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        self.pdbs = self.type("policy", "v1", "poddisruptionbudgets")
        # events.k8s.io/v1 Events live in the core/v1 Event table, converted on the way.
        self.events = self.type("", "v1", "events")
        new_events = self.type("events.k8s.io", "v1", "events")
        self.store.tables.pop(new_events.key)
        self.converters: dict[tuple[str, str], _Converter] = {
            new_events.key: _Converter(self.events, events.to_core, events.from_core,
                                       events.validate_new_api_update)}
        self.priority_classes = self.type(priority.GROUP, "v1", "priorityclasses")
        self.storage_classes = self.type(storage.GROUP, "v1", "storageclasses")
        self.topology_labels = PodTopologyLabels(self._node_labels)
        self.admission: list[AdmissionPlugin] = [
            priority.PriorityAdmission(self.store, self.priority_classes),
            storage.StorageAdmission(self.store, self.storage_classes),
            self.topology_labels,
        ]
        for ns in CORE_NAMESPACES:
            self.create(self.namespaces, "", {"metadata": {"name": ns}})
        for pc in priority.system_classes():
            self.create(self.priority_classes, "", pc)

    # -- types ---------------------------------------------------------------------------------

    def add_type(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt
        self.store.add_type(rt)

    def type(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.types.get((group, version, plural))
        if rt is None:
            raise errors.not_found_resource()
        return rt

    def served_groups(self) -> dict[str, dict[str, list[ResourceType]]]:
        groups: dict[str, dict[str, list[ResourceType]]] = {}
        for rt in self.types.values():
            if rt.plural == "bindings" and rt.group == "":
                groups.setdefault("", {}).setdefault("v1", []).append(rt)
                continue
            groups.setdefault(rt.group, {}).setdefault(rt.version, []).append(rt)
        return groups

    # -- reads ---------------------------------------------------------------------------------

    def _storage(self, rt: ResourceType) -> tuple[ResourceType, _Converter | None]:
        conv = self.converters.get(rt.key)
        return (conv.storage, conv) if conv is not None else (rt, None)

    def output(self, rt: ResourceType, obj: Obj) -> Obj:
        """An object as ``rt``'s API shows it (converted when ``rt`` has foreign storage)."""
        conv = self.converters.get(rt.key)
        return conv.from_storage(obj) if conv is not None else obj

    def raw(self, rt: ResourceType, s: Stored) -> bytes:
        """A stored object's JSON as ``rt``'s API shows it."""
        conv = self.converters.get(rt.key)
        return s.raw if conv is None else orjson.dumps(conv.from_storage(s.obj))

    def get_stored(self, rt: ResourceType, namespace: str, name: str) -> Stored:
        rt, _ = self._storage(rt)
        s = self.store.get(rt, namespace if rt.namespaced else "", name)
        if s is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return s

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        return self.output(rt, self.get_stored(rt, namespace, name).obj)

    def list(self, rt: ResourceType, namespace: str = "", labels: LabelSelector | None = None,
             fields: FieldSelector | None = None, limit: int = 0, continue_token: str = "",
             resource_version: str = "") -> tuple[list[Stored], Obj]:
        if resource_version not in ("", "0"):
            try:
                wanted = int(resource_version)
            except ValueError:
                raise errors.bad_request(
                    f'invalid resource version "{resource_version}"') from None
            if wanted > self.store.rv:
                raise errors.too_large_resource_version(wanted, self.store.rv)
        rt, conv = self._storage(rt)
        if conv is not None and fields is not None:
            fields = events.field_selector_to_core(fields)
        items, rv, token, remaining = self.store.list(
            rt, namespace if rt.namespaced else "", labels, fields, limit, continue_token)
        meta: Obj = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        return items, meta

    def watch(self, rt: ResourceType, namespace: str, labels: LabelSelector | None,
              fields: FieldSelector | None, resource_version: str) -> Watcher:
        since: int | None = None
        if resource_version not in ("", "0"):
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(
                    f'invalid resource version "{resource_version}"') from None
        rt, conv = self._storage(rt)
        if conv is not None and fields is not None:
            fields = events.field_selector_to_core(fields)
        return self.store.watch(rt, namespace if rt.namespaced else "", labels, fields, since)

    # -- create --------------------------------------------------------------------------------

    def _check_kind(self, rt: ResourceType, obj: Any, kind: str | None = None,
                    api_version: str | None = None) -> Obj:
        if not isinstance(obj, dict):
            raise errors.bad_request("the object provided is unrecognized (must be of type "
                                     f"{kind or rt.kind})")
        want_kind = kind or rt.kind
        want_av = api_version or rt.api_version
        got_kind = obj.get("kind")
        got_av = obj.get("apiVersion")
        if got_kind not in (None, "") and got_kind != want_kind:
            raise errors.bad_request(
                f"the API version in the data ({got_av}) does not match the expected API version "
                f"({want_av})" if got_av not in (None, "", want_av) else
                f"{got_kind} in version \"{rt.version}\" cannot be handled as a {want_kind}: "
                f"no kind \"{got_kind}\" is registered for version \"{want_av}\"")
        if got_av not in (None, "") and got_av != want_av:
            raise errors.bad_request(
                f"the API version in the data ({got_av}) does not match the expected API version "
                f"({want_av})")
        obj["kind"] = want_kind
        obj["apiVersion"] = want_av
        return obj

    def _namespace_ok(self, rt: ResourceType, namespace: str, meta: Obj) -> str:
        if not rt.namespaced:
            if meta.get("namespace"):
                # kube silently clears a namespace on cluster-scoped objects in a request body.
                meta.pop("namespace")
            return ""
        body_ns = meta.get("namespace")
        if body_ns and namespace and body_ns != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        namespace = namespace or body_ns or "default"
        meta["namespace"] = namespace
        return namespace

    def _require_namespace(self, namespace: str) -> None:
        ns = self.store.get(self.namespaces, "", namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        # A quick look at the bytes first: decoding the namespace on every create is costly.
        if b'"deletionTimestamp"' in ns.raw and (ns.obj.get("metadata") or {}).get(
                "deletionTimestamp"):
            raise errors.ApiError(
                403, "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
                {"name": namespace, "kind": "namespaces",
                 "causes": [{"reason": "NamespaceTerminating",
                             "message": f"namespace {namespace} is being terminated",
                             "field": "metadata.namespace"}]})

    def create(self, rt: ResourceType, namespace: str, body: Any, *, dry_run: bool = False,
               strict: bool = False) -> Obj:
        obj = self._check_kind(rt, body)
        rt, conv = self._storage(rt)
        if conv is not None:
            return conv.from_storage(self.create(rt, namespace, conv.to_storage(obj),
                                                 dry_run=dry_run))
        meta = _meta(obj)
        namespace = self._namespace_ok(rt, namespace, meta)
        if rt.namespaced:
            self._require_namespace(namespace)
        self._admit("CREATE", rt, obj, None)
        if not meta.get("name") and isinstance(meta.get("generateName"), str) \
                and meta["generateName"]:
            prefix = meta["generateName"][:_MAX_GENERATED_PREFIX]
            # kube-apiserver (RetryGenerateName, GA in 1.32) tries up to 8 names before it
            # answers AlreadyExists.
            for _ in range(_GENERATE_NAME_TRIES):
                meta["name"] = prefix + "".join(self.rng.choice(_NAME_ALPHABET)
                                                for _ in range(5))
                if self.store.get(rt, namespace, meta["name"]) is None:
                    break
        now = now_rfc3339()
        # The uid comes first, as in kube's generic store: strategies may use it (a Job's
        # generated selector names it).
        meta["uid"] = _uuid4()
        strategies.prepare_for_create(rt, obj, now)
        _strict_check(strategies.admit_custom(rt, obj), strict)
        errs = _decoded(rt, strategies.validate_create, rt, obj)
        if errs:
            raise errors.invalid(rt.group, rt.kind, str(meta.get("name", "")), errs)
        self._admitted("CREATE", rt, obj, None)
        name = meta["name"]
        if self.store.get(rt, namespace, name) is not None:
            raise errors.already_exists(rt.group, rt.plural, name)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "managedFields", "selfLink"):
            meta.pop(key, None)
        meta["creationTimestamp"] = now
        if rt.has_spec or rt.custom:
            meta["generation"] = 1
        if dry_run:
            meta["resourceVersion"] = ""
            return obj
        self.store.put(rt, obj)  # writes the new resourceVersion into obj
        if rt is self.crds or rt.key == self.crds.key:
            for crt in from_crd(obj):
                self.add_type(crt)
        self._notify("ADDED", rt, obj)
        return obj  # listeners only read it during the call; the caller may keep it

    # -- update --------------------------------------------------------------------------------

    def update(self, rt: ResourceType, namespace: str, name: str, body: Any,
               subresource: str = "", *, dry_run: bool = False, strict: bool = False) -> Obj:
        current = self.get_stored(rt, namespace, name)
        obj = self._check_kind(rt, body)
        rt, conv = self._storage(rt)
        if conv is not None:
            return self._update_converted(rt, conv, current, obj, subresource, dry_run)
        return self._update(rt, current, obj, subresource, dry_run=dry_run, strict=strict)

    def _update_converted(self, rt: ResourceType, conv: _Converter, current: Stored, obj: Obj,
                          subresource: str, dry_run: bool) -> Obj:
        stored = conv.to_storage(obj)
        if conv.validate_update is not None:
            errs = conv.validate_update(stored, current.obj)
            if errs:
                raise errors.invalid(rt.group, rt.kind, current.name, errs)
        return conv.from_storage(self._update(rt, current, stored, subresource,
                                              dry_run=dry_run))

    def _update(self, rt: ResourceType, current: Stored, obj: Obj, subresource: str, *,
                dry_run: bool = False, strict: bool = False) -> Obj:
        old = current.obj
        meta = _meta(obj)
        old_meta = old["metadata"]
        if meta.get("name") not in (None, "", current.name):
            raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match "
                                     f"the name on the URL ({current.name})")
        if rt.namespaced and meta.get("namespace") not in (None, "", current.namespace):
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise errors.conflict(rt.group, rt.plural, current.name, errors.STALE_OBJECT)
        uid = meta.get("uid")
        if uid not in (None, "") and uid != current.uid:
            raise errors.conflict(
                rt.group, rt.plural, current.name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{current.uid}")
        # Fields a client can never change.
        for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "generation"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta.pop("managedFields", None)
        if subresource == "status":
            # Only status (and metadata other than owner references) changes through /status.
            new = dict(old)
            new["metadata"] = meta
            meta["ownerReferences"] = old_meta.get("ownerReferences")
            if meta["ownerReferences"] is None:
                del meta["ownerReferences"]
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            obj = new
        elif rt.has_status and "status" in old:
            obj["status"] = old["status"]
        elif rt.has_status:
            obj.pop("status", None)
        if rt.kind == "Namespace" and rt.group == "":
            obj["spec"] = old.get("spec", {})
        if not subresource:
            self._admit("UPDATE", rt, obj, old)
        strategies.prepare_for_update(rt, obj, old, now_rfc3339())
        if (rt.has_spec or rt.custom) and "generation" in old_meta:
            changed = any(obj.get(k) != old.get(k) for k in set(obj) | set(old)
                          if k not in ("metadata", "status", "kind", "apiVersion"))
            if changed:
                meta["generation"] = int(old_meta["generation"]) + 1
        _strict_check(strategies.admit_custom(rt, obj), strict)
        errs = _decoded(rt, strategies.validate_update, rt, obj, old)
        if errs:
            raise errors.invalid(rt.group, rt.kind, current.name, errs)
        if not subresource:
            self._admitted("UPDATE", rt, obj, old)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if obj == old:
            return old  # nothing changed: no write, no event, same resourceVersion
        if dry_run:
            return obj
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # The last finalizer went away: the deletion that was waiting completes now.
            final = self.store.remove(rt, current.namespace, current.name)
            if final is not None:
                self._removed(rt, final)
            return obj
        self.store.put(rt, obj)  # writes the new resourceVersion into obj
        self._notify("MODIFIED", rt, obj)
        return obj

    def patch(self, rt: ResourceType, namespace: str, name: str, content_type: str, raw: bytes,
              subresource: str = "", *, dry_run: bool = False, strict: bool = False) -> Obj:
        current = self.get_stored(rt, namespace, name)
        target = self.output(rt, current.obj)
        try:
            patched = apply_patch(content_type, target, raw, strategic_supported=not rt.custom)
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.reason, str(exc)) from None
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch result is not a JSON object")
        if patched.get("kind") != rt.kind or patched.get("apiVersion") != rt.api_version:
            patched["kind"], patched["apiVersion"] = rt.kind, rt.api_version
        rt, conv = self._storage(rt)
        if conv is not None:
            return self._update_converted(rt, conv, current, patched, subresource, dry_run)
        return self._update(rt, current, patched, subresource, dry_run=dry_run, strict=strict)

    # -- admission -----------------------------------------------------------------------------

    def _node_labels(self, name: str) -> dict[str, str] | None:
        stored = self.store.get(self.nodes, "", name)
        return None if stored is None else stored.labels

    def _admit(self, operation: Operation, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        for plugin in self.admission:
            plugin.admit(operation, rt, obj, old)

    def _admitted(self, operation: Operation, rt: ResourceType, obj: Obj,
                  old: Obj | None) -> None:
        for plugin in self.admission:
            plugin.validate(operation, rt, obj, old)

    # -- delete --------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, options: Obj | None = None, *,
               dry_run: bool = False, collection: bool = False) -> tuple[int, Obj]:
        """Delete (or start deleting) an object. Returns the HTTP code and the body.

        ``collection``: one item of a DeleteCollection, which goes through the generic store
        and so around the rules of a resource's own delete (the system PriorityClasses')."""
        options = options or {}
        if not collection:
            priority.check_delete(rt, name)
        current = self.get_stored(rt, namespace, name)
        rt, _ = self._storage(rt)
        obj = current.obj
        meta = obj["metadata"]
        pre = options.get("preconditions") or {}
        # kube checks a delete's preconditions before the storage does, and names the kind
        # where other conflicts name the resource.
        if pre.get("uid") not in (None, "") and pre["uid"] != current.uid:
            raise errors.conflict(rt.group, rt.kind, name,
                                  f"the UID in the precondition ({pre['uid']}) does not match "
                                  f"the UID in record ({current.uid}). The object might have "
                                  "been deleted and then recreated")
        if pre.get("resourceVersion") not in (None, "") and str(pre["resourceVersion"]) != \
                str(current.rv):
            raise errors.conflict(rt.group, rt.kind, name,
                                  "the ResourceVersion in the precondition "
                                  f"({pre['resourceVersion']}) does not match the "
                                  f"ResourceVersion in record ({current.rv}). The object might "
                                  "have been modified")
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise errors.invalid("meta.k8s.io", "DeleteOptions", "", [FieldError(
                "FieldValueNotSupported", "propagationPolicy", policy,
                'supported values: "Foreground", "Background", "Orphan", "nil"')])
        if dry_run:
            return 200, obj
        if rt is self.namespaces:
            return self._delete_namespace(current, obj)
        grace = self._grace_period(rt, obj, options)
        finalizers = list(meta.get("finalizers") or ())
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if rt is self.pods and grace == 0 and not finalizers and \
                meta.get("deletionGracePeriodSeconds") != 0:
            # kube's pod deletion is always graceful, even when it is immediate: the deletion
            # stamp is written (and watched) before the pod goes.
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            obj = self.store.put(rt, obj).obj
            self._notify("MODIFIED", rt, obj)
        if grace > 0 or finalizers:
            changed = False
            if finalizers != list(meta.get("finalizers") or ()):
                meta["finalizers"] = finalizers
                changed = True
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = _rfc3339_after(grace)
                meta["deletionGracePeriodSeconds"] = grace
                changed = True
            elif grace < int(meta.get("deletionGracePeriodSeconds") or 0):
                # A shorter grace period replaces a longer one (kubectl --grace-period).
                meta["deletionTimestamp"] = _rfc3339_after(grace)
                meta["deletionGracePeriodSeconds"] = grace
                changed = True
            if grace == 0 and not finalizers:
                pass  # fall through to immediate removal below
            else:
                if changed:
                    stored = self.store.put(rt, obj)
                    obj = stored.obj
                    self._notify("MODIFIED", rt, obj)
                return (202 if policy not in (None, "Orphan") else 200), obj
        final = self.store.remove(rt, current.namespace, current.name)
        assert final is not None
        self._removed(rt, final)
        if rt is self.pods or rt.custom:
            return 200, final.obj
        return 200, errors.status_success(200, {
            "name": name, "group": rt.group, "kind": rt.plural, "uid": current.uid})

    def _grace_period(self, rt: ResourceType, obj: Obj, options: Obj) -> int:
        if rt is not self.pods:
            return 0
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        requested = options.get("gracePeriodSeconds")
        grace = int(requested if requested is not None
                    else spec.get("terminationGracePeriodSeconds", 30) or 0)
        # Pods that never ran on a node, and finished pods, go at once (kube's pod strategy).
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        return max(grace, 0)

    def _delete_namespace(self, current: Stored, obj: Obj) -> tuple[int, Obj]:
        if current.name in CORE_NAMESPACES[:3]:
            raise errors.forbidden("", "namespaces", current.name,
                                   "this namespace may not be deleted")
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            obj["status"] = {"phase": "Terminating"}
            stored = self.store.put(self.namespaces, obj)
            obj = stored.obj
            self._notify("MODIFIED", self.namespaces, obj)
        return 200, obj

    def finalize_namespace(self, name: str) -> None:
        """Remove a terminating namespace once its content is gone (the namespace controller)."""
        final = self.store.remove(self.namespaces, "", name)
        if final is not None:
            self._removed(self.namespaces, final)

    def remove_now(self, rt: ResourceType, namespace: str, name: str) -> None:
        """Delete at once, bypassing grace periods and finalizers (kubelet/controllers)."""
        final = self.store.remove(rt, namespace, name)
        if final is not None:
            self._removed(rt, final)

    def _removed(self, rt: ResourceType, final: Stored) -> None:
        if rt.key == self.crds.key:
            self._drop_crd(final.obj)
        self._notify("DELETED", rt, final.obj)

    def _drop_crd(self, crd: Obj) -> None:
        for crt in from_crd(crd):
            if (crt.group, crt.version, crt.plural) in self.types:
                del self.types[(crt.group, crt.version, crt.plural)]
        for crt in from_crd(crd):
            self.store.drop_type(crt.key)
            break

    def _notify(self, kind: str, rt: ResourceType, obj: Obj) -> None:
        for listener in self.listeners:
            listener(kind, rt, obj)

    # -- subresources --------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, body: Any) -> Obj:
        """``POST pods/<name>/binding``: assign a pod to a node."""
        binding = self._check_kind(self.types[("", "v1", "bindings")], body)
        target = binding.get("target") or {}
        node = target.get("name")
        bmeta = binding.get("metadata") or {}
        if bmeta.get("name") not in (None, name):
            raise errors.bad_request(f"the name of the object ({bmeta.get('name')}) does not "
                                     f"match the name on the URL ({name})")
        if not node:
            raise errors.invalid("", "Binding", name, [FieldError(
                "FieldValueRequired", "target.name", None, "")])
        current = self.get_stored(self.pods, namespace, name)
        pod = current.obj
        meta = pod["metadata"]
        if bmeta.get("uid") not in (None, "") and bmeta["uid"] != current.uid:
            raise errors.conflict("", "pods/binding", name,
                                  f"Precondition failed: UID in precondition: {bmeta['uid']}, "
                                  f"UID in object meta: {current.uid}")
        if meta.get("deletionTimestamp"):
            raise errors.conflict("", "pods/binding", name,
                                  f"pod {name} is being deleted, cannot be assigned to a host")
        spec = pod["spec"]
        if spec.get("nodeName"):
            raise errors.conflict("", "pods/binding", name,
                                  f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise errors.conflict("", "pods/binding", name,
                                  f"pod {name} has non-empty .spec.schedulingGates")
        spec["nodeName"] = node
        if bmeta.get("annotations"):
            meta.setdefault("annotations", {}).update(bmeta["annotations"])
        # The binding's labels, then the node's topology labels (PodTopologyLabels), are the
        # pod's from now on.
        labels = {**(bmeta.get("labels") or {}), **self.topology_labels.labels_for(node)}
        if labels:
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conditions
        self.store.put(self.pods, pod)
        self._notify("MODIFIED", self.pods, pod)
        return errors.status_success(201)

    def evict(self, namespace: str, name: str, body: Any) -> Obj:
        """``POST pods/<name>/eviction`` honouring PodDisruptionBudgets (policy/v1)."""
        if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
            raise errors.bad_request("the object provided is unrecognized (must be of type "
                                     "Eviction)")
        current = self.get_stored(self.pods, namespace, name)
        pod = current.obj
        options = body.get("deleteOptions") or {}
        phase = (pod.get("status") or {}).get("phase")
        ignore_pdb = phase in ("Succeeded", "Failed", "Pending") or \
            bool(pod["metadata"].get("deletionTimestamp"))
        if not ignore_pdb:
            pdbs = [s for s in self.store.iter(self.pdbs, namespace)
                    if _selects(s.obj, current.labels)]
            if len(pdbs) > 1:
                raise errors.ApiError(500, "InternalError",
                                      "This pod has more than one PodDisruptionBudget, which the "
                                      "eviction subresource does not support.")
            if pdbs:
                pdb = pdbs[0].obj
                status = pdb.setdefault("status", {})
                allowed = int(status.get("disruptionsAllowed", 0))
                if (pdb["metadata"].get("generation") or 0) > (status.get("observedGeneration")
                                                             or 0) or allowed <= 0:
                    desired = status.get("desiredHealthy", 0)
                    healthy = status.get("currentHealthy", 0)
                    raise errors.too_many_requests(
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        [{"reason": "DisruptionBudget",
                          "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                     f"{desired} healthy pods and has {healthy} currently"}])
                status["disruptionsAllowed"] = allowed - 1
                disrupted = status.setdefault("disruptedPods", {})
                disrupted[name] = now_rfc3339()
                self.store.put(self.pdbs, pdb)
                self._notify("MODIFIED", self.pdbs, pdb)
        self.delete(self.pods, namespace, name, options)
        return errors.status_success(201)

    def get_scale(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        selector = (obj.get("spec") or {}).get("selector") or {}
        # A ReplicationController's selector is a plain map, the others' a LabelSelector.
        match = selector if rt.kind == "ReplicationController" else (
            selector.get("matchLabels") or {})
        return {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                               "creationTimestamp") if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(match.items()))},
        }

    def update_scale(self, rt: ResourceType, namespace: str, name: str, scale: Any) -> Obj:
        if not isinstance(scale, dict):
            raise errors.bad_request("the object provided is unrecognized (must be of type Scale)")
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid("autoscaling", "Scale", name, [FieldError(
                "FieldValueInvalid", "spec.replicas", replicas,
                "must be greater than or equal to 0")])
        current = self.get_stored(rt, namespace, name)
        obj = current.obj
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise errors.conflict(rt.group, rt.plural, name, errors.STALE_OBJECT)
        obj["spec"]["replicas"] = replicas
        self._update(rt, current, obj, "")
        return self.get_scale(rt, namespace, name)

    def patch_scale(self, rt: ResourceType, namespace: str, name: str, content_type: str,
                    raw: bytes) -> Obj:
        scale = self.get_scale(rt, namespace, name)
        try:
            # Scale has no lists, so a strategic merge patch acts as a merge patch with directives.
            patched = apply_patch(content_type, scale, raw, kind_path=("", "ConfigMap"))
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.reason, str(exc)) from None
        return self.update_scale(rt, namespace, name, patched)


def _decoded(rt: ResourceType, validate: Callable[..., list[FieldError]],
             *args: Any) -> list[FieldError]:
    """``validate(*args)``, with a value that kube-apiserver could not have decoded answered
    as it answers it: 400, not 422."""
    try:
        return validate(*args)
    except UndecodableValue as exc:
        raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a '
                                 f"{rt.kind}: {exc}") from None


def _strict_check(pruned: list[str], strict: bool) -> None:
    """``fieldValidation=Strict``: fields the schema does not know are an error, not dropped."""
    if strict and pruned:
        raise errors.bad_request("strict decoding error: " + ", ".join(
            f'unknown field "{path}"' for path in pruned))


def _selects(pdb: Obj, labels: dict[str, str]) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    try:
        return label_selector_from_dict(selector).matches(labels)
    except ValueError:
        return False
