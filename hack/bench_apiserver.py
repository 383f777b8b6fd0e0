"""Benchmark of the embedded API server: the bind ceiling later benchmarks compare against.

Starts ``pyscheduler sim up`` in its own process with NODES nodes whose pods stay Pending once
bound (as on scheduler_perf's fake nodes; node leases are still renewed), creates PODS pods,
then, while one watcher follows every pod, binds them all from CONCURRENCY concurrent clients in
this process. Prints (measured like scheduler_perf: 1 s samples, first dropped):

* pod creation rate, bind rate (average and percentiles of the 1 s samples),
* that the watcher saw every binding,
* latency of listing all pods (one request, and paginated with limit=500),
* the server's RSS after the run and its peak.

Nothing is asserted about time: this prints figures. Usage:
    python hack/bench_apiserver.py [--nodes 5000] [--pods 20000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml


def rss_kib(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    def __init__(self, kubeconfig: Path, concurrency: int) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        cluster = cfg["clusters"][0]["cluster"]
        self.base = cluster["server"]
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        token = cfg["users"][0]["user"]["token"]
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency, ssl=ctx),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=600))

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = orjson.dumps(body) if body is not None else None
        async with self.session.request(method, self.base + path, data=data) as resp:
            return resp.status, await resp.read()


async def count_bindings(c: Client, path: str, rv: str, target: int, times: list[float],
                         done: asyncio.Event) -> None:
    """Follow pods from ``rv`` and note the time of every binding until ``target`` are seen."""
    url = (f"{c.base}{path}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"
           f"&timeoutSeconds=1800")
    async with c.session.get(url) as resp:
        async for line in resp.content:
            ev = orjson.loads(line)
            if ev["type"] == "MODIFIED" and ev["object"]["spec"].get("nodeName"):
                times.append(time.monotonic())
                if len(times) >= target:
                    done.set()
                    return


def sim_up(workdir: Path, cluster: Path, *extra: str,
           env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``pyscheduler sim up`` in its own process, returned once it listens (its first line);
    raises with what it printed when it does not start."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyscheduler.cli", "--log-level", "warning", "sim", "up",
         "--workdir", str(workdir), "--cluster", str(cluster), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if "listening" not in first:
        interrupt(proc)
        raise RuntimeError(f"the embedded cluster did not start: {first}")
    return proc


def run_scheduler(kubeconfig: Path, config: Path,
                  env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``pyscheduler run`` in its own process, its output discarded (or appended to the file
    ``$BENCH_SCHEDULER_LOG`` names)."""
    path = (env or os.environ).get("BENCH_SCHEDULER_LOG")
    out: Any = open(path, "ab") if path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "pyscheduler.cli", "run", "--kubeconfig", str(kubeconfig),
         "--config", str(config)],
        stdout=out, stderr=out, env=env)


@contextlib.contextmanager
def fake_nodes_and_scheduler(workdir: Path, nodes: int, scheduler: dict[str, Any],
                             ) -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[bytes]]]:
    """``sim up`` with ``nodes`` nodes of 4 CPU / 32Gi / 110 pods that run no pods (as
    scheduler_perf's fake nodes), and ``pyscheduler run`` with the ``scheduler`` configuration,
    each in its own process; both interrupted on the way out."""
    (workdir / "cluster.yaml").write_text(yaml.safe_dump({
        "nodePools": [{"name": "node", "count": nodes, "cpu": "4", "memory": "32Gi",
                       "pods": 110}], "kubelet": {"runPods": False}}))
    (workdir / "sched.yaml").write_text(yaml.safe_dump(scheduler))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    sim = sim_up(workdir, workdir / "cluster.yaml", "--watch-history", "50000", env=env)
    sched = None
    try:
        sched = run_scheduler(workdir / "kubeconfig", workdir / "sched.yaml", env)
        time.sleep(2.0)
        yield sim, sched
    finally:
        interrupt(sched, sim)


def interrupt(*procs: subprocess.Popen[Any] | None) -> None:
    """SIGINT each process (as Ctrl-C would), then kill what has not exited in 20 s."""
    for proc in procs:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "bench"},
            "spec": {"schedulerName": "pyscheduler", "containers": [{
                "name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


async def run_pool(n: int, concurrency: int, work: Any) -> list[float]:
    """Run work(i) for i in range(n) with bounded concurrency; returns completion times."""
    done: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await work(i)
            done.append(time.monotonic())

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


def rate_samples(times: list[float]) -> list[int]:
    if not times:
        return []
    start = min(times)
    buckets: dict[int, int] = {}
    for t in times:
        buckets[int(t - start)] = buckets.get(int(t - start), 0) + 1
    samples = [buckets.get(s, 0) for s in range(max(buckets) + 1)]
    # scheduler_perf drops the first sample (warm-up) and the last is partial.
    return samples[1:-1] if len(samples) > 2 else samples


def abba(rounds: int, first: str, second: str) -> list[str]:
    """Which side each batch of ``rounds`` rounds runs on: first, second, then second, first,
    and so on (ABBA: a drift of the machine's speed during the run weighs on both alike)."""
    order: list[str] = []
    for r in range(rounds):
        order += [first, second] if r % 2 == 0 else [second, first]
    return order


def in_order(order: list[str], batches: dict[str, list[Any]]) -> list[tuple[str, Any]]:
    """Each side's batches (in the order each side ran them) in the order they all ran."""
    queues = {label: list(runs) for label, runs in batches.items()}
    return [(label, queues[label].pop(0)) for label in order if queues.get(label)]


def pooled(batches: list[dict[str, Any]], key: str) -> float:
    """Several batches as one: ``pods_per_second`` as all their bound pods over all their
    time, any other per-pod figure weighted by each batch's bound pods."""
    bound = sum(b["bound"] for b in batches)
    if key == "pods_per_second":
        seconds = sum(b["bound"] / b[key] for b in batches if b[key])
        return bound / seconds if seconds else 0.0
    return sum(b[key] * b["bound"] for b in batches) / max(bound, 1)


def describe(name: str, times: list[float], n: int) -> None:
    samples = rate_samples(times)
    elapsed = max(times) - min(times) if times else 0.0
    if samples:
        q = statistics.quantiles(samples, n=100) if len(samples) > 1 else samples * 99
        print(f"{name}: {n} in {elapsed:.1f} s; per-second samples avg {statistics.mean(samples):.0f}"
              f" p50 {q[49]:.0f} p90 {q[89]:.0f} p99 {q[98]:.0f} (min {min(samples)})")
    else:
        print(f"{name}: {n} in {elapsed:.2f} s")


async def bench(args: argparse.Namespace, kubeconfig: Path, server_pid: int) -> None:
    c = Client(kubeconfig, args.concurrency)
    try:
        status, _ = await c.request("POST", "/api/v1/namespaces",
                                    {"metadata": {"name": "bench"}})
        assert status == 201, status

        async def create(i: int) -> None:
            status, body = await c.request("POST", "/api/v1/namespaces/bench/pods", pod(i))
            if status != 201:
                raise RuntimeError(f"create failed: {status} {body[:200]!r}")

        t0 = time.monotonic()
        created = await run_pool(args.pods, args.concurrency, create)
        describe("create pods", created, args.pods)
        print(f"  ({args.pods / (time.monotonic() - t0):.0f} pods/s overall)")

        status, body = await c.request("GET", "/api/v1/namespaces/bench/pods?limit=1")
        rv = orjson.loads(body)["metadata"]["resourceVersion"]
        seen: list[float] = []
        watch_done = asyncio.Event()
        watch_task = asyncio.create_task(
            count_bindings(c, "/api/v1/pods", rv, args.pods, seen, watch_done))
        await asyncio.sleep(0.2)

        async def bind(i: int) -> None:
            body = {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": f"pod-{i}", "namespace": "bench"},
                    "target": {"apiVersion": "v1", "kind": "Node",
                               "name": f"node-{i % args.nodes}"}}
            status, resp = await c.request(
                "POST", f"/api/v1/namespaces/bench/pods/pod-{i}/binding", body)
            if status != 201:
                raise RuntimeError(f"bind failed: {status} {resp[:200]!r}")

        t0 = time.monotonic()
        bound = await run_pool(args.pods, args.concurrency, bind)
        bind_elapsed = time.monotonic() - t0
        describe("bind pods", bound, args.pods)
        print(f"  BIND CEILING {args.pods / bind_elapsed:.0f} binds/s overall "
              f"({args.concurrency} concurrent clients, one watcher on all pods)")
        try:
            await asyncio.wait_for(watch_done.wait(), 60)
            print(f"  watcher saw all {len(seen)} bindings")
        except asyncio.TimeoutError:
            print(f"  WATCHER SAW ONLY {len(seen)}/{args.pods} bindings")
        watch_task.cancel()

        for label, path in (("list all pods (one request)", "/api/v1/pods"),
                            ("list all pods (limit=500 pages)", "/api/v1/pods?limit=500")):
            times = []
            for _ in range(5):
                t = time.monotonic()
                next_path: str | None = path
                items = 0
                while next_path:
                    status, body = await c.request("GET", next_path)
                    doc = orjson.loads(body)
                    items += len(doc["items"])
                    token = doc["metadata"].get("continue")
                    next_path = f"{path}&continue={token}" if token else None
                times.append(time.monotonic() - t)
            print(f"{label}: {items} items, median {statistics.median(times) * 1000:.0f} ms, "
                  f"best {min(times) * 1000:.0f} ms")
        rss, peak = rss_kib(server_pid)
        print(f"server RSS: {rss / 1024:.0f} MiB now, {peak / 1024:.0f} MiB peak "
              f"({args.nodes} nodes, {args.pods} pods)")
    finally:
        await c.session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "cluster.yaml").write_text(yaml.safe_dump({
            "nodePools": [{"name": "node", "count": args.nodes, "cpu": "4", "memory": "32Gi",
                           "pods": 110}],
            "kubelet": {"runPods": False}}))
        t0 = time.monotonic()
        try:
            server = sim_up(workdir, workdir / "cluster.yaml")
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        try:
            print(f"embedded cluster with {args.nodes} nodes up in "
                  f"{time.monotonic() - t0:.1f} s (python {sys.version.split()[0]}, "
                  f"{os.cpu_count()} cores)")
            try:
                import uvloop
                uvloop.run(bench(args, workdir / "kubeconfig", server.pid))
            except ImportError:
                asyncio.run(bench(args, workdir / "kubeconfig", server.pid))
        finally:
            interrupt(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
