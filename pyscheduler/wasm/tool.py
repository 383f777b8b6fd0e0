"""Tools for fragment authors behind ``pyscheduler fragment``: offline what-if runs, publishing
to object storage plus the resource, and listing resources with their status.

:func:`what_if` needs no cluster: it builds the node table from a cluster file (the embedded
cluster's ``nodePools`` format) or from Node objects, and runs each pod through the same pipeline
the scheduler runs, with the fragment overriding the stages, reporting every node's verdict and
score and the node that would be chosen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pyscheduler.settings import SchedulerConfig
from pyscheduler.framework.interface import CycleContext, FilterResult
from pyscheduler.framework.lifecycle import waiting_lines
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pipeline import Pipeline, ScheduleResult, StageOverride
from pyscheduler.framework.pod import PodInfo, PodSpecError, pod_info
from pyscheduler.nodepools import expand_pools, node_object, parse_node_pools
from pyscheduler.plugins.registry import build_profile
from pyscheduler.wasm.abi import NEW_STAGES, StageAnswer
from pyscheduler.wasm.errors import CallError
from pyscheduler.wasm.fragment import Fragment
from pyscheduler.wasm.lifecycle import narrowed, patch_problem, prefilter_narrowing
from pyscheduler.wasm.resource import API_VERSION, KIND, StageSpec
from pyscheduler.wasm.vm import Limits, get_runtime

__all__ = ["VIRTUAL_NODE_REASON", "PodReport", "format_reports", "lifecycle_exports",
           "load_nodes", "load_pods", "module_exports", "resource_body", "what_if"]

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
    #: what each stage after filtering answered, in order (``"permit: wait 60s: ..."``)
    stages: tuple[str, ...] = ()
    #: ``bound``, ``waiting`` (held at permit when the pods ran out), ``refused`` (reserve,
    #: permit or pre-bind said no) or ``unschedulable``
    outcome: str = ""
    #: labels and annotations pre-bind would add
    patch: dict[str, dict[str, str]] | None = None


#: What the what-if says of a virtual node (a cloud pool's): it is not a candidate here.
VIRTUAL_NODE_REASON = ("a cloud pool's virtual node: used only when no real node fits "
                       "(not tried here)")

_POSTFILTER = ("default (preemption, then bursting)", "preempt only", "burst only", "wait",
               "preempt on node")
_CAUSES = {1: "refused", 2: "denied", 3: "timed out", 4: "binding failed", 5: "deleted"}


def module_exports(wasm: bytes, runtime: str = "wasmtime",
                   limits: Limits | None = None) -> Mapping[str, str]:
    """The module's exports (name -> kind); :class:`LoadError` when it does not compile."""
    return get_runtime(runtime).compile(wasm, limits or Limits()).exports


def lifecycle_exports(exports: Mapping[str, str]) -> tuple[str, ...]:
    """The stages after filtering (and prefilter) a module with ``exports`` takes."""
    return tuple(stage for stage in NEW_STAGES if exports.get(f"wssp_{stage}") == "func")


class _Run:
    """One what-if: the table, the fragment, the pods held at its permit."""

    def __init__(self, fragment: Fragment, table: NodeTable, pipeline: Pipeline,
                 override: StageOverride, max_wait: float, prebind: StageSpec) -> None:
        self.fragment = fragment
        self.table = table
        self.pipeline = pipeline
        self.override = override
        self.max_wait = max_wait
        self.prebind_spec = prebind
        self.held: dict[str, tuple[PodInfo, str, int, list[str]]] = {}
        self.reports: dict[str, PodReport] = {}
        self.order: list[str] = []
        self.reserved: set[str] = set()  # uids this run counted on a node

    def call(self, stage: str, pod: PodInfo, node: str | None = None,
             cause: int = 0) -> StageAnswer | str:
        """The stage's answer, or the failure as text (the tool shows what the scheduler's
        failure policy would get)."""
        ctx = CycleContext.for_pod(pod, self.table)
        slot = self.table.slots.get(node) if node is not None else None
        waiting = b"" if stage == "prebind" else waiting_lines(
            (p, n) for p, n, _, _ in self.held.values())
        try:
            return self.fragment.call_sync(stage, ctx, node_row=slot, waiting=waiting,
                                           cause=cause)
        except CallError as exc:
            return f"failed: {exc.kind}: {exc.message}"

    def has(self, stage: str) -> bool:
        return stage in self.fragment.stages

    def commands(self, answer: StageAnswer, notes: list[str]) -> None:
        """``allow``/``reject`` for held pods, as the scheduler would apply them."""
        for verb, uid in answer.commands:
            if uid not in self.held:
                continue
            pod, node, slot, their_notes = self.held.pop(uid)
            if verb == "allow":
                their_notes.append("allowed")
                notes.append(f"allows {pod.namespace}/{pod.name}")
                self.finish(pod, node, slot, their_notes)
            elif verb == "reject":
                why = answer.message or "rejected by the fragment"
                their_notes.append(f"rejected: {why}")
                notes.append(f"rejects {pod.namespace}/{pod.name}")
                self.unreserve(pod, node, slot, 2, their_notes)
                self.report(pod, None, why, their_notes, "refused")

    def unreserve(self, pod: PodInfo, node: str, slot: int, cause: int,
                  notes: list[str]) -> None:
        self.table.remove_pod(slot, pod.uid)
        if self.has("unreserve"):
            answer = self.call("unreserve", pod, node, cause)
            notes.append(f"unreserve ({_CAUSES[cause]}): "
                         + (answer if isinstance(answer, str) else "ok"))
            if isinstance(answer, StageAnswer):
                self.commands(answer, notes)

    def finish(self, pod: PodInfo, node: str, slot: int, notes: list[str]) -> None:
        """Pre-bind and post-bind for a pod allowed to bind."""
        patch: dict[str, dict[str, str]] = {"labels": {}, "annotations": {}}
        if self.has("prebind"):
            answer = self.call("prebind", pod, node)
            if isinstance(answer, str):
                notes.append(f"prebind: {answer}")
            elif answer.code == 1:
                notes.append(f"prebind: reject: {answer.message}")
                self.unreserve(pod, node, slot, 1, notes)
                self.report(pod, None, answer.message, notes, "refused")
                return
            else:
                for verb, argument in answer.commands:
                    key, _, value = argument.partition("=")
                    problem = patch_problem(self.prebind_spec, verb, key, value)
                    if problem is not None:  # the call fails: no patch at all
                        notes.append(f"prebind: failed: output: {problem}")
                        patch = {"labels": {}, "annotations": {}}
                        break
                    patch["labels" if verb == "label" else "annotations"][key] = value
                else:
                    notes.append("prebind: ok")
        if self.has("postbind"):
            answer = self.call("postbind", pod, node)
            notes.append("postbind: " + (answer if isinstance(answer, str) else "ok"))
        self.report(pod, node, "", notes, "bound",
                    patch if patch["labels"] or patch["annotations"] else None)

    def report(self, pod: PodInfo, node: str | None, message: str, notes: list[str],
               outcome: str, patch: dict[str, dict[str, str]] | None = None) -> None:
        key = f"{pod.namespace}/{pod.name}"
        old = self.reports[key]
        self.reports[key] = PodReport(key, node, message or old.message, old.nodes,
                                      tuple(notes), outcome, patch)

    def schedule(self, key: str, pod: PodInfo) -> None:
        notes: list[str] = []
        ctx = CycleContext.for_pod(pod, self.table)
        override = self.override
        if self.has("prefilter"):
            pre = self.call("prefilter", pod)
            if isinstance(pre, str):
                notes.append(f"prefilter: {pre}")
            else:
                notes.append("prefilter: " + ("pass", "reject", "restrict")[pre.code]
                             + (f": {pre.message}" if pre.message else ""))
                self.commands(pre, notes)
                narrowing = prefilter_narrowing(pre, self.table.n, self.fragment.name)
                if narrowing is not None:
                    override = self._narrowed(narrowing)
        result = self.pipeline.schedule(ctx, override, explain=True)
        per_node = self._per_node(result)
        if result.node is None:
            message = result.filtered.diagnose().message()
            if self.has("postfilter"):
                answer = self.call("postfilter", pod)
                if isinstance(answer, str):
                    notes.append(f"postfilter: {answer}")
                else:
                    what = _POSTFILTER[answer.code]
                    if answer.code == 4:
                        what += f" {self.table.names[answer.value]}"
                    notes.append(f"postfilter: {what}"
                                 + (f": {answer.message}" if answer.message else ""))
                    self.commands(answer, notes)
            self.reports[key] = PodReport(key, None, message, per_node, tuple(notes),
                                          "unschedulable")
            return
        node, slot = result.node, result.slot
        self.table.add_pod(slot, pod)  # reserved: the room is held from here on
        self.reserved.add(pod.uid)
        self.reports[key] = PodReport(key, node, "", per_node)
        if self.has("reserve"):
            answer = self.call("reserve", pod, node)
            ok = isinstance(answer, str) or answer.code == 0
            notes.append("reserve: " + (answer if isinstance(answer, str) else
                                        "ok" if ok else f"reject: {answer.message}"))
            if isinstance(answer, StageAnswer):
                self.commands(answer, notes)
            if not ok:
                assert isinstance(answer, StageAnswer)
                self.unreserve(pod, node, slot, 1, notes)
                self.report(pod, None, answer.message, notes, "refused")
                return
        if self.has("permit"):
            answer = self.call("permit", pod, node)
            if isinstance(answer, str):
                notes.append(f"permit: {answer}")
            else:
                if answer.code == 1:
                    notes.append(f"permit: deny: {answer.message}")
                    self.commands(answer, notes)
                    self.unreserve(pod, node, slot, 2, notes)
                    self.report(pod, None, answer.message, notes, "refused")
                    return
                if answer.code == 2 and not any(
                        c == ("allow", pod.uid) for c in answer.commands):
                    wait = min(answer.value / 1000, self.max_wait)
                    notes.append(f"permit: wait {wait:g}s"
                                 + (f": {answer.message}" if answer.message else ""))
                    self.held[pod.uid] = (pod, node, slot, notes)
                    self.report(pod, node, answer.message, notes, "waiting")
                    self.commands(answer, notes)
                    return
                notes.append("permit: allow")
                self.commands(answer, notes)
        self.finish(pod, node, slot, notes)

    def _narrowed(self, narrowing: FilterResult) -> StageOverride:
        base = self.override

        def filter_(c: CycleContext) -> FilterResult | None:
            verdict = base.filter(c) if base.filter is not None else None
            return narrowing if verdict is None else narrowed(verdict, narrowing)

        mode = base.filter_mode if base.filter is not None else "extend"
        return dataclasses.replace(base, filter=filter_, filter_mode=mode)

    def _per_node(self, result: ScheduleResult,
                  ) -> dict[str, tuple[bool, str, int | None, int | None]]:
        table = self.table
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
        return per_node


def what_if(wasm: bytes, nodes: Sequence[Obj], pods: Sequence[Obj], *,
            config: Mapping[str, Any] | None = None, filter_mode: str | None = "auto",
            score_mode: str | None = "auto", weight: int = 1, runtime: str = "wasmtime",
            limits: Limits | None = None, place: bool = True, seed: int = 0,
            prebind: StageSpec | None = None,
            max_permit_wait_seconds: float = 300.0) -> list[PodReport]:
    """Schedule ``pods`` one after another over ``nodes`` with the fragment overriding the
    stages (``None`` leaves a stage to the built-ins, ``"auto"`` takes it when the module
    exports it, in replace mode), and every other stage the module exports run as the
    scheduler runs it: prefilter, postfilter when nothing fits, then reserve, permit (a pod
    told to wait is held, its room counted, until a later pod's answer allows or rejects
    it; pods still held at the end are reported ``waiting``), pre-bind (checked against
    ``prebind``'s allowlist) and post-bind. With ``place`` each pod is counted on its node
    before the next one, as the scheduler would."""
    if "auto" in (filter_mode, score_mode):
        exports = module_exports(wasm, runtime, limits)
        if filter_mode == "auto":
            filter_mode = "replace" if exports.get("wssp_filter") == "func" else None
        if score_mode == "auto":
            score_mode = "replace" if exports.get("wssp_score") == "func" else None
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
    run = _Run(fragment, table, pipeline, override, max_permit_wait_seconds,
               prebind or StageSpec("extend"))
    for obj in pods:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        run.order.append(key)
        try:
            pod = pod_info(obj)
        except PodSpecError as exc:
            run.reports[key] = PodReport(key, None, f"invalid pod: {exc}", {})
            continue
        run.schedule(key, pod)
        if not place:  # each pod alone on the table as given
            for slot in range(table.n):
                for uid in [u for u in table.pods[slot] if u in run.reserved]:
                    table.remove_pod(slot, uid)
            run.held.clear()
    return [run.reports[key] for key in run.order]


def format_reports(reports: Sequence[PodReport], *, as_json: bool = False) -> str:
    if as_json:
        return json.dumps([{"pod": r.pod, "node": r.node, "message": r.message,
                            "outcome": r.outcome, "stages": list(r.stages),
                            "patch": r.patch, "nodes": {
            name: {"feasible": f, "reason": reason, "fragmentScore": s, "totalScore": t}
            for name, (f, reason, s, t) in r.nodes.items()}} for r in reports], indent=2)
    lines = []
    for r in reports:
        if r.outcome == "waiting":
            head = f"-> {r.node}, still held at permit (it would time out)"
        elif r.node:
            head = f"-> {r.node}"
        elif r.outcome == "refused":
            head = f"refused: {r.message}"
        else:
            head = f"unschedulable: {r.message}"
        lines.append(f"pod {r.pod}: {head}")
        for note in r.stages:
            lines.append(f"  {note}")
        if r.patch:
            for kind, values in r.patch.items():
                for k, v in values.items():
                    lines.append(f"  adds {kind[:-1]} {k}={v}")
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
                  runtime: str | None = None, lifecycle: Sequence[str] = (),
                  prebind: StageSpec | None = None) -> Obj:
    """The ``WsspSchedulerConfiguration`` for a published module: ``lifecycle`` lists the
    stages after filtering it exports (listed so that a module without them is refused)."""
    stages: Obj = {}
    if filter_mode:
        stages["filter"] = {"mode": filter_mode}
    if score_mode:
        stages["score"] = {"mode": score_mode, "weight": weight}
    for stage in lifecycle:
        stages[stage] = {}
    if "prebind" in stages and prebind is not None:
        if prebind.allowed_labels:
            stages["prebind"]["allowedLabels"] = list(prebind.allowed_labels)
        if prebind.allowed_annotations:
            stages["prebind"]["allowedAnnotations"] = list(prebind.allowed_annotations)
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
