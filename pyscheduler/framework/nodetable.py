"""The columnar node table: every node's scheduling-relevant state as numpy columns.

One row ("slot") per node. Plugins evaluate a pod against *all* nodes at once with array
operations instead of a per-node Python loop, and WebAssembly fragments receive the same columns.

Columns (``n`` = :attr:`NodeTable.n`, the high-water mark of used slots; a removed node leaves a
hole, ``valid[slot] == False``, which the next new node reuses):

* ``allocatable[n, R]`` and ``requested[n, R]``: int64 per resource, cpu in millicores, other
  resources in integer units; resource column order is :attr:`NodeTable.resources` (cpu, memory,
  ephemeral-storage, pods, then extended resources as they are first seen). The ``pods`` column
  of ``requested`` counts pods.
* ``nonzero[n, 2]``: cpu/memory requested with kube-scheduler's non-zero defaults (for scoring).
* ``valid[n]``, ``unschedulable[n]``.
* Indexes: label key -> value -> boolean row mask, label key -> mask of rows that have the key,
  taint (key, value, effect) -> mask, (protocol, port) -> host IP -> per-row use count.
* Pods per row, and *match counters*: for a label selector over some namespaces, the number of
  matching pods on each row, kept up to date incrementally once someone asked for it (topology
  spread and inter-pod affinity ask the same questions for every pod of a workload).
* Container images (``status.images``, for ImageLocality): image names are interned to small
  ids; each row keeps the ids of the names its node lists (``array('i')``, 4 bytes a name), and
  each id the rows listing it and the image's size, so "which nodes have image X, and how many"
  costs one dict lookup. As kube-scheduler's cache (``addNodeImageStates``), a name's size is
  the one reported by the first node that listed it, kept while any node lists it; ids of names
  no node lists any more are reused.

Every change bumps :attr:`generation`; ``row_generation[slot]`` records the generation at which a
row last changed, so consumers can copy only changed rows. Pods carrying inter-pod affinity terms
have a generation of their own (:attr:`term_generation`, ``term_row_generation[slot]``), bumped
only when such a pod comes or goes: the index of existing pods' terms follows it and does not
look at rows whose other pods changed. ``occupant[slot]`` changes only when a
slot gets a new node or loses its node: an answer computed per row earlier (a fragment's verdicts,
computed off the scheduling loop) still belongs to the same node where it is unchanged.

Amounts are bounded (:data:`~pyscheduler.framework.pod.MAX_QUANTITY` for a node's allocatable
and a pod's request; a node's requested sum saturates at :data:`REQUESTED_LIMIT`), so no sum or
score computed over the columns can overflow int64, whatever the cluster holds.
"""

from __future__ import annotations

import array
import collections
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pyscheduler.api.labels import LabelSelector
from pyscheduler.api.names import (
    MAX_INSTANCE_CPU_ANNOTATION,
    MAX_INSTANCE_MEMORY_ANNOTATION,
    POOL_LABEL,
    PRICE_ANNOTATION,
    TYPE_LABEL,
    TYPE_VIRTUAL_KUBELET,
    virtual_node_name,
)
from pyscheduler.api.quantity import QuantityError, milli_value, parse_quantity, value
from pyscheduler.framework.pod import MAX_QUANTITY, PodInfo, has_affinity_terms
from pyscheduler.framework.volumes import VolumeCatalog

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "REQUESTED_LIMIT",
    "BoolArray",
    "IntArray",
    "LabelColumn",
    "NodeImages",
    "NodeInfo",
    "NodeTable",
    "RowView",
    "Taint",
    "node_info",
]

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = 0, 1, 2, 3
# A node's requested sums stop growing here: (REQUESTED_LIMIT + MAX_QUANTITY) * 100 < 2**63.
REQUESTED_LIMIT = 2**56
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute


@dataclass(frozen=True, slots=True)
class NodeImages:
    """A node's ``status.images`` as the scheduler keeps it: each distinct image name (tag and
    digest forms alike, interned), in the node's order, with the size in bytes of the image it
    names (the first image listing it, as kube's cache takes it).

    Sizes are packed int64 (8 bytes a name instead of a Python int each): a node lists up to
    50 images (the kubelet's ``nodeStatusMaxImages``) of one to a few names, times thousands of
    nodes."""

    names: tuple[str, ...] = ()
    sizes: bytes = b""

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self.names, memoryview(self.sizes).cast("q"), strict=True)

    def __len__(self) -> int:
        return len(self.names)


_NO_IMAGES = NodeImages()


def _node_images(raw: Any) -> NodeImages:
    """``status.images``, forgiving: entries without names are skipped, a size that is not a
    non-negative integer counts as 0 and one above :data:`MAX_QUANTITY` as that much."""
    if not isinstance(raw, list) or not raw:
        return _NO_IMAGES
    sizes: dict[str, int] = {}  # name -> size of the first image listing it, in order
    intern = sys.intern
    for image in raw:
        if not isinstance(image, Mapping):
            continue
        names = image.get("names")
        if not isinstance(names, list):
            continue
        size = image.get("sizeBytes")
        if type(size) is not int or size < 0:
            size = 0
        elif size > MAX_QUANTITY:
            size = MAX_QUANTITY
        for name in names:
            if type(name) is str and name not in sizes:
                sizes[intern(name)] = size
    if not sizes:
        return _NO_IMAGES
    return NodeImages(tuple(sizes), array.array("q", sizes.values()).tobytes())


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]
    unschedulable: bool
    #: False when the node reports condition Ready False or Unknown (a node that reports no
    #: Ready condition at all counts as ready).
    ready: bool = True
    #: The cloud pool a virtual node stands for (None: a real node); see :func:`node_info`.
    pool: str | None = None
    #: A virtual node's pool: the largest instance it runs (cpu in millicores, memory in
    #: bytes; 0: not reported yet) and its price per CPU-hour.
    max_instance_cpu: int = 0
    max_instance_memory: int = 0
    price_per_cpu_hour: float = 0.0
    #: ``status.images`` (for ImageLocality).
    images: NodeImages = _NO_IMAGES


def _amount(raw: Any, cpu: bool) -> int:
    """A quantity as the table counts it; 0 when it cannot be read, at most MAX_QUANTITY."""
    try:
        q = parse_quantity(raw)
    except (QuantityError, TypeError):
        return 0
    return max(0, min(milli_value(q) if cpu else value(q), MAX_QUANTITY))


def node_info(obj: Mapping[str, Any]) -> NodeInfo:
    """Parse a Node; unparseable allocatable quantities count as zero (the node fits nothing
    that needs them) rather than failing the whole node, and amounts above
    :data:`MAX_QUANTITY` count as that much (more than any pod may ask).

    A node labelled ``type=virtual-kubelet`` and ``wssp/cloud-pool=<pool>`` and named
    ``wssp-virtual-<pool>`` is the virtual node of that pool (what
    :mod:`pyscheduler.virtual.node` registers); its annotations carry the pool's per-instance
    limits and price."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    alloc_raw = status.get("allocatable") or status.get("capacity") or {}
    allocatable: dict[str, int] = {}
    for name, raw in alloc_raw.items():
        try:
            q = parse_quantity(raw)
        except (QuantityError, TypeError):
            q = parse_quantity(0)
        amount = milli_value(q) if name == "cpu" else value(q)
        allocatable[str(name)] = min(amount, MAX_QUANTITY)
    taints = tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""),
                         str(t.get("effect", "")))
                   for t in spec.get("taints") or () if isinstance(t, Mapping))
    ready = True
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    name = str(meta.get("name", ""))
    labels = dict(meta.get("labels") or {})
    pool = labels.get(POOL_LABEL)
    extra: dict[str, Any] = {}
    if pool and labels.get(TYPE_LABEL) == TYPE_VIRTUAL_KUBELET and \
            name == virtual_node_name(pool):
        notes = meta.get("annotations") or {}
        try:
            price = float(notes.get(PRICE_ANNOTATION) or 0.0)
        except (TypeError, ValueError):
            price = 0.0
        extra = {"pool": pool,
                 "max_instance_cpu": _amount(notes.get(MAX_INSTANCE_CPU_ANNOTATION), True),
                 "max_instance_memory": _amount(notes.get(MAX_INSTANCE_MEMORY_ANNOTATION),
                                                False),
                 "price_per_cpu_hour": price if price >= 0 and price == price else 0.0}
    return NodeInfo(name=name, labels=labels, taints=taints, allocatable=allocatable,
                    unschedulable=bool(spec.get("unschedulable")), ready=ready,
                    images=_node_images(status.get("images")), **extra)


class LabelColumn(Mapping[str, BoolArray]):
    """One label key over all rows: a value id per row, read as ``value -> row mask``.

    Masks are computed on demand (one comparison) instead of being stored per value, so a key
    with a value per node (``kubernetes.io/hostname``) costs one int32 column, not one boolean
    column per node. Only values that some node currently has are listed.
    """

    __slots__ = ("ids", "ids_by_value", "counts", "live")

    def __init__(self, capacity: int) -> None:
        self.ids: npt.NDArray[np.int32] = np.full(capacity, -1, np.int32)
        self.ids_by_value: dict[str, int] = {}
        self.counts: list[int] = []
        self.live = 0

    def set(self, slot: int, value: str) -> None:
        self.clear(slot)
        i = self.ids_by_value.get(value)
        if i is None:
            i = self.ids_by_value[value] = len(self.counts)
            self.counts.append(0)
        if self.counts[i] == 0:
            self.live += 1
        self.counts[i] += 1
        self.ids[slot] = i

    def clear(self, slot: int) -> None:
        old = int(self.ids[slot])
        if old >= 0:
            self.counts[old] -= 1
            if self.counts[old] == 0:
                self.live -= 1
            self.ids[slot] = -1

    def grow(self, capacity: int) -> None:
        ids = np.full(capacity, -1, np.int32)
        ids[: len(self.ids)] = self.ids
        self.ids = ids

    def __contains__(self, value: object) -> bool:
        i = self.ids_by_value.get(value) if isinstance(value, str) else None
        return i is not None and self.counts[i] > 0

    def __getitem__(self, value: str) -> BoolArray:
        if value not in self:
            raise KeyError(value)
        mask: BoolArray = self.ids == self.ids_by_value[value]
        return mask

    def __iter__(self) -> Iterator[str]:
        counts = self.counts
        return (v for v, i in self.ids_by_value.items() if counts[i] > 0)

    def __len__(self) -> int:
        return self.live


class _MatchCounter:
    __slots__ = ("selector", "namespaces", "counts")

    def __init__(self, selector: LabelSelector, namespaces: frozenset[str] | None,
                 capacity: int) -> None:
        self.selector = selector
        self.namespaces = namespaces
        self.counts = np.zeros(capacity, np.int64)

    def matches(self, pod: PodInfo) -> bool:
        return (self.namespaces is None or pod.namespace in self.namespaces) \
            and self.selector.matches(pod.labels)


class NodeTable:
    """Columns and indexes over all nodes. Not thread-safe: one owner (the scheduler loop)."""

    MAX_COUNTERS = 512
    CHANGE_LOG = 1024  # slots of the latest changes kept for changed_since()

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.n = 0
        self.generation = 0
        self.resources: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        r = len(self.resources)
        # Column-major: plugins read whole resource columns, which are then contiguous.
        self.allocatable: IntArray = np.zeros((capacity, r), np.int64, order="F")
        self.requested: IntArray = np.zeros((capacity, r), np.int64, order="F")
        self.nonzero: IntArray = np.zeros((capacity, 2), np.int64, order="F")
        self.valid: BoolArray = np.zeros(capacity, np.bool_)
        self.unschedulable: BoolArray = np.zeros(capacity, np.bool_)
        self.row_generation: IntArray = np.zeros(capacity, np.int64)
        self.term_generation = 0
        self.term_row_generation: IntArray = np.zeros(capacity, np.int64)
        self.occupant: IntArray = np.zeros(capacity, np.int64)  # bumped when a slot's node changes
        # Virtual nodes (cloud pools) are rows like any other, with what only they have.
        self.virtual: BoolArray = np.zeros(capacity, np.bool_)
        self.not_ready: BoolArray = np.zeros(capacity, np.bool_)
        self.max_instance: IntArray = np.zeros((capacity, 2), np.int64, order="F")  # cpu, mem
        self.price: npt.NDArray[np.float64] = np.zeros(capacity, np.float64)
        # Virtual rows: instance sizes their pool refused lately, (cpu, memory, until) each,
        # until being a time.monotonic() deadline.
        self.refusals: dict[int, list[tuple[int, int, float]]] = {}
        self.virtual_count = 0
        # The slot of each of the latest changes: change g (generation g) is at g - _log_base - 1.
        self._log: list[int] = []
        self._log_base = 0
        self.names: list[str] = []
        self.slots: dict[str, int] = {}
        self.infos: list[NodeInfo | None] = []
        self.pods: list[dict[str, PodInfo]] = []
        # Per row, how many of its pods carry inter-pod affinity terms (most rows: none, which
        # lets the affinity index skip them without looking at their pods).
        self.term_pods: list[int] = []
        # Per row, how many of its pods mount PersistentVolumeClaims; and across rows, how
        # many pods use each claim (namespace, name) — for the volume plugins.
        self.claim_pods: list[int] = []
        # Per row, how many claims its pods mount (an upper bound of the volumes attached).
        self.claim_count: IntArray = np.zeros(capacity, np.int64)
        self.claim_users: collections.Counter[tuple[str, str]] = collections.Counter()
        # Bumped whenever a node name gets or loses a slot (for indexes keyed by node name).
        self.layout_generation = 0
        # The claims, volumes, classes and CSI nodes the volume plugins read (fed by the
        # scheduler's informers), with the volumes this scheduler assumed for claims.
        self.volumes = VolumeCatalog()
        # How many pods of each priority the rows hold (preemption's shortcut: no pod of a
        # lower priority anywhere, no victim anywhere).
        self.priorities: collections.Counter[int] = collections.Counter()
        self._free: list[int] = []
        self.label_index: dict[str, LabelColumn] = {}
        self.label_keys: dict[str, BoolArray] = {}
        self.taint_index: dict[Taint, BoolArray] = {}
        self.port_index: dict[tuple[str, int], dict[str, IntArray]] = {}
        self.label_generation = 0
        self._domains: dict[str, tuple[int, npt.NDArray[np.int32], list[str]]] = {}
        self._counters: collections.OrderedDict[tuple[str, frozenset[str] | None],
                                                 _MatchCounter] = collections.OrderedDict()
        # Images: name -> id; per id its name ("" when free), size, the rows listing it and a
        # numpy copy of those rows made when first asked for (None: stale); per row its ids.
        self._image_ids: dict[str, int] = {}
        self._image_names: list[str] = []
        self._image_sizes: list[int] = []
        self._image_slots: list[array.array[int]] = []
        self._image_rows: list[npt.NDArray[np.intp] | None] = []
        self._free_image_ids: list[int] = []
        # Rows listing an image at another size than the index keeps (another node's, listed
        # first): kube re-adds a node's images on every update, even an unchanged one, so
        # such a row, once it is an image's only holder, gives the image its own size then.
        self._image_size_differs: set[int] = set()
        self.node_images: list[array.array[int]] = []

    # -- shape ---------------------------------------------------------------------------------

    def _grow_rows(self) -> None:
        cap = self.capacity * 2

        def grow(a: Any) -> Any:
            out = np.zeros((cap, *a.shape[1:]), a.dtype, order="F" if a.ndim == 2 else "C")
            out[: self.capacity] = a
            return out

        self.allocatable, self.requested = grow(self.allocatable), grow(self.requested)
        self.nonzero, self.valid = grow(self.nonzero), grow(self.valid)
        self.unschedulable, self.row_generation = grow(self.unschedulable), \
            grow(self.row_generation)
        self.occupant = grow(self.occupant)
        self.term_row_generation = grow(self.term_row_generation)
        self.claim_count = grow(self.claim_count)
        self.virtual, self.not_ready = grow(self.virtual), grow(self.not_ready)
        self.max_instance, self.price = grow(self.max_instance), grow(self.price)
        for column in self.label_index.values():
            column.grow(cap)
        for k in list(self.label_keys):
            self.label_keys[k] = grow(self.label_keys[k])
        for t in list(self.taint_index):
            self.taint_index[t] = grow(self.taint_index[t])
        for ips in self.port_index.values():
            for ip in list(ips):
                ips[ip] = grow(ips[ip])
        for c in self._counters.values():
            c.counts = grow(c.counts)
        self.capacity = cap
        self._domains.clear()

    def resource(self, name: str) -> int:
        """Column of a resource, adding a column for a resource seen for the first time."""
        index = self.resource_index.get(name)
        if index is None:
            index = len(self.resources)
            self.resources.append(name)
            self.resource_index[name] = index
            pad = np.zeros((self.capacity, 1), np.int64)
            self.allocatable = np.asfortranarray(np.hstack([self.allocatable, pad]))
            self.requested = np.asfortranarray(np.hstack([self.requested, pad]))
        return index

    def request_vector(self, pod: PodInfo) -> IntArray:
        """The pod's requests as a row over :attr:`resources` (pods column = 1)."""
        for name in pod.requests:
            self.resource(name)
        vec = np.zeros(len(self.resources), np.int64)
        for name, amount in pod.requests.items():
            vec[self.resource_index[name]] = amount
        vec[PODS] = 1
        return vec

    def _touch(self, slot: int) -> None:
        self.generation += 1
        self.row_generation[slot] = self.generation
        log = self._log
        log.append(slot)
        if len(log) > 2 * self.CHANGE_LOG:
            del log[: self.CHANGE_LOG]
            self._log_base += self.CHANGE_LOG

    def _touch_terms(self, slot: int) -> None:
        self.term_generation += 1
        self.term_row_generation[slot] = self.term_generation

    def changed_since(self, generation: int) -> npt.NDArray[np.intp]:
        """The rows changed after ``generation``, ascending, each once (cheap for the last
        few changes, a scan of ``row_generation`` for anything older)."""
        start = generation - self._log_base
        if start < 0 or generation < 0:
            return np.flatnonzero(self.row_generation[: self.n] > generation)
        recent = self._log[start:]
        if len(recent) == 1:
            return np.array(recent, np.intp)
        return np.array(sorted(set(recent)), np.intp)

    # -- nodes ---------------------------------------------------------------------------------

    def set_node(self, info: NodeInfo) -> int:
        """Add or update a node; returns its slot."""
        slot = self.slots.get(info.name)
        if slot is None:
            if self._free:
                slot = self._free.pop()
            else:
                if self.n == self.capacity:
                    self._grow_rows()
                slot = self.n
                self.n += 1
                self.names.append("")
                self.infos.append(None)
                self.pods.append({})
                self.term_pods.append(0)
                self.claim_pods.append(0)
                self.node_images.append(array.array("i"))
            self.slots[info.name] = slot
            self.layout_generation += 1
            self.names[slot] = info.name
            self.valid[slot] = True
            self.occupant[slot] += 1
        old = self.infos[slot]
        self.infos[slot] = info
        self.unschedulable[slot] = info.unschedulable
        self.not_ready[slot] = not info.ready
        self.virtual_count += int(info.pool is not None) - int(bool(self.virtual[slot]))
        self.virtual[slot] = info.pool is not None
        self.max_instance[slot] = (info.max_instance_cpu, info.max_instance_memory)
        self.price[slot] = info.price_per_cpu_hour
        for name in info.allocatable:
            self.resource(name)
        row = np.zeros(len(self.resources), np.int64)
        for name, amount in info.allocatable.items():
            row[self.resource_index[name]] = amount
        self.allocatable[slot] = row
        if old is None or old.labels != info.labels:
            self._index_labels(slot, old.labels if old else {}, info.labels)
        if old is None or old.taints != info.taints:
            for t in old.taints if old else ():
                self.taint_index[t][slot] = False
            for t in info.taints:
                mask = self.taint_index.get(t)
                if mask is None:
                    mask = self.taint_index[t] = np.zeros(self.capacity, np.bool_)
                mask[slot] = True
        if old is None or old.images != info.images or slot in self._image_size_differs:
            self._index_images(slot, info.images)
        self._touch(slot)
        return slot

    def _index_labels(self, slot: int, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        for k in old:
            if k not in new:
                self.label_index[k].clear(slot)
                self.label_keys[k][slot] = False
        for k, v in new.items():
            if old.get(k) != v:
                column = self.label_index.get(k)
                if column is None:
                    column = self.label_index[k] = LabelColumn(self.capacity)
                column.set(slot, v)
                has = self.label_keys.get(k)
                if has is None:
                    has = self.label_keys[k] = np.zeros(self.capacity, np.bool_)
                has[slot] = True
        self.label_generation += 1
        self._domains.clear()

    def _index_images(self, slot: int, images: NodeImages) -> None:
        """Make ``images`` the names the node in ``slot`` lists. Like kube's ``UpdateNode``
        (every old name dropped, then every new one added) without touching names listed
        before and after: such a name keeps its size unless this node is its only holder, in
        which case kube drops and re-creates it with the node's new size."""
        old_ids = self.node_images[slot]
        self._image_size_differs.discard(slot)
        if not old_ids and not images:
            return
        before = set(old_ids)
        listed: set[int] = set()
        ids, holders, rows, sizes = (self._image_ids, self._image_slots, self._image_rows,
                                     self._image_sizes)
        differs = False
        for name, size in images:
            i = ids.get(name)
            if i is None:
                i = self._new_image(name, size)
            elif i in listed:
                continue  # a name given twice: the first one counts
            elif i in before:
                if len(holders[i]) == 1:
                    sizes[i] = size
                listed.add(i)
                differs = differs or sizes[i] != size
                continue
            differs = differs or sizes[i] != size
            listed.add(i)
            holders[i].append(slot)
            rows[i] = None
        for i in before - listed:
            self._drop_image(i, slot)
        self.node_images[slot] = array.array("i", listed)
        if differs:
            self._image_size_differs.add(slot)

    def _new_image(self, name: str, size: int) -> int:
        if self._free_image_ids:
            i = self._free_image_ids.pop()
            self._image_names[i], self._image_sizes[i] = name, size
        else:
            i = len(self._image_names)
            self._image_names.append(name)
            self._image_sizes.append(size)
            self._image_slots.append(array.array("i"))
            self._image_rows.append(None)
        self._image_ids[name] = i
        return i

    def _drop_image(self, i: int, slot: int) -> None:
        slots = self._image_slots[i]
        at = slots.index(slot)
        slots[at] = slots[-1]
        slots.pop()
        self._image_rows[i] = None
        if not slots:  # no node lists it any more: forget the name, reuse the id
            del self._image_ids[self._image_names[i]]
            self._image_names[i] = ""
            self._free_image_ids.append(i)

    def image_nodes(self, name: str) -> tuple[int, npt.NDArray[np.intp]] | None:
        """The size of image ``name`` and the rows of the nodes that list it (in no particular
        order), or None when no node lists it."""
        i = self._image_ids.get(name)
        if i is None:
            return None
        rows = self._image_rows[i]
        if rows is None:
            rows = self._image_rows[i] = np.array(self._image_slots[i], np.intp)
        return self._image_sizes[i], rows

    def remove_node(self, name: str) -> list[PodInfo]:
        """Remove a node; returns the pods that were on it (they stay known to the caller)."""
        slot = self.slots.pop(name, None)
        self.layout_generation += 1
        if slot is None:
            return []
        info = self.infos[slot]
        pods = list(self.pods[slot].values())
        for pod in pods:
            self._unaccount(slot, pod)
        if info is not None:
            self._index_labels(slot, info.labels, {})
            for t in info.taints:
                self.taint_index[t][slot] = False
        self._index_images(slot, _NO_IMAGES)
        self.infos[slot] = None
        self.names[slot] = ""
        self.valid[slot] = False
        self.unschedulable[slot] = False
        self.allocatable[slot] = 0
        self.requested[slot] = 0
        self.nonzero[slot] = 0
        self.virtual_count -= int(bool(self.virtual[slot]))
        self.virtual[slot] = self.not_ready[slot] = False
        self.max_instance[slot] = 0
        self.price[slot] = 0.0
        self.refusals.pop(slot, None)
        self.pods[slot] = {}
        self.term_pods[slot] = 0
        self.claim_pods[slot] = 0
        self.claim_count[slot] = 0
        self.occupant[slot] += 1
        self._free.append(slot)
        self._touch(slot)
        return pods

    def refuse(self, name: str, cpu: int, memory: int, until: float) -> None:
        """The pool of virtual node ``name`` refused an instance of this size: pods at least
        as large skip it until ``until`` (``time.monotonic()``)."""
        slot = self.slots.get(name)
        if slot is None or not self.virtual[slot]:
            return
        self.refusals.setdefault(slot, []).append((cpu, memory, until))
        self._touch(slot)

    def refused(self, slot: int, cpu: int, memory: int, now: float) -> bool:
        """Whether the pool of ``slot`` refused an instance this large lately."""
        entries = self.refusals.get(slot)
        if not entries:
            return False
        live = [e for e in entries if e[2] > now]
        if len(live) != len(entries):
            if live:
                self.refusals[slot] = live
            else:
                del self.refusals[slot]
        return any(cpu >= c and memory >= m for c, m, _ in live)

    # -- pods ----------------------------------------------------------------------------------

    def add_pod(self, slot: int, pod: PodInfo) -> None:
        """Count ``pod`` on the node in ``slot`` (idempotent by uid)."""
        if pod.uid in self.pods[slot]:
            return
        vec = self.request_vector(pod)  # may add resource columns: take it before indexing
        self.pods[slot][pod.uid] = pod
        row = self.requested[slot]
        row += vec
        if row.max() > REQUESTED_LIMIT:
            np.minimum(row, REQUESTED_LIMIT, out=row)
        nonzero = self.nonzero[slot]
        nonzero[0] = min(int(nonzero[0]) + pod.nonzero_cpu, REQUESTED_LIMIT)
        nonzero[1] = min(int(nonzero[1]) + pod.nonzero_memory, REQUESTED_LIMIT)
        if has_affinity_terms(pod):
            self.term_pods[slot] += 1
            self._touch_terms(slot)
        if pod.claims:
            self.claim_pods[slot] += 1
            self.claim_count[slot] += len(pod.claims)
            for claim in pod.claims:
                self.claim_users[(pod.namespace, claim)] += 1
        self.priorities[pod.priority] += 1
        for hp in pod.host_ports:
            ips = self.port_index.setdefault((hp.protocol, hp.port), {})
            counts = ips.get(hp.ip)
            if counts is None:
                counts = ips[hp.ip] = np.zeros(self.capacity, np.int64)
            counts[slot] += 1
        for c in self._counters.values():
            if c.matches(pod):
                c.counts[slot] += 1
        self._touch(slot)

    def remove_pod(self, slot: int, uid: str) -> PodInfo | None:
        pod = self.pods[slot].pop(uid, None)
        if pod is not None:
            self._unaccount(slot, pod)
            self._touch(slot)
        return pod

    def _unaccount(self, slot: int, pod: PodInfo) -> None:
        vec = self.request_vector(pod)
        row = self.requested[slot]
        row -= vec
        if row.min() < 0:  # only after a saturated sum (REQUESTED_LIMIT)
            np.maximum(row, 0, out=row)
        nonzero = self.nonzero[slot]
        nonzero[0] = max(int(nonzero[0]) - pod.nonzero_cpu, 0)
        nonzero[1] = max(int(nonzero[1]) - pod.nonzero_memory, 0)
        if has_affinity_terms(pod):
            self.term_pods[slot] -= 1
            self._touch_terms(slot)
        if pod.claims:
            self.claim_pods[slot] -= 1
            self.claim_count[slot] -= len(pod.claims)
            for claim in pod.claims:
                key = (pod.namespace, claim)
                if self.claim_users[key] > 1:
                    self.claim_users[key] -= 1
                else:
                    del self.claim_users[key]
        left = self.priorities[pod.priority] - 1
        if left:
            self.priorities[pod.priority] = left
        else:
            del self.priorities[pod.priority]
        for hp in pod.host_ports:
            self.port_index[(hp.protocol, hp.port)][hp.ip][slot] -= 1
        for c in self._counters.values():
            if c.matches(pod):
                c.counts[slot] -= 1

    def all_pods(self) -> Iterable[tuple[int, PodInfo]]:
        for slot in range(self.n):
            for pod in self.pods[slot].values():
                yield slot, pod

    # -- derived views -------------------------------------------------------------------------

    def label_mask(self, key: str, value: str) -> BoolArray:
        """Rows whose label ``key`` equals ``value`` (length n)."""
        column = self.label_index.get(key)
        if column is None or value not in column:
            return np.zeros(self.n, np.bool_)
        mask: BoolArray = column.ids[: self.n] == column.ids_by_value[value]
        return mask

    def has_label(self, key: str) -> BoolArray:
        mask = self.label_keys.get(key)
        return mask[: self.n] if mask is not None else np.zeros(self.n, np.bool_)

    def domains(self, key: str) -> tuple[npt.NDArray[np.int32], list[str]]:
        """Topology domains of label ``key``: a domain id per row (-1: no such label) and the
        domain values by id. Cached until labels change."""
        cached = self._domains.get(key)
        if cached is not None and cached[0] == self.label_generation:
            return cached[1][: self.n], cached[2]
        ids = np.full(self.capacity, -1, np.int32)
        values: list[str] = []
        column = self.label_index.get(key)
        if column is not None:
            # Renumber the values some node has, in order of first appearance.
            remap = np.full(len(column.counts) + 1, -1, np.int32)
            for v, i in column.ids_by_value.items():
                if column.counts[i] > 0:
                    remap[i] = len(values)
                    values.append(v)
            ids = remap[column.ids]  # id -1 picks the trailing -1
        self._domains[key] = (self.label_generation, ids, values)
        return ids[: self.n], values

    def count_matching(self, selector: LabelSelector, selector_key: str,
                       namespaces: frozenset[str] | None) -> IntArray:
        """Per row, how many pods match ``selector`` in ``namespaces`` (None: every namespace).

        The first call for a (selector, namespaces) pair counts every pod; afterwards the count
        is maintained incrementally as pods come and go.
        """
        key = (selector_key, namespaces)
        c = self._counters.get(key)
        if c is None:
            c = _MatchCounter(selector, namespaces, self.capacity)
            for slot, pod in self.all_pods():
                if c.matches(pod):
                    c.counts[slot] += 1
            self._counters[key] = c
            if len(self._counters) > self.MAX_COUNTERS:
                self._counters.popitem(last=False)
        else:
            self._counters.move_to_end(key)
        return c.counts[: self.n]

    def port_conflicts(self, protocol: str, port: int, ip: str) -> BoolArray:
        """Rows where a pod already uses host port (protocol, port) on an overlapping address."""
        ips = self.port_index.get((protocol, port))
        out = np.zeros(self.n, np.bool_)
        if not ips:
            return out
        for used_ip, counts in ips.items():
            if ip == "0.0.0.0" or used_ip == "0.0.0.0" or used_ip == ip:
                out |= counts[: self.n] > 0
        return out


class _SlicedMasks(Mapping[Any, Any]):
    """A read-only mapping of row-indexed arrays, each restricted to ``rows``."""

    __slots__ = ("_base", "_rows")

    def __init__(self, base: Mapping[Any, Any], rows: npt.NDArray[np.intp]) -> None:
        self._base = base
        self._rows = rows

    def __getitem__(self, key: Any) -> Any:
        value = self._base[key]
        if isinstance(value, Mapping):
            return _SlicedMasks(value, self._rows)
        return value[self._rows]

    def __iter__(self) -> Any:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)


class RowView:
    """Some rows of a :class:`NodeTable`, with the table's shape (``n`` = number of rows).

    Plugins whose verdict for a node depends only on that node's row ("row-local" plugins) can
    run on a view holding just the rows that changed since their last run, instead of on every
    node; the pipeline's incremental path relies on this.
    """

    def __init__(self, table: NodeTable, rows: npt.NDArray[np.intp]) -> None:
        self.base = table
        self.rows = rows
        self.n = len(rows)
        self.capacity = self.n
        self.generation = table.generation
        self.resources = table.resources
        self.resource_index = table.resource_index
        self.allocatable = table.allocatable[rows]
        self.requested = table.requested[rows]
        self.nonzero = table.nonzero[rows]
        self.valid = table.valid[rows]
        self.unschedulable = table.unschedulable[rows]
        self.virtual = table.virtual[rows]
        self.not_ready = table.not_ready[rows]
        self.max_instance = table.max_instance[rows]
        self.price = table.price[rows]
        self.names = [table.names[r] for r in rows.tolist()]
        self.slots = {name: i for i, name in enumerate(self.names) if name}
        self.infos = [table.infos[r] for r in rows.tolist()]
        self.pods = [table.pods[r] for r in rows.tolist()]
        self.term_pods = [table.term_pods[r] for r in rows.tolist()]
        self.claim_pods = [table.claim_pods[r] for r in rows.tolist()]
        self.claim_count = table.claim_count[rows]
        self.claim_users = table.claim_users
        self.volumes = table.volumes
        self.layout_generation = table.layout_generation
        self.label_index = _SlicedMasks(table.label_index, rows)
        self.label_keys = _SlicedMasks(table.label_keys, rows)
        self.taint_index = _SlicedMasks(table.taint_index, rows)
        self.port_index = _SlicedMasks(table.port_index, rows)

    def request_vector(self, pod: PodInfo) -> IntArray:
        return self.base.request_vector(pod)

    def label_mask(self, key: str, value: str) -> BoolArray:
        column = self.base.label_index.get(key)
        if column is None or value not in column:
            return np.zeros(self.n, np.bool_)
        mask: BoolArray = column.ids[self.rows] == column.ids_by_value[value]
        return mask

    def has_label(self, key: str) -> BoolArray:
        mask = self.base.label_keys.get(key)
        return mask[self.rows] if mask is not None else np.zeros(self.n, np.bool_)

    def port_conflicts(self, protocol: str, port: int, ip: str) -> BoolArray:
        return self.base.port_conflicts(protocol, port, ip)[self.rows]
