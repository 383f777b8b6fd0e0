"""PATCH for the embedded API server: JSON merge patch, JSON patch and strategic merge patch.

The loopback API server stores every object as plain decoded JSON (dicts, lists, str, int, float,
bool, None) and has no Go structs to consult, so this module re-creates the three patch flavours a
``PATCH`` request can carry, selected by its ``Content-Type``:

``application/merge-patch+json``
    RFC 7386.  Objects merge recursively, ``null`` deletes a member, anything else (arrays
    included) replaces the target value.  See :func:`apply_merge_patch`.

``application/json-patch+json``
    RFC 6902, delegated to the :mod:`jsonpatch` package.  Operations are applied one at a time so
    that a failure can name the operation index, the ``op`` and the ``path``; ``test`` compares
    values strictly, like Kubernetes (``true`` is not ``1``, and ``1`` is not ``1.0``).  See
    :func:`apply_json_patch`.

``application/strategic-merge-patch+json``
    Kubernetes' own dialect (``k8s.io/apimachinery/pkg/util/strategicpatch``).  It is a JSON merge
    patch in which some lists are merged instead of replaced.  Kubernetes learns which lists from
    the ``patchStrategy``/``patchMergeKey`` struct tags of the Go API types; here the same
    information lives in :data:`STRATEGIC_MERGE_SCHEMAS`, a table from ``(apiGroup, Kind)`` to a
    sparse tree of :class:`FieldStrategy` nodes.  Only fields that carry a strategy, or lead to one,
    appear in the tree: every list not mentioned is replaced wholesale and every map not mentioned
    is merged key by key, exactly what Kubernetes does for untagged fields.  A kind missing from
    the table (custom resources, for instance) cannot be strategically patched, which Kubernetes
    reports with HTTP 415; :class:`UnsupportedPatchType` carries that status.  See
    :func:`apply_strategic_merge_patch`.

Strategic merge patch, as implemented here
-------------------------------------------
* Maps merge recursively and ``null`` deletes a key.  A map field tagged ``replace`` (for example
  ``PodDisruptionBudget.spec.selector``) is replaced instead of merged.
* A list tagged ``merge`` with a merge key (``spec.containers`` by ``name``, ``status.conditions``
  by ``type`` ...) is merged item by item: a patch item updates, recursively, the live item with
  the same merge-key value; items with no live counterpart are added.  A list tagged ``merge``
  without a key (``metadata.finalizers``, ``spec.podCIDRs``) is merged as an ordered set.
* Ordering follows ``strategicpatch``: patch items keep the order they have in the patch, live
  items not named by the patch keep their live order, and the two sequences are interleaved using
  the live positions of the items both know.  A consequence worth knowing: without a
  ``$setElementOrder`` directive, a brand-new item lands *before* the live items that follow the
  last live item named by the patch (a patch naming only new items puts them first), as
  ``kubectl patch --type strategic`` shows.  ``$setElementOrder/<field>`` (which kubectl sends)
  overrides the patch order.
* Directives: ``$patch: replace`` in a map replaces the map, and as a list item replaces the whole
  list with the other items; ``$patch: delete`` in a map deletes the map, and as a list item
  deletes the live item with the same merge key; ``$retainKeys`` drops every live key not listed;
  ``$deleteFromPrimitiveList/<field>`` removes values from a primitive list;
  ``$setElementOrder/<field>`` fixes the final order of a list.  Any other ``$patch`` value
  (including ``merge``) is an error.

Departures from Kubernetes
--------------------------
Kubernetes decodes the patched map back into Go structs, which silently drops stray directive keys
and ``null`` members; an untyped store would keep them, so a few corner cases differ on purpose:

* An object (or merged list) in the patch for a field the live object lacks, or holds with another
  JSON type, is patched onto an empty value instead of being copied verbatim, so its directives
  are honoured and its ``null`` members dropped.  (Kubernetes copies it, so for instance
  ``{"name": "X", "$patch": "delete"}`` inside a *new* container's ``env`` ends up as an
  environment variable ``X``.)  Replaced lists and scalars are copied verbatim, as in Kubernetes.
* ``$patch: delete`` in a nested map removes the field; Kubernetes leaves ``{}`` behind.
* ``$deleteFromPrimitiveList/<field>`` is a no-op when the field is absent and always removes
  values; Kubernetes stores the deletion list itself as the field when it is absent or when the
  field has no merge strategy.  Deletions run after the other keys of their map (Go visits map
  keys in random order).
* When a patch combines ``$setElementOrder`` with ``$patch: delete`` items and new items, the
  Kubernetes order can depend on Go slice capacity (the live list is edited in place and then
  used for ordering); here the live order before the patch is used.
* Malformed strategic patches are 400s; Kubernetes answers 500 for several of them (missing merge
  key, unknown ``$patch`` value, ``$setElementOrder`` mismatch).  Messages render values as JSON.
* ``application/apply-patch+yaml`` (server-side apply) is not supported: 415.

Every public function leaves its arguments untouched: inputs are deep-copied (through an
:mod:`orjson` round trip, falling back to :func:`copy.deepcopy` for values orjson cannot encode) and
the copy is patched in place.

Errors are :class:`PatchError`, a :class:`ValueError` whose message is suitable for a Kubernetes
``Status`` and whose ``code``/``reason`` say which one: 400 ``BadRequest`` for malformed patches,
422 ``Invalid`` for JSON patch operations that cannot be applied (as the real API server does), and
415 ``UnsupportedMediaType`` for :class:`UnsupportedPatchType`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Final, NamedTuple

import jsonpatch
import orjson

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_CONTENT_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "STRATEGIC_MERGE_SCHEMAS",
    "FieldStrategy",
    "PatchError",
    "UnsupportedPatchType",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_patch",
    "apply_strategic_merge_patch",
    "kind_path_of",
    "strategic_merge_supported",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
PATCH_CONTENT_TYPES: Final[tuple[str, ...]] = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)

_REASONS: Final[Mapping[int, str]] = {
    400: "BadRequest",
    415: "UnsupportedMediaType",
    422: "Invalid",
}


class PatchError(ValueError):
    """A patch that cannot be decoded or applied.

    ``str(error)`` is the message for the ``Status``; ``code`` is the HTTP status (400 unless
    stated otherwise) and ``reason`` the matching ``Status.reason``.
    """

    def __init__(self, message: str, *, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    @property
    def reason(self) -> str:
        """The Kubernetes ``Status.reason`` for :attr:`code`."""
        return _REASONS.get(self.code, "BadRequest")


class UnsupportedPatchType(PatchError):
    """The patch media type is not accepted for this object (HTTP 415)."""

    def __init__(self, media_type: str, accepted: Iterable[str] = PATCH_CONTENT_TYPES) -> None:
        self.media_type = media_type
        self.accepted = tuple(accepted)
        super().__init__(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(self.accepted),
            code=415,
        )


# --------------------------------------------------------------------------------------------
# Schema table
# --------------------------------------------------------------------------------------------


class FieldStrategy(NamedTuple):
    """Patch metadata of one field, as declared by the Go struct tags.

    ``strategy`` is the ``patchStrategy`` tag split on commas (``("merge",)``, ``("replace",)``,
    ``("retainKeys",)``, ``("merge", "retainKeys")`` or ``()``); ``merge_key`` is
    ``patchMergeKey`` (empty for primitive sets and untagged fields); ``fields`` describes the
    field's value when it is an object, or each item when it is a list of objects.
    """

    strategy: tuple[str, ...] = ()
    merge_key: str = ""
    fields: Mapping[str, FieldStrategy] = {}

    @property
    def merges_list(self) -> bool:
        """Whether a list value is merged rather than replaced."""
        return "merge" in self.strategy

    @property
    def replaces_map(self) -> bool:
        """Whether an object value is replaced rather than merged."""
        return "replace" in self.strategy


_Schema = Mapping[str, FieldStrategy]
_PLAIN: Final = FieldStrategy()


def _obj(**fields: FieldStrategy) -> FieldStrategy:
    """An object with no strategy of its own whose descendants have some."""
    return FieldStrategy((), "", fields)


def _by(merge_key: str, *extra: str, **item_fields: FieldStrategy) -> FieldStrategy:
    """A list of objects merged on ``merge_key`` (``extra`` adds e.g. ``retainKeys``)."""
    return FieldStrategy(("merge", *extra), merge_key, item_fields)


_SET: Final = FieldStrategy(("merge",))  # list of primitives merged as an ordered set
_REPLACE: Final = FieldStrategy(("replace",))
_RETAIN_KEYS: Final = FieldStrategy(("retainKeys",))

_OBJECT_META: Final = _obj(finalizers=_SET, ownerReferences=_by("uid"))
_CONDITIONS: Final = _by("type")
_STATUS_CONDITIONS: Final = _obj(conditions=_CONDITIONS)

_CONTAINER_FIELDS: Final[_Schema] = {
    "ports": _by("containerPort"),
    "env": _by("name"),
    "volumeMounts": _by("mountPath"),
    "volumeDevices": _by("devicePath"),
}
_CONTAINERS: Final = _by("name", **_CONTAINER_FIELDS)

_POD_SPEC: Final = _obj(
    volumes=_by("name", "retainKeys"),
    initContainers=_CONTAINERS,
    containers=_CONTAINERS,
    ephemeralContainers=_CONTAINERS,
    imagePullSecrets=_by("name"),
    hostAliases=_by("ip"),
    topologySpreadConstraints=_by("topologyKey"),
    schedulingGates=_by("name"),
    resourceClaims=_by("name", "retainKeys"),
    # tolerations, readinessGates: no patchStrategy -> replaced wholesale
)
_POD_STATUS: Final = _obj(
    conditions=_CONDITIONS,
    podIPs=_by("ip"),
    hostIPs=_by("ip"),
    resourceClaimStatuses=_by("name", "retainKeys"),
    # containerStatuses, initContainerStatuses, ephemeralContainerStatuses: no patchStrategy
)
_POD_TEMPLATE_SPEC: Final = _obj(metadata=_OBJECT_META, spec=_POD_SPEC)
_WORKLOAD: Final[_Schema] = {
    "metadata": _OBJECT_META,
    "spec": _obj(template=_POD_TEMPLATE_SPEC),
    "status": _STATUS_CONDITIONS,
}
_META_ONLY: Final[_Schema] = {"metadata": _OBJECT_META}

STRATEGIC_MERGE_SCHEMAS: Final[Mapping[tuple[str, str], _Schema]] = {
    # core/v1
    ("", "Pod"): {"metadata": _OBJECT_META, "spec": _POD_SPEC, "status": _POD_STATUS},
    ("", "PodTemplate"): {"metadata": _OBJECT_META, "template": _POD_TEMPLATE_SPEC},
    ("", "ReplicationController"): _WORKLOAD,
    ("", "Node"): {
        "metadata": _OBJECT_META,
        "spec": _obj(podCIDRs=_SET),  # taints: no patchStrategy -> replaced wholesale
        "status": _obj(conditions=_CONDITIONS, addresses=_by("type")),
    },
    ("", "Namespace"): {"metadata": _OBJECT_META, "status": _STATUS_CONDITIONS},
    ("", "Service"): {
        "metadata": _OBJECT_META,
        "spec": _obj(ports=_by("port")),
        "status": _STATUS_CONDITIONS,
    },
    ("", "ServiceAccount"): {"metadata": _OBJECT_META, "secrets": _by("name")},
    ("", "PersistentVolumeClaim"): {"metadata": _OBJECT_META, "status": _STATUS_CONDITIONS},
    ("", "PersistentVolume"): _META_ONLY,
    ("", "ConfigMap"): _META_ONLY,
    ("", "Secret"): _META_ONLY,
    ("", "Endpoints"): _META_ONLY,
    ("", "Event"): _META_ONLY,
    ("", "LimitRange"): _META_ONLY,
    ("", "ResourceQuota"): _META_ONLY,
    # apps/v1
    ("apps", "Deployment"): {
        **_WORKLOAD,
        "spec": _obj(template=_POD_TEMPLATE_SPEC, strategy=_RETAIN_KEYS),
    },
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "DaemonSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("apps", "ControllerRevision"): _META_ONLY,
    # batch/v1
    ("batch", "Job"): _WORKLOAD,
    ("batch", "CronJob"): {
        "metadata": _OBJECT_META,
        "spec": _obj(
            jobTemplate=_obj(metadata=_OBJECT_META, spec=_obj(template=_POD_TEMPLATE_SPEC))
        ),
    },
    # policy/v1
    ("policy", "PodDisruptionBudget"): {
        "metadata": _OBJECT_META,
        "spec": _obj(selector=_REPLACE),
        "status": _STATUS_CONDITIONS,
    },
    # autoscaling/v2
    ("autoscaling", "HorizontalPodAutoscaler"): {
        "metadata": _OBJECT_META,
        "status": _STATUS_CONDITIONS,
    },
    # others without list strategies beyond ObjectMeta
    ("events.k8s.io", "Event"): _META_ONLY,
    ("coordination.k8s.io", "Lease"): _META_ONLY,
    ("scheduling.k8s.io", "PriorityClass"): _META_ONLY,
    ("storage.k8s.io", "StorageClass"): _META_ONLY,
    ("storage.k8s.io", "CSIDriver"): _META_ONLY,
    ("storage.k8s.io", "CSINode"): {"metadata": _OBJECT_META, "spec": _obj(drivers=_by("name"))},
    ("discovery.k8s.io", "EndpointSlice"): _META_ONLY,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _META_ONLY,
}


def _normalize_kind_path(kind_path: tuple[str, str]) -> tuple[str, str]:
    group, kind = kind_path
    return ("" if group == "core" else group, kind)


def strategic_merge_supported(kind_path: tuple[str, str]) -> bool:
    """Whether ``(apiGroup, Kind)`` accepts ``application/strategic-merge-patch+json``."""
    return _normalize_kind_path(kind_path) in STRATEGIC_MERGE_SCHEMAS


def kind_path_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(apiGroup, Kind)`` of an object from its ``apiVersion`` and ``kind``."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    return (group, kind if isinstance(kind, str) else "")


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _clone(value: Any) -> Any:
    """A deep copy of a JSON value (orjson round trip; deepcopy for what orjson cannot encode)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return copy.deepcopy(value)


def _short(value: Any, limit: int = 200) -> str:
    """A compact JSON rendering of ``value`` for error messages."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _key(value: Any) -> Hashable:
    """A hashable identity for a JSON value, as Kubernetes compares merge keys and list items.

    Go compares the decoded ``interface{}`` values, where an integer (``int64``) never equals a
    float (``float64``) nor a boolean, so ``1``, ``1.0`` and ``true`` are three different values
    here too (Python alone would call them equal).
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value)
    try:
        return ("json", orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return ("repr", repr(value))


def _json_equal(left: Any, right: Any) -> bool:
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            _json_equal(v, right[k]) for k, v in left.items()
        )
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    if isinstance(left, (dict, list)) or isinstance(right, (dict, list)):
        return False
    return _key(left) == _key(right)


# --------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)
# --------------------------------------------------------------------------------------------


def _merge_patch_in_place(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for name, value in patch.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = _merge_patch_in_place(target.get(name), value)
    return target


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch and return the result; ``target`` is not modified.

    A patch that is not an object replaces the target, as the RFC specifies.
    """
    return _merge_patch_in_place(_clone(target), _clone(patch))


# --------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)
# --------------------------------------------------------------------------------------------


def _describe_op(index: int, op: Any) -> str:
    if isinstance(op, Mapping):
        return f"operation {index} ({op.get('op')!r} at path {op.get('path')!r})"
    return f"operation {index}"


def _apply_json_patch_in_place(doc: Any, patch: Any) -> Any:
    if not isinstance(patch, list):
        raise PatchError(
            f"json patch must be an array of operations, got {_type_name(patch)}: {_short(patch)}"
        )
    for index, op in enumerate(patch):
        where = _describe_op(index, op)
        try:
            compiled = jsonpatch.JsonPatch([op])
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PatchError(f"invalid json patch {where}: {exc}") from exc
        except (TypeError, AttributeError, KeyError) as exc:
            raise PatchError(f"invalid json patch {where}: {_short(op)}") from exc
        if op.get("op") == "test":
            _json_patch_test(doc, op, where)
            continue
        try:
            doc = compiled.apply(doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PatchError(f"json patch {where} failed: {exc}", code=422) from exc
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise PatchError(f"json patch {where} failed: {exc!r}", code=422) from exc
    return doc


def _json_patch_test(doc: Any, op: Mapping[str, Any], where: str) -> None:
    path = op["path"]
    if "value" not in op:
        raise PatchError(f"invalid json patch {where}: the operation has no 'value' member")
    try:
        actual = jsonpatch.JsonPointer(path).resolve(doc)
    except (jsonpatch.JsonPointerException, TypeError, KeyError, IndexError) as exc:
        raise PatchError(
            f"json patch {where} failed: testing value {path} failed: {exc}", code=422
        ) from exc
    if not _json_equal(actual, op["value"]):
        raise PatchError(
            f"json patch {where} failed: testing value {path} failed: "
            f"found {_short(actual)}, expected {_short(op['value'])}",
            code=422,
        )


def apply_json_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of operations); ``target`` is not modified.

    Malformed operations raise :class:`PatchError` (400); operations that do not apply
    (missing path, failed ``test`` ...) raise :class:`PatchError` with code 422, as the
    Kubernetes API server does.  Messages name the operation index, ``op`` and ``path``.
    """
    return _apply_json_patch_in_place(_clone(target), _clone(patch))


# --------------------------------------------------------------------------------------------
# Strategic merge patch
# --------------------------------------------------------------------------------------------

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS_DIRECTIVE: Final = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER: Final = "$setElementOrder"
_MISSING: Final[Any] = object()


def _directive_field(key: str, prefix: str, what: str) -> str:
    head, sep, field = key.partition("/")
    if head != prefix or not sep:
        raise PatchError(f"invalid patch format of {what}: {key!r}")
    return field


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], schema: _Schema
) -> dict[str, Any] | None:
    """Patch ``original`` in place with ``patch``; ``None`` means the map is deleted."""
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "delete":
            return None
        if directive == "replace":
            replacement = {k: v for k, v in patch.items() if k != _DIRECTIVE}
            return _merge_map({}, replacement, schema)
        raise PatchError(f"unknown patch type: {_short(directive)} in map: {_short(patch)}")

    if _RETAIN_KEYS_DIRECTIVE in patch:
        _retain_keys(original, patch)

    done: set[str] = set()
    for key, value in patch.items():
        if key.startswith(_SET_ELEMENT_ORDER):
            field = _directive_field(key, _SET_ELEMENT_ORDER, "setElementOrder list")
            _set_element_order(original, patch, field, value, schema.get(field, _PLAIN))
            done.add(field)

    deletions: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key in done or key == _RETAIN_KEYS_DIRECTIVE or key.startswith(_SET_ELEMENT_ORDER):
            continue
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = _directive_field(key, _DELETE_FROM_PRIMITIVE_LIST, "primitive list")
            deletions.append((field, value))
            continue
        if value is None:
            original.pop(key, None)
            continue
        meta = schema.get(key, _PLAIN)
        if isinstance(value, dict):
            live = original.get(key)
            base = live if isinstance(live, dict) and not meta.replaces_map else {}
            merged = _merge_map(base, value, meta.fields)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list) and meta.merges_list:
            live = original.get(key)
            original[key] = _merge_list(live if isinstance(live, list) else [], value, meta)
        else:
            original[key] = value

    for field, values in deletions:
        _delete_from_primitive_list(original, field, values)
    return original


def _retain_keys(original: dict[str, Any], patch: Mapping[str, Any]) -> None:
    retain = patch[_RETAIN_KEYS_DIRECTIVE]
    if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
        raise PatchError(f"invalid patch format of retainKeys: {_short(retain)}")
    keep = set(retain)
    for key, value in patch.items():
        if value is None or key.startswith("$"):
            continue
        if key not in keep:
            raise PatchError(
                f"invalid patch format of retainKeys: field {key!r} is patched but not listed in "
                f"{_RETAIN_KEYS_DIRECTIVE} {_short(retain)}"
            )
    for key in [k for k in original if k not in keep]:
        del original[key]


def _delete_from_primitive_list(original: dict[str, Any], field: str, values: Any) -> None:
    if not isinstance(values, list) or any(isinstance(v, (dict, list)) for v in values):
        raise PatchError(
            f"invalid patch format of primitive list: {_DELETE_FROM_PRIMITIVE_LIST}/{field} "
            f"must be an array of primitives, got {_short(values)}"
        )
    live = original.get(field, _MISSING)
    if live is _MISSING:
        return
    if not isinstance(live, list) or any(isinstance(v, (dict, list)) for v in live):
        raise PatchError(
            f"{_DELETE_FROM_PRIMITIVE_LIST}/{field} applies to a list of primitives, "
            f"but {field!r} is {_short(live)}"
        )
    doomed = {_key(v) for v in values}
    original[field] = [v for v in live if _key(v) not in doomed]


def _element_kind(*lists: list[Any]) -> str:
    """The common JSON type of all items; ``""`` when there are none."""
    kind = ""
    for items in lists:
        for item in items:
            this = _type_name(item)
            if this == "array":
                raise PatchError("lists of lists are not supported", code=422)
            if not kind:
                kind = this
            elif kind != this:
                raise PatchError(f"list element types are not identical: {_short(lists)}")
    return kind


def _merge_key_value(item: Any, merge_key: str) -> Any:
    if not isinstance(item, dict):
        raise PatchError(
            f"expected an object in a list merged on {merge_key!r}, got {_short(item)}"
        )
    if merge_key not in item:
        raise PatchError(f"map: {_short(item)} does not contain declared merge key: {merge_key}")
    return item[merge_key]


def _identity(merge_key: str) -> Callable[[Any], Hashable]:
    """Item identity within a merged list: its merge-key value, or itself for primitives."""
    if merge_key:
        return lambda item: _key(_merge_key_value(item, merge_key))
    return _key


def _merge_list(live: list[Any], patch: list[Any], meta: FieldStrategy) -> list[Any]:
    """Merge ``patch`` into the live list of a field tagged ``patchStrategy: merge``."""
    if not live and not patch:
        return live
    kind = _element_kind(live, patch)
    if kind != "object":
        merged: list[Any] = []
        seen: set[Hashable] = set()
        for item in (*live, *patch):
            if _key(item) not in seen:
                seen.add(_key(item))
                merged.append(item)
        return _order(merged, patch, live, _key)

    merge_key = meta.merge_key
    if not merge_key:
        raise PatchError("cannot merge lists of objects without a merge key")
    identity = _identity(merge_key)
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            doomed = identity(item)
            live = [
                x
                for x in live
                if not (isinstance(x, dict) and merge_key in x and _key(x[merge_key]) == doomed)
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {_short(directive)} in map: {_short(item)}")

    if replace:
        result = [_merge_item({}, item, meta.fields) for item in plain]
        for entry in result:
            identity(entry)  # every item still needs its merge key
        return result

    merged = list(live)
    position: dict[Hashable, int] = {}
    for index, entry in enumerate(merged):
        position.setdefault(identity(entry), index)
    for item in plain:
        ident = identity(item)
        at = position.get(ident)
        if at is None:
            position[ident] = len(merged)
            merged.append(_merge_item({}, item, meta.fields))
        else:
            merged[at] = _merge_item(merged[at], item, meta.fields)
    return _order(merged, plain, live, identity)


def _merge_item(live: dict[str, Any], item: dict[str, Any], fields: _Schema) -> dict[str, Any]:
    """Merge one list item (which carries no ``$patch`` directive, so cannot delete itself)."""
    merged = _merge_map(live, item, fields)
    return {} if merged is None else merged


def _order(
    merged: list[Any], order: list[Any], live: list[Any], identity: Callable[[Any], Hashable]
) -> list[Any]:
    """Arrange ``merged`` the way ``strategicpatch`` does.

    Items named by ``order`` come in that order; the others keep their ``live`` order; the two
    runs are interleaved so that a live-only item is emitted first only when both it and the next
    named item are live and it comes earlier in ``live``.
    """

    def first_positions(items: list[Any]) -> dict[Hashable, int]:
        positions: dict[Hashable, int] = {}
        for index, item in enumerate(items):
            positions.setdefault(identity(item), index)
        return positions

    in_order = first_positions(order)
    in_live = first_positions(live)
    named = [item for item in merged if identity(item) in in_order]
    others = [item for item in merged if identity(item) not in in_order]
    named.sort(key=lambda item: in_order[identity(item)])
    others.sort(key=lambda item: in_live.get(identity(item), len(live)))

    result: list[Any] = []
    i = j = 0
    while i < len(others) or j < len(named):
        if j >= len(named):
            result.append(others[i])
            i += 1
            continue
        if i < len(others):
            left = in_live.get(identity(others[i]))
            right = in_live.get(identity(named[j]))
            if left is not None and right is not None and left < right:
                result.append(others[i])
                i += 1
                continue
        result.append(named[j])
        j += 1
    return result


def _set_element_order(
    original: dict[str, Any], patch: Mapping[str, Any], field: str, order: Any, meta: FieldStrategy
) -> None:
    """Handle ``$setElementOrder/<field>`` together with ``patch[field]``."""
    if not isinstance(order, list):
        raise PatchError(f"invalid patch format of setElementOrder list: {_short(order)}")
    live = original.get(field, _MISSING)
    patched = patch.get(field, _MISSING)
    if live is not _MISSING and not isinstance(live, list):
        raise PatchError(
            f"{_SET_ELEMENT_ORDER}/{field} applies to a list, but {field!r} is {_short(live)}"
        )
    if patched is not _MISSING and not isinstance(patched, list):
        raise PatchError(
            f"{_SET_ELEMENT_ORDER}/{field} applies to a list, but the patch sets {_short(patched)}"
        )
    merge_key = meta.merge_key if meta.merges_list else ""
    if patched is not _MISSING:
        _check_patch_follows_order(patched, order, merge_key, field)

    if patched is _MISSING:
        if live is _MISSING:
            return
        merged: list[Any] = live
    elif meta.merges_list:
        merged = _merge_list([] if live is _MISSING else live, patched, meta)
    else:
        merged = patched
    base: list[Any] = [] if live is _MISSING else live

    kind = _element_kind(merged, order)
    if kind == "object" and not merge_key:
        raise PatchError(
            f"{_SET_ELEMENT_ORDER}/{field}: cannot order a list of objects without a merge key"
        )
    original[field] = _order(merged, order, base, _identity(merge_key))


def _check_patch_follows_order(
    patched: list[Any], order: list[Any], merge_key: str, field: str
) -> None:
    """The patch items (deletions aside) must appear in ``order``, in the same relative order."""
    if not patched or not order:
        return
    identity = _identity(merge_key)
    items = [
        item
        for item in patched
        if not (merge_key and isinstance(item, dict) and item.get(_DIRECTIVE) == "delete")
    ]
    i = j = 0
    while i < len(items) and j < len(order):
        if isinstance(items[i], dict) and _DIRECTIVE in items[i]:
            i += 1
            continue
        if identity(items[i]) == identity(order[j]):
            i += 1
        j += 1
    if i < len(items):
        raise PatchError(
            f"the order in patch list {_short(patched)} doesn't match "
            f"{_SET_ELEMENT_ORDER}/{field} list {_short(order)}"
        )


def _schema_for(kind_path: tuple[str, str]) -> _Schema:
    schema = STRATEGIC_MERGE_SCHEMAS.get(_normalize_kind_path(kind_path))
    if schema is None:
        raise UnsupportedPatchType(STRATEGIC_MERGE_PATCH, (JSON_PATCH, MERGE_PATCH))
    return schema


def _apply_strategic_in_place(target: Any, patch: Any, schema: _Schema) -> dict[str, Any]:
    if not isinstance(target, dict):
        raise PatchError(
            f"strategic merge patch target must be an object, got {_type_name(target)}"
        )
    if not isinstance(patch, dict):
        raise PatchError(
            f"strategic merge patch must be a JSON object, got {_type_name(patch)}: {_short(patch)}"
        )
    result = _merge_map(target, patch, schema)
    return {} if result is None else result


def apply_strategic_merge_patch(target: Any, patch: Any, kind_path: tuple[str, str]) -> Any:
    """Apply a Kubernetes strategic merge patch to an object of kind ``(apiGroup, Kind)``.

    ``target`` is not modified.  Raises :class:`UnsupportedPatchType` when the kind is not in
    :data:`STRATEGIC_MERGE_SCHEMAS` and :class:`PatchError` for malformed patches.
    """
    schema = _schema_for(kind_path)
    return _apply_strategic_in_place(_clone(target), _clone(patch), schema)


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------


def _decode(body: bytes | bytearray | memoryview | str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PatchError(f"error decoding patch: {exc}") from exc


def apply_patch(
    content_type: str,
    target: dict[str, Any],
    patch_body: bytes | bytearray | memoryview | str,
    strategic_supported: bool = True,
    *,
    kind_path: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Decode ``patch_body`` and apply it to ``target`` according to ``content_type``.

    Only the media type of ``content_type`` counts (parameters such as ``charset`` are ignored).
    Strategic merge patches use ``kind_path``, or else the target's ``apiVersion``/``kind``; pass
    ``strategic_supported=False`` for objects that never accept them (custom resources).  The
    result must be an object.  ``target`` is not modified.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in PATCH_CONTENT_TYPES:
        accepted = PATCH_CONTENT_TYPES if strategic_supported else (JSON_PATCH, MERGE_PATCH)
        raise UnsupportedPatchType(media_type, accepted)
    schema: _Schema | None = None
    if media_type == STRATEGIC_MERGE_PATCH:
        if not strategic_supported:
            raise UnsupportedPatchType(media_type, (JSON_PATCH, MERGE_PATCH))
        schema = _schema_for(kind_path if kind_path is not None else kind_path_of(target))

    patch = _decode(patch_body)
    if media_type == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise PatchError(f"merge patch must be a JSON object, got {_type_name(patch)}")
        result = _merge_patch_in_place(_clone(target), patch)
    elif media_type == JSON_PATCH:
        result = _apply_json_patch_in_place(_clone(target), patch)
    else:
        assert schema is not None
        result = _apply_strategic_in_place(_clone(target), patch, schema)

    if not isinstance(result, dict):
        raise PatchError(
            f"the patched object must be a JSON object, got {_type_name(result)}", code=422
        )
    return result
