"""List+watch one resource into a local dict and tell handlers about every change.

This is client-go's reflector + informer, reduced to what the scheduler needs and kept on one
event loop (no DeltaFIFO, no threads):

1. **List** the collection in pages (``limit``, following ``continue``), remember the list's
   ``resourceVersion``.
2. **Watch** from that resourceVersion with ``allowWatchBookmarks=true`` and a server-side
   ``timeoutSeconds`` drawn from ``[min_watch_timeout, 2 × min_watch_timeout)`` (client-go's
   jitter, so that thousands of clients do not reconnect in step). Each event updates
   :attr:`Informer.objects` first and then calls the handlers, so a handler sees the cache
   already holding the new state. ``BOOKMARK`` events only advance :attr:`resource_version`.
3. When a watch ends cleanly (its timeout, or the server closing it) watch again from the last
   resourceVersion: nothing was missed. A watch that ends within a second without a single
   event counts as a failure (as in client-go), so a server closing watches at once cannot
   drive a hot reconnect loop.
4. When the connection fails (transport error, 5xx, 429) reconnect from the last
   resourceVersion after an exponential backoff with jitter (``backoff_initial`` doubling to
   ``backoff_max``, reset once a list or a watch works again). The server replays what happened
   in between from its history.
5. When the history no longer reaches back that far (HTTP 410, or a 200 with an ``ERROR``
   event, which is how kube-apiserver answers an expired watch), or the stream carried a line
   that could not be understood, **relist** and diff the fresh list against :attr:`objects`:
   handlers get ``on_add`` for new objects, ``on_update`` for changed ones (by
   resourceVersion, or ``on_delete`` + ``on_add`` when the uid differs: same name, new object)
   and ``on_delete`` for objects that vanished while we were not watching. Unlike client-go we
   do not send updates for unchanged objects on a relist.

Handlers are plain callables run on the event loop, in event order; they must be quick (the
scheduler's cache updates are) and may not block. An exception in a handler is logged and
counted, never propagated: one bad object must not stop the informer. Neither does a malformed
event: it is logged, and since we cannot know what it meant, a relist reconciles.

Counters (:attr:`relists`, :attr:`reconnects`, :attr:`watches`, :attr:`malformed_events`,
:attr:`handler_errors`) are plain ints for the metrics module to export.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from pyscheduler.pacing import Backoff
from pyscheduler.kube.client import KubeClient
from pyscheduler.kube.errors import (
    ApiStatusError,
    DecodeError,
    GoneError,
    TransportError,
)
from pyscheduler.kube.tasks import cancel_and_wait

__all__ = ["Handlers", "Informer", "OnAdd", "OnDelete", "OnUpdate", "Transform",
           "drop_managed_fields", "object_key", "slim_pod"]

log = structlog.get_logger("pyscheduler.kube.informer")

Obj = dict[str, Any]
OnAdd = Callable[[Obj], None]
OnUpdate = Callable[[Obj, Obj], None]
OnDelete = Callable[[Obj], None]
#: Changes an object in place as it arrives, before it is cached and handed to handlers
#: (client-go's ``SetTransform``).
Transform = Callable[[Obj], None]


def drop_managed_fields(obj: Obj) -> None:
    """Drop ``metadata.managedFields``, as kube-scheduler's informers do: server-side apply's
    bookkeeping, often the largest part of an object, read by no one here."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


#: What a pod bound to a real node keeps of its status in the scheduler's informer: the
#: scheduler reads its phase, start time, nomination and the DisruptionTarget condition, never
#: the kubelet's per-container report. Dropping the rest keeps 150,000 pods in memory.
_BOUND_STATUS_KEPT = frozenset({"phase", "startTime", "nominatedNodeName", "qosClass"})
_CONDITIONS_KEPT = frozenset({"DisruptionTarget"})
#: What it keeps of its spec: what the cache counts of a pod on a node (requests, host ports,
#: priority, inter-pod terms and spread constraints matched against incoming pods, volumes for
#: the volume plugins) and what tells it from another pod. Tolerations, DNS, security
#: context, service account, images, commands and environment are read of pending pods only.
_BOUND_SPEC_KEPT = frozenset({
    "nodeName", "schedulerName", "priority", "containers", "initContainers", "overhead",
    "resources", "hostNetwork", "affinity", "topologySpreadConstraints", "volumes",
    "nodeSelector", "schedulingGates"})
_CONTAINER_KEPT = frozenset({"name", "resources", "ports", "restartPolicy"})
#: kubectl's copy of the whole object as last applied: often an object's largest annotation,
#: read by no one here.
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _slim_containers(containers: Any, host_network: bool) -> None:
    for c in containers if isinstance(containers, list) else ():
        if not isinstance(c, dict):
            continue
        for key in [k for k in c if k not in _CONTAINER_KEPT]:
            del c[key]
        ports = c.get("ports")
        if isinstance(ports, list) and not host_network:
            # Without hostNetwork only a port with a hostPort holds anything on the node.
            held = [p for p in ports if not isinstance(p, dict) or p.get("hostPort")]
            if held:
                c["ports"] = held
            else:
                del c["ports"]


def slim_pod(obj: Obj, *, keep_whole_on: Callable[[str], bool] = lambda node: False) -> None:
    """:func:`drop_managed_fields`, and for a pod bound to a node (unless ``keep_whole_on``
    says the pod is read in full there, as the virtual-node provider and the rebalancer read
    their own pods) only what the scheduler reads of a pod already on a node: a status reduced
    to phase, start time, nomination and DisruptionTarget, a spec reduced to what the cache
    counts (:data:`_BOUND_SPEC_KEPT`, and of each container its name, resources, ports held on
    the host and restart policy), and the metadata without kubectl's last-applied copy."""
    drop_managed_fields(obj)
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    if not node or not isinstance(node, str) or keep_whole_on(node):
        return
    assert isinstance(spec, dict)
    status = obj.get("status")
    if isinstance(status, dict):
        conditions = status.get("conditions")
        for key in [k for k in status if k not in _BOUND_STATUS_KEPT]:
            del status[key]
        if isinstance(conditions, list):
            kept = [c for c in conditions if isinstance(c, dict) and c.get("type") in
                    _CONDITIONS_KEPT]
            if kept:
                status["conditions"] = kept
    for key in [k for k in spec if k not in _BOUND_SPEC_KEPT]:
        del spec[key]
    host_network = bool(spec.get("hostNetwork"))
    _slim_containers(spec.get("containers"), host_network)
    _slim_containers(spec.get("initContainers"), host_network)
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict):
        annotations.pop(_LAST_APPLIED, None)


def object_key(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones (client-go's
    ``MetaNamespaceKeyFunc``). Raises ``ValueError`` for an object without a name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise ValueError("object has no metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("object has no metadata.name")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


def _meta(obj: Obj, field: str) -> str:
    meta = obj.get("metadata")
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Handlers:
    """One registered set of callbacks; any of them may be ``None``."""

    on_add: OnAdd | None = None
    on_update: OnUpdate | None = None
    on_delete: OnDelete | None = None


class _Relist(Exception):
    """Internal: the watch cannot continue from our resourceVersion; list again."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _ShortWatch(Exception):
    """Internal: a watch closed cleanly at once, with nothing in it; back off before the next."""


# client-go treats a watch that ends within a second without any event as a failure, so that a
# server (or proxy) closing watches immediately cannot make clients reconnect in a hot loop.
SHORT_WATCH_SECONDS = 1.0


class Informer:
    """Keep :attr:`objects` equal to the server's collection at ``path`` and report changes.

    ``path`` is a collection path (``/api/v1/pods``, ``/api/v1/namespaces/x/configmaps``,
    ``/apis/wssp.pyscheduler.io/v1alpha1/wsspschedulerconfigurations``); ``field_selector`` and
    ``label_selector`` narrow it (an object that stops matching arrives as a delete).

    :attr:`synced` is set once the first list has been delivered to the handlers. :meth:`start`
    runs the informer as a task on the current loop; :meth:`stop` cancels it. A stopped
    informer keeps :attr:`objects` and :attr:`resource_version`, and a new :meth:`start`
    resumes watching from there (relisting if the server's history no longer reaches back).
    """

    def __init__(self, client: KubeClient, path: str, *, field_selector: str | None = None,
                 label_selector: str | None = None, on_add: OnAdd | None = None,
                 on_update: OnUpdate | None = None, on_delete: OnDelete | None = None,
                 page_size: int = 500, min_watch_timeout: float = 300.0,
                 backoff_initial: float = 0.2, backoff_max: float = 30.0,
                 rng: random.Random | None = None, name: str | None = None,
                 transform: Transform | None = None) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.client = client
        self.path = path
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.name = name or path
        self.transform = transform
        self._rng = rng or random.Random()
        self._backoff = Backoff(initial=backoff_initial, maximum=backoff_max, rng=self._rng)
        self._handlers: list[Handlers] = []
        if on_add or on_update or on_delete:
            self._handlers.append(Handlers(on_add, on_update, on_delete))
        self.objects: dict[str, Obj] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._listed = False
        # Counters for metrics.
        self.lists = 0
        self.relists = 0
        self.watches = 0
        self.reconnects = 0
        self.malformed_events = 0
        self.handler_errors = 0
        self.last_error: str = ""

    # -- public surface ------------------------------------------------------------------------

    def add_handlers(self, *, on_add: OnAdd | None = None, on_update: OnUpdate | None = None,
                     on_delete: OnDelete | None = None) -> Handlers:
        """Register more callbacks. As in client-go, objects already known are replayed to the
        new ``on_add`` at once, so a late subscriber starts from the same state. Returns the
        registration, for :meth:`remove_handlers`."""
        handlers = Handlers(on_add, on_update, on_delete)
        self._handlers.append(handlers)
        if on_add is not None:
            for obj in list(self.objects.values()):
                self._call(on_add, "add", obj)
        return handlers

    def remove_handlers(self, handlers: Handlers) -> None:
        """Stop calling a registration made by :meth:`add_handlers` (no-op if already gone)."""
        self._handlers = [h for h in self._handlers if h is not handlers]

    def get(self, key: str) -> Obj | None:
        """The cached object for ``namespace/name`` (or ``name``), if any."""
        return self.objects.get(key)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The list+watch task while started (for a supervisor to watch)."""
        return self._task

    def start(self) -> asyncio.Task[None]:
        """Start listing and watching in a task on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"informer {self.name}")
        return self._task

    async def stop(self) -> None:
        """Stop watching; returns once the task has ended. Keeps the cache for a restart."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    # -- the loop ------------------------------------------------------------------------------

    def _selectors(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        return params

    async def _run(self) -> None:
        need_list = not self._listed
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    self._backoff.reset()
                await self._watch()
                # A clean end (server-side timeout, the server closing watches): go on from
                # the last resourceVersion, at once.
                continue
            except asyncio.CancelledError:
                raise
            except _Relist as exc:
                log.info("relisting", informer=self.name, why=exc.why,
                         resource_version=self.resource_version)
                self.last_error = exc.why
                need_list = True
            except GoneError as exc:
                # A 410 on the list itself (an expired continue token) or on the watch request.
                log.info("relisting after 410", informer=self.name, error=str(exc))
                self.last_error = str(exc)
                need_list = True
            except _ShortWatch:
                self.reconnects += 1
                log.debug("watch closed at once without events; backing off", informer=self.name)
            except (TransportError, ApiStatusError, DecodeError) as exc:
                self.reconnects += 1
                self.last_error = str(exc)
                level = log.info if isinstance(exc, TransportError) else log.warning
                level("watch or list failed; retrying", informer=self.name, error=str(exc),
                      relist=need_list)
            except Exception as exc:  # a bug must not end the informer
                self.reconnects += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("informer failed unexpectedly; relisting", informer=self.name)
                need_list = True
            await asyncio.sleep(self._backoff.next())

    async def _list(self) -> None:
        """List every page, then diff against the cache and notify."""
        params: dict[str, str | int] = {**self._selectors(), "limit": self.page_size}
        fresh: dict[str, Obj] = {}
        resource_version = ""
        continue_token = ""
        pages = 0
        while True:
            if continue_token:
                params["continue"] = continue_token
            page = await self.client.list(self.path, params)
            pages += 1
            metadata = page.get("metadata") if isinstance(page.get("metadata"), dict) else {}
            assert isinstance(metadata, dict)
            if not resource_version:
                resource_version = str(metadata.get("resourceVersion") or "")
            kind = page.get("kind")
            item_kind = kind[:-4] if isinstance(kind, str) and kind.endswith("List") else None
            api_version = page.get("apiVersion")
            items = page.get("items")
            for item in items if isinstance(items, list) else ():
                if not isinstance(item, dict):
                    self.malformed_events += 1
                    log.warning("list item is not an object; skipped", informer=self.name)
                    continue
                try:
                    key = object_key(item)
                except ValueError as exc:
                    self.malformed_events += 1
                    log.warning("list item skipped", informer=self.name, error=str(exc))
                    continue
                if self.transform is not None:
                    self.transform(item)
                # Items of a list carry no kind/apiVersion; watch events do. Make them alike.
                if item_kind:
                    item.setdefault("kind", item_kind)
                if isinstance(api_version, str):
                    item.setdefault("apiVersion", api_version)
                fresh[key] = item
            continue_token = str(metadata.get("continue") or "")
            if not continue_token:
                break
        if self._listed:
            self.relists += 1
        self.lists += 1
        self._replace(fresh)
        self.resource_version = resource_version
        self._listed = True
        log.debug("listed", informer=self.name, objects=len(fresh), pages=pages,
                  resource_version=resource_version)
        self.synced.set()

    def _replace(self, fresh: dict[str, Obj]) -> None:
        """Make the cache equal to ``fresh``, telling handlers about each difference."""
        old = self.objects
        for key in [k for k in old if k not in fresh]:
            self._deleted(key)
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._added(key, obj)
            elif _meta(previous, "uid") != _meta(obj, "uid"):
                self._deleted(key)
                self._added(key, obj)
            elif _meta(previous, "resourceVersion") != _meta(obj, "resourceVersion"):
                self._updated(key, previous, obj)

    async def _watch(self) -> None:
        """One watch request, processed until the stream ends. Raises to end it otherwise."""
        timeout = int(self.min_watch_timeout * (1.0 + self._rng.random()))
        params: dict[str, str | int | bool] = {
            **self._selectors(), "watch": True, "allowWatchBookmarks": True,
            "resourceVersion": self.resource_version, "timeoutSeconds": timeout}
        self.watches += 1
        loop = asyncio.get_running_loop()
        started = loop.time()
        received = 0
        # A silent connection for longer than the server-side timeout plus a margin is dead.
        stream = self.client.stream(self.path, params, read_timeout=timeout + 30.0)
        async with contextlib.aclosing(stream) as events:
            try:
                async for event in events:
                    received += 1
                    self._backoff.reset()
                    self._handle(event)
            except DecodeError as exc:
                self.malformed_events += 1
                log.warning("undecodable watch line", informer=self.name, error=exc.problem,
                            data=exc.data[:200].decode("utf-8", "replace"))
                raise _Relist("an undecodable watch event") from None
        if not received and loop.time() - started < SHORT_WATCH_SECONDS:
            raise _ShortWatch()
        # The stream ended cleanly after working for a while: go on at once.
        self._backoff.reset()

    def _handle(self, event: Obj) -> None:
        type_ = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            self.malformed_events += 1
            log.warning("watch event without an object", informer=self.name, type=type_)
            raise _Relist("a watch event without an object")
        if type_ == "ERROR":
            code = obj.get("code")
            reason, message = obj.get("reason"), obj.get("message")
            if code == 410 or reason in ("Gone", "Expired"):
                raise _Relist(f"watch expired: {message}")
            raise _Relist(f"watch error {code} {reason}: {message}")
        rv = _meta(obj, "resourceVersion")
        if type_ == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        if type_ not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("unknown watch event type ignored", informer=self.name, type=type_)
            return
        try:
            key = object_key(obj)
        except ValueError as exc:
            self.malformed_events += 1
            log.warning("malformed watch event", informer=self.name, type=type_,
                        error=str(exc))
            raise _Relist(f"a malformed {type_} event") from None
        if self.transform is not None:
            self.transform(obj)
        previous = self.objects.get(key)
        if type_ == "DELETED":
            if previous is not None:
                self._deleted(key, final=obj)
        elif previous is None:
            self._added(key, obj)
        elif _meta(previous, "uid") != _meta(obj, "uid"):
            self._deleted(key)
            self._added(key, obj)
        else:
            self._updated(key, previous, obj)
        if rv:
            self.resource_version = rv

    # -- cache changes and notification --------------------------------------------------------

    def _added(self, key: str, obj: Obj) -> None:
        self.objects[key] = obj
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, "add", obj)

    def _updated(self, key: str, old: Obj, new: Obj) -> None:
        self.objects[key] = new
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, "update", old, new)

    def _deleted(self, key: str, final: Obj | None = None) -> None:
        # A DELETED event carries the final state; after a relist we only have the last one
        # we saw (client-go wraps it in DeletedFinalStateUnknown; the object is the same).
        last = self.objects.pop(key)
        obj = final if final is not None else last
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, "delete", obj)

    def _call(self, handler: Callable[..., None], what: str, *args: Obj) -> None:
        try:
            handler(*args)
        except Exception:
            self.handler_errors += 1
            log.exception("informer handler failed", informer=self.name, change=what,
                          key=_safe_key(args[-1]))


def _safe_key(obj: Obj) -> str:
    try:
        return object_key(obj)
    except ValueError:
        return "?"
