"""End-to-end tests: pyscheduler as installed in a cluster, seen only through the Kubernetes API
and its metrics endpoint.

The suite runs against whatever cluster ``E2E_KUBECONFIG`` names, where pyscheduler already runs:

* ``hack/kind-e2e.sh`` — a kind cluster with the container image and ``manifests/`` applied;
* ``tests/packaging/test_image.py`` — the embedded cluster with the built wheel installed in a
  fresh virtual environment and started as the image starts it.

It is collected only when asked for by path (``pytest tests/e2e``); a plain ``pytest`` at the
top of the repository leaves it out, since ``test_image.py`` already runs it. Without
``E2E_KUBECONFIG`` every test is skipped, saying so.

Environment (only ``E2E_KUBECONFIG`` is required):

* ``E2E_KUBECONFIG``: kubeconfig of the cluster (its current context is used).
* ``E2E_NAMESPACE``: the namespace pyscheduler runs in. Its pods (``E2E_SCHEDULER_SELECTOR``,
  default ``app.kubernetes.io/name=pyscheduler,app.kubernetes.io/component=scheduler``) must be
  Ready, read-only and non-root, and the Lease holder one of them. Unset: not checked.
* ``E2E_METRICS_URL``: base URL of the leader's metrics endpoint (``http://127.0.0.1:10259``).
  Unset: the health and metrics tests are skipped.
* ``E2E_SCHEDULER_NAME``: ``spec.schedulerName`` of the test pods (default ``pyscheduler``).
* ``E2E_LEASE_NAME``, ``E2E_LEASE_NAMESPACE``: the leader-election Lease (default: named as the
  scheduler, looked up in every namespace).
* ``E2E_DEFAULT_FRAGMENT``: the packaged fragment the scheduler is configured with (default
  ``default-v1.0.0``; empty: none is expected).
* ``E2E_FRAGMENT_DIR``: a directory this suite writes fragments to and the scheduler reads
  ``file://`` URLs from (its ``storage.allowedFileDirs``); or
* ``E2E_S3_ENDPOINT`` (host:port), ``E2E_S3_ACCESS_KEY``, ``E2E_S3_SECRET_KEY``, ``E2E_S3_BUCKET``
  (default ``fragments``), ``E2E_S3_SECURE`` (``true`` for https): the S3/MinIO storage the
  scheduler's ``storage`` section names, as this suite reaches it. Neither: the fragment test is
  skipped.
* ``E2E_POD_IMAGE``: image of the test pods (default ``registry.k8s.io/pause:3.10``).
* ``E2E_TIMEOUT_SECONDS``: bound of every wait (default 120).

Every object the suite creates lives in a namespace of its own (``e2e-<random>``), deleted at the
end; the fragment resources (cluster-scoped) are deleted by the test that creates them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

HERE = Path(__file__).resolve().parent
T = TypeVar("T")


def _asked_for(cfg: pytest.Config) -> bool:
    """Whether a path given to pytest is this directory, inside it, or a test file of it."""
    base = Path(cfg.invocation_params.dir)
    for arg in cfg.args:
        path = Path(str(arg).split("::", 1)[0])
        path = (path if path.is_absolute() else base / path).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name != "conftest.py" and not _asked_for(config):
        return True
    return None


@dataclass(frozen=True)
class S3Target:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    secure: bool


@dataclass(frozen=True)
class E2EConfig:
    kubeconfig: str
    scheduler_name: str
    scheduler_namespace: str | None
    scheduler_selector: str
    metrics_url: str | None
    lease_name: str
    lease_namespace: str | None
    default_fragment: str | None
    fragment_dir: Path | None
    s3: S3Target | None
    pod_image: str
    timeout: float


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def load_e2e_config() -> E2EConfig | None:
    """The suite's settings from the environment; None without ``E2E_KUBECONFIG``. A bad value
    is a usage error naming the variable."""
    kubeconfig = _env("E2E_KUBECONFIG")
    if kubeconfig is None:
        return None
    if not Path(kubeconfig).is_file():
        raise pytest.UsageError(f"E2E_KUBECONFIG={kubeconfig}: no such file")
    raw_timeout = _env("E2E_TIMEOUT_SECONDS") or "120"
    try:
        timeout = float(raw_timeout)
    except ValueError:
        timeout = -1.0
    if not 0 < timeout < 3600:
        raise pytest.UsageError(f"E2E_TIMEOUT_SECONDS={raw_timeout}: must be a number of "
                                f"seconds between 0 and 3600")
    metrics_url = _env("E2E_METRICS_URL")
    if metrics_url is not None and not metrics_url.startswith(("http://", "https://")):
        raise pytest.UsageError(f"E2E_METRICS_URL={metrics_url}: must start with http:// or "
                                f"https://")
    fragment_dir = _env("E2E_FRAGMENT_DIR")
    if fragment_dir is not None and not Path(fragment_dir).is_dir():
        raise pytest.UsageError(f"E2E_FRAGMENT_DIR={fragment_dir}: not a directory")
    s3 = None
    endpoint = _env("E2E_S3_ENDPOINT")
    if endpoint is not None:
        access, secret = _env("E2E_S3_ACCESS_KEY"), _env("E2E_S3_SECRET_KEY")
        if access is None or secret is None:
            raise pytest.UsageError("E2E_S3_ENDPOINT is set: E2E_S3_ACCESS_KEY and "
                                    "E2E_S3_SECRET_KEY are needed too")
        secure = (_env("E2E_S3_SECURE") or "false").lower()
        if secure not in ("true", "false"):
            raise pytest.UsageError(f"E2E_S3_SECURE={secure}: must be true or false")
        s3 = S3Target(endpoint, access, secret, _env("E2E_S3_BUCKET") or "fragments",
                      secure == "true")
    scheduler_name = _env("E2E_SCHEDULER_NAME") or "pyscheduler"
    default_fragment = os.environ.get("E2E_DEFAULT_FRAGMENT", "default-v1.0.0").strip()
    return E2EConfig(
        kubeconfig=kubeconfig, scheduler_name=scheduler_name,
        scheduler_namespace=_env("E2E_NAMESPACE"),
        scheduler_selector=_env("E2E_SCHEDULER_SELECTOR")
        or "app.kubernetes.io/name=pyscheduler,app.kubernetes.io/component=scheduler",
        metrics_url=metrics_url,
        lease_name=_env("E2E_LEASE_NAME") or scheduler_name,
        lease_namespace=_env("E2E_LEASE_NAMESPACE"),
        default_fragment=default_fragment or None,
        fragment_dir=Path(fragment_dir) if fragment_dir else None, s3=s3,
        pod_image=_env("E2E_POD_IMAGE") or "registry.k8s.io/pause:3.10", timeout=timeout)


@pytest.fixture(scope="session")
def e2e() -> E2EConfig:
    settings = load_e2e_config()
    if settings is None:
        pytest.skip("E2E_KUBECONFIG is not set: the end-to-end suite needs a cluster running "
                    "pyscheduler (hack/kind-e2e.sh, or tests/packaging/test_image.py)")
    return settings


@pytest.fixture(autouse=True)
def _needs_a_cluster(e2e: E2EConfig) -> None:
    """Every test here needs the cluster: without one they are all skipped with the reason."""


@pytest.fixture(scope="session")
def api(e2e: E2EConfig) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=e2e.kubeconfig)
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture(scope="session")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="session")
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)


@pytest.fixture(scope="session")
def namespace(core: client.CoreV1Api, e2e: E2EConfig) -> Iterator[str]:
    """A namespace for this run's objects, deleted (with them) at the end."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"pyscheduler.io/e2e": "true"}}})
    try:
        # Pods are admitted only once the namespace's default ServiceAccount exists; a cluster
        # creates it shortly after the namespace, a minimal API server may not at all.
        try:
            core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def wait_for(predicate: Callable[[], T | None], *, timeout: float, what: str,
             interval: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something truthy and return that; fail naming
    ``what`` (and the last value seen) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} "
                                 f"(last seen: {last!r})")
        time.sleep(interval)


def pause_pod(name: str, e2e: E2EConfig, *, cpu: str = "10m", memory: str = "16Mi",
              annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod that asks for pyscheduler and does nothing."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name},
                     "annotations": annotations or {}},
        "spec": {
            "schedulerName": e2e.scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "containers": [{"name": "pause", "image": e2e.pod_image,
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
    }


def pod_condition(pod: Any, kind: str) -> Any | None:
    for condition in (pod.status.conditions or []) if pod.status else []:
        if condition.type == kind:
            return condition
    return None


def events_for(core: client.CoreV1Api, namespace: str, name: str,
               reason: str | None = None) -> list[Any]:
    """The core/v1 events about the object ``name`` (events.k8s.io writes show here too)."""
    selector = f"involvedObject.name={name}"
    if reason is not None:
        selector += f",reason={reason}"
    return list(core.list_namespaced_event(namespace, field_selector=selector).items)


def reporter(event: Any) -> str:
    """Who wrote an event: ``reportingComponent`` (events.k8s.io's ``reportingController``),
    else the legacy ``source.component``."""
    return str(event.reporting_component or (event.source.component if event.source else "")
               or "")
