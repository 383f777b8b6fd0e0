"""The set of serving fragments, kept in step with the ``WsspSchedulerConfiguration`` resources.

Life of a resource
------------------
The manager watches the resources (an informer on the custom resource). A new generation is
parsed and validated (:func:`parse_resource`), its status set to ``Loading``, and then loaded off
the event loop — fetch (:func:`storage.fetch`, sha256 verified), compile and check the ABI
(:meth:`Fragment.compile`) — and finally instantiated over the scheduler's node table on the
loop (``wssp_init`` and the first full write of the table happen here, before anything is
swapped). Only then does the new version replace the old one, in one dictionary assignment:
a pod whose cycle already picked the old :class:`StageOverride` finishes on it, the next pod gets
the new one. A load that fails at any step leaves the previous version serving and records
``Failed`` with the reason in the resource's status.

Selection per pod
-----------------
``wssp/schedulefragment: <name>-v<x.y.z>`` selects that version; ``<name>`` alone follows the
newest Ready version of that name. Pods without the annotation get ``scheduleFragment`` from the
scheduler configuration (``default:v1.0.0`` by default): a resource of that name when one is
Ready, otherwise the module of that name shipped in the package. A pod naming a fragment that is
missing or not Ready raises :class:`StageUnavailable` (the scheduler reports it and retries when
a fragment becomes Ready).

Shadow resources (``spec.shadow: true``) never decide anything: a pod that selects a name with a
shadow version is scheduled by the active version (or the default logic when none), and the
newest Ready shadow version is evaluated next to it; the scheduler counts disagreements.

Failure policies apply per call (:class:`CallError`): ``Fail`` raises :class:`StageFailed`,
``Ignore`` makes the stage a no-op, ``Default`` hands the stage to the built-in plugins.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.pipeline import Selection, StageFailed, StageOverride, StageUnavailable
from pyscheduler.framework.pod import PodInfo
from pyscheduler.kube.errors import NotFoundError
from pyscheduler.kube.informer import Informer
from pyscheduler.metrics import SchedulerMetrics
from pyscheduler.wasm import storage
from pyscheduler.wasm.errors import CallError, FragmentError
from pyscheduler.wasm.fragment import Fragment
from pyscheduler.wasm.resource import (
    GROUP,
    PLURAL,
    VERSION,
    FragmentLimits,
    FragmentSpec,
    ResourceError,
    StageSpec,
    format_version,
    parse_resource,
    selector,
    status_patch,
)
from pyscheduler.wasm.vm import Limits

__all__ = [
    "ANNOTATION",
    "PACKAGED_DIR",
    "FragmentManager",
    "LoadedFragment",
]

log = structlog.get_logger("pyscheduler.wasm")

ANNOTATION = "wssp/schedulefragment"
PACKAGED_DIR = Path(__file__).parent / "fragments"
RESOURCE_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
Version = tuple[int, int, int]


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


def _override_name(resource: str) -> str:
    """The name of a resource's stage override (and of its shadow metrics' series)."""
    return f"fragment:{resource}"


def _rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def packaged_spec(name: str, version: Version) -> FragmentSpec:
    """The spec of a fragment shipped in the package: it runs beside the built-in profile
    (filter and score extended, score weight 1) and defers to it when a call fails."""
    resource = f"{name}-v{format_version(version)}"
    return FragmentSpec(
        resource_name=resource, name=name, version=version, generation=0, uid="",
        url=f"file://{PACKAGED_DIR / (resource + '.wasm')}", sha256=None,
        filter=StageSpec("extend"), score=StageSpec("extend", 1), config={},
        limits=FragmentLimits(), failure_policy="Default", shadow=False, runtime=None)


class FragmentManager:
    """Keeps the fragment set and answers, per pod, which stage overrides apply."""

    def __init__(self, table: NodeTable, *, client: Any | None = None,
                 storage_config: storage.StorageConfig | None = None,
                 runtime: str = "wasmtime", limits: Limits | None = None,
                 default: str | None = "default:v1.0.0",
                 metrics: SchedulerMetrics | None = None,
                 on_ready: Callable[[str], None] | None = None,
                 writes_status: Callable[[], bool] = lambda: True,
                 executor: ThreadPoolExecutor | None = None) -> None:
        self.table = table
        self.client = client
        self.storage = storage_config or storage.StorageConfig()
        self.runtime = runtime
        self.limits = limits or Limits()
        self.default = selector(default) if default else None
        self.metrics = metrics
        self.on_ready = on_ready
        self.writes_status = writes_status  # only the leader writes resource status
        self.entries: dict[str, _Entry] = {}
        self.packaged: dict[str, LoadedFragment] = {}
        self._executor = executor or ThreadPoolExecutor(2, thread_name_prefix="fragment-load")
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._informer: Any | None = None
        self._status_locks: dict[str, asyncio.Lock] = {}

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
                    loaded = await self._load(spec, path.read_bytes())
                    self.packaged[spec.resource_name] = replace(loaded, packaged=True)
        if self.client is not None:
            self._informer = Informer(self.client, RESOURCE_PATH, on_add=self._on_resource,
                                      on_update=lambda old, new: self._on_resource(new),
                                      on_delete=self._on_deleted, name="fragments")
            self._informer.start()
            try:
                await self.client.get(RESOURCE_PATH, {"limit": "1"})
            except NotFoundError:
                # Fragments are optional: without the CRD the scheduler schedules with its
                # built-ins (and the packaged default); the informer keeps retrying, so
                # installing the CRD later turns fragments on without a restart.
                log.warning("WsspSchedulerConfiguration CRD not installed: fragment resources "
                            "are ignored until it is", crd=f"{PLURAL}.{GROUP}")
                return
            await self._informer.synced.wait()

    async def stop(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        if self._informer is not None:
            await self._informer.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

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

    async def _load(self, spec: FragmentSpec, wasm: bytes | None = None) -> LoadedFragment:
        """Fetch (unless given), compile off the loop, then instantiate on it."""
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
        fragment.prepare(self.table)  # wssp_init + the first table write, on the loop
        fragment.load_seconds = time.perf_counter() - start
        return LoadedFragment(spec, fragment, self._override(spec, fragment))

    def _guest_log(self, resource: str) -> Callable[[int, bytes], None]:
        levels = ("debug", "info", "warning", "error")

        def emit(level: int, text: bytes) -> None:
            method = levels[level] if 0 <= level < len(levels) else "info"
            getattr(log, method)("fragment log", fragment=resource,
                                 text=text[:1024].decode("utf-8", "replace"))
        return emit

    def _on_resource(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        resource = str(meta.get("name") or "")
        generation = int(meta.get("generation") or 0)
        entry = self.entries.get(resource)
        if entry is not None and entry.spec is not None and entry.spec.generation == generation \
                and entry.spec.uid == meta.get("uid"):
            return  # a status update (ours, usually): nothing to load
        try:
            spec = parse_resource(obj)
        except ResourceError as exc:
            message = str(exc)
            if entry is None:
                entry = self.entries[resource] = _Entry(None, "Failed", message)
            entry.phase, entry.message = "Failed", message
            self._count_load(resource, "failure")
            log.warning("fragment resource invalid", fragment=resource, error=message)
            self._patch_status(resource, status_patch(
                "Failed", generation=generation, message=message, now=_rfc3339(),
                previous=obj.get("status")))
            return
        if entry is None:
            entry = self.entries[resource] = _Entry(spec, "Loading", "")
        else:
            entry.spec = spec
            entry.phase, entry.message = "Loading", ""
        entry.loading = generation
        old = self._tasks.pop(resource, None)
        if old is not None:
            old.cancel()
        self._patch_status(resource, status_patch(
            "Loading", generation=generation, message="fetching and compiling",
            now=_rfc3339(), previous=obj.get("status")))
        task = asyncio.get_running_loop().create_task(self._load_resource(spec, obj))
        self._tasks[resource] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._tasks.get(resource) is done:
                del self._tasks[resource]
        task.add_done_callback(forget)

    async def _load_resource(self, spec: FragmentSpec, obj: dict[str, Any]) -> None:
        resource = spec.resource_name
        try:
            loaded = await self._load(spec)
        except asyncio.CancelledError:
            raise
        except (FragmentError, OSError, ValueError) as exc:
            message = str(exc) or type(exc).__name__
            entry = self.entries.get(resource)
            if entry is not None and entry.loading == spec.generation:
                entry.phase, entry.message, entry.loading = "Failed", message, None
            self._count_load(resource, "failure")
            serving = entry.serving if entry is not None else None
            kept = f" (generation {serving.spec.generation} keeps serving)" if serving else ""
            log.warning("fragment load failed", fragment=resource, error=message + kept)
            self._patch_status(resource, status_patch(
                "Failed", generation=spec.generation, message=message + kept, now=_rfc3339(),
                previous=obj.get("status")))
            return
        entry = self.entries.get(resource)
        if entry is None or entry.loading != spec.generation:
            return  # deleted or superseded while loading
        entry.serving = loaded  # the swap: the next pod sees the new version
        entry.phase, entry.message, entry.loading = "Ready", "", None
        self._count_load(resource, "success")
        frag = loaded.fragment
        if self.metrics is not None:
            self.metrics.fragment_info.labels(resource, spec.name, format_version(spec.version),
                                              frag.digest, frag.runtime).set(1)
        log.info("fragment ready", fragment=resource, digest=frag.digest[:12],
                 runtime=frag.runtime, load_seconds=round(frag.load_seconds, 3))
        self._patch_status(resource, status_patch(
            "Ready", generation=spec.generation, message="serving", digest=frag.digest,
            runtime=frag.runtime, load_seconds=frag.load_seconds, now=_rfc3339(),
            previous=obj.get("status")))
        if self.on_ready is not None:
            self.on_ready(resource)

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
                    await client.patch(f"{RESOURCE_PATH}/{resource}/status", patch)
                except Exception as exc:  # status is informative; scheduling must not wait
                    log.warning("could not update fragment status", fragment=resource,
                                error=str(exc))
        asyncio.get_running_loop().create_task(send())

    # -- stage overrides -----------------------------------------------------------------------

    def _override(self, spec: FragmentSpec, fragment: Fragment) -> StageOverride:
        resource = spec.resource_name
        policy = spec.failure_policy
        metrics = self.metrics
        name = _override_name(resource)
        stages = [stage for stage, present in (("filter", spec.filter), ("score", spec.score))
                  if present is not None]
        if metrics is not None:  # zero series, so that the first failed call shows as one
            metrics.init_fragment(resource, stages, shadow=name if spec.shadow else None)

        def observe(stage: str, result: str, seconds: float) -> None:
            if metrics is not None:
                metrics.observe_fragment_call(resource, stage, result, seconds)

        def failed(stage: str, exc: CallError) -> None:
            log.warning("fragment call failed", fragment=resource, stage=stage, kind=exc.kind,
                        error=exc.message, failure_policy=policy)
            if policy == "Fail":
                raise StageFailed(f'fragment "{resource}" failed in {stage}: {exc.kind}: '
                                  f"{exc.message}")

        def filter_fn(ctx: CycleContext) -> FilterResult | None:
            start = time.perf_counter()
            try:
                result = fragment.filter(ctx)
            except CallError as exc:
                observe("filter", exc.kind, time.perf_counter() - start)
                failed("filter", exc)
                return FilterResult.all_pass() if policy == "Ignore" else None
            observe("filter", "ok", time.perf_counter() - start)
            return result

        def score_fn(ctx: CycleContext, feasible: BoolArray) -> IntArray | None:
            start = time.perf_counter()
            try:
                scores = fragment.score(ctx, feasible)
            except CallError as exc:
                observe("score", exc.kind, time.perf_counter() - start)
                failed("score", exc)
                return ctx.zeros() if policy == "Ignore" else None
            observe("score", "ok", time.perf_counter() - start)
            return scores

        return StageOverride(
            name=name,
            filter=filter_fn if spec.filter is not None else None,
            filter_mode="replace" if spec.filter is None else spec.filter.mode,  # type: ignore[arg-type]
            score=score_fn if spec.score is not None else None,
            score_mode="replace" if spec.score is None else spec.score.mode,  # type: ignore[arg-type]
            score_weight=spec.score.weight if spec.score is not None else 1)

    # -- selection -----------------------------------------------------------------------------

    def _ready(self, name: str, *, shadow: bool) -> dict[Version, LoadedFragment]:
        out = {}
        for entry in self.entries.values():
            s = entry.serving
            if s is not None and s.spec.name == name and s.spec.shadow == shadow:
                out[s.spec.version] = s
        return out

    def _resolve(self, name: str, version: Version | None, what: str) -> LoadedFragment:
        if version is None:
            ready = self._ready(name, shadow=False)
            if ready:
                return ready[max(ready)]
            known = [e for e in self.entries.values()
                     if e.spec is not None and e.spec.name == name and not e.spec.shadow]
            if known:
                phases = ", ".join(sorted(f"{name} {e.phase}" for name, e in
                                          self.entries.items() if e in known))
                raise StageUnavailable(f'{what} "{name}" has no Ready version ({phases})')
            raise StageUnavailable(f'{what} "{name}" not found: no WsspSchedulerConfiguration '
                                   f"named {name}-v<version>")
        resource = f"{name}-v{format_version(version)}"
        entry = self.entries.get(resource)
        if entry is not None and entry.serving is not None:
            return entry.serving  # a newer generation that failed to load leaves this serving
        if entry is None and resource in self.packaged:
            return self.packaged[resource]
        if entry is None:
            raise StageUnavailable(f'{what} "{resource}" not found')
        detail = f": {entry.message}" if entry.message else ""
        raise StageUnavailable(f'{what} "{resource}" is {entry.phase}{detail}')

    def select(self, pod: PodInfo) -> Selection:
        """The stage overrides for ``pod``; :class:`StageUnavailable` when it must wait."""
        wanted = pod.annotations.get(ANNOTATION)
        if wanted is None:
            if self.default is None:
                return Selection(None)
            name, version = self.default
            try:
                return Selection(self._resolve(name, version, "default fragment").override)
            except StageUnavailable:
                return Selection(None)  # no default fragment serving: the built-ins decide
        try:
            name, version = selector(wanted)
        except ValueError as exc:
            raise StageUnavailable(f"annotation {ANNOTATION}: {exc}") from None
        resource = f"{name}-v{format_version(version)}" if version is not None else None
        entry = self.entries.get(resource) if resource is not None else None
        if entry is not None and entry.spec is not None and entry.spec.shadow:
            if entry.serving is None:
                raise StageUnavailable(f'fragment "{resource}" is {entry.phase}')
            return Selection(self._default_override(), (entry.serving.override,))
        shadows = self._ready(name, shadow=True)
        shadow = (shadows[max(shadows)].override,) if shadows else ()
        try:
            active = self._resolve(name, version, "fragment").override
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
            return self._resolve(*self.default, "default fragment").override
        except StageUnavailable:
            return None

    def status(self) -> dict[str, tuple[str, str]]:
        """Resource name -> (phase, message), for diagnostics and tests."""
        return {name: (e.phase, e.message) for name, e in self.entries.items()}

