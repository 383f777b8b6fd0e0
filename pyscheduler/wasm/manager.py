"""The set of serving fragments, kept in step with the ``WsspSchedulerConfiguration`` resources.

Life of a resource
------------------
The manager watches the resources (an informer on the custom resource). A new generation is
parsed and validated (:func:`parse_resource`, and its limits against the scheduler's
``fragments.maxTimeoutMilliseconds``), its status set to ``Loading``, and then loaded without
ever running on the event loop: fetch (:func:`storage.fetch`, sha256 verified), compile and check
the ABI (:meth:`Fragment.compile`) in a worker thread, then instantiate (``wssp_init``) on the
fragment's own call thread; only the first full write of the node table into the instance
happens on the loop. Then the new version replaces the old one, in one dictionary assignment:
a pod whose cycle already picked the old :class:`StageOverride` finishes on it, the next pod gets
the new one. A load that fails at any step leaves the previous version serving and records
``Failed`` with the reason in the resource's status at once. A failed *fetch* may pass (object
storage restarting, a network blip): it is retried with backoff (10 s doubling to 5 min), and
``status.nextAttemptAt`` says when; a module that fetched but does not load is not retried (its
bytes are pinned by the sha256) until the resource changes.

Without the CRD installed, fragments are off: start-up says so once, with the command that
installs it, and then checks quietly every 30 s, so that installing the CRD later turns fragments
on without a restart.

Calls and quarantine
--------------------
A resource's stage override runs its calls through :meth:`Fragment.evaluate` (off the loop, one
pod at a time per fragment). A fragment whose calls keep failing is quarantined
(:class:`~pyscheduler.wasm.fragment.Breaker`): the resource's phase turns ``Quarantined`` with
``nextAttemptAt``, ``pyscheduler_fragment_quarantined`` is 1, and every pod naming it gets the
failure policy at once instead of waiting for a call that will fail; it turns ``Ready`` again
when a trial call succeeds. The guest's ``wssp.log`` lines are rate-limited per fragment
(:class:`~pyscheduler.wasm.guestlog.GuestLog`).

Selection per pod
-----------------
``wssp/schedulefragment: <name>-v<x.y.z>`` selects that version; ``<name>`` alone follows the
newest Ready version of that name. Pods without the annotation get ``scheduleFragment`` from the
scheduler configuration (``default:v1.0.0`` by default): a resource of that name when one is
Ready, otherwise the module of that name shipped in the package.

The shipped default module is the default logic (:mod:`pyscheduler.plugins.default_logic`): its
filter extends the built-in filters, and its score (most free memory, weight 2) stands in for the
built-in resource scores (NodeResourcesFit, BalancedAllocation) and ImageLocality. When the
module's sha256 is that of the shipped build (:data:`NATIVE_DEFAULTS`), the host runs its exact
native equivalent instead (no module is loaded, no call made; tests/unit/wasm/
test_default_native.py proves the two agree); a module with other bytes runs in WebAssembly
with the same semantics.

A pod naming a fragment that is missing or not Ready raises :class:`StageUnavailable` (the
scheduler reports it and retries when a fragment becomes Ready).

Shadow resources (``spec.shadow: true``) never decide anything: a pod that selects a name with a
shadow version is scheduled by the active version (or the default logic when none), and the
newest Ready shadow version is evaluated next to it; the scheduler counts disagreements.

Failure policies apply per call (:class:`CallError`): ``Fail`` raises :class:`StageFailed`,
``Ignore`` makes the stage a no-op, ``Default`` hands the stage to the built-in plugins. When the
filter call fails, the score call of the same pod is not made and the policy applies to it too.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from pyscheduler.api.times import rfc3339
from pyscheduler.api.names import FRAGMENT_ANNOTATION
from pyscheduler.settings import FragmentsConfig
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.lifecycle import WaitingRoom
from pyscheduler.framework.pipeline import Selection, StageFailed, StageOverride, StageUnavailable
from pyscheduler.framework.pod import PodInfo
from pyscheduler.kube.client import api_path
from pyscheduler.kube.errors import NotFoundError
from pyscheduler.kube.informer import Informer
from pyscheduler.kube.tasks import Supervisor, cancel_and_wait
from pyscheduler.metrics import SchedulerMetrics
from pyscheduler.pacing import Backoff
from pyscheduler.plugins.default_logic import (
    MOST_FREE_MEMORY_WEIGHT,
    REPLACED_SCORES,
    IncrementalMostFreeMemory,
)
from pyscheduler.wasm import storage
from pyscheduler.wasm.errors import CallError, FragmentError, LoadError, StorageError
from pyscheduler.wasm.fragment import Answers, Breaker, BreakerState, Fragment, unchanged_rows
from pyscheduler.wasm.guestlog import GuestLog
from pyscheduler.wasm.lifecycle import (
    FragmentLifecycle,
    apply_commands,
    narrowed,
    prefilter_narrowing,
)
from pyscheduler.wasm.resource import (
    API_VERSION,
    GROUP,
    PLURAL,
    FragmentLimits,
    FragmentSpec,
    ResourceError,
    StageSpec,
    format_version,
    parse_resource,
    resource_name,
    selector,
    status_patch,
)
from pyscheduler.wasm.vm import Limits

__all__ = [
    "CRD_INSTALL_HINT",
    "NATIVE_DEFAULTS",
    "PACKAGED_DIR",
    "FragmentManager",
    "LoadedFragment",
    "native_default",
    "packaged_spec",
]

log = structlog.get_logger("pyscheduler.wasm")

PACKAGED_DIR = Path(__file__).parent / "fragments"
RESOURCE_PATH = api_path(API_VERSION, PLURAL)
CRD_INSTALL_HINT = "kubectl apply -f manifests/crd-wsspschedulerconfiguration.yaml"
CRD_CHECK_SECONDS = 30.0
FETCH_RETRY_INITIAL_SECONDS = 10.0
FETCH_RETRY_MAX_SECONDS = 300.0
# Rows whose node changed while a fragment's calls ran: the fragment never saw that node.
CHANGED_ROW_REASON = "node(s) changed while the fragment was deciding"
Version = tuple[int, int, int]
#: The shipped default module's name: its score stands in for the built-in resource scores.
DEFAULT_NAME = "default"
#: Packaged modules with an exactly equivalent native implementation, by resource name: the
#: sha256 of the shipped build (``hack/build_fragments.sh``). Other bytes run in WebAssembly.
NATIVE_DEFAULTS: dict[str, str] = {
    "default-v1.0.0": "2c922770f13eabcb7ee43f975d62c8160bbdfd118844219899649fdab3ec2afd",
}


@dataclass(frozen=True, slots=True)
class LoadedFragment:
    """One serving version: its validated spec, the compiled fragment and its stage override."""

    spec: FragmentSpec
    fragment: Fragment
    override: StageOverride
    packaged: bool = False


@dataclass(slots=True)
class _Entry:
    """What the manager knows of one resource."""

    spec: FragmentSpec | None
    phase: str
    message: str
    serving: LoadedFragment | None = None
    loading: int | None = None  # generation being loaded
    retry: Backoff | None = None  # fetch retries of the generation being loaded
    next_attempt: str | None = None


def _override_name(resource: str) -> str:
    """The name of a resource's stage override (and of its shadow metrics' series)."""
    return f"fragment:{resource}"



def packaged_spec(name: str, version: Version) -> FragmentSpec:
    """The spec of a fragment shipped in the package: it runs beside the built-in profile
    (filter and score extended; the default's score with weight 2 in place of the built-in
    resource scores, see :func:`_replaced_scores`) and defers to it when a call fails."""
    resource = resource_name(name, version)
    weight = MOST_FREE_MEMORY_WEIGHT if name == DEFAULT_NAME else 1
    return FragmentSpec(
        resource_name=resource, name=name, version=version, generation=0, uid="",
        url=f"file://{PACKAGED_DIR / (resource + '.wasm')}", sha256=None,
        filter=StageSpec("extend"), score=StageSpec("extend", weight), config={},
        limits=FragmentLimits(), failure_policy="Default", shadow=False, runtime=None)


def _replaced_scores(spec: FragmentSpec, packaged: bool) -> frozenset[str]:
    """The built-in score plugins a fragment's score stands in for: the shipped default's
    most-free-memory score replaces the built-in resource scores (and ImageLocality); any
    other fragment's extending score adds to all of them."""
    return REPLACED_SCORES if packaged and spec.name == DEFAULT_NAME else frozenset()


def native_default(spec: FragmentSpec) -> StageOverride:
    """The shipped default module's stage override, run natively: no filter of its own (its
    filter is the built-in filters it extends), most free memory as its score (kept per
    memory request, recomputed where rows changed) with the spec's weight in place of the
    built-in resource scores. Exactly what the module's override gives
    (tests/unit/wasm/test_default_native.py), without a call."""
    assert spec.score is not None
    return StageOverride(name=_override_name(spec.resource_name),
                         score=IncrementalMostFreeMemory(),
                         score_mode="extend", score_weight=spec.score.weight,
                         score_replaces=REPLACED_SCORES)


def _on_current_rows(verdict: FilterResult, same: BoolArray) -> FilterResult:
    """``verdict`` over the table's current rows: a row that changed node since the calls
    began fails (the fragment never judged that node)."""
    n = len(same)
    if verdict.passed is None:
        return verdict
    if len(verdict.passed) == n and bool(same.all()):
        return verdict
    m = min(n, len(verdict.passed))
    passed = np.zeros(n, np.bool_)
    passed[:m] = verdict.passed[:m]
    passed &= same
    reasons = []
    for reason in verdict.reasons:
        failed = np.zeros(n, np.bool_)
        failed[:m] = reason.failed[:m]
        reasons.append(Reason(reason.message, failed & same, reason.unresolvable))
    reasons.append(Reason(CHANGED_ROW_REASON, ~same))
    return FilterResult(passed, reasons)


def _scores_on_current_rows(scores: IntArray, same: BoolArray) -> IntArray:
    n = len(same)
    out = np.zeros(n, np.int64)
    m = min(n, len(scores))
    out[:m] = scores[:m]
    out[~same] = 0
    return out


class FragmentManager:
    """Keeps the fragment set and answers, per pod, which stage overrides apply."""

    def __init__(self, table: NodeTable, *, client: Any | None = None,
                 storage_config: storage.StorageConfig | None = None,
                 settings: FragmentsConfig | None = None,
                 default: str | None = "default:v1.0.0",
                 metrics: SchedulerMetrics | None = None,
                 on_ready: Callable[[str], None] | None = None,
                 writes_status: Callable[[], bool] = lambda: True,
                 executor: ThreadPoolExecutor | None = None,
                 waiting: WaitingRoom | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 native: bool = True) -> None:
        self.table = table
        # The pods held at a fragment's permit (the scheduler's, when it runs one).
        self.waiting = waiting if waiting is not None else WaitingRoom()
        self.client = client
        self.storage = storage_config or storage.StorageConfig()
        self.settings = settings = settings or FragmentsConfig()
        self.runtime = settings.runtime
        self.limits = Limits(memory_bytes=settings.memory_mib * 2**20, fuel=settings.fuel,
                             timeout_seconds=settings.timeout_seconds)
        self.default = selector(default) if default else None
        self.metrics = metrics
        self.on_ready = on_ready
        self.writes_status = writes_status  # only the leader writes resource status
        self.clock = clock
        self.entries: dict[str, _Entry] = {}
        self.packaged: dict[str, LoadedFragment] = {}
        # Run a shipped module with a native equivalent (NATIVE_DEFAULTS) natively; False
        # loads it in WebAssembly like any other (tests compare the two).
        self.run_native = native
        # Packaged modules served by their native equivalent (NATIVE_DEFAULTS), by resource.
        self.native: dict[str, StageOverride] = {}
        self._executor = executor or ThreadPoolExecutor(2, thread_name_prefix="fragment-load")
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._informer: Informer | None = None
        self._crd_task: asyncio.Task[None] | None = None
        self._status_locks: dict[str, asyncio.Lock] = {}
        self.crd_installed: bool | None = None  # None: not known yet
        self.crd_check_seconds = CRD_CHECK_SECONDS
        # Watches the long-lived tasks started later (the informer, once the CRD appears).
        self.supervisor: Supervisor | None = None
        self.fetch_retry_seconds = (FETCH_RETRY_INITIAL_SECONDS, FETCH_RETRY_MAX_SECONDS)

    # -- start and stop ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the packaged default (a failure here fails start-up: a bad build must not
        serve), then follow the resources when a client is given."""
        if self.default is not None:
            name, version = self.default
            if version is not None:
                path = PACKAGED_DIR / f"{name}-v{format_version(version)}.wasm"
                if path.exists():
                    spec = packaged_spec(name, version)
                    wasm = path.read_bytes()
                    if self.run_native and hashlib.sha256(wasm).hexdigest() == \
                            NATIVE_DEFAULTS.get(spec.resource_name):
                        self.native[spec.resource_name] = native_default(spec)
                        if self.metrics is not None:
                            self.metrics.fragment_info.labels(
                                spec.resource_name, spec.name, format_version(spec.version),
                                NATIVE_DEFAULTS[spec.resource_name], "native").set(1)
                        log.info("the shipped default module runs natively",
                                 fragment=spec.resource_name)
                    else:
                        loaded = await self._load(spec, wasm, packaged=True)
                        self.packaged[spec.resource_name] = replace(loaded, packaged=True)
        if self.client is None:
            return
        try:
            await self.client.get(RESOURCE_PATH, {"limit": "1"})
        except NotFoundError:
            self.crd_installed = False
            # Fragments are optional: without the CRD the scheduler schedules with its
            # built-ins (and the packaged default), and checks now and then, so that
            # installing the CRD later turns fragments on without a restart.
            log.warning("WsspSchedulerConfiguration CRD not installed: fragment resources are "
                        f"off until it is ({CRD_INSTALL_HINT}); checking every "
                        f"{self.crd_check_seconds:g}s", crd=f"{PLURAL}.{GROUP}")
            self._crd_task = asyncio.get_running_loop().create_task(
                self._wait_for_crd(), name="fragments: wait for the CRD")
            return
        self.crd_installed = True
        await self._follow().synced.wait()

    def _follow(self) -> Informer:
        assert self.client is not None
        informer = self._informer = Informer(
            self.client, RESOURCE_PATH, on_add=self._on_resource,
            on_update=lambda old, new: self._on_resource(new), on_delete=self._on_deleted,
            name="fragments")
        informer.start()
        return informer

    async def _wait_for_crd(self) -> None:
        assert self.client is not None
        while True:
            await asyncio.sleep(self.crd_check_seconds)
            try:
                await self.client.get(RESOURCE_PATH, {"limit": "1"})
            except NotFoundError:
                continue
            except Exception as exc:  # the API server may be away for a while: try later
                log.debug("checking for the fragment CRD failed", error=str(exc))
                continue
            self.crd_installed = True
            log.info("WsspSchedulerConfiguration CRD installed: following fragment resources")
            informer = self._follow()
            if self.supervisor is not None:
                self.supervisor.unwatch(asyncio.current_task())  # this task's job is done
                self.supervisor.watch("fragments informer", informer.task)
            return

    @property
    def tasks(self) -> dict[str, asyncio.Task[Any]]:
        """The long-lived tasks of the manager, for the process to watch."""
        out: dict[str, asyncio.Task[Any]] = {}
        if self._informer is not None and self._informer.task is not None:
            out["fragments informer"] = self._informer.task
        if self._crd_task is not None and not self._crd_task.done():
            out["fragments CRD check"] = self._crd_task
        return out

    async def stop(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await cancel_and_wait(self._crd_task)
        if self._informer is not None:
            await self._informer.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)
        for loaded in self._serving():
            loaded.fragment.stop()

    def _serving(self) -> list[LoadedFragment]:
        out = list(self.packaged.values())
        out += [e.serving for e in self.entries.values() if e.serving is not None]
        return out

    def republish(self) -> None:
        """Write every resource's current phase again (a new leader: what the old leader
        wrote may be stale)."""
        for resource, entry in list(self.entries.items()):
            if entry.spec is None or entry.phase == "Loading":
                continue
            serving = entry.serving
            frag = serving.fragment if serving is not None and \
                serving.spec.generation == entry.spec.generation else None
            self._patch_status(resource, status_patch(
                entry.phase, generation=entry.spec.generation, message=entry.message,
                digest=frag.digest if frag else None, runtime=frag.runtime if frag else None,
                now=rfc3339(), next_attempt=entry.next_attempt))

    # -- loading -------------------------------------------------------------------------------

    def _limits(self, spec: FragmentSpec) -> Limits:
        limits = self.limits
        if spec.limits.fuel is not None:
            limits = replace(limits, fuel=spec.limits.fuel)
        if spec.limits.timeout_seconds is not None:
            limits = replace(limits, timeout_seconds=spec.limits.timeout_seconds)
        if spec.limits.memory_bytes is not None:
            limits = replace(limits, memory_bytes=spec.limits.memory_bytes)
        return limits

    def _check_limits(self, spec: FragmentSpec) -> None:
        """:class:`ResourceError` when the resource asks for more than this scheduler allows."""
        asked = spec.limits.timeout_seconds
        allowed = self.settings.max_timeout_seconds
        if asked is not None and asked > allowed:
            raise ResourceError(spec.resource_name, [
                f"spec.limits.timeoutMilliseconds: {round(asked * 1000)} is more than this "
                f"scheduler allows (fragments.maxTimeoutMilliseconds: "
                f"{round(allowed * 1000)})"])

    async def _load(self, spec: FragmentSpec, wasm: bytes | None = None, *,
                    packaged: bool = False) -> LoadedFragment:
        """Fetch (unless given) and compile in a worker thread, instantiate on the fragment's
        call thread, write the table on the loop."""
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        if wasm is None:
            wasm = await loop.run_in_executor(
                self._executor, storage.fetch, spec.url, spec.sha256, self.storage)
        runtime = spec.runtime or self.runtime
        fragment = await loop.run_in_executor(self._executor, lambda: Fragment.compile(
            wasm, name=spec.resource_name, config=spec.config,
            filter=spec.filter is not None, score=spec.score is not None, runtime=runtime,
            limits=self._limits(spec), log=self._guest_log(spec.resource_name)))
        missing = sorted(set(spec.lifecycle) - fragment.stages)
        if missing:
            raise LoadError("; ".join(f"spec.stages.{stage}: the module does not export "
                                      f"wssp_{stage}" for stage in missing))
        settings = self.settings
        fragment.call_nice = settings.call_thread_nice
        fragment.inline_seconds = settings.inline_call_seconds
        fragment.breaker = Breaker(threshold=settings.quarantine_after_failures,
                                   cooldown=settings.quarantine_seconds,
                                   max_cooldown=max(settings.quarantine_seconds, 300.0),
                                   clock=self.clock)
        try:
            await fragment.start(self.table)
        except BaseException:
            fragment.stop()
            raise
        fragment.load_seconds = time.perf_counter() - start
        return LoadedFragment(spec, fragment, self._override(
            spec, fragment, _replaced_scores(spec, packaged)))

    def _guest_log(self, resource: str) -> GuestLog:
        metrics = self.metrics
        counter = metrics.fragment_log_dropped.labels(resource) if metrics is not None else None
        return GuestLog(resource, rate=self.settings.log_lines_per_second,
                        burst=self.settings.log_burst,
                        on_dropped=counter.inc if counter is not None else None)

    def _on_resource(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        resource = str(meta.get("name") or "")
        given = meta.get("generation")
        generation = given if isinstance(given, int) else 0
        entry = self.entries.get(resource)
        if entry is not None and entry.spec is not None and entry.spec.generation == generation \
                and entry.spec.uid == meta.get("uid"):
            return  # a status update (ours, usually): nothing to load
        try:
            spec = parse_resource(obj)
            self._check_limits(spec)
        except ResourceError as exc:
            message = str(exc)
            if entry is None:
                entry = self.entries[resource] = _Entry(None, "Failed", message)
            entry.phase, entry.message, entry.next_attempt = "Failed", message, None
            self._count_load(resource, "failure")
            log.warning("fragment resource invalid", fragment=resource, error=message)
            self._patch_status(resource, status_patch(
                "Failed", generation=generation, message=message, now=rfc3339(),
                previous=obj.get("status")))
            return
        if entry is None:
            entry = self.entries[resource] = _Entry(spec, "Loading", "")
        else:
            entry.spec = spec
            entry.phase, entry.message = "Loading", ""
        entry.loading = generation
        entry.retry = None
        entry.next_attempt = None
        self._patch_status(resource, status_patch(
            "Loading", generation=generation, message="fetching and compiling",
            now=rfc3339(), previous=obj.get("status")))
        self._start_loading(resource, spec, obj)

    def _start_loading(self, resource: str, spec: FragmentSpec, obj: dict[str, Any],
                       delay: float = 0.0) -> None:
        old = self._tasks.pop(resource, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(
            self._load_resource(spec, obj, delay), name=f"load fragment {resource}")
        self._tasks[resource] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._tasks.get(resource) is done:
                del self._tasks[resource]
        task.add_done_callback(forget)

    async def _load_resource(self, spec: FragmentSpec, obj: dict[str, Any],
                             delay: float = 0.0) -> None:
        resource = spec.resource_name
        if delay:
            await asyncio.sleep(delay)
        try:
            loaded = await self._load(spec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Every failure, foreseen (fetch, module, wssp_init) or not, ends Loading at once.
            message = str(exc) or type(exc).__name__
            if not isinstance(exc, (FragmentError, OSError, ValueError)):
                log.exception("fragment load failed unexpectedly", fragment=resource)
                message = f"{type(exc).__name__}: {message}"
            # Retried: what may pass (storage away, an object not uploaded yet). Not: a module
            # that does not load (its bytes are pinned), a URL the configuration refuses.
            retry = isinstance(exc, StorageError) and not exc.refused or \
                not isinstance(exc, (FragmentError, ValueError))
            self._load_failed(spec, obj, message, retry=retry)
            return
        entry = self.entries.get(resource)
        if entry is None or entry.loading != spec.generation:
            loaded.fragment.stop()
            return  # deleted or superseded while loading
        entry.serving = loaded  # the swap: the next pod sees the new version
        entry.phase, entry.message, entry.loading = "Ready", "", None
        entry.retry, entry.next_attempt = None, None
        self._count_load(resource, "success")
        frag = loaded.fragment
        if self.metrics is not None:
            self.metrics.fragment_info.labels(resource, spec.name, format_version(spec.version),
                                              frag.digest, frag.runtime).set(1)
        log.info("fragment ready", fragment=resource, digest=frag.digest[:12],
                 runtime=frag.runtime, load_seconds=round(frag.load_seconds, 3))
        self._patch_status(resource, status_patch(
            "Ready", generation=spec.generation, message="serving", digest=frag.digest,
            runtime=frag.runtime, load_seconds=frag.load_seconds, now=rfc3339(),
            previous=obj.get("status")))
        if self.on_ready is not None:
            self.on_ready(resource)

    def _load_failed(self, spec: FragmentSpec, obj: dict[str, Any], message: str, *,
                     retry: bool) -> None:
        resource = spec.resource_name
        entry = self.entries.get(resource)
        if entry is None or entry.loading != spec.generation:
            return  # deleted or superseded meanwhile
        self._count_load(resource, "failure")
        serving = entry.serving
        kept = f" (generation {serving.spec.generation} keeps serving)" if serving else ""
        next_attempt = None
        if retry:
            if entry.retry is None:
                initial, maximum = self.fetch_retry_seconds
                entry.retry = Backoff(initial=initial, maximum=maximum)
            delay = entry.retry.next()
            next_attempt = rfc3339(time.time() + delay)
            kept += f"; retrying at {next_attempt}"
            self._start_loading(resource, spec, obj, delay)
        else:
            entry.loading = None
        entry.phase, entry.message, entry.next_attempt = "Failed", message + kept, next_attempt
        log.warning("fragment load failed", fragment=resource, error=message + kept)
        self._patch_status(resource, status_patch(
            "Failed", generation=spec.generation, message=message + kept, now=rfc3339(),
            previous=obj.get("status"), next_attempt=next_attempt))

    def _on_deleted(self, obj: dict[str, Any]) -> None:
        resource = str((obj.get("metadata") or {}).get("name") or "")
        entry = self.entries.pop(resource, None)
        task = self._tasks.pop(resource, None)
        if task is not None:
            task.cancel()
        if self.metrics is not None:
            self.metrics.forget_fragment(resource, shadow=_override_name(resource))
        if entry is not None and entry.serving is not None and self.metrics is not None:
            spec, frag = entry.serving.spec, entry.serving.fragment
            try:
                self.metrics.fragment_info.remove(resource, spec.name,
                                                  format_version(spec.version), frag.digest,
                                                  frag.runtime)
            except KeyError:
                pass

    def _count_load(self, resource: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.set_fragment_load_result(resource, ok=result == "success")

    def _patch_status(self, resource: str, patch: dict[str, Any]) -> None:
        if self.client is None or not self.writes_status():
            return
        client = self.client
        # Patches of one resource go out in the order they were made (Loading before Ready):
        # tasks reach the lock in creation order and asyncio locks are fair.
        lock = self._status_locks.setdefault(resource, asyncio.Lock())

        async def send() -> None:
            async with lock:
                try:
                    await client.patch(api_path(API_VERSION, PLURAL, name=resource,
                                                subresource="status"), patch)
                except Exception as exc:  # status is informative; scheduling must not wait
                    log.warning("could not update fragment status", fragment=resource,
                                error=str(exc))
        asyncio.get_running_loop().create_task(send())

    # -- quarantine ----------------------------------------------------------------------------

    def _breaker_changed(self, spec: FragmentSpec, fragment: Fragment, state: BreakerState,
                         message: str) -> None:
        resource = spec.resource_name
        if self.metrics is not None:
            self.metrics.fragment_quarantined.labels(resource).set(1 if state == "open" else 0)
        if state == "half-open":
            log.info("fragment quarantine over: trying a call", fragment=resource)
            return
        entry = self.entries.get(resource)
        current = entry is not None and entry.serving is not None and \
            entry.serving.fragment is fragment
        if state == "open":
            log.warning("fragment quarantined", fragment=resource, reason=message)
        else:
            log.info("fragment serving again", fragment=resource)
        if not current or entry is None:
            return  # the packaged default, or a generation no longer serving
        if entry.loading is not None:
            return  # a new generation is on its way: its status is what matters
        if state == "open":
            entry.phase, entry.message = "Quarantined", message
            entry.next_attempt = rfc3339(time.time() + fragment.breaker.seconds_left())
        else:
            entry.phase, entry.message, entry.next_attempt = "Ready", "serving", None
        self._patch_status(resource, status_patch(
            entry.phase, generation=spec.generation, message=entry.message,
            digest=fragment.digest, runtime=fragment.runtime, now=rfc3339(),
            next_attempt=entry.next_attempt))

    # -- stage overrides -----------------------------------------------------------------------

    def _override(self, spec: FragmentSpec, fragment: Fragment,
                  score_replaces: frozenset[str] = frozenset()) -> StageOverride:
        resource = spec.resource_name
        policy = spec.failure_policy
        metrics = self.metrics
        name = _override_name(resource)
        stages = [stage for stage, present in (("filter", spec.filter), ("score", spec.score))
                  if present is not None] + sorted(fragment.stages)
        prefilter = "prefilter" in fragment.stages
        if metrics is not None:  # zero series, so that the first failed call shows as one
            metrics.init_fragment(resource, stages, shadow=name if spec.shadow else None)
        fragment.breaker.on_change = lambda state, message: self._breaker_changed(
            spec, fragment, state, message)

        def observe(stage: str, result: str, seconds: float) -> None:
            if metrics is not None:
                metrics.observe_fragment_call(resource, stage, result, seconds)

        def failed(stage: str, exc: CallError) -> None:
            if exc.kind != "quarantined":
                log.warning("fragment call failed", fragment=resource, stage=stage,
                            kind=exc.kind, error=exc.message, failure_policy=policy)
            if policy == "Fail":
                raise StageFailed(f'fragment "{resource}" failed in {stage}: {exc.kind}: '
                                  f"{exc.message}")

        def resolve(answers: Answers, ctx: CycleContext) -> StageOverride:
            """The pod's answers as a plain override over the table's current rows, the
            failure policy applied to a failed stage."""
            same = unchanged_rows(answers, ctx.table)
            verdict: FilterResult | None = None
            scores: IntArray | None = None
            answered: list[tuple[str, str]] = []
            pre = answers.prefilter
            # Under Fail a failed prefilter raises below; otherwise the filter and score
            # answers were made again without it (evaluate), or the batch had no others.
            if isinstance(pre, CallError):
                observe("prefilter", pre.kind, answers.prefilter_seconds)
                answered.append(("prefilter", f"failed: {pre.kind}: {pre.message}"))
                failed("prefilter", pre)
            elif pre is not None:
                observe("prefilter", "ok", answers.prefilter_seconds)
                answered.append(("prefilter", ("pass", "reject", "restrict")[pre.code]
                                 + (f": {pre.message}" if pre.message else "")))
                apply_commands(self.waiting, resource, pre)
            narrowing = prefilter_narrowing(answers.prefilter, ctx.table.n, resource, same)
            filter_failed = isinstance(answers.filter, CallError)
            for stage, answer in (("filter", answers.filter), ("score", answers.scores)):
                if isinstance(answer, CallError):
                    answered.append((stage, f"failed: {answer.kind}: {answer.message}"))
                elif answer is not None:
                    answered.append((stage, "ok"))
            if isinstance(answers.filter, CallError):
                observe("filter", answers.filter.kind, answers.filter_seconds)
                failed("filter", answers.filter)
                verdict = FilterResult.all_pass() if policy == "Ignore" else None
            elif answers.filter is not None:
                observe("filter", "ok", answers.filter_seconds)
                verdict = answers.filter if same is None else \
                    _on_current_rows(answers.filter, same)
            if isinstance(answers.scores, CallError):
                if not filter_failed:  # else the score call was not made
                    observe("score", answers.scores.kind, answers.score_seconds)
                    failed("score", answers.scores)
                scores = np.zeros(ctx.table.n, np.int64) if policy == "Ignore" else None
            elif answers.scores is not None:
                observe("score", "ok", answers.score_seconds)
                scores = answers.scores if same is None else \
                    _scores_on_current_rows(answers.scores, same)
            # A filter stage handed to the built-ins keeps them whole beside the prefilter.
            mode = filter_mode if verdict is not None else "extend"
            if narrowing is not None:
                verdict = narrowing if verdict is None else narrowed(verdict, narrowing)
            fixed_verdict, fixed_scores = verdict, scores
            return StageOverride(
                name=name,
                filter=(lambda c: fixed_verdict) if has_filter else None,
                filter_mode=mode,  # type: ignore[arg-type]
                score=(lambda c, f: fixed_scores) if spec.score is not None else None,
                score_mode=score_mode, score_weight=weight,  # type: ignore[arg-type]
                score_replaces=score_replaces, lifecycle=lifecycle, answered=tuple(answered))

        def again(answers: Answers) -> bool:
            """A failed prefilter ends the pod's batch of calls; unless the policy is Fail,
            the filter and score calls are made again without it (on a fresh instance)."""
            return isinstance(answers.prefilter, CallError) and policy != "Fail" and (
                spec.filter is not None or spec.score is not None)

        def with_prefilter(answers: Answers, first: Answers) -> Answers:
            return replace(answers, prefilter=first.prefilter,
                           prefilter_seconds=first.prefilter_seconds)

        async def evaluate(ctx: CycleContext, base: BoolArray) -> StageOverride:
            answers = await fragment.evaluate(ctx, base, filter=spec.filter is not None,
                                              score=spec.score is not None, prefilter=prefilter,
                                              waiting=waiting_lines())
            if again(answers):
                answers = with_prefilter(await fragment.evaluate(
                    ctx, base, filter=spec.filter is not None,
                    score=spec.score is not None), answers)
            return resolve(answers, ctx)

        def evaluate_now(ctx: CycleContext, base: BoolArray) -> StageOverride | None:
            was_offloaded = fragment.offloaded
            answers = fragment.evaluate_inline(ctx, base, filter=spec.filter is not None,
                                               score=spec.score is not None,
                                               prefilter=prefilter, waiting=waiting_lines())
            if answers is not None and again(answers):
                second = fragment.evaluate_inline(ctx, base, filter=spec.filter is not None,
                                                  score=spec.score is not None)
                answers = None if second is None else with_prefilter(second, answers)
            if fragment.offloaded and not was_offloaded:
                log.info("fragment calls run off the scheduling loop from now on",
                         fragment=resource, why=f"a call took longer than "
                                                f"{fragment.inline_seconds * 1000:g} ms")
            return None if answers is None else resolve(answers, ctx)

        def sync_filter(ctx: CycleContext) -> FilterResult | None:
            return fragment.filter(ctx)

        def sync_score(ctx: CycleContext, feasible: BoolArray) -> IntArray | None:
            return fragment.score(ctx, feasible)

        def waiting_lines() -> bytes:
            return self.waiting.lines(resource) if prefilter else b""

        # A prefilter narrows like an extending filter stage when there is no filter stage.
        has_filter = spec.filter is not None or prefilter
        filter_mode = "extend" if spec.filter is None else spec.filter.mode
        score_mode = "replace" if spec.score is None else spec.score.mode
        weight = spec.score.weight if spec.score is not None else 1
        lifecycle = FragmentLifecycle(
            spec, fragment, self.waiting, max_wait_seconds=self.settings.max_permit_wait_seconds,
            observe=observe, failed=failed) if fragment.stages - {"prefilter"} else None
        calls = spec.filter is not None or spec.score is not None or prefilter
        return StageOverride(
            name=name,
            filter=sync_filter if has_filter else None,
            filter_mode=filter_mode,  # type: ignore[arg-type]
            score=sync_score if spec.score is not None else None,
            score_mode=score_mode,  # type: ignore[arg-type]
            score_weight=weight, score_replaces=score_replaces,
            evaluate=evaluate if calls else None,
            evaluate_now=evaluate_now if calls else None, lifecycle=lifecycle)

    # -- selection -----------------------------------------------------------------------------

    def _ready(self, name: str, *, shadow: bool) -> dict[Version, LoadedFragment]:
        out = {}
        for entry in self.entries.values():
            s = entry.serving
            if s is not None and s.spec.name == name and s.spec.shadow == shadow:
                out[s.spec.version] = s
        return out

    def _resolve(self, name: str, version: Version | None, what: str) -> StageOverride:
        if version is None:
            ready = self._ready(name, shadow=False)
            if ready:
                return ready[max(ready)].override
            known = [e for e in self.entries.values()
                     if e.spec is not None and e.spec.name == name and not e.spec.shadow]
            if known:
                phases = ", ".join(sorted(f"{name} {e.phase}" for name, e in
                                          self.entries.items() if e in known))
                raise StageUnavailable(f'{what} "{name}" has no Ready version ({phases})')
            raise StageUnavailable(f'{what} "{name}" not found: no WsspSchedulerConfiguration '
                                   f"named {name}-v<version>")
        resource = resource_name(name, version)
        entry = self.entries.get(resource)
        if entry is not None and entry.serving is not None:
            # a newer generation that failed to load leaves this serving
            return entry.serving.override
        if entry is None and resource in self.native:
            return self.native[resource]
        if entry is None and resource in self.packaged:
            return self.packaged[resource].override
        if entry is None:
            raise StageUnavailable(f'{what} "{resource}" not found')
        detail = f": {entry.message}" if entry.message else ""
        raise StageUnavailable(f'{what} "{resource}" is {entry.phase}{detail}')

    def select(self, pod: PodInfo) -> Selection:
        """The stage overrides for ``pod``; :class:`StageUnavailable` when it must wait."""
        wanted = pod.annotations.get(FRAGMENT_ANNOTATION)
        if wanted is None:
            if self.default is None:
                return Selection(None)
            name, version = self.default
            try:
                return Selection(self._resolve(name, version, "default fragment"))
            except StageUnavailable:
                return Selection(None)  # no default fragment serving: the built-ins decide
        try:
            name, version = selector(wanted)
        except ValueError as exc:
            raise StageUnavailable(f"annotation {FRAGMENT_ANNOTATION}: {exc}") from None
        resource = resource_name(name, version) if version is not None else None
        entry = self.entries.get(resource) if resource is not None else None
        if entry is not None and entry.spec is not None and entry.spec.shadow:
            if entry.serving is None:
                raise StageUnavailable(f'fragment "{resource}" is {entry.phase}')
            return Selection(self._default_override(), (entry.serving.override,))
        shadows = self._ready(name, shadow=True)
        shadow = (shadows[max(shadows)].override,) if shadows else ()
        try:
            active = self._resolve(name, version, "fragment")
        except StageUnavailable:
            if version is None and shadows and not any(
                    e.spec is not None and e.spec.name == name and not e.spec.shadow
                    for e in self.entries.values()):
                return Selection(self._default_override(), shadow)
            raise
        return Selection(active, shadow)

    def _default_override(self) -> StageOverride | None:
        if self.default is None:
            return None
        try:
            return self._resolve(*self.default, "default fragment")
        except StageUnavailable:
            return None

    def status(self) -> dict[str, tuple[str, str]]:
        """Resource name -> (phase, message), for diagnostics and tests."""
        return {name: (e.phase, e.message) for name, e in self.entries.items()}

