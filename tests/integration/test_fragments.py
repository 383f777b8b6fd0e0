"""Fragments in the running scheduler, over real HTTPS against the embedded cluster: per-pod
selection, missing fragments, version following, status, failure policies, hostile modules,
shadow mode, and the packaged default."""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler.wasm.resource import CRD_PATH, GROUP, PLURAL, VERSION
from tests.fragment_cluster import served
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for
from tests.wat import ALLOC_WAT

wasmtime = pytest.importorskip("wasmtime")

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "fragments" / "hostile"
SCHEDULER = "frag-sched"
NODES = 3




def uniform_wat(*, verdict: int = 0, reason: str = "rejected", score: int = 50,
                trap_in: str = "", keep_parity: int | None = None) -> str:
    """A fragment answering the same for every node: ``verdict`` (0 feasible, 1 ``reason``)
    and ``score``; ``trap_in`` names a stage that executes ``unreachable``. With
    ``keep_parity`` (0 or 1) only rows of that parity are feasible."""
    reason_bytes = reason.encode()
    trap = {"filter": "", "score": ""}
    if trap_in:
        trap[trap_in] = "(unreachable)"
    verdict_expr = f"(i32.const {verdict})" if keep_parity is None else (
        f"(i32.ne (i32.and (local.get $i) (i32.const 1)) (i32.const {keep_parity}))")
    return f"""
(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 16) "{reason}")
  (func (export "wssp_abi_v1") (result i32) (i32.const 0))
{ALLOC_WAT}  (func (export "wssp_init") (param $ctx i32) (param i32 i32) (result i32)
    (i32.store offset=128 (local.get $ctx) (i32.const 16))
    (i32.store offset=132 (local.get $ctx) (i32.const {len(reason_bytes)}))
    (i32.const 0))
  (func (export "wssp_filter") (param $ctx i32) (result i32)
    (local $i i32)
    {trap["filter"]}
    (block $done (loop $rows
      (br_if $done (i32.ge_u (local.get $i) (i32.load offset=8 (local.get $ctx))))
      (i32.store16 (i32.add (i32.load offset=80 (local.get $ctx))
                            (i32.shl (local.get $i) (i32.const 1))) {verdict_expr})
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $rows)))
    (i32.const 0))
  (func (export "wssp_score") (param $ctx i32) (result i32)
    (local $i i32)
    {trap["score"]}
    (block $done (loop $rows
      (br_if $done (i32.ge_u (local.get $i) (i32.load offset=8 (local.get $ctx))))
      (i64.store (i32.add (i32.load offset=84 (local.get $ctx))
                          (i32.shl (local.get $i) (i32.const 3))) (i64.const {score}))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $rows)))
    (i32.const 0))
)"""


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="node", count=NODES, cpu="4", memory="8Gi")],
                       pod_start_seconds=0.05, lease_renew_seconds=5)
    with open_cluster(request, spec, tmp_path_factory.mktemp("frag")) as c:
        crd = yaml.safe_load(CRD_PATH.read_text())
        api = client.ApiextensionsV1Api(config.new_client_from_config(
            config_file=str(c.kubeconfig)))
        api.create_custom_resource_definition(crd)
        yield c


@pytest.fixture(scope="module")
def api(sim: AnyCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(sim.kubeconfig))


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    api_ = client.CustomObjectsApi(api)
    wait_for(lambda: served(api_), what="the CRD to be served")
    return api_


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fragments")


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster, store: Path, custom: client.CustomObjectsApi,
              moto_s3: Any) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, schedulerName=SCHEDULER,
                        leaderElection={"enabled": False}, podInitialBackoffSeconds=0.2,
                        podMaxBackoffSeconds=0.5, seed=1,
                        storage={"allowedFileDirs": [str(store)], "endpoint": moto_s3.endpoint,
                                 "accessKey": moto_s3.access_key,
                                 "secretKey": moto_s3.secret_key,
                                 "region": moto_s3.region}).start()
    yield s
    s.stop()


@pytest.fixture
def ns(core: client.CoreV1Api, request: pytest.FixtureRequest) -> str:
    name = "f-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    core.create_namespace({"metadata": {"name": name}})
    return name


def publish(custom: client.CustomObjectsApi, store: Path, resource: str, wasm: bytes,
            **spec: Any) -> None:
    path = store / f"{resource}.wasm"
    path.write_bytes(wasm)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
            "metadata": {"name": resource},
            "spec": {"url": f"file://{path}", "stages": {"filter": {"mode": "replace"},
                                                         "score": {"mode": "replace"}},
                     **spec}}
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)


def status(custom: client.CustomObjectsApi, resource: str) -> dict[str, Any]:
    obj = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, resource)
    return dict(obj.get("status") or {})


def make_pod(core: client.CoreV1Api, ns: str, name: str, fragment: str | None = None,
             cpu: str = "100m") -> None:
    meta: dict[str, Any] = {"name": name}
    if fragment is not None:
        meta["annotations"] = {"wssp/schedulefragment": fragment}
    core.create_namespaced_pod(ns, {"metadata": meta, "spec": {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}})


def node_of(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    node: str | None = core.read_namespaced_pod(name, ns).spec.node_name
    return node


def condition(core: client.CoreV1Api, ns: str, name: str) -> tuple[str, str] | None:
    for c in core.read_namespaced_pod(name, ns).status.conditions or ():
        if c.type == "PodScheduled" and c.status == "False":
            return c.reason, c.message
    return None


def test_a_pod_selecting_a_fragment_is_placed_by_it(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "reject-all-v1.0.0",
            wat_bytes(uniform_wat(verdict=1, reason="node(s) are not in the test tier")))
    wait_for(lambda: status(custom, "reject-all-v1.0.0").get("phase") == "Ready",
             what="the fragment to be Ready")
    st = status(custom, "reject-all-v1.0.0")
    digest = hashlib.sha256((store / "reject-all-v1.0.0.wasm").read_bytes()).hexdigest()
    assert st["digest"] == digest and st["runtime"] == "wasmtime"
    make_pod(core, ns, "picked", "reject-all-v1.0.0")
    make_pod(core, ns, "plain")
    wait_for(lambda: node_of(core, ns, "plain") is not None, what="the plain pod to bind")
    wait_for(lambda: condition(core, ns, "picked") is not None, what="the condition")
    assert condition(core, ns, "picked") == (
        "Unschedulable", f"0/{NODES} nodes are available: {NODES} node(s) are not in the test "
                         f"tier. preemption: 0/{NODES} nodes are available: {NODES} No "
                         "preemption victims found for incoming pod.")
    assert node_of(core, ns, "picked") is None


def test_a_missing_fragment_makes_the_pod_wait_until_it_is_ready(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    make_pod(core, ns, "waiting", "late-v1.0.0")
    wait_for(lambda: condition(core, ns, "waiting") is not None, what="the condition")
    reason, message = condition(core, ns, "waiting")  # type: ignore[misc]
    assert message == 'fragment "late-v1.0.0" not found'
    publish(custom, store, "late-v1.0.0", wat_bytes(uniform_wat(score=10)))
    wait_for(lambda: node_of(core, ns, "waiting") is not None, timeout=15,
             what="the pod to bind once the fragment is Ready")


def test_a_name_without_version_follows_the_newest_ready_version(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "picky-v1.0.0", wat_bytes(uniform_wat(verdict=1, reason="v1 says no")))
    wait_for(lambda: status(custom, "picky-v1.0.0").get("phase") == "Ready", what="v1 Ready")
    make_pod(core, ns, "follower", "picky")
    wait_for(lambda: condition(core, ns, "follower") is not None, what="the condition")
    assert "v1 says no" in condition(core, ns, "follower")[1]  # type: ignore[index]
    publish(custom, store, "picky-v1.10.0", wat_bytes(uniform_wat()))
    publish(custom, store, "picky-v1.9.0", wat_bytes(uniform_wat(verdict=1, reason="v1.9 no")))
    wait_for(lambda: node_of(core, ns, "follower") is not None, timeout=15,
             what="the pod to follow v1.10.0 and bind")


def test_bad_resources_report_what_is_wrong_in_their_status(
        scheduler: SchedulerThread, custom: client.CustomObjectsApi, store: Path) -> None:
    publish(custom, store, "badsha-v1.0.0", wat_bytes(uniform_wat()), sha256="0" * 64)
    publish(custom, store, "garbage-v1.0.0", b"\x00asm garbage")
    publish(custom, store, "wasi-v1.0.0", (HOSTILE / "wasi-import.wasm").read_bytes())
    publish(custom, store, "v2abi-v1.0.0", (HOSTILE / "abi-v2.wasm").read_bytes())
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
            "metadata": {"name": "outside-v1.0.0"},
            "spec": {"url": "file:///etc/passwd", "stages": {"filter": {"mode": "replace"}}}}
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    expected = {"badsha-v1.0.0": "sha256 mismatch", "garbage-v1.0.0": "WebAssembly",
                "wasi-v1.0.0": "wasi_snapshot_preview1", "v2abi-v1.0.0": "ABI v2",
                "outside-v1.0.0": "/etc/passwd"}
    for resource, text in expected.items():
        wait_for(lambda r=resource: status(custom, r).get("phase") == "Failed",  # type: ignore
                 what=f"{resource} to fail")
        st = status(custom, resource)
        assert text in st["message"], (resource, st["message"])
        ready = [c for c in st["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "False"


@pytest.mark.parametrize(("policy", "binds"), [("Fail", False), ("Ignore", True),
                                                ("Default", True)])
def test_failure_policy_decides_what_a_trapping_fragment_means(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str, policy: str, binds: bool) -> None:
    resource = f"trap-{policy.lower()}-v1.0.0"
    publish(custom, store, resource, wat_bytes(uniform_wat(trap_in="filter")),
            failurePolicy=policy)
    wait_for(lambda: status(custom, resource).get("phase") == "Ready", what="Ready")
    make_pod(core, ns, "victim", resource)
    make_pod(core, ns, "bystander")
    wait_for(lambda: node_of(core, ns, "bystander") is not None, what="others keep going")
    if binds:
        wait_for(lambda: node_of(core, ns, "victim") is not None, what="the pod to bind")
    else:
        wait_for(lambda: condition(core, ns, "victim") is not None, what="the condition")
        message = condition(core, ns, "victim")[1]  # type: ignore[index]
        assert message.startswith(f'fragment "{resource}" failed in filter: trap')


@pytest.mark.parametrize("module", ["infinite-loop", "memory-bomb", "deep-recursion",
                                    "out-of-range", "filter-fails"])
def test_hostile_modules_are_contained(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str, module: str) -> None:
    resource = f"hostile-{module}-v1.0.0"
    publish(custom, store, resource, (HOSTILE / f"{module}.wasm").read_bytes(),
            limits={"fuel": 50_000_000, "timeoutMilliseconds": 200, "memoryMiB": 16},
            failurePolicy="Fail")
    wait_for(lambda: status(custom, resource).get("phase") in ("Ready", "Failed"),
             what="the load to finish")
    make_pod(core, ns, "victim", resource)
    make_pod(core, ns, "bystander")
    wait_for(lambda: node_of(core, ns, "bystander") is not None, what="others keep going")
    wait_for(lambda: condition(core, ns, "victim") is not None, what="the condition")
    message = condition(core, ns, "victim")[1]  # type: ignore[index]
    assert resource in message and node_of(core, ns, "victim") is None


def test_shadow_versions_decide_nothing_and_count_disagreements(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "canary-v2.0.0", wat_bytes(uniform_wat(verdict=1, reason="nope")),
            shadow=True)
    wait_for(lambda: status(custom, "canary-v2.0.0").get("phase") == "Ready", what="Ready")
    make_pod(core, ns, "observed", "canary")
    wait_for(lambda: node_of(core, ns, "observed") is not None,
             what="the pod to bind by the active logic")
    metrics = scheduler.call(lambda: scheduler.app.metrics.registry)
    value = metrics.get_sample_value("pyscheduler_fragment_shadow_disagreements_total",
                                     {"fragment": "fragment:canary-v2.0.0", "kind": "feasible"})
    assert value == 1.0


def test_the_packaged_default_serves_pods_without_annotation(
        scheduler: SchedulerThread, core: client.CoreV1Api, ns: str) -> None:
    make_pod(core, ns, "default-logic")
    wait_for(lambda: node_of(core, ns, "default-logic") is not None, what="the pod to bind")
    # The shipped module is served by its native equivalent (no call is made), and says so.
    registry = scheduler.call(lambda: scheduler.app.metrics.registry)
    from pyscheduler.wasm.manager import NATIVE_DEFAULTS
    info = registry.get_sample_value("pyscheduler_fragment_info", {
        "fragment": "default-v1.0.0", "name": "default", "version": "1.0.0",
        "digest": NATIVE_DEFAULTS["default-v1.0.0"], "runtime": "native"})
    assert info == 1
    assert registry.get_sample_value("pyscheduler_fragment_calls_total", {
        "fragment": "default-v1.0.0", "stage": "filter", "result": "ok"}) is None


def wat_bytes(text: str) -> bytes:
    data: bytes = wasmtime.wat2wasm(text)
    return data


def test_hot_swap_while_a_thousand_pods_are_scheduled(tmp_path: Path) -> None:
    """v1 keeps even rows, v2 odd rows; v2 is applied while 1000 pods following the name are
    being created. Every pod is bound once, by one version, with no failed attempt."""
    import concurrent.futures
    import threading

    spec = ClusterSpec(pools=[PoolSpec(name="node", count=24, cpu="64", memory="256Gi")],
                       run_pods=False, lease_renew_seconds=5)
    store = tmp_path / "store"
    store.mkdir()
    with BackgroundCluster(spec, tmp_path / "c") as c:
        api = config.new_client_from_config(config_file=str(c.kubeconfig))
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load(CRD_PATH.read_text()))
        custom = client.CustomObjectsApi(api)
        core = client.CoreV1Api(api)
        wait_for(lambda: custom.list_cluster_custom_object(GROUP, VERSION, PLURAL) is not None,
                 what="the CRD")
        core.create_namespace({"metadata": {"name": "swap"}})
        s = SchedulerThread(c.kubeconfig, schedulerName=SCHEDULER,
                            leaderElection={"enabled": False}, scheduleFragment=None,
                            storage={"allowedFileDirs": [str(store)]}).start()
        try:
            # The swap is what is tested, not the deadline: fragment calls run at a lower CPU
            # priority than the loop (fragments.callThreadNice), and two cores shared by the
            # API server, the scheduler and 1000 pod creations can stretch a call past 250 ms.
            limits = {"timeoutMilliseconds": 1000}
            publish(custom, store, "swap-v1.0.0", wat_bytes(uniform_wat(keep_parity=0)),
                    limits=limits)
            wait_for(lambda: status(custom, "swap-v1.0.0").get("phase") == "Ready",
                     what="v1 Ready")
            total = 1000
            created = threading.Semaphore(0)

            def create(i: int) -> None:
                make_pod(core, "swap", f"p{i}", "swap", cpu="10m")
                created.release()

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                futures = [pool.submit(create, i) for i in range(total)]
                for _ in range(300):
                    created.acquire()
                publish(custom, store, "swap-v1.1.0", wat_bytes(uniform_wat(keep_parity=1)),
                        limits=limits)
                wait_for(lambda: status(custom, "swap-v1.1.0").get("phase") == "Ready",
                         what="v2 Ready")
                for f in futures:
                    f.result()

            def bound() -> int:
                pods = core.list_namespaced_pod("swap").items
                return sum(1 for p in pods if p.spec.node_name)
            wait_for(lambda: bound() == total, timeout=60, what="every pod to bind")
            slots = s.call(lambda: dict(s.app.scheduler.cache.table.slots))
            registry = s.call(lambda: s.app.metrics.registry)
            parity = collections.Counter(
                slots[p.spec.node_name] % 2 for p in core.list_namespaced_pod("swap").items)

            def calls(resource: str) -> float:
                return registry.get_sample_value("pyscheduler_fragment_calls_total", {
                    "fragment": resource, "stage": "filter", "result": "ok"}) or 0.0
            v1, v2 = calls("swap-v1.0.0"), calls("swap-v1.1.0")
            attempts = {r: registry.get_sample_value("scheduler_schedule_attempts_total", {
                "result": r, "profile": SCHEDULER}) for r in ("scheduled", "unschedulable",
                                                              "error")}
        finally:
            s.stop()
    assert attempts == {"scheduled": total, "unschedulable": 0.0, "error": 0.0}
    assert v1 + v2 == total and v1 >= 1 and v2 >= 1
    assert parity == {0: v1, 1: v2}  # each pod where the version that scheduled it put it


def test_published_to_s3_with_the_cli_and_served_from_there(
        scheduler: SchedulerThread, sim: AnyCluster, core: client.CoreV1Api,
        custom: client.CustomObjectsApi, moto_s3: Any, tmp_path: Path, ns: str) -> None:
    import subprocess
    import sys

    module = tmp_path / "tier.wasm"
    module.write_bytes(wat_bytes(uniform_wat(verdict=1, reason="node(s) are not gold")))
    env = {"MINIO_ENDPOINT": moto_s3.endpoint, "MINIO_ACCESS_KEY": moto_s3.access_key,
           "MINIO_SECRET_KEY": moto_s3.secret_key, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "pyscheduler.cli", "fragment", "publish", str(module),
         "--name", "tier", "--version", "2.0.0", "--kubeconfig", str(sim.kubeconfig),
         "--score", "none"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(module.read_bytes()).hexdigest()
    assert done.stdout.strip() == (f"tier-v2.0.0 created: s3://fragments/tier/tier-v2.0.0.wasm "
                                   f"sha256 {digest}")
    wait_for(lambda: status(custom, "tier-v2.0.0").get("phase") == "Ready", what="Ready")
    make_pod(core, ns, "gold-only", "tier")
    wait_for(lambda: condition(core, ns, "gold-only") is not None, what="the condition")
    assert condition(core, ns, "gold-only")[1].startswith(  # type: ignore[index]
        f"0/{NODES} nodes are available: {NODES} node(s) are not gold. preemption: ")
    listed = subprocess.run(
        [sys.executable, "-m", "pyscheduler.cli", "fragment", "list", "--kubeconfig",
         str(sim.kubeconfig)], capture_output=True, text=True, timeout=60)
    row = [line for line in listed.stdout.splitlines() if line.startswith("tier-v2.0.0")]
    assert row and row[0].split()[1:3] == ["Ready", digest[:12]]


def run_publish(module: Path, kubeconfig: Path, moto_s3: Any, *extra: str,
                name: str = "tier", version: str = "3.0.0") -> Any:
    import subprocess
    import sys

    env = {"MINIO_ENDPOINT": moto_s3.endpoint, "MINIO_ACCESS_KEY": moto_s3.access_key,
           "MINIO_SECRET_KEY": moto_s3.secret_key, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "pyscheduler.cli", "fragment", "publish", str(module),
         "--name", name, "--version", version, "--kubeconfig", str(kubeconfig),
         "--score", "none", *extra], capture_output=True, text=True, env=env, timeout=60)


def test_publish_leaves_nothing_behind_when_the_resource_cannot_be_created(
        sim: AnyCluster, custom: client.CustomObjectsApi, moto_s3: Any,
        tmp_path: Path) -> None:
    """The API server refuses the resource (a request body over its 3 MiB limit, as
    kube-apiserver refuses it): the module uploaded a moment earlier is removed again."""
    from pyscheduler.wasm.storage import object_digest

    module = tmp_path / "big-config.wasm"
    module.write_bytes(wat_bytes(uniform_wat()))
    config_file = tmp_path / "config.json"
    config_file.write_text('{"blob": "' + "x" * (3 * 2**20 + 1000) + '"}')
    done = run_publish(module, sim.kubeconfig, moto_s3, "--fragment-config", f"@{config_file}",
                       name="bigcfg")
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("pyscheduler fragment publish: cannot create bigcfg-v3.0.0: ")
    assert done.stderr.rstrip().endswith("; the uploaded module was removed again")
    assert object_digest("fragments", "bigcfg/bigcfg-v3.0.0.wasm", moto_s3) is None


def test_publish_never_replaces_a_published_version_with_other_bytes(
        sim: AnyCluster, custom: client.CustomObjectsApi, moto_s3: Any,
        tmp_path: Path) -> None:
    first, second = tmp_path / "a.wasm", tmp_path / "b.wasm"
    first.write_bytes(wat_bytes(uniform_wat(score=10)))
    second.write_bytes(wat_bytes(uniform_wat(score=20)))
    assert run_publish(first, sim.kubeconfig, moto_s3, name="immutable").returncode == 0
    again = run_publish(first, sim.kubeconfig, moto_s3, name="immutable")
    assert again.returncode == 0 and "immutable-v3.0.0 updated" in again.stdout
    other = run_publish(second, sim.kubeconfig, moto_s3, name="immutable")
    assert other.returncode == 2
    assert "already holds another module (sha256 " in other.stderr
    assert "publish a new version" in other.stderr
    wait_for(lambda: status(custom, "immutable-v3.0.0").get("phase") == "Ready",
             what="the first module to keep serving")


@pytest.mark.embedded_only("needs a cluster without the CRD beside the module's own")
def test_publish_without_the_crd_uploads_nothing(cluster: Any, moto_s3: Any,
                                                  tmp_path: Path) -> None:
    from pyscheduler.wasm.storage import object_digest

    module = tmp_path / "m.wasm"
    module.write_bytes(wat_bytes(uniform_wat()))
    done = run_publish(module, cluster.kubeconfig, moto_s3, name="nocrd")
    assert done.returncode == 2
    assert "the WsspSchedulerConfiguration CRD is not installed in the cluster (kubectl apply " \
           "-f manifests/crd-wsspschedulerconfiguration.yaml); nothing was uploaded" in done.stderr
    assert object_digest("fragments", "nocrd/nocrd-v3.0.0.wasm", moto_s3) is None
