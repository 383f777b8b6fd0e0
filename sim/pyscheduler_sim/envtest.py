"""A real control plane for tests and benchmarks, the envtest way.

When ``KUBEBUILDER_ASSETS`` names a folder holding ``kube-apiserver`` (and ``etcd``, or etcd on
``PATH``; ``kube-controller-manager`` and ``kube-scheduler`` when asked for), :class:`ControlPlane`
starts etcd and kube-apiserver on loopback, each on a random free port with a fresh data
directory, serving TLS with a throwaway certificate authority, token authentication and RBAC on,
and optionally kube-controller-manager with the controllers a scheduler relies on in a real
cluster. It waits for ``/readyz``, writes a kubeconfig for a ``system:masters`` user, and stops
everything it started on :meth:`ControlPlane.stop`, at interpreter exit, and when the process
that started it dies even by ``kill -9`` (each child is started with a parent-death signal).

:class:`RealCluster` puts the node set of a :class:`~pyscheduler_sim.cluster.ClusterSpec` on such
a control plane and plays their kubelets over HTTP, so that a test written against the embedded
cluster runs unchanged against the real server: bound pods become Running, deleted pods terminate
after their grace period (capped by the spec's termination time) and are removed, and
``sim.pyscheduler.io/start-seconds`` delays a start as on the embedded cluster. Nothing else of
the embedded cluster is emulated there: no other fault annotation, no node Leases (so no node
lifecycle controller either). Claims that kube-controller-manager's PV controller hands to an
external provisioner (annotation ``volume.kubernetes.io/storage-provisioner``) are provisioned as
the embedded cluster's simulated provisioner does it (the same functions of
:mod:`pyscheduler_sim.volumes`): a volume pre-bound to the claim, pinned to the topology of the
node the scheduler selected, which the PV controller then binds.

Where the assets come from is the user's business (``setup-envtest use 1.36`` prints a folder).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from pyscheduler_sim.certs import make_serving_certs
from pyscheduler_sim.cluster import ClusterSpec, write_kubeconfig
from pyscheduler_sim.kubelet import (
    START_SECONDS_ANNOTATION,
    NodeSpec,
    NodeState,
    annotation_seconds,
    container_events,
    node_object,
)

__all__ = ["ASSETS_VARIABLE", "CONTROLLERS", "ControlPlane", "ControlPlaneError", "RealCluster",
           "assets", "missing_assets"]

ASSETS_VARIABLE = "KUBEBUILDER_ASSETS"

#: kube-controller-manager's controllers that a scheduler leans on in a real cluster. Not the
#: node lifecycle controller: the kubelets played here renew no Leases, and it would taint every
#: node unreachable.
CONTROLLERS = ("replicaset-controller", "deployment-controller", "statefulset-controller",
               "daemonset-controller", "job-controller", "disruption-controller",
               "persistentvolume-binder-controller", "resourceclaim-controller",
               "namespace-controller", "garbage-collector-controller",
               "resourcequota-controller", "persistentvolumeclaim-protection-controller",
               "persistentvolume-protection-controller", "ephemeral-volume-controller",
               "serviceaccount-controller", "serviceaccount-token-controller",
               "pod-garbage-collector-controller")


class ControlPlaneError(RuntimeError):
    """A control plane process that would not start; the message carries its log's tail."""


def missing_assets(need: Iterable[str] = ("kube-apiserver", "etcd")) -> str | None:
    """Why the real-server tests cannot run here, or None when they can."""
    folder = os.environ.get(ASSETS_VARIABLE)
    if not folder:
        return (f"{ASSETS_VARIABLE} is not set: no real kube-apiserver to test against "
                "(set it to a folder with kube-apiserver and etcd, e.g. from setup-envtest)")
    for name in need:
        if _binary(Path(folder), name) is None:
            return f"{ASSETS_VARIABLE}={folder} has no {name} (nor is it on PATH)"
    return None


def assets() -> Path:
    folder = os.environ.get(ASSETS_VARIABLE)
    if not folder:
        raise ControlPlaneError(f"{ASSETS_VARIABLE} is not set")
    return Path(folder)


def _binary(folder: Path, name: str) -> str | None:
    candidate = folder / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name) if name == "etcd" else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """Run in the child before exec: SIGKILL it when the process that started it dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback, started and stopped together.

    ``controllers``: kube-controller-manager's ``--controllers`` list, or None for no
    controller manager at all.
    """

    def __init__(self, workdir: str | Path | None = None, *,
                 controllers: Sequence[str] | None = CONTROLLERS,
                 assets_dir: str | Path | None = None,
                 apiserver_args: Sequence[str] = ()) -> None:
        self.assets = Path(assets_dir) if assets_dir else assets()
        # etcd's fsyncs dominate the API server's write latency: keep its data in memory.
        shm = Path("/dev/shm")
        base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(
            tempfile.mkdtemp(prefix="pyscheduler-envtest-", dir=base))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.controllers = controllers
        self.apiserver_args = list(apiserver_args)
        self.token = secrets.token_hex(16)
        self.kubeconfig = self.workdir / "kubeconfig"
        self.ca_file = self.workdir / "ca.crt"
        self.port = 0
        self.etcd_url = ""
        self.processes: list[_Process] = []
        self._stopped = False
        #: The RealCluster whose nodes the control plane holds now (one at a time).
        self.holder: RealCluster | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- start ---------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ControlPlane:
        atexit.register(self.stop)
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        etcd_port, peer_port = _free_port(), _free_port()
        etcd = _binary(self.assets, "etcd")
        if etcd is None:
            raise ControlPlaneError(f"no etcd in {self.assets} nor on PATH")
        self._spawn("etcd", [
            etcd, "--name", "envtest", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"envtest=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",
            # kube-apiserver's watch cache asks for progress notifications (etcd 3.4 spelling).
            "--experimental-watch-progress-notify-interval", "5s"])
        self._write_credentials()
        self.port = _free_port()
        apiserver = _binary(self.assets, "kube-apiserver")
        if apiserver is None:
            raise ControlPlaneError(f"no kube-apiserver in {self.assets}")
        d = self.workdir
        self._spawn("kube-apiserver", [
            apiserver, "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port),
            "--tls-cert-file", str(d / "apiserver.crt"),
            "--tls-private-key-file", str(d / "apiserver.key"),
            "--client-ca-file", str(self.ca_file),
            "--token-auth-file", str(d / "tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-key-file", str(d / "sa.pub"),
            "--service-account-signing-key-file", str(d / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--api-audiences", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", "10.96.0.0/16",
            # ServiceAccount admission would refuse pods in a namespace whose default account
            # the controller has not made yet; TaintNodesByCondition would taint the nodes
            # registered here not-ready until a kubelet's status says otherwise.
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
            "--allow-privileged", "--endpoint-reconciler-type", "none",
            *self.apiserver_args])
        write_kubeconfig(self.kubeconfig, self.url, self.token, self.ca_file.read_bytes())
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._wait_ready(timeout)
        if self.controllers is not None:
            manager = _binary(self.assets, "kube-controller-manager")
            if manager is None:
                raise ControlPlaneError(f"no kube-controller-manager in {self.assets}")
            kc = str(self.kubeconfig)
            self._spawn("kube-controller-manager", [
                manager, "--kubeconfig", kc, "--authentication-kubeconfig", kc,
                "--authorization-kubeconfig", kc, "--leader-elect=false", "--secure-port", "0",
                "--service-account-private-key-file", str(d / "sa.key"),
                "--use-service-account-credentials=false",
                "--controllers", ",".join(self.controllers)])

    def _write_credentials(self) -> None:
        certs = make_serving_certs()
        d = self.workdir
        self.ca_file.write_bytes(certs.ca_pem)
        (d / "apiserver.crt").write_bytes(certs.cert_pem + certs.ca_pem)
        (d / "apiserver.key").write_bytes(certs.key_pem)
        (d / "tokens.csv").write_text(f"{self.token},admin,admin-uid,system:masters\n")
        key = ec.generate_private_key(ec.SECP256R1())
        (d / "sa.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        (d / "sa.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        for name in ("apiserver.key", "sa.key", "tokens.csv"):
            (d / name).chmod(0o600)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.processes.append(_Process(name, popen, log))

    def _wait_ready(self, timeout: float) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        request = urllib.request.Request(self.url + "/readyz",
                                         headers={"Authorization": f"Bearer {self.token}"})
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self.check()
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.1)
        api = next(p for p in self.processes if p.name == "kube-apiserver")
        raise ControlPlaneError(f"kube-apiserver not ready within {timeout:.0f} s ({last}):\n"
                                f"{api.tail()}")

    def compact(self) -> None:
        """Compact etcd at its current revision (through its JSON gateway), as kube-apiserver
        does every five minutes: a watch from an older resourceVersion then ends with 410."""
        import json

        def post(path: str, body: dict[str, Any]) -> Any:
            request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read())

        revision = post("/v3/kv/range", {"key": "AA=="})["header"]["revision"]
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        # kube-apiserver's watch cache keeps serving older versions from memory; it starts
        # afresh, at the current revision, when the server restarts (what a user sees after an
        # upgrade or a failover: every watch resumed from before it is told 410).
        self.restart("kube-apiserver")

    def restart(self, name: str, timeout: float = 60.0) -> None:
        """Stop one of the processes and start it again with the same arguments."""
        index = next(i for i, p in enumerate(self.processes) if p.name == name)
        process = self.processes[index]
        process.popen.terminate()
        try:
            process.popen.wait(15)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait(10)
        with process.log.open("ab") as out:
            popen = subprocess.Popen(process.popen.args, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.processes[index] = _Process(name, popen, process.log)
        if name == "kube-apiserver":
            self._wait_ready(timeout)

    def check(self) -> None:
        """Raise if a process of the control plane has exited (a bad flag, a crash)."""
        for process in self.processes:
            if process.popen.poll() is not None:
                raise ControlPlaneError(f"{process.name} exited with {process.popen.returncode}:"
                                        f"\n{process.tail()}")

    # -- stop ----------------------------------------------------------------------------------

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        for process in reversed(self.processes):
            if process.popen.poll() is None:
                process.popen.terminate()
        for process in reversed(self.processes):
            try:
                process.popen.wait(10)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait(10)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        from kubernetes import config
        load: Any = config.new_client_from_config
        return load(config_file=str(self.kubeconfig))


class RealCluster:
    """A :class:`ClusterSpec`'s nodes on a real control plane, with their kubelets played here.

    Shaped like :class:`~pyscheduler_sim.harness.BackgroundCluster` where tests touch it
    (``kubeconfig``, ``ca_file``, ``url``, ``token``), so that one test runs on either server.
    :meth:`close` removes what it registered and every pod left on its nodes.
    """

    kind = "real"

    def __init__(self, plane: ControlPlane, spec: ClusterSpec) -> None:
        from kubernetes import client

        self.plane = plane
        self.spec = spec
        self.kubeconfig = plane.kubeconfig
        self.ca_file = plane.ca_file
        self.url = plane.url
        self.token = plane.token
        self.compact = plane.compact
        self.api = plane.client()
        self.core: Any = client.CoreV1Api(self.api)
        self.nodes: dict[str, NodeSpec] = {n.name: n for n in spec.node_specs()}
        self._kubelet = _Kubelets(self.core, self.nodes, run_pods=spec.run_pods)
        self._provisioner = _Provisioner(self.api)

    def __enter__(self) -> RealCluster:
        if self.plane.holder is not None:
            raise ControlPlaneError("the control plane already holds another cluster's nodes "
                                    f"({sorted(self.plane.holder.nodes)[:3]}...): close it first")
        self.plane.check()
        self.plane.holder = self
        for node in self.nodes.values():
            self.core.create_node(node_object(node))
        self._kubelet.start()
        self._provisioner.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._kubelet.stop()
            self._provisioner.stop()
            self.plane.check()
            reset(self.core, self.api)
            self.api.close()
        finally:
            self.plane.holder = None


def reset(core: Any, api: Any) -> None:
    """Remove what tests made on a shared control plane: pods (at once), namespaces, nodes,
    volumes, storage and priority classes, custom resource definitions, webhooks."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    def quietly(call: Any, *args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(ApiException):
            call(*args, **kwargs)

    system = {"default", "kube-system", "kube-public", "kube-node-lease"}
    for ns in core.list_namespace().items:
        quietly(core.delete_collection_namespaced_pod, ns.metadata.name, grace_period_seconds=0)
        if ns.metadata.name not in system:
            quietly(core.delete_namespace, ns.metadata.name)
    # What tests leave in the namespaces that stay: leader Leases, events, config maps.
    quietly(client.CoordinationV1Api(api).delete_collection_namespaced_lease, "default")
    quietly(core.delete_collection_namespaced_event, "default")
    quietly(core.delete_collection_node)
    quietly(core.delete_collection_persistent_volume)
    storage = client.StorageV1Api(api)
    quietly(storage.delete_collection_storage_class)
    quietly(storage.delete_collection_csi_node)
    quietly(storage.delete_collection_csi_driver)
    scheduling: Any = client.SchedulingV1Api(api)
    for pc in scheduling.list_priority_class().items:
        if not pc.metadata.name.startswith("system-"):
            quietly(scheduling.delete_priority_class, pc.metadata.name)
    quietly(client.ApiextensionsV1Api(api).delete_collection_custom_resource_definition)
    quietly(client.RbacAuthorizationV1Api(api).delete_collection_cluster_role_binding,
            label_selector="pyscheduler.io/test")
    # The namespaces go in the background: kube's namespace controller waits five seconds
    # before it empties one, and the pods, the only objects a scheduler acts on, are gone
    # already. (A test that creates a namespace by a fixed name must not do so twice in a
    # session.) A definition of the same name may come back with the next module: wait for
    # the custom resource definitions, which go once their objects have.
    extensions = client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + 60
    while left := extensions.list_custom_resource_definition().items:
        if time.monotonic() > deadline:
            names = sorted(str(crd.metadata and crd.metadata.name) for crd in left)
            raise ControlPlaneError(f"custom resource definitions still there after 60 s: "
                                    f"{names}")
        time.sleep(0.1)


class _Kubelets:
    """The kubelets of a :class:`RealCluster`'s nodes, over the API as a kubelet acts on it."""

    def __init__(self, core: Any, nodes: dict[str, NodeSpec], *, run_pods: bool) -> None:
        self.core = core
        self.nodes = nodes
        self.run_pods = run_pods
        self._stop = threading.Event()
        self._timers: dict[tuple[str, str], threading.Timer] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="envtest-kubelets", daemon=True)
        self._states = {name: NodeState(spec) for name, spec in nodes.items()}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
        self._thread.join(10)

    def _watch(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = self.core.list_pod_for_all_namespaces(
                        field_selector="spec.nodeName!=")
                    for pod in listing.items:
                        self._seen(self.core.api_client.sanitize_for_serialization(pod))
                    rv = listing.metadata.resource_version
                watch_type: Any = watch.Watch
                watcher = watch_type()
                stream = watcher.stream(
                    self.core.list_pod_for_all_namespaces, field_selector="spec.nodeName!=",
                    resource_version=rv, timeout_seconds=5, allow_watch_bookmarks=True,
                    _preload_content=False)
                for event in stream:
                    if self._stop.is_set():
                        return
                    obj = event["raw_object"]
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._seen(obj)
            except ApiException as exc:
                if exc.status == 410:
                    rv = ""
                else:
                    self._stop.wait(0.5)
            except Exception:  # a dropped connection: resume from the last version seen
                self._stop.wait(0.2)

    def _seen(self, pod: dict[str, Any]) -> None:
        spec, meta = pod.get("spec", {}), pod["metadata"]
        node = self.nodes.get(spec.get("nodeName", ""))
        if node is None:
            return
        key = (meta["namespace"], meta["name"])
        phase = pod.get("status", {}).get("phase")
        if meta.get("deletionTimestamp"):
            grace = meta.get("deletionGracePeriodSeconds") or 0
            self._later(key, min(float(grace), node.pod_termination_seconds),
                        self._remove, key, meta["uid"])
        elif self.run_pods and phase == "Pending":
            start = annotation_seconds((meta.get("annotations") or {}).get(START_SECONDS_ANNOTATION),
                             node.pod_start_seconds)
            self._later(key, start, self._run, key, meta["uid"], node)

    def _later(self, key: tuple[str, str], delay: float, fn: Any, *args: Any) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            timer = threading.Timer(delay, self._fire, (key, fn, args))
            timer.daemon = True
            self._timers[key] = timer
            timer.start()

    def _fire(self, key: tuple[str, str], fn: Any, args: tuple[Any, ...]) -> None:
        with self._lock:
            self._timers.pop(key, None)
        if self._stop.is_set():
            return
        from kubernetes.client.exceptions import ApiException
        with contextlib.suppress(ApiException):
            fn(*args)

    def _run(self, key: tuple[str, str], uid: str, node: NodeSpec) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pod = self.core.read_namespaced_pod(key[1], key[0])
        if pod.metadata.uid != uid or pod.metadata.deletion_timestamp or \
                pod.status.phase != "Pending":
            return
        with self._lock:
            ip = self._states[node.name].allocate_ip(uid) or node.internal_ip or "127.0.0.1"
        conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                      for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
        containers = [{"name": c.name, "image": c.image, "imageID": "", "ready": True,
                       "restartCount": 0, "started": True,
                       "state": {"running": {"startedAt": now}}}
                      for c in pod.spec.containers]
        self.core.patch_namespaced_pod_status(key[1], key[0], {"status": {
            "phase": "Running", "hostIP": node.internal_ip or "127.0.0.1",
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
            "conditions": conditions, "containerStatuses": containers}})
        plain = self.core.api_client.sanitize_for_serialization(pod)
        for event in container_events(plain, node.name, failed=False):
            self.core.create_namespaced_event(key[0], event)

    def _remove(self, key: tuple[str, str], uid: str) -> None:
        from kubernetes import client
        self.core.delete_namespaced_pod(key[1], key[0], body=client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)))
        with self._lock:
            for state in self._states.values():
                state.release_ip(uid)


class _Provisioner:
    """An external provisioner for every storage class, over the API (polling the claims)."""

    def __init__(self, api: Any, interval: float = 0.2) -> None:
        self.api = api
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="envtest-provisioner",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        core, storage = client.CoreV1Api(self.api), client.StorageV1Api(self.api)
        plain = self.api.sanitize_for_serialization
        while not self._stop.wait(self.interval):
            try:
                for claim in core.list_persistent_volume_claim_for_all_namespaces().items:
                    self._provision(core, storage, plain(claim))
            except ApiException:
                continue
            except Exception:  # a dropped connection: try again on the next round
                continue

    @staticmethod
    def _provision(core: Any, storage: Any, pvc: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        from pyscheduler_sim.volumes import provisioned_topology, provisioned_volume

        meta, spec = pvc["metadata"], pvc.get("spec") or {}
        annotations = meta.get("annotations") or {}
        provisioner = annotations.get("volume.kubernetes.io/storage-provisioner")
        if not provisioner or spec.get("volumeName") or meta.get("deletionTimestamp"):
            return
        class_name = spec.get("storageClassName") or ""
        try:
            sc = core.api_client.sanitize_for_serialization(storage.read_storage_class(class_name))
        except ApiException:
            return
        node = csinode = None
        selected = annotations.get("volume.kubernetes.io/selected-node")
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer" and not selected:
            return
        if selected:
            try:
                node = core.api_client.sanitize_for_serialization(core.read_node(selected))
            except ApiException:
                return
            with contextlib.suppress(ApiException):
                csinode = core.api_client.sanitize_for_serialization(
                    storage.read_csi_node(selected))
        affinity, problem = provisioned_topology(provisioner, sc, node, csinode)
        if problem:
            return
        name = f"pvc-{meta['uid']}"
        with contextlib.suppress(ApiException):  # 409: made on an earlier round
            core.create_persistent_volume(provisioned_volume(name, pvc, class_name, sc,
                                                             provisioner, affinity))
