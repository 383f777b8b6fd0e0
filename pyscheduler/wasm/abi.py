"""The host side of fragment ABI v1 (``fragments/ABI.md``): the node table resident in guest memory.

A :class:`Guest` is one instance of a fragment with the scheduler's :class:`NodeTable` mirrored
into buffers the guest allocated. Per pod it brings the mirror up to date — only rows whose
``row_generation`` moved since the last call are rewritten, with one numpy assignment per column —
writes the pod record and the per-pod columns, and makes one call per stage over every node.
Outputs are read straight from guest memory and checked (reason ids, score range) before they
reach the pipeline.

Minor 3 adds the lifecycle stages (:data:`NEW_STAGES`: prefilter, postfilter, reserve, unreserve,
permit, prebind, postbind). Each is one call for one pod (:meth:`Guest.call_stage`) whose answer
is a code, a number, a message and command lines, read back and checked against the stage's
rules into a :class:`StageAnswer`. What the answer then means for the pod (allowlists, waits,
real nodes) is the host's business: this module only refuses answers no stage can give.

The guest's view of the table is fixed at instantiation: ``capacity`` rows, ``R`` resources and
``label_capacity`` label key columns. When the table outgrows any of them the caller creates a
fresh :class:`Guest` (:class:`Resize`), which is also what happens after any failed call: an
instance that trapped is never called again.

Threads: the work is split so that guest code never runs on the scheduling loop. Constructing a
:class:`Guest` (instantiation and ``wssp_init``) and the stage calls (:meth:`Guest.call_filter`,
:meth:`Guest.call_score`) touch only guest memory; :meth:`Guest.attach` and :meth:`Guest.begin`
read the node table and run no guest code. The scheduler runs the former on the fragment's
worker thread and the latter on the loop, never both at once for one guest.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import orjson

from pyscheduler.api.validation import is_valid_label_value
from pyscheduler.api.names import PROVIDER_TAINT_KEY
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.pod import NodeSelectorRequirement, PodInfo
from pyscheduler.wasm import binary
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.vm import Instance, Module

__all__ = [
    "ABI_MAJOR",
    "ABI_MINOR",
    "ALL_ROWS",
    "CTX_SIZE",
    "EXPORT_SIGNATURES",
    "Guest",
    "MAX_MESSAGE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_OUTPUT_LINES",
    "NEW_STAGES",
    "NO_ROW",
    "PERMIT_WAIT",
    "POSTFILTER_NOMINATE",
    "PREFILTER_REJECT",
    "PREFILTER_RESTRICT",
    "Resize",
    "STAGE_IDS",
    "StageAnswer",
    "TableShape",
    "abi_marker",
    "check_module",
    "exported_stages",
]

ABI_MAJOR = 1
ABI_MINOR = 3  # the newest minor this host speaks (ABI.md §8)
CTX_SIZE = 256
NAME_FIELD = "metadata.name"
MAX_SCORE = 100

# Context offsets (ABI.md §4).
_ABI, _CAPACITY, _COUNT, _NRES, _RES_NAMES, _RES_NAMES_LEN = 0, 4, 8, 12, 16, 20
_ALLOC, _REQ, _FLAGS, _NLABELS, _LABEL_CAP, _LABEL_KEYS, _LABEL_KEYS_LEN = 24, 28, 32, 36, 40, 44, 48
_LABELS, _LABEL_VALUES, _NODE_NAMES, _POD, _POD_LEN, _POD_TAINTS = 52, 56, 60, 64, 68, 72
_CANDIDATES, _VERDICTS, _SCORES, _GENERATION, _STAGE = 76, 80, 84, 88, 92
_CHANGED, _N_CHANGED, _HOST_MINOR = 96, 100, 104
_NODE_ROW, _ANSWER, _ANSWER_VALUE, _MESSAGE, _MESSAGE_LEN = 108, 112, 116, 120, 124
_REASONS, _REASONS_LEN, _WANT_LABELS, _WANT_LABELS_LEN = 128, 132, 136, 140
_OUTPUT, _OUTPUT_LEN, _WAITING, _WAITING_LEN, _PREFILTER_ROWS, _CAUSE = 144, 148, 152, 156, 160, 164
_NOW_MS = 168  # i64

FLAG_PRESENT, FLAG_UNSCHEDULABLE, FLAG_NOT_READY, FLAG_VIRTUAL = 1, 2, 4, 8
_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")
_CORDON_TAINT = "node.kubernetes.io/unschedulable"
POD_TAINTED, POD_CORDONED = 1, 2
_OPS = {"In": 0, "NotIn": 1, "Exists": 2, "DoesNotExist": 3, "Gt": 4, "Lt": 5}
_STAGE_INIT, _STAGE_FILTER, _STAGE_SCORE = 0, 1, 2
ALL_ROWS = 0xFFFFFFFF  # n_changed: every row may have changed (ABI.md §4.3)
NO_ROW = 0xFFFFFFFF  # node_row outside reserve..postbind (ABI.md §4)

#: The lifecycle stages of minor 3 (ABI.md §9), each served by the export ``wssp_<stage>``.
NEW_STAGES: Final[tuple[str, ...]] = (
    "prefilter", "postfilter", "reserve", "unreserve", "permit", "prebind", "postbind")
#: The context's ``stage`` value during each call.
STAGE_IDS: Final[Mapping[str, int]] = {
    "init": _STAGE_INIT, "filter": _STAGE_FILTER, "score": _STAGE_SCORE, "prefilter": 3,
    "postfilter": 4, "reserve": 5, "unreserve": 6, "permit": 7, "prebind": 8, "postbind": 9}
# The highest answer code of each stage; None: the answer is ignored (a notification).
_MAX_ANSWER: dict[str, int | None] = {
    "prefilter": 2, "postfilter": 4, "reserve": 1, "unreserve": None, "permit": 2,
    "prebind": 1, "postbind": None}
# The command verbs each stage may write (ABI.md §9.2).
_VERBS: dict[str, tuple[str, ...]] = {
    "prefilter": ("allow", "reject"), "postfilter": ("allow", "reject"),
    "reserve": ("allow", "reject"), "unreserve": ("allow", "reject"),
    "permit": ("allow", "reject"), "prebind": ("label", "annotation"), "postbind": ()}
# The answers the host reads more than the range of (ABI.md §9.2).
PREFILTER_REJECT, PREFILTER_RESTRICT = 1, 2
POSTFILTER_NOMINATE = 4
PERMIT_WAIT = 2
MAX_MESSAGE_BYTES = 1024
MAX_OUTPUT_BYTES = 64 * 1024
MAX_OUTPUT_LINES = 1000

#: The signature every ``wssp_*`` function export must have (the marker is checked apart), in
#: the order of a pod's pipeline.
EXPORT_SIGNATURES: Final[Mapping[str, binary.FuncSig]] = {
    "wssp_alloc": binary.FuncSig((binary.I32,), (binary.I32,)),
    "wssp_init": binary.FuncSig((binary.I32, binary.I32, binary.I32), (binary.I32,)),
    **{f"wssp_{stage}": binary.FuncSig((binary.I32,), (binary.I32,)) for stage in (
        "prefilter", "filter", "score", "postfilter", "reserve", "unreserve", "permit",
        "prebind", "postbind")},
}
# C0 and C1 control characters (and DEL), shown as spaces in a stage's message.
_CONTROLS = {c: " " for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}

LogFn = Callable[[int, bytes], None]


@dataclass(frozen=True, slots=True)
class TableShape:
    """What an instance's buffers are sized for: rows and resource columns."""

    capacity: int
    resources: tuple[str, ...]

    @classmethod
    def of(cls, table: NodeTable) -> TableShape:
        return cls(table.capacity, tuple(table.resources))


@dataclass(frozen=True, slots=True)
class StageAnswer:
    """What one call of a lifecycle stage answered, checked (ABI.md §9).

    ``code`` is the stage's answer (0 for unreserve and postbind, whose answer is ignored);
    ``value`` the number going with it (postfilter's nominated row, permit's wait in
    milliseconds); ``message`` the guest's reason, sanitized. ``commands`` are the output lines
    as (verb, argument): ``allow``/``reject`` with a uid, ``label``/``annotation`` with the raw
    ``key=value`` text (the host checks keys and values). ``rows`` is set for prefilter's answer
    2 only: over rows 0..N of the call, True where the guest kept the row a candidate."""

    stage: str
    code: int
    value: int = 0
    message: str = ""
    commands: tuple[tuple[str, str], ...] = ()
    rows: BoolArray | None = field(default=None, compare=False)  # (arrays do not compare)


def exported_stages(module: Module) -> frozenset[str]:
    """The lifecycle stages (:data:`NEW_STAGES`) ``module`` takes: those it exports a function
    ``wssp_<stage>`` for."""
    exports = module.exports
    return frozenset(s for s in NEW_STAGES if exports.get(f"wssp_{s}") == "func")


class Resize(Exception):
    """The table no longer fits this instance's buffers: create a fresh :class:`Guest`."""


def abi_marker(exports: Mapping[str, str]) -> int:
    """The ABI major version a module declares; :class:`LoadError` when it declares none."""
    majors = []
    for name in exports:
        if name.startswith("wssp_abi_v"):
            digits = name[len("wssp_abi_v"):]
            if digits.isdigit():
                majors.append(int(digits))
    if not majors:
        raise LoadError("missing ABI marker export wssp_abi_v1 (is this a pyscheduler fragment?)")
    if ABI_MAJOR not in majors:
        raise LoadError(f"fragment speaks ABI v{max(majors)}, this scheduler speaks "
                        f"v{ABI_MAJOR}")
    return ABI_MAJOR


def guest_minor(instance: Instance, exports: Mapping[str, str]) -> int:
    """The minor version the guest's ``wssp_abi_v1`` marker declares (0 when it says nothing
    usable)."""
    kind = exports.get(f"wssp_abi_v{ABI_MAJOR}")
    try:
        value = instance.call(f"wssp_abi_v{ABI_MAJOR}") if kind == "func" else \
            instance.global_value(f"wssp_abi_v{ABI_MAJOR}")
    except CallError as exc:
        raise LoadError(f"wssp_abi_v{ABI_MAJOR} failed: {exc.message}") from None
    return value if isinstance(value, int) and value > 0 else 0


def check_module(module: Module, *, filter: bool, score: bool) -> None:
    """Refuse a module that cannot serve the configured stages (ABI.md §1): no or a wrong
    marker, a missing export, a ``wssp_*`` function export whose signature is not the ABI's, an
    unknown ``wssp_*`` export."""
    exports = module.exports
    abi_marker(exports)
    marker = f"wssp_abi_v{ABI_MAJOR}"
    if exports[marker] == "func":
        sig = module._signature(marker)
        if sig.params or sig.results != (binary.I32,):
            raise LoadError(f"export {marker} must be a function () -> i32 or an i32 global, "
                            f"not a function {binary.describe_sig(sig)}")
    elif exports[marker] != "global" or module.export_globals.get(marker) != binary.I32:
        kind = exports[marker]
        if kind == "global":
            kind = f"{binary.type_name(module.export_globals.get(marker, 0))} global"
        raise LoadError(f"export {marker} must be a function () -> i32 or an i32 global, "
                        f"not a {kind}")
    needed = {"memory": "memory", "wssp_alloc": "func", "wssp_init": "func"}
    if filter:
        needed["wssp_filter"] = "func"
    if score:
        needed["wssp_score"] = "func"
    for name, kind in needed.items():
        have = exports.get(name)
        if have is None:
            why = " (the resource configures that stage)" if name in (
                "wssp_filter", "wssp_score") else ""
            raise LoadError(f"missing export {name}{why}")
        if have != kind:
            raise LoadError(f"export {name} must be a {kind}, not a {have}")
    for name, kind in exports.items():
        if not name.startswith("wssp_") or _is_marker(name):
            continue
        want = EXPORT_SIGNATURES.get(name)
        if want is None:
            known = ", ".join(EXPORT_SIGNATURES)
            raise LoadError(f"unknown export {name} (known: {known} and the marker "
                            f"{marker})")
        if kind != "func":
            raise LoadError(f"export {name} must be a function {binary.describe_sig(want)}, "
                            f"not a {kind}")
        sig = module._info.export_sigs[name]
        if sig != want:
            raise LoadError(f"export {name} must be a function {binary.describe_sig(want)}, "
                            f"not {binary.describe_sig(sig)}")



def _is_marker(name: str) -> bool:
    digits = name[len("wssp_abi_v"):]
    return name.startswith("wssp_abi_v") and digits.isdigit()


def _lines(items: Sequence[str]) -> bytes:
    return "\n".join(items).encode()


def _split_lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    return text.split("\n") if text else []


class Guest:
    """One fragment instance with the node table resident in its memory."""

    def __init__(self, module: Module, config: Mapping[str, Any] | None,
                 shape: TableShape, *, log: LogFn | None = None,
                 label_capacity: int = 16) -> None:
        """Instantiate, run ``wssp_init`` and allocate the buffers for a table of ``shape``.

        Runs guest code and reads no node table: the scheduler does this on the fragment's
        worker thread. :meth:`attach` then writes the table, on the scheduling loop."""
        self.instance: Instance = module.instantiate(log)
        self.minor = guest_minor(self.instance, module.exports)
        self.mem = self.instance.memory()
        self._views: _Views | None = None
        self._last_pod: CycleContext | None = None
        self._taints_written = True  # the buffer is fresh: treat it as needing a write
        self.table: NodeTable | None = None
        self.capacity = max(shape.capacity, 64)
        self.resources = list(shape.resources)
        self._seen = -1
        self._labels_seen = -1
        self._names_seen = -1
        self._pod_cap = 0
        self._pod_ptr = 0
        self._head = struct.Struct(f"<II{len(self.resources)}qqqiIII10I")
        self._requirements_cache: dict[tuple[Any, ...], tuple[bytes, int]] = {}
        self.guest_seconds = 0.0  # time inside the guest's stage calls (the rest is host work)
        self.guest_calls = 0
        # node_row, cause and waiting hold a lifecycle call's values: reset for filter/score.
        self._stage_fields_set = False
        self._bound: dict[str, Callable[..., int]] = {}
        self._text_bufs: dict[str, tuple[int, int]] = {}  # buffer name -> (ptr, capacity)
        # Rows changed since each stage's previous call (ABI §4.3), by stage: a list of row
        # arrays, or None for "every row" (the first call, a change that is not per row).
        self._pending: list[list[npt.NDArray[np.intp]] | None] = [None, None, None]
        self._pending_rows = [0, 0, 0]
        # What begin() saw of the table, for the stage calls that follow it.
        self._valid: BoolArray = np.zeros(0, np.bool_)
        self._names: Sequence[str] = ()
        ctx = self.ctx = self._alloc(CTX_SIZE)
        names = _lines(self.resources)
        self._set_text("resource_names", names, _RES_NAMES, _RES_NAMES_LEN)
        self._u32(_ABI, ABI_MAJOR)
        self._u32(_CAPACITY, self.capacity)
        self._u32(_NRES, len(self.resources))
        self._u32(_COUNT, 0)
        self._u32(_HOST_MINOR, ABI_MINOR)
        self._u32(_NODE_ROW, NO_ROW)
        config_text = orjson.dumps(dict(config or {}))
        config_ptr = self._alloc(max(len(config_text), 1))
        self._write(config_ptr, config_text)
        self._u32(_STAGE, _STAGE_INIT)
        try:
            status = self.instance.call("wssp_init", ctx, config_ptr, len(config_text))
        except CallError as exc:
            raise LoadError(f"wssp_init failed: {exc.message}") from None
        finally:
            self._refresh()
        if status != 0:
            raise LoadError(f"wssp_init returned {status} (the fragment refused its config)")
        self.reasons = _split_lines(self._read_text(_REASONS, _REASONS_LEN, "reasons"))
        self._wanted = [k for k in _split_lines(
            self._read_text(_WANT_LABELS, _WANT_LABELS_LEN, "want_labels")) if k]
        self.label_keys: list[str] = []
        self.label_capacity = max(label_capacity, 2 * len(self._wanted), 4)
        c = self.capacity
        r = len(self.resources)
        self._alloc_ptr = self._alloc(8 * r * c)
        self._req_ptr = self._alloc(8 * r * c)
        self._flags_ptr = self._alloc(c)
        self._labels_ptr = self._alloc(4 * self.label_capacity * c)
        self._values_ptr = self._alloc(8 * self.label_capacity)
        self._names_ptr = self._alloc(8 * c)
        self._taints_ptr = self._alloc(c)
        self._cand_ptr = self._alloc(c)
        self._verdicts_ptr = self._alloc(2 * c)
        self._scores_ptr = self._alloc(8 * c)
        self._changed_ptr = self._alloc(4 * c)
        self._prefilter_ptr = self._alloc(c)
        for offset, ptr in ((_ALLOC, self._alloc_ptr), (_REQ, self._req_ptr),
                           (_FLAGS, self._flags_ptr), (_LABELS, self._labels_ptr),
                           (_LABEL_VALUES, self._values_ptr), (_NODE_NAMES, self._names_ptr),
                           (_POD_TAINTS, self._taints_ptr), (_CANDIDATES, self._cand_ptr),
                           (_VERDICTS, self._verdicts_ptr), (_SCORES, self._scores_ptr),
                           (_CHANGED, self._changed_ptr),
                           (_PREFILTER_ROWS, self._prefilter_ptr)):
            self._u32(offset, ptr)
        self._u32(_LABEL_CAP, self.label_capacity)
        mem = self.mem
        mem[self._labels_ptr: self._labels_ptr + 4 * self.label_capacity * c] = 0xFF  # all -1

    def attach(self, table: NodeTable) -> None:
        """Mirror ``table`` (every row, and the label columns the guest asked for) into the
        buffers; :class:`Resize` when it no longer fits them. On the scheduling loop: it reads
        the table, and runs no guest code."""
        if self.table is not None:
            raise ValueError("a guest mirrors one table")
        self.table = table
        self._check_shape()
        for key in self._wanted:
            self._add_label_key(key)
        self.sync()

    @property
    def _table(self) -> NodeTable:
        table = self.table
        if table is None:
            raise ValueError("the guest is not attached to a node table")
        return table

    # -- raw memory ----------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Re-take the view of guest memory after a guest call, if the call grew it (only
        growing can move a linear memory)."""
        if self.instance.memory_size() != len(self.mem):
            self.mem = self.instance.memory()
            self._views = None

    def _typed(self) -> _Views:
        views = self._views
        if views is None:
            views = self._views = _Views(self)
        return views

    def _alloc(self, size: int) -> int:
        try:
            ptr = self.instance.call("wssp_alloc", size)
        finally:
            self._refresh()
        if ptr <= 0 or ptr % 8 or ptr + size > self.instance.memory_size():
            raise LoadError(f"wssp_alloc({size}) returned {ptr}: the fragment is out of memory "
                            "or its allocator is broken")
        return ptr

    def _u32(self, offset: int, value: int) -> None:
        self.mem[self.ctx + offset: self.ctx + offset + 4] = np.frombuffer(
            struct.pack("<I", value), np.uint8)

    def _read_u32(self, offset: int) -> int:
        mem = self.mem
        return int(mem[self.ctx + offset: self.ctx + offset + 4].view(np.uint32)[0])

    def _write(self, ptr: int, data: bytes) -> None:
        self.mem[ptr: ptr + len(data)] = np.frombuffer(data, np.uint8)

    def _read_text(self, ptr_field: int, len_field: int, what: str) -> bytes:
        ptr, length = self._read_u32(ptr_field), self._read_u32(len_field)
        if not length:
            return b""
        size = self.instance.memory_size()
        if ptr + length > size:
            raise LoadError(f"context field {what} points outside guest memory "
                            f"({ptr}+{length} > {size})")
        return bytes(self.mem[ptr: ptr + length])

    def _set_text(self, name: str, data: bytes, ptr_field: int | None = None,
                  len_field: int | None = None) -> int:
        """Place ``data`` in a reusable guest buffer (reallocated with slack when too small)."""
        ptr, cap = self._text_bufs.get(name, (0, 0))
        if len(data) > cap or not ptr:
            cap = max(64, 2 * len(data))
            ptr = self._alloc(cap)
            self._text_bufs[name] = (ptr, cap)
        self._write(ptr, data)
        if ptr_field is not None and len_field is not None:
            self._u32(ptr_field, ptr)
            self._u32(len_field, len(data))
        return ptr

    def _i64_columns(self, ptr: int, rows: int) -> npt.NDArray[np.int64]:
        c = self.capacity
        mem = self.mem
        return mem[ptr: ptr + 8 * rows * c].view(np.int64).reshape(rows, c)

    # -- what changed since each stage's previous call ----------------------------------------

    def _mark(self, rows: npt.NDArray[np.intp], stages: tuple[int, ...] = (
            _STAGE_FILTER, _STAGE_SCORE)) -> None:
        """Rows whose inputs changed, for the next call of ``stages``."""
        for stage in stages:
            pending = self._pending[stage]
            if pending is None:
                continue
            self._pending_rows[stage] += len(rows)
            if self._pending_rows[stage] > self.capacity:  # a stage that is not being called
                self._pending[stage] = None
            else:
                pending.append(rows)

    def _rewrite(self, column: npt.NDArray[np.uint8], wanted: npt.NDArray[np.uint8],
                 stages: tuple[int, ...] = (_STAGE_FILTER, _STAGE_SCORE)) -> None:
        """Write ``wanted`` into a per-pod column, only where it differs, and list those rows
        as changed for ``stages``."""
        changed = np.flatnonzero(column != wanted)
        if len(changed):
            column[changed] = wanted[changed]
            self._mark(changed, stages)

    def _mark_all(self) -> None:
        self._pending[_STAGE_FILTER] = self._pending[_STAGE_SCORE] = None

    def _publish(self, stage: int) -> None:
        """Write the changed rows of ``stage`` into the context, and start its next list."""
        pending = self._pending[stage]
        views = self._typed()
        if pending is None:
            count = ALL_ROWS
        elif not pending:
            count = 0
        else:
            rows = pending[0] if len(pending) == 1 else np.unique(np.concatenate(pending))
            count = len(rows)
            views.changed[:count] = rows
        views.header[_N_CHANGED // 4] = count
        self._pending[stage] = []
        self._pending_rows[stage] = 0

    # -- the resident table --------------------------------------------------------------------

    def _add_label_key(self, key: str) -> int:
        if key in self.label_keys:
            return self.label_keys.index(key)
        if len(self.label_keys) == self.label_capacity:
            raise Resize(f"label key columns exhausted ({self.label_capacity})")
        self.label_keys.append(key)
        self._set_text("label_keys", _lines(self.label_keys), _LABEL_KEYS, _LABEL_KEYS_LEN)
        self._u32(_NLABELS, len(self.label_keys))
        index = len(self.label_keys) - 1
        self._write_label_column(index, np.arange(self._table.n))
        self._write_label_values(index)
        self._mark_all()
        return index

    def _label_ids(self, key: str, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int32]:
        table = self._table
        if key == NAME_FIELD:
            ids: npt.NDArray[np.int32] = np.where(table.valid[rows], rows, -1).astype(np.int32)
            return ids
        column = table.label_index.get(key)
        if column is None:
            return np.full(len(rows), -1, np.int32)
        return column.ids[rows]

    def _write_label_column(self, index: int, rows: npt.NDArray[np.intp]) -> None:
        c = self.capacity
        ptr = self._labels_ptr + 4 * index * c
        col = self.mem[ptr: ptr + 4 * c].view(np.int32)
        col[rows] = self._label_ids(self.label_keys[index], rows)

    def _write_label_values(self, index: int) -> None:
        key = self.label_keys[index]
        if key == NAME_FIELD:
            values = list(self._table.names[: self._table.n])
        else:
            column = self._table.label_index.get(key)
            values = [""] * (len(column.counts) if column is not None else 0)
            if column is not None:
                for value, i in column.ids_by_value.items():
                    values[i] = value
        ptr = self._set_text(f"values:{key}", _lines(values))
        self._write(self._values_ptr + 8 * index, struct.pack("<II", ptr, len(_lines(values))))

    def _write_names(self) -> None:
        table = self._table
        encoded = [name.encode() for name in table.names[: table.n]]
        blob = b"".join(encoded)
        base = self._set_text("node_names", blob)
        pairs = np.zeros(2 * self.capacity, np.uint32)
        offsets = np.cumsum([0] + [len(e) for e in encoded])[:-1] if encoded else np.zeros(0)
        pairs[0: 2 * len(encoded): 2] = base + offsets
        pairs[1: 2 * len(encoded): 2] = [len(e) for e in encoded]
        self._write(self._names_ptr, pairs.tobytes())

    def _check_shape(self) -> None:
        """:class:`Resize` when the table no longer fits this instance's buffers."""
        if self._table.capacity > self.capacity:
            raise Resize(f"node table grew to {self._table.capacity} rows")
        if len(self._table.resources) != len(self.resources):
            raise Resize("new resource columns")

    def sync(self) -> None:
        """Rewrite the rows changed since the last sync (all of them the first time)."""
        table = self._table
        self._check_shape()
        n = table.n
        if table.generation != self._seen:
            rows = table.changed_since(self._seen) if self._seen >= 0 else np.arange(n)
            if 0 < len(rows) <= 8:
                for slot in rows.tolist():
                    self._write_row(slot)
            elif len(rows):
                self._write_rows(rows)
            if len(rows):  # (a fresh instance lists every row anyway)
                self._mark(rows)
            self._seen = table.generation
        if table.label_generation != self._labels_seen:
            for index in range(len(self.label_keys)):
                self._write_label_values(index)
            self._write_names()
            self._labels_seen = table.label_generation
            self._mark_all()  # value lines and names: not tracked per row
        header = self._typed().header
        header[_COUNT // 4] = n
        header[_GENERATION // 4] = table.generation & 0xFFFFFFFF

    def _write_row(self, slot: int) -> None:
        """One changed row (the usual case: a pod was assumed or bound)."""
        table = self._table
        views = self._typed()
        r = len(self.resources)
        views.allocatable[:, slot] = table.allocatable[slot, :r]
        views.requested[:, slot] = table.requested[slot, :r]
        flags = (FLAG_PRESENT if table.valid[slot] else 0) | (
            FLAG_UNSCHEDULABLE if table.unschedulable[slot] else 0)
        info = table.infos[slot]
        if table.not_ready[slot] or (info is not None and any(
                t.key in _NOT_READY_TAINTS for t in info.taints)):
            flags |= FLAG_NOT_READY
        if table.virtual[slot]:
            flags |= FLAG_VIRTUAL
        views.flags[slot] = flags
        for index, key in enumerate(self.label_keys):
            if key == NAME_FIELD:
                views.labels[index, slot] = slot if table.valid[slot] else -1
            else:
                column = table.label_index.get(key)
                views.labels[index, slot] = column.ids[slot] if column is not None else -1

    def _write_rows(self, rows: npt.NDArray[np.intp]) -> None:
        table = self._table
        r = len(self.resources)
        self._i64_columns(self._alloc_ptr, r)[:, rows] = table.allocatable[rows, :r].T
        self._i64_columns(self._req_ptr, r)[:, rows] = table.requested[rows, :r].T
        flags = table.valid[rows].astype(np.uint8) * FLAG_PRESENT
        flags |= table.unschedulable[rows].astype(np.uint8) * FLAG_UNSCHEDULABLE
        not_ready = table.not_ready[rows].copy()
        for taint, mask in table.taint_index.items():
            if taint.key in _NOT_READY_TAINTS:
                not_ready |= mask[rows]
        flags |= not_ready.astype(np.uint8) * FLAG_NOT_READY
        flags |= table.virtual[rows].astype(np.uint8) * FLAG_VIRTUAL
        mem = self.mem
        mem[self._flags_ptr + rows] = flags
        for index in range(len(self.label_keys)):
            self._write_label_column(index, rows)

    # -- per pod -------------------------------------------------------------------------------

    def _requirement(self, term: int, req: NodeSelectorRequirement) -> bytes:
        key = req.key
        label = self._add_label_key(key)
        op = _OPS[req.operator]
        values: list[int] = []
        if op in (0, 1) and key != NAME_FIELD and any(is_valid_label_value(v) for v in req.values):
            # A value that is not a valid label value makes kube skip the whole term: passed
            # as In with no values, which matches no node in every guest (ABI.md §4.2).
            return struct.pack("<IIII", term, label, 0, 0)
        if op in (0, 1):
            if key == NAME_FIELD:
                values = [self._table.slots.get(v, -1) for v in req.values]
            else:
                column = self._table.label_index.get(key)
                values = [column.ids_by_value.get(v, -1) if column is not None else -1
                          for v in req.values]
        elif op in (4, 5):
            try:
                values = [int(req.values[0])]
            except (ValueError, IndexError):
                values = []
        return struct.pack(f"<IIII{len(values)}q", term, label, op, len(values), *values)

    def _requirements(self, pod: PodInfo) -> tuple[bytes, int]:
        """The encoded node requirements of ``pod`` and their count, remembered per selector
        (pods of one template share them) until node labels change."""
        key = (tuple(sorted(pod.node_selector.items())), pod.required_terms,
               self._table.label_generation)
        cached = self._requirements_cache.get(key)
        if cached is not None:
            return cached
        reqs = [self._requirement(0, NodeSelectorRequirement(k, "In", (v,)))
                for k, v in key[0]]
        for t, term in enumerate(pod.required_terms, start=1):
            reqs.extend(self._requirement(t, req) for req in term.match_expressions)
            reqs.extend(self._requirement(t, NodeSelectorRequirement(
                NAME_FIELD, req.operator, req.values)) for req in term.match_fields)
        if len(self._requirements_cache) > 256:
            self._requirements_cache.clear()
        cached = self._requirements_cache[key] = (b"".join(reqs), len(reqs))
        return cached

    def _pod_record(self, pod: PodInfo, request: IntArray) -> bytes:
        r = len(self.resources)
        requirements, n_reqs = self._requirements(pod)
        head_size = 80 + 8 * r
        ns, name, uid = pod.namespace.encode(), pod.name.encode(), pod.uid.encode()
        labels = "\n".join(f"{k}={v}" for k, v in pod.labels.items()).encode() \
            if pod.labels else b""
        notes = "\n".join(f"{k}={v}" for k, v in pod.annotations.items()
                           if "\n" not in v).encode() if pod.annotations else b""
        o1 = head_size + len(requirements)
        o2 = o1 + len(ns)
        o3 = o2 + len(name)
        o4 = o3 + len(labels)
        o5 = o4 + len(notes)
        end = o5 + len(uid)
        values = request.tolist()
        if len(values) != r:
            values = (values + [0] * r)[:r]
        head = self._head.pack(end, r, *values, pod.nonzero_cpu, pod.nonzero_memory,
                               pod.priority, len(pod.required_terms), n_reqs, head_size,
                               o1, len(ns), o2, len(name), o3, len(labels), o4, len(notes),
                               o5, len(uid))
        return b"".join((head, requirements, ns, name, labels, notes, uid))

    def _write_pod(self, ctx: CycleContext) -> None:
        if ctx is self._last_pod and self._labels_seen == self._table.label_generation:
            return  # the score call of the cycle whose filter call wrote it
        self._last_pod = ctx
        record = self._pod_record(ctx.pod, ctx.request)
        if len(record) > self._pod_cap:
            self._pod_cap = max(1024, 2 * len(record))
            self._pod_ptr = self._alloc(self._pod_cap)
            self._u32(_POD, self._pod_ptr)
        self._write(self._pod_ptr, record)
        self._typed().header[_POD_LEN // 4] = len(record)
        n = self._table.n
        untolerated: npt.NDArray[np.uint8] | None = None
        tolerations = ctx.pod.tolerations
        for taint, mask in self._table.taint_index.items():
            if taint.effect not in _DO_NOT_SCHEDULE:
                continue
            if any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations):
                continue
            rows = mask[:n]
            if taint.key == PROVIDER_TAINT_KEY:
                # A cloud pool's virtual node is a candidate in the burst pass only, which
                # tolerates its provider taint (as TaintToleration does there): one filter call
                # answers for both passes. Another node with that taint keeps it.
                rows = rows & ~self._table.virtual[:n]
            if untolerated is None:
                untolerated = np.zeros(n, np.uint8)
            untolerated |= rows.view(np.uint8)
        # kube's NodeUnschedulable: a cordoned node is fine for a pod tolerating the
        # node.kubernetes.io/unschedulable:NoSchedule taint.
        cordoned = self._table.unschedulable[:n]
        if np.count_nonzero(cordoned) and not any(
                t.tolerates(_CORDON_TAINT, "", "NoSchedule") for t in tolerations):
            if untolerated is None:
                untolerated = np.zeros(n, np.uint8)
            untolerated |= cordoned.view(np.uint8) << 1
        if untolerated is not None:
            self._rewrite(self._typed().taints[:n], untolerated)
            self._taints_written = True
        elif self._taints_written:  # all zero, and the buffer may hold the last pod's ones
            self._rewrite(self._typed().taints[:n], np.zeros(n, np.uint8))
            self._taints_written = False

    def begin(self, ctx: CycleContext) -> None:
        """Bring the mirror and the pod record up to date for this pod's stage calls, and keep
        what those calls need of the table. On the scheduling loop: it reads the table."""
        if ctx.table is not self.table:
            raise Resize("a different node table")
        self._check_shape()  # before the per-pod columns are written for the table's rows
        self._write_pod(ctx)  # may add label key columns, which sync then keeps current
        self.sync()
        table = ctx.table
        self._valid = table.valid[: table.n].copy()
        self._names = table.names  # read for error messages only

    def _call(self, export: str, stage: int) -> None:
        """A filter or score call: its changed rows, the context fields of the stage."""
        self._publish(stage)
        views = self._typed()
        header = views.header
        if self._stage_fields_set:
            header[_NODE_ROW // 4] = NO_ROW
            header[_CAUSE // 4] = 0
            header[_WAITING_LEN // 4] = 0
            self._stage_fields_set = False
        header[_STAGE // 4] = stage
        _set_now(views)
        self._invoke(export)

    def _invoke(self, export: str) -> None:
        """Call ``export(ctx)``; :class:`CallError` when it fails or returns non-zero."""
        call = self._bound.get(export)
        if call is None:
            call = self._bound[export] = self.instance.bind(export)
        start = time.perf_counter()
        try:
            status = call(self.ctx)
        finally:
            self.guest_seconds += time.perf_counter() - start
            self.guest_calls += 1
            self._refresh()
        if status != 0:
            self.instance.poisoned = True
            raise CallError("return", f"{export} returned {status}")

    def _name(self, row: int) -> str:
        names = self._names
        return names[row] if row < len(names) else f"row {row}"

    # The stage calls for the pod of the last begin(). They touch guest memory and what begin()
    # kept, never the node table, so the scheduler runs them on the fragment's worker thread
    # while the loop goes on changing the table.

    def call_filter(self) -> FilterResult:
        """``wssp_filter``, its verdicts checked (rows as begin() saw them)."""
        valid = self._valid
        n = len(valid)
        if not self.minor:  # from minor 1 on the outputs are the guest's own, kept between calls
            self._typed().verdicts[:n] = 0
        self._call("wssp_filter", _STAGE_FILTER)
        verdicts = self._typed().verdicts[:n]
        if not n or not np.count_nonzero(verdicts):
            return FilterResult(valid.copy(), [])  # the usual answer: every node passes
        live = np.where(valid, verdicts, 0)
        worst = int(live.max())
        if worst > len(self.reasons):
            self.instance.poisoned = True
            row = int(np.argmax(live))
            raise CallError("output", f"verdict {worst} for node {self._name(row)} is "
                                      f"not a registered reason (the fragment registered "
                                      f"{len(self.reasons)})")
        passed: BoolArray = live == 0
        reasons = []
        for rid in np.unique(live[live > 0]).tolist():
            reasons.append(Reason(self.reasons[rid - 1] or f"reason {rid}", live == rid))
        return FilterResult(passed, reasons)

    def call_score(self, feasible: BoolArray) -> IntArray:
        """``wssp_score`` over the ``feasible`` rows, its scores checked."""
        valid = self._valid
        n = len(valid)
        candidates = feasible[:n] & valid
        self._rewrite(self._typed().candidates[:n], candidates.view(np.uint8), (_STAGE_SCORE,))
        self._call("wssp_score", _STAGE_SCORE)
        scores: IntArray = np.where(candidates, self._typed().scores[:n], 0)
        # One pass catches both ends: a negative score is huge as an unsigned number.
        if n and int(np.maximum.reduce(scores.view(np.uint64))) > MAX_SCORE:
            bad = (scores < 0) | (scores > MAX_SCORE)
            self.instance.poisoned = True
            row = int(np.argmax(bad))
            raise CallError("output", f"score {int(scores[row])} for node "
                                      f"{self._name(row)} is outside 0..{MAX_SCORE}")
        return scores

    def call_stage(self, stage: str, *, node_row: int | None = None, waiting: bytes = b"",
                   cause: int = 0) -> StageAnswer:
        """``wssp_<stage>`` (one of :data:`NEW_STAGES`) for the pod of the last begin(), its
        answer checked (ABI.md §9): ``node_row`` is the row the pod is placed on (reserve to
        postbind), ``waiting`` the lines of the pods waiting at this fragment's permit,
        ``cause`` why the pod is unreserved. Raises :class:`CallError` when the call fails: a
        trap or exhausted limit, a non-zero return, or an answer the stage cannot give (kind
        ``output``, the instance discarded). The host's own rules (prebind's allowlists, a
        nominated row holding a real node, the longest wait) are the caller's to apply."""
        sid = STAGE_IDS.get(stage)
        if sid is None or stage not in _MAX_ANSWER:
            raise ValueError(f"unknown stage {stage!r}: one of {', '.join(NEW_STAGES)}")
        n = len(self._valid)
        if waiting:
            try:
                self._set_text("waiting", waiting, _WAITING, _WAITING_LEN)
            except LoadError as exc:  # the guest's allocator could not make room
                self.instance.poisoned = True
                raise CallError("memory", f"no room for the waiting pods' lines: {exc}") \
                    from None
        views = self._typed()
        header = views.header
        if not waiting:
            header[_WAITING // 4] = header[_WAITING_LEN // 4] = 0
        header[_NODE_ROW // 4] = NO_ROW if node_row is None else node_row
        header[_CAUSE // 4] = cause
        for offset in (_ANSWER, _ANSWER_VALUE, _MESSAGE, _MESSAGE_LEN, _OUTPUT, _OUTPUT_LEN):
            header[offset // 4] = 0
        header[_N_CHANGED // 4] = ALL_ROWS  # rows are not tracked for these stages
        header[_STAGE // 4] = sid
        if stage == "prefilter":
            views.prefilter_rows[:n] = 0
        _set_now(views)
        self._stage_fields_set = True
        self._invoke(f"wssp_{stage}")
        return self._read_answer(stage, n)

    def _read_answer(self, stage: str, n: int) -> StageAnswer:
        export = f"wssp_{stage}"
        header = self._typed().header
        code, value = int(header[_ANSWER // 4]), int(header[_ANSWER_VALUE // 4])
        highest = _MAX_ANSWER[stage]
        if highest is None:
            code = value = 0  # a notification: whatever the guest answered means nothing
        elif code > highest:
            raise self._bad_output(f"answer {code} is not one of 0..{highest} for {export}")
        if stage == "postfilter" and code == POSTFILTER_NOMINATE and (
                value >= n or not self._valid[value]):
            where = "holds no node" if value < n else f"is not one of the rows 0..{n - 1}"
            raise self._bad_output(f"{export} nominated row {value}, which {where}")
        if stage == "permit" and code == PERMIT_WAIT and value == 0:
            raise self._bad_output(f"{export} answered 2 (wait) with answer_value 0: the "
                                   "longest wait, in milliseconds, must be at least 1")
        message = ""
        length = int(header[_MESSAGE_LEN // 4])
        if length:
            data = self._output_bytes(int(header[_MESSAGE // 4]),
                                      min(length, MAX_MESSAGE_BYTES), export, "message")
            message = data.decode("utf-8", "replace").translate(_CONTROLS)
        commands: tuple[tuple[str, str], ...] = ()
        length = int(header[_OUTPUT_LEN // 4])
        if length:
            if length > MAX_OUTPUT_BYTES:
                raise self._bad_output(f"{export} wrote {length} bytes of output, more than "
                                       f"{MAX_OUTPUT_BYTES}")
            commands = self._commands(
                stage, self._output_bytes(int(header[_OUTPUT // 4]), length, export, "output"))
        rows: BoolArray | None = None
        if stage == "prefilter" and code == PREFILTER_RESTRICT:
            rows = self._typed().prefilter_rows[:n] != 0
        return StageAnswer(stage, code, value, message, commands, rows)

    def _bad_output(self, message: str) -> CallError:
        """An answer no stage may give: the instance is discarded like after a trap."""
        self.instance.poisoned = True
        return CallError("output", message)

    def _output_bytes(self, ptr: int, length: int, export: str, what: str) -> bytes:
        size = self.instance.memory_size()
        if ptr + length > size:
            raise self._bad_output(f"{export}'s {what} [{ptr}, {ptr + length}) is outside the "
                                   f"guest memory ({size} bytes)")
        return bytes(self.mem[ptr: ptr + length])

    def _commands(self, stage: str, data: bytes) -> tuple[tuple[str, str], ...]:
        """The output lines as (verb, argument), each checked for its shape and its verb."""
        export = f"wssp_{stage}"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._bad_output(f"{export}'s output is not UTF-8 (at byte {exc.start})") \
                from None
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # a trailing newline ends the last line
        if len(lines) > MAX_OUTPUT_LINES:
            raise self._bad_output(f"{export} wrote {len(lines)} output lines, more than "
                                   f"{MAX_OUTPUT_LINES}")
        verbs = _VERBS[stage]
        commands = []
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            problem = _command_problem(line, verbs, export)
            if problem:
                raise self._bad_output(f"{export} output line {number} {_quoted(line)}: "
                                       f"{problem}")
            verb, _, argument = line.partition(" ")
            commands.append((verb, argument))
        return tuple(commands)

    # One stage for one pod, begin() included: for callers on one thread (tests, what-if).

    def filter(self, ctx: CycleContext) -> FilterResult:
        self.begin(ctx)
        return self.call_filter()

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        self.begin(ctx)
        return self.call_score(feasible)

    def stage(self, stage: str, ctx: CycleContext, *, node_row: int | None = None,
              waiting: bytes = b"", cause: int = 0) -> StageAnswer:
        self.begin(ctx)
        return self.call_stage(stage, node_row=node_row, waiting=waiting, cause=cause)


def _set_now(views: _Views) -> None:
    """``now_ms``: the wall clock in Unix milliseconds."""
    views.now_ms[0] = time.time_ns() // 1_000_000


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def _command_problem(line: str, verbs: tuple[str, ...], export: str) -> str:
    """What is wrong with one command line; empty when nothing is."""
    if not verbs:
        return f"{export} takes no commands"
    verb, _, argument = line.partition(" ")
    if verb not in verbs:
        return f"{verb!r} is not a command of {export} (it takes {', '.join(verbs)})"
    if _CONTROL_CHARS.search(line):
        return "control character in the line"
    if verb in ("allow", "reject"):
        if not argument or " " in argument:
            return f"expected {verb} <uid>"
    else:
        key, equals, _ = argument.partition("=")
        if not equals or not key:
            return f"expected {verb} <key>=<value>"
    return ""


def _quoted(line: str) -> str:
    """A guest's line for an error message: control characters as spaces, cut at 80."""
    line = line.translate(_CONTROLS)
    return f'"{line}"' if len(line) <= 80 else f'"{line[:77]}..."'


class _Views:
    """Typed numpy views of the guest buffers, valid until guest memory moves."""

    __slots__ = ("header", "allocatable", "requested", "flags", "labels", "taints",
                 "candidates", "verdicts", "scores", "changed", "prefilter_rows", "now_ms")

    def __init__(self, guest: Guest) -> None:
        mem, c = guest.mem, guest.capacity
        r = len(guest.resources)
        self.header = mem[guest.ctx: guest.ctx + CTX_SIZE].view(np.uint32)
        self.now_ms = mem[guest.ctx + _NOW_MS: guest.ctx + _NOW_MS + 8].view(np.int64)
        self.allocatable = mem[guest._alloc_ptr: guest._alloc_ptr + 8 * r * c] \
            .view(np.int64).reshape(r, c)
        self.requested = mem[guest._req_ptr: guest._req_ptr + 8 * r * c] \
            .view(np.int64).reshape(r, c)
        self.flags = mem[guest._flags_ptr: guest._flags_ptr + c]
        cap = guest.label_capacity
        self.labels = mem[guest._labels_ptr: guest._labels_ptr + 4 * cap * c] \
            .view(np.int32).reshape(cap, c)
        self.taints = mem[guest._taints_ptr: guest._taints_ptr + c]
        self.candidates = mem[guest._cand_ptr: guest._cand_ptr + c]
        self.verdicts = mem[guest._verdicts_ptr: guest._verdicts_ptr + 2 * c].view(np.uint16)
        self.scores = mem[guest._scores_ptr: guest._scores_ptr + 8 * c].view(np.int64)
        self.changed = mem[guest._changed_ptr: guest._changed_ptr + 4 * c].view(np.uint32)
        self.prefilter_rows = mem[guest._prefilter_ptr: guest._prefilter_ptr + c]
