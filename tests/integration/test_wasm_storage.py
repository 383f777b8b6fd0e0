"""Fetching fragment modules for real: an S3 server (moto) and HTTP(S) servers on loopback, and
files on disk. Every failure must be a StorageError naming the URL, and come quickly."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pyscheduler_sim.certs import make_serving_certs
from pyscheduler.wasm.errors import StorageError
from pyscheduler.wasm.storage import StorageConfig, fetch, publish

MODULE = b"\x00asm\x01\x00\x00\x00" + bytes(range(256)) * 4
MODULE_SHA = hashlib.sha256(MODULE).hexdigest()
LIMIT = 64 * 1024  # max_bytes for the size tests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def failure(url: str, sha256: str | None, config: StorageConfig) -> tuple[str, float]:
    """The StorageError message of a fetch that must fail, and how long it took."""
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        fetch(url, sha256, config)
    return str(info.value), time.monotonic() - start


# ---- S3 (moto) --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(moto_s3: StorageConfig) -> StorageConfig:
    return moto_s3


def test_publish_then_fetch(s3: StorageConfig) -> None:
    url, sha = publish(MODULE, bucket="modules", key="gpu/binpack-1.2.0.wasm", config=s3)
    assert (url, sha) == ("s3://modules/gpu/binpack-1.2.0.wasm", MODULE_SHA)
    assert fetch(url, sha, s3) == MODULE
    # publishing again into the now existing bucket, from a file
    assert fetch(url, MODULE_SHA.upper(), s3) == MODULE


def test_publish_from_a_file_and_an_http_endpoint_without_region(s3: StorageConfig,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "m.wasm"
    path.write_bytes(MODULE[:100])
    config = StorageConfig(endpoint=f"http://{s3.endpoint}", access_key="testing",
                           secret_key="testing", timeout_seconds=5.0)
    url, sha = publish(path, bucket="from-file", key="m.wasm", config=config)
    assert sha == hashlib.sha256(MODULE[:100]).hexdigest()
    assert fetch(url, sha, config) == MODULE[:100]


def test_publish_failures(s3: StorageConfig, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"cannot publish .*nope\.wasm to s3://bkt/k: No such"):
        publish(tmp_path / "nope.wasm", bucket="bkt", key="k", config=s3)
    small = StorageConfig(endpoint=s3.endpoint, max_bytes=4)
    with pytest.raises(StorageError, match="cannot publish to s3://bkt/k: 8 bytes is larger than "
                                           "the 4 byte limit"):
        publish(MODULE[:8], bucket="bkt", key="k", config=small)
    with pytest.raises(StorageError, match="cannot publish to s3://Bad_Bucket/k: a bucket name "
                                           "is 3 to 63 lowercase letters"):
        publish(MODULE, bucket="Bad_Bucket", key="k", config=s3)
    with pytest.raises(StorageError,
                       match="cannot publish to s3://bkt/: the key must not be empty"):
        publish(MODULE, bucket="bkt", key="", config=s3)
    closed = StorageConfig(endpoint=f"127.0.0.1:{free_port()}", timeout_seconds=2.0)
    with pytest.raises(StorageError, match=r"cannot publish to s3://bkt/k: object storage at "
                                           r"127\.0\.0\.1:\d+ unreachable: connection failed: "):
        publish(MODULE, bucket="bkt", key="k", config=closed)


def test_sha256_mismatch(s3: StorageConfig) -> None:
    url, _ = publish(MODULE, bucket="modules", key="mismatch.wasm", config=s3)
    message, _ = failure(url, "0" * 64, s3)
    assert message == (f"cannot fetch {url}: sha256 mismatch: expected {'0' * 64}, "
                       f"got {MODULE_SHA}")


def test_missing_object_and_missing_bucket(s3: StorageConfig) -> None:
    publish(MODULE, bucket="modules", key="present.wasm", config=s3)
    message, _ = failure("s3://modules/absent.wasm", MODULE_SHA, s3)
    assert message == ("cannot fetch s3://modules/absent.wasm: object 'absent.wasm' does not "
                       "exist in bucket 'modules'")
    message, _ = failure("s3://no-such-bucket/m.wasm", MODULE_SHA, s3)
    assert message == ("cannot fetch s3://no-such-bucket/m.wasm: bucket 'no-such-bucket' does "
                       "not exist")
    # without a configured region the client asks the bucket's location first: same answer
    no_region = StorageConfig(endpoint=s3.endpoint, access_key="testing", secret_key="testing")
    message, _ = failure("s3://no-such-bucket/m.wasm", MODULE_SHA, no_region)
    assert message == ("cannot fetch s3://no-such-bucket/m.wasm: bucket 'no-such-bucket' does "
                       "not exist")


def test_oversize_object(s3: StorageConfig) -> None:
    url, sha = publish(MODULE, bucket="modules", key="big.wasm", config=s3)
    small = StorageConfig(endpoint=s3.endpoint, access_key="testing", secret_key="testing",
                          region="us-east-1", max_bytes=len(MODULE) - 1)
    message, _ = failure(url, sha, small)
    assert message == (f"cannot fetch {url}: {len(MODULE)} bytes is larger than the "
                       f"{len(MODULE) - 1} byte limit")
    exact = StorageConfig(endpoint=s3.endpoint, access_key="testing", secret_key="testing",
                          region="us-east-1", max_bytes=len(MODULE))
    assert fetch(url, sha, exact) == MODULE


def test_unreachable_endpoint_fails_fast() -> None:
    port = free_port()  # nothing listens there any more
    config = StorageConfig(endpoint=f"127.0.0.1:{port}", access_key="a", secret_key="b",
                           timeout_seconds=2.0)
    message, took = failure("s3://modules/m.wasm", MODULE_SHA, config)
    assert message.startswith(f"cannot fetch s3://modules/m.wasm: object storage at "
                              f"127.0.0.1:{port} unreachable: connection failed: ")
    assert "refused" in message.lower()
    assert took < 2.0


@pytest.mark.parametrize(("url", "sha", "config", "expected"), [
    pytest.param("s3://modules/m.wasm", MODULE_SHA, StorageConfig(),
                 "cannot fetch s3://modules/m.wasm: no object storage endpoint is configured",
                 id="no endpoint"),
    pytest.param("s3://modules/m.wasm", None, StorageConfig(endpoint="127.0.0.1:1"),
                 "cannot fetch s3://modules/m.wasm: a sha256 is required for remote URLs",
                 id="s3 without sha256"),
    pytest.param("https://user:secret@example.test/m.wasm", None, StorageConfig(),
                 "cannot fetch https://example.test/m.wasm: a sha256 is required for remote URLs",
                 id="https without sha256, credentials hidden"),
    pytest.param("ftp://example.test/m.wasm", MODULE_SHA, StorageConfig(),
                 "cannot fetch ftp://example.test/m.wasm: unsupported URL scheme (use s3://, "
                 "https://, http:// or file://)", id="ftp"),
    pytest.param("s3://modules/m.wasm", "xyz", StorageConfig(endpoint="127.0.0.1:1"),
                 "cannot fetch s3://modules/m.wasm: sha256 must be 64 hex digits, got 'xyz'",
                 id="malformed sha256"),
    pytest.param("s3://modules", MODULE_SHA, StorageConfig(endpoint="127.0.0.1:1"),
                 "cannot fetch s3://modules: an s3 URL must be s3://<bucket>/<key>", id="no key"),
    pytest.param("s3://modules/m.wasm", MODULE_SHA, StorageConfig(endpoint="ftp://h:1"),
                 "cannot fetch s3://modules/m.wasm: the object storage endpoint must be "
                 "host:port or http(s)://host:port, got 'ftp://h:1'", id="bad endpoint"),
])
def test_refused_before_any_request(url: str, sha: str | None, config: StorageConfig,
                                    expected: str) -> None:
    message, took = failure(url, sha, config)
    assert message == expected
    assert took < 1.0


# ---- HTTP(S) ----------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stop: threading.Event
    requests: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_body(self, body: bytes, *, length: bool = True, close: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/wasm")
        if length:
            self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def handle(self) -> None:
        # The client hangs up on purpose in several tests (too large, timed out, refused).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, ssl.SSLError):
            super().handle()

    def do_GET(self) -> None:
        self.requests.append(self.path)
        self.route()

    def route(self) -> None:
        if self.path == "/m.wasm":
            self.send_body(MODULE)
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/m.wasm")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/big-declared":
            # Declares more than the limit: refused before the body is read.
            self.send_response(200)
            self.send_header("Content-Length", str(LIMIT + 1))
            self.end_headers()
            self.wfile.write(b"\0" * (LIMIT + 1))
        elif self.path == "/big-no-length":
            # No Content-Length, the body ends when the connection closes: 1 MiB of it.
            self.send_response(200)
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            for _ in range(16):
                self.wfile.write(b"\0" * LIMIT)
        elif self.path == "/big-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(16):
                self.wfile.write(b"%x\r\n%s\r\n" % (LIMIT, b"\0" * LIMIT))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/short-body":
            # Declares more than it sends, then hangs up.
            self.send_response(200)
            self.send_header("Content-Length", str(len(MODULE) + 10))
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            self.wfile.write(MODULE)
        elif self.path == "/slow-headers":
            self.stop.wait(3)
            self.send_body(MODULE)
        elif self.path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Length", str(len(MODULE)))
            self.end_headers()
            for byte in MODULE:
                if self.stop.wait(0.05):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
        else:
            self.send_response(404, "Not Found")
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not found")


class Server:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.stop = threading.Event()
        self.requests: list[str] = []
        handler = type("BoundHandler", (Handler,), {"stop": self.stop,
                                                    "requests": self.requests})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.base = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def web() -> Iterator[Server]:
    server = Server()
    yield server
    server.close()


@pytest.fixture(scope="module")
def tls_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    certs = make_serving_certs()
    ca = tmp_path_factory.mktemp("ca") / "ca.crt"
    ca.write_bytes(certs.ca_pem)
    server = Server(certs.ssl_context())
    yield server, str(ca)
    server.close()


# The test servers listen on loopback: allowed here, as an operator would allow an in-cluster
# server by name (and with allowPrivateAddresses).
LOOPBACK = {"allowed_http_hosts": ("127.0.0.1",), "allow_private_addresses": True}
HTTP = StorageConfig(max_bytes=LIMIT, timeout_seconds=2.0, **LOOPBACK)


def test_http_ok(web: Server) -> None:
    assert fetch(f"{web.base}/m.wasm", MODULE_SHA, HTTP) == MODULE


@pytest.mark.parametrize("path", ["/redirect", "/loop"])
def test_http_redirects_are_not_followed(web: Server, path: str) -> None:
    message, took = failure(f"{web.base}{path}", MODULE_SHA, HTTP)
    assert message == (f"cannot fetch {web.base}{path}: HTTP 302: redirects are not followed "
                       f"(give the resource the module's final URL)")
    assert took < 1.0


@pytest.mark.parametrize(("allowed", "private", "message"), [
    pytest.param((), True, "host 127.0.0.1:{port} is not in storage.allowedHttpHosts (no "
                           "request was made)", id="no host allowed"),
    pytest.param(("example.test", "127.0.0.1:1"), True,
                 "host 127.0.0.1:{port} is not in storage.allowedHttpHosts (no request was made)",
                 id="another port of the host"),
    pytest.param(("127.0.0.1",), False,
                 "127.0.0.1 resolves to 127.0.0.1, which is not a public address (loopback, "
                 "private, link-local and reserved addresses need "
                 "storage.allowPrivateAddresses: true; no request was made)",
                 id="loopback needs allowPrivateAddresses"),
    pytest.param(("127.0.0.1:{port}",), True, None, id="host and port allowed"),
])
def test_http_hosts_must_be_allowed(web: Server, allowed: tuple[str, ...], private: bool,
                                    message: str | None) -> None:
    port = web.base.rsplit(":", 1)[1]
    config = StorageConfig(timeout_seconds=2.0, allow_private_addresses=private,
                           allowed_http_hosts=tuple(a.format(port=port) for a in allowed))
    if message is None:
        assert fetch(f"{web.base}/m.wasm", MODULE_SHA, config) == MODULE
        return
    before = len(web.requests)
    got, _ = failure(f"{web.base}/m.wasm", MODULE_SHA, config)
    assert got == f"cannot fetch {web.base}/m.wasm: {message.format(port=port)}"
    assert len(web.requests) == before  # refused before anything was sent


@pytest.mark.parametrize("address", ["169.254.169.254", "10.0.0.1", "100.64.0.1", "[::1]",
                                     "[fd00::1]", "0.0.0.0", "[::ffff:127.0.0.1]"])
def test_non_public_addresses_are_refused_without_a_request(address: str) -> None:
    config = StorageConfig(timeout_seconds=2.0, allowed_http_hosts=(address,))
    url = f"http://{address}/latest/meta-data/m.wasm"
    message, took = failure(url, MODULE_SHA, config)
    host = address.strip("[]")
    assert message.startswith(f"cannot fetch {url}: {host} resolves to ")
    assert message.endswith("which is not a public address (loopback, private, link-local and "
                            "reserved addresses need storage.allowPrivateAddresses: true; no "
                            "request was made)")
    assert took < 1.0


def test_http_not_found(web: Server) -> None:
    message, _ = failure(f"{web.base}/absent.wasm", MODULE_SHA, HTTP)
    assert message == f"cannot fetch {web.base}/absent.wasm: HTTP 404 Not Found"


def test_http_sha256_mismatch(web: Server) -> None:
    message, _ = failure(f"{web.base}/m.wasm", "1" * 64, HTTP)
    assert message.endswith(f"sha256 mismatch: expected {'1' * 64}, got {MODULE_SHA}")


@pytest.mark.parametrize(("path", "expected"), [
    ("/big-declared", f"{LIMIT + 1} bytes is larger than the {LIMIT} byte limit"),
    ("/big-no-length", f"larger than the {LIMIT} byte limit"),
    ("/big-chunked", f"larger than the {LIMIT} byte limit"),
])
def test_http_too_large(web: Server, path: str, expected: str) -> None:
    message, took = failure(web.base + path, MODULE_SHA, HTTP)
    assert message == f"cannot fetch {web.base}{path}: {expected}"
    assert took < 2.0


def test_http_body_shorter_than_declared(web: Server) -> None:
    message, _ = failure(f"{web.base}/short-body", MODULE_SHA, HTTP)
    assert message.startswith(f"cannot fetch {web.base}/short-body: Connection broken: "
                              f"IncompleteRead(")


def test_http_slow_server_times_out(web: Server) -> None:
    config = StorageConfig(timeout_seconds=0.3, **LOOPBACK)
    message, took = failure(f"{web.base}/slow-headers", MODULE_SHA, config)
    assert message == f"cannot fetch {web.base}/slow-headers: timed out after 0.3s"
    assert took < 1.5


def test_http_trickling_body_hits_the_deadline(web: Server) -> None:
    # Every byte comes well within the per-read timeout; the whole body does not.
    config = StorageConfig(timeout_seconds=0.5, **LOOPBACK)
    message, took = failure(f"{web.base}/trickle", MODULE_SHA, config)
    assert message.startswith(f"cannot fetch {web.base}/trickle: timed out reading the body after ")
    assert took < 1.5


def test_unreachable_http_server_fails_fast() -> None:
    port = free_port()
    message, took = failure(f"http://127.0.0.1:{port}/m.wasm", MODULE_SHA, HTTP)
    assert message.startswith(f"cannot fetch http://127.0.0.1:{port}/m.wasm: connection failed: ")
    assert took < 2.0


def test_https_with_the_servers_ca(tls_web: tuple[Server, str]) -> None:
    server, ca = tls_web
    config = StorageConfig(ca_file=ca, timeout_seconds=2.0, **LOOPBACK)
    assert fetch(f"{server.base}/m.wasm", MODULE_SHA, config) == MODULE


def test_https_with_an_unknown_ca_is_refused(tls_web: tuple[Server, str]) -> None:
    server, _ = tls_web
    message, _ = failure(f"{server.base}/m.wasm", MODULE_SHA,
                         StorageConfig(timeout_seconds=2.0, **LOOPBACK))
    assert message.startswith(f"cannot fetch {server.base}/m.wasm: ")
    assert "CERTIFICATE_VERIFY_FAILED" in message


# ---- files ------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, StorageConfig]:
    """An allowed directory with a module in it, and a secret file next to it (not allowed)."""
    allowed = tmp_path / "fragments"
    allowed.mkdir()
    (allowed / "m.wasm").write_bytes(MODULE)
    secret = tmp_path / "secret.wasm"
    secret.write_bytes(MODULE)
    return allowed, secret, StorageConfig(allowed_file_dirs=(str(allowed),), max_bytes=LIMIT)


def test_file_inside_an_allowed_dir(files: tuple[Path, Path, StorageConfig]) -> None:
    allowed, _, config = files
    assert fetch(f"file://{allowed}/m.wasm", MODULE_SHA, config) == MODULE
    assert fetch(f"file://{allowed}/m.wasm", None, config) == MODULE  # sha256 optional here
    (allowed / "with space.wasm").write_bytes(MODULE)
    assert fetch(f"file://{allowed}/with%20space.wasm", MODULE_SHA, config) == MODULE
    inner = allowed / "link.wasm"
    inner.symlink_to(allowed / "m.wasm")
    assert fetch(f"file://{inner}", MODULE_SHA, config) == MODULE


def test_file_sha256_is_checked_when_given(files: tuple[Path, Path, StorageConfig]) -> None:
    allowed, _, config = files
    message, _ = failure(f"file://{allowed}/m.wasm", "2" * 64, config)
    assert message.endswith(f"sha256 mismatch: expected {'2' * 64}, got {MODULE_SHA}")


def test_file_outside_the_allowed_dirs(files: tuple[Path, Path, StorageConfig]) -> None:
    allowed, secret, config = files
    message, _ = failure(f"file://{secret}", None, config)
    assert message == (f"cannot fetch file://{secret}: {secret} is outside the allowed "
                       f"directories ({allowed})")


def test_file_traversal_with_dot_dot(files: tuple[Path, Path, StorageConfig]) -> None:
    allowed, secret, config = files
    url = f"file://{allowed}/../{secret.name}"
    message, _ = failure(url, None, config)
    assert message == (f"cannot fetch {url}: {secret} is outside the allowed directories "
                       f"({allowed})")
    encoded = f"file://{allowed}/%2e%2e/{secret.name}"
    message, _ = failure(encoded, None, config)
    assert "is outside the allowed directories" in message


def test_file_symlink_escaping(files: tuple[Path, Path, StorageConfig]) -> None:
    allowed, secret, config = files
    (allowed / "escape.wasm").symlink_to(secret)
    (allowed / "dir").symlink_to(secret.parent)
    for url in (f"file://{allowed}/escape.wasm", f"file://{allowed}/dir/{secret.name}"):
        message, _ = failure(url, None, config)
        assert message == (f"cannot fetch {url}: {secret} is outside the allowed directories "
                           f"({allowed})")


def test_an_allowed_dir_that_is_a_prefix_of_another_name(tmp_path: Path) -> None:
    (tmp_path / "frag").mkdir()
    (tmp_path / "fragments-evil").mkdir()
    (tmp_path / "fragments-evil" / "m.wasm").write_bytes(MODULE)
    config = StorageConfig(allowed_file_dirs=(str(tmp_path / "frag"),))
    message, _ = failure(f"file://{tmp_path}/fragments-evil/m.wasm", None, config)
    assert "is outside the allowed directories" in message


def test_file_missing_too_large_or_not_regular(files: tuple[Path, Path, StorageConfig]) -> None:
    allowed, _, config = files
    message, _ = failure(f"file://{allowed}/absent.wasm", None, config)
    assert message == f"cannot fetch file://{allowed}/absent.wasm: {allowed}/absent.wasm does " \
                      f"not exist"
    (allowed / "big.wasm").write_bytes(b"\0" * (LIMIT + 1))
    message, _ = failure(f"file://{allowed}/big.wasm", None, config)
    assert message.endswith(f"{LIMIT + 1} bytes is larger than the {LIMIT} byte limit")
    message, _ = failure(f"file://{allowed}", None, config)
    assert message == f"cannot fetch file://{allowed}: {allowed} is not a regular file"
    os.mkfifo(allowed / "pipe.wasm")  # opening a FIFO for reading must not block
    message, took = failure(f"file://{allowed}/pipe.wasm", None, config)
    assert message.endswith("pipe.wasm is not a regular file") and took < 1.0


def test_file_urls_need_an_allowed_dir_and_a_local_path(tmp_path: Path) -> None:
    message, _ = failure(f"file://{tmp_path}/m.wasm", None, StorageConfig())
    assert message == (f"cannot fetch file://{tmp_path}/m.wasm: file:// URLs are not allowed "
                       f"(no allowed directories are configured)")
    config = StorageConfig(allowed_file_dirs=(str(tmp_path),))
    message, _ = failure(f"file://otherhost{tmp_path}/m.wasm", None, config)
    assert message.endswith("a file URL must be file:///<absolute path>")
