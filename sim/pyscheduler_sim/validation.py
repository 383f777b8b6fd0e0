"""Object validation with kube-apiserver's rules and error messages, for the embedded cluster.

Objects are validated in their JSON form (plain ``dict``/``list``/``str`` values) without
converting them to typed classes first; every check appends
:class:`pyscheduler.api.validation.FieldError` records (apimachinery's ``field.Error``).

Only the rules that matter to a scheduler simulation are implemented: object metadata, the
scheduling-relevant parts of pod specs (containers, resources, ports, tolerations, node
selectors, node affinity, names), node taints and capacity, and namespace finalizers. Volumes, probes,
security contexts, pod (anti-)affinity terms and update-time (immutability) rules are not validated.
The node selectors of PersistentVolumes and the topology terms of StorageClasses are
(:func:`validate_node_selector`, :func:`validate_topology_selector_term`), with CSI driver
names and volume paths (:func:`validate_csi_driver_name`, :func:`validate_path_no_backsteps`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction
from functools import lru_cache
from typing import Any

from pyscheduler.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    QuantityError,
    format_quantity,
    parse_quantity_with_format,
)
from pyscheduler.api.validation import (
    DUPLICATE,
    FieldError,
    MUST_BE_ARRAY,
    MUST_BE_BOOLEAN,
    MUST_BE_INTEGER,
    MUST_BE_NON_NEGATIVE,
    MUST_BE_OBJECT,
    MUST_BE_STRING,
    NameValidator,
    Verbatim,
    duplicate,
    go_quote,
    forbidden,
    invalid,
    invalid_each,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
    max_len_error,
    not_supported,
    required,
    validate_annotations,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_labels,
)

__all__ = [
    "validate_csi_driver_name",
    "validate_generic",
    "validate_namespace",
    "validate_node",
    "validate_node_selector",
    "validate_path_no_backsteps",
    "validate_object_meta",
    "validate_pod",
    "validate_pod_spec",
    "validate_resource_list",
    "validate_topology_selector_term",
]


# ---------------------------------------------------------------- object metadata

_STANDARD_FINALIZERS = frozenset(("kubernetes", "orphan", "foregroundDeletion"))


def _validate_finalizers(finalizers: object, path: str, kube: bool, errs: list[FieldError]) -> None:
    if finalizers is None:
        return
    if not isinstance(finalizers, list):
        errs.append(invalid(path, finalizers, MUST_BE_ARRAY))
        return
    for f in finalizers:
        if not isinstance(f, str):
            errs.append(invalid(path, f, MUST_BE_STRING))
            continue
        errs.extend(invalid_each(path, f, is_qualified_name(f)))
        if kube and "/" not in f and f not in _STANDARD_FINALIZERS:
            errs.append(invalid(path, f, "name is neither a standard finalizer name nor is it fully qualified"))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(invalid(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))


def _validate_owner_references(refs: object, path: str, errs: list[FieldError]) -> None:
    if refs is None:
        return
    if not isinstance(refs, list):
        errs.append(invalid(path, refs, MUST_BE_ARRAY))
        return
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            errs.append(invalid(path, ref, MUST_BE_OBJECT))
            continue
        api_version = ref.get("apiVersion") or ""
        kind = ref.get("kind") or ""
        parts = api_version.split("/") if isinstance(api_version, str) else ["", "", ""]
        group, version = (parts[0], parts[-1]) if len(parts) == 2 else ("", parts[0] if len(parts) == 1 else "")
        if not version:
            errs.append(invalid(path + ".apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.append(invalid(f"{path}.{key}", ref.get(key) or "", "must not be empty"))
        if kind == "Event" and not group and version == "v1":
            errs.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if controller:
                errs.append(invalid(path, refs, "Only one reference can have Controller set to true. "
                                                 f'Found "true" in references for {controller} and {current}'))
            else:
                controller = current


def validate_object_meta(
    meta: object,
    *,
    namespaced: bool,
    name_validator: NameValidator | None = validate_dns1123_subdomain,
    path: str = "metadata",
    kube_finalizers: bool = True,
) -> list[FieldError]:
    """``ValidateObjectMeta`` for a create: name/generateName, namespace, labels, annotations,
    ownerReferences and finalizers.

    ``name_validator(value, path)`` checks the name (``None``: only require one);
    ``kube_finalizers`` adds the core API's rule that unqualified finalizer names
    must be standard ones (``kubernetes``, ``orphan``, ``foregroundDeletion``).
    """
    errs: list[FieldError] = []
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        return [invalid(path, meta, MUST_BE_OBJECT)]
    name = meta.get("name") or ""
    gen = meta.get("generateName") or ""
    if not isinstance(gen, str):
        errs.append(invalid(path + ".generateName", gen, MUST_BE_STRING))
    elif gen and name_validator is not None:
        masked = gen[:-2] + "a" if len(gen) > 1 and gen.endswith("-") else gen
        errs.extend(replace(e, value=gen) for e in name_validator(masked, path + ".generateName"))
    if not name:
        errs.append(required(path + ".name", "name or generateName is required"))
    elif not isinstance(name, str):
        errs.append(invalid(path + ".name", name, MUST_BE_STRING))
    elif name_validator is not None:
        errs.extend(name_validator(name, path + ".name"))
    ns = meta.get("namespace") or ""
    if namespaced:
        if not ns:
            errs.append(required(path + ".namespace"))
        else:
            errs.extend(validate_dns1123_label(ns, path + ".namespace"))
    elif ns:
        errs.append(forbidden(path + ".namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if generation is not None:
        if not isinstance(generation, int) or isinstance(generation, bool):
            errs.append(invalid(path + ".generation", generation, MUST_BE_INTEGER))
        elif generation < 0:
            errs.append(invalid(path + ".generation", generation, MUST_BE_NON_NEGATIVE))
    if "labels" in meta:
        errs.extend(validate_labels(meta["labels"], path + ".labels"))
    if "annotations" in meta:
        errs.extend(validate_annotations(meta["annotations"], path + ".annotations"))
    _validate_owner_references(meta.get("ownerReferences"), path + ".ownerReferences", errs)
    _validate_finalizers(meta.get("finalizers"), path + ".finalizers", kube_finalizers, errs)
    return errs


# ---------------------------------------------------------------- resources

_STANDARD_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))
_STANDARD_RESOURCES = _STANDARD_CONTAINER_RESOURCES | frozenset((
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
    "limits.ephemeral-storage", "pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
    "persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers", "storage",
    "requests.storage",
))
_INTEGER_RESOURCES = frozenset((
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
))


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not _is_native(name) and not name.startswith("requests.") and not is_qualified_name("requests." + name)


@lru_cache(maxsize=1024)
def _resource_rules(name: str, container: bool) -> tuple[tuple[str, ...], bool, bool]:
    """(name error details, value must be an integer, request may differ from limit)."""
    errs = list(is_qualified_name(name))
    if not errs and "/" not in name and not (name in _STANDARD_RESOURCES or name.startswith(
            ("hugepages-", "requests.hugepages-"))):
        errs.append("must be a standard resource type or fully qualified")
    if container:
        if "/" not in name:
            if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                errs.append("must be a standard resource for containers")
        elif not _is_native(name) and not _is_extended(name):
            errs.append("doesn't follow extended resource name standard")
    integer = name in _INTEGER_RESOURCES or _is_extended(name)
    return tuple(errs), integer, _is_native(name) and not name.startswith("hugepages-")


def _quantity_text(q: Fraction, fmt: str) -> str:
    return format_quantity(q, fmt == BINARY_SI, exponent=fmt == DECIMAL_EXPONENT)


class UndecodableValue(ValueError):
    """A value kube-apiserver cannot even decode into its typed object (a quantity that does
    not parse): it answers 400 BadRequest, ``<Kind> in version "v1" cannot be handled as a
    <Kind>: <why>``, before any validation."""


RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"

# Go's RFC3339Micro layout, element by element: a literal, or (element, digits, fixed width,
# the range its value must lie in).
_MICRO_LAYOUT: tuple[tuple[str, int, bool, tuple[int, int] | None, str], ...] = (
    ("2006", 4, True, None, ""), ("-", 0, True, None, ""),
    ("01", 2, True, (1, 12), "month"), ("-", 0, True, None, ""),
    ("02", 2, True, (1, 31), "day"), ("T", 0, True, None, ""),
    ("15", 2, False, (0, 23), "hour"), (":", 0, True, None, ""),
    ("04", 2, True, (0, 59), "minute"), (":", 0, True, None, ""),
    ("05", 2, True, (0, 59), "second"))


def micro_time_error(text: str) -> str | None:
    """Why Go's ``time.Parse(RFC3339Micro, text)`` refuses ``text`` (a ``metav1.MicroTime``
    must carry exactly six fraction digits), in its words; None when it parses."""
    def cannot(rest: str, elem: str) -> str:
        return (f"parsing time {go_quote(text)} as \"{RFC3339_MICRO}\": cannot parse "
                f"{go_quote(rest)} as \"{elem}\"")

    value = text
    for elem, digits, fixed, bounds, name in _MICRO_LAYOUT:
        if digits == 0:
            if not value.startswith(elem):
                return cannot(value, elem)
            value = value[len(elem):]
            continue
        width = digits if fixed or (len(value) > 1 and value[1].isdigit()) else 1
        if len(value) < width or not value[:width].isdigit():
            return cannot(value, elem)
        number, value = int(value[:width]), value[width:]
        if bounds is not None and not bounds[0] <= number <= bounds[1]:
            return f"parsing time {go_quote(text)}: {name} out of range"
    if len(value) < 7 or value[0] not in ".," or not value[1:7].isdigit():
        return cannot(value, ".000000")
    value = value[7:]
    if value.startswith("Z"):
        value = value[1:]
    elif len(value) >= 6 and value[0] in "+-" and value[1:3].isdigit() and value[3] == ":" \
            and value[4:6].isdigit():
        value = value[6:]
    else:
        return cannot(value, "Z07:00")
    if value:
        return f"parsing time {go_quote(text)}: extra text: {go_quote(value)}"
    return None


def check_micro_times(obj: Any, *paths: tuple[str, ...]) -> None:
    """Raise :class:`UndecodableValue` for the first ``metav1.MicroTime`` at ``paths`` that
    kube-apiserver's decoder would refuse (a string it cannot parse, or not a string)."""
    for path in paths:
        value = obj
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        why = micro_time_error(value) if isinstance(value, str) else \
            "json: cannot unmarshal into Go value of type metav1.MicroTime"
        if why is not None:
            raise UndecodableValue(why)


def _resource_list(
    rl: object, path: str, container: bool, errs: list[FieldError], node_status: bool = False
) -> dict[str, tuple[Fraction, str]]:
    """Validate a resource list, returning the parsed quantities (with their formats) that parsed.

    ``node_status``: node capacity -- names unchecked, paths ``status.capacity.cpu``.
    """
    parsed: dict[str, tuple[Fraction, str]] = {}
    if rl is None:
        return parsed
    if not isinstance(rl, dict):
        errs.append(invalid(path, rl, MUST_BE_OBJECT))
        return parsed
    for name, raw in rl.items():
        p = f"{path}.{name}" if node_status else f"{path}[{name}]"
        name_errs, integer, _ = _resource_rules(name, container)
        if name_errs and not node_status:
            errs.extend(invalid(p, name, d) for d in name_errs)
        t = type(raw)
        if t is not str and t is not int and t is not float:
            errs.append(invalid(p, raw, "must be a quantity string or number"))
            continue
        try:
            q, fmt = parse_quantity_with_format(raw)
        except QuantityError as exc:
            raise UndecodableValue(str(exc)) from None
        parsed[name] = (q, fmt)
        if q.numerator < 0:
            errs.append(invalid(p, _quantity_text(q, fmt), MUST_BE_NON_NEGATIVE))
        if integer and q.denominator != 1:
            errs.append(invalid(p, Verbatim(_quantity_text(q, fmt)), MUST_BE_INTEGER))
    return parsed


def validate_resource_list(rl: object, path: str, *, container: bool = False) -> list[FieldError]:
    """Resource names must be standard or fully qualified, values valid non-negative quantities.

    Paths are keyed like Kubernetes' (``spec.overhead[cpu]``); ``container``
    applies the stricter rules for container requests and limits.
    """
    errs: list[FieldError] = []
    _resource_list(rl, path, container, errs)
    return errs


def _validate_resources(res: object, path: str, errs: list[FieldError]) -> None:
    """``ValidateContainerResourceRequirements``."""
    if res is None:
        return
    if not isinstance(res, dict):
        errs.append(invalid(path, res, MUST_BE_OBJECT))
        return
    lim_path, req_path = path + ".limits", path + ".requests"
    limits = _resource_list(res.get("limits"), lim_path, True, errs)
    requests = _resource_list(res.get("requests"), req_path, True, errs)
    hugepages = cpu_or_memory = False
    for name in limits:
        hugepages = hugepages or name.startswith("hugepages-")
        cpu_or_memory = cpu_or_memory or name in ("cpu", "memory")
    for name, (q, fmt) in requests.items():
        hugepages = hugepages or name.startswith("hugepages-")
        cpu_or_memory = cpu_or_memory or name in ("cpu", "memory")
        overcommit = _resource_rules(name, True)[2]
        lim = limits.get(name)
        if lim is not None:
            lq = lim[0]
            a, b = q.numerator * lq.denominator, lq.numerator * q.denominator
            if a != b and not overcommit:
                errs.append(invalid(req_path, _quantity_text(q, fmt),
                                    f"must be equal to {name} limit of {_quantity_text(*lim)}"))
            elif a > b:
                errs.append(invalid(req_path, _quantity_text(q, fmt),
                                    f"must be less than or equal to {name} limit of {_quantity_text(*lim)}"))
        elif not overcommit:
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
    if hugepages and not cpu_or_memory:
        errs.append(forbidden(path, "HugePages require cpu or memory"))


# ---------------------------------------------------------------- pods

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PORT_NAME_CHARS = re.compile("[-a-z0-9]+")
_INT32 = (-(2**31), 2**31 - 1)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _port_name_errors(name: str) -> list[str]:
    msgs = []
    if len(name) > 15:
        msgs.append(max_len_error(15))
    if not _PORT_NAME_CHARS.fullmatch(name):
        msgs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not any("a" <= c <= "z" for c in name):
        msgs.append("must contain at least one letter (a-z)")
    if "--" in name:
        msgs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        msgs.append("must not begin or end with a hyphen")
    return msgs


def _validate_ports(ports: object, path: str, errs: list[FieldError]) -> None:
    if ports is None:
        return
    if not isinstance(ports, list):
        errs.append(invalid(path, ports, MUST_BE_ARRAY))
        return
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = f"{path}[{i}]"
        if not isinstance(port, dict):
            errs.append(invalid(p, port, MUST_BE_OBJECT))
            continue
        name = port.get("name")
        if name:
            if not isinstance(name, str):
                errs.append(invalid(p + ".name", name, MUST_BE_STRING))
            elif m := _port_name_errors(name):
                errs.extend(invalid_each(p + ".name", name, m))
            elif name in names:
                errs.append(duplicate(p + ".name", name))
            else:
                names.add(name)
        cp = port.get("containerPort")
        if cp is None or cp == 0:
            errs.append(required(p + ".containerPort"))
        elif not _is_int(cp):
            errs.append(invalid(p + ".containerPort", cp, MUST_BE_INTEGER))
        elif not 1 <= cp <= 65535:
            errs.append(invalid(p + ".containerPort", cp, "must be between 1 and 65535, inclusive"))
        hp = port.get("hostPort")
        if hp is not None and hp != 0:
            if not _is_int(hp):
                errs.append(invalid(p + ".hostPort", hp, MUST_BE_INTEGER))
            elif not 1 <= hp <= 65535:
                errs.append(invalid(p + ".hostPort", hp, "must be between 1 and 65535, inclusive"))
        proto = port.get("protocol")
        if proto and proto not in _PROTOCOLS:
            errs.append(not_supported(p + ".protocol", proto, _PROTOCOLS))


def _validate_containers(
    ctrs: object, path: str, names: set[str], init: bool, errs: list[FieldError]
) -> None:
    if ctrs is None or ctrs == []:
        if not init:
            errs.append(required(path))
        return
    if not isinstance(ctrs, list):
        errs.append(invalid(path, ctrs, MUST_BE_ARRAY))
        return
    for i, c in enumerate(ctrs):
        p = f"{path}[{i}]"
        if not isinstance(c, dict):
            errs.append(invalid(p, c, MUST_BE_OBJECT))
            continue
        name = c.get("name") or ""
        if not isinstance(name, str):
            errs.append(invalid(p + ".name", name, MUST_BE_STRING))
        else:
            if not name:
                errs.append(required(p + ".name"))
            else:
                errs.extend(invalid_each(p + ".name", name, is_dns1123_label(name)))
            if name in names:
                errs.append(duplicate(p + ".name", name))
            else:
                names.add(name)
        image = c.get("image") or ""
        if not image:
            errs.append(required(p + ".image"))
        elif not isinstance(image, str):
            errs.append(invalid(p + ".image", image, MUST_BE_STRING))
        elif image.strip() != image:
            errs.append(invalid(p + ".image", image, "must not have leading or trailing whitespace"))
        _validate_ports(c.get("ports"), p + ".ports", errs)
        _validate_resources(c.get("resources"), p + ".resources", errs)


def _validate_tolerations(tols: object, path: str, errs: list[FieldError]) -> None:
    if tols is None:
        return
    if not isinstance(tols, list):
        errs.append(invalid(path, tols, MUST_BE_ARRAY))
        return
    for i, t in enumerate(tols):
        p = f"{path}[{i}]"
        if not isinstance(t, dict):
            errs.append(invalid(p, t, MUST_BE_OBJECT))
            continue
        key, op, val, effect = (t.get(k) or "" for k in ("key", "operator", "value", "effect"))
        if not all(isinstance(x, str) for x in (key, op, val, effect)):
            errs.append(invalid(p, t, "key, operator, value and effect must be strings"))
            continue
        if key:
            errs.extend(invalid_each(p + ".key", key, is_qualified_name(key)))
        elif op != "Exists":
            errs.append(invalid(p + ".operator", op,
                                'operator must be Exists when `key` is empty, which means "match all values and all keys"'))
        seconds = t.get("tolerationSeconds")
        if seconds is not None:
            if not _is_int(seconds):
                errs.append(invalid(p + ".tolerationSeconds", seconds, MUST_BE_INTEGER))
            if effect != "NoExecute":
                errs.append(invalid(p + ".effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            if m := is_valid_label_value(val):
                errs.append(invalid(p + ".operator", val, ";".join(m)))
        elif op == "Exists":
            if val:
                errs.append(invalid(p + ".operator", t, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(p + ".operator", op, ("Equal", "Exists")))
        if effect and effect not in _TAINT_EFFECTS:
            errs.append(not_supported(p + ".effect", effect, _TAINT_EFFECTS))


def _validate_optional_name(spec: dict[str, Any], key: str, path: str, errs: list[FieldError]) -> None:
    v = spec.get(key)
    if v:
        errs.extend(validate_dns1123_subdomain(v, f"{path}.{key}"))


def validate_long_running_template(pod_spec: object, kind: str) -> list[FieldError]:
    """What a controller of long-running pods (DaemonSet, StatefulSet, ReplicationController)
    requires of its pod template: ``restartPolicy: Always`` and no
    ``activeDeadlineSeconds``."""
    errs: list[FieldError] = []
    if isinstance(pod_spec, dict):
        if pod_spec.get("restartPolicy") != "Always":
            errs.append(not_supported("spec.template.spec.restartPolicy",
                                      pod_spec.get("restartPolicy"), ("Always",)))
        if pod_spec.get("activeDeadlineSeconds") is not None:
            errs.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                                  f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


def validate_pod_spec(spec: object, path: str = "spec") -> list[FieldError]:
    """The scheduling-relevant parts of ``ValidatePodSpec``."""
    errs: list[FieldError] = []
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        return [invalid(path, spec, MUST_BE_OBJECT)]
    names: set[str] = set()
    _validate_containers(spec.get("containers"), path + ".containers", names, False, errs)
    _validate_containers(spec.get("initContainers"), path + ".initContainers", names, True, errs)
    rp = spec.get("restartPolicy")
    if rp and rp not in _RESTART_POLICIES:
        errs.append(not_supported(path + ".restartPolicy", rp, _RESTART_POLICIES))
    if "nodeSelector" in spec:
        errs.extend(validate_labels(spec["nodeSelector"], path + ".nodeSelector"))
    for key in ("serviceAccountName", "nodeName", "priorityClassName", "schedulerName"):
        _validate_optional_name(spec, key, path, errs)
    host_network = spec.get("hostNetwork")
    if host_network is not None and not isinstance(host_network, bool):
        errs.append(invalid(path + ".hostNetwork", host_network, MUST_BE_BOOLEAN))
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None:
        if not _is_int(ads):
            errs.append(invalid(path + ".activeDeadlineSeconds", ads, MUST_BE_INTEGER))
        elif not 1 <= ads <= _INT32[1]:
            errs.append(invalid(path + ".activeDeadlineSeconds", ads, f"must be between 1 and {_INT32[1]}, inclusive"))
    prio = spec.get("priority")
    if prio is not None:
        if not _is_int(prio):
            errs.append(invalid(path + ".priority", prio, MUST_BE_INTEGER))
        elif not _INT32[0] <= prio <= _INT32[1]:
            errs.append(invalid(path + ".priority", prio, f"must be between {_INT32[0]} and {_INT32[1]}, inclusive"))
    _validate_tolerations(spec.get("tolerations"), path + ".tolerations", errs)
    _validate_node_affinity(spec.get("affinity"), path + ".affinity", errs)
    if spec.get("overhead") is not None:
        _validate_resources({"limits": spec["overhead"]}, path + ".overhead", errs)
    return errs


def _split(obj: object) -> tuple[object, object, list[FieldError]]:
    if not isinstance(obj, dict):
        return None, None, [invalid("", obj, MUST_BE_OBJECT)]
    return obj.get("metadata"), obj.get("spec"), []


def validate_pod(obj: object) -> list[FieldError]:
    """``ValidatePodCreate``: namespaced metadata with a DNS-subdomain name, then the spec."""
    meta, spec, errs = _split(obj)
    if errs:
        return errs
    return validate_object_meta(meta, namespaced=True) + validate_pod_spec(spec)


def validate_node(obj: object) -> list[FieldError]:
    """``ValidateNode``: cluster-scoped metadata, taints, and capacity/allocatable quantities."""
    meta, spec, errs = _split(obj)
    if errs:
        return errs
    errs = validate_object_meta(meta, namespaced=False)
    if spec is not None and not isinstance(spec, dict):
        errs.append(invalid("spec", spec, MUST_BE_OBJECT))
    elif spec:
        if spec.get("unschedulable") is not None and not isinstance(spec["unschedulable"], bool):
            errs.append(invalid("spec.unschedulable", spec["unschedulable"], MUST_BE_BOOLEAN))
        taints = spec.get("taints")
        if taints is not None and not isinstance(taints, list):
            errs.append(invalid("spec.taints", taints, MUST_BE_ARRAY))
        elif taints:
            seen: set[tuple[str, str]] = set()
            for i, t in enumerate(taints):
                p = f"spec.taints[{i}]"
                if not isinstance(t, dict):
                    errs.append(invalid(p, t, MUST_BE_OBJECT))
                    continue
                key, val, effect = (t.get(k) or "" for k in ("key", "value", "effect"))
                if not all(isinstance(x, str) for x in (key, val, effect)):
                    errs.append(invalid(p, t, "key, value and effect must be strings"))
                    continue
                errs.extend(invalid_each(p + ".key", key, is_qualified_name(key)))
                if m := is_valid_label_value(val):
                    errs.append(invalid(p + ".value", val, ";".join(m)))
                if not effect:
                    errs.append(required(p + ".effect"))
                elif effect not in _TAINT_EFFECTS:
                    errs.append(not_supported(p + ".effect", effect, _TAINT_EFFECTS))
                if (key, effect) in seen:
                    errs.append(FieldError(DUPLICATE, p, t, "taints must be unique by key and effect pair"))
                else:
                    seen.add((key, effect))
    status = obj.get("status") if isinstance(obj, dict) else None
    if isinstance(status, dict):
        for key in ("capacity", "allocatable"):
            _resource_list(status.get(key), f"status.{key}", False, errs, node_status=True)
    return errs


def validate_namespace(obj: object) -> list[FieldError]:
    """``ValidateNamespace``: a DNS-1123 label name and valid ``spec.finalizers``."""
    meta, spec, errs = _split(obj)
    if errs:
        return errs
    errs = validate_object_meta(meta, namespaced=False, name_validator=validate_dns1123_label)
    if spec is not None and not isinstance(spec, dict):
        errs.append(invalid("spec", spec, MUST_BE_OBJECT))
    elif spec:
        fins = spec.get("finalizers")
        if fins is not None:
            _validate_finalizers(fins, "spec.finalizers", True, errs)
    return errs


def validate_generic(
    obj: object, namespaced: bool, *, name_validator: NameValidator | None = validate_dns1123_subdomain
) -> list[FieldError]:
    """Metadata-only validation for any other resource.

    The core API's finalizer rule applies when ``apiVersion`` is ``v1``.
    """
    meta, _, errs = _split(obj)
    if errs:
        return errs
    core = isinstance(obj, dict) and obj.get("apiVersion") == "v1"
    return validate_object_meta(meta, namespaced=namespaced, name_validator=name_validator, kube_finalizers=core)


# ---------------------------------------------------------------- node selectors and topology

_NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _validate_label_name(key: object, path: str, errs: list[FieldError]) -> None:
    """``ValidateLabelName``: a qualified name."""
    if not isinstance(key, str):
        errs.append(invalid(path, key, MUST_BE_STRING))
    else:
        errs.extend(invalid_each(path, key, is_qualified_name(key)))


def _string_list(values: object) -> list[Any]:
    return values if isinstance(values, list) else []


def _validate_node_selector_requirement(req: dict[str, Any], path: str,
                                        errs: list[FieldError]) -> None:
    """``ValidateNodeSelectorRequirement`` (label values checked, as for new objects)."""
    op, values = req.get("operator"), _string_list(req.get("values"))
    if op in ("In", "NotIn"):
        if not values:
            errs.append(required(path + ".values",
                                 "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errs.append(forbidden(path + ".values", "may not be specified when `operator` is "
                                                    "'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(required(path + ".values", "must be specified single value when "
                                                   "`operator` is 'Lt' or 'Gt'"))
    else:
        errs.append(invalid(path + ".operator", op or "", "not a valid selector operator"))
    _validate_label_name(req.get("key") or "", path + ".key", errs)
    for i, value in enumerate(values):
        if isinstance(value, str):
            errs.extend(invalid_each(f"{path}.values[{i}]", value, is_valid_label_value(value)))


def _validate_node_field_requirement(req: dict[str, Any], path: str,
                                     errs: list[FieldError]) -> None:
    """``ValidateNodeFieldSelectorRequirement``: only ``metadata.name``, one value."""
    op, values = req.get("operator"), _string_list(req.get("values"))
    if op in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(required(path + ".values", "must be only one value when `operator` is "
                                                   "'In' or 'NotIn' for node field selector"))
    else:
        errs.append(invalid(path + ".operator", op or "", "not a valid selector operator"))
    if req.get("key") != "metadata.name":
        errs.append(invalid(path + ".key", req.get("key") or "", "not a valid field selector key"))
    else:
        for i, value in enumerate(values):
            errs.extend(validate_dns1123_subdomain(value, f"{path}.values[{i}]"))


def validate_node_selector(selector: object, path: str) -> list[FieldError]:
    """``ValidateNodeSelector``: at least one term; each term's requirements."""
    errs: list[FieldError] = []
    if not isinstance(selector, dict):
        return [invalid(path, selector, MUST_BE_OBJECT)]
    terms = selector.get("nodeSelectorTerms")
    if not terms or not isinstance(terms, list):
        return [required(path + ".nodeSelectorTerms",
                         "must have at least one node selector term")]
    for i, term in enumerate(terms):
        p = f"{path}.nodeSelectorTerms[{i}]"
        if not isinstance(term, dict):
            errs.append(invalid(p, term, MUST_BE_OBJECT))
            continue
        errs.extend(_term_errors(term, p))
    return errs


def _validate_node_affinity(affinity: object, path: str, errs: list[FieldError]) -> None:
    """``validateAffinity``'s node part: the required selector as ``ValidateNodeSelector``,
    each preferred term's weight (1-100) and preference."""
    if not isinstance(affinity, dict) or not isinstance(affinity.get("nodeAffinity"), dict):
        return
    node = affinity["nodeAffinity"]
    path += ".nodeAffinity"
    required_terms = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required_terms is not None:
        errs.extend(validate_node_selector(required_terms,
                                           path + ".requiredDuringSchedulingIgnoredDuringExecution"))
    for i, term in enumerate(_string_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        p = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not isinstance(term, dict):
            errs.append(invalid(p, term, MUST_BE_OBJECT))
            continue
        weight: Any = term.get("weight")
        if not _is_int(weight) or not 1 <= weight <= 100:
            errs.append(invalid(p + ".weight", weight, "must be in the range 1-100"))
        preference = term.get("preference") or {}
        if isinstance(preference, dict):
            errs.extend(_term_errors(preference, p + ".preference"))


def _term_errors(term: dict[str, Any], path: str) -> list[FieldError]:
    """``ValidateNodeSelectorTerm`` of one term at ``path``."""
    errs: list[FieldError] = []
    for j, req in enumerate(_string_list(term.get("matchExpressions"))):
        if isinstance(req, dict):
            _validate_node_selector_requirement(req, f"{path}.matchExpressions[{j}]", errs)
        else:
            errs.append(invalid(f"{path}.matchExpressions[{j}]", req, MUST_BE_OBJECT))
    for j, req in enumerate(_string_list(term.get("matchFields"))):
        if isinstance(req, dict):
            _validate_node_field_requirement(req, f"{path}.matchFields[{j}]", errs)
        else:
            errs.append(invalid(f"{path}.matchFields[{j}]", req, MUST_BE_OBJECT))
    return errs


def validate_topology_selector_term(term: object, path: str,
                                    errs: list[FieldError]) -> dict[str, frozenset[str]]:
    """``ValidateTopologySelectorTerm``; returns the term as key -> values, for the duplicate
    check of StorageClass ``allowedTopologies``."""
    found: dict[str, frozenset[str]] = {}
    if not isinstance(term, dict):
        errs.append(invalid(path, term, MUST_BE_OBJECT))
        return found
    for i, req in enumerate(_string_list(term.get("matchLabelExpressions"))):
        p = f"{path}.matchLabelExpressions[{i}]"
        if not isinstance(req, dict):
            errs.append(invalid(p, req, MUST_BE_OBJECT))
            continue
        values = _string_list(req.get("values"))
        if not values:
            errs.append(required(p + ".values"))
        seen: set[Any] = set()
        for j, value in enumerate(values):
            if value in seen:
                errs.append(duplicate(f"{p}.values[{j}]", value))
            seen.add(value)
        key = req.get("key") or ""
        _validate_label_name(key, p + ".key", errs)
        if key in found:
            errs.append(duplicate(p + ".key", key))
        found[str(key)] = frozenset(str(x) for x in seen)
    return found


def validate_csi_driver_name(name: object, path: str) -> list[FieldError]:
    """``ValidateCSIDriverName``: a DNS subdomain once lowercased, at most 63 characters."""
    if not isinstance(name, str):
        return [invalid(path, name, MUST_BE_STRING)]
    errs: list[FieldError] = []
    if not name:
        errs.append(required(path))
    if len(name) > 63:
        errs.append(FieldError("FieldValueTooLong", path, name, "must have at most 63 bytes"))
    errs.extend(invalid_each(path, name, is_dns1123_subdomain(name.lower())))
    return errs


def validate_path_no_backsteps(value: str, path: str) -> list[FieldError]:
    """``validatePathNoBacksteps``."""
    if ".." in value.split("/"):
        return [invalid(path, value, "must not contain '..'")]
    return []
