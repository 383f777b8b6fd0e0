"""Fragment benchmarks (figures, no assertions).

* ``algorithm``: the scheduling algorithm at N nodes (4 CPU / 32Gi / 110 pods, pods of
  100m / 500Mi, as scheduler_perf) with the built-in profile alone, with a fragment overriding
  the filter and score stages (``replace``), and with it beside them (``extend``, the product's
  default for the packaged default fragment). The three take turns, 250 pods at a time, each on
  its own identical cache. Reports pods/s (overall, the best turn, and against the built-in),
  attempt latency, and per stage call the time inside the guest (the call included) and the
  host's own overhead (writing changed rows and the pod record, reading and checking outputs).
* ``swap``: an embedded cluster and a scheduler; v1 of a fragment serves pods following its name
  while they are created, v2 is applied mid-way. Reports resource applied -> Ready (serving)
  and the attempts that failed during the swap.

Both runtimes: ``--runtime wasmer`` needs Python 3.10 (``make bench`` runs it from .venv310 when
that environment exists).

    python hack/bench_fragments.py algorithm --nodes 5000 --pods 3000
    python hack/bench_fragments.py swap --pods 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyscheduler.config import parse_config  # noqa: E402
from pyscheduler.framework.cache import Cache  # noqa: E402
from pyscheduler.framework.interface import CycleContext  # noqa: E402
from pyscheduler.framework.nodetable import node_info  # noqa: E402
from pyscheduler.framework.pipeline import Pipeline, StageOverride  # noqa: E402
from pyscheduler.framework.pod import pod_info  # noqa: E402
from pyscheduler.plugins.registry import build_profile  # noqa: E402
from pyscheduler.wasm.fragment import Fragment  # noqa: E402

DEFAULT = ROOT / "pyscheduler" / "wasm" / "fragments" / "default-v1.0.0.wasm"


def node_obj(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"node-{i}", "labels": {
        "kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}}


def pod_obj(i: int, prefix: str = "pod", node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause", "resources": {
        "requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": f"{prefix}-{i}", "namespace": "bench", "uid": f"{prefix}-{i}"},
            "spec": spec}


class _Run:
    """One mode's scheduler state: its own cache (filled the same way as the others'), pipeline
    and, for the fragment modes, a fragment whose stage calls are timed."""

    def __init__(self, nodes: int, initial: int, mode: str, runtime: str) -> None:
        self.mode = mode
        self.cache = Cache()
        for i in range(nodes):
            self.cache.set_node(node_info(node_obj(i)))
        for i in range(initial):
            self.cache.add_pod(pod_info(pod_obj(i, "init", f"node-{i % nodes}")))
        self.pipeline = Pipeline(build_profile(parse_config({}, "bench")), seed=1)
        self.override: StageOverride | None = None
        self.fragment: Fragment | None = None
        self.stage_seconds = 0.0
        self.stage_calls = 0
        self.seconds = 0.0
        self.pods = 0
        self.latencies: list[float] = []
        self.chunk_rates: list[float] = []
        if mode != "builtin":
            frag = self.fragment = Fragment.load(DEFAULT.read_bytes(), name="default",
                                                 runtime=runtime, table=self.cache.table)

            def timed_filter(ctx: CycleContext) -> Any:
                t = time.perf_counter()
                out = frag.filter(ctx)
                self.stage_seconds += time.perf_counter() - t
                self.stage_calls += 1
                return out

            def timed_score(ctx: CycleContext, feasible: Any) -> Any:
                t = time.perf_counter()
                out = frag.score(ctx, feasible)
                self.stage_seconds += time.perf_counter() - t
                self.stage_calls += 1
                return out

            self.override = StageOverride(
                "fragment:default", filter=timed_filter, filter_mode=mode,  # type: ignore[arg-type]
                score=timed_score, score_mode=mode)  # type: ignore[arg-type]

    def schedule(self, pods: list[Any]) -> None:
        start = time.perf_counter()
        for pod in pods:
            t = time.perf_counter()
            result = self.pipeline.schedule(CycleContext.for_pod(pod, self.cache.table),
                                            self.override)
            if result.node is not None:
                self.cache.assume(pod, result.node)
            self.latencies.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        self.pods += len(pods)
        self.chunk_rates.append(len(pods) / elapsed)

    def report(self, nodes: int, initial: int, runtime: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario": f"{self.mode} {nodes} nodes / {initial} initial / {self.pods} pods"
                        + (f" ({runtime})" if self.fragment else ""),
            "pods_per_second": self.pods / self.seconds,
            "best_chunk_pods_per_second": max(self.chunk_rates),
            "attempt_ms": {f"p{q}": float(np.percentile(self.latencies, q)) * 1000
                           for q in (50, 99)},
        }
        if self.fragment is not None:
            guest = self.fragment.prepare(self.cache.table)
            out["stage_call_us"] = self.stage_seconds / max(self.stage_calls, 1) * 1e6
            out["guest_us_per_call"] = guest.guest_seconds / max(guest.guest_calls, 1) * 1e6
            out["host_overhead_us_per_call"] = out["stage_call_us"] - out["guest_us_per_call"]
            out["instances"] = self.fragment.stats.instances
        return out


def run_algorithm(nodes: int, initial: int, pods: int, runtime: str,
                  chunk: int = 250) -> list[dict[str, Any]]:
    """The three modes, each on its own identical cache, scheduling the same pods in turns of
    ``chunk`` pods: a shared machine's slow spells then hit every mode alike, and the ratios
    between them hold even when the absolute figures move."""
    runs = [_Run(nodes, initial, mode, runtime) for mode in ("builtin", "replace", "extend")]
    parsed = [pod_info(pod_obj(i)) for i in range(pods)]
    for first in range(0, pods, chunk):
        for run in runs:
            run.schedule(parsed[first: first + chunk])
    results = [run.report(nodes, initial, runtime) for run in runs]
    builtin = results[0]["pods_per_second"]
    for r in results[1:]:
        r["throughput_vs_builtin"] = r["pods_per_second"] / builtin
    return results


def run_swap(pods: int) -> dict[str, Any]:
    """Hot swap under load on an embedded cluster (in this process, its own event loops)."""
    import collections
    import concurrent.futures
    import tempfile
    import threading

    import yaml
    from kubernetes import client, config

    sys.path.insert(0, str(ROOT / "tests"))
    from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
    from pyscheduler_sim.harness import BackgroundCluster
    from pyscheduler.wasm.resource import CRD_PATH, GROUP, PLURAL, VERSION
    from tests.conftest import SchedulerThread, wait_for
    from tests.integration.test_fragments import make_pod, publish, status, uniform_wat, wat_bytes

    spec = ClusterSpec(pools=[PoolSpec(name="node", count=24, cpu="64", memory="256Gi")],
                       run_pods=False, lease_renew_seconds=5)
    with tempfile.TemporaryDirectory() as tmp, BackgroundCluster(spec, Path(tmp) / "c") as c:
        store = Path(tmp) / "store"
        store.mkdir()
        api = config.new_client_from_config(config_file=str(c.kubeconfig))
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load(CRD_PATH.read_text()))
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        wait_for(lambda: custom.list_cluster_custom_object(GROUP, VERSION, PLURAL) is not None)
        core.create_namespace({"metadata": {"name": "swap"}})
        s = SchedulerThread(c.kubeconfig, schedulerName="frag-sched",
                            leaderElection={"enabled": False}, scheduleFragment=None,
                            logLevel="warning",
                            storage={"allowedFileDirs": [str(store)]}).start()
        try:
            publish(custom, store, "swap-v1.0.0", wat_bytes(uniform_wat(keep_parity=0)))
            wait_for(lambda: status(custom, "swap-v1.0.0").get("phase") == "Ready")
            created = threading.Semaphore(0)

            def create(i: int) -> None:
                make_pod(core, "swap", f"p{i}", "swap", cpu="10m")
                created.release()
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                futures = [pool.submit(create, i) for i in range(pods)]
                for _ in range(pods // 3):
                    created.acquire()
                applied = time.monotonic()
                publish(custom, store, "swap-v1.1.0", wat_bytes(uniform_wat(keep_parity=1)))
                wait_for(lambda: status(custom, "swap-v1.1.0").get("phase") == "Ready",
                         interval=0.005)
                ready = time.monotonic() - applied
                for f in futures:
                    f.result()
            wait_for(lambda: sum(1 for p in core.list_namespaced_pod("swap").items
                                 if p.spec.node_name) == pods, timeout=120)
            registry = s.call(lambda: s.app.metrics.registry)
            attempts = collections.Counter({r: registry.get_sample_value(
                "scheduler_schedule_attempts_total", {"result": r, "profile": "frag-sched"})
                for r in ("scheduled", "unschedulable", "error")})
            load = s.call(lambda: s.app.fragments.entries["swap-v1.1.0"].serving.fragment
                          .load_seconds)
        finally:
            s.stop()
    return {"scenario": f"hot swap under load ({pods} pods)",
            "applied_to_ready_seconds": ready, "load_seconds": load,
            "attempts": dict(attempts)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["algorithm", "swap", "all"])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--initial", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--runtime", default="wasmtime", choices=["wasmtime", "wasmer"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    if args.mode in ("algorithm", "all"):
        results.extend(run_algorithm(args.nodes, args.initial, args.pods, args.runtime))
    if args.mode in ("swap", "all"):
        results.append(run_swap(min(args.pods, 1000)))
    for r in results:
        print(f"\n== {r['scenario']}")
        for k, v in r.items():
            if k != "scenario":
                print(f"  {k:32s} {json.dumps(v) if isinstance(v, dict) else round(v, 3)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
