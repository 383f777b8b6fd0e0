"""The embedded cluster's commands of the ``pyscheduler`` CLI: ``sim up`` and ``cloud-sim serve``.

Registered through the ``pyscheduler.cli`` entry point, so that the scheduler's own CLI knows
nothing of this package: installed, the commands are there; absent, ``pyscheduler sim`` says
how to install it.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from typing import Any

import structlog

from pyscheduler.cli import run_loop
from pyscheduler.kube.tasks import stop_on_signals
from pyscheduler_sim.cloud import add_cli as add_cloud_sim_cli

__all__ = ["add_cli", "freeze_after_full_collections", "sim_up", "write_scheduler_config"]

log = structlog.get_logger("pyscheduler_sim.cli")


def add_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser],
            common: argparse.ArgumentParser) -> None:
    """Register ``sim up`` and ``cloud-sim serve`` (``common``: the logging options)."""
    sim = sub.add_parser("sim", help="the embedded cluster")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    up = sim_sub.add_parser("up", help="start the embedded cluster and run until interrupted",
                            parents=[common])
    up.add_argument("--workdir", required=True, help="directory for kubeconfig and state")
    size = up.add_mutually_exclusive_group()
    size.add_argument("--nodes", type=int, default=3,
                      help="number of 4-CPU/32Gi/110-pod nodes (default 3)")
    size.add_argument("--cluster", help="cluster file (YAML) describing node pools")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    up.add_argument("--watch-history", type=int, default=10000,
                    help="events kept per resource for watches to resume from")
    up.add_argument("--slow-watcher-seconds", type=float, default=1.0,
                    help="close a watch whose reader has taken no event for this long while "
                         "100 wait, as kube-apiserver does (0: never; default 1)")
    up.add_argument("--no-cloud", action="store_true",
                    help="do not start the simulated cloud (no virtual nodes)")
    up.set_defaults(func=sim_up)
    add_cloud_sim_cli(sub)


def write_scheduler_config(path: Path, cloud_url: str | None = None,
                           pools: list[tuple[str, str]] | None = None) -> None:
    """A ready configuration for the embedded cluster (``pyscheduler run --config``); with a
    cloud, virtual nodes for its pools (in the given order)."""
    import yaml

    from pyscheduler.config import dump_config, parse_config

    document: dict[str, Any] = {"metricsAddress": "127.0.0.1:10259"}
    if cloud_url:
        document["virtualNodes"] = {
            "enabled": True, "cloudUrl": cloud_url,
            "pools": [{"name": name, "platform": platform} for name, platform in pools or []]}
    config = parse_config(document, "defaults")
    path.write_text("# pyscheduler configuration for the embedded cluster\n"
                    + yaml.safe_dump(dump_config(config), sort_keys=False))


def freeze_after_full_collections() -> None:
    """After each full collection of Python's cyclic garbage collector, move what survived it
    out of the collector's sight (``gc.freeze``).

    A full collection walks every tracked object: with 150,000 pods stored (about a million
    objects) that is half a second during which no request is answered. What survives one is
    mostly stored objects, freed by reference counting when replaced or deleted (they hold no
    cycles); frozen, later full collections walk only what is newer. Cyclic garbage among the
    frozen objects is not reclaimed (the price, small beside the pause). For the ``sim up``
    process only: a process embedding the cluster keeps its own collector policy."""
    def after(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            gc.freeze()  # the younger generations are empty now: only survivors move

    gc.callbacks.append(after)


def sim_up(args: argparse.Namespace) -> int:
    from pyscheduler_sim.cluster import Cluster, ClusterConfigError, ClusterSpec, load_cluster_file

    from pyscheduler_sim.cloud import (
        CloudConfigError,
        CloudSimServer,
        SimCloud,
        default_pools,
        parse_cloud,
    )

    try:
        spec = load_cluster_file(args.cluster) if args.cluster else ClusterSpec.with_nodes(
            args.nodes)
        cloud_pools = default_pools()
        if args.cluster:
            import yaml
            raw = yaml.safe_load(Path(args.cluster).read_text()) or {}
            if "cloudPools" in raw:
                cloud_pools = parse_cloud({"cloudPools": raw["cloudPools"]}, args.cluster)
    except (ClusterConfigError, CloudConfigError) as exc:
        print(f"pyscheduler sim up: {exc}", file=sys.stderr)
        return 2
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    freeze_after_full_collections()

    async def run() -> int:
        stop = stop_on_signals()
        cluster = Cluster(spec, history=args.watch_history,
                          slow_watcher_seconds=args.slow_watcher_seconds or None)
        try:
            await cluster.start(args.host, args.port)
        except OSError as exc:
            await cluster.stop()
            print(f"pyscheduler sim up: cannot listen on {args.host}:{args.port}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 2
        cloud = None
        cloud_url = None
        if not args.no_cloud:
            cloud = CloudSimServer(SimCloud(cloud_pools), host=args.host)
            cloud_url = await cloud.start()
        kubeconfig = workdir / "kubeconfig"
        cluster.write_kubeconfig(kubeconfig)
        write_scheduler_config(workdir / "scheduler.yaml", cloud_url,
                               [(p.name, p.platform) for p in cloud_pools])
        nodes = sum(p.count for p in spec.pools)
        print(f"embedded cluster listening on {cluster.url} with {nodes} nodes", flush=True)
        if cloud_url:
            print(f"  simulated cloud on {cloud_url}: pools "
                  f"{', '.join(f'{p.name} ({p.platform})' for p in cloud_pools)}", flush=True)
        print(f"  export KUBECONFIG={kubeconfig.resolve()}", flush=True)
        print("  kubectl get nodes", flush=True)
        print(f"  pyscheduler run --kubeconfig {kubeconfig} --config {workdir / 'scheduler.yaml'}",
              flush=True)
        await stop.wait()
        log.info("stopping embedded cluster")
        if cloud is not None:
            await cloud.stop()
        await cluster.stop()
        return 0

    return run_loop(run())
