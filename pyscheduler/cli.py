"""Command-line entry point: ``pyscheduler <command>``.

Commands:

* ``run`` — run the scheduler against a cluster (``--kubeconfig``, ``--config``).
* ``sim up`` — start the embedded cluster (API server, simulated kubelets and controllers) on
  loopback, write a kubeconfig that ``kubectl`` and the ``kubernetes`` client use unchanged, and
  run until interrupted.
* ``fragment build DIR`` — build a fragment from C, WAT or AssemblyScript sources.
* ``fragment test WASM --cluster FILE --pods FILE`` — offline what-if: every node's verdict and
  score and the chosen node per pod, no cluster needed.
* ``fragment publish WASM --name N --version V`` — upload to MinIO/S3 (sha256 computed) and create
  or update the ``WsspSchedulerConfiguration``.
* ``fragment list`` — the fragment resources and their status.
* ``cloud-sim serve`` — the simulated IaaS (the cloud adapter's REST contract) on its own.
* ``version`` — print the version.

Exit codes: 0 success, 2 bad usage or configuration (the message names what is wrong).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog

from pyscheduler import __version__
from pyscheduler.logs import configure_logging
from pyscheduler.kube.tasks import stop_on_signals

__all__ = ["main"]

log = structlog.get_logger("pyscheduler.cli")


#: The garbage collector's thresholds for ``run`` (CPython's default is 700, 10, 10). Every
#: watch event and attempt allocates hundreds of objects, nearly all freed by reference
#: counting; with the default a young collection ran every few pods, and the older
#: generations, holding every cached pod and node, were walked again and again: a fifth of
#: the scheduler's CPU in the end-to-end benchmark (a tenth with this and the runner's
#: ``gc.freeze`` once the caches are synced).
RUN_GC_THRESHOLD = (10_000, 10, 10)


def _config_check(args: argparse.Namespace) -> int:
    """Exit 0 and print each profile when the file is valid; exit 2 naming every problem."""
    from pyscheduler.config import ConfigError, load_config

    try:
        config = load_config(args.file)
    except ConfigError as exc:
        print(f"pyscheduler config check: {exc}", file=sys.stderr)
        return 2
    for profile in config.profiles:
        score = ", ".join(f"{p.name}={p.weight}" for p in profile.plugins.score)
        post = [name for name, on in (("DefaultPreemption", profile.preemption.enabled),
                                      ("CloudBurst", config.virtual_nodes.enabled
                                       and profile.plugins.cloud_burst)) if on]
        if profile.preemption.order == "BurstThenPreempt":
            post.reverse()
        print(f"profile {profile.scheduler_name}: filter {', '.join(profile.plugins.filter)}; "
              f"score {score}; postFilter {', '.join(post) or 'none'}")
    return 0


def _config_convert(args: argparse.Namespace) -> int:
    """Print a scheduler.yaml as the two documents of a KubeSchedulerConfiguration file."""
    import yaml

    from pyscheduler.component_config import from_settings
    from pyscheduler.config import ConfigError, dump_config, load_config

    try:
        config = load_config(args.file)
        if config.more_profiles:
            raise ValueError("it has several profiles already: it is a "
                             "KubeSchedulerConfiguration")
        documents = from_settings(dump_config(config))
    except (ConfigError, ValueError) as exc:
        print(f"pyscheduler config convert: {args.file}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    return 0


def _run(args: argparse.Namespace) -> int:
    import gc

    gc.set_threshold(*RUN_GC_THRESHOLD)  # before the imports, which allocate the most
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
        stop = stop_on_signals()
        app = SchedulerApp(config, client, freeze_heap=True)
        log.info("starting scheduler", scheduler=config.scheduler_name,
                 metrics=f"{config.metrics_host}:{app.health.port or config.metrics_port}")
        try:
            return await app.run_until(stop)
        except (OSError, ValueError, KubeError) as exc:
            # What start-up could not get past: the metrics port taken, the credentials
            # Secret missing or unreadable.
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(f"pyscheduler run: {text}", file=sys.stderr)
            return 2
        finally:
            await client.close()

    return run_loop(run())


def _fragment_build(args: argparse.Namespace) -> int:
    from pyscheduler.wasm.tool import build

    try:
        path = build(Path(args.dir), Path(args.out) if args.out else None,
                     Path(args.sdk) if args.sdk else None)
    except ValueError as exc:
        print(f"pyscheduler fragment build: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


def _json_arg(text: str | None, what: str) -> dict[str, Any] | None:
    """A JSON object given on the command line, or read from a file with ``@path``."""
    import json

    if text is None:
        return None
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


def _fragment_test(args: argparse.Namespace) -> int:
    from pyscheduler.wasm.errors import FragmentError
    from pyscheduler.wasm.tool import format_reports, load_nodes, load_pods, what_if

    try:
        wasm = Path(args.wasm).read_bytes()
        reports = what_if(
            wasm, load_nodes(Path(args.cluster)), load_pods(Path(args.pods)),
            config=_json_arg(args.fragment_config, "--fragment-config"),
            filter_mode=None if args.filter == "none" else args.filter,
            score_mode=None if args.score == "none" else args.score, weight=args.weight,
            runtime=args.runtime, prebind=_prebind_allowlist(args))
    except (OSError, ValueError, FragmentError) as exc:
        print(f"pyscheduler fragment test: {exc}", file=sys.stderr)
        return 2
    print(format_reports(reports, as_json=args.json))
    return 0


def _storage_from_args(args: argparse.Namespace) -> Any:
    import os

    from pyscheduler.config import load_config
    from pyscheduler.wasm.storage import StorageConfig

    settings = load_config(args.config).storage if args.config else None
    return StorageConfig(
        endpoint=args.endpoint or (settings.endpoint if settings else None)
        or os.environ.get("MINIO_ENDPOINT"),
        access_key=args.access_key or (settings.access_key if settings else None)
        or os.environ.get("MINIO_ACCESS_KEY"),
        secret_key=args.secret_key or (settings.secret_key if settings else None)
        or os.environ.get("MINIO_SECRET_KEY"),
        secure=args.secure or bool(settings and settings.secure))


async def _fragments_client(kubeconfig: str | None) -> Any:
    """A client (``KubeClient``) for the cluster, once it is known to serve the fragment CRD;
    ``ValueError`` saying what is wrong otherwise (kubeconfig, connection, CRD)."""
    from pyscheduler.kube.client import KubeClient
    from pyscheduler.kube.errors import KubeError, NotFoundError
    from pyscheduler.wasm.manager import CRD_INSTALL_HINT, RESOURCE_PATH

    try:
        client = await KubeClient.from_kubeconfig(kubeconfig, max_retries=1)
    except KubeError as exc:
        raise ValueError(str(exc)) from None
    try:
        await client.get(RESOURCE_PATH, {"limit": "1"})
    except NotFoundError:
        await client.close()
        raise ValueError(f"the WsspSchedulerConfiguration CRD is not installed in the cluster "
                         f"({CRD_INSTALL_HINT})") from None
    except KubeError as exc:
        await client.close()
        raise ValueError(str(exc)) from None
    return client


def _prebind_allowlist(args: argparse.Namespace) -> Any:
    from pyscheduler.wasm.resource import StageSpec

    def keys(text: str) -> tuple[str, ...]:
        return tuple(k.strip() for k in text.split(",") if k.strip())

    return StageSpec("extend", allowed_labels=keys(args.allowed_labels),
                     allowed_annotations=keys(args.allowed_annotations))


def _fragment_publish(args: argparse.Namespace) -> int:
    """Check everything that can be checked first (the resource, the module as the scheduler
    would load it, the cluster and its CRD, what the bucket holds), then upload and create or
    update the resource; if that last step fails, an object this command uploaded is removed
    again, so nothing is left behind."""
    from pyscheduler.wasm.errors import FragmentError
    from pyscheduler.wasm.fragment import Fragment
    from pyscheduler.wasm.resource import ResourceError, parse_resource
    from pyscheduler.wasm.tool import lifecycle_exports, module_exports, resource_body

    prog = "pyscheduler fragment publish"
    try:
        config = _json_arg(args.fragment_config, "--fragment-config")
        wasm = Path(args.wasm).read_bytes()
        exports = module_exports(wasm)
        filter_mode, score_mode = (
            None if mode == "none" else
            ("replace" if exports.get(f"wssp_{stage}") == "func" else None)
            if mode == "auto" else mode
            for stage, mode in (("filter", args.filter), ("score", args.score)))
        prebind = _prebind_allowlist(args)
        body = resource_body(args.name, args.version, "s3://placeholder/x", "0" * 64,
                             filter_mode=filter_mode, score_mode=score_mode,
                             weight=args.weight, config=config,
                             failure_policy=args.failure_policy, shadow=args.shadow,
                             lifecycle=lifecycle_exports(exports), prebind=prebind)
        parse_resource(body)  # refuse a bad name or spec before anything else
        # The checks the scheduler makes when it loads the module (ABI, imports, exports,
        # wssp_init with this config), so that a module it would refuse is never uploaded.
        Fragment.load(wasm, name=body["metadata"]["name"], config=config or {},
                      filter=filter_mode is not None, score=score_mode is not None)
        storage_config = _storage_from_args(args)
    except (OSError, ValueError, FragmentError, ResourceError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

    async def apply() -> int:
        from pyscheduler.kube.errors import AlreadyExistsError, ConflictError, KubeError
        from pyscheduler.kube.client import api_path
        from pyscheduler.wasm.manager import RESOURCE_PATH
        from pyscheduler.wasm.resource import API_VERSION, PLURAL
        from pyscheduler.wasm.storage import object_digest, publish, remove

        name = body["metadata"]["name"]
        key = f"{args.name}/{name}.wasm"
        url = f"s3://{args.bucket}/{key}"
        try:
            client = await _fragments_client(args.kubeconfig)
        except ValueError as exc:
            print(f"{prog}: {exc}; nothing was uploaded", file=sys.stderr)
            return 2
        async with client:
            try:
                held = await asyncio.to_thread(object_digest, args.bucket, key, storage_config)
                digest = hashlib.sha256(wasm).hexdigest()
                if held is not None and held != digest:
                    print(f"{prog}: {url} already holds another module (sha256 {held}): a "
                          f"published version is never replaced; publish a new version",
                          file=sys.stderr)
                    return 2
                uploaded = held is None
                if uploaded:
                    url, digest = await asyncio.to_thread(
                        publish, wasm, bucket=args.bucket, key=key, config=storage_config)
            except (OSError, ValueError, FragmentError) as exc:
                print(f"{prog}: {exc}", file=sys.stderr)
                return 2
            body["spec"]["url"], body["spec"]["sha256"] = url, digest
            try:
                try:
                    await client.create(RESOURCE_PATH, body)
                    verb = "created"
                except (AlreadyExistsError, ConflictError):
                    await client.patch(api_path(API_VERSION, PLURAL, name=name),
                                       {"spec": body["spec"]})
                    verb = "updated"
            except KubeError as exc:
                undo = ""
                if uploaded:
                    try:
                        await asyncio.to_thread(remove, url, storage_config)
                        undo = "; the uploaded module was removed again"
                    except FragmentError as failed:
                        undo = f"; removing the uploaded module failed too: {failed}"
                print(f"{prog}: cannot create {name}: {exc}{undo}", file=sys.stderr)
                return 2
        print(f"{name} {verb}: {url} sha256 {digest}")
        return 0
    return run_loop(apply())


def _fragment_list(args: argparse.Namespace) -> int:
    async def show() -> int:
        from pyscheduler.kube.errors import KubeError
        from pyscheduler.wasm.manager import RESOURCE_PATH

        prog = "pyscheduler fragment list"
        try:
            async with await _fragments_client(args.kubeconfig) as client:
                items = (await client.list(RESOURCE_PATH)).get("items") or []
        except (ValueError, KubeError) as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        rows = [("NAME", "PHASE", "DIGEST", "RUNTIME", "LOAD", "MESSAGE")]
        for item in items:
            st = item.get("status") or {}
            rows.append((item["metadata"]["name"], st.get("phase") or "Pending",
                         (st.get("digest") or "")[:12], st.get("runtime") or "",
                         st.get("loadTime") or "", (st.get("message") or "")[:80]))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        return 0
    return run_loop(show())


def run_loop(coro: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    result: int = uvloop.run(coro)
    return result


#: Entry-point group of packages that add commands: ``add_cli(subparsers, common)`` registers
#: them (``common`` is the parent parser with the logging options).
PLUGIN_GROUP = "pyscheduler.cli"
#: Commands of the embedded cluster's package, offered with an install hint when it is absent.
SIM_COMMANDS = {"sim": "the embedded cluster", "cloud-sim": "the simulated cloud"}
SIM_INSTALL_HINT = ("it comes with the embedded cluster, a package of its own: "
                    "pip install ./sim from a checkout of pyscheduler, or "
                    "pip install 'pyscheduler[sim]'")


def _add_plugin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                         common: argparse.ArgumentParser) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            add_cli = ep.load()
        except ImportError as exc:
            log.warning("a command package cannot be loaded", entry_point=ep.name,
                        error=str(exc))
            continue
        add_cli(sub, common)
    for name, what in SIM_COMMANDS.items():
        if name not in sub.choices:
            missing = sub.add_parser(name, help=f"{what} (not installed)", add_help=False,
                                     parents=[common])
            missing.add_argument("rest", nargs=argparse.REMAINDER)
            missing.set_defaults(func=lambda args, name=name: _not_installed(name))


def _not_installed(name: str) -> int:
    print(f"pyscheduler {name}: not installed here: {SIM_INSTALL_HINT}", file=sys.stderr)
    return 2


#: Commands of this package: the command packages' entry points (importing the embedded
#: cluster, at a cost that ``run`` would pay at every start) are loaded for the others only.
BUILTIN_COMMANDS = frozenset({"run", "config", "fragment", "version"})


def _command(argv: list[str]) -> str | None:
    """The command named in ``argv`` (the first word that is not an option or its value)."""
    words = iter(argv)
    for word in words:
        if word in ("--log-level", "--log-format"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def build_parser(*, plugins: bool = True) -> argparse.ArgumentParser:
    """The command-line parser; without ``plugins``, only this package's commands."""
    # Logging options are accepted before or after the command name.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", default=argparse.SUPPRESS,
                        choices=["debug", "info", "warning", "error"], help="default: info")
    common.add_argument("--log-format", default=argparse.SUPPRESS,
                        choices=["auto", "console", "json"],
                        help="default: auto (console on a terminal, JSON lines otherwise)")
    parser = argparse.ArgumentParser(prog="pyscheduler", description=__doc__.split("\n\n")[0],
                                     parents=[common])
    # No set_defaults for these: it would set the default of the option's action, which the
    # subcommands share (parents=[common]), and a subcommand would then overwrite a value
    # given before its name (`pyscheduler --log-level debug run`). main() fills them in.
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the scheduler against a cluster", parents=[common])
    run.add_argument("--kubeconfig", default=None,
                     help="kubeconfig file (default: in-cluster configuration, then "
                          "~/.kube/config)")
    run.add_argument("--config", default=None, help="scheduler configuration file (YAML)")
    run.set_defaults(func=_run)

    cfg = sub.add_parser("config", help="check or convert a configuration file")
    csub = cfg.add_subparsers(dest="config_command", required=True)
    ccheck = csub.add_parser("check", help="read a configuration file and say what is wrong",
                             parents=[common])
    ccheck.add_argument("file", help="scheduler.yaml or a KubeSchedulerConfiguration")
    ccheck.set_defaults(func=_config_check)
    cconvert = csub.add_parser(
        "convert", parents=[common],
        help="write a scheduler.yaml as a KubeSchedulerConfiguration and a settings document")
    cconvert.add_argument("file", help="scheduler.yaml")
    cconvert.set_defaults(func=_config_convert)

    fragment = sub.add_parser("fragment", help="build, try, publish and list fragments")
    fsub = fragment.add_subparsers(dest="fragment_command", required=True)
    fbuild = fsub.add_parser("build", help="build a fragment from its source directory",
                             parents=[common])
    fbuild.add_argument("dir", help="directory with C (*.c), WAT or AssemblyScript sources")
    fbuild.add_argument("--out", help="output path (default DIR/<dir name>.wasm)")
    fbuild.add_argument("--sdk", help="directory holding wssp.h (default: fragments/c)")
    fbuild.set_defaults(func=_fragment_build)

    def stage_options(p: argparse.ArgumentParser) -> None:
        auto = "auto: replace when the module exports the stage, else none"
        p.add_argument("--filter", choices=["auto", "replace", "extend", "none"],
                       default="auto", help=auto)
        p.add_argument("--score", choices=["auto", "replace", "extend", "none"],
                       default="auto", help=auto)
        p.add_argument("--allowed-labels", default="",
                       help="label keys pre-bind may set, comma-separated (prefix/* allowed)")
        p.add_argument("--allowed-annotations", default="",
                       help="annotation keys pre-bind may set, comma-separated")
        p.add_argument("--weight", type=int, default=1, help="score weight (default 1)")
        p.add_argument("--fragment-config",
                       help="the fragment's config as JSON, or @FILE to read it from FILE")

    ftest = fsub.add_parser("test", help="offline what-if over a cluster file and pods",
                            parents=[common])
    ftest.add_argument("wasm")
    ftest.add_argument("--cluster", required=True,
                       help="cluster file (nodePools) or YAML Node objects")
    ftest.add_argument("--pods", required=True, help="YAML pod objects")
    ftest.add_argument("--runtime", choices=["wasmtime", "wasmer"], default="wasmtime")
    ftest.add_argument("--json", action="store_true", help="print JSON")
    stage_options(ftest)
    ftest.set_defaults(func=_fragment_test)

    fpub = fsub.add_parser("publish", help="upload to MinIO/S3 and create the resource",
                           parents=[common])
    fpub.add_argument("wasm")
    fpub.add_argument("--name", required=True)
    fpub.add_argument("--version", required=True, help="x.y.z")
    fpub.add_argument("--bucket", default="fragments")
    fpub.add_argument("--kubeconfig", default=None)
    fpub.add_argument("--config", default=None,
                      help="scheduler configuration whose storage section to use")
    fpub.add_argument("--endpoint", help="S3 endpoint host:port (or MINIO_ENDPOINT)")
    fpub.add_argument("--access-key", help="(or MINIO_ACCESS_KEY)")
    fpub.add_argument("--secret-key", help="(or MINIO_SECRET_KEY)")
    fpub.add_argument("--secure", action="store_true", help="use https to the endpoint")
    fpub.add_argument("--failure-policy", choices=["Fail", "Ignore", "Default"], default="Fail")
    fpub.add_argument("--shadow", action="store_true")
    stage_options(fpub)
    fpub.set_defaults(func=_fragment_publish)

    flist = fsub.add_parser("list", help="fragment resources and their status",
                            parents=[common])
    flist.add_argument("--kubeconfig", default=None)
    flist.set_defaults(func=_fragment_list)

    if plugins:
        _add_plugin_commands(sub, common)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=lambda args: print(__version__) or 0)
    return parser


def parse_command_line(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's arguments; the logging options (given before or after the command
    name, the later one winning) default to ``None`` (the configuration's level) and
    ``auto``."""
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(plugins=_command(words) not in BUILTIN_COMMANDS)
    args = parser.parse_args(argv)
    args.log_level = getattr(args, "log_level", None)
    args.log_format = getattr(args, "log_format", "auto")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_command_line(argv)
    fmt = {"auto": None, "console": False, "json": True}[args.log_format]
    args.log_level_given = args.log_level
    configure_logging(args.log_level or "info", json=fmt)
    try:
        result: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`... | head`): nothing more to say to anyone. Later writes to
        # stdout (at exit) must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # what a shell reports for a command ended by SIGPIPE
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
