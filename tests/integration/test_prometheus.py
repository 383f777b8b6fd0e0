"""The Grafana dashboard and the alert rules of ``manifests/monitoring`` against a real
Prometheus.

One module-scoped set-up: the embedded cluster, the simulated cloud (two pools), pyscheduler
with fragments, virtual nodes, the rebalancer and leader election, and Prometheus (Debian's
``prometheus`` package, started here on loopback with a 1 s scrape and evaluation interval)
scraping the scheduler under the job name a ServiceMonitor gives it, ``pyscheduler-metrics``.
A workload then exercises every metric the dashboard reads and provokes the alerts: pods that
bind, pods whose bindings fail, pods that fit nowhere, pods that burst to the cloud and are moved
back, a fragment that traps, a shadow fragment that disagrees, a fragment that cannot load, a
cloud pool that is down, orphaned cloud instances (one collected, one whose pod the provider
cannot check), cut watch connections. The tests then run every panel query and every alert expression
through Prometheus' HTTP API, wait (bounded) for the provoked alerts to fire, and finally take
the lease away and stop the scheduler to see the leader and absence alerts fire.

The rules Prometheus evaluates here are the ``spec`` of ``prometheusrule.yaml`` (the one source of
the rules) with every ``for`` set to 0 s in the test's copy: the shipped durations (5 to 15 min)
cannot elapse in a test, so the test checks that each expression holds when it should; the
durations themselves are checked as values.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import math
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from pyscheduler.metrics import SchedulerMetrics
from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler_sim.cloud import BackgroundCloudSim
from pyscheduler_sim.cloud import PoolSpec as CloudPool
from pyscheduler.virtual.types import ContainerSpec, InstanceRequest
from pyscheduler.wasm.resource import CRD_PATH, GROUP, PLURAL, VERSION
from tests.conftest import KUBECTL, SchedulerThread, free_port, wait_for
from tests.fragment_cluster import apply_fragment
from tests.integration.test_fragments import publish, status, uniform_wat, wat_bytes

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "manifests" / "monitoring"
RULES_FILE = MONITORING / "prometheusrule.yaml"
DASHBOARD_FILE = MONITORING / "grafana-dashboard.json"
DOCS = REPO / "docs" / "monitoring.md"
HOSTILE = REPO / "fragments" / "hostile"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
NO_PROMETHEUS = ("Prometheus is not installed: `make toolchain` installs Debian's prometheus "
                 "package (needs root and apt-get)")

JOB = "pyscheduler-metrics"
SCHEDULER = "mon-sched"
NS = "mon"
GI = 2**30
#: Grafana's variables, as the test fills them: every window covers the whole test (< 5 min).
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "5m", "$__range": "5m",
                     "$job": JOB, "$instance": ".+"}
#: Alerts the workload provokes, with labels the firing alert must carry.
PROVOKED = {
    "PySchedulerPendingPodsGrowing": {},
    "PySchedulerBindErrors": {},
    "PySchedulerFragmentLoadFailed": {"fragment": "broken-v1.0.0"},
    "PySchedulerFragmentCallsFailing": {"fragment": "trap-v1.0.0", "stage": "score",
                                        "result": "trap"},
    "PySchedulerCloudOrphanInstances": {"pool": "aci"},
    "PySchedulerCloudOrphansCollected": {"pool": "aci"},
    "PySchedulerCloudAPIFailing": {"pool": "eci"},
}
#: Alerts that must stay quiet while the scheduler leads and works.
QUIET = ("PySchedulerDown", "PySchedulerInstanceDown", "PySchedulerNoLeader",
         "PySchedulerMultipleLeaders", "PySchedulerNotScheduling",
         "PySchedulerSchedulingErrors")


# -- the monitoring files ------------------------------------------------------------------------

def rule_groups() -> list[dict[str, Any]]:
    """The rule groups: the ``spec`` of the PrometheusRule."""
    doc = yaml.safe_load(RULES_FILE.read_text())
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    groups: list[dict[str, Any]] = doc["spec"]["groups"]
    return groups


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def rules_without_for() -> dict[str, Any]:
    """The test's copy of the rules: every ``for`` 0 s, so that a true expression fires at once."""
    groups = copy.deepcopy(rule_groups())
    for group in groups:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "0s"
    return {"groups": groups}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text())
    return data


def panel_targets() -> list[tuple[str, str, str]]:
    """(panel title, refId, expression) of every query of the dashboard."""
    return [(panel["title"], target["refId"], target["expr"])
            for panel in dashboard()["panels"] if panel["type"] != "row"
            for target in panel["targets"]]


def concrete(expr: str) -> str:
    """A panel's query with Grafana's variables filled in as the test scrapes."""
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    leftover = re.findall(r"\$\{?\w+", expr)
    assert not leftover, f"unknown Grafana variables {leftover} in {expr}"
    return expr


# -- Prometheus ------------------------------------------------------------------------------------

class Prometheus:
    """A Prometheus server on a loopback port, with its own storage under ``workdir``."""

    def __init__(self, workdir: Path, targets: list[str], rules: dict[str, Any]) -> None:
        assert PROMETHEUS is not None
        workdir.mkdir(parents=True, exist_ok=True)
        rules_path = workdir / "rules.yaml"
        rules_path.write_text(yaml.safe_dump(rules, sort_keys=False))
        config_path = workdir / "prometheus.yaml"
        config_path.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "rule_files": [str(rules_path)],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}],
        }))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config_path}",
             f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n"
                                     f"{self.log()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            time.sleep(0.1)
        raise AssertionError(f"prometheus not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-3000:]

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # 400/422 carry the error in a JSON body
            body = json.loads(exc.read())
        return body

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now; fails on a query error."""
        body = self.api("query", query=expr)
        assert body["status"] == "success", f"{expr}\n-> {body.get('error')}"
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def firing(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["data"]["alerts"]
        return [a for a in alerts if a["state"] == "firing"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def finite(result: list[dict[str, Any]]) -> bool:
    """At least one series with a number (a histogram quantile over no events is NaN)."""
    return any(math.isfinite(float(series["value"][1])) for series in result)


def firing_with(prom: Prometheus, alert: str, labels: dict[str, str]) -> bool:
    return any(a["labels"].get("alertname") == alert
               and all(a["labels"].get(k) == v for k, v in labels.items())
               for a in prom.firing())


# -- the stack -------------------------------------------------------------------------------------

@dataclass
class Stack:
    sim: BackgroundCluster
    cloud: BackgroundCloudSim
    scheduler: SchedulerThread
    prometheus: Prometheus
    core: client.CoreV1Api
    api: client.ApiClient
    running: bool = True

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample of the scheduler's own registry (0 when absent)."""
        registry = self.scheduler.call(lambda: self.scheduler.app.metrics.registry)
        value = registry.get_sample_value(name, labels or {})
        return float(value or 0.0)

    def family_total(self, name: str) -> float:
        registry = self.scheduler.call(lambda: self.scheduler.app.metrics.registry)
        return float(sum(s.value for m in registry.collect() for s in m.samples
                         if s.name == name))


def pod(name: str, cpu: str = "100m", *, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations or {},
                         "labels": labels or {}},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu,
                                                                "memory": "128Mi"}}}]}}


def bound(core: client.CoreV1Api, prefix: str) -> int:
    return sum(1 for p in core.list_namespaced_pod(NS).items
               if p.metadata.name.startswith(prefix) and p.spec.node_name)


def run_workload(s: Stack, store: Path, custom: client.CustomObjectsApi) -> None:
    core, sim, cloud = s.core, s.sim, s.cloud
    # Fragments: one that traps in its score stage (failurePolicy Fail), a shadow version that
    # rejects every node, and a module that cannot load.
    publish(custom, store, "trap-v1.0.0", (HOSTILE / "unreachable-score.wasm").read_bytes(),
            failurePolicy="Fail")
    publish(custom, store, "canary-v2.0.0",
            wat_bytes(uniform_wat(verdict=1, reason="node(s) are not canary")), shadow=True)
    publish(custom, store, "broken-v1.0.0", (HOSTILE / "invalid.wasm").read_bytes())
    for resource, phase in (("trap-v1.0.0", "Ready"), ("canary-v2.0.0", "Ready"),
                            ("broken-v1.0.0", "Failed")):
        wait_for(lambda r=resource, p=phase: status(custom, r).get("phase") == p,  # type: ignore
                 timeout=20, what=f"{resource} to be {phase}")
    # Their series start at zero; Prometheus must see them so before the first call counts.
    wait_for(lambda: s.prometheus.query('pyscheduler_fragment_calls_total{fragment="trap-v1.0.0"}')
             and s.prometheus.query("pyscheduler_fragment_shadow_evaluations_total"),
             timeout=20, what="Prometheus to scrape the fragments' series")

    # Bindings that fail: two failures now (the binding's retries absorb them), more once
    # Prometheus has seen the counter, so that its increase is visible.
    binding = rf"/namespaces/{NS}/pods/[^/]+/binding$"
    sim.call(lambda: sim.cluster.server.inject_failures("POST", binding, 500, 2))
    for i in range(4):
        core.create_namespaced_pod(NS, pod(f"small-{i}"))
    wait_for(lambda: bound(core, "small-") == 4, timeout=20, what="the small pods to bind")

    # Pod groups through the gang example: a group's first member waits at permit until the
    # second is reserved, then both bind (permit waits that end in Success). Two groups, the
    # second once Prometheus has the histogram's series, so that its rate is visible.
    gang = store / "gang-v1.0.0.wasm"
    gang.write_bytes((REPO / "fragments" / "examples" / "gang" / "gang.wasm").read_bytes())
    apply_fragment(custom, "gang-v1.0.0", gang, {
        "prefilter": {}, "postfilter": {"mode": "replace"}, "permit": {}, "unreserve": {}},
        failurePolicy="Fail")
    for group in ("a", "b"):
        for i in range(2):
            core.create_namespaced_pod(NS, pod(
                f"gang-{group}-{i}", "10m", labels={"pod-group.wssp.io/name": group},
                annotations={"wssp/schedulefragment": "gang-v1.0.0",
                             "pod-group.wssp.io/min-member": "2"}))
        wait_for(lambda g=group: bound(core, f"gang-{g}-") == 2,  # type: ignore[misc]
                 timeout=20, what=f"pod group {group} to bind")
        wait_for(lambda: s.prometheus.query(
            'scheduler_permit_wait_duration_seconds_count{result="Success"}'),
            timeout=20, what="Prometheus to scrape the permit waits")
    # Fill the real nodes (2 x 4 cpu) so that 1-cpu pods fit nowhere, then burst six.
    for i in range(6):
        core.create_namespaced_pod(NS, pod(f"filler-{i}", "1"))
    wait_for(lambda: bound(core, "filler-") == 6, timeout=20, what="the fillers to bind")
    for i in range(6):
        core.create_namespaced_pod(NS, pod(f"burst-{i}", "1"))
    # Pods that fit nowhere and may not burst, one that selects the trapping fragment, and
    # pods that select the name with only a shadow version (the default logic places them).
    for i in range(3):
        core.create_namespaced_pod(NS, pod(f"huge-{i}", "64",
                                           annotations={"wssp/burst": "never"}))
    core.create_namespaced_pod(NS, pod("trapped", annotations={
        "wssp/schedulefragment": "trap-v1.0.0"}))
    for i in range(3):
        core.create_namespaced_pod(NS, pod(f"observed-{i}", annotations={
            "wssp/schedulefragment": "canary"}))
    wait_for(lambda: bound(core, "burst-") == 6 and s.sample(
        "pyscheduler_virtual_bursts_total", {"pool": "aci"}) == 6, timeout=30,
        what="six pods to burst to the aci pool")
    wait_for(lambda: bound(core, "observed-") == 3, timeout=20, what="the observed pods")
    wait_for(lambda: s.family_total("pyscheduler_fragment_shadow_disagreements_total") >= 3,
             timeout=20, what="shadow disagreements")

    # Free two cpu: the rebalancer moves burst pods back.
    for i in range(2):
        core.delete_namespaced_pod(f"filler-{i}", NS)
    wait_for(lambda: s.sample("pyscheduler_rebalance_moves_total",
                              {"strategy": "copy", "result": "ok"}) >= 1,
             timeout=30, what="a virtual pod to be moved back")

    # A pod of high priority that fits no node and may not burst preempts a pod of priority 0.
    client.SchedulingV1Api(core.api_client).create_priority_class(
        {"metadata": {"name": "urgent"}, "value": 1000})
    urgent = pod("urgent", "3500m", annotations={"wssp/burst": "never"})
    urgent["spec"]["priorityClassName"] = "urgent"
    core.create_namespaced_pod(NS, urgent)
    wait_for(lambda: bound(core, "urgent") == 1, timeout=30, what="the urgent pod to preempt")
    assert s.family_total("scheduler_preemption_attempts_total") >= 1

    # Orphans in the aci pool: ghost-a is collected after the grace period; ghost-b stays,
    # because the provider cannot check its pod (every GET of it fails).
    sim.call(lambda: sim.cluster.server.inject_failures(
        "GET", rf"/namespaces/{NS}/pods/ghost-b$", 500, 10**6))
    for name in ("ghost-a", "ghost-b"):
        request = InstanceRequest(pool="aci", pod_uid=str(uuid.uuid4()), namespace=NS,
                                  name=name, containers=(ContainerSpec(
                                      "c", "pause", cpu_millis=100, memory_bytes=GI // 8),))
        cloud.call(lambda r=request: cloud.sim.create(r))  # type: ignore[misc]
    wait_for(lambda: s.sample("pyscheduler_cloud_orphans_collected_total", {"pool": "aci"}) >= 1
             and s.sample("pyscheduler_cloud_orphan_instances", {"pool": "aci"}) >= 1,
             timeout=20, what="one orphan collected and one left")

    # The eci pool's API goes down; the watch connections are cut (informers reconnect).
    cloud.call(lambda: cloud.sim.set_faults("eci", down=True))
    sim.call(lambda: sim.cluster.server.drop_watches(abrupt=True))
    wait_for(lambda: s.family_total("pyscheduler_informer_reconnects_total") >= 1, timeout=20,
             what="an informer to reconnect")

    # Plugin timings are recorded in about one cycle in ten, and a rate needs an increase that
    # Prometheus saw: schedule small batches until its p99 has a value.
    plugin_p99 = ("histogram_quantile(0.99, sum by (le) (rate("
                  "scheduler_plugin_execution_duration_seconds_bucket[5m])))")
    for batch in range(30):
        if finite(s.prometheus.query(plugin_p99)):
            break
        for i in range(5):
            core.create_namespaced_pod(NS, pod(f"sample-{batch}-{i}", "10m"))
        wait_for(lambda b=batch: bound(core, f"sample-{b}-") == 5,  # type: ignore[misc]
                 timeout=20, what="the sampling pods to bind")
        time.sleep(1.0)  # one scrape
    assert finite(s.prometheus.query(plugin_p99)), "no plugin timing in Prometheus after 150 pods"

    # The second round of binding failures, once Prometheus has the series.
    wait_for(lambda: s.prometheus.query('pyscheduler_bind_errors_total{reason="InternalError"}'),
             timeout=20, what="Prometheus to scrape the bind errors")
    # Enough of them to stay well above the alert's 10 % of the pods scheduled in this test,
    # and with the same reason (500: InternalError): a new reason would be a new series, born
    # at its count, whose increase Prometheus cannot see.
    sim.call(lambda: sim.cluster.server.inject_failures("POST", binding, 500, 40))
    for i in range(8):
        core.create_namespaced_pod(NS, pod(f"late-{i}"))
    wait_for(lambda: bound(core, "late-") == 8, timeout=30, what="the late pods to bind")
    assert s.family_total("pyscheduler_bind_errors_total") >= 42


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if PROMETHEUS is None:
        pytest.skip(NO_PROMETHEUS)
    workdir = tmp_path_factory.mktemp("prometheus")
    store = workdir / "fragments"
    store.mkdir()
    with contextlib.ExitStack() as stop:
        spec = ClusterSpec(pools=[PoolSpec(name="real", count=2, cpu="4", memory="16Gi")],
                           pod_start_seconds=0.05, pod_termination_seconds=0.1,
                           lease_renew_seconds=5)
        sim = stop.enter_context(BackgroundCluster(spec, workdir / "cluster"))
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load(CRD_PATH.read_text()))
        custom = client.CustomObjectsApi(api)
        wait_for(lambda: custom.list_cluster_custom_object(GROUP, VERSION, PLURAL) is not None,
                 what="the CRD to be served")
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        cloud = stop.enter_context(BackgroundCloudSim([
            CloudPool("aci", "azure", cpu_millis=100_000, memory_bytes=400 * GI, instances=100,
                      creation_latency_seconds=0.05, price_per_cpu_hour=0.05),
            CloudPool("eci", "alibaba", cpu_millis=50_000, memory_bytes=200 * GI,
                      instances=100, creation_latency_seconds=0.05, price_per_cpu_hour=0.02)],
            seed=1))
        scheduler = SchedulerThread(
            sim.kubeconfig, schedulerName=SCHEDULER, seed=1,
            leaderElection={"enabled": True, "leaseDurationSeconds": 4,
                            "renewDeadlineSeconds": 3, "retryPeriodSeconds": 0.5},
            podInitialBackoffSeconds=0.2, podMaxBackoffSeconds=1,
            storage={"allowedFileDirs": [str(store)]},
            virtualNodes={"enabled": True, "cloudUrl": cloud.url, "heartbeatSeconds": 1,
                          "reconcileSeconds": 0.5, "orphanGraceSeconds": 1,
                          "pools": [{"name": "aci", "platform": "azure"},
                                    {"name": "eci", "platform": "alibaba"}]},
            rebalancer={"intervalSeconds": 1, "minCloudSeconds": 1, "maxMovesPerCycle": 50,
                        "maxMovesPerNamespace": 50, "readyTimeoutSeconds": 20})
        try:
            scheduler.start()
        except BaseException:
            with contextlib.suppress(Exception):  # its loop and thread end either way
                scheduler.stop()
            raise
        s: Stack | None = None

        def stop_scheduler() -> None:
            if s is None or s.running:  # the last test may have stopped it
                scheduler.stop()
        stop.callback(stop_scheduler)
        wait_for(lambda: scheduler.call(lambda: scheduler.app.leading), timeout=20,
                 what="the scheduler to lead")
        port = scheduler.call(lambda: scheduler.app.health.port)
        prometheus = Prometheus(workdir / "prometheus", [f"127.0.0.1:{port}"],
                                rules_without_for())
        stop.callback(prometheus.stop)
        prometheus.wait_ready()
        s = Stack(sim, cloud, scheduler, prometheus, core, api)
        wait_for(lambda: prometheus.query(f'up{{job="{JOB}"}} == 1'), timeout=20,
                 what="Prometheus to scrape the scheduler")
        run_workload(s, store, custom)
        yield s


# -- files alone ---------------------------------------------------------------------------------

def test_the_dashboard_is_well_formed() -> None:
    board = dashboard()
    assert board["uid"] == "pyscheduler" and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"job", "instance"} <= variables.keys()
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: dict[tuple[int, int], str] = {}
    for panel in board["panels"]:
        title = panel.get("title")
        assert title, panel
        pos = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= pos.keys(), title
        assert all(isinstance(pos[k], int) and pos[k] >= 0 for k in "hwxy"), title
        assert pos["w"] >= 1 and pos["h"] >= 1 and pos["x"] + pos["w"] <= 24, title
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{title!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = title
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel.get("description"), f"{title!r} needs a description"
        targets = panel["targets"]
        assert targets, title
        assert len({t["refId"] for t in targets}) == len(targets), title
        for target in targets:
            assert target["datasource"] == panel["datasource"], title
            expr = target["expr"]
            # Every selector honours the dashboard's job and instance variables.
            selectors = re.findall(r"[a-zA-Z_:][\w:]*\{([^}]*)\}", expr)
            assert selectors, (title, expr)
            for matchers in selectors:
                assert 'job=~"$job"' in matchers and 'instance=~"$instance"' in matchers, (
                    title, expr)


def test_every_scheduler_metric_is_on_the_dashboard_and_in_the_docs() -> None:
    families = {m.name for m in SchedulerMetrics(process_metrics=False).registry.collect()}
    exprs = " ".join(expr for _, _, expr in panel_targets())
    docs = DOCS.read_text()
    for family in families:
        # Counters are exposed (and queried) with the _total suffix, histograms by their parts.
        names = (family, f"{family}_total", f"{family}_bucket", f"{family}_count")
        assert any(re.search(rf"\b{n}\b", exprs) for n in names), f"{family}: no panel"
        assert any(f"`{n}`" in docs for n in names), f"{family}: not in docs/monitoring.md"


def test_the_alert_rules_are_complete_and_documented() -> None:
    docs = DOCS.read_text()
    headings = set(re.findall(r"^### (\w+)$", docs, flags=re.MULTILINE))
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names))
    for rule in alert_rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), name
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        assert annotations["runbook_url"] == f"docs/monitoring.md#{name.lower()}", name
        assert name in headings, f"{name}: no runbook section '### {name}' in the docs"
        # The shipped rules wait before paging; only the info-level one fires at once.
        if rule["labels"]["severity"] != "info":
            assert rule.get("for") in ("1m", "2m", "5m", "10m", "15m"), name
    # The job name appears only where nothing else can select pyscheduler's targets.
    with_job = {r["alert"] for r in alert_rules() if "job=" in r["expr"]}
    assert with_job == {"PySchedulerDown", "PySchedulerInstanceDown"}
    assert all(f'job="{JOB}"' in r["expr"] for r in alert_rules() if r["alert"] in with_job)


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMETHEUS)
@pytest.mark.parametrize("variant", ["shipped", "test copy"])
def test_promtool_checks_the_rules(tmp_path: Path, variant: str) -> None:
    rules = {"groups": rule_groups()} if variant == "shipped" else rules_without_for()
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in done.stdout


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kustomize_renders_the_rule_and_the_dashboard_config_map() -> None:
    done = subprocess.run([str(KUBECTL), "kustomize", str(MONITORING)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(done.stdout)}
    rule = objects[("PrometheusRule", "pyscheduler")]
    assert rule["metadata"]["namespace"] == "pyscheduler-system"
    assert rule["spec"]["groups"] == rule_groups()
    cm = objects[("ConfigMap", "pyscheduler-grafana-dashboard")]
    assert cm["metadata"]["namespace"] == "pyscheduler-system"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"] == {"pyscheduler.json": DASHBOARD_FILE.read_text()}


# -- against Prometheus ----------------------------------------------------------------------------

def test_every_panel_query_returns_data(stack: Stack) -> None:
    prom = stack.prometheus
    targets = [(title, ref, concrete(expr)) for title, ref, expr in panel_targets()]
    empty: list[str] = []

    def all_have_data() -> bool:
        empty.clear()
        empty.extend(f"{title} [{ref}]: {expr}" for title, ref, expr in targets
                     if not finite(prom.query(expr)))
        return not empty
    with contextlib.suppress(AssertionError):
        wait_for(all_have_data, timeout=30, interval=1.0, what="every panel to have data")
    assert not empty, "panels without data:\n" + "\n".join(empty)


def test_every_alert_expression_is_valid(stack: Stack) -> None:
    prom = stack.prometheus
    for rule in alert_rules():
        prom.query(rule["expr"])  # raises on a parse or evaluation error

    def evaluated() -> list[dict[str, Any]]:
        groups = prom.api("rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules if rules and all(r["health"] != "unknown" for r in rules) else []
    rules = wait_for(evaluated, timeout=20, interval=0.5, what="every rule to be evaluated")
    assert {r["name"] for r in rules} == {r["alert"] for r in alert_rules()}
    assert all(r["health"] == "ok" for r in rules), [
        (r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]


def test_the_provoked_alerts_fire_and_the_others_do_not(stack: Stack) -> None:
    prom = stack.prometheus
    missing: list[str] = []

    def all_firing() -> bool:
        missing[:] = [name for name, labels in PROVOKED.items()
                      if not firing_with(prom, name, labels)]
        return not missing
    with contextlib.suppress(AssertionError):
        wait_for(all_firing, timeout=30, interval=1.0, what="the provoked alerts")
    assert not missing, f"not firing: {missing}; firing: " + json.dumps(
        [a["labels"] for a in prom.firing()])
    quiet = [a["labels"] for a in prom.firing() if a["labels"]["alertname"] in QUIET]
    assert not quiet, quiet
    # The traps and the load failure are about those fragments alone.
    failing = {a["labels"]["fragment"] for a in prom.firing()
               if a["labels"]["alertname"] in ("PySchedulerFragmentCallsFailing",
                                                "PySchedulerFragmentLoadFailed")}
    assert failing == {"trap-v1.0.0", "broken-v1.0.0"}


def test_deleting_the_failed_fragment_resolves_its_alert(stack: Stack) -> None:
    prom = stack.prometheus
    assert firing_with(prom, "PySchedulerFragmentLoadFailed", {"fragment": "broken-v1.0.0"})
    client.CustomObjectsApi(stack.api).delete_cluster_custom_object(
        GROUP, VERSION, PLURAL, "broken-v1.0.0")
    wait_for(lambda: not prom.query('pyscheduler_fragment_loads_total{fragment="broken-v1.0.0"}')
             and not firing_with(prom, "PySchedulerFragmentLoadFailed", {}), timeout=20,
             interval=0.5, what="the deleted fragment's series and alert to go")
    assert firing_with(prom, "PySchedulerFragmentCallsFailing", {"fragment": "trap-v1.0.0"})


def test_losing_the_lease_then_stopping_fires_no_leader_then_down(stack: Stack) -> None:
    """Runs last: the scheduler loses its lease to another holder, then stops."""
    prom = stack.prometheus
    assert not firing_with(prom, "PySchedulerNoLeader", {})
    coordination = client.CoordinationV1Api(stack.api)
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    coordination.patch_namespaced_lease(SCHEDULER, "kube-system", {"spec": {
        "holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
        "acquireTime": now, "renewTime": now}})
    wait_for(lambda: stack.scheduler.call(lambda: stack.scheduler.app.lost_leadership.is_set()),
             timeout=20, what="the scheduler to lose the lease")
    wait_for(lambda: firing_with(prom, "PySchedulerNoLeader", {"job": JOB}), timeout=20,
             interval=0.5, what="PySchedulerNoLeader to fire")
    assert not firing_with(prom, "PySchedulerDown", {})

    stack.running = False
    stack.scheduler.stop(release=False)
    wait_for(lambda: firing_with(prom, "PySchedulerDown", {})
             and firing_with(prom, "PySchedulerInstanceDown", {"job": JOB}), timeout=20,
             interval=0.5, what="PySchedulerDown and PySchedulerInstanceDown to fire")
    # With no target up, the leader alert has nothing left to judge: the absence alert speaks.
    wait_for(lambda: not firing_with(prom, "PySchedulerNoLeader", {}), timeout=20,
             interval=0.5, what="PySchedulerNoLeader to resolve once nothing is scraped")
