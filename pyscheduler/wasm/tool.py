"""Tools for fragment authors behind ``pyscheduler fragment``: offline what-if runs, publishing
to object storage plus the resource, and listing resources with their status.

:func:`what_if` needs no cluster: it builds the node table from a cluster file (the embedded
cluster's ``nodePools`` format) or from Node objects, and runs each pod through the same pipeline
the scheduler runs, with the fragment overriding the stages, reporting every node's verdict and
score and the node that would be chosen.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pyscheduler.settings import SchedulerConfig
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pipeline import Pipeline, StageOverride
from pyscheduler.framework.pod import PodSpecError, pod_info
from pyscheduler.nodepools import expand_pools, node_object, parse_node_pools
from pyscheduler.plugins.registry import build_profile
from pyscheduler.wasm.fragment import Fragment
from pyscheduler.wasm.resource import API_VERSION, KIND
from pyscheduler.wasm.vm import Limits

__all__ = ["VIRTUAL_NODE_REASON", "PodReport", "format_reports", "load_nodes", "load_pods",
           "resource_body",
           "what_if"]

Obj = dict[str, Any]


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def load_nodes(path: Path) -> list[Obj]:
    """Node objects from a cluster file (``nodePools``) or from YAML Node/List documents."""
    docs = _documents(path)
    if len(docs) == 1 and isinstance(docs[0], Mapping) and "nodePools" in docs[0]:
        pools = parse_node_pools(docs[0], str(path))  # NodePoolError is a ValueError
        return [node_object(shape) for shape in expand_pools(pools)]
    return _objects(docs, "Node", path)


def load_pods(path: Path) -> list[Obj]:
    """Pod objects from YAML documents (single pods, ``List``/``PodList``)."""
    return _objects(_documents(path), "Pod", path)


def _objects(docs: Iterable[Any], kind: str, path: Path) -> list[Obj]:
    out: list[Obj] = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, Mapping):
            raise ValueError(f"{path}: document {i + 1} is not an object")
        if doc.get("kind") in ("List", f"{kind}List"):
            out.extend(_objects(doc.get("items") or [], kind, path))
        elif doc.get("kind", kind) == kind:
            out.append(dict(doc))
        else:
            raise ValueError(f"{path}: document {i + 1} is a {doc.get('kind')}, expected "
                             f"{kind}")
    return out


@dataclass(frozen=True, slots=True)
class PodReport:
    pod: str
    node: str | None
    message: str
    # node name -> (feasible, failure reason or "", fragment score or None, total score or None)
    nodes: dict[str, tuple[bool, str, int | None, int | None]]


#: What the what-if says of a virtual node (a cloud pool's): it is not a candidate here.
VIRTUAL_NODE_REASON = ("a cloud pool's virtual node: used only when no real node fits "
                       "(not tried here)")


def what_if(wasm: bytes, nodes: Sequence[Obj], pods: Sequence[Obj], *,
            config: Mapping[str, Any] | None = None, filter_mode: str | None = "replace",
            score_mode: str | None = "replace", weight: int = 1, runtime: str = "wasmtime",
            limits: Limits | None = None, place: bool = True, seed: int = 0) -> list[PodReport]:
    """Schedule ``pods`` one after another over ``nodes`` with the fragment overriding the
    stages (``None`` leaves a stage to the built-ins); with ``place`` each pod is counted on its
    node before the next one, as the scheduler would."""
    table = NodeTable()
    for node in nodes:
        table.set_node(node_info(node))
    fragment = Fragment.load(wasm, name="what-if", config=config, filter=filter_mode is not None,
                             score=score_mode is not None, runtime=runtime, limits=limits,
                             table=table)
    override = StageOverride(
        name="fragment", filter=fragment.filter if filter_mode else None,
        filter_mode="extend" if filter_mode == "extend" else "replace",
        score=fragment.score if score_mode else None,
        score_mode="extend" if score_mode == "extend" else "replace", score_weight=weight)
    pipeline = Pipeline(build_profile(SchedulerConfig()), seed=seed)
    reports = []
    for obj in pods:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        try:
            pod = pod_info(obj)
        except PodSpecError as exc:
            reports.append(PodReport(key, None, f"invalid pod: {exc}", {}))
            continue
        ctx = CycleContext.for_pod(pod, table)
        result = pipeline.schedule(ctx, override, explain=True)
        n = table.n
        failed: dict[int, str] = {}
        for _, res in result.filtered.results:
            for reason in res.reasons:
                for row in np.flatnonzero(reason.failed[:n]).tolist():
                    failed.setdefault(row, reason.message)
        fragment_scores = (result.per_plugin or {}).get("fragment")
        per_node: dict[str, tuple[bool, str, int | None, int | None]] = {}
        for row in range(n):
            if not table.valid[row]:
                continue
            if table.virtual[row]:
                # The scheduler looks at a cloud pool's virtual node only in the burst pass,
                # when no real node fits; this what-if places pods on real nodes.
                per_node[table.names[row]] = (False, VIRTUAL_NODE_REASON, None, None)
                continue
            feasible = bool(result.filtered.feasible[row])
            per_node[table.names[row]] = (
                feasible, failed.get(row, ""),
                int(fragment_scores[row]) if fragment_scores is not None and feasible else None,
                int(result.total[row]) if result.total is not None and feasible else None)
        message = "" if result.node else result.filtered.diagnose().message()
        reports.append(PodReport(key, result.node, message, per_node))
        if place and result.node is not None:
            table.add_pod(result.slot, pod)
    return reports


def format_reports(reports: Sequence[PodReport], *, as_json: bool = False) -> str:
    if as_json:
        return json.dumps([{"pod": r.pod, "node": r.node, "message": r.message, "nodes": {
            name: {"feasible": f, "reason": reason, "fragmentScore": s, "totalScore": t}
            for name, (f, reason, s, t) in r.nodes.items()}} for r in reports], indent=2)
    lines = []
    for r in reports:
        lines.append(f"pod {r.pod}: " + (f"-> {r.node}" if r.node else f"unschedulable: "
                                                                        f"{r.message}"))
        width = max([len(n) for n in r.nodes] + [4])
        lines.append(f"  {'NODE':<{width}}  FEASIBLE  FRAGMENT  TOTAL  REASON")
        for name, (feasible, reason, score, total) in r.nodes.items():
            lines.append(f"  {name:<{width}}  {'yes' if feasible else 'no':<8}  "
                         f"{'' if score is None else score:<8}  "
                         f"{'' if total is None else total:<5}  {reason}")
    return "\n".join(lines)


def resource_body(name: str, version: str, url: str, sha256: str | None, *,
                  filter_mode: str | None, score_mode: str | None, weight: int,
                  config: Mapping[str, Any] | None, failure_policy: str, shadow: bool,
                  runtime: str | None = None) -> Obj:
    """The ``WsspSchedulerConfiguration`` for a published module."""
    stages: Obj = {}
    if filter_mode:
        stages["filter"] = {"mode": filter_mode}
    if score_mode:
        stages["score"] = {"mode": score_mode, "weight": weight}
    spec: Obj = {"url": url, "stages": stages, "failurePolicy": failure_policy,
                 "shadow": shadow}
    if sha256:
        spec["sha256"] = sha256
    if config:
        spec["config"] = dict(config)
    if runtime:
        spec["runtime"] = runtime
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": f"{name}-v{version}"}, "spec": spec}




#: clang flags for fragments: freestanding wasm32 with only the features ABI v1 allows.
C_FLAGS = ("--target=wasm32", "-mcpu=mvp", "-mbulk-memory", "-msign-ext", "-mmutable-globals",
           "-O2", "-ffreestanding", "-nostdlib", "-fno-exceptions", "-fno-ident",
           "-Wall", "-Wextra", "-Wl,--no-entry", "-Wl,--strip-all",
           "-Wl,-z,stack-size=65536")


def sdk_dir() -> Path | None:
    """The C SDK (``wssp.h``): in a source checkout, ``fragments/c``."""
    candidate = Path(__file__).resolve().parents[2] / "fragments" / "c"
    return candidate if (candidate / "wssp.h").exists() else None


def build(directory: Path, out: Path | None = None, sdk: Path | None = None) -> Path:
    """Build the fragment whose sources are in ``directory``: C files with clang, a ``.wat``
    with wat2wasm (or wasmtime's translator), AssemblyScript (``asconfig.json``) with ``asc``.
    Returns the module's path (``<directory>/<directory name>.wasm`` unless ``out``)."""
    import shutil
    import subprocess

    directory = directory.resolve()
    if not directory.is_dir():
        raise ValueError(f"{directory}: not a directory")
    target = (out or directory / f"{directory.name}.wasm").resolve()
    c_files = sorted(directory.glob("*.c"))
    wat_files = sorted(directory.glob("*.wat"))
    if c_files:
        clang = shutil.which("clang")
        if clang is None:
            raise ValueError("clang not found: install clang and lld (Debian: apt-get install "
                             "clang lld)")
        includes = [f"-I{directory}"]
        sdk = sdk or sdk_dir()
        if sdk is not None:
            includes.append(f"-I{sdk}")
        command = [clang, *C_FLAGS, *includes, "-o", str(target), *map(str, c_files)]
    elif len(wat_files) == 1:
        wat2wasm = shutil.which("wat2wasm")
        if wat2wasm is None:
            import wasmtime
            target.write_bytes(wasmtime.wat2wasm(wat_files[0].read_text()))
            return target
        command = [wat2wasm, str(wat_files[0]), "-o", str(target)]
    elif (directory / "asconfig.json").exists():
        npx = shutil.which("npx")
        if npx is None:
            raise ValueError("npx not found: AssemblyScript needs Node.js and npm")
        entry = directory / "assembly" / "index.ts"
        command = [npx, "--no-install", "asc", str(entry), "--config",
                   str(directory / "asconfig.json"), "--target", "release", "-o", str(target)]
    else:
        raise ValueError(f"{directory}: no C sources, no single .wat file and no asconfig.json")
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError(f"build failed ({' '.join(command[:1])}):\n{done.stderr.strip()}")
    return target
