"""The in-memory MVCC store behind the embedded API server.

Design, following what etcd plus kube-apiserver's watch cache give a client:

* One global, monotonically increasing revision (``resourceVersion``) bumped by every write,
  whatever the resource.
* Every stored version is an immutable :class:`Stored` holding the object's JSON bytes (encoded
  once, at write time, into a buffer of their exact size) plus the few fields selectors need.
  Readers get a private decoded copy (:attr:`Stored.obj`), so nothing outside the store can
  change stored state by accident, lists are a concatenation of ready bytes, and memory stays
  near the size of the JSON itself. The shared decoded form (:attr:`Stored.view`) is kept for
  the most recently read objects only (:data:`VIEW_CACHE_SIZE`), so controllers reading a
  cluster's 150,000 pods do not pin a decoded copy of each (one is about 7 times its JSON).
* Each resource type keeps a bounded history of its events. A watch from revision ``X`` replays
  the events after ``X`` from that window and then follows live ones; an ``X`` that fell out of
  the window is answered with 410 Expired, as the watch cache does, so clients relist.
* Watchers filter by namespace and label/field selectors. As in the watch cache, an object that
  starts matching arrives as ADDED and one that stops matching as DELETED (carrying the previous
  state at the new revision).
* Writes and watcher registration run on the event loop thread without awaiting in between, so a
  watcher never misses or duplicates an event between its replay and its live part.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import collections
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from pyscheduler_sim import errors
from pyscheduler_sim.resources import ResourceType
from pyscheduler.api.labels import LabelSelector
from pyscheduler_sim.selectors import FieldSelector, object_fields

__all__ = ["VIEW_CACHE_SIZE", "Event", "Store", "Stored", "Table", "Watcher", "encode"]

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

#: How many decoded objects (:attr:`Stored.view`) are kept, the most recently read first.
VIEW_CACHE_SIZE = 8192


def encode(obj: Any) -> bytes:
    """``obj`` as JSON, in a bytes object of its own size.

    orjson returns its output in the buffer it grew while writing (4 KiB at least): kept as is,
    a 1.4 KiB pod would hold 4 KiB. Copying it is a memcpy (~0.2 µs)."""
    return bytes(memoryview(orjson.dumps(obj)))


class _Views:
    """The decoded form of the most recently read stored objects (an LRU of Stored -> dict)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._views: collections.OrderedDict[Stored, dict[str, Any]] = collections.OrderedDict()

    def get(self, s: Stored) -> dict[str, Any]:
        views = self._views
        view = views.get(s)
        if view is not None:
            views.move_to_end(s)
            return view
        decoded: dict[str, Any] = orjson.loads(s.raw)
        views[s] = decoded
        if len(views) > self.size:
            views.popitem(last=False)
        return decoded


_VIEWS = _Views(VIEW_CACHE_SIZE)


class Stored:
    """One immutable stored version of an object."""

    __slots__ = ("raw", "rv", "namespace", "name", "uid", "labels", "owner_uids",
                 "controller_uid", "_fields", "_plural", "_group")

    def __init__(self, raw: bytes, obj: dict[str, Any], rv: int, rt: ResourceType) -> None:
        meta = obj.get("metadata") or {}
        self.raw = raw
        self.rv = rv
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta.get("name") or ""
        self.uid: str = meta.get("uid") or ""
        self.labels: dict[str, str] = meta.get("labels") or {}
        refs = meta.get("ownerReferences") or ()
        self.owner_uids: tuple[str, ...] = tuple(ref.get("uid", "") for ref in refs)
        #: The uid of the managing controller (the first reference with ``controller: true``).
        self.controller_uid: str = next(
            (str(ref.get("uid") or "") for ref in refs if ref.get("controller")), "")
        self._fields: dict[str, str] | None = None
        self._plural = rt.plural
        self._group = rt.group

    @property
    def view(self) -> dict[str, Any]:
        """The object decoded and shared: read it, never change it (use :attr:`obj`).

        Decoded once while it is among the :data:`VIEW_CACHE_SIZE` most recently read."""
        return _VIEWS.get(self)

    @property
    def obj(self) -> dict[str, Any]:
        """A private, mutable copy of the object."""
        result: dict[str, Any] = orjson.loads(self.raw)
        return result

    @property
    def fields(self) -> dict[str, str]:
        if self._fields is None:
            self._fields = object_fields(self._plural, self._group, self.view)
        return self._fields

    @property
    def key(self) -> ObjectKey:
        return (self.namespace, self.name)


class Event:
    __slots__ = ("type", "rv", "new", "old")

    def __init__(self, type: str, rv: int, new: Stored, old: Stored | None) -> None:
        self.type = type  # ADDED, MODIFIED, DELETED
        self.rv = rv
        self.new = new  # for DELETED: the final state, at the deletion revision
        self.old = old


class Watcher:
    """One watch stream's filter and pending events."""

    def __init__(self, table: Table, namespace: str, labels: LabelSelector | None,
                 fields: FieldSelector | None, max_pending: int, *,
                 slow_after: float | None = None, buffer: int = 100,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.table = table
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.pending: collections.deque[tuple[str, Stored]] = collections.deque()
        self.max_pending = max_pending
        self.closed = False
        self.overflowed = False
        # kube-apiserver closes a watcher whose reader stops taking events ("Forcing watcher
        # close due to unresponsiveness"): here, one whose stream has been blocked writing for
        # ``slow_after`` seconds while ``buffer`` events wait. None: never (then only
        # ``max_pending`` bounds the queue). The stream sets ``writing_since`` around a write.
        self.slow_after = slow_after
        self.buffer = buffer
        self.writing_since: float | None = None
        self._clock = clock
        self._wake = asyncio.Event()

    def matches(self, s: Stored) -> bool:
        if self.namespace and s.namespace != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(s.labels):
            return False
        if self.fields is not None and not self.fields.matches(s.fields):
            return False
        return True

    def offer(self, ev: Event) -> None:
        if self.closed:
            return
        if ev.type == "MODIFIED":
            now, before = self.matches(ev.new), ev.old is not None and self.matches(ev.old)
            if now:
                self._push("MODIFIED" if before else "ADDED", ev.new)
            elif before:
                assert ev.old is not None
                self._push("DELETED", _at_revision(ev.old, ev.rv))
        elif self.matches(ev.new):
            self._push(ev.type, ev.new)

    def writing(self, busy: bool) -> None:
        """The stream starts (True) or ends (False) writing events to its reader."""
        self.writing_since = self._clock() if busy else None

    def lagging(self) -> bool:
        """Whether the reader has stopped taking events (see ``slow_after``)."""
        return (self.slow_after is not None and self.writing_since is not None
                and len(self.pending) >= self.buffer
                and self._clock() - self.writing_since >= self.slow_after)

    def _push(self, type: str, s: Stored) -> None:
        if len(self.pending) >= self.max_pending or self.lagging():
            self.table.slow_watchers_closed += 1
            # A watcher that cannot keep up is closed, as kube-apiserver does; the client resumes
            # from the last revision it saw.
            self.overflowed = True
            self.close()
            return
        self.pending.append((type, s))
        self._wake.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.table.watchers.discard(self)
            self._wake.set()

    async def wait(self, timeout: float) -> None:
        """Wait until events are pending, the watcher is closed, or ``timeout`` passes."""
        if self.pending or self.closed:
            return
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def drain(self) -> list[tuple[str, Stored]]:
        out = list(self.pending)
        self.pending.clear()
        return out


def _at_revision(s: Stored, rv: int) -> Stored:
    """A copy of ``s`` whose metadata.resourceVersion is ``rv`` (for synthetic DELETED events)."""
    obj = s.obj
    obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
    out = Stored.__new__(Stored)
    out.raw = encode(obj)
    out.rv = rv
    out.namespace, out.name, out.uid = s.namespace, s.name, s.uid
    out.labels, out.owner_uids, out.controller_uid = s.labels, s.owner_uids, s.controller_uid
    out._fields, out._plural, out._group = s._fields, s._plural, s._group
    return out


class Table:
    """All objects of one resource type, its event history and its watchers."""

    def __init__(self, rt: ResourceType, history: int) -> None:
        self.rt = rt
        self.objects: dict[ObjectKey, Stored] = {}
        # The same objects by namespace, so namespaced reads do not scan the whole table.
        self.by_namespace: dict[str, dict[str, Stored]] = {}
        self.history: collections.deque[Event] = collections.deque(maxlen=history)
        # The oldest revision a watch may resume from: events after it are all in `history`.
        self.horizon = 0
        self.watchers: set[Watcher] = set()
        #: Keys of the objects whose JSON carries a deletionTimestamp (being deleted), so that
        #: a periodic look for them (the garbage collector's) does not read every object.
        self.terminating: set[ObjectKey] = set()
        #: Watchers of this type closed because their reader stopped taking events.
        self.slow_watchers_closed = 0
        self._sorted: list[Stored] | None = None

    def record(self, ev: Event) -> None:
        if len(self.history) == self.history.maxlen:
            self.horizon = self.history[0].rv
        self.history.append(ev)
        self._sorted = None
        for w in list(self.watchers):
            w.offer(ev)

    def sorted_objects(self) -> list[Stored]:
        """All objects in key order (etcd's order: namespace, then name). Cached until a write."""
        if self._sorted is None:
            self._sorted = [self.objects[k] for k in sorted(self.objects)]
        return self._sorted


class Store:
    """Objects of every resource type under one revision counter."""

    def __init__(self, *, history: int = 10000, max_watch_pending: int = 100000,
                 slow_watcher_seconds: float | None = 1.0, watch_buffer: int = 100,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rv = 1
        self.tables: dict[tuple[str, str], Table] = {}
        self.history = history
        self.max_watch_pending = max_watch_pending
        #: A watcher whose reader has taken nothing for this long while ``watch_buffer``
        #: events wait is closed, as kube-apiserver closes one (None: never).
        self.slow_watcher_seconds = slow_watcher_seconds
        self.watch_buffer = watch_buffer
        self._clock = clock
        # Snapshots that back continue tokens: (group, plural, rv) -> (created, objects)
        self._snapshots: collections.OrderedDict[tuple[str, str, int], tuple[float, list[Stored]]]
        self._snapshots = collections.OrderedDict()
        self.snapshot_ttl = 300.0
        self.max_snapshots = 16
        # Dependents by owner uid, for garbage collection.
        self.dependents: dict[str, set[tuple[tuple[str, str], ObjectKey]]] = {}
        # The uid of every stored object, so an owner's existence is one lookup.
        self.uids: set[str] = set()

    # -- types ---------------------------------------------------------------------------------

    def add_type(self, rt: ResourceType) -> Table:
        table = self.tables.get(rt.key)
        if table is None:
            table = self.tables[rt.key] = Table(rt, self.history)
        return table

    def drop_type(self, key: tuple[str, str]) -> None:
        table = self.tables.pop(key, None)
        if table is not None:
            for w in list(table.watchers):
                w.close()

    def table(self, rt: ResourceType) -> Table:
        return self.tables[rt.key]

    # -- reads ---------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Stored | None:
        return self.tables[rt.key].objects.get((namespace, name))

    def iter(self, rt: ResourceType, namespace: str = "") -> Iterator[Stored]:
        """A snapshot of the objects (of one namespace), safe to write while iterating."""
        table = self.tables[rt.key]
        if not namespace:
            return iter(list(table.objects.values()))
        return iter(list(table.by_namespace.get(namespace, {}).values()))

    def list(self, rt: ResourceType, namespace: str, labels: LabelSelector | None,
             fields: FieldSelector | None, limit: int, continue_token: str,
             ) -> tuple[builtins.list[Stored], int, str, int | None]:
        """Items, list revision, continue token and remaining count (when known)."""
        table = self.tables[rt.key]
        if continue_token:
            rv, start = _decode_continue(continue_token)
            snap = self._snapshots.get((rt.group, rt.plural, rv))
            if snap is None or self._clock() - snap[0] > self.snapshot_ttl:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.")
            objects = snap[1]
        else:
            rv, start = self.rv, ""
            objects = table.sorted_objects()
        out: builtins.list[Stored] = []
        index = _bisect_after(objects, start) if start else 0
        n = len(objects)
        while index < n:
            s = objects[index]
            index += 1
            if namespace and s.namespace != namespace:
                continue
            if labels is not None and not labels.matches(s.labels):
                continue
            if fields is not None and not fields.matches(s.fields):
                continue
            out.append(s)
            if limit and len(out) >= limit:
                break
        token = ""
        remaining: int | None = None
        if limit and index < n and len(out) >= limit:
            token = _encode_continue(rv, f"{out[-1].namespace}/{out[-1].name}")
            self._remember_snapshot(rt, rv, objects)
            if labels is None and fields is None and not namespace:
                remaining = n - index
        return out, rv, token, remaining

    def _remember_snapshot(self, rt: ResourceType, rv: int,
                           objects: builtins.list[Stored]) -> None:
        key = (rt.group, rt.plural, rv)
        self._snapshots[key] = (self._clock(), objects)
        self._snapshots.move_to_end(key)
        while len(self._snapshots) > self.max_snapshots:
            self._snapshots.popitem(last=False)

    # -- writes --------------------------------------------------------------------------------

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, rt: ResourceType, obj: dict[str, Any]) -> Stored:
        """Store ``obj`` (create or update) at a new revision, which is written into it."""
        table = self.tables[rt.key]
        rv = self.next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        new = Stored(encode(obj), obj, rv, rt)
        old = table.objects.get(new.key)
        table.objects[new.key] = new
        table.by_namespace.setdefault(new.namespace, {})[new.name] = new
        if b'"deletionTimestamp"' in new.raw:
            table.terminating.add(new.key)
        elif old is not None:
            table.terminating.discard(new.key)
        if old is not None:
            self._unindex(rt, old)
        elif new.uid:
            self.uids.add(new.uid)
        self._index(rt, new)
        table.record(Event("MODIFIED" if old is not None else "ADDED", rv, new, old))
        return new

    def remove(self, rt: ResourceType, namespace: str, name: str) -> Stored | None:
        """Delete an object; returns its final state at the deletion revision."""
        table = self.tables[rt.key]
        old = table.objects.pop((namespace, name), None)
        if old is None:
            return None
        table.terminating.discard((namespace, name))
        in_namespace = table.by_namespace[namespace]
        del in_namespace[name]
        if not in_namespace:
            del table.by_namespace[namespace]
        self._unindex(rt, old)
        self.uids.discard(old.uid)
        final = _at_revision(old, self.next_rv())
        table.record(Event("DELETED", final.rv, final, old))
        return final

    def _index(self, rt: ResourceType, s: Stored) -> None:
        for uid in s.owner_uids:
            self.dependents.setdefault(uid, set()).add((rt.key, s.key))

    def _unindex(self, rt: ResourceType, s: Stored) -> None:
        for uid in s.owner_uids:
            deps = self.dependents.get(uid)
            if deps is not None:
                deps.discard((rt.key, s.key))
                if not deps:
                    del self.dependents[uid]

    # -- watch ---------------------------------------------------------------------------------

    def compact(self) -> None:
        """Forget every event so far, as etcd's compaction at the current revision does: a
        watch from an older resourceVersion is then answered 410 Expired."""
        for table in self.tables.values():
            table.history.clear()
            table.horizon = self.rv

    def watch(self, rt: ResourceType, namespace: str, labels: LabelSelector | None,
              fields: FieldSelector | None, since: int | None) -> Watcher:
        """Start a watch after revision ``since``; ``None`` means "current state, then changes".

        For ``None`` the current objects are delivered first as ADDED events, as kube-apiserver
        does for a watch without a resourceVersion (or with "0").
        """
        table = self.tables[rt.key]
        w = Watcher(table, namespace, labels, fields, self.max_watch_pending,
                    slow_after=self.slow_watcher_seconds, buffer=self.watch_buffer,
                    clock=self._clock)
        if since is None:
            for s in table.sorted_objects():
                if w.matches(s):
                    w.pending.append(("ADDED", s))
        else:
            if since > self.rv:
                raise errors.too_large_resource_version(since, self.rv)
            if since < table.horizon:
                raise errors.expired(
                    f"too old resource version: {since} ({table.horizon + 1})")
            for ev in table.history:
                if ev.rv > since:
                    w.offer(ev)
        table.watchers.add(w)
        return w


def _encode_continue(rv: int, start: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv,
                                                  "start": start})).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None


def _bisect_after(objects: list[Stored], start: str) -> int:
    """Index of the first object whose key sorts after ``start`` ("namespace/name")."""
    ns, _, name = start.partition("/")
    key = (ns, name)
    lo, hi = 0, len(objects)
    while lo < hi:
        mid = (lo + hi) // 2
        if (objects[mid].namespace, objects[mid].name) <= key:
            lo = mid + 1
        else:
            hi = mid
    return lo
