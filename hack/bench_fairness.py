"""Fairness benchmark: pods that do not name a slow fragment, with and without pods that do.

A fragment whose every call takes 90 % of its deadline must hurt only the pods that name it.
This runs ``pyscheduler sim up`` and ``pyscheduler run`` in separate processes (bound pods stay
Pending, as on scheduler_perf's fake nodes), then, in turns on the same cluster:

* **alone**: ``--pods`` unrelated pods are created and their binding rate measured;
* **beside slow**: ``--slow-pods`` pods naming the slow fragment are created first, then the same
  number of unrelated pods, whose binding rate is measured while the slow pods wait for their
  calls.

The slow fragment (a WAT module written here) spins in ``wssp_filter`` for a number of loop
iterations calibrated on this machine so that one call takes ``--share`` (default 0.9) of the
resource's deadline (``--timeout-ms``, default 250, the scheduler's default); quarantine is
turned off, so that the slow pods keep their fragment busy even when a call overruns. Turns
alternate so
that the machine's slow spells hit both alike. Prints the rates of each turn, their medians and
the ratio (target: at least 0.8). Figures only, no assertions.

    python hack/bench_fairness.py --nodes 1000 --pods 3000 --turns 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_apiserver import (  # noqa: E402
    Client,
    cpu_seconds,
    fake_nodes_and_scheduler,
    run_pool,
)

REPO = Path(__file__).resolve().parents[1]
CRD = REPO / "manifests" / "crd-wsspschedulerconfiguration.yaml"
RESOURCES = "/apis/wssp.pyscheduler.io/v1alpha1/wsspschedulerconfigurations"
SLOW = "spin-v1.0.0"

# wssp_init reads the first decimal number in the config JSON ({"spin": N}); wssp_filter counts
# to it, then lets every node pass (minor 1: the zeroed verdicts are the guest's answer).
SPIN_WAT = """
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $spin (mut i64) (i64.const 0))
  (func (export "wssp_abi_v1") (result i32) (i32.const 1))
  (func (export "wssp_alloc") (param $size i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $ptr) (local.get $size))
                                        (i32.const 7)) (i32.const -8)))
    (block $ok
      (loop $grow
        (br_if $ok (i32.le_u (global.get $heap) (i32.shl (memory.size) (i32.const 16))))
        (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))
        (return (i32.const 0))))
    (local.get $ptr))
  (func (export "wssp_init") (param $ctx i32) (param $cfg i32) (param $len i32) (result i32)
    (local $i i32) (local $c i32) (local $n i64) (local $seen i32)
    (block $done (loop $scan
      (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
      (local.set $c (i32.load8_u (i32.add (local.get $cfg) (local.get $i))))
      (if (i32.and (i32.ge_u (local.get $c) (i32.const 48)) (i32.le_u (local.get $c) (i32.const 57)))
        (then (local.set $n (i64.add (i64.mul (local.get $n) (i64.const 10))
                                     (i64.extend_i32_u (i32.sub (local.get $c) (i32.const 48)))))
              (local.set $seen (i32.const 1)))
        (else (br_if $done (local.get $seen))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $scan)))
    (global.set $spin (local.get $n))
    (i32.const 0))
  (func (export "wssp_filter") (param $ctx i32) (result i32)
    (local $k i64)
    (block $done (loop $spin
      (br_if $done (i64.ge_u (local.get $k) (global.get $spin)))
      (local.set $k (i64.add (local.get $k) (i64.const 1)))
      (br $spin)))
    (i32.const 0))
)
"""


def calibrate(module: bytes, seconds: float) -> int:
    """Loop iterations for one ``wssp_filter`` call to take ``seconds`` here, measured the way
    the scheduler calls it (wasmtime, fuel on, epoch deadline armed)."""
    from pyscheduler.framework.interface import CycleContext
    from pyscheduler.framework.nodetable import NodeTable, node_info
    from pyscheduler.framework.pod import pod_info
    from pyscheduler.wasm.fragment import Fragment
    from pyscheduler.wasm.vm import Limits

    table = NodeTable()
    table.set_node(node_info({"metadata": {"name": "n"}, "status": {"allocatable": {
        "cpu": "4", "memory": "32Gi", "pods": "110"}}}))
    ctx = CycleContext.for_pod(pod_info({"metadata": {"name": "p", "uid": "u"}, "spec": {
        "containers": [{"name": "c"}]}}), table)
    spin = 1_000_000
    for _ in range(6):
        frag = Fragment.load(module, config={"spin": spin}, score=False, table=table,
                             limits=Limits(fuel=2**62, timeout_seconds=10.0))
        took = min(_timed(lambda: frag.filter(ctx)) for _ in range(3))
        spin = max(1000, int(spin * seconds / took))
    return spin


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


async def _fragment_calls(port: int) -> dict[str, float]:
    """The slow fragment's filter calls by result, from the scheduler's /metrics."""
    import aiohttp

    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
            text = await r.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("pyscheduler_fragment_calls_total{") and f'"{SLOW}"' in line:
            result = line.split('result="', 1)[1].split('"', 1)[0]
            value = float(line.rsplit(" ", 1)[1])
            if value:
                out[result] = value
    return out


def pod(name: str, fragment: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if fragment:
        meta["annotations"] = {"wssp/schedulefragment": fragment}
    return {"metadata": meta, "spec": {"schedulerName": "pyscheduler", "containers": [{
        "name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


async def _run(args: argparse.Namespace, workdir: Path, module_dir: Path, spin: int,
               sched_pid: int) -> dict[str, Any]:
    c = Client(workdir / "kubeconfig", args.concurrency)
    try:
        await c.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        status, resp = await c.request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            yaml.safe_load(CRD.read_text()))
        body = {"apiVersion": "wssp.pyscheduler.io/v1alpha1",
                "kind": "WsspSchedulerConfiguration", "metadata": {"name": SLOW},
                "spec": {"url": (module_dir / "spin.wasm").as_uri(),
                         "stages": {"filter": {"mode": "extend"}}, "config": {"spin": spin},
                         "limits": {"timeoutMilliseconds": args.timeout_ms, "fuel": 2**62},
                         "failurePolicy": "Ignore"}}
        for _ in range(100):
            status, resp = await c.request("POST", RESOURCES, body)
            if status in (201, 409):
                break
            await asyncio.sleep(0.1)
        for _ in range(300):
            status, resp = await c.request("GET", f"{RESOURCES}/{SLOW}")
            if status == 200 and (orjson.loads(resp).get("status") or {}).get("phase") == "Ready":
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"the slow fragment did not become Ready: {resp[:300]!r}")

        async def create(names: list[str], fragment: str | None = None) -> None:
            async def one(i: int) -> None:
                status, resp = await c.request("POST", "/api/v1/namespaces/bench/pods",
                                               pod(names[i], fragment))
                if status != 201:
                    raise RuntimeError(f"create failed {status}: {resp[:200]!r}")
            await run_pool(len(names), args.concurrency, one)

        async def bound_rate(prefix: str, n: int) -> float:
            """Pods named ``prefix*`` bound per second, from the first to the last binding."""
            times: list[float] = []
            status, resp = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
            rv = orjson.loads(resp)["metadata"]["resourceVersion"]
            url = (f"{c.base}/api/v1/namespaces/bench/pods?watch=true&resourceVersion={rv}"
                   f"&timeoutSeconds=600")
            start = time.monotonic()

            async def follow() -> None:
                async with c.session.get(url) as r:
                    async for line in r.content:
                        ev = orjson.loads(line)
                        obj = ev["object"]
                        if ev["type"] == "MODIFIED" and obj["spec"].get("nodeName") and \
                                obj["metadata"]["name"].startswith(prefix):
                            times.append(time.monotonic())
                            if len(times) >= n:
                                return
            watcher = asyncio.create_task(follow())
            await create([f"{prefix}{i}" for i in range(n)])
            await asyncio.wait_for(watcher, 600)
            return n / (times[-1] - start)

        async def slow_done(prefix: str) -> None:
            """Every slow pod of this turn bound (each after its call), so that the next
            turn's unrelated pods are alone again."""
            while True:
                status, resp = await c.request(
                    "GET", "/api/v1/namespaces/bench/pods?fieldSelector=spec.nodeName%3D")
                items = orjson.loads(resp)["items"]
                if not any(p["metadata"]["name"].startswith(prefix) for p in items):
                    return
                await asyncio.sleep(0.2)

        turns: list[dict[str, float]] = []
        cpu0 = cpu_seconds(sched_pid)
        for turn in range(args.turns):
            alone = await bound_rate(f"a{turn}-", args.pods)
            await create([f"s{turn}-{i}" for i in range(args.slow_pods)], SLOW)
            await asyncio.sleep(0.05)
            beside = await bound_rate(f"b{turn}-", args.pods)
            await slow_done(f"s{turn}-")
            turns.append({"alone": alone, "beside_slow": beside, "ratio": beside / alone})
            print(f"turn {turn + 1}: alone {alone:.0f} pods/s, beside {args.slow_pods} slow "
                  f"pods {beside:.0f} pods/s ({beside / alone:.2f} x)", flush=True)
        cpu = cpu_seconds(sched_pid) - cpu0
        calls = await _fragment_calls(args.metrics_port)
        alone_median = statistics.median(t["alone"] for t in turns)
        beside_median = statistics.median(t["beside_slow"] for t in turns)
        return {
            "scenario": f"fairness {args.nodes} nodes / {args.pods} unrelated pods per turn / "
                        f"{args.slow_pods} pods naming a fragment at {args.share:.0%} of "
                        f"{args.timeout_ms} ms",
            "spin_iterations": spin,
            "turns": turns,
            "alone_pods_per_second_median": alone_median,
            "beside_slow_pods_per_second_median": beside_median,
            "ratio_of_medians": beside_median / alone_median,
            "scheduler_cpu_seconds": cpu,
            "slow_fragment_calls_by_result": calls,
        }
    finally:
        await c.session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000, help="unrelated pods per measurement")
    parser.add_argument("--slow-pods", type=int, default=20)
    parser.add_argument("--timeout-ms", type=int, default=250)
    parser.add_argument("--share", type=float, default=0.9,
                        help="share of the deadline one slow call takes")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--call-thread-nice", type=int, default=None,
                        help="the scheduler's fragments.callThreadNice (default: its default)")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    args.fragment_settings = {} if args.call_thread_nice is None else {
        "callThreadNice": args.call_thread_nice}

    import wasmtime

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        module = bytes(wasmtime.wat2wasm(SPIN_WAT))
        (workdir / "spin.wasm").write_bytes(module)
        spin = calibrate(module, args.share * args.timeout_ms / 1000)
        print(f"calibrated: {spin} iterations per call for {args.share:.0%} of "
              f"{args.timeout_ms} ms", flush=True)
        args.metrics_port = 10300 + os.getpid() % 1000
        with fake_nodes_and_scheduler(workdir, args.nodes, {
                "leaderElection": {"enabled": False},
                "metricsAddress": f"127.0.0.1:{args.metrics_port}",
                "logLevel": "warning", "scheduleFragment": None,
                # Calls that overrun under load must not get the fragment quarantined: its
                # pods are to keep the scheduler busy for the whole measurement.
                "fragments": {"quarantineAfterFailures": 1_000_000, **args.fragment_settings},
                "storage": {"allowedFileDirs": [str(workdir)]}}) as (_, sched):
            result = asyncio.run(_run(args, workdir, workdir, spin, sched.pid))
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
