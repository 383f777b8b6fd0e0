"""Server-side ``meta.k8s.io/v1`` Table rendering for the embedded API server.

``kubectl get`` does not format resources itself: it sends
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints whatever
columns the server returns (hiding ``priority > 0`` columns unless ``-o wide``).
``kubectl get -w`` does the same for every watch event, each carrying a
one-row Table.  To look like a real cluster the embedded server therefore has
to produce the very columns and cells kube-apiserver produces.  This module is
that converter; it is pure (no I/O, no clock unless ``now`` is omitted) and
works on plain JSON-shaped ``dict`` objects as stored by the simulator.

Design
------
kube-apiserver has three kinds of table convertors, mirrored here:

* **Built-in printers** (``pkg/printers/internalversion``): a fixed list of
  column definitions per resource plus a function turning one object into one
  row.  They live in ``_PRINTERS`` keyed by ``(group, plural)``.  The API server
  always prints with ``Wide: true``, so every row carries the cells of the
  ``priority: 1`` columns too.  Kubernetes prints *internal* objects, i.e.
  after defaulting and after conversion from the served version; where the
  simulator may hand us an object that was never defaulted (an absent pod
  phase, deployment replica count, service type, ...) the printer applies the
  same default the real server would have stored, so the output matches.
  ``events.k8s.io`` events are mapped onto the ``core/v1`` field names (the
  same conversion kube performs) and printed by the same printer.
* **Custom resources** (``apiextensions-apiserver`` ``tableconvertor``): the
  ``Name`` column followed by the CRD version's ``additionalPrinterColumns``;
  a CRD that declares none gets a single ``Age`` column (type ``date``, path
  ``.metadata.creationTimestamp``).  Every ``jsonPath`` is evaluated by a small
  re-implementation of client-go's JSONPath (fields, ``['key']``, indexes and
  slices, ``[*]``/``.*``, ``..`` recursive descent, unions and ``[?(...)]``
  filters) with the same quirks kube has: missing keys give an empty cell
  (``None``), only the *first* match is used for a cell (so ``.a[*].b`` shows
  the first element, exactly as kube-apiserver does), ``string`` columns render
  non-strings as Go would (maps/lists as compact JSON, ``null`` as
  ``<no value>``), ``integer``/``number``/``boolean`` cells stay typed and
  ``date`` cells become human ages (``5m``, ``<unknown>``, ``<invalid>``).  A
  column whose path is a JSONPath syntax error ends the column list there, as
  it does in kube; valid syntax this evaluator does not implement (``range``)
  keeps the column with empty cells.
* **The default convertor** (``k8s.io/apiserver/pkg/registry/rest``): ``Name``
  and ``Created At`` (type ``date``, cell an RFC 3339 UTC string).  It is used
  for every other resource, including ``customresourcedefinitions``.

Ages use ``human_duration``, reproducing apimachinery's
``duration.HumanDuration`` (``5s``, ``2m3s``, ``10m``, ``3h4m``, ``5d``,
``2y3d``...).  Timestamps are RFC 3339 strings (fractional seconds and
offsets accepted); an absent or zero timestamp renders as ``<unknown>``.

Public API: ``to_table`` builds the whole Table dict, ``column_definitions``
returns just the column definitions (handy for watch streams), and
``human_duration`` formats a duration.  Which convertor is used: a built-in
printer when ``(group, plural)`` has one; otherwise the custom-resource
convertor when ``printer_columns`` is given (pass ``[]`` for a CRD without
``additionalPrinterColumns``); otherwise the default table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Final, NoReturn, Union

from pyscheduler.api.quantity import QuantityError, canonical_quantity

__all__ = ["column_definitions", "human_duration", "to_table"]

JSON = Any
"""A decoded JSON value (dict, list, str, int, float, bool or None)."""

Cell = Union[str, int, float, bool, None]
"""One table cell, as kube-apiserver serialises it."""

_UTC: Final = timezone.utc

# ---------------------------------------------------------------------------
# Durations and timestamps
# ---------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """Format a duration the way Kubernetes' ``duration.HumanDuration`` does.

    It gives two or three significant figures: ``45s``, ``119s``, ``2m3s``,
    ``10m``, ``179m``, ``3h4m``, ``12h``, ``5d3h``, ``30d``, ``2y3d``,
    ``9y``.  Up to one second in the future reads ``0s`` (clock skew); more
    than that is ``<invalid>``.
    """
    if not math.isfinite(seconds):
        return "<invalid>"
    whole = math.trunc(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = int(seconds // 60)
    if minutes < 10:
        secs = whole % 60
        return f"{minutes}m" if secs == 0 else f"{minutes}m{secs}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = int(seconds // 3600)
    if hours < 8:
        mins = minutes % 60
        return f"{hours}h" if mins == 0 else f"{hours}h{mins}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


_RFC3339_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:\d{2})"
)


def _parse_time(value: object) -> datetime | None:
    """Parse an RFC 3339 timestamp; ``None`` for absent/empty/zero values.

    Raises ``ValueError`` for a malformed string.  ``datetime`` instances are
    accepted too (naive ones are taken as UTC).
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value if value.tzinfo is not None else value.replace(tzinfo=_UTC)
    elif isinstance(value, str):
        if value in ("", "null"):
            return None
        match = _RFC3339_RE.fullmatch(value)
        if match is None:
            raise ValueError(f"not an RFC 3339 timestamp: {value!r}")
        year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
        fraction = match.group(7) or ""
        micros = int((fraction + "000000")[:6]) if fraction else 0
        zone = match.group(8)
        offset = timedelta(0)
        if zone != "Z":
            hh, mm = int(zone[1:3]), int(zone[4:6])
            if hh > 23 or mm > 59:
                raise ValueError(f"bad zone offset in {value!r}")
            offset = timedelta(hours=hh, minutes=mm) * (1 if zone[0] == "+" else -1)
        parsed = datetime(
            year, month, day, hour, minute, second, micros, tzinfo=timezone(offset)
        )
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    parsed = parsed.astimezone(_UTC)
    if parsed == datetime(1, 1, 1, tzinfo=_UTC):
        return None  # Go's zero time.Time
    return parsed


def _lenient_time(value: object) -> datetime | None:
    """Like ``_parse_time`` but treats malformed values as absent."""
    try:
        return _parse_time(value)
    except (ValueError, OverflowError, OSError):
        return None


def _since(value: object, now: datetime) -> str:
    """Age of a metadata-style timestamp (``translateTimestampSince``)."""
    stamp = _lenient_time(value)
    if stamp is None:
        return "<unknown>"
    return human_duration((now - stamp).total_seconds())


def _rfc3339(value: object) -> str:
    """``Time.UTC().Format(time.RFC3339)``; Go's zero time when absent."""
    stamp = _lenient_time(value)
    if stamp is None:
        return "0001-01-01T00:00:00Z"
    return (
        f"{stamp.year:04d}-{stamp.month:02d}-{stamp.day:02d}"
        f"T{stamp.hour:02d}:{stamp.minute:02d}:{stamp.second:02d}Z"
    )


# ---------------------------------------------------------------------------
# Small accessors for JSON-shaped objects
# ---------------------------------------------------------------------------

_EMPTY: Final[Mapping[str, Any]] = {}


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _opt_map(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _list(value: object) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return default


def _get(obj: object, *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _name(obj: Mapping[str, Any]) -> str:
    return _str(_get(obj, "metadata", "name"))


def _age(obj: Mapping[str, Any], now: datetime) -> str:
    return _since(_get(obj, "metadata", "creationTimestamp"), now)


def _int_or_string(value: object) -> str:
    """``intstr.IntOrString.String()``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return _str(value)


# ---------------------------------------------------------------------------
# Labels and selectors (labels.FormatLabels, metav1.LabelSelectorAsSelector)
# ---------------------------------------------------------------------------

_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)


def _valid_label_key(key: str) -> bool:
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME_RE.fullmatch(name) is not None


def _valid_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _QUALIFIED_NAME_RE.fullmatch(value) is not None)


def _format_labels(labels: object) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    pairs = sorted(f"{k}={_str(v)}" for k, v in _map(labels).items())
    return ",".join(pairs) or "<none>"


def _selector_string(selector: object) -> str:
    """``LabelSelectorAsSelector(sel).String()``; raises ``ValueError`` if invalid."""
    if not isinstance(selector, Mapping):
        return ""  # labels.Nothing()
    match_labels = _map(selector.get("matchLabels"))
    expressions = _list(selector.get("matchExpressions"))
    if not match_labels and not expressions:
        return ""  # labels.Everything()
    requirements: list[tuple[str, str]] = []
    for key, value in match_labels.items():
        value = _str(value)
        if not _valid_label_key(key) or not _valid_label_value(value):
            raise ValueError("invalid label selector")
        requirements.append((key, f"{key}={value}"))
    for expr in expressions:
        expr = _map(expr)
        key, operator = _str(expr.get("key")), _str(expr.get("operator"))
        values = [_str(v) for v in _list(expr.get("values"))]
        if not _valid_label_key(key) or not all(_valid_label_value(v) for v in values):
            raise ValueError("invalid label selector")
        if operator in ("In", "NotIn"):
            if not values:
                raise ValueError("in/notin need values")
            joined = values[0] if len(values) == 1 else ",".join(sorted(values))
            word = "in" if operator == "In" else "notin"
            requirements.append((key, f"{key} {word} ({joined})"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                raise ValueError("exists/doesnotexist take no values")
            requirements.append((key, key if operator == "Exists" else f"!{key}"))
        else:
            raise ValueError(f"{operator!r} is not a valid label selector operator")
    requirements.sort(key=lambda item: item[0])
    return ",".join(text for _, text in requirements)


def _format_label_selector(selector: object) -> str:
    """``metav1.FormatLabelSelector``: ``<none>`` when empty, ``<error>`` if invalid."""
    try:
        text = _selector_string(selector)
    except ValueError:
        return "<error>"
    return text or "<none>"


def _container_cells(pod_spec: object) -> tuple[str, str]:
    """``layoutContainerCells``: comma-joined container names and images."""
    containers = [_map(c) for c in _list(_map(pod_spec).get("containers"))]
    names = ",".join(_str(c.get("name")) for c in containers)
    images = ",".join(_str(c.get("image")) for c in containers)
    return names, images


# ---------------------------------------------------------------------------
# Column definitions
# ---------------------------------------------------------------------------


def _col(
    name: str, type_: str, description: str, *, fmt: str = "", priority: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_DOC_NAME: Final = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_DOC_CREATED: Final = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_DOC_CONTAINERS: Final = "Names of each container in the template."
_DOC_IMAGES: Final = "Images referenced by each container in the template."
_DOC_NODE_ADDRESSES: Final = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More "
    "info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is "
    "declared as mergeable, but the merge key is not sufficiently unique, which can cause data "
    "corruption when it is merged. Callers should instead use a full-replacement patch. See "
    "https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change "
    "during the lifetime of a Node. However, there are some exceptions where this may not be "
    "possible, such as Pods that inherit a Node's address in its own status or consumers of "
    "the downward API (status.hostIP)."
)
_DOC_RS_REPLICAS: Final = (
    "Replicas is the number of desired pods. This is a pointer to distinguish between explicit "
    "zero and unspecified. Defaults to 1. More info: "
    "https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
)
_DOC_DS_SELECTOR: Final = (
    "A label query over pods that are managed by the daemon set. Must match in order to be "
    "controlled. If empty, defaulted to labels on Pod template. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
)


def _name_col(priority: int = 0) -> dict[str, Any]:
    return _col("Name", "string", _DOC_NAME, fmt="name", priority=priority)


def _age_col() -> dict[str, Any]:
    return _col("Age", "string", _DOC_CREATED)


_POD_COLUMNS: Final = (
    _name_col(),
    _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "string", "The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the "
        "last container in this pod has restarted.",
    ),
    _age_col(),
    _col(
        "IP",
        "string",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if "
        "not yet allocated.",
        priority=1,
    ),
    _col(
        "Node",
        "string",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a "
        "candidate for scheduling by the scheduler defined in schedulerName. Once this field "
        "is set, the kubelet for this node becomes responsible for the lifecycle of this pod. "
        "This field should not be used to express a desire for the pod to be scheduled on a "
        "specific node. "
        "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        priority=1,
    ),
    _col(
        "Nominated Node",
        "string",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it "
        "cannot be scheduled right away as preemption victims receive their graceful "
        "termination periods. This field does not guarantee that the pod will be scheduled on "
        "this node. Scheduler may decide to place the pod elsewhere if other nodes become "
        "available sooner. Scheduler may also decide to give the resources on this node to a "
        "higher priority pod that is created after preemption. As a result, this field may be "
        "different than PodSpec.nodeName when the pod is scheduled.",
        priority=1,
    ),
    _col(
        "Readiness Gates",
        "string",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready "
        "when all its containers are ready AND all conditions specified in the readiness gates "
        'have status equal to "True" More info: '
        "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
        priority=1,
    ),
)

_NODE_COLUMNS: Final = (
    _name_col(),
    _col("Status", "string", "The status of the node"),
    _col("Roles", "string", "The roles of the node"),
    _age_col(),
    _col("Version", "string", "Kubelet Version reported by the node."),
    _col("Internal-IP", "string", _DOC_NODE_ADDRESSES, priority=1),
    _col("External-IP", "string", _DOC_NODE_ADDRESSES, priority=1),
    _col(
        "OS-Image",
        "string",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        priority=1,
    ),
    _col(
        "Kernel-Version",
        "string",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        priority=1,
    ),
    _col(
        "Container-Runtime",
        "string",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
        "containerd://1.4.2).",
        priority=1,
    ),
)

_NAMESPACE_COLUMNS: Final = (
    _name_col(),
    _col("Status", "string", "The status of the namespace"),
    _age_col(),
)

_EVENT_COLUMNS: Final = (
    _col(
        "Last Seen",
        "string",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    _col(
        "Type",
        "string",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    _col(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    _col("Object", "string", "The object that this event is about."),
    _col(
        "Subobject",
        "string",
        "If referring to a piece of an object instead of an entire object, this string should "
        "contain a valid JSON/Go field access statement, such as "
        "desiredState.manifest.containers[2]. For example, if the object reference is to a "
        'container within a pod, this would take on a value like: "spec.containers{name}" '
        '(where "name" refers to the name of the container that triggered the event) or if no '
        'container name is specified "spec.containers[2]" (container with index 2 in this '
        "pod). This syntax is chosen only to have some well-defined way of referencing a part "
        "of an object.",
        priority=1,
    ),
    _col(
        "Source",
        "string",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    _col("Message", "string", "A human-readable description of the status of this operation."),
    _col(
        "First Seen",
        "string",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        priority=1,
    ),
    _col("Count", "string", "The number of times this event has occurred.", priority=1),
    _name_col(priority=1),
)

_DEPLOYMENT_COLUMNS: Final = (
    _name_col(),
    _col("Ready", "string", "Number of the pod with ready state"),
    _col(
        "Up-to-date",
        "string",
        "Total number of non-terminating pods targeted by this deployment that have the "
        "desired template spec.",
    ),
    _col(
        "Available",
        "string",
        "Total number of available non-terminating pods (ready for at least minReadySeconds) "
        "targeted by this deployment.",
    ),
    _age_col(),
    _col("Containers", "string", _DOC_CONTAINERS, priority=1),
    _col("Images", "string", _DOC_IMAGES, priority=1),
    _col(
        "Selector",
        "string",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be "
        "the ones affected by this deployment.",
        priority=1,
    ),
)

_REPLICASET_COLUMNS: Final = (
    _name_col(),
    _col("Desired", "integer", _DOC_RS_REPLICAS),
    _col(
        "Current",
        "integer",
        "Replicas is the most recently observed number of non-terminating pods. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    _col(
        "Ready",
        "integer",
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
    ),
    _age_col(),
    _col("Containers", "string", _DOC_CONTAINERS, priority=1),
    _col("Images", "string", _DOC_IMAGES, priority=1),
    _col(
        "Selector",
        "string",
        "Selector is a label query over pods that should match the replica count. If the "
        "selector is empty, it is defaulted to the labels present on the pod template. Label "
        "keys and values that must match in order to be controlled by this replica set. More "
        "info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/"
        "#label-selectors",
        priority=1,
    ),
)

_REPLICATIONCONTROLLER_COLUMNS: Final = (
    _name_col(),
    _col(
        "Desired",
        "integer",
        "Replicas is the number of desired replicas. This is a pointer to distinguish between "
        "explicit zero and unspecified. Defaults to 1. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller"
        "#what-is-a-replicationcontroller",
    ),
    _col(
        "Current",
        "integer",
        "Replicas is the most recently observed number of replicas. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller"
        "#what-is-a-replicationcontroller",
    ),
    _col("Ready", "integer", "The number of ready replicas for this replication controller."),
    _age_col(),
    _col("Containers", "string", _DOC_CONTAINERS, priority=1),
    _col("Images", "string", _DOC_IMAGES, priority=1),
    _col(
        "Selector",
        "string",
        "Selector is a label query over pods that should match the Replicas count. If Selector "
        "is empty, it is defaulted to the labels present on the Pod template. Label keys and "
        "values that must match in order to be controlled by this replication controller, if "
        "empty defaulted to labels on Pod template. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/"
        "#label-selectors",
        priority=1,
    ),
)

_DAEMONSET_COLUMNS: Final = (
    _name_col(),
    _col(
        "Desired",
        "integer",
        "The total number of nodes that should be running the daemon pod (including nodes "
        "correctly running the daemon pod). More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    _col(
        "Current",
        "integer",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run "
        "the daemon pod. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    _col(
        "Ready",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the "
        "daemon pod running and ready.",
    ),
    _col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
    _col(
        "Available",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the "
        "daemon pod running and available (ready for at least spec.minReadySeconds)",
    ),
    _col(
        "Node Selector",
        "string",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector "
        "which must match a node's labels for the pod to be scheduled on that node. More info: "
        "https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    _age_col(),
    _col("Containers", "string", _DOC_CONTAINERS, priority=1),
    _col("Images", "string", _DOC_IMAGES, priority=1),
    _col("Selector", "string", _DOC_DS_SELECTOR, priority=1),
)

_STATEFULSET_COLUMNS: Final = (
    _name_col(),
    _col("Ready", "string", "Number of the pod with ready state"),
    _age_col(),
    _col("Containers", "string", _DOC_CONTAINERS, priority=1),
    _col("Images", "string", _DOC_IMAGES, priority=1),
)

_JOB_COLUMNS: Final = (
    _name_col(),
    _col("Status", "string", "Status of the job."),
    _col(
        "Completions",
        "string",
        "The number of pods which reached phase Succeeded. The value increases monotonically "
        "for a given spec. However, it may decrease in reaction to scale down of elastic "
        "indexed jobs.",
    ),
    _col("Duration", "string", "Time required to complete the job."),
    _age_col(),
    _col("Containers", "string", _DOC_CONTAINERS, priority=1),
    _col("Images", "string", _DOC_IMAGES, priority=1),
    _col(
        "Selector",
        "string",
        "A label query over pods that should match the pod count. Normally, the system sets "
        "this field for you. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        priority=1,
    ),
)

_LEASE_COLUMNS: Final = (
    _name_col(),
    _col(
        "Holder",
        "string",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated "
        "Leader Election is used, the holder identity must be equal to the elected "
        "LeaseCandidate.metadata.name field.",
    ),
    _age_col(),
)

_PDB_COLUMNS: Final = (
    _name_col(),
    _col("Min Available", "string", "The minimum number of pods that must be available."),
    _col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
    _col(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    _age_col(),
)

_CONFIGMAP_COLUMNS: Final = (
    _name_col(),
    _col(
        "Data",
        "string",
        "Data contains the configuration data. Each key must consist of alphanumeric "
        "characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the "
        "BinaryData field. The keys stored in Data must not overlap with the keys in the "
        "BinaryData field, this is enforced during validation process.",
    ),
    _age_col(),
)

_SECRET_COLUMNS: Final = (
    _name_col(),
    _col(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    _col(
        "Data",
        "string",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', "
        "'_' or '.'. The serialized form of the secret data is a base64 encoded string, "
        "representing the arbitrary (possibly non-string) data value here. Described in "
        "https://tools.ietf.org/html/rfc4648#section-4",
    ),
    _age_col(),
)

_SERVICEACCOUNT_COLUMNS: Final = (
    _name_col(),
    _col(
        "Secrets",
        "string",
        "Secrets is a list of the secrets in the same namespace that pods running using this "
        "ServiceAccount are allowed to use. Pods are only limited to this list if this service "
        'account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". The '
        '"kubernetes.io/enforce-mountable-secrets" annotation is deprecated since v1.32. Prefer '
        "separate namespaces to isolate access to mounted secrets. This field should not be "
        "used to find auto-generated service account token secrets for use outside of pods. "
        "Instead, tokens can be requested directly using the TokenRequest API, or service "
        "account token secrets can be manually created. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret",
    ),
    _age_col(),
)

_SERVICE_COLUMNS: Final = (
    _name_col(),
    _col(
        "Type",
        "string",
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are "
        'ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a '
        "cluster-internal IP address for load-balancing to endpoints. Endpoints are determined "
        "by the selector or if that is not specified, by manual construction of an Endpoints "
        'object or EndpointSlice objects. If clusterIP is "None", no virtual IP is allocated '
        "and the endpoints are published as a set of endpoints rather than a virtual IP. "
        '"NodePort" builds on ClusterIP and allocates a port on every node which routes to the '
        'same endpoints as the clusterIP. "LoadBalancer" builds on NodePort and creates an '
        "external load-balancer (if supported in the current cloud) which routes to the same "
        'endpoints as the clusterIP. "ExternalName" aliases this service to the specified '
        "externalName. Several other fields do not apply to ExternalName services. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/"
        "#publishing-services-service-types",
    ),
    _col(
        "Cluster-IP",
        "string",
        "clusterIP is the IP address of the service and is usually assigned randomly. If an "
        "address is specified manually, is in-range (as per system configuration), and is not "
        "in use, it will be allocated to the service; otherwise creation of the service will "
        "fail. This field may not be changed through updates unless the type field is also "
        "being changed to ExternalName (which requires this field to be blank) or the type "
        "field is being changed from ExternalName (in which case this field may optionally be "
        'specified, as describe above).  Valid values are "None", empty string (""), or a '
        'valid IP address. Setting this to "None" makes a "headless service" (no virtual IP), '
        "which is useful when direct endpoint connections are preferred and proxying is not "
        "required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field "
        "is specified when creating a Service of type ExternalName, creation will fail. This "
        "field will be wiped when updating a Service to type ExternalName. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/"
        "#virtual-ips-and-service-proxies",
    ),
    _col(
        "External-IP",
        "string",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
        "traffic for this service.  These IPs are not managed by Kubernetes.  The user is "
        "responsible for ensuring that traffic arrives at a node with this IP.  A common "
        "example is external load-balancers that are not part of the Kubernetes system.",
    ),
    _col(
        "Port(s)",
        "string",
        "The list of ports that are exposed by this service. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/"
        "#virtual-ips-and-service-proxies",
    ),
    _age_col(),
    _col(
        "Selector",
        "string",
        "Route service traffic to pods with label keys and values matching this selector. If "
        "empty or not present, the service is assumed to have an external process managing its "
        "endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, "
        "NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/",
        priority=1,
    ),
)

def _binding_columns(scope: str) -> tuple[dict[str, Any], ...]:
    role_ref = (
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
        "namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. "
        "This field is immutable."
        if scope == "roleBinding"
        else "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef "
        "cannot be resolved, the Authorizer must return an error. This field is immutable."
    )
    return (
        _name_col(),
        _col("Role", "string", role_ref),
        _age_col(),
        _col("Users", "string", f"Users in the {scope}", priority=1),
        _col("Groups", "string", f"Groups in the {scope}", priority=1),
        _col("ServiceAccounts", "string", f"ServiceAccounts in the {scope}", priority=1),
    )


_ROLEBINDING_COLUMNS: Final = _binding_columns("roleBinding")
_CLUSTERROLEBINDING_COLUMNS: Final = _binding_columns("clusterRoleBinding")

_RESOURCEQUOTA_COLUMNS: Final = (
    _name_col(),
    _col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    _col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent "
        "of contention on the node.",
    ),
    _age_col(),  # last, as kube's resourceQuotaColumnDefinitions put it
)

_PRIORITYCLASS_COLUMNS: Final = (
    _name_col(),
    _col(
        "Value",
        "integer",
        "value represents the integer value of this priority class. This is the actual "
        "priority that pods receive when they have the name of this class in their pod spec.",
    ),
    _col(
        "Global-Default",
        "boolean",
        "globalDefault specifies whether this PriorityClass should be considered as the default "
        "priority for pods that do not have any priority class. Only one PriorityClass can be "
        "marked as `globalDefault`. However, if more than one PriorityClasses exists with their "
        "`globalDefault` field set to true, the smallest value of such global default "
        "PriorityClasses will be used as the default priority.",
    ),
    _age_col(),
    _col(
        "PreemptionPolicy",
        "string",
        "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, "
        "PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
    ),
)

_DOC_PV_ACCESS_MODES: Final = (
    "accessModes contains all ways the volume can be mounted. More info: "
    "https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"
)
_DOC_PVC_ACCESS_MODES: Final = (
    "accessModes contains the actual access modes the volume backing the PVC has. More info: "
    "https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"
)

_PERSISTENTVOLUME_COLUMNS: Final = (
    _name_col(),
    _col(
        "Capacity",
        "string",
        "capacity is the description of the persistent volume's resources and capacity. More "
        "info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
    ),
    _col("Access Modes", "string", _DOC_PV_ACCESS_MODES),
    _col(
        "Reclaim Policy",
        "string",
        "persistentVolumeReclaimPolicy defines what happens to a persistent volume when "
        "released from its claim. Valid options are Retain (default for manually created "
        "PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and "
        "Recycle (deprecated). Recycle must be supported by the volume plugin underlying this "
        "PersistentVolume. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
    ),
    _col(
        "Status",
        "string",
        "phase indicates if a volume is available, bound to a claim, or released by a claim. "
        "More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
    ),
    _col(
        "Claim",
        "string",
        "claimRef is part of a bi-directional binding between PersistentVolume and "
        "PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the "
        "authoritative bind between PV and PVC. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
    ),
    _col("StorageClass", "string", "StorageClass of the pv"),
    _col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
    _col(
        "Reason",
        "string",
        "reason is a brief CamelCase string that describes any failure and is meant for machine "
        "parsing and tidy display in the CLI.",
    ),
    _age_col(),
    _col(
        "VolumeMode",
        "string",
        "volumeMode defines if a volume is intended to be used with a formatted filesystem or to "
        "remain in raw block state. Value of Filesystem is implied when not included in spec.",
        priority=1,
    ),
)

_PERSISTENTVOLUMECLAIM_COLUMNS: Final = (
    _name_col(),
    _col("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
    _col(
        "Volume",
        "string",
        "volumeName is the binding reference to the PersistentVolume backing this claim.",
    ),
    _col("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
    _col("Access Modes", "string", _DOC_PVC_ACCESS_MODES),
    _col("StorageClass", "string", "StorageClass of the pvc"),
    _col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
    _age_col(),
    _col(
        "VolumeMode",
        "string",
        "volumeMode defines what type of volume is required by the claim. Value of Filesystem is "
        "implied when not included in claim spec.",
        priority=1,
    ),
)

_STORAGECLASS_COLUMNS: Final = (
    _name_col(),
    _col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
    _col(
        "ReclaimPolicy",
        "string",
        "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes "
        "of this storage class. Defaults to Delete.",
    ),
    _col(
        "VolumeBindingMode",
        "string",
        "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  "
        "When unset, VolumeBindingImmediate is used. This field is only honored by servers that "
        "enable the VolumeScheduling feature.",
    ),
    _col(
        "AllowVolumeExpansion",
        "string",
        "allowVolumeExpansion shows whether the storage class allow volume expand.",
    ),
    _age_col(),
)

_CSINODE_COLUMNS: Final = (
    _name_col(),
    _col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
    _age_col(),
)

_CSIDRIVER_COLUMNS: Final = (
    _name_col(),
    _col(
        "AttachRequired",
        "boolean",
        "attachRequired indicates this CSI volume driver requires an attach operation (because "
        "it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach "
        "detach controller should call the attach volume interface which checks the "
        "volumeattachment status and waits until the volume is attached before proceeding to "
        "mounting. The CSI external-attacher coordinates with CSI volume driver and updates the "
        "volumeattachment status when the attach operation is complete. If the "
        "CSIDriverRegistry feature gate is enabled and the value is specified to false, the "
        "attach operation will be skipped. Otherwise the attach operation will be called.\n\n"
        "This field is immutable.",
    ),
    _col(
        "PodInfoOnMount",
        "boolean",
        "podInfoOnMount indicates this CSI volume driver requires additional pod information "
        "(like podName, podUID, etc.) during mount operations, if set to true. If set to false, "
        "pod information will not be passed on mount. Default is false.\n\nThe CSI driver "
        "specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod "
        "information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is "
        "responsible for parsing and validating the information passed in as VolumeContext."
        "\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This "
        "list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": "
        "pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace "
        "\"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": "
        "\"true\" if the volume is an ephemeral inline volume\n                                "
        "defined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" "
        "is a new feature in Kubernetes 1.16. It is only required for drivers which support "
        "both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave "
        "pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this "
        "field, drivers can only support one mode when deployed on such a cluster and the "
        "deployment determines which mode that is, for example via a command line parameter of "
        "the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable.",
    ),
    _col(
        "StorageCapacity",
        "boolean",
        "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider "
        "the storage capacity that the driver deployment will report by creating "
        "CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check "
        "can be enabled immediately when deploying a driver. In that case, provisioning new "
        "volumes with late binding will pause until the driver deployment has published some "
        "suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed "
        "with the field unset or false and it can be flipped later when storage capacity "
        "information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 "
        "and now is mutable.",
    ),
    _col(
        "TokenRequests",
        "string",
        "tokenRequests indicates the CSI driver needs pods' service account tokens it is "
        "mounting volume for to do necessary authentication. Kubelet will pass the tokens in "
        "VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and "
        "validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": "
        "{\n  \"<audience>\": {\n    \"token\": <token>,\n    \"expirationTimestamp\": "
        "<expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each "
        "TokenRequest should be different and at most one token is empty string. To receive a "
        "new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume "
        "periodically.",
    ),
    _col(
        "RequiresRepublish",
        "boolean",
        "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being "
        "periodically called to reflect any possible change in the mounted volume. This field "
        "defaults to false.\n\nNote: After a successful initial NodePublishVolume call, "
        "subsequent calls to NodePublishVolume should only update the contents of the volume. "
        "New mount points will not be seen by a running container.",
    ),
    _col(
        "Modes",
        "string",
        "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The "
        "default if the list is empty is \"Persistent\", which is the usage defined by the CSI "
        "specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe "
        "other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod "
        "spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A "
        "driver has to be aware of this because it is only going to get a NodePublishVolume "
        "call for such a volume.\n\nFor more information about implementing this mode, see "
        "https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can "
        "support one or more of these modes and more modes may be added in the future.\n\n"
        "This field is beta. This field is immutable.",
    ),
    _age_col(),
)

_DEFAULT_COLUMNS: Final = (
    _name_col(),
    _col("Created At", "date", _DOC_CREATED),
)

# ---------------------------------------------------------------------------
# Row printers (pkg/printers/internalversion)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    cells: list[Cell]
    conditions: tuple[Mapping[str, str], ...] = ()


_POD_SUCCEEDED_CONDITIONS: Final = (
    {
        "type": "Completed",
        "status": "True",
        "reason": "Succeeded",
        "message": "The pod has completed successfully.",
    },
)
_POD_FAILED_CONDITIONS: Final = (
    {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."},
)


def _later(current: datetime | None, state: object) -> datetime | None:
    """Track the latest ``lastState.terminated.finishedAt`` of a container status."""
    terminated = _opt_map(_get(state, "terminated"))
    if terminated is None:
        return current
    finished = _lenient_time(terminated.get("finishedAt"))
    if finished is not None and (current is None or current < finished):
        return finished
    return current


def _condition_status(conditions: object, type_: str) -> str | None:
    """Status of the first condition of ``type_`` (``None`` if absent)."""
    for condition in _list(conditions):
        condition = _map(condition)
        if condition.get("type") == type_:
            return _str(condition.get("status"))
    return None


def _print_pod(pod: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(pod.get("spec")), _map(pod.get("status"))
    conditions = _list(status.get("conditions"))
    # The API server sets phase Pending on create; mirror that for undefaulted objects.
    phase = _str(status.get("phase")) or "Pending"
    reason = _str(status.get("reason")) or phase

    gated = False
    scheduled_condition_seen = False
    for condition in conditions:
        condition = _map(condition)
        if condition.get("type") == "PodScheduled":
            scheduled_condition_seen = True
            if condition.get("reason") == "SchedulingGated":
                gated = True
    # kube-apiserver adds {PodScheduled, False, SchedulingGated} on create when the pod has
    # scheduling gates; honour the gates directly if that condition was never written.
    if not scheduled_condition_seen and _list(spec.get("schedulingGates")):
        gated = True
    if gated:
        reason = "SchedulingGated"

    row_conditions: tuple[Mapping[str, str], ...] = ()
    if phase == "Succeeded":
        row_conditions = _POD_SUCCEEDED_CONDITIONS
    elif phase == "Failed":
        row_conditions = _POD_FAILED_CONDITIONS

    init_specs = [_map(c) for c in _list(spec.get("initContainers"))]
    restartable_names = {
        _str(c.get("name")) for c in init_specs if c.get("restartPolicy") == "Always"
    }
    total = len(_list(spec.get("containers"))) + sum(
        1 for c in init_specs if c.get("restartPolicy") == "Always"
    )
    ready = 0
    restarts = 0
    restartable_restarts = 0
    last_restart: datetime | None = None
    last_restartable_restart: datetime | None = None

    initializing = False
    for index, container in enumerate(_list(status.get("initContainerStatuses"))):
        container = _map(container)
        count = _int(container.get("restartCount"))
        restarts += count
        last_restart = _later(last_restart, container.get("lastState"))
        restartable = _str(container.get("name")) in restartable_names
        if restartable:
            restartable_restarts += count
            last_restartable_restart = _later(last_restartable_restart, container.get("lastState"))
        state = _map(container.get("state"))
        terminated = _opt_map(state.get("terminated"))
        waiting = _opt_map(state.get("waiting"))
        if terminated is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if restartable and container.get("started") is True:
            if container.get("ready") is True:
                ready += 1
            continue
        if terminated is not None:
            term_reason = _str(terminated.get("reason"))
            if term_reason:
                reason = "Init:" + term_reason
            elif _int(terminated.get("signal")) != 0:
                reason = f"Init:Signal:{_int(terminated.get('signal'))}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif (
            waiting is not None
            and _str(waiting.get("reason"))
            and waiting.get("reason") != "PodInitializing"
        ):
            reason = "Init:" + _str(waiting.get("reason"))
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_status(conditions, "Initialized") == "True":
        restarts = restartable_restarts
        last_restart = last_restartable_restart
        has_running = False
        for container in reversed(_list(status.get("containerStatuses"))):
            container = _map(container)
            restarts += _int(container.get("restartCount"))
            last_restart = _later(last_restart, container.get("lastState"))
            state = _map(container.get("state"))
            terminated = _opt_map(state.get("terminated"))
            waiting = _opt_map(state.get("waiting"))
            if waiting is not None and _str(waiting.get("reason")):
                reason = _str(waiting.get("reason"))
            elif terminated is not None and _str(terminated.get("reason")):
                reason = _str(terminated.get("reason"))
            elif terminated is not None:
                if _int(terminated.get("signal")) != 0:
                    reason = f"Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif container.get("ready") is True and _opt_map(state.get("running")) is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_condition = any(
                _map(c).get("type") == "Ready" and _map(c).get("status") == "True"
                for c in conditions
            )
            reason = "Running" if ready_condition else "NotReady"

    if _get(pod, "metadata", "deletionTimestamp") is not None:
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Failed", "Succeeded"):
            reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_cell = f"{restarts} ({_since(last_restart, now)} ago)"

    pod_ips = _list(status.get("podIPs"))
    pod_ip = _str(_map(pod_ips[0]).get("ip")) if pod_ips else _str(status.get("podIP"))
    readiness_gates = _list(spec.get("readinessGates"))
    gates_cell = "<none>"
    if readiness_gates:
        true_count = sum(
            1
            for gate in readiness_gates
            if _condition_status(conditions, _str(_map(gate).get("conditionType"))) == "True"
        )
        gates_cell = f"{true_count}/{len(readiness_gates)}"

    return _Row(
        [
            _name(pod),
            f"{ready}/{total}",
            reason,
            restarts_cell,
            _age(pod, now),
            pod_ip or "<none>",
            _str(spec.get("nodeName")) or "<none>",
            _str(status.get("nominatedNodeName")) or "<none>",
            gates_cell,
        ],
        row_conditions,
    )


def _print_node(node: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(node.get("spec")), _map(node.get("status"))
    ready_status: str | None = None
    for condition in _list(status.get("conditions")):
        condition = _map(condition)
        if condition.get("type") == "Ready":
            ready_status = _str(condition.get("status"))  # the last one wins, as in kube
    if ready_status is None:
        states = ["Unknown"]
    else:
        states = ["Ready" if ready_status == "True" else "NotReady"]
    if spec.get("unschedulable") is True:
        states.append("SchedulingDisabled")

    roles: set[str] = set()
    for key, value in _map(_get(node, "metadata", "labels")).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/") :]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and _str(value):
            roles.add(_str(value))

    info = _map(status.get("nodeInfo"))

    def address(kind: str) -> str:
        for entry in _list(status.get("addresses")):
            entry = _map(entry)
            if entry.get("type") == kind:
                return _str(entry.get("address"))
        return "<none>"

    return _Row(
        [
            _name(node),
            ",".join(states),
            ",".join(sorted(roles)) or "<none>",
            _age(node, now),
            _str(info.get("kubeletVersion")),
            address("InternalIP"),
            address("ExternalIP"),
            _str(info.get("osImage")) or "<unknown>",
            _str(info.get("kernelVersion")) or "<unknown>",
            _str(info.get("containerRuntimeVersion")) or "<unknown>",
        ]
    )


def _print_namespace(ns: Mapping[str, Any], now: datetime) -> _Row:
    phase = _str(_get(ns, "status", "phase")) or "Active"  # set by the server on create
    return _Row([_name(ns), phase, _age(ns, now)])


def _print_core_event(event: Mapping[str, Any], now: datetime) -> _Row:
    first_seen = _since(event.get("firstTimestamp"), now)
    if _lenient_time(event.get("firstTimestamp")) is None:
        first_seen = _since(event.get("eventTime"), now)
    last_seen = _since(event.get("lastTimestamp"), now)
    if _lenient_time(event.get("lastTimestamp")) is None:
        last_seen = first_seen
    count = _int(event.get("count"))
    series = _opt_map(event.get("series"))
    if series is not None:
        last_seen = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events carry no count in the new API

    involved = _map(event.get("involvedObject"))
    kind = _str(involved.get("kind")).lower()
    target = f"{kind}/{_str(involved.get('name'))}" if _str(involved.get("name")) else kind

    source = _map(event.get("source"))
    component = _str(source.get("component")) or _str(event.get("reportingComponent"))
    instance = _str(source.get("host")) or _str(event.get("reportingInstance"))
    source_cell = f"{component}, {instance}" if instance else component

    return _Row(
        [
            last_seen,
            _str(event.get("type")),
            _str(event.get("reason")),
            target,
            _str(involved.get("fieldPath")),
            source_cell,
            _str(event.get("message")).strip(),
            first_seen,
            count,
            _name(event),
        ]
    )


def _print_events_k8s_io_event(event: Mapping[str, Any], now: datetime) -> _Row:
    """``events.k8s.io/v1`` Event: convert to the core field names, then print."""
    core = {
        "metadata": event.get("metadata"),
        "involvedObject": event.get("regarding"),
        "source": event.get("deprecatedSource"),
        "reportingComponent": event.get("reportingController"),
        "reportingInstance": event.get("reportingInstance"),
        "message": event.get("note"),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount"),
        "eventTime": event.get("eventTime"),
        "series": event.get("series"),
        "reason": event.get("reason"),
        "type": event.get("type"),
    }
    return _print_core_event(core, now)


def _print_deployment(deploy: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(deploy.get("spec")), _map(deploy.get("status"))
    desired = _int(spec.get("replicas"), 1)  # apps/v1 defaults replicas to 1
    try:
        selector = _selector_string(spec.get("selector"))
    except ValueError:
        selector = "<invalid>"
    names, images = _container_cells(_get(spec, "template", "spec"))
    return _Row(
        [
            _name(deploy),
            f"{_int(status.get('readyReplicas'))}/{desired}",
            _int(status.get("updatedReplicas")),
            _int(status.get("availableReplicas")),
            _age(deploy, now),
            names,
            images,
            selector,
        ]
    )


def _print_replicaset(rs: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(rs.get("spec")), _map(rs.get("status"))
    names, images = _container_cells(_get(spec, "template", "spec"))
    return _Row(
        [
            _name(rs),
            _int(spec.get("replicas"), 1),
            _int(status.get("replicas")),
            _int(status.get("readyReplicas")),
            _age(rs, now),
            names,
            images,
            _format_label_selector(spec.get("selector")),
        ]
    )


def _print_replicationcontroller(rc: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(rc.get("spec")), _map(rc.get("status"))
    names, images = _container_cells(_get(spec, "template", "spec"))
    return _Row(
        [
            _name(rc),
            _int(spec.get("replicas"), 1),
            _int(status.get("replicas")),
            _int(status.get("readyReplicas")),
            _age(rc, now),
            names,
            images,
            _format_labels(spec.get("selector")),
        ]
    )


def _print_daemonset(ds: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(ds.get("spec")), _map(ds.get("status"))
    pod_spec = _get(spec, "template", "spec")
    names, images = _container_cells(pod_spec)
    return _Row(
        [
            _name(ds),
            _int(status.get("desiredNumberScheduled")),
            _int(status.get("currentNumberScheduled")),
            _int(status.get("numberReady")),
            _int(status.get("updatedNumberScheduled")),
            _int(status.get("numberAvailable")),
            _format_labels(_get(pod_spec, "nodeSelector")),
            _age(ds, now),
            names,
            images,
            _format_label_selector(spec.get("selector")),
        ]
    )


def _print_statefulset(sts: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(sts.get("spec")), _map(sts.get("status"))
    names, images = _container_cells(_get(spec, "template", "spec"))
    ready = f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'), 1)}"
    return _Row([_name(sts), ready, _age(sts, now), names, images])


def _print_job(job: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(job.get("spec")), _map(job.get("status"))
    succeeded = _int(status.get("succeeded"))
    completions = spec.get("completions")
    parallelism = spec.get("parallelism")
    if completions is None and parallelism is None:  # batch/v1 defaulting
        completions, parallelism = 1, 1
    if completions is not None:
        completions_cell = f"{succeeded}/{_int(completions)}"
    elif _int(parallelism, 1) > 1:
        completions_cell = f"{succeeded}/1 of {_int(parallelism, 1)}"
    else:
        completions_cell = f"{succeeded}/1"

    started = _lenient_time(status.get("startTime"))
    finished = _lenient_time(status.get("completionTime"))
    if started is None:
        duration = ""
    elif finished is None:
        duration = human_duration((now - started).total_seconds())
    else:
        duration = human_duration((finished - started).total_seconds())

    conditions = status.get("conditions")
    if _condition_status(conditions, "Complete") == "True":
        state = "Complete"
    elif _condition_status(conditions, "Failed") == "True":
        state = "Failed"
    elif _get(job, "metadata", "deletionTimestamp") is not None:
        state = "Terminating"
    elif _condition_status(conditions, "Suspended") == "True":
        state = "Suspended"
    elif _condition_status(conditions, "FailureTarget") == "True":
        state = "FailureTarget"
    else:
        state = "Running"

    names, images = _container_cells(_get(spec, "template", "spec"))
    return _Row(
        [
            _name(job),
            state,
            completions_cell,
            duration,
            _age(job, now),
            names,
            images,
            _format_label_selector(spec.get("selector")),
        ]
    )


def _print_lease(lease: Mapping[str, Any], now: datetime) -> _Row:
    return _Row([_name(lease), _str(_get(lease, "spec", "holderIdentity")), _age(lease, now)])


def _print_pdb(pdb: Mapping[str, Any], now: datetime) -> _Row:
    spec = _map(pdb.get("spec"))
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    return _Row(
        [
            _name(pdb),
            "N/A" if min_available is None else _int_or_string(min_available),
            "N/A" if max_unavailable is None else _int_or_string(max_unavailable),
            _int(_get(pdb, "status", "disruptionsAllowed")),
            _age(pdb, now),
        ]
    )


def _print_configmap(cm: Mapping[str, Any], now: datetime) -> _Row:
    count = len(_map(cm.get("data"))) + len(_map(cm.get("binaryData")))
    return _Row([_name(cm), count, _age(cm, now)])


def _print_secret(secret: Mapping[str, Any], now: datetime) -> _Row:
    # Converting a v1 Secret merges stringData into data before kube prints it.
    keys = set(_map(secret.get("data"))) | set(_map(secret.get("stringData")))
    type_ = _str(secret.get("type")) or "Opaque"
    return _Row([_name(secret), type_, len(keys), _age(secret, now)])


def _print_serviceaccount(sa: Mapping[str, Any], now: datetime) -> _Row:
    return _Row([_name(sa), len(_list(sa.get("secrets"))), _age(sa, now)])


def _service_external_ip(spec: Mapping[str, Any], status: Mapping[str, Any], type_: str) -> str:
    external_ips = [_str(ip) for ip in _list(spec.get("externalIPs"))]
    if type_ in ("ClusterIP", "NodePort"):
        return ",".join(external_ips) if external_ips else "<none>"
    if type_ == "LoadBalancer":
        found: set[str] = set()
        for ingress in _list(_get(status, "loadBalancer", "ingress")):
            ingress = _map(ingress)
            if _str(ingress.get("ip")):
                found.add(_str(ingress.get("ip")))
            elif _str(ingress.get("hostname")):
                found.add(_str(ingress.get("hostname")))
        lb_ips = ",".join(sorted(found))  # the API server prints wide: no truncation
        if external_ips:
            return ",".join((lb_ips.split(",") if lb_ips else []) + external_ips)
        return lb_ips or "<pending>"
    if type_ == "ExternalName":
        return _str(spec.get("externalName"))
    return "<unknown>"


def _print_service(svc: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(svc.get("spec")), _map(svc.get("status"))
    type_ = _str(spec.get("type")) or "ClusterIP"  # v1 defaulting
    cluster_ips = _list(spec.get("clusterIPs"))
    cluster_ip = _str(cluster_ips[0]) if cluster_ips else _str(spec.get("clusterIP"))
    ports: list[str] = []
    for port in _list(spec.get("ports")):
        port = _map(port)
        protocol = _str(port.get("protocol")) or "TCP"
        node_port = _int(port.get("nodePort"))
        if node_port > 0:
            ports.append(f"{_int(port.get('port'))}:{node_port}/{protocol}")
        else:
            ports.append(f"{_int(port.get('port'))}/{protocol}")
    return _Row(
        [
            _name(svc),
            type_,
            cluster_ip or "<none>",
            _service_external_ip(spec, status, type_),
            ",".join(ports) or "<none>",
            _age(svc, now),
            _format_labels(spec.get("selector")),
        ]
    )


def _print_priorityclass(pc: Mapping[str, Any], now: datetime) -> _Row:
    return _Row(
        [
            _name(pc),
            _int(pc.get("value")),
            pc.get("globalDefault") is True,
            _age(pc, now),
            _str(pc.get("preemptionPolicy")) or "PreemptLowerPriority",  # v1 defaulting
        ]
    )


def _quantity_string(value: object) -> str:
    """``Quantity.String()`` of a stored quantity (absent: ``0``)."""
    if value is None:
        return "0"
    try:
        return canonical_quantity(value)  # type: ignore[arg-type]
    except (QuantityError, TypeError, ValueError):
        return _str(value)


def _access_modes(modes: object) -> str:
    """``GetAccessModesAsString``: RWO, ROX, RWX, RWOP, in that order, each once."""
    present = set(_list(modes))
    return ",".join(short for mode, short in (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"),
                                              ("ReadWriteMany", "RWX"),
                                              ("ReadWriteOncePod", "RWOP"))
                    if mode in present)


_BETA_STORAGE_CLASS: Final = "volume.beta.kubernetes.io/storage-class"


def _storage_class(obj: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClass`` / ``GetPersistentVolumeClaimClass``: the beta annotation
    wins over ``spec.storageClassName``."""
    annotations = _map(_get(obj, "metadata", "annotations"))
    if _BETA_STORAGE_CLASS in annotations:
        return _str(annotations[_BETA_STORAGE_CLASS])
    return _str(_get(obj, "spec", "storageClassName"))


def _phase_or_terminating(obj: Mapping[str, Any]) -> str:
    if _get(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return _str(_get(obj, "status", "phase"))


def _print_persistentvolume(pv: Mapping[str, Any], now: datetime) -> _Row:
    spec = _map(pv.get("spec"))
    ref = _opt_map(spec.get("claimRef"))
    claim = f"{_str(ref.get('namespace'))}/{_str(ref.get('name'))}" if ref is not None else ""
    attributes = spec.get("volumeAttributesClassName")
    return _Row(
        [
            _name(pv),
            _quantity_string(_map(spec.get("capacity")).get("storage")),
            _access_modes(spec.get("accessModes")),
            _str(spec.get("persistentVolumeReclaimPolicy")),
            _phase_or_terminating(pv),
            claim,
            _storage_class(pv),
            _str(attributes) if attributes is not None else "<unset>",
            _str(_get(pv, "status", "reason")),
            _age(pv, now),
            _str(spec.get("volumeMode")) or "<unset>",
        ]
    )


def _print_persistentvolumeclaim(pvc: Mapping[str, Any], now: datetime) -> _Row:
    spec, status = _map(pvc.get("spec")), _map(pvc.get("status"))
    volume = _str(spec.get("volumeName"))
    capacity = modes = ""
    if volume:
        modes = _access_modes(status.get("accessModes"))
        capacity = _quantity_string(_map(status.get("capacity")).get("storage"))
    attributes = spec.get("volumeAttributesClassName")
    return _Row(
        [
            _name(pvc),
            _phase_or_terminating(pvc),
            volume,
            capacity,
            modes,
            _storage_class(pvc),
            _str(attributes) if attributes is not None else "<unset>",
            _age(pvc, now),
            _str(spec.get("volumeMode")) or "<unset>",
        ]
    )


def _print_storageclass(sc: Mapping[str, Any], now: datetime) -> _Row:
    annotations = _map(_get(sc, "metadata", "annotations"))
    name = _name(sc)
    if "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                  annotations.get("storageclass.beta.kubernetes.io/is-default-class")):
        name += " (default)"
    return _Row(
        [
            name,
            _str(sc.get("provisioner")),
            _str(sc.get("reclaimPolicy")) or "Delete",
            _str(sc.get("volumeBindingMode")) or "Immediate",
            sc.get("allowVolumeExpansion") is True,
            _age(sc, now),
        ]
    )


def _print_csinode(node: Mapping[str, Any], now: datetime) -> _Row:
    return _Row([_name(node), len(_list(_get(node, "spec", "drivers"))), _age(node, now)])


def _print_csidriver(driver: Mapping[str, Any], now: datetime) -> _Row:
    spec = _map(driver.get("spec"))
    requests = spec.get("tokenRequests")
    tokens = ",".join(_str(_map(t).get("audience")) for t in _list(requests)) \
        if requests is not None else "<unset>"
    return _Row(
        [
            _name(driver),
            spec.get("attachRequired") is not False,
            spec.get("podInfoOnMount") is True,
            spec.get("storageCapacity") is True,
            tokens,
            spec.get("requiresRepublish") is True,
            ",".join(_str(m) for m in _list(spec.get("volumeLifecycleModes"))) or "<none>",
            _age(driver, now),
        ]
    )


def _print_binding(binding: Mapping[str, Any], now: datetime) -> _Row:
    # printRoleBinding / printClusterRoleBinding, always wide (rbac.SubjectsStrings).
    ref = _map(binding.get("roleRef"))
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in _list(binding.get("subjects")):
        subject = _map(subject)
        kind, name = _str(subject.get("kind")), _str(subject.get("name"))
        if kind == "ServiceAccount":
            accounts.append(f"{_str(subject.get('namespace'))}/{name}")
        elif kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
    return _Row(
        [
            _name(binding),
            f"{_str(ref.get('kind'))}/{_str(ref.get('name'))}",
            _age(binding, now),
            ", ".join(users),
            ", ".join(groups),
            ", ".join(accounts),
        ]
    )


def _print_resourcequota(quota: Mapping[str, Any], now: datetime) -> _Row:
    # printResourceQuota: "<resource>: <used>/<hard>" per limit of the status (nothing before
    # the quota controller has counted), limits.* in Limit.
    status_hard = _map(_get(quota, "status", "hard"))
    used = _map(_get(quota, "status", "used"))
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(status_hard):
        text = f"{name}: {_str(used.get(name)) or '0'}/{_str(status_hard.get(name)) or '0'}"
        parts = name.split(".")
        (limits if len(parts) > 1 and parts[0] == "limits" else requests).append(text)
    return _Row([_name(quota), ", ".join(requests), ", ".join(limits), _age(quota, now)])


@dataclass(frozen=True)
class _Printer:
    columns: tuple[Mapping[str, Any], ...]
    row: Callable[[Mapping[str, Any], datetime], _Row]


_PRINTERS: Final[Mapping[tuple[str, str], _Printer]] = {
    ("", "pods"): _Printer(_POD_COLUMNS, _print_pod),
    ("", "nodes"): _Printer(_NODE_COLUMNS, _print_node),
    ("", "namespaces"): _Printer(_NAMESPACE_COLUMNS, _print_namespace),
    ("", "events"): _Printer(_EVENT_COLUMNS, _print_core_event),
    ("events.k8s.io", "events"): _Printer(_EVENT_COLUMNS, _print_events_k8s_io_event),
    ("", "configmaps"): _Printer(_CONFIGMAP_COLUMNS, _print_configmap),
    ("", "secrets"): _Printer(_SECRET_COLUMNS, _print_secret),
    ("", "serviceaccounts"): _Printer(_SERVICEACCOUNT_COLUMNS, _print_serviceaccount),
    ("", "services"): _Printer(_SERVICE_COLUMNS, _print_service),
    ("", "resourcequotas"): _Printer(_RESOURCEQUOTA_COLUMNS, _print_resourcequota),
    ("rbac.authorization.k8s.io", "rolebindings"): _Printer(_ROLEBINDING_COLUMNS, _print_binding),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): _Printer(
        _CLUSTERROLEBINDING_COLUMNS, _print_binding
    ),
    ("apps", "deployments"): _Printer(_DEPLOYMENT_COLUMNS, _print_deployment),
    ("apps", "replicasets"): _Printer(_REPLICASET_COLUMNS, _print_replicaset),
    ("", "replicationcontrollers"): _Printer(
        _REPLICATIONCONTROLLER_COLUMNS, _print_replicationcontroller
    ),
    ("apps", "daemonsets"): _Printer(_DAEMONSET_COLUMNS, _print_daemonset),
    ("apps", "statefulsets"): _Printer(_STATEFULSET_COLUMNS, _print_statefulset),
    ("batch", "jobs"): _Printer(_JOB_COLUMNS, _print_job),
    ("coordination.k8s.io", "leases"): _Printer(_LEASE_COLUMNS, _print_lease),
    ("policy", "poddisruptionbudgets"): _Printer(_PDB_COLUMNS, _print_pdb),
    ("", "persistentvolumes"): _Printer(_PERSISTENTVOLUME_COLUMNS, _print_persistentvolume),
    ("", "persistentvolumeclaims"): _Printer(
        _PERSISTENTVOLUMECLAIM_COLUMNS, _print_persistentvolumeclaim
    ),
    ("storage.k8s.io", "storageclasses"): _Printer(_STORAGECLASS_COLUMNS, _print_storageclass),
    ("storage.k8s.io", "csinodes"): _Printer(_CSINODE_COLUMNS, _print_csinode),
    ("storage.k8s.io", "csidrivers"): _Printer(_CSIDRIVER_COLUMNS, _print_csidriver),
    ("scheduling.k8s.io", "priorityclasses"): _Printer(
        _PRIORITYCLASS_COLUMNS, _print_priorityclass
    ),
}


def _print_default(obj: Mapping[str, Any], now: datetime) -> _Row:
    return _Row([_name(obj), _rfc3339(_get(obj, "metadata", "creationTimestamp"))])


# ---------------------------------------------------------------------------
# Go value formatting used by JSONPath "string" columns
# ---------------------------------------------------------------------------


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of ``abs(value)`` and the decimal point position.

    ``value == 0.<digits> * 10**point``; the same digits Go's strconv picks.
    """
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    assert isinstance(exponent, int)
    return digits, len(digits) + exponent


def _format_e(digits: str, point: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exponent = point - 1
    sign = "-" if exponent < 0 else "+"
    return f"{mantissa}e{sign}{abs(exponent):02d}"


def _format_f(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _go_float_text(value: float) -> str:
    """``fmt.Sprint(float64)`` (``%v``: shortest ``%g`` with exponent at 1e+06)."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    digits, point = _shortest_digits(value)
    exponent = point - 1
    text = _format_e(digits, point) if exponent < -4 or exponent >= 6 else _format_f(digits, point)
    return "-" + text if value < 0 else text


def _go_json_float(value: float) -> str:
    """``encoding/json`` float64 encoding."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if not math.isfinite(value):
        raise ValueError("unsupported float value")
    digits, point = _shortest_digits(value)
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        text = _format_e(digits, point)
        text = re.sub(r"e-0(\d)$", r"e-\1", text)
    else:
        text = _format_f(digits, point)
    return "-" + text if value < 0 else text


_JSON_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _go_json_string(text: str) -> str:
    out = ['"']
    for char in text:
        escaped = _JSON_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _go_json(value: JSON) -> str:
    """Compact ``json.Marshal`` output (sorted keys, HTML-safe escaping)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_json_float(value)
    if isinstance(value, str):
        return _go_json_string(value)
    if isinstance(value, Mapping):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{_go_json_string(k)}:{_go_json(v)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    raise ValueError(f"cannot encode {type(value).__name__}")


def _jsonpath_text(value: JSON) -> str:
    """How client-go's ``JSONPath.PrintResults`` renders one value."""
    if value is None:
        return "<no value>"
    if isinstance(value, (Mapping, list, tuple)):
        return _go_json(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float_text(value)
    return str(value)


# ---------------------------------------------------------------------------
# JSONPath (k8s.io/client-go/util/jsonpath), the subset reachable from a CRD column
# ---------------------------------------------------------------------------


class _JSONPathSyntaxError(ValueError):
    """The path does not parse (kube rejects the column too)."""


class _JSONPathUnsupported(ValueError):
    """Valid client-go syntax that this evaluator does not implement."""


class _JSONPathEvalError(Exception):
    """Evaluation failed; the cell is empty, as in kube."""


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Wildcard:
    pass


@dataclass(frozen=True)
class _Recursive:
    pass


@dataclass(frozen=True)
class _Slice:
    start: int | None  # None: not given
    end: int | None
    end_derived: bool  # ``[i]``: end is i+1
    step: int | None


@dataclass(frozen=True)
class _Filter:
    left: tuple[_Node, ...]
    operator: str  # "exists" for ``[?(@.x)]``
    right: tuple[_Node, ...]


@dataclass(frozen=True)
class _Union:
    branches: tuple[tuple[_Node, ...], ...]


@dataclass(frozen=True)
class _Text:
    value: str


@dataclass(frozen=True)
class _Number:
    value: int | float | bool


@dataclass(frozen=True)
class _Identifier:
    name: str


_Node = Union[_Field, _Wildcard, _Recursive, _Slice, _Filter, _Union, _Text, _Number, _Identifier]

_TERMINATORS: Final = frozenset(" \t\r\n.,[]$@{}")
_SLICE_RE: Final = re.compile(r"(-?\d*)(:-?\d*)?(:-?\d*)?")
_DICT_KEY_RE: Final = re.compile(r"'([^']*)'")
_FILTER_RE: Final = re.compile(r"([^!<>=]+)([!<>=]+)(.+?)")
_QUOTE_ESCAPES: Final = {
    "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a"
}


def _is_alnum(char: str) -> bool:
    return char == "_" or char.isalpha() or char.isdigit()


class _PathParser:
    """Recursive-descent parser mirroring client-go's ``parseInsideAction``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.nodes: list[_Node] = []

    @classmethod
    def parse(cls, text: str) -> tuple[_Node, ...]:
        parser = cls(text)
        parser.run()
        return tuple(parser.nodes)

    def fail(self, message: str) -> NoReturn:
        raise _JSONPathSyntaxError(f"{message} in {self.text!r}")

    def run(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text.startswith("[?(", self.pos):
                self.filter()
                continue
            if text.startswith("..", self.pos):
                if self.nodes and isinstance(self.nodes[-1], _Recursive):
                    self.fail("invalid multiple recursive descent")
                self.pos += 2
                self.nodes.append(_Recursive())
                if self.pos < len(text) and _is_alnum(text[self.pos]):
                    self.field()
                continue
            char = text[self.pos]
            if char in "\r\n":
                self.fail("unclosed action")
            elif char in " @$":
                self.pos += 1
            elif char == "[":
                self.array()
            elif char in "\"'":
                self.quote(char)
            elif char == ".":
                self.pos += 1
                self.field()
            elif char in "+-" or char.isdigit():
                self.number()
            elif _is_alnum(char):
                self.identifier()
            elif char in "{}":
                raise _JSONPathUnsupported(f"nested template in {text!r}")
            else:
                self.fail(f"unrecognized character {char!r}")

    def field(self) -> None:
        text, start = self.text, self.pos
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\":
                self.pos += 2
                continue
            if char in _TERMINATORS:
                break
            self.pos += 1
        self.pos = min(self.pos, len(text))
        value = text[start : self.pos]
        if value == "*":
            self.nodes.append(_Wildcard())
        else:
            self.nodes.append(_Field(value.replace("\\", "")))

    def array(self) -> None:
        end = self.text.find("]", self.pos)
        newline = self.text.find("\n", self.pos)
        if end < 0 or 0 <= newline < end:
            self.fail("unterminated array")
        inner = self.text[self.pos + 1 : end]
        self.pos = end + 1
        if inner == "*":
            inner = ":"
        parts = inner.split(",")
        if len(parts) > 1:
            self.nodes.append(
                _Union(tuple(_PathParser.parse(f"[{part.strip(' ')}]") for part in parts))
            )
            return
        key = _DICT_KEY_RE.fullmatch(inner)
        if key is not None:
            self.nodes.extend(_PathParser.parse("." + key.group(1)))
            return
        match = _SLICE_RE.fullmatch(inner)
        if match is None:
            self.fail(f"invalid array index {inner!r}")
        raw = [match.group(1) or "", match.group(2) or "", match.group(3) or ""]
        values: list[int | None] = [None, None, None]
        end_derived = False
        for index, piece in enumerate(raw):
            if index > 0 and piece:
                piece = piece[1:]
                if not piece:
                    continue  # "[a:]": not given
            elif not piece:
                if index == 1:
                    values[1] = (values[0] or 0) + 1
                    end_derived = True
                continue
            try:
                values[index] = int(piece)
            except ValueError:
                self.fail(f"array index {piece!r} is not a number")
        self.nodes.append(_Slice(values[0], values[1], end_derived, values[2]))

    def filter(self) -> None:
        text = self.text
        self.pos += 3
        start = self.pos
        begin = end = False
        pair = ""
        while True:
            if self.pos >= len(text) or text[self.pos] == "\n":
                self.fail("unterminated filter")
            char = text[self.pos]
            self.pos += 1
            if char in "\"'":
                if not begin:
                    begin, pair = True, char
                    continue
                if text[self.pos - 2] != "\\" and char == pair:
                    end = True
            elif char == ")" and begin == end:
                break
        if self.pos >= len(text) or text[self.pos] != "]":
            self.fail("unclosed array expect ]")
        inner = text[start : self.pos - 1]
        self.pos += 1
        match = _FILTER_RE.fullmatch(inner)
        if match is None:
            self.nodes.append(_Filter(_PathParser.parse(inner), "exists", ()))
        else:
            self.nodes.append(
                _Filter(
                    _PathParser.parse(match.group(1)),
                    match.group(2),
                    _PathParser.parse(match.group(3)),
                )
            )

    def quote(self, quote: str) -> None:
        text, start = self.text, self.pos
        self.pos += 1
        while True:
            if self.pos >= len(text) or text[self.pos] == "\n":
                self.fail("unterminated quoted string")
            char = text[self.pos]
            self.pos += 1
            if char == quote and text[self.pos - 2] != "\\":
                break
        body = text[start + 1 : self.pos - 1]
        out: list[str] = []
        index = 0
        while index < len(body):
            char = body[index]
            if char == "\\" and index + 1 < len(body):
                nxt = body[index + 1]
                out.append(_QUOTE_ESCAPES.get(nxt, nxt))
                index += 2
                continue
            out.append(char)
            index += 1
        self.nodes.append(_Text("".join(out)))

    def number(self) -> None:
        text, start = self.text, self.pos
        if text[self.pos] in "+-":
            self.pos += 1
        while self.pos < len(text) and (text[self.pos] == "." or text[self.pos].isdigit()):
            self.pos += 1
        literal = text[start : self.pos]
        try:
            self.nodes.append(_Number(int(literal)))
            return
        except ValueError:
            pass
        try:
            self.nodes.append(_Number(float(literal)))
        except ValueError:
            self.fail(f"cannot parse number {literal!r}")

    def identifier(self) -> None:
        text, start = self.text, self.pos
        while self.pos < len(text) and text[self.pos] not in _TERMINATORS:
            self.pos += 1
        word = text[start : self.pos]
        if word in ("true", "false"):
            self.nodes.append(_Number(word == "true"))
        elif word in ("range", "end"):
            raise _JSONPathUnsupported(f"{word} is not supported in {text!r}")
        else:
            self.nodes.append(_Identifier(word))


def _children(value: JSON) -> list[JSON]:
    """What ``[*]``/``.*`` and ``..`` descend into (strings yield their bytes, as in Go)."""
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return list(value.encode("utf-8"))
    return []


def _kind(value: JSON) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise _JSONPathEvalError("invalid type for comparison")


def _compare(operator: str, left: JSON, right: JSON) -> bool:
    left_kind, right_kind = _kind(left), _kind(right)
    if left_kind != right_kind:
        raise _JSONPathEvalError("incompatible types for comparison")
    if operator == "==":
        return bool(left == right)
    if operator == "!=":
        return bool(left != right)
    if left_kind == "bool":
        raise _JSONPathEvalError("invalid type for comparison")
    if operator == "<":
        return bool(left < right)
    if operator == ">":
        return bool(left > right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">=":
        return bool(left >= right)
    raise _JSONPathEvalError(f"unrecognized filter operator {operator}")


def _eval_nodes(nodes: Iterable[_Node], values: list[JSON]) -> list[JSON]:
    for node in nodes:
        values = _eval_node(node, values)
    return values


def _eval_slice(node: _Slice, values: list[JSON]) -> list[JSON]:
    result: list[JSON] = []
    for value in values:
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            raise _JSONPathEvalError("not an array")
        length = len(value)
        start = node.start if node.start is not None else 0
        if start < 0:
            start += length
        end = node.end if node.end is not None else length
        if end < 0 or (end == 0 and node.end_derived):
            end += length
        if start == end:
            return result  # zero elements requested: client-go stops here
        if start >= length or start < 0 or end > length or end < 0 or start > end:
            raise _JSONPathEvalError("array index out of bounds")
        step = 1
        if node.step is not None:
            if node.step <= 0:
                raise _JSONPathEvalError("step must be > 0")
            step = node.step
        result.extend(list(value[start:end])[::step])
    return result


def _eval_filter(node: _Filter, values: list[JSON]) -> list[JSON]:
    result: list[JSON] = []
    for value in values:
        if not isinstance(value, (list, tuple)):
            raise _JSONPathEvalError("not an array and cannot be filtered")
        for item in value:
            if node.operator == "exists":
                try:
                    if _eval_nodes(node.left, [item]):
                        result.append(item)
                except _JSONPathEvalError:
                    pass
                continue
            lefts = _eval_nodes(node.left, [item])
            if not lefts:
                continue
            if len(lefts) > 1:
                raise _JSONPathEvalError("can only compare one element at a time")
            rights = _eval_nodes(node.right, [item])
            if not rights:
                continue
            if len(rights) > 1:
                raise _JSONPathEvalError("can only compare one element at a time")
            if _compare(node.operator, lefts[0], rights[0]):
                result.append(item)
    return result


def _eval_recursive(values: list[JSON]) -> list[JSON]:
    result: list[JSON] = []
    for value in values:
        if value is None:
            continue
        children = _children(value)
        if children:
            result.append(value)
            result.extend(_eval_recursive(children))
    return result


def _eval_node(node: _Node, values: list[JSON]) -> list[JSON]:
    if isinstance(node, _Field):
        return [
            value[node.name]
            for value in values
            if isinstance(value, Mapping) and node.name in value
        ]
    if isinstance(node, _Wildcard):
        return [child for value in values if value is not None for child in _children(value)]
    if isinstance(node, _Slice):
        return _eval_slice(node, values)
    if isinstance(node, _Filter):
        return _eval_filter(node, values)
    if isinstance(node, _Recursive):
        return _eval_recursive(values)
    if isinstance(node, _Union):
        return [found for branch in node.branches for found in _eval_nodes(branch, values)]
    if isinstance(node, _Text):
        return [node.value]
    if isinstance(node, _Number):
        return [node.value for _ in values]
    raise _JSONPathEvalError(f"unrecognized identifier {node.name}")


# ---------------------------------------------------------------------------
# Custom resources (apiextensions-apiserver tableconvertor)
# ---------------------------------------------------------------------------

_CRD_DEFAULT_COLUMNS: Final = (
    {
        "name": "Age",
        "type": "date",
        "description": _DOC_CREATED,
        "jsonPath": ".metadata.creationTimestamp",
    },
)


@dataclass(frozen=True)
class _CustomColumn:
    type: str
    nodes: tuple[_Node, ...] | None  # None: valid but unsupported path


class _CustomResourcePrinter:
    def __init__(self, printer_columns: Sequence[Mapping[str, Any]]) -> None:
        declared: Sequence[Mapping[str, Any]] = printer_columns or _CRD_DEFAULT_COLUMNS
        self.columns: list[dict[str, Any]] = [dict(_name_col())]
        self.custom: list[_CustomColumn] = []
        for column in declared:
            column = _map(column)
            path = _str(column.get("jsonPath"))
            nodes: tuple[_Node, ...] | None
            try:
                nodes = _PathParser.parse(path)
            except _JSONPathSyntaxError:
                break  # kube keeps the columns parsed so far
            except _JSONPathUnsupported:
                nodes = None
            type_ = _str(column.get("type"))
            description = _str(column.get("description")) or (
                f"Custom resource definition column (in JSONPath format): {path}"
            )
            self.columns.append(
                _col(
                    _str(column.get("name")),
                    type_,
                    description,
                    fmt=_str(column.get("format")),
                    priority=_int(column.get("priority")),
                )
            )
            self.custom.append(_CustomColumn(type_, nodes))

    def row(self, obj: Mapping[str, Any], now: datetime) -> _Row:
        cells: list[Cell] = [_name(obj)]
        for column in self.custom:
            cells.append(_custom_cell(column, obj, now))
        return _Row(cells)


def _custom_cell(column: _CustomColumn, obj: Mapping[str, Any], now: datetime) -> Cell:
    if column.nodes is None:
        return None
    try:
        found = _eval_nodes(column.nodes, [obj])
    except _JSONPathEvalError:
        return None
    if not found:
        return None
    value = found[0]  # kube only ever shows the first match
    try:
        if column.type == "string":
            return _jsonpath_text(value)
        return _cell_for_json_value(column.type, value, now)
    except ValueError:
        return None


def _cell_for_json_value(type_: str, value: JSON, now: datetime) -> Cell:
    if value is None:
        return None
    if type_ == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return int(value)
    elif type_ == "number":
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
    elif type_ == "boolean":
        if isinstance(value, bool):
            return value
    elif type_ == "string":
        if isinstance(value, str):
            return value
    elif type_ == "date":
        if isinstance(value, str):
            try:
                stamp = _parse_time(value)
            except (ValueError, OverflowError, OSError):
                return "<invalid>"
            if stamp is None:
                return "<unknown>"
            return human_duration((now - stamp).total_seconds())
    return None


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

_INCLUDE_NONE: Final = frozenset({"None"})
_INCLUDE_OBJECT: Final = frozenset({"Object"})
_INCLUDE_METADATA: Final = frozenset({"PartialObjectMetadata", "Metadata"})


def _normalize_group(group: str) -> str:
    return "" if group in ("", "core") else group


def _resolve(
    group: str, plural: str, printer_columns: Sequence[Mapping[str, Any]] | None
) -> tuple[list[dict[str, Any]], Callable[[Mapping[str, Any], datetime], _Row]]:
    printer = _PRINTERS.get((_normalize_group(group), plural))
    if printer is not None:
        return [dict(column) for column in printer.columns], printer.row
    if printer_columns is not None:
        custom = _CustomResourcePrinter(printer_columns)
        return custom.columns, custom.row
    return [dict(column) for column in _DEFAULT_COLUMNS], _print_default


def column_definitions(
    group: str,
    plural: str,
    printer_columns: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The ``columnDefinitions`` kube-apiserver serves for ``group``/``plural``.

    ``group`` is ``""`` (or ``"core"``) for the core API.  ``printer_columns``
    is the CRD version's ``additionalPrinterColumns`` for a custom resource
    (``[]`` when it declares none); it is ignored for built-in resources.  The
    returned dicts are fresh copies.
    """
    columns, _ = _resolve(group, plural, printer_columns)
    return columns


def _row_object(obj: Mapping[str, Any], include_object: str | None) -> tuple[bool, JSON]:
    if include_object is None or include_object in _INCLUDE_NONE:
        return False, None
    if include_object in _INCLUDE_OBJECT:
        return True, obj
    return True, {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    group: str,
    plural: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    include_object: str | None = "PartialObjectMetadata",
    list_meta: Mapping[str, Any] | None = None,
    printer_columns: Sequence[Mapping[str, Any]] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Render ``objects`` of ``group``/``plural`` as a ``meta.k8s.io/v1`` Table.

    ``include_object`` selects each row's ``object``: ``None``/``"None"`` (no
    ``object`` key), ``"Object"`` (the object itself, not copied) or
    ``"PartialObjectMetadata"`` (default; ``"Metadata"`` is accepted too).
    ``list_meta`` becomes the Table's ``metadata`` (``resourceVersion``,
    ``continue``, ...).  ``now`` is the reference time for ages (default: the
    current UTC time; a naive value is taken as UTC).
    """
    valid = _INCLUDE_NONE | _INCLUDE_OBJECT | _INCLUDE_METADATA
    if include_object is not None and include_object not in valid:
        raise ValueError(f"unsupported include_object {include_object!r}")
    if now is None:
        now = datetime.now(_UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=_UTC)
    columns, printer = _resolve(group, plural, printer_columns)

    rows: list[dict[str, Any]] = []
    for obj in objects:
        if not isinstance(obj, Mapping):
            raise TypeError(f"table rows need JSON objects, got {type(obj).__name__}")
        printed = printer(obj, now)
        row: dict[str, Any] = {"cells": printed.cells}
        if printed.conditions:
            row["conditions"] = [dict(condition) for condition in printed.conditions]
        has_object, row_object = _row_object(obj, include_object)
        if has_object:
            row["object"] = row_object
        rows.append(row)

    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta) if list_meta else {},
        "columnDefinitions": columns,
        "rows": rows,
    }
