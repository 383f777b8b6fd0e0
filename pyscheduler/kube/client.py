"""The one HTTP client that talks to the Kubernetes API server.

Why not the official ``kubernetes`` client for the traffic itself:

* **async** — the scheduler binds many pods concurrently while informers keep their watches
  open; the official client is synchronous (a thread per in-flight call). Here every request is
  an ``aiohttp`` coroutine on the scheduler's event loop.
* **raw JSON** — answers are decoded with ``orjson`` into plain ``dict`` objects. The official
  client's typed models cost tens of microseconds per object to build and are never needed on
  the hot path: the cache reads a handful of fields.
* **bounded concurrency** — unary requests share one connection pool capped at
  ``max_connections`` (requests beyond the cap wait for a free connection, inside their timeout),
  so a burst of binds cannot open thousands of sockets. Watch streams use a *separate* pool, so a
  long-lived watch never holds a slot that a bind is waiting for, and a bind burst never delays
  an informer's reconnect.

The ``kubernetes`` package is still used, but only to *load configuration* (kubeconfig parsing,
exec/OIDC credential plugins, in-cluster service-account files): :func:`load_config` turns its
``Configuration`` into a small :class:`ConnectionConfig`. It is imported lazily, on that path only.

Credentials that expire (in-cluster projected tokens, exec plugins) are refreshed through the
loader's refresh hook at most every ``token_refresh_seconds`` and right after a 401, in a worker
thread because the hook may read files or run a plugin.

Errors are mapped to :mod:`pyscheduler.kube.errors`. A request answered 429, or 5xx *with* a
``Retry-After`` hint, was refused before being acted on, so it is repeated (up to
``max_retries``, as client-go does); nothing else is retried here — the caller knows whether its
request is idempotent.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import re
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import aiohttp
import orjson
import structlog
import yarl

from pyscheduler import __version__
from pyscheduler.kube.errors import (
    ApiStatusError,
    ConfigError,
    DecodeError,
    TransportError,
    UnauthorizedError,
    api_status_error,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ConnectionConfig",
    "KubeClient",
    "PatchType",
    "api_path",
    "load_config",
]

log = structlog.get_logger("pyscheduler.kube.client")

JSON = "application/json"
#: A URL with nothing to quote (no space, no percent sign, no query, ASCII only).
_PLAIN_URL = re.compile(r"[A-Za-z0-9._~:/@!$&'()*+,;=-]*")
DEFAULT_TIMEOUT = 30.0
# A watch line longer than this is not an object we could hold anyway.
MAX_LINE_BYTES = 64 * 1024 * 1024

PatchType = Literal["merge", "strategic", "json", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

ParamValue = str | int | float | bool | None
Params = Mapping[str, ParamValue]


@dataclass(frozen=True)
class ConnectionConfig:
    """Where the API server is and how to authenticate; everything :class:`KubeClient` needs.

    ``token`` is a static bearer token. ``token_source``, when set, is a *blocking* callable
    returning the current token (with or without a ``Bearer`` prefix) and wins over ``token``;
    :func:`load_config` sets it from the loader's refresh hook. ``ca_file``/``cert_file``/
    ``key_file`` are PEM files; ``verify_ssl=False`` disables server verification (kubeconfig's
    ``insecure-skip-tls-verify``). ``source`` says where the configuration came from, for logs.
    """

    host: str
    token: str | None = field(default=None, repr=False)
    token_source: Callable[[], str | None] | None = field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    source: str = ""

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for an ``https`` host (``None`` for plain ``http``)."""
        if not self.host.startswith("https"):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if not self.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _strip_bearer(value: str | None) -> str | None:
    if not value:
        return None
    if value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return value.strip() or None


def _one_line(exc: BaseException) -> str:
    """An error's text on one line (YAML parsers explain over several, with the file name)."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return f"not valid YAML{where}: {exc.problem or exc.context or 'syntax error'}"
    return " ".join(str(exc).split()) or type(exc).__name__


def load_config(path: str | None = None, *, context: str | None = None) -> ConnectionConfig:
    """Load a :class:`ConnectionConfig` (blocking: reads files, may run a credential plugin).

    With a ``path``, that kubeconfig (and ``context``, else its current context) is used. With
    ``path=None`` the order is client-go's ``BuildConfigFromFlags("", "")``, which kube-scheduler
    uses: the in-cluster service account first (``KUBERNETES_SERVICE_HOST`` and the token and CA
    under ``/var/run/secrets/kubernetes.io/serviceaccount``), then the default kubeconfig —
    ``$KUBECONFIG`` or ``~/.kube/config``, as kubectl finds it. (kubectl itself tries the
    kubeconfig first; inside a pod the difference only matters if a kubeconfig is mounted, and a
    scheduler in a pod should use its own service account.) A ``context`` implies a kubeconfig,
    so in-cluster configuration is skipped when one is given.

    Raises :class:`~pyscheduler.kube.errors.ConfigError` naming what was tried.
    """
    # Read at call time (the package reads $KUBECONFIG once, at import); a list of files
    # separated by os.pathsep is merged, as kubectl merges it.
    default_kubeconfig = os.environ.get("KUBECONFIG") or os.path.join("~", ".kube", "config")
    # The common configurations (a service account, a kubeconfig with a token or a client
    # certificate) are read here: the ``kubernetes`` package costs a fifth of a second to
    # import, a good part of the scheduler's start. Anything else goes to the package.
    incluster_problem: str | None = None
    if path is None and context is None:
        incluster_problem = _incluster_absent()
        if incluster_problem is None:
            plain = _plain_incluster()
            if plain is not None:
                return plain
    if path is not None or context is not None or incluster_problem is not None:
        plain = _plain_kubeconfig(path or default_kubeconfig, context)
        if plain is not None:
            return plain
    return _package_config(path, context, default_kubeconfig)


#: Where a pod's service account is mounted (client-go's ``rest.InClusterConfig``).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _incluster_absent() -> str | None:
    """Why this process is not in a cluster (the package's words), or None when it may be."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT")
    if host is None or port is None:
        return "Service host/port is not set."
    if not host or not port:
        return "Service host/port is set but empty."
    return None


def _plain_incluster() -> ConnectionConfig | None:
    """The service account's configuration as the package builds it (token re-read while
    running, for bound tokens rotate), or None to let the package decide and explain."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ["KUBERNETES_SERVICE_PORT"]
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    ca_file = os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    try:
        with open(token_file) as f:
            token = f.read()
        with open(ca_file) as f:
            if not f.read():
                return None
    except OSError:
        return None
    if not token.strip():
        return None

    def token_source() -> str | None:
        with open(token_file) as f:
            return f.read().strip() or None

    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return ConnectionConfig(host=f"https://{host}:{port}", token=token.strip(),
                            token_source=token_source, ca_file=ca_file,
                            source="in-cluster service account")


_PLAIN_CLUSTER_KEYS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                                 "insecure-skip-tls-verify", "tls-server-name", "proxy-url",
                                 "extensions"})
_PLAIN_USER_KEYS = frozenset({"token", "client-certificate", "client-certificate-data",
                              "client-key", "client-key-data", "extensions"})


def _named(entries: Any, name: Any, what: str) -> dict[str, Any] | None:
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(what)
            return value if isinstance(value, dict) else {} if value is None else None
    return None


def _plain_kubeconfig(path: str, context: str | None) -> ConnectionConfig | None:
    """A kubeconfig file naming its server, CA and a token or client certificate read as
    the package reads it; None for anything else (several files, exec or auth-provider
    credentials, a missing context, unreadable YAML...): the package then loads or explains."""
    import yaml

    if os.pathsep in path:
        return None
    file = os.path.expanduser(path)
    try:
        with open(file, "rb") as f:
            doc = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), name, "context") if name else None
    if not ctx or set(ctx) - {"cluster", "user", "namespace", "extensions"}:
        return None
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster")
    user = _named(doc.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
    if not cluster or user is None or set(cluster) - _PLAIN_CLUSTER_KEYS \
            or set(user) - _PLAIN_USER_KEYS:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        return None
    base = os.path.dirname(os.path.abspath(file))
    try:
        ca = _pem(cluster, "certificate-authority", base)
        cert = _pem(user, "client-certificate", base)
        key = _pem(user, "client-key", base)
    except (OSError, ValueError):
        return None
    token = user.get("token")
    if token is not None and not isinstance(token, str):
        return None
    proxy = cluster.get("proxy-url")
    server_name = cluster.get("tls-server-name")
    return ConnectionConfig(
        # The package sends "Bearer <token>" as it stands, so one "Bearer " prefix comes off.
        host=server.rstrip("/"), token=_strip_bearer(f"Bearer {token}" if token else None),
        ca_file=ca, cert_file=cert, key_file=key,
        verify_ssl=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=server_name if isinstance(server_name, str) and server_name else None,
        proxy=proxy if isinstance(proxy, str) and proxy else None,
        source=f"kubeconfig {path}")


def _pem(section: dict[str, Any], key: str, base: str) -> str | None:
    """The file holding ``key`` (``key-data`` written to a private temporary file, as the
    package does; a relative path is relative to the kubeconfig's directory)."""
    import atexit
    import base64
    import tempfile

    data = section.get(f"{key}-data")
    if data:
        fd, name = tempfile.mkstemp(prefix="pyscheduler-kubeconfig-")
        with os.fdopen(fd, "wb") as f:
            f.write(base64.standard_b64decode(str(data)))
        atexit.register(_remove, name)
        return name
    value = section.get(key)
    if not value:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a path")
    name = os.path.join(base, os.path.expanduser(value))
    if not os.path.isfile(name):
        raise ValueError(f"{key} {name} does not exist")
    return name


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


def _package_config(path: str | None, context: str | None,
                    default_kubeconfig: str) -> ConnectionConfig:
    """:func:`load_config` by the ``kubernetes`` package."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    # Held as plain callables: the package's own annotations differ between its releases.
    load_incluster: Callable[..., Any] = k8s_config.load_incluster_config
    load_kube: Callable[..., Any] = k8s_config.load_kube_config
    cfg = k8s_client.Configuration()
    source: str
    if path is None and context is None:
        try:
            load_incluster(client_configuration=cfg)
            source = "in-cluster service account"
        except k8s_config.ConfigException as incluster_exc:
            try:
                load_kube(config_file=default_kubeconfig, client_configuration=cfg,
                          persist_config=False)
            except Exception as exc:
                raise ConfigError(
                    f"no Kubernetes configuration: not in a cluster ({incluster_exc}) and the "
                    f"default kubeconfig ($KUBECONFIG or ~/.kube/config) failed to load: "
                    f"{_one_line(exc)}") from None
            source = f"kubeconfig {default_kubeconfig}"
    else:
        try:
            load_kube(config_file=path or default_kubeconfig, context=context,
                      client_configuration=cfg, persist_config=False)
        except Exception as exc:
            raise ConfigError(f"cannot load kubeconfig {path or default_kubeconfig}"
                              f"{f' context {context!r}' if context else ''}: "
                              f"{_one_line(exc)}") from None
        source = f"kubeconfig {path or default_kubeconfig}"
    if not cfg.host:
        raise ConfigError(f"{source} names no API server")

    def token_source() -> str | None:
        # Runs the loader's refresh hook (token file re-read, exec plugin) when one is set.
        value = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
        return value if isinstance(value, str) else None

    static = _strip_bearer(token_source())
    return ConnectionConfig(
        host=str(cfg.host).rstrip("/"),
        token=static,
        token_source=token_source if cfg.refresh_api_key_hook is not None else None,
        ca_file=cfg.ssl_ca_cert or None,
        cert_file=cfg.cert_file or None,
        key_file=cfg.key_file or None,
        verify_ssl=bool(cfg.verify_ssl),
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        proxy=cfg.proxy or None,
        source=source,
    )


def api_path(api_version: str, plural: str, *, namespace: str | None = None,
             name: str | None = None, subresource: str | None = None) -> str:
    """The REST path of a resource: ``api_path("v1", "pods", namespace="a", name="b")`` is
    ``/api/v1/namespaces/a/pods/b``; ``api_path("coordination.k8s.io/v1", "leases", ...)``
    starts with ``/apis/``. Without ``name`` it is the collection."""
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


def _query(params: Params | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


class KubeClient:
    """An async Kubernetes API client returning decoded JSON ``dict`` objects.

    Create it with :meth:`from_kubeconfig` (or from a :class:`ConnectionConfig`), use it as an
    async context manager or call :meth:`close`. All methods must run on one event loop.

    ``max_connections`` caps concurrent unary requests (binds, patches, gets); ``max_streams``
    caps concurrent watch streams. ``timeout`` is the default total time for a unary request,
    including the wait for a pooled connection.
    """

    def __init__(self, config: ConnectionConfig, *, max_connections: int = 100,
                 max_streams: int = 64, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = 3, max_retry_wait: float = 10.0,
                 token_refresh_seconds: float = 60.0,
                 clock: Callable[[], float] = time.monotonic,
                 user_agent: str = f"pyscheduler/{__version__}") -> None:
        if max_connections < 1 or max_streams < 1:
            raise ValueError("max_connections and max_streams must be at least 1")
        self.config = config
        self.host = config.host.rstrip("/")
        self.max_connections = max_connections
        self.max_streams = max_streams
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.token_refresh_seconds = token_refresh_seconds
        self._clock = clock
        self._ssl = config.ssl_context()
        self._user_agent = user_agent
        self._token = _strip_bearer(config.token)
        self._token_fetched_at: float | None = None if config.token_source else clock()
        self._token_lock: asyncio.Lock | None = None
        self._requests: aiohttp.ClientSession | None = None
        self._streams: aiohttp.ClientSession | None = None
        self._closed = False
        self._default_timeout = aiohttp.ClientTimeout(total=timeout)
        self._options = self._request_options()

    # -- construction and lifecycle ------------------------------------------------------------

    @classmethod
    async def from_kubeconfig(cls, path: str | None = None, *, context: str | None = None,
                              **options: Any) -> KubeClient:
        """A client for the cluster named by a kubeconfig, or by the in-cluster service account.

        ``path=None``: in-cluster configuration first, then ``$KUBECONFIG`` / ``~/.kube/config``
        (see :func:`load_config`). ``options`` go to the constructor (``max_connections``, ...).
        Loading runs in a worker thread: it reads files and may run a credential plugin.
        """
        config = await asyncio.to_thread(load_config, path, context=context)
        log.debug("kubernetes configuration loaded", source=config.source, host=config.host)
        return cls(config, **options)

    def with_config(self, **changes: Any) -> KubeClient:
        """A new client with some :class:`ConnectionConfig` fields changed (tests, proxies)."""
        return KubeClient(replace(self.config, **changes), max_connections=self.max_connections,
                          max_streams=self.max_streams, timeout=self.timeout,
                          max_retries=self.max_retries, max_retry_wait=self.max_retry_wait,
                          token_refresh_seconds=self.token_refresh_seconds, clock=self._clock,
                          user_agent=self._user_agent)

    def _session(self, streaming: bool) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("KubeClient is closed")
        if streaming:
            if self._streams is None:
                self._streams = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=self.max_streams, ssl=self._ssl_arg()),
                    timeout=aiohttp.ClientTimeout(total=None), auto_decompress=True)
            return self._streams
        if self._requests is None:
            # No cookie jar, as client-go has none: the API server sets no cookies, and
            # filtering and storing them is work on every request.
            self._requests = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections,
                                               ssl=self._ssl_arg(), keepalive_timeout=30.0),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                cookie_jar=aiohttp.DummyCookieJar())
        return self._requests

    def _ssl_arg(self) -> ssl.SSLContext | bool:
        return self._ssl if self._ssl is not None else True

    async def close(self) -> None:
        """Close both connection pools. Idempotent."""
        self._closed = True
        for session in (self._requests, self._streams):
            if session is not None:
                await session.close()
        self._requests = self._streams = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------------------------

    async def _authorization(self, *, rejected: str | None = None) -> str | None:
        """The ``Authorization`` header value. ``rejected``: the value a 401 just refused,
        refreshed unless another caller has already replaced it."""
        source = self.config.token_source
        if source is not None:
            if rejected is not None:
                # Refresh unless another caller already replaced the refused token.
                stale = rejected == self._header()
            else:
                stale = (self._token_fetched_at is None or
                         self._clock() - self._token_fetched_at >= self.token_refresh_seconds)
            if stale:
                seen = self._token_fetched_at
                if self._token_lock is None:
                    self._token_lock = asyncio.Lock()
                async with self._token_lock:
                    # Concurrent callers queue here; only the first one refreshes.
                    if self._token_fetched_at == seen:
                        try:
                            self._token = _strip_bearer(await asyncio.to_thread(source))
                        except Exception as exc:  # keep the old token; the server will judge
                            log.warning("refreshing the bearer token failed", error=str(exc))
                        self._token_fetched_at = self._clock()
        return self._header()

    def _header(self) -> str | None:
        return f"Bearer {self._token}" if self._token else None

    def _headers(self, authorization: str | None, content_type: str | None,
                 extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self._user_agent}
        if authorization:
            headers["Authorization"] = authorization
        if content_type:
            headers["Content-Type"] = content_type
        if extra:
            headers.update(extra)
        return headers

    def _timeout(self, total: float | None) -> aiohttp.ClientTimeout:
        if total is None or total == self.timeout:
            return self._default_timeout
        return aiohttp.ClientTimeout(total=total)

    @staticmethod
    def _url(url: str, params: Params | None) -> yarl.URL | str:
        """``url`` with ``params`` as its query. A URL of plain characters (an :func:`api_path`
        of DNS names, as nearly all are) needs no quoting and is taken as it is."""
        parsed = yarl.URL(url, encoded=True) if _PLAIN_URL.fullmatch(url) else yarl.URL(url)
        query = _query(params)
        return parsed.with_query(query) if query else parsed

    def _request_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.config.tls_server_name:
            options["server_hostname"] = self.config.tls_server_name
        if self.config.proxy:
            options["proxy"] = self.config.proxy
        return options

    @staticmethod
    def _error(resp: aiohttp.ClientResponse, raw: bytes, method: str,
               path: str) -> ApiStatusError:
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        return api_status_error(resp.status, body,
                                retry_after_header=resp.headers.get("Retry-After"),
                                http_reason=resp.reason or "", method=method, path=path)

    # -- the two primitives --------------------------------------------------------------------

    async def request(self, method: str, path: str, *, params: Params | None = None,
                      body: dict[str, Any] | builtins.list[Any] | None = None,
                      content_type: str = JSON, timeout: float | None = None,
                      headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one request and return the decoded JSON object of a 2xx answer.

        ``path`` starts with ``/`` (``/api/v1/namespaces/x/pods``). ``timeout`` (default: the
        client's) bounds the whole exchange. Raises
        :class:`~pyscheduler.kube.errors.ApiStatusError` subclasses for refusals,
        :class:`~pyscheduler.kube.errors.TransportError` when there is no answer and
        :class:`~pyscheduler.kube.errors.DecodeError` for a 2xx answer that is not an object.
        """
        url = self.host + path
        data = orjson.dumps(body) if body is not None else None
        # Per request, aiohttp's own work is most of the client's CPU: hand it what it would
        # otherwise rebuild (the parsed URL, the timeout, no empty query to merge).
        target = self._url(url, params)
        client_timeout = self._timeout(timeout)
        session = self._session(streaming=False)
        retried_auth = False
        attempt = 0
        while True:
            authorization = self._header() if self.config.token_source is None \
                else await self._authorization()
            try:
                async with session.request(
                        method, target, data=data, timeout=client_timeout,
                        headers=self._headers(authorization,
                                              content_type if data is not None else None,
                                              headers),
                        **self._options) as resp:
                    raw = await resp.read()
                    if 200 <= resp.status < 300:
                        return self._decode(raw, method, url)
                    error = self._error(resp, raw, method, path)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                raise TransportError(method, url, _describe(exc)) from exc
            if (isinstance(error, UnauthorizedError) and not retried_auth
                    and self.config.token_source is not None):
                # An expired token: refresh once and try again, as client-go's
                # exec/projected-token round trippers do.
                retried_auth = True
                await self._authorization(rejected=authorization)
                continue
            if (error.retry_after is not None and attempt < self.max_retries
                    and (error.code == 429 or error.code >= 500)):
                attempt += 1
                wait = min(error.retry_after, self.max_retry_wait)
                log.debug("server asked to retry", method=method, path=path, code=error.code,
                          wait=wait, attempt=attempt)
                await asyncio.sleep(wait)
                continue
            raise error

    @staticmethod
    def _decode(raw: bytes, method: str, url: str) -> dict[str, Any]:
        if not raw.strip():
            return {}
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(method, url, f"answer is not JSON: {exc}", raw) from None
        if not isinstance(obj, dict):
            raise DecodeError(method, url, f"answer is a JSON {type(obj).__name__}, "
                              "not an object", raw)
        return obj

    async def stream(self, path: str, params: Params | None = None, *,
                     read_timeout: float | None = None,
                     connect_timeout: float | None = None) -> AsyncGenerator[dict[str, Any], None]:
        """Yield each line of a newline-delimited JSON stream (a watch) as a decoded object.

        Add ``watch=true`` (and ``resourceVersion``, ``timeoutSeconds``, ...) to ``params``.
        ``read_timeout`` bounds the silence between two chunks (a dead connection otherwise
        hangs forever); ``connect_timeout`` (default: the client's timeout) bounds getting the
        response headers. The iterator ends when the server ends the stream cleanly; a cut
        connection raises :class:`~pyscheduler.kube.errors.TransportError`, a non-200 answer an
        :class:`~pyscheduler.kube.errors.ApiStatusError`, and a line that is not a JSON object
        :class:`~pyscheduler.kube.errors.DecodeError` (the consumer cannot know what it missed).
        Close it early with ``contextlib.aclosing``.
        """
        url = self.host + path
        session = self._session(streaming=True)
        authorization = await self._authorization()
        timeout = aiohttp.ClientTimeout(
            total=None, sock_read=read_timeout,
            sock_connect=connect_timeout if connect_timeout is not None else self.timeout,
            connect=connect_timeout if connect_timeout is not None else self.timeout)
        try:
            resp = await session.get(url, params=_query(params), timeout=timeout,
                                     headers=self._headers(authorization, None, None),
                                     **self._request_options())
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise TransportError("GET", url, _describe(exc)) from exc
        try:
            if resp.status != 200:
                try:
                    raw = await resp.read()
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                    raise TransportError("GET", url, _describe(exc)) from exc
                raise self._error(resp, raw, "GET", path)
            pending = b""
            while True:
                try:
                    chunk = await resp.content.readany()
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                    raise TransportError("GET", url, _describe(exc)) from exc
                if not chunk:
                    break
                pending += chunk
                if b"\n" not in chunk:
                    if len(pending) > MAX_LINE_BYTES:
                        raise DecodeError("GET", url, "stream line exceeds "
                                          f"{MAX_LINE_BYTES} bytes", pending)
                    continue
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield self._decode_line(line, url)
            if pending.strip():
                yield self._decode_line(pending, url)
        finally:
            resp.release()

    @staticmethod
    def _decode_line(line: bytes, url: str) -> dict[str, Any]:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise DecodeError("GET", url, f"stream line is not JSON: {exc}", line) from None
        if not isinstance(obj, dict):
            raise DecodeError("GET", url, "stream line is not a JSON object", line)
        return obj

    # -- conveniences --------------------------------------------------------------------------

    async def get(self, path: str, params: Params | None = None, *,
                  timeout: float | None = None) -> dict[str, Any]:
        """``GET`` one object (or any document)."""
        return await self.request("GET", path, params=params, timeout=timeout)

    async def list(self, path: str, params: Params | None = None, *,
                   timeout: float | None = None) -> dict[str, Any]:
        """``GET`` a collection: one page (pass ``limit``/``continue`` to page)."""
        return await self.request("GET", path, params=params, timeout=timeout)

    async def create(self, path: str, obj: dict[str, Any], *, params: Params | None = None,
                     timeout: float | None = None) -> dict[str, Any]:
        """``POST`` ``obj`` to the collection at ``path``; returns the created object."""
        return await self.request("POST", path, params=params, body=obj, timeout=timeout)

    async def update(self, path: str, obj: dict[str, Any], *, params: Params | None = None,
                     timeout: float | None = None) -> dict[str, Any]:
        """``PUT`` (replace) the object at ``path``. With ``metadata.resourceVersion`` set the
        write is conditional: a concurrent change gives :class:`ConflictError`."""
        return await self.request("PUT", path, params=params, body=obj, timeout=timeout)

    async def patch(self, path: str, patch: dict[str, Any] | builtins.list[Any],
                    patch_type: PatchType = "merge", *, params: Params | None = None,
                    timeout: float | None = None) -> dict[str, Any]:
        """``PATCH`` the object at ``path``: ``merge`` (RFC 7386), ``strategic`` (kube's
        strategic merge, built-in types only), ``json`` (RFC 6902, a list of operations) or
        ``apply`` (server-side apply; pass ``fieldManager`` in ``params``)."""
        if patch_type not in _PATCH_CONTENT_TYPES:
            raise ValueError(f"patch_type must be one of {', '.join(_PATCH_CONTENT_TYPES)}, "
                             f"got {patch_type!r}")
        return await self.request("PATCH", path, params=params, body=patch,
                                  content_type=_PATCH_CONTENT_TYPES[patch_type], timeout=timeout)

    async def delete(self, path: str, *, grace_period_seconds: int | None = None,
                     propagation_policy: str | None = None, uid: str | None = None,
                     resource_version: str | None = None,
                     timeout: float | None = None) -> dict[str, Any]:
        """``DELETE`` the object at ``path``, with optional ``uid``/``resourceVersion``
        preconditions (a mismatch gives :class:`ConflictError`). Returns the server's answer:
        the object (still terminating) or a Status."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        if preconditions:
            options["preconditions"] = preconditions
        return await self.request("DELETE", path, body=options, timeout=timeout)

    async def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
                   timeout: float | None = None) -> dict[str, Any]:
        """Bind a pod to a node (``POST .../pods/{name}/binding``), as kube-scheduler does.

        With ``uid`` the binding carries it as a precondition: if the pod was deleted and
        recreated under the same name since it was scheduled, the server answers 409 instead of
        binding the new pod. A pod that is already bound also gives :class:`ConflictError`.
        """
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        return await self.request(
            "POST", api_path("v1", "pods", namespace=namespace, name=name,
                             subresource="binding"), body=binding, timeout=timeout)

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any], *,
                               timeout: float | None = None) -> dict[str, Any]:
        """Strategic-merge ``patch`` into the pod's ``/status`` (conditions merge by ``type``,
        so a PodScheduled condition replaces only its own entry)."""
        return await self.patch(
            api_path("v1", "pods", namespace=namespace, name=name, subresource="status"),
            patch, "strategic", timeout=timeout)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
