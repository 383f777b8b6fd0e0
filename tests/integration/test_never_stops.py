"""The scheduler never stops scheduling: one bad pod or one slow fragment must not stall, blind or
kill the control loop. Each test is a way a scheduler could silently stop doing its job.

Against the embedded cluster over real HTTPS, with the scheduler in-process (its event loop on a
thread of its own, as in production) or as a real ``pyscheduler run`` process where signals and
exit codes are what is tested.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.pipeline import Pipeline, Profile
from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler.wasm.resource import GROUP, PLURAL, VERSION
from tests.conftest import SchedulerThread, install_crd, wait_for
from tests.integration.test_fragments import uniform_wat, wat_bytes

pytest.importorskip("wasmtime")

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "fragments" / "hostile"
SCHEDULER = "steady"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="node", count=3, cpu="8", memory="16Gi")],
                       pod_start_seconds=0.05, lease_renew_seconds=5)
    with BackgroundCluster(spec, tmp_path_factory.mktemp("steady")) as c:
        install_crd(c.kubeconfig)
        yield c


@pytest.fixture(scope="module")
def core(sim: BackgroundCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


@pytest.fixture(scope="module")
def custom(sim: BackgroundCluster) -> client.CustomObjectsApi:
    api = client.CustomObjectsApi(config.new_client_from_config(config_file=str(sim.kubeconfig)))
    wait_for(lambda: api.list_cluster_custom_object(GROUP, VERSION, PLURAL) is not None,
             what="the CRD to be served")
    return api


@pytest.fixture(scope="module")
def coordination(sim: BackgroundCluster) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(config.new_client_from_config(
        config_file=str(sim.kubeconfig)))


@pytest.fixture
def ns(core: client.CoreV1Api) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path


def scheduler(sim: BackgroundCluster, store: Path, **settings: Any) -> SchedulerThread:
    config_: dict[str, Any] = {
        "schedulerName": SCHEDULER, "leaderElection": {"enabled": False},
        "podInitialBackoffSeconds": 0.2, "podMaxBackoffSeconds": 0.5, "seed": 1,
        "storage": {"allowedFileDirs": [str(store)]}}
    config_.update(settings)
    return SchedulerThread(sim.kubeconfig, **config_)


def pod(name: str, fragment: str | None = None, cpu: str = "100m") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if fragment is not None:
        meta["annotations"] = {"wssp/schedulefragment": fragment}
    return {"metadata": meta, "spec": {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def resource(custom: client.CustomObjectsApi, store: Path, name: str, wasm: bytes,
             **spec: Any) -> None:
    path = store / f"{name}.wasm"
    path.write_bytes(wasm)
    stages = spec.pop("stages", {"filter": {"mode": "replace"}})
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
        "metadata": {"name": name},
        "spec": {"url": f"file://{path}", "stages": stages, **spec}})


def status(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return dict(custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name).get("status")
                or {})


def bound(core: client.CoreV1Api, ns: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(ns).items if p.spec.node_name}


def condition(core: client.CoreV1Api, ns: str, name: str) -> tuple[str, str] | None:
    for c in core.read_namespaced_pod(name, ns).status.conditions or ():
        if c.type == "PodScheduled" and c.status == "False":
            return str(c.reason), str(c.message)
    return None


def events(core: client.CoreV1Api, ns: str, name: str, reason: str) -> list[str]:
    return [e.message for e in core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name}").items if e.reason == reason]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def looping_fragment(s: SchedulerThread, custom: client.CustomObjectsApi, store: Path,
                     name: str, **spec: Any) -> Any:
    """A Ready resource serving infinite-loop.wasm, each call running to the longest deadline
    a resource may set (1 s); returns its ``Fragment``."""
    resource(custom, store, name, (HOSTILE / "infinite-loop.wasm").read_bytes(),
             limits={"timeoutMilliseconds": 1000, "fuel": 2**62}, **spec)
    wait_for(lambda: status(custom, name).get("phase") == "Ready", what=f"{name} Ready")
    return s.call(lambda: s.app.fragments.entries[name].serving.fragment)


def health_url(s: SchedulerThread, path: str) -> str:
    return f"http://127.0.0.1:{s.app.health.port}{path}"


# -- one bad pod --------------------------------------------------------------------------------

def test_a_pod_asking_more_than_can_be_counted_is_its_own_problem(
        sim: BackgroundCluster, core: client.CoreV1Api, ns: str, store: Path) -> None:
    """cpu 10000000000000000 overflowed the node table's int64 request vector and ended the
    scheduling loop while the process stayed healthy and leading."""
    s = scheduler(sim, store).start()
    try:
        core.create_namespaced_pod(ns, pod("huge", cpu="10000000000000000"))
        core.create_namespaced_pod(ns, pod("after"))
        wait_for(lambda: "after" in bound(core, ns), what="the next pod to bind")
        reason, message = wait_for(lambda: condition(core, ns, "huge"),
                                   what="the huge pod's condition")
        assert reason == "Unschedulable"
        assert "the pod requests 10000000000000000000m cpu in all, more than the scheduler " \
               "can count" in message
        wait_for(lambda: events(core, ns, "huge", "FailedScheduling"), what="the event")
        assert get(health_url(s, "/readyz"))[0] == 200
        core.create_namespaced_pod(ns, pod("later"))
        wait_for(lambda: "later" in bound(core, ns), what="scheduling to go on")
    finally:
        s.stop()


class Boom:
    """A filter plugin with a bug that shows for pods labelled ``boom``."""

    name = "Boom"

    def filter(self, ctx: CycleContext) -> FilterResult:
        if ctx.pod.labels.get("boom"):
            raise RuntimeError("the plugin tripped over this pod")
        return FilterResult.all_pass()


def test_a_fault_during_one_attempt_is_reported_on_that_pod(
        sim: BackgroundCluster, core: client.CoreV1Api, ns: str, store: Path) -> None:
    s = scheduler(sim, store, scheduleFragment=None).start()
    try:
        def add_boom() -> None:
            profile = s.app.scheduler.pipeline.profile
            s.app.scheduler.pipeline = Pipeline(Profile(
                profile.name, (*profile.filters, Boom()), profile.scores), seed=1)
        s.call(add_boom)
        bad = pod("bad")
        bad["metadata"]["labels"] = {"boom": "yes"}
        core.create_namespaced_pod(ns, bad)
        core.create_namespaced_pod(ns, pod("good"))
        wait_for(lambda: "good" in bound(core, ns), what="the good pod to bind")
        reason, message = wait_for(lambda: condition(core, ns, "bad"), what="the condition")
        assert reason == "SchedulerError"
        assert message == "scheduling failed: RuntimeError: the plugin tripped over this pod"
        wait_for(lambda: events(core, ns, "bad", "FailedScheduling"), what="the event")
        # It is retried (with backoff), and keeps failing visibly rather than silently.
        attempts = s.app.metrics.schedule_attempts.labels("error", SCHEDULER)
        wait_for(lambda: attempts._value.get() >= 2, what="a retry")
    finally:
        s.stop()


# -- a core task that dies takes readiness and leadership with it ------------------------------

CORE_TASKS = ["informer nodes", "informer pods", "informer namespaces", "fragments informer",
              "leader election", "scheduling loop", "housekeeping", "event recorder"]


class Running:
    """``SchedulerApp.run_until`` on the scheduler's thread, as ``pyscheduler run`` runs it."""

    def __init__(self, s: SchedulerThread) -> None:
        from pyscheduler.kube.client import KubeClient
        from pyscheduler.runner import SchedulerApp

        self.s = s
        self.stop = asyncio.Event()
        s.thread.start()

        async def run() -> int:
            s.client = await KubeClient.from_kubeconfig(str(s.kubeconfig))
            s.app = SchedulerApp(s.config, s.client)
            try:
                return await s.app.run_until(self.stop)
            finally:
                await s.client.close()
        self.outcome = asyncio.run_coroutine_threadsafe(run(), s.loop)

    def request_stop(self) -> None:
        self.s.loop.call_soon_threadsafe(self.stop.set)

    def close(self) -> None:
        if not self.outcome.done():
            self.request_stop()
            self.outcome.result(30)
        self.s.loop.call_soon_threadsafe(self.s.loop.stop)
        self.s.thread.join(10)


def electing(sim: BackgroundCluster, store: Path, lease: str) -> SchedulerThread:
    return scheduler(sim, store, leaderElection={
        "enabled": True, "leaseName": lease, "leaseNamespace": "default", "identity": "me",
        "leaseDurationSeconds": 4, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 0.5})


def holder(coordination: client.CoordinationV1Api, lease: str) -> str | None:
    value: str | None = coordination.read_namespaced_lease(lease, "default") \
        .spec.holder_identity
    return value


@pytest.mark.parametrize("victim", CORE_TASKS)
def test_a_core_task_that_ends_stops_the_process_being_ready_and_leading(
        sim: BackgroundCluster, coordination: client.CoordinationV1Api, store: Path,
        victim: str) -> None:
    lease = f"core-{uuid.uuid4().hex[:6]}"
    s = electing(sim, store, lease)
    running = Running(s)
    try:
        wait_for(lambda: s.app is not None and s.call(lambda: s.app.leading)
                 and victim in s.call(lambda: s.app.supervisor.watched)
                 and holder(coordination, lease) == "me", timeout=20,
                 what="the scheduler leading with every task watched")
        assert get(health_url(s, "/readyz"))[0] == 200
        s.call(lambda: s.app.supervisor.watched[victim].cancel())
        assert running.outcome.result(30) == 1
        assert s.app.supervisor.failure == (victim, "cancelled")
        assert not s.app.health._readiness["core-tasks"]()
        assert not s.app.health._liveness["core-tasks"]()
        assert not holder(coordination, lease)  # released: a standby takes over at once
    finally:
        running.close()


def test_stopping_with_a_fragment_call_in_flight_releases_the_lease(
        sim: BackgroundCluster, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        coordination: client.CoordinationV1Api, ns: str, store: Path) -> None:
    lease = f"stop-{uuid.uuid4().hex[:6]}"
    s = electing(sim, store, lease)
    running = Running(s)
    try:
        wait_for(lambda: s.app is not None and s.call(lambda: s.app.leading), timeout=20,
                 what="leading")
        fragment = looping_fragment(s, custom, store, "stuck-v1.0.0")
        for i in range(3):
            core.create_namespaced_pod(ns, pod(f"stuck-{i}", "stuck-v1.0.0"))
        wait_for(lambda: fragment.waiting > 0, what="a call in flight")
        running.request_stop()
        assert running.outcome.result(30) == 0
        assert not holder(coordination, lease)
    finally:
        running.close()


def test_health_endpoints_fail_once_a_core_task_ended(
        sim: BackgroundCluster, store: Path) -> None:
    s = scheduler(sim, store).start()
    try:
        assert get(health_url(s, "/livez"))[0] == 200
        s.call(lambda: s.app.supervisor.watched["informer pods"].cancel())
        wait_for(lambda: get(health_url(s, "/readyz"))[0] == 503, what="/readyz to fail")
        code, body = get(health_url(s, "/livez?verbose"))
        assert code == 503 and "[-]core-tasks failed" in body
    finally:
        s.stop()


# -- a slow fragment hurts only its own pods ----------------------------------------------------

def test_a_slow_fragment_delays_only_the_pods_naming_it_and_never_the_lease(
        sim: BackgroundCluster, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        coordination: client.CoordinationV1Api, ns: str, store: Path) -> None:
    """Each call of infinite-loop.wasm runs to the longest deadline a resource may set (1 s).
    Before, such calls ran on the event loop: six in a row cost the leader its Lease (renew
    deadline 3 s), and every other pod waited behind them."""
    lease = f"slow-{uuid.uuid4().hex[:6]}"
    s = electing(sim, store, lease).start()
    try:
        wait_for(lambda: s.call(lambda: s.app.leading), what="leading")
        fragment = looping_fragment(s, custom, store, "slow-v1.0.0", failurePolicy="Ignore")
        for i in range(6):
            core.create_namespaced_pod(ns, pod(f"slow-{i}", "slow-v1.0.0"))
        wait_for(lambda: fragment.waiting > 0, what="the first slow call")
        # The loop answers health checks while a call is in flight...
        assert get(health_url(s, "/healthz"))[0] == 200
        for i in range(10):
            core.create_namespaced_pod(ns, pod(f"plain-{i}"))
        # ... and schedules pods that do not name the fragment before it is through with the
        # first few pods that do.
        wait_for(lambda: {f"plain-{i}" for i in range(10)} <= bound(core, ns),
                 what="the plain pods")
        assert fragment.stats.calls <= 3, fragment.stats.calls
        # Policy Ignore: the slow pods are placed too, each after its call timed out (or, once
        # the fragment is quarantined after five timeouts, at once).
        wait_for(lambda: {f"slow-{i}" for i in range(6)} <= bound(core, ns), timeout=30,
                 what="the slow pods")
        assert s.app.elector.losses == 0 and s.call(lambda: s.app.leading)
        assert holder(coordination, lease) == "me"
    finally:
        s.stop()


def test_a_fragment_that_keeps_failing_is_quarantined_visibly(
        sim: BackgroundCluster, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        ns: str, store: Path) -> None:
    s = scheduler(sim, store, fragments={"quarantineAfterFailures": 3,
                                         "quarantineSeconds": 60}).start()
    try:
        resource(custom, store, "traps-v1.0.0", wat_bytes(uniform_wat(trap_in="filter")),
                 failurePolicy="Fail")
        wait_for(lambda: status(custom, "traps-v1.0.0").get("phase") == "Ready",
                 what="the fragment")
        for i in range(5):
            core.create_namespaced_pod(ns, pod(f"p{i}", "traps-v1.0.0"))
        st = wait_for(lambda: (st := status(custom, "traps-v1.0.0")).get("phase")
                      == "Quarantined" and st, what="the quarantine")
        assert st["message"].startswith("3 consecutive failed calls (last: trap: ")
        assert st["nextAttemptAt"] and st["conditions"][0]["reason"] == "Quarantined"
        fragment = s.call(lambda: s.app.fragments.entries["traps-v1.0.0"].serving.fragment)
        calls = fragment.stats.calls
        assert calls == 3
        # Waiting pods say why, and the fragment is not called while quarantined.
        wait_for(lambda: any("quarantined after 3 consecutive failed calls" in m
                             for i in range(5)
                             for m in events(core, ns, f"p{i}", "FailedScheduling")),
                 what="an event naming the quarantine")
        time.sleep(1.5)  # several backoff rounds of the five pods
        assert fragment.stats.calls == calls
        assert s.app.metrics.fragment_quarantined.labels("traps-v1.0.0")._value.get() == 1
        refused = s.app.metrics.fragment_calls.labels("traps-v1.0.0", "filter", "quarantined")
        assert refused._value.get() >= 2
        assert not bound(core, ns)
    finally:
        s.stop()


# -- loads that fail, fail at once and visibly --------------------------------------------------

def test_a_looping_wssp_init_fails_its_load_without_holding_up_scheduling(
        sim: BackgroundCluster, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        ns: str, store: Path) -> None:
    s = scheduler(sim, store).start()
    try:
        # Fuel enough for the instantiation deadline (2 s) to end it, not fuel.
        resource(custom, store, "init-loops-v1.0.0",
                 (HOSTILE / "init-loops.wasm").read_bytes(), limits={"fuel": 2**62})
        wait_for(lambda: s.call(lambda: s.app.fragments.status().get("init-loops-v1.0.0",
                                                                        ("",))[0] == "Loading"),
                 what="the load to start")
        for i in range(5):
            core.create_namespaced_pod(ns, pod(f"plain-{i}"))
        wait_for(lambda: len(bound(core, ns)) == 5, what="the plain pods")
        assert s.call(lambda: s.app.fragments.status()["init-loops-v1.0.0"][0]) == "Loading"
        st = wait_for(lambda: (st := status(custom, "init-loops-v1.0.0")).get("phase")
                      == "Failed" and st, what="the load to fail")
        assert "wssp_init failed: deadline exceeded" in st["message"]
        assert st.get("nextAttemptAt") is None  # a module that does not load is not retried
    finally:
        s.stop()


def test_unreachable_object_storage_is_failed_at_once_and_retried(
        sim: BackgroundCluster, custom: client.CustomObjectsApi, store: Path) -> None:
    s = scheduler(sim, store, storage={"endpoint": "storage.invalid:9000"})

    def quick_retries() -> None:
        s.app.fragments.fetch_retry_seconds = (0.5, 1.0)
    start = time.monotonic()
    s.start()
    try:
        s.call(quick_retries)
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
            "metadata": {"name": "remote-v1.0.0"},
            "spec": {"url": "s3://fragments/remote.wasm", "sha256": "a" * 64,
                     "stages": {"filter": {"mode": "replace"}}}})
        st = wait_for(lambda: (st := status(custom, "remote-v1.0.0")).get("phase") == "Failed"
                      and st, what="Failed")
        assert st["message"].startswith("cannot fetch s3://fragments/remote.wasm: ")
        assert "retrying at " in st["message"] and st["nextAttemptAt"]
        assert time.monotonic() - start < 30  # well before any client-side retry storm ends
        failures = s.app.metrics.fragment_loads.labels("remote-v1.0.0", "failure")
        wait_for(lambda: failures._value.get() >= 3, what="the fetch to be retried")
    finally:
        s.stop()


def test_a_missing_crd_is_reported_once_and_picked_up_when_installed(
        tmp_path: Path, capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pyscheduler.wasm import manager

    monkeypatch.setattr(manager, "CRD_CHECK_SECONDS", 0.5)
    spec = ClusterSpec(pools=[PoolSpec(name="node", count=1, cpu="4", memory="8Gi")])
    with BackgroundCluster(spec, tmp_path / "bare") as bare:
        s = scheduler(bare, tmp_path).start()
        try:
            time.sleep(2.0)
            out = capfd.readouterr()
            text = out.out + out.err
            assert text.count("WsspSchedulerConfiguration CRD not installed") == 1
            assert "kubectl apply -f manifests/crd-wsspschedulerconfiguration.yaml" in text
            # No raw 404 leaks into the report (a bare "404" in a port or a revision is fine).
            assert not re.search(r"(?<![\w.:=/-])404(?!\w)", text), text
            assert "NotFound" not in text and "Not Found" not in text
            install_crd(bare.kubeconfig)
            wait_for(lambda: s.call(lambda: s.app.fragments.crd_installed), timeout=15,
                     what="the CRD to be noticed")
            watched = s.call(lambda: s.app.supervisor.watched)
            assert "fragments informer" in watched and "fragments CRD check" not in watched
            assert s.call(lambda: s.app.supervisor.failure) is None
        finally:
            s.stop()


def test_a_resource_asking_for_a_longer_deadline_than_allowed_is_refused(
        sim: BackgroundCluster, custom: client.CustomObjectsApi, store: Path) -> None:
    s = scheduler(sim, store, fragments={"maxTimeoutMilliseconds": 300}).start()
    try:
        resource(custom, store, "greedy-v1.0.0", wat_bytes(uniform_wat()),
                 limits={"timeoutMilliseconds": 900})
        st = wait_for(lambda: (st := status(custom, "greedy-v1.0.0")).get("phase") == "Failed"
                      and st, what="Failed")
        assert st["message"] == ("spec.limits.timeoutMilliseconds: 900 is more than this "
                                 "scheduler allows (fragments.maxTimeoutMilliseconds: 300)")
    finally:
        s.stop()


# -- fragment URLs reach only what the operator allowed -----------------------------------------

class Recorder:
    """A web server on loopback that counts the requests it gets and redirects /redir."""

    def __init__(self) -> None:
        import http.server

        recorder = self
        self.requests: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                recorder.requests.append(self.path)
                if self.path == "/redir":
                    self.send_response(302)
                    self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}"
                                                 "/secret")
                    self.end_headers()
                    return
                body = b"the metadata service's secrets"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(("storage", "expected"), [
    pytest.param({}, "host 127.0.0.1:{port} is not in storage.allowedHttpHosts (no request was "
                     "made)", id="host not allowed"),
    pytest.param({"allowedHttpHosts": ["127.0.0.1"]},
                 "127.0.0.1 resolves to 127.0.0.1, which is not a public address (loopback, "
                 "private, link-local and reserved addresses need storage.allowPrivateAddresses:"
                 " true; no request was made)", id="loopback not allowed"),
    pytest.param({"allowedHttpHosts": ["127.0.0.1:{port}"], "allowPrivateAddresses": True},
                 "HTTP 302: redirects are not followed (give the resource the module's final "
                 "URL)", id="redirect not followed"),
])
def test_fragment_urls_reach_only_allowed_hosts(
        sim: BackgroundCluster, custom: client.CustomObjectsApi, store: Path,
        storage: dict[str, Any], expected: str) -> None:
    web = Recorder()
    storage = {k: [h.format(port=web.port) for h in v] if isinstance(v, list) else v
               for k, v in storage.items()}
    s = scheduler(sim, store, storage=storage).start()
    name = f"probe{uuid.uuid4().hex[:6]}-v1.0.0"
    try:
        url = f"http://127.0.0.1:{web.port}/redir"
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
            "metadata": {"name": name},
            "spec": {"url": url, "sha256": hashlib.sha256(b"x").hexdigest(),
                     "stages": {"filter": {"mode": "replace"}}}})
        st = wait_for(lambda: (st := status(custom, name)).get("phase") == "Failed" and st,
                      what="Failed")
        assert st["message"].startswith(f"cannot fetch {url}: "
                                        f"{expected.format(port=web.port)}")
        assert "secret" not in st["message"]
        # A refusal by configuration is not retried: nothing can change until the resource or
        # the configuration does.
        assert st.get("nextAttemptAt") is None and "retrying at" not in st["message"]
        # The redirect's target was never asked for; a refused host was never contacted.
        assert web.requests == (["/redir"] if storage.get("allowPrivateAddresses") else [])
    finally:
        s.stop()
        web.close()
