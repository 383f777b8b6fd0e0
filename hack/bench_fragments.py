"""Fragment benchmarks (figures, no assertions).

* ``algorithm``: the scheduling algorithm at N nodes (4 CPU / 32Gi / 110 pods, pods of
  100m / 500Mi, as scheduler_perf) with the built-in profile alone, with a fragment overriding
  the filter and score stages (``replace``), and with it beside them (``extend``, the product's
  default for the packaged default fragment). The three take turns, 250 pods at a time, each on
  its own identical cache. Reports pods/s (overall, the best turn, and against the built-in),
  attempt latency, and per stage call the time inside the guest (the call included) and the
  host's own overhead (writing changed rows and the pod record, reading and checking outputs).
* ``stages``: the wall time of one call of each stage at N nodes (median and p99 over
  ``--calls`` calls, after a warm-up), through ``Fragment.call_sync`` (the host's whole path:
  ``begin()`` writing the pod record and the changed rows, the call, the answer read and
  checked), and the time in the guest (the call included). Each call is for a new pod, and the
  pod of the previous call is assumed on a node in between, so one row changed since the
  previous call, as when scheduling. filter and score: the default fragment. prefilter,
  postfilter, permit and unreserve: the gang example in C and in AssemblyScript, with 0 and 100
  pods of the called pod's group in the ``waiting`` text (then postfilter and unreserve write
  100 ``reject`` commands; a permit that completes the group, 100 ``allow`` commands). Every
  lifecycle stage: a minimal module (WAT, built here) that answers at once, the host's floor;
  and, for comparison, the same calls awaited through ``Fragment.call`` with the product's
  ``fragments.inlineCallMilliseconds`` (on the loop with wasmtime; wasmer has no deadline, so
  there they go to the fragment's worker thread, as in the scheduler).
* ``swap``: an embedded cluster and a scheduler; v1 of a fragment serves pods following its name
  while they are created, v2 is applied mid-way. Reports resource applied -> Ready (serving)
  and the attempts that failed during the swap.

Both runtimes: ``--runtime wasmer`` needs Python 3.10 (``make bench`` runs it from .venv310 when
that environment exists).

    python hack/bench_fragments.py algorithm --nodes 5000 --pods 3000
    python hack/bench_fragments.py stages --nodes 5000 --calls 2000
    python hack/bench_fragments.py swap --pods 1000
    python hack/bench_fragments.py algorithm stages --runtime wasmer
"""

from __future__ import annotations

import argparse
import asyncio
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
from pyscheduler.settings import FragmentsConfig  # noqa: E402
from pyscheduler.wasm.abi import StageAnswer  # noqa: E402
from pyscheduler.wasm.fragment import Fragment  # noqa: E402
from tests.wat import ALLOC_WAT  # noqa: E402

DEFAULT = ROOT / "pyscheduler" / "wasm" / "fragments" / "default-v1.0.0.wasm"
GANG = {"C": ROOT / "fragments" / "examples" / "gang" / "gang.wasm",
        "AssemblyScript": ROOT / "fragments" / "assemblyscript" / "examples" / "gang" / "gang.wasm"}


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


# -- stages: the per-call cost of each extension point ---------------------------------------------

LIFECYCLE = ("prefilter", "postfilter", "reserve", "unreserve", "permit", "prebind", "postbind")
GANG_STAGES = ("prefilter", "postfilter", "permit", "unreserve")
ON_A_NODE = ("reserve", "unreserve", "permit", "prebind", "postbind")  # called with node_row
GROUP_LABEL, MIN_ANNOTATION = "pod-group.wssp.io/name", "pod-group.wssp.io/min-member"
#: Context fields of ABI minor 3 (fragments/ABI.md §4): answer, output, output_len.
_ANSWER, _OUTPUT, _OUTPUT_LEN = 112, 144, 148
_LABEL_LINE = "label example.com/tier=gold"


def minimal_wat() -> str:
    """A module exporting every lifecycle stage, each answering 0 at once (prebind with one
    label command): what the host costs per call of each stage, the guest doing nothing."""
    funcs = []
    for stage in LIFECYCLE:
        body = [f"(i32.store offset={_ANSWER} (local.get $ctx) (i32.const 0))"]
        if stage == "prebind":
            body += [f"(i32.store offset={_OUTPUT} (local.get $ctx) (i32.const 1024))",
                     f"(i32.store offset={_OUTPUT_LEN} (local.get $ctx) "
                     f"(i32.const {len(_LABEL_LINE)}))"]
        funcs.append(f'(func (export "wssp_{stage}") (param $ctx i32) (result i32)\n  '
                     + "\n  ".join(body) + "\n  (i32.const 0))")
    return f"""
(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 1024) "{_LABEL_LINE}")
  (func (export "wssp_abi_v1") (result i32) (i32.const 3))
{ALLOC_WAT}  (func (export "wssp_init") (param $ctx i32) (param i32 i32) (result i32) (i32.const 0))
  {chr(10).join(funcs)}
)"""


def wat2wasm(text: str) -> bytes:
    try:
        import wasmtime
        return bytes(wasmtime.wat2wasm(text))
    except ImportError:  # a wasmer-only environment
        import wasmer
        return bytes(wasmer.wat2wasm(text))


def gang_pod(i: int, min_member: int) -> dict[str, Any]:
    obj = pod_obj(i, "trainer")
    obj["metadata"]["labels"] = {GROUP_LABEL: "trainer", "app": "trainer"}
    obj["metadata"]["annotations"] = {MIN_ANNOTATION: str(min_member)}
    return obj


def waiting_text(n: int, nodes: int) -> bytes:
    """``n`` reserved members of the group bench/trainer, as the host lists pods waiting at a
    fragment's permit: ``<uid> <namespace>/<name> <node> <labels>``."""
    return "\n".join(
        f"trainer-w{j} bench/trainer-w{j} node-{j % nodes} "
        f"app=trainer,batch.kubernetes.io/job-completion-index={j},{GROUP_LABEL}=trainer"
        for j in range(n)).encode()


class _Stages:
    """One node table (filled as the algorithm mode fills it) shared by every module measured:
    each call is for a new pod, and that pod is assumed on a node after the call."""

    def __init__(self, nodes: int, initial: int, calls: int, warmup: int) -> None:
        self.nodes, self.calls, self.warmup = nodes, calls, warmup
        self.cache = Cache()
        for i in range(nodes):
            self.cache.set_node(node_info(node_obj(i)))
        for i in range(initial):
            self.cache.add_pod(pod_info(pod_obj(i, "init", f"node-{i % nodes}")))
        self.serial = 0

    def _next(self, gang: int | None) -> tuple[Any, str, int]:
        """A new pod (of the gang with that min-member, or a plain one), its node and row."""
        self.serial += 1
        i = self.serial
        pod = pod_info(gang_pod(i, gang) if gang else pod_obj(i, "p"))
        node = f"node-{i % self.nodes}"
        return pod, node, self.cache.table.slots[node]

    def _figures(self, totals: list[float], guest: list[float]) -> dict[str, Any]:
        t, g = np.array(totals[self.warmup:]) * 1e6, np.array(guest[self.warmup:]) * 1e6
        return {"median_us": float(np.median(t)), "p99_us": float(np.percentile(t, 99)),
                "mean_us": float(t.mean()),
                "guest_median_us": float(np.median(g)) if len(g) else None,
                "calls": len(t)}

    def filter_score(self, frag: Fragment) -> dict[str, dict[str, Any]]:
        """The default fragment's filter then score call for each pod, as one cycle makes them."""
        times: dict[str, list[float]] = {"filter": [], "score": []}
        inside: dict[str, list[float]] = {"filter": [], "score": []}
        for _ in range(self.calls + self.warmup):
            pod, node, _ = self._next(None)
            ctx = CycleContext.for_pod(pod, self.cache.table)
            guest = frag.prepare(self.cache.table)
            g0, t0 = guest.guest_seconds, time.perf_counter()
            verdict = frag.filter(ctx)
            g1, t1 = guest.guest_seconds, time.perf_counter()
            feasible = verdict.passed if verdict.passed is not None else \
                self.cache.table.valid[: self.cache.table.n]
            frag.score(ctx, feasible)
            g2, t2 = guest.guest_seconds, time.perf_counter()
            times["filter"].append(t1 - t0)
            times["score"].append(t2 - t1)
            inside["filter"].append(g1 - g0)
            inside["score"].append(g2 - g1)
            self.cache.assume(pod, node)
        return {s: self._figures(times[s], inside[s]) for s in times}

    def lifecycle(self, frag: Fragment, stage: str, waiting: bytes, gang: int | None,
                  ) -> dict[str, Any]:
        """``stage`` through call_sync, a new pod each call."""
        totals, inside = [], []
        answer: StageAnswer | None = None
        for _ in range(self.calls + self.warmup):
            pod, node, row = self._next(gang)
            ctx = CycleContext.for_pod(pod, self.cache.table)
            guest = frag.prepare(self.cache.table)
            g0, t0 = guest.guest_seconds, time.perf_counter()
            answer = frag.call_sync(stage, ctx, node_row=row if stage in ON_A_NODE else None,
                                    waiting=waiting, cause=3 if stage == "unreserve" else 0)
            totals.append(time.perf_counter() - t0)
            inside.append(guest.guest_seconds - g0)
            self.cache.assume(pod, node)
        out = self._figures(totals, inside)
        if answer is not None:
            out["answer"] = answer.code
            out["commands"] = len(answer.commands)
        return out

    def awaited(self, frag: Fragment, stages: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """Each of ``stages`` awaited through Fragment.call, as the scheduler makes the calls
        after filtering, with the product's inline bound; all on one event loop."""
        frag.inline_seconds = FragmentsConfig().inline_call_seconds
        totals: dict[str, list[float]] = {stage: [] for stage in stages}

        async def run() -> None:
            for stage in stages:
                for _ in range(self.calls + self.warmup):
                    pod, node, row = self._next(None)
                    ctx = CycleContext.for_pod(pod, self.cache.table)
                    t0 = time.perf_counter()
                    result = await frag.call(
                        stage, ctx, node_row=row if stage in ON_A_NODE else None,
                        cause=3 if stage == "unreserve" else 0)
                    totals[stage].append(time.perf_counter() - t0)
                    if not isinstance(result, StageAnswer):
                        raise RuntimeError(f"{stage}: {result}")
                    self.cache.assume(pod, node)
        try:
            asyncio.run(run())
        finally:
            frag.stop()
        path = "worker thread" if frag.offloaded or not frag.prepare(
            self.cache.table).instance.deadlines else "inline"
        out = {}
        for stage in stages:
            out[stage] = self._figures(totals[stage], [])
            out[stage]["path"] = path
        return out


def run_stages(nodes: int, initial: int, calls: int, runtime: str,
               warmup: int = 50) -> list[dict[str, Any]]:
    bench = _Stages(nodes, initial, calls, warmup)
    table = bench.cache.table
    rows: list[dict[str, Any]] = []

    def row(stage: str, module: str, waiting: int | None, figures: dict[str, Any],
            path: str = "call_sync") -> None:
        rows.append({"scenario": f"stage {stage} / {module}"
                                 + (f" / {waiting} waiting" if waiting is not None else "")
                                 + f" / {path} ({nodes} nodes, {runtime})",
                     "stage": stage, "module": module, "waiting": waiting, "path": path,
                     **figures})

    default = Fragment.load(DEFAULT.read_bytes(), name="default", runtime=runtime, table=table)
    for stage, figures in bench.filter_score(default).items():
        row(stage, "default fragment", None, figures)

    minimal_wasm = wat2wasm(minimal_wat())
    minimal = Fragment.load(minimal_wasm, name="minimal", filter=False, score=False,
                            runtime=runtime, table=table)
    texts = {n: waiting_text(n, nodes) for n in (0, 100)}
    for stage in LIFECYCLE:
        for n in (0, 100) if stage != "prebind" else (0,):  # prebind is given no waiting pods
            row(stage, "minimal (WAT)", n, bench.lifecycle(minimal, stage, texts[n], None))

    for build, path in GANG.items():
        frag = Fragment.load(path.read_bytes(), name=f"gang-{build}", filter=False,
                             score=False, runtime=runtime, table=table)
        for stage in GANG_STAGES:
            for n in (0, 100):
                # min-member 128: the group is still assembling (permit waits)
                row(stage, f"gang ({build})", n, bench.lifecycle(frag, stage, texts[n], 128))
        # the member that completes the group: permit allows the 100 waiting ones
        row("permit", f"gang ({build}), completing the group", 100,
            bench.lifecycle(frag, "permit", texts[100], 101))

    awaited = Fragment.load(minimal_wasm, name="minimal-awaited", filter=False, score=False,
                            runtime=runtime, table=table)
    for stage, figures in bench.awaited(awaited, LIFECYCLE).items():
        row(stage, "minimal (WAT)", 0, figures, f"awaited Fragment.call ({figures.pop('path')})")
    return rows


def print_stages(rows: list[dict[str, Any]]) -> None:
    """The per-call figures as one table."""
    print(f"\n== per-call cost of fragment stages ({rows[0]['scenario'].rsplit('(', 1)[1]}")
    print(f"  {'stage':10s} {'module':42s} {'waiting':>7s}  {'median µs':>9s} {'p99 µs':>8s} "
          f"{'mean µs':>8s} {'guest µs':>8s}  path")
    for r in rows:
        waiting = "–" if r["waiting"] is None else str(r["waiting"])
        guest = "–" if r.get("guest_median_us") is None else f"{r['guest_median_us']:.1f}"
        extra = f"  (answer {r['answer']}, {r['commands']} commands)" if r.get("commands") else ""
        print(f"  {r['stage']:10s} {r['module']:42s} {waiting:>7s}  {r['median_us']:9.1f} "
              f"{r['p99_us']:8.1f} {r['mean_us']:8.1f} {guest:>8s}  {r['path']}{extra}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="+", choices=["algorithm", "stages", "swap", "all"])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--initial", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--calls", type=int, default=2000,
                        help="stages: timed calls per stage and module (after 50 warm-up calls)")
    parser.add_argument("--runtime", default="wasmtime", choices=["wasmtime", "wasmer"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modes = {"algorithm", "stages", "swap"} if "all" in args.mode else set(args.mode)
    results = []
    if "algorithm" in modes:
        results.extend(run_algorithm(args.nodes, args.initial, args.pods, args.runtime))
    stages = run_stages(args.nodes, args.initial, args.calls, args.runtime) \
        if "stages" in modes else []
    if "swap" in modes:
        results.append(run_swap(min(args.pods, 1000)))
    for r in results:
        print(f"\n== {r['scenario']}")
        for k, v in r.items():
            if k != "scenario":
                print(f"  {k:32s} {json.dumps(v) if isinstance(v, dict) else round(v, 3)}")
    if stages:
        print_stages(stages)
    if args.json:
        args.json.write_text(json.dumps(results + stages, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
