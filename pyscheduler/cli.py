"""Command-line entry point: ``pyscheduler <command>``.

Commands:

* ``run`` — run the scheduler against a cluster (``--kubeconfig``, ``--config``).
* ``sim up`` — start the embedded cluster (API server, simulated kubelets and controllers) on
  loopback, write a kubeconfig that ``kubectl`` and the ``kubernetes`` client use unchanged, and
  run until interrupted.
* ``version`` — print the version.

Exit codes: 0 success, 2 bad usage or configuration (the message names what is wrong).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog

from pyscheduler import __version__
from pyscheduler.logs import configure_logging

__all__ = ["main"]

log = structlog.get_logger("pyscheduler.cli")


def write_scheduler_config(path: Path) -> None:
    """A ready configuration for the embedded cluster (``pyscheduler run --config``)."""
    import yaml

    from pyscheduler.config import dump_config, parse_config

    config = parse_config({"metricsAddress": "127.0.0.1:10259"}, "defaults")
    path.write_text("# pyscheduler configuration for the embedded cluster\n"
                    + yaml.safe_dump(dump_config(config), sort_keys=False))


def _sim_up(args: argparse.Namespace) -> int:
    from pyscheduler.sim.cluster import Cluster, ClusterConfigError, ClusterSpec, load_cluster_file

    try:
        spec = load_cluster_file(args.cluster) if args.cluster else ClusterSpec.with_nodes(
            args.nodes)
    except ClusterConfigError as exc:
        print(f"pyscheduler sim up: {exc}", file=sys.stderr)
        return 2
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    async def run() -> int:
        cluster = Cluster(spec, history=args.watch_history)
        try:
            await cluster.start(args.host, args.port)
        except OSError as exc:
            await cluster.stop()
            print(f"pyscheduler sim up: cannot listen on {args.host}:{args.port}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 2
        kubeconfig = workdir / "kubeconfig"
        cluster.write_kubeconfig(kubeconfig)
        write_scheduler_config(workdir / "scheduler.yaml")
        nodes = sum(p.count for p in spec.pools)
        print(f"embedded cluster listening on {cluster.url} with {nodes} nodes", flush=True)
        print(f"  export KUBECONFIG={kubeconfig.resolve()}", flush=True)
        print("  kubectl get nodes", flush=True)
        print(f"  pyscheduler run --kubeconfig {kubeconfig} --config {workdir / 'scheduler.yaml'}",
              flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping embedded cluster")
        await cluster.stop()
        return 0

    return _run_loop(run())


def _run(args: argparse.Namespace) -> int:
    from pyscheduler.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"pyscheduler run: {exc}", file=sys.stderr)
        return 2
    if args.log_level_given is None:
        configure_logging(config.log_level, json={"auto": None, "console": False,
                                                  "json": True}[args.log_format])

    async def run() -> int:
        from pyscheduler.kube.client import KubeClient
        from pyscheduler.kube.errors import KubeError
        from pyscheduler.runner import SchedulerApp

        try:
            client = await KubeClient.from_kubeconfig(args.kubeconfig)
        except KubeError as exc:
            print(f"pyscheduler run: {exc}", file=sys.stderr)
            return 2
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        app = SchedulerApp(config, client)
        log.info("starting scheduler", scheduler=config.scheduler_name,
                 metrics=f"{config.metrics_host}:{app.health.port or config.metrics_port}")
        try:
            return await app.run_until(stop)
        finally:
            await client.close()

    return _run_loop(run())


def _run_loop(coro: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    result: int = uvloop.run(coro)
    return result


def build_parser() -> argparse.ArgumentParser:
    # Logging options are accepted before or after the command name.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", default=argparse.SUPPRESS,
                        choices=["debug", "info", "warning", "error"], help="default: info")
    common.add_argument("--log-format", default=argparse.SUPPRESS,
                        choices=["auto", "console", "json"],
                        help="default: auto (console on a terminal, JSON lines otherwise)")
    parser = argparse.ArgumentParser(prog="pyscheduler", description=__doc__.split("\n\n")[0],
                                     parents=[common])
    parser.set_defaults(log_level=None, log_format="auto")
    sub = parser.add_subparsers(dest="command", required=True)

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
    up.set_defaults(func=_sim_up)

    run = sub.add_parser("run", help="run the scheduler against a cluster", parents=[common])
    run.add_argument("--kubeconfig", default=None,
                     help="kubeconfig file (default: in-cluster configuration, then "
                          "~/.kube/config)")
    run.add_argument("--config", default=None, help="scheduler configuration file (YAML)")
    run.set_defaults(func=_run)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=lambda args: print(__version__) or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    fmt = {"auto": None, "console": False, "json": True}[args.log_format]
    args.log_level_given = args.log_level
    configure_logging(args.log_level or "info", json=fmt)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
