"""The HTTP cloud adapter: :class:`~pyscheduler.virtual.types.CloudAdapter` over the JSON REST
contract of ``docs/cloud-api.md``, and the :class:`CircuitBreaker` that guards it.

Design
------
* **one session, bounded requests** — every call is an ``aiohttp`` request on one lazily created
  session (so the adapter can be built outside a loop) with a *per-attempt* total timeout. A
  timeout, a refused or cut connection, a 5xx, a 408 or a 429 is an ``unavailable`` failure;
  any other 4xx is ``rejected`` (with the contract's ``reason``: ``QuotaExceeded``,
  ``LimitExceeded``, ``InvalidRequest``, ``Unauthorized``, ``PoolNotFound``...); a 404 for an
  instance is ``not_found``.
* **retries for ``unavailable`` only** — up to ``retries`` more attempts, with exponential
  backoff and jitter (:class:`pyscheduler.kube.informer.Backoff`: ×[0.5, 1.5) around a nominal
  delay doubling from ``backoff_initial`` to ``backoff_max``; a ``Retry-After`` hint is honoured
  up to ``backoff_max``). A refusal (4xx) is never repeated: the same request would be refused
  again. 408 and 429 are the exceptions the HTTP spec makes: the server says it did *not* act
  and asks to be asked again later. Creates are safe to repeat — even after a timeout that hid a
  success — because the pod UID is the contract's idempotency key: a second create for the same
  UID answers the existing instance. Deletes are idempotent too (404 is success) and reads are
  reads.
* **a circuit breaker per pool** — pools are usually different clouds or regions, so one being
  down must not slow the others. After ``breaker_failures`` consecutive ``unavailable``
  failures (counted per attempt, so one call with retries can open it) the circuit opens: calls
  fail at once with ``CloudError("unavailable", "circuit open ...", reason="CircuitOpen")``,
  without touching the network, until ``breaker_reset_seconds`` have passed. Then it is
  half-open: exactly one trial call goes through; its success closes the circuit, its failure
  opens it for another period. Any other answer from the server — a 404, a 409 — counts as a
  success: the API is up, it merely disliked the request. A trial call that is cancelled
  releases its slot, so the next caller becomes the trial.
* **observability** — ``metrics_hook(pool, operation, result, seconds)`` is called once per
  adapter call (retries included in ``seconds``), with ``result`` one of ``ok``,
  ``unavailable``, ``rejected``, ``not_found``, ``circuit_open``, ``cancelled`` or ``error``
  (a bug, e.g. a call on a closed adapter). A hook that raises is logged and ignored. Retries
  are logged at debug level, circuit transitions at warning/info.

The wire codecs (:func:`encode_request`, :func:`decode_request`, :func:`encode_instance`,
:func:`decode_instance`, :func:`encode_capacity`, :func:`decode_capacity`) live here too; the
simulated cloud (:mod:`pyscheduler_sim.cloud`) uses the same ones, so the two cannot
drift apart.
"""

from __future__ import annotations

import asyncio
import builtins
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import aiohttp
import orjson
import structlog

from pyscheduler import __version__
from pyscheduler.pacing import Backoff
from pyscheduler.virtual.types import (
    CloudError,
    ContainerSpec,
    Instance,
    InstanceRequest,
    PoolCapacity,
)

__all__ = [
    "API_PREFIX",
    "CircuitBreaker",
    "HttpCloudAdapter",
    "MetricsHook",
    "decode_capacity",
    "decode_instance",
    "decode_request",
    "encode_capacity",
    "encode_instance",
    "encode_request",
    "error_body",
]

log = structlog.get_logger("pyscheduler.virtual.cloud")

T = TypeVar("T")
JSON = "application/json"
API_PREFIX = "/v1"
LIST_PAGE_SIZE = 500
MAX_LIST_PAGES = 10_000
MetricsHook = Callable[[str, str, str, float], None]
BreakerState = Literal["closed", "open", "half-open"]

# Default reasons when an error answer carries no (usable) body.
_DEFAULT_REASONS: dict[int, str] = {
    400: "InvalidRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    408: "Timeout", 409: "Conflict", 413: "InvalidRequest", 422: "InvalidRequest",
    429: "Throttled",
}


# -- circuit breaker ---------------------------------------------------------------------------

class CircuitBreaker:
    """Fail fast after ``failures`` consecutive failures, for ``reset_seconds``, then let one
    trial call through.

    States: ``closed`` (calls pass; failures are counted, a success resets the count), ``open``
    (:meth:`allow` refuses until ``reset_seconds`` after opening) and ``half-open`` (the first
    :meth:`allow` is the trial and is admitted, others are refused until its outcome is
    recorded). :meth:`record_success` always closes the circuit; :meth:`record_failure` in
    half-open reopens it for a new period. If :meth:`allow` returned ``True`` while
    :attr:`state` is ``half-open`` right afterwards, the caller holds the trial; if that call
    ends without an outcome (cancelled), it must call :meth:`abandon` so another trial may run.

    Not thread-safe: one event loop (or one thread) uses it.
    """

    def __init__(self, failures: int = 5, reset_seconds: float = 10.0, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if failures < 1:
            raise ValueError("circuit breaker needs failures >= 1")
        if reset_seconds < 0:
            raise ValueError("circuit breaker needs reset_seconds >= 0")
        self.failures = failures
        self.reset_seconds = reset_seconds
        self._clock = clock
        self._state: BreakerState = "closed"
        self._opened_at = 0.0
        self._trial_in_flight = False
        self.consecutive_failures = 0

    @property
    def state(self) -> BreakerState:
        """The current state; an open circuit whose period is over reads ``half-open``."""
        if self._state == "open" and self._clock() - self._opened_at >= self.reset_seconds:
            self._state = "half-open"
            self._trial_in_flight = False
        return self._state

    def allow(self) -> bool:
        """May a call go out now? In half-open, ``True`` once (the trial)."""
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def retry_in(self) -> float:
        """Seconds until an open circuit lets a trial through (0 when not open)."""
        if self.state != "open":
            return 0.0
        return max(0.0, self._opened_at + self.reset_seconds - self._clock())

    def record_success(self) -> None:
        self._state = "closed"
        self._trial_in_flight = False
        self.consecutive_failures = 0

    def record_failure(self) -> None:
        self.consecutive_failures += 1
        state = self.state
        if state == "half-open" or (state == "closed"
                                    and self.consecutive_failures >= self.failures):
            self._state = "open"
            self._opened_at = self._clock()
            self._trial_in_flight = False

    def abandon(self) -> None:
        """The admitted trial ended without an outcome: let the next caller try."""
        if self._state == "half-open":
            self._trial_in_flight = False

    def __repr__(self) -> str:
        return (f"CircuitBreaker(state={self.state!r}, "
                f"consecutive_failures={self.consecutive_failures})")


# -- wire codecs -------------------------------------------------------------------------------

def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
         default: Any = ...) -> Any:
    if key not in obj or obj[key] is None:
        if default is ...:
            raise ValueError(f"{where}.{key}: required")
        return default
    value = obj[key]
    bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple)
                                                        else (kind,))
    if not isinstance(value, kind) or bad_bool:
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ValueError(f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value


def _nonneg_int(obj: Mapping[str, Any], key: str, where: str, default: Any = ...) -> int:
    value: int = _get(obj, key, int, where, default)
    if value < 0:
        raise ValueError(f"{where}.{key}: must not be negative, got {value}")
    return value


def _number(obj: Mapping[str, Any], key: str, where: str, default: Any = ...) -> float:
    return float(_get(obj, key, (int, float), where, default))


def _str_map(obj: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    raw: dict[str, Any] = _get(obj, key, dict, where, {})
    for k, v in raw.items():
        if not isinstance(v, str):
            raise ValueError(f"{where}.{key}.{k}: expected str, got {type(v).__name__}")
    return dict(raw)


def _str_list(obj: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    raw: list[Any] = _get(obj, key, list, where, [])
    for i, v in enumerate(raw):
        if not isinstance(v, str):
            raise ValueError(f"{where}.{key}[{i}]: expected str, got {type(v).__name__}")
    return tuple(raw)


def encode_request(request: InstanceRequest) -> dict[str, Any]:
    """The create body for ``POST /v1/pools/{pool}/instances`` (the pool is in the path)."""
    return {
        "podUid": request.pod_uid,
        "namespace": request.namespace,
        "name": request.name,
        "containers": [{"name": c.name, "image": c.image, "command": list(c.command),
                        "args": list(c.args), "env": dict(c.env), "cpuMillis": c.cpu_millis,
                        "memoryBytes": c.memory_bytes} for c in request.containers],
        "tags": dict(request.tags),
    }


def decode_request(pool: str, body: Any) -> InstanceRequest:
    """Parse and validate a create body; ``ValueError`` names the bad field."""
    if not isinstance(body, dict):
        raise ValueError("body: expected a JSON object")
    pod_uid: str = _get(body, "podUid", str, "body")
    if not pod_uid:
        raise ValueError("body.podUid: must not be empty")
    namespace: str = _get(body, "namespace", str, "body")
    name: str = _get(body, "name", str, "body")
    if not name:
        raise ValueError("body.name: must not be empty")
    raw_containers: list[Any] = _get(body, "containers", list, "body")
    if not raw_containers:
        raise ValueError("body.containers: at least one container is required")
    containers = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_containers):
        where = f"body.containers[{i}]"
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: expected a JSON object")
        cname: str = _get(raw, "name", str, where)
        image: str = _get(raw, "image", str, where)
        if not cname or not image:
            raise ValueError(f"{where}: name and image must not be empty")
        if cname in seen:
            raise ValueError(f"{where}.name: duplicate container name {cname!r}")
        seen.add(cname)
        containers.append(ContainerSpec(
            name=cname, image=image, command=_str_list(raw, "command", where),
            args=_str_list(raw, "args", where), env=_str_map(raw, "env", where),
            cpu_millis=_nonneg_int(raw, "cpuMillis", where, 0),
            memory_bytes=_nonneg_int(raw, "memoryBytes", where, 0)))
    return InstanceRequest(pool=pool, pod_uid=pod_uid, namespace=namespace, name=name,
                           containers=tuple(containers), tags=_str_map(body, "tags", "body"))


def encode_instance(instance: Instance) -> dict[str, Any]:
    return {
        "id": instance.id, "pool": instance.pool, "podUid": instance.pod_uid,
        "namespace": instance.namespace, "name": instance.name, "phase": instance.phase,
        "ip": instance.ip, "message": instance.message, "createdAt": instance.created_at,
        "startedAt": instance.started_at, "cpuMillis": instance.cpu_millis,
        "memoryBytes": instance.memory_bytes, "pricePerHour": instance.price_per_hour,
        "containers": [{"name": n, "ready": r, "restarts": c}
                       for n, r, c in instance.containers],
    }


def decode_instance(obj: Any) -> Instance:
    """Parse an instance object; ``ValueError`` names the bad field."""
    if not isinstance(obj, dict):
        raise ValueError("instance: expected a JSON object")
    w = "instance"
    containers = []
    for i, raw in enumerate(_get(obj, "containers", list, w, [])):
        where = f"{w}.containers[{i}]"
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: expected a JSON object")
        containers.append((_get(raw, "name", str, where), _get(raw, "ready", bool, where, False),
                           _nonneg_int(raw, "restarts", where, 0)))
    return Instance(
        id=_get(obj, "id", str, w), pool=_get(obj, "pool", str, w),
        pod_uid=_get(obj, "podUid", str, w), namespace=_get(obj, "namespace", str, w, ""),
        name=_get(obj, "name", str, w, ""), phase=_get(obj, "phase", str, w),
        ip=_get(obj, "ip", str, w, ""), message=_get(obj, "message", str, w, ""),
        created_at=_number(obj, "createdAt", w, 0.0), started_at=_number(obj, "startedAt", w, 0.0),
        cpu_millis=_nonneg_int(obj, "cpuMillis", w, 0),
        memory_bytes=_nonneg_int(obj, "memoryBytes", w, 0),
        price_per_hour=_number(obj, "pricePerHour", w, 0.0), containers=tuple(containers))


def encode_capacity(capacity: PoolCapacity) -> dict[str, Any]:
    return {
        "pool": capacity.pool, "platform": capacity.platform,
        "cpuMillis": capacity.cpu_millis, "memoryBytes": capacity.memory_bytes,
        "instances": capacity.instances, "usedCpuMillis": capacity.used_cpu_millis,
        "usedMemoryBytes": capacity.used_memory_bytes,
        "usedInstances": capacity.used_instances,
        "maxInstanceCpuMillis": capacity.max_instance_cpu_millis,
        "maxInstanceMemoryBytes": capacity.max_instance_memory_bytes,
        "pricePerCpuHour": capacity.price_per_cpu_hour,
        "pricePerGiBHour": capacity.price_per_gib_hour,
    }


def decode_capacity(obj: Any) -> PoolCapacity:
    """Parse a pool capacity object; ``ValueError`` names the bad field."""
    if not isinstance(obj, dict):
        raise ValueError("capacity: expected a JSON object")
    w = "capacity"
    return PoolCapacity(
        pool=_get(obj, "pool", str, w), platform=_get(obj, "platform", str, w, ""),
        cpu_millis=_nonneg_int(obj, "cpuMillis", w),
        memory_bytes=_nonneg_int(obj, "memoryBytes", w),
        instances=_nonneg_int(obj, "instances", w),
        used_cpu_millis=_nonneg_int(obj, "usedCpuMillis", w),
        used_memory_bytes=_nonneg_int(obj, "usedMemoryBytes", w),
        used_instances=_nonneg_int(obj, "usedInstances", w),
        max_instance_cpu_millis=_nonneg_int(obj, "maxInstanceCpuMillis", w),
        max_instance_memory_bytes=_nonneg_int(obj, "maxInstanceMemoryBytes", w),
        price_per_cpu_hour=_number(obj, "pricePerCpuHour", w, 0.0),
        price_per_gib_hour=_number(obj, "pricePerGiBHour", w, 0.0))


def error_body(status: int, reason: str, message: str) -> dict[str, Any]:
    """The contract's error body."""
    return {"error": {"status": status, "reason": reason, "message": message}}


# -- the adapter -------------------------------------------------------------------------------

def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class HttpCloudAdapter:
    """:class:`~pyscheduler.virtual.types.CloudAdapter` over the REST contract at ``base_url``.

    ``base_url`` is the gateway root (``http://127.0.0.1:8080``, ``https://gw/cloud``); paths
    under ``/v1`` are appended. ``token`` is sent as ``Authorization: Bearer``. ``timeout``
    bounds each attempt; ``retries`` is the number of *additional* attempts after an
    ``unavailable`` failure. The circuit breaker per pool opens after ``breaker_failures``
    consecutive ``unavailable`` attempts and stays open ``breaker_reset_seconds``.
    ``clock`` (monotonic seconds) drives the breakers and the metrics; ``rng`` the jitter.

    Use it on one event loop; :meth:`close` (or ``async with``) releases the connections.
    """

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 5.0,
                 retries: int = 3, backoff_initial: float = 0.1, backoff_max: float = 2.0,
                 breaker_failures: int = 5, breaker_reset_seconds: float = 10.0,
                 metrics_hook: MetricsHook | None = None, max_connections: int = 100,
                 clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"cloud base URL must start with http:// or https://: {base_url!r}")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must not be negative")
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("backoff needs 0 < backoff_initial <= backoff_max")
        if breaker_failures < 1 or breaker_reset_seconds < 0:
            raise ValueError("breaker needs breaker_failures >= 1 and breaker_reset_seconds >= 0")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.breaker_failures = breaker_failures
        self.breaker_reset_seconds = breaker_reset_seconds
        self.max_connections = max_connections
        self._token = token or None
        self._metrics_hook = metrics_hook
        self._clock = clock
        self._rng = rng
        self._breakers: dict[str, CircuitBreaker] = {}
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def __repr__(self) -> str:  # never shows the token
        return f"HttpCloudAdapter({self.base_url!r})"

    # -- the CloudAdapter protocol -------------------------------------------------------------

    async def create(self, request: InstanceRequest) -> Instance:
        """Create the instance for ``request.pod_uid``, or answer the one that exists."""
        async def op() -> Instance:
            data = await self._call("create", request.pool, "POST", self._instances(request.pool),
                                    body=encode_request(request))
            return self._decode(decode_instance, data)
        return await self._observed(request.pool, "create", op)

    async def delete(self, pool: str, instance_id: str) -> None:
        """Delete an instance; one that is already gone is success."""
        async def op() -> None:
            try:
                await self._call("delete", pool, "DELETE", self._instance(pool, instance_id))
            except CloudError as exc:
                if exc.kind != "not_found":
                    raise
        await self._observed(pool, "delete", op)

    async def get(self, pool: str, instance_id: str) -> Instance:
        async def op() -> Instance:
            data = await self._call("get", pool, "GET", self._instance(pool, instance_id))
            return self._decode(decode_instance, data)
        return await self._observed(pool, "get", op)

    async def list(self, pool: str) -> Sequence[Instance]:
        """Every instance of the pool, following ``continue`` tokens."""
        async def op() -> builtins.list[Instance]:
            out: builtins.list[Instance] = []
            token = ""
            seen: set[str] = set()
            for _ in range(MAX_LIST_PAGES):
                params = {"limit": str(LIST_PAGE_SIZE)}
                if token:
                    params["continue"] = token
                data = await self._call("list", pool, "GET", self._instances(pool),
                                        params=params)
                items = data.get("items")
                if not isinstance(items, builtins.list):
                    raise self._invalid("list answer has no items array")
                out.extend(self._decode(decode_instance, item) for item in items)
                token = data.get("continue") or ""
                if not isinstance(token, str):
                    raise self._invalid("list answer's continue is not a string")
                if not token:
                    return out
                if token in seen:
                    raise self._invalid(f"list answer repeats continue token {token!r}")
                seen.add(token)
            raise self._invalid(f"list of pool {pool} exceeds {MAX_LIST_PAGES} pages")
        return await self._observed(pool, "list", op)

    async def capacity(self, pool: str) -> PoolCapacity:
        async def op() -> PoolCapacity:
            data = await self._call("capacity", pool, "GET",
                                    f"{API_PREFIX}/pools/{quote(pool, safe='')}")
            return self._decode(decode_capacity, data)
        return await self._observed(pool, "capacity", op)

    async def close(self) -> None:
        """Close the connection pool. Idempotent."""
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> HttpCloudAdapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- introspection -------------------------------------------------------------------------

    def breaker(self, pool: str) -> CircuitBreaker:
        """The circuit breaker of ``pool`` (created closed on first use)."""
        breaker = self._breakers.get(pool)
        if breaker is None:
            breaker = self._breakers[pool] = CircuitBreaker(
                self.breaker_failures, self.breaker_reset_seconds, clock=self._clock)
        return breaker

    # -- plumbing ------------------------------------------------------------------------------

    @staticmethod
    def _instances(pool: str) -> str:
        return f"{API_PREFIX}/pools/{quote(pool, safe='')}/instances"

    @classmethod
    def _instance(cls, pool: str, instance_id: str) -> str:
        return f"{cls._instances(pool)}/{quote(instance_id, safe='')}"

    @staticmethod
    def _invalid(message: str) -> CloudError:
        return CloudError("unavailable", f"invalid answer from the cloud gateway: {message}",
                          reason="InvalidResponse")

    def _decode(self, fn: Callable[[Any], T], data: Any) -> T:
        try:
            return fn(data)
        except ValueError as exc:
            raise self._invalid(str(exc)) from None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("HttpCloudAdapter is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections,
                                               keepalive_timeout=30.0),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"Accept": JSON, "User-Agent": f"pyscheduler/{__version__}"})
        return self._session

    async def _observed(self, pool: str, operation: str,
                        fn: Callable[[], Awaitable[T]]) -> T:
        started = self._clock()
        result = "ok"
        try:
            return await fn()
        except CloudError as exc:
            result = "circuit_open" if exc.reason == "CircuitOpen" else exc.kind
            raise
        except asyncio.CancelledError:
            result = "cancelled"
            raise
        except BaseException:
            result = "error"
            raise
        finally:
            if self._metrics_hook is not None:
                try:
                    self._metrics_hook(pool, operation, result, self._clock() - started)
                except Exception as exc:  # a broken hook must not break the call
                    log.warning("cloud metrics hook failed", error=str(exc))

    async def _call(self, operation: str, pool: str, method: str, path: str, *,
                    body: dict[str, Any] | None = None,
                    params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One logical call: attempts through the pool's breaker, retrying ``unavailable``."""
        breaker = self.breaker(pool)
        backoff = Backoff(initial=self.backoff_initial, maximum=self.backoff_max, rng=self._rng)
        data = orjson.dumps(body) if body is not None else None
        last: CloudError | None = None
        attempt = 0
        while True:
            if not breaker.allow():
                if last is not None:
                    raise CloudError("unavailable", f"{last.message} (circuit for cloud pool "
                                     f"{pool} is now open)", reason=last.reason,
                                     status=last.status)
                raise CloudError(
                    "unavailable", f"circuit open for cloud pool {pool}: "
                    f"{breaker.consecutive_failures} consecutive failures, next trial in "
                    f"{breaker.retry_in():.1f}s", reason="CircuitOpen")
            trial = breaker.state == "half-open"
            try:
                answer = await self._attempt(method, path, data, params)
            except _Unavailable as exc:
                was_open = breaker.state == "open"
                breaker.record_failure()
                if not was_open and breaker.state == "open":
                    log.warning("cloud circuit opened", pool=pool, error=exc.message,
                                failures=breaker.consecutive_failures,
                                reset_seconds=self.breaker_reset_seconds)
                last = CloudError("unavailable", exc.message, reason=exc.reason,
                                  status=exc.status)
                if attempt >= self.retries or exc.reason == "InvalidResponse":
                    raise last from None
                attempt += 1
                wait = backoff.next()
                if exc.retry_after is not None:
                    wait = min(max(wait, exc.retry_after), self.backoff_max)
                log.debug("cloud call failed; retrying", pool=pool, operation=operation,
                          attempt=attempt, wait=round(wait, 3), error=exc.message)
                await asyncio.sleep(wait)
                continue
            except CloudError:
                breaker.record_success()  # a refusal: the API is up, it disliked the request
                raise
            except BaseException:
                if trial:
                    breaker.abandon()
                raise
            if trial:
                log.info("cloud circuit closed", pool=pool)
            breaker.record_success()
            return answer

    async def _attempt(self, method: str, path: str, data: bytes | None,
                       params: Mapping[str, str] | None) -> dict[str, Any]:
        """One HTTP exchange: the decoded object of a 2xx answer (``{}`` when empty), else
        :class:`_Unavailable` (to be retried) or a :class:`CloudError` refusal."""
        session = self._get_session()
        headers: dict[str, str] = {}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        if data is not None:
            headers["Content-Type"] = JSON
        url = self.base_url + path
        try:
            async with session.request(method, url, data=data, params=params, headers=headers,
                                       allow_redirects=False) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = _retry_after(resp.headers.get("Retry-After"))
        except asyncio.TimeoutError:
            raise _Unavailable(f"{method} {path}: no answer within {self.timeout:g}s",
                               "Timeout") from None
        except aiohttp.ClientConnectorError as exc:
            raise _Unavailable(f"{method} {path}: cannot connect to {self.base_url}: "
                               f"{_describe(exc.os_error)}", "ConnectionFailed") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise _Unavailable(f"{method} {path}: {_describe(exc)}", "TransportError") from None
        if 200 <= status < 300:
            if status == 204 or not raw.strip():
                return {}
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise _Unavailable(f"invalid answer from the cloud gateway: {method} {path} "
                                   f"answered {status} with non-JSON", "InvalidResponse",
                                   status) from None
            if not isinstance(obj, dict):
                raise _Unavailable(f"invalid answer from the cloud gateway: {method} {path} "
                                   f"answered {status} with a JSON {type(obj).__name__}, "
                                   "not an object", "InvalidResponse", status)
            return obj
        error = self._error(status, raw, method, path)
        if error.kind == "unavailable":
            raise _Unavailable(error.message, error.reason, status, retry_after)
        raise error

    @staticmethod
    def _error(status: int, raw: bytes, method: str, path: str) -> CloudError:
        reason = message = ""
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        detail = body.get("error") if isinstance(body, dict) else None
        if isinstance(detail, dict):
            value = detail.get("reason")
            reason = value if isinstance(value, str) else ""
            value = detail.get("message")
            message = value if isinstance(value, str) else ""
        if not message:
            text = raw[:200].decode("utf-8", "replace").strip() if body is None else ""
            message = f"{method} {path}: HTTP {status}" + (f": {text}" if text else "")
        if status >= 500 or status in (408, 429):
            return CloudError("unavailable", message,
                              reason=reason or _DEFAULT_REASONS.get(status, "Unavailable"),
                              status=status)
        if status == 404 and reason != "PoolNotFound":
            return CloudError("not_found", message, reason=reason or "NotFound", status=status)
        if 400 <= status < 500:
            return CloudError("rejected", message,
                              reason=reason or _DEFAULT_REASONS.get(status, "Rejected"),
                              status=status)
        return CloudError("rejected", f"{method} {path}: unexpected HTTP {status}",
                          reason="UnexpectedStatus", status=status)


class _Unavailable(CloudError):
    """Internal: an ``unavailable`` attempt, carrying the server's ``Retry-After`` hint."""

    def __init__(self, message: str, reason: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__("unavailable", message, reason=reason, status=status)
        self.retry_after = retry_after
