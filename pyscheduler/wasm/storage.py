"""Fetching fragment modules from ``s3://``, ``http(s)://`` and ``file://`` URLs, within size and
time limits.

:func:`fetch` is blocking; the scheduler runs it in a worker thread. Every failure is a
:class:`~pyscheduler.wasm.errors.StorageError` whose message names the URL (credentials left out)
and what went wrong, e.g. ``cannot fetch s3://modules/gpu.wasm: sha256 mismatch: expected 3a…,
got 9f…``.

Rules
-----
* **Integrity.** A given ``sha256`` is always verified. Remote URLs (s3, http, https) without one
  are refused even though the resource parser already requires it: bytes from the network are
  never run unchecked.
* **Size.** At most ``max_bytes``: a declared ``Content-Length`` (or file size) above it fails
  before the body is read, and the body is read in chunks, never more than ``max_bytes + 1`` bytes
  in all, so a server that lies about or leaves out its length cannot make us buffer more.
* **Time.** Each network wait (connect, each read) gives up after ``timeout_seconds``, and the
  body must arrive within ``timeout_seconds`` of the request (checked between reads, so a server
  trickling bytes is cut off too). Retries are few and quick: one more connection attempt,
  no read retries.
* **Object storage** (``s3://bucket/key``) goes to the one configured endpoint (MinIO or any S3
  API) through the ``minio`` SDK; there is no default endpoint.
* **Web servers** (``http(s)://``) only the operator allowed: a fragment resource is written by
  whoever may create the custom resource, and a URL is a request the scheduler makes from inside
  the cluster (to the cloud's metadata endpoint, to services that trust the pod network). So the
  host (or ``host:port``) must be listed in ``allowed_http_hosts``; every address it resolves to
  must be globally routable (loopback, private, link-local, shared and reserved ranges are
  refused unless ``allow_private_addresses``); the connection goes to the address that was
  checked (a second lookup cannot swap it); redirects are not followed. A refusal happens before
  any request, and no message ever carries what a refused endpoint would have answered.
* **Files** (``file:///path``) are read only below ``allowed_file_dirs``, judged after ``..`` and
  symbolic links are resolved, and only when they are regular files (a FIFO or device is refused
  without blocking). No allowed directory means no file URL is allowed.

:func:`publish` uploads a module to the object store and returns the ``s3://`` URL and sha256 to
put in a resource; :func:`object_digest` tells what an object holds already (a published version
is never overwritten with other bytes), :func:`remove` takes an upload back.
"""

from __future__ import annotations

import hashlib
import io
import ipaddress
import os
import socket
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error
from urllib3.exceptions import HTTPError as Urllib3HTTPError
from urllib3.exceptions import (
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from pyscheduler.wasm.errors import StorageError

__all__ = ["DEFAULT_MAX_BYTES", "StorageConfig", "fetch", "object_digest", "publish", "remove"]

DEFAULT_MAX_BYTES: Final = 16 * 2**20
_CHUNK: Final = 64 * 1024
_SHA256: Final = re.compile(r"[a-fA-F0-9]{64}")
_REMOTE: Final = ("s3", "http", "https")
_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_WASM_CONTENT_TYPE: Final = "application/wasm"


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """Where modules may come from, and how much and how long a fetch may take.

    ``endpoint`` is the object store for ``s3://`` URLs: ``host:port`` (``secure`` says whether
    to use TLS) or ``http(s)://host:port`` (the scheme decides). ``ca_file`` is a PEM bundle to
    verify TLS servers with (object store and https URLs) instead of the system's.
    """

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    secure: bool = False
    region: str | None = None
    allowed_file_dirs: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout_seconds: float = 10.0
    ca_file: str | None = None
    allowed_http_hosts: tuple[str, ...] = ()
    allow_private_addresses: bool = False


# --------------------------------------------------------------------------------------------
# Fetching


def fetch(url: str, sha256: str | None, config: StorageConfig) -> bytes:
    """The module at ``url``, checked against ``sha256`` when given. Blocking.

    Raises :class:`StorageError` (see the module docstring for the rules).
    """
    shown = _redact(url)
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in ("s3", "http", "https", "file"):
        raise StorageError(f"cannot fetch {shown}: unsupported URL scheme "
                           f"(use s3://, https://, http:// or file://)", refused=True)
    if sha256 is not None and not _SHA256.fullmatch(sha256):
        raise StorageError(f"cannot fetch {shown}: sha256 must be 64 hex digits, got {sha256!r}", refused=True)
    if sha256 is None and scheme in _REMOTE:
        raise StorageError(f"cannot fetch {shown}: a sha256 is required for remote URLs", refused=True)
    if config.max_bytes < 1:
        raise StorageError(f"cannot fetch {shown}: max_bytes must be at least 1", refused=True)
    if scheme == "s3":
        data = _fetch_s3(url, config)
    elif scheme == "file":
        data = _fetch_file(url, config)
    else:
        data = _fetch_http(url, config)
    if sha256 is not None:
        got = hashlib.sha256(data).hexdigest()
        if got != sha256.lower():
            raise StorageError(f"cannot fetch {shown}: sha256 mismatch: expected {sha256.lower()}, "
                               f"got {got}")
    return data


def _fail(url: str, what: str, *, refused: bool = False) -> StorageError:
    return StorageError(f"cannot fetch {_redact(url)}: {what}", refused=refused)


def _redact(url: str) -> str:
    """The URL without a ``user:password@`` part."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _read_capped(read: Callable[[int], bytes], url: str, limit: int, deadline: float) -> bytes:
    """Read until EOF, failing past ``limit`` bytes (reading at most ``limit + 1``) or ``deadline``.

    ``read(n)`` returns at most ``n`` bytes, as soon as some are available (b"" at EOF).
    """
    chunks: list[bytes] = []
    total = 0
    while True:
        if time.monotonic() > deadline:
            raise _fail(url, f"timed out reading the body after {total} bytes")
        chunk = read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise _fail(url, f"larger than the {limit} byte limit")
        chunks.append(chunk)


def _declared_length(headers: urllib3.HTTPHeaderDict, url: str, limit: int) -> None:
    """Refuse a response whose declared length is over ``limit`` before reading it."""
    value = headers.get("Content-Length")
    if value is None:
        return
    try:
        length = int(value)
    except ValueError:
        return  # unreadable: the capped read still applies
    if length > limit:
        raise _fail(url, f"{length} bytes is larger than the {limit} byte limit")


def _pool(config: StorageConfig) -> urllib3.PoolManager:
    """The object store client's connection pool: our timeouts, one quick connection retry, and
    a 3xx handed back as it is (the MinIO client deals with an S3 region redirect itself)."""
    timeout = config.timeout_seconds
    retries = urllib3.Retry(total=1, connect=1, read=0, status=0, other=0, redirect=False,
                            backoff_factor=0.05, raise_on_status=False)
    if config.ca_file:
        return urllib3.PoolManager(timeout=urllib3.Timeout(connect=timeout, read=timeout),
                                   retries=retries, maxsize=2, ca_certs=config.ca_file)
    return urllib3.PoolManager(timeout=urllib3.Timeout(connect=timeout, read=timeout),
                               retries=retries, maxsize=2)


def _network_problem(exc: BaseException, config: StorageConfig) -> str:
    """A short account of a urllib3 failure."""
    reason: BaseException = exc
    if isinstance(exc, MaxRetryError) and exc.reason is not None:
        reason = exc.reason
    text = str(reason)
    # urllib3 wraps the OS error in the pool's description; the OS text is what matters. (Its
    # NewConnectionError is also a timeout class, so it is told apart first.)
    if isinstance(reason, ProtocolError) and reason.args and isinstance(reason.args[0], str):
        return reason.args[0]  # e.g. "Connection broken: IncompleteRead(...)"
    if isinstance(reason, NewConnectionError):
        marker = "Failed to establish a new connection: "
        return "connection failed: " + (text.split(marker, 1)[1] if marker in text else text)
    if isinstance(reason, (ReadTimeoutError, Urllib3Timeout, TimeoutError)):
        return f"timed out after {config.timeout_seconds:g}s"
    return text


def _allowed_address(url: str, config: StorageConfig) -> tuple[str, str, int, bool]:
    """(address to connect to, host name, port, https) for an http(s) URL the configuration
    allows; :class:`StorageError` (before any request is made) otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _fail(url, f"not a valid URL ({exc})", refused=True) from None
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise _fail(url, "the URL has no host", refused=True)
    https = parts.scheme == "https"
    port = port or (443 if https else 80)
    allowed = {h.lower().rstrip(".") for h in config.allowed_http_hosts}
    shown_host = f"[{host}]" if ":" in host else host
    if shown_host not in allowed and f"{shown_host}:{port}" not in allowed:
        raise _fail(url, f"host {shown_host}:{port} is not in storage.allowedHttpHosts "
                         f"(no request was made)", refused=True)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise _fail(url, f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    addresses = list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))
    if not addresses:
        raise _fail(url, f"cannot resolve {host}: no addresses")
    if not config.allow_private_addresses:
        for text in addresses:
            address = ipaddress.ip_address(text)
            mapped = getattr(address, "ipv4_mapped", None)
            if not (mapped or address).is_global:
                raise _fail(url, f"{host} resolves to {text}, which is not a public address "
                                 f"(loopback, private, link-local and reserved addresses need "
                                 f"storage.allowPrivateAddresses: true; no request was made)",
                            refused=True)
    return addresses[0], host, port, https


def _fetch_http(url: str, config: StorageConfig) -> bytes:
    address, host, port, https = _allowed_address(url, config)
    deadline = time.monotonic() + config.timeout_seconds
    timeout = urllib3.Timeout(connect=config.timeout_seconds, read=config.timeout_seconds)
    retries = urllib3.Retry(total=1, connect=1, read=0, status=0, other=0, redirect=False,
                            backoff_factor=0.05, raise_on_status=False,
                            raise_on_redirect=False)
    default_port = 443 if https else 80
    name = f"[{host}]" if ":" in host else host
    headers = {"Host": name if port == default_port else f"{name}:{port}",
               "Accept-Encoding": "identity", "Accept": f"{_WASM_CONTENT_TYPE}, */*"}
    # The connection goes to the address checked above; TLS still verifies the host name.
    pool: urllib3.HTTPConnectionPool
    if https:
        pool = urllib3.HTTPSConnectionPool(
            address, port, timeout=timeout, retries=retries, maxsize=1, cert_reqs="CERT_REQUIRED",
            ca_certs=config.ca_file, server_hostname=host, assert_hostname=host)
    else:
        pool = urllib3.HTTPConnectionPool(address, port, timeout=timeout, retries=retries,
                                          maxsize=1)
    target = urlsplit(url)
    path = (target.path or "/") + (f"?{target.query}" if target.query else "")
    try:
        try:
            response = pool.urlopen("GET", path, headers=headers, preload_content=False,
                                    decode_content=False, redirect=False, assert_same_host=False)
        except Urllib3HTTPError as exc:
            raise _fail(url, _network_problem(exc, config)) from None
        try:
            if 300 <= response.status < 400:
                raise _fail(url, f"HTTP {response.status}: redirects are not followed (give "
                                 f"the resource the module's final URL)", refused=True)
            if response.status != 200:
                raise _fail(url, f"HTTP {response.status} {response.reason or ''}".rstrip())
            _declared_length(response.headers, url, config.max_bytes)
            return _read_capped(lambda n: response.read1(n, decode_content=False), url,
                                config.max_bytes, deadline)
        except Urllib3HTTPError as exc:
            raise _fail(url, _network_problem(exc, config)) from None
        finally:
            response.close()
            response.release_conn()
    finally:
        pool.close()


def _s3_location(url: str) -> tuple[str, str]:
    bucket, _, key = url[len("s3://"):].partition("/")
    if not bucket or not key:
        raise _fail(url, "an s3 URL must be s3://<bucket>/<key>", refused=True)
    return bucket, key


def _client(config: StorageConfig, what: str) -> tuple[Minio, urllib3.PoolManager]:
    """A MinIO client for the configured endpoint; ``what`` names the operation in errors."""
    if not config.endpoint:
        raise StorageError(f"cannot {what}: no object storage endpoint is configured",
                           refused=True)
    endpoint, secure = config.endpoint, config.secure
    if "://" in endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or parts.path not in ("", "/") or not parts.netloc:
            raise StorageError(f"cannot {what}: the object storage endpoint must be host:port or "
                               f"http(s)://host:port, got {config.endpoint!r}", refused=True)
        endpoint, secure = parts.netloc, parts.scheme == "https"
    pool = _pool(config)
    try:
        client = Minio(endpoint, access_key=config.access_key or None,
                       secret_key=config.secret_key if config.access_key else None,
                       secure=secure, region=config.region or None, http_client=pool)
    except ValueError as exc:
        pool.clear()
        raise StorageError(f"cannot {what}: invalid object storage endpoint "
                           f"{config.endpoint!r}: {exc}", refused=True) from None
    return client, pool


def _s3_problem(exc: BaseException, bucket: str, key: str, config: StorageConfig) -> str:
    if isinstance(exc, S3Error):
        if exc.code == "NoSuchBucket":
            return f"bucket {bucket!r} does not exist"
        if exc.code == "NoSuchKey":
            return f"object {key!r} does not exist in bucket {bucket!r}"
        if exc.code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return f"access denied ({exc.code}: {exc.message})"
        return f"object storage error {exc.code}: {exc.message}"
    if isinstance(exc, Urllib3HTTPError):
        return f"object storage at {config.endpoint} unreachable: {_network_problem(exc, config)}"
    return f"object storage error: {exc}"


def _fetch_s3(url: str, config: StorageConfig) -> bytes:
    bucket, key = _s3_location(url)
    client, pool = _client(config, f"fetch {url}")
    deadline = time.monotonic() + config.timeout_seconds
    try:
        try:
            size = client.stat_object(bucket, key).size
        except S3Error as exc:
            # A HEAD response has no body: a missing bucket also looks like a missing key.
            if exc.code == "NoSuchKey" and not _bucket_exists(client, bucket):
                raise _fail(url, f"bucket {bucket!r} does not exist") from None
            raise _fail(url, _s3_problem(exc, bucket, key, config)) from None
        except (MinioException, Urllib3HTTPError, ValueError) as exc:
            raise _fail(url, _s3_problem(exc, bucket, key, config)) from None
        if size is not None and size > config.max_bytes:
            raise _fail(url, f"{size} bytes is larger than the {config.max_bytes} byte limit")
        try:
            response = client.get_object(bucket, key)
        except (MinioException, Urllib3HTTPError, ValueError) as exc:
            raise _fail(url, _s3_problem(exc, bucket, key, config)) from None
        try:
            _declared_length(response.headers, url, config.max_bytes)
            return _read_capped(lambda n: response.read1(n), url, config.max_bytes, deadline)
        except Urllib3HTTPError as exc:
            raise _fail(url, _s3_problem(exc, bucket, key, config)) from None
        finally:
            response.close()
            response.release_conn()
    finally:
        pool.clear()


def _bucket_exists(client: Minio, bucket: str) -> bool:
    """Whether the bucket exists; True when that cannot be told (the key error then stands)."""
    try:
        return client.bucket_exists(bucket)
    except (MinioException, Urllib3HTTPError, ValueError):
        return True


def _fetch_file(url: str, config: StorageConfig) -> bytes:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise _fail(url, "a file URL must be file:///<absolute path>", refused=True)
    if not config.allowed_file_dirs:
        raise _fail(url, "file:// URLs are not allowed (no allowed directories are configured)", refused=True)
    path = unquote(parts.path)
    if "\x00" in path:
        raise _fail(url, "the path contains a NUL character", refused=True)
    # realpath resolves ".." and every symbolic link, so a link cannot lead out of the allowed
    # directories; O_NOFOLLOW then refuses a last component swapped for a link since.
    resolved = os.path.realpath(path)
    allowed = [os.path.realpath(directory) for directory in config.allowed_file_dirs]
    if not any(_is_within(resolved, directory) for directory in allowed):
        raise _fail(url, f"{resolved} is outside the allowed directories "
                         f"({', '.join(config.allowed_file_dirs)})", refused=True)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(resolved, flags)
    except FileNotFoundError:
        raise _fail(url, f"{resolved} does not exist") from None
    except OSError as exc:
        raise _fail(url, f"cannot open {resolved}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _fail(url, f"{resolved} is not a regular file")
        if info.st_size > config.max_bytes:
            raise _fail(url, f"{info.st_size} bytes is larger than the {config.max_bytes} byte "
                             f"limit")
        deadline = time.monotonic() + config.timeout_seconds
        try:
            return _read_capped(lambda n: os.read(fd, n), url, config.max_bytes, deadline)
        except OSError as exc:
            raise _fail(url, f"cannot read {resolved}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _is_within(path: str, directory: str) -> bool:
    try:
        return os.path.commonpath([path, directory]) == directory
    except ValueError:  # different drives, or relative against absolute
        return False


# --------------------------------------------------------------------------------------------
# Publishing


def publish(path_or_bytes: str | os.PathLike[str] | bytes, *, bucket: str, key: str,
            config: StorageConfig) -> tuple[str, str]:
    """Upload a module to ``bucket``/``key`` (creating the bucket if needed).

    Returns the ``s3://bucket/key`` URL and the module's sha256, the two values a resource
    needs. Raises :class:`StorageError` when the file cannot be read, the module is larger than
    ``config.max_bytes`` (nothing could fetch it back), or the upload fails.
    """
    url = f"s3://{bucket}/{key}"
    if isinstance(path_or_bytes, bytes):
        data = path_or_bytes
    else:
        try:
            data = Path(path_or_bytes).read_bytes()
        except OSError as exc:
            raise StorageError(f"cannot publish {os.fspath(path_or_bytes)} to {url}: "
                               f"{exc.strerror or exc}") from None
    if len(data) > config.max_bytes:
        raise StorageError(f"cannot publish to {url}: {len(data)} bytes is larger than the "
                           f"{config.max_bytes} byte limit")
    if not _BUCKET.fullmatch(bucket):
        raise StorageError(f"cannot publish to {url}: a bucket name is 3 to 63 lowercase letters, "
                           f"digits, '.' and '-', starting and ending with a letter or digit")
    if not key:
        raise StorageError(f"cannot publish to {url}: the key must not be empty")
    digest = hashlib.sha256(data).hexdigest()
    client, pool = _client(config, f"publish to {url}")
    try:
        try:
            if not client.bucket_exists(bucket):
                try:
                    client.make_bucket(bucket)
                except S3Error as exc:
                    # Someone else made it in the meantime: that is fine.
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise
            client.put_object(bucket, key, io.BytesIO(data), len(data),
                              content_type=_WASM_CONTENT_TYPE,
                              metadata={"sha256": digest})
        except (MinioException, Urllib3HTTPError, ValueError) as exc:
            raise StorageError(f"cannot publish to {url}: "
                               f"{_s3_problem(exc, bucket, key, config)}") from None
    finally:
        pool.clear()
    return url, digest


def object_digest(bucket: str, key: str, config: StorageConfig) -> str | None:
    """The sha256 of what ``bucket``/``key`` holds, None when there is no such object (or no
    such bucket). Uses the digest :func:`publish` stores with the object, else reads it."""
    url = f"s3://{bucket}/{key}"
    client, pool = _client(config, f"read {url}")
    try:
        try:
            stat = client.stat_object(bucket, key)
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchBucket", "NoSuchObject"):
                return None
            raise StorageError(f"cannot read {url}: {_s3_problem(exc, bucket, key, config)}") \
                from None
        except (MinioException, Urllib3HTTPError, ValueError) as exc:
            raise StorageError(f"cannot read {url}: {_s3_problem(exc, bucket, key, config)}") \
                from None
        metadata = {k.lower(): v for k, v in (stat.metadata or {}).items()}
        stored = metadata.get("x-amz-meta-sha256")
        if isinstance(stored, str) and _SHA256.fullmatch(stored):
            return stored.lower()
    finally:
        pool.clear()
    return hashlib.sha256(_fetch_s3(url, config)).hexdigest()


def remove(url: str, config: StorageConfig) -> None:
    """Delete the object at ``s3://bucket/key``; :class:`StorageError` when that fails."""
    bucket, key = _s3_location(url)
    client, pool = _client(config, f"remove {url}")
    try:
        client.remove_object(bucket, key)
    except (MinioException, Urllib3HTTPError, ValueError) as exc:
        raise StorageError(f"cannot remove {url}: {_s3_problem(exc, bucket, key, config)}") \
            from None
    finally:
        pool.clear()
