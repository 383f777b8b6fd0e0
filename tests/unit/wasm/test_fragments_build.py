"""The committed fragments: they rebuild byte for byte, they are valid modules importing only what
ABI v1 allows (the hostile ones show exactly their flaw), and they behave as documented.

* ``hack/build_fragments.sh --check`` passes when the toolchains are present.
* Every ``.wasm`` under ``fragments/`` and the packaged default fragment compiles with wasmtime;
  the well-behaved ones pass the host's load checks, the hostile ones fail as their README says.
* The default fragment agrees with the built-in plugins (NodeUnschedulable, TaintToleration,
  NodeAffinity, NodeResourcesFit filter; MostFreeMemory score) on random clusters, and the
  examples (C, AssemblyScript, WAT) on hand-made cases; the two cost-tier builds (C and
  AssemblyScript) answer the same.
"""

from __future__ import annotations

import gc
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyscheduler.framework.interface import CycleContext, FilterPlugin, FilterResult
from pyscheduler.framework.nodetable import node_info
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.node_affinity import NodeAffinity
from pyscheduler.plugins.node_resources_fit import NodeResourcesFit
from pyscheduler.plugins.node_unschedulable import NodeUnschedulable
from pyscheduler.plugins.taint_toleration import TaintToleration
from pyscheduler.wasm.abi import NEW_STAGES
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.fragment import Fragment
from pyscheduler.wasm.vm import Limits, get_runtime
from tests.unit.plugins import reference
from tests.unit.plugins.builders import (
    NodeBuilder,
    build_table,
    context,
    expr,
    field,
    make_node,
    make_pod,
    outcome,
    rows,
    scores,
)
from tests.unit.plugins.test_differential import Features, Scenario, scenarios

wasmtime = pytest.importorskip("wasmtime")

ROOT = Path(__file__).resolve().parents[3]
FRAGMENTS = ROOT / "fragments"
SCRIPT = ROOT / "hack" / "build_fragments.sh"
DEFAULT = ROOT / "pyscheduler" / "wasm" / "fragments" / "default-v1.0.0.wasm"
GPU_BINPACK = FRAGMENTS / "examples" / "gpu-binpack" / "gpu-binpack.wasm"
ZONE_SPREAD = FRAGMENTS / "examples" / "zone-spread" / "zone-spread.wasm"
COST_TIER_C = FRAGMENTS / "examples" / "cost-tier" / "cost-tier.wasm"
COST_TIER_AS = FRAGMENTS / "assemblyscript" / "examples" / "cost-tier" / "cost-tier.wasm"
LEAST_CPU_AS = FRAGMENTS / "assemblyscript" / "examples" / "least-cpu" / "least-cpu.wasm"
CORRECTNESS_LIMITS = Limits(timeout_seconds=30.0)
PRESENT_ONLY = FRAGMENTS / "wat" / "present-only.wasm"
HOSTILE = FRAGMENTS / "hostile"

ALLOWED_IMPORTS = {("wssp", "log"), ("env", "abort")}
LIFECYCLE_EXPORTS = {f"wssp_{stage}" for stage in NEW_STAGES}
GPU = "nvidia.com/gpu"
UNSCHEDULABLE = "node(s) were unschedulable"
TAINTED = "node(s) had untolerated taint"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NOT_ALLOWED = "node(s) are not in an allowed cost tier"


def committed_modules() -> list[Path]:
    found = [p for p in FRAGMENTS.rglob("*.wasm") if "node_modules" not in p.parts]
    return sorted([*found, DEFAULT])


@cache
def module_bytes(path: Path) -> bytes:
    return path.read_bytes()


@cache
def compiled(path: Path, filter: bool = True, score: bool = True) -> Fragment:
    """The fragment compiled once per test session; each call on a new table gets a fresh
    instance (and so a fresh ``wssp_init``). These tests check what fragments compute: fuel
    bounds a runaway exactly, and a wall clock loose enough that a busy machine cannot fail a
    call the guest finishes (the hostile modules' tests hold the deadline tight)."""
    return Fragment.compile(module_bytes(path), name=path.stem, filter=filter, score=score,
                            limits=CORRECTNESS_LIMITS)


@pytest.fixture(scope="module", autouse=True)
def _drop_compiled_modules() -> Iterator[None]:
    """Release the cached engines and modules while wasmtime is still fully loaded (not in
    interpreter shutdown)."""
    yield
    compiled.cache_clear()
    gc.collect()


def load(path: Path, config: Mapping[str, Any] | None = None, *, filter: bool = True,
         score: bool = True) -> Fragment:
    """The compiled fragment with this configuration (the module is compiled once)."""
    base = compiled(path, filter, score)
    if not config:
        return base
    return Fragment(name=base.name, module=base.module, config=dict(config), has_filter=filter,
                    has_score=score, digest=base.digest, runtime=base.runtime)


def reasons_of(result: FilterResult, ctx: CycleContext) -> dict[str, list[str]]:
    return {name: [m for m, _ in rs] for name, rs in outcome(result, ctx.table).items()}


# -- 1. the build is reproducible ----------------------------------------------------------------

def test_build_check_passes() -> None:
    """Committed modules equal a fresh build (pieces without a toolchain are skipped by the
    script itself)."""
    if not any(shutil.which(tool) for tool in ("clang", "wat2wasm", "node")):
        pytest.skip("no fragment toolchain installed")
    env = {**os.environ, "BUILD_FRAGMENTS_NO_INSTALL": "1"}
    run = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True,
                         env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr


# -- 2. the modules are what they claim ----------------------------------------------------------

# Hostile modules whose flaw is static: what the module itself shows.
HOSTILE_IMPORTS = {
    "wasi-import.wasm": [("wasi_snapshot_preview1", "fd_write")],
    "unknown-import.wasm": [("env", "now")],
    "log-flood.wasm": [("wssp", "log")],
}
HOSTILE_LOAD_ERRORS = {
    "abi-v2.wasm": "fragment speaks ABI v2, this scheduler speaks v1",
    "no-marker.wasm": "missing ABI marker export wssp_abi_v1",
    "wasi-import.wasm": "import wasi_snapshot_preview1.fd_write",
    "unknown-import.wasm": "import env.now",
    "init-fails.wasm": "wssp_init returned 1",
    "init-loops.wasm": "wssp_init failed: (fuel exhausted|deadline exceeded)",
    "marker-f64.wasm": "export wssp_abi_v1 must be a function \\(\\) -> i32 or an i32 global, "
                       "not a f64 global",
    "invalid.wasm": "not a WebAssembly module",
    "stage-bad-signature.wasm": "export wssp_permit must be a function \\(i32\\) -> \\(i32\\), "
                                "not \\(i32, i32\\) -> \\(i32\\)",
    "unknown-stage-export.wasm": "unknown export wssp_permitt \\(known: wssp_alloc, wssp_init, "
                                 "wssp_prefilter, ",
}


def test_every_expected_module_is_committed() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in committed_modules()}
    for path in (DEFAULT, GPU_BINPACK, ZONE_SPREAD, COST_TIER_C, COST_TIER_AS, LEAST_CPU_AS,
                 PRESENT_ONLY):
        assert path.relative_to(ROOT).as_posix() in names
    hostile = {p.name for p in HOSTILE.glob("*.wasm")}
    assert hostile == {"infinite-loop.wasm", "memory-bomb.wasm", "deep-recursion.wasm",
                       "unreachable-score.wasm", "out-of-range.wasm", "abi-v2.wasm",
                       "no-marker.wasm", "wasi-import.wasm", "unknown-import.wasm",
                       "init-fails.wasm", "filter-fails.wasm", "invalid.wasm",
                       "init-loops.wasm", "marker-f64.wasm", "log-flood.wasm",
                       "permit-bad-answer.wasm", "permit-wait-zero.wasm",
                       "postfilter-bad-row.wasm", "prebind-flood.wasm", "prebind-bad-verb.wasm",
                       "reserve-traps.wasm", "prefilter-loops.wasm",
                       "stage-bad-signature.wasm", "unknown-stage-export.wasm"}
    # every hostile module except the garbage one comes from a .wat next to it
    assert {p.stem for p in HOSTILE.glob("*.wat")} == {h[:-5] for h in hostile} - {"invalid"}


@pytest.mark.parametrize("path", committed_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_module_is_valid_and_imports_only_the_allowlist(path: Path) -> None:
    data = module_bytes(path)
    engine = wasmtime.Engine()
    if path.name == "invalid.wasm":
        with pytest.raises(Exception):
            wasmtime.Module(engine, data)
        return
    module = wasmtime.Module(engine, data)
    imports = [(i.module, i.name) for i in module.imports]
    exports = {e.name: e.type for e in module.exports}
    if path.parent == HOSTILE:
        assert imports == HOSTILE_IMPORTS.get(path.name, [])
        if path.name == "marker-f64.wasm":
            marker = exports["wssp_abi_v1"]
            assert isinstance(marker, wasmtime.GlobalType)
            assert marker.content == wasmtime.ValType.f64()
        markers = sorted(n for n in exports if n.startswith("wssp_abi_v"))
        expected = {"abi-v2.wasm": ["wssp_abi_v2"], "no-marker.wasm": []}
        assert markers == expected.get(path.name, ["wssp_abi_v1"])
    else:
        assert set(imports) <= ALLOWED_IMPORTS, imports
        assert isinstance(exports["wssp_abi_v1"], wasmtime.FuncType)
        assert exports["wssp_abi_v1"].results[0] == wasmtime.ValType.i32()
    assert isinstance(exports["memory"], wasmtime.MemoryType)
    for name in ("wssp_alloc", "wssp_init"):
        assert isinstance(exports[name], wasmtime.FuncType), name
    assert set(exports) & {"wssp_filter", "wssp_score", *LIFECYCLE_EXPORTS}
    # only the ABI's exports (and memory): no runtime internals leak out
    misspelt = {"wssp_permitt"} if path.name == "unknown-stage-export.wasm" else set()
    assert set(exports) <= {"memory", "wssp_alloc", "wssp_init", "wssp_filter", "wssp_score",
                            "wssp_abi_v1", "wssp_abi_v2", *LIFECYCLE_EXPORTS, *misspelt}


@pytest.mark.parametrize("path", [p for p in committed_modules() if p.parent != HOSTILE],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_well_behaved_modules_pass_the_host_load_checks(path: Path) -> None:
    exports = {e.name for e in wasmtime.Module(wasmtime.Engine(), module_bytes(path)).exports}
    Fragment.load(module_bytes(path), filter="wssp_filter" in exports,
                  score="wssp_score" in exports)


@pytest.mark.parametrize("path", [DEFAULT, GPU_BINPACK, ZONE_SPREAD, COST_TIER_C, COST_TIER_AS,
                                  LEAST_CPU_AS, PRESENT_ONLY],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_wssp_alloc_contract(path: Path) -> None:
    """8-byte aligned, zero-filled, never handed out twice, 0 when memory cannot grow."""
    limits = Limits(memory_bytes=4 * 2**20)
    instance = get_runtime("wasmtime").compile(module_bytes(path), limits).instantiate()
    assert instance.call("wssp_alloc", 8 * 2**20) == 0  # beyond the cap
    blocks = []
    for size in (100, 13, 8, 0, 2 * 2**20, 24):
        ptr = instance.call("wssp_alloc", size)
        assert ptr > 0 and ptr % 8 == 0 and ptr + size <= instance.memory_size(), (size, ptr)
        memory = instance.memory()
        assert not memory[ptr: ptr + size].any(), size
        memory[ptr: ptr + size] = 0xAB  # dirty it: no later block may see this
        blocks.append((ptr, size))
    ends = sorted((p, p + n) for p, n in blocks if n)  # disjoint (an empty block may not be)
    assert all(a_end <= b for (_, a_end), (b, _) in zip(ends, ends[1:], strict=False))
    assert instance.call("wssp_alloc", 3 * 2**20) == 0  # the cap is nearly used up
    assert instance.call("wssp_alloc", 64) > 0  # small blocks still fit
    # the SDKs speak minor 1 (ABI §8); the hand-written WAT example stays at minor 0
    assert instance.call("wssp_abi_v1") == (0 if path == PRESENT_ONLY else 1)


# -- 3a. hostile modules fail exactly as documented ----------------------------------------------

HOSTILE_LIMITS = Limits(memory_bytes=8 * 2**20, fuel=20_000_000, timeout_seconds=0.5)


def hostile_ctx() -> CycleContext:
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj() for i in range(3)]
    return context(make_pod().req(cpu="1").obj(), nodes)


@pytest.mark.parametrize("name", sorted(HOSTILE_LOAD_ERRORS))
def test_hostile_module_is_refused_at_load(name: str) -> None:
    with pytest.raises(LoadError, match=HOSTILE_LOAD_ERRORS[name]):
        Fragment.load(module_bytes(HOSTILE / name), limits=HOSTILE_LIMITS)


# module -> (filter outcome, score outcome): a CallError kind set, or None for "works"
HOSTILE_CALLS: dict[str, tuple[set[str] | None, set[str] | None]] = {
    "infinite-loop.wasm": ({"fuel", "timeout"}, None),
    "memory-bomb.wasm": ({"fuel", "timeout"}, None),
    "deep-recursion.wasm": ({"trap"}, None),
    "unreachable-score.wasm": (None, {"trap"}),
    "out-of-range.wasm": ({"output"}, {"output"}),
    "filter-fails.wasm": ({"return"}, None),
    "log-flood.wasm": ({"trap"}, None),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CALLS))
def test_hostile_module_fails_its_calls(name: str) -> None:
    ctx = hostile_ctx()
    frag = Fragment.load(module_bytes(HOSTILE / name), limits=HOSTILE_LIMITS, table=ctx.table)
    filter_kinds, score_kinds = HOSTILE_CALLS[name]
    calls: list[tuple[Callable[[], object], set[str] | None]] = [
        (lambda: frag.filter(ctx), filter_kinds),
        (lambda: frag.score(ctx, ctx.nodes().copy()), score_kinds)]
    for call, kinds in calls:
        if kinds is None:
            call()
        else:
            with pytest.raises(CallError) as failed:
                call()
            assert failed.value.kind in kinds, failed.value.message
    # the instance was discarded, not the fragment: a working stage still works afterwards
    if filter_kinds is None:
        assert frag.filter(ctx).passed is not None


# module -> (lifecycle stage, CallError kinds, message), each failing one call (ABI minor 3)
HOSTILE_STAGE_CALLS: dict[str, tuple[str, set[str], str]] = {
    "permit-bad-answer.wasm": ("permit", {"output"}, "answer 7 is not one of 0..2 for wssp_permit"),
    "permit-wait-zero.wasm": ("permit", {"output"}, "answered 2 \\(wait\\) with answer_value 0"),
    "postfilter-bad-row.wasm": ("postfilter", {"output"}, "nominated row 100000"),
    "prebind-flood.wasm": ("prebind", {"output"}, "wrote 5000 output lines, more than 1000"),
    "prebind-bad-verb.wasm": ("prebind", {"output"},
                              "line 1 \"allow some-uid\": 'allow' is not a command of "
                              "wssp_prebind"),
    "reserve-traps.wasm": ("reserve", {"trap"}, "unreachable"),
    "prefilter-loops.wasm": ("prefilter", {"fuel", "timeout"}, "fuel|deadline"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_STAGE_CALLS))
def test_hostile_module_fails_its_lifecycle_call(name: str) -> None:
    ctx = hostile_ctx()
    frag = Fragment.load(module_bytes(HOSTILE / name), limits=HOSTILE_LIMITS, table=ctx.table)
    stage, kinds, message = HOSTILE_STAGE_CALLS[name]
    assert stage in frag.stages
    with pytest.raises(CallError, match=message) as failed:
        frag.call_sync(stage, ctx, node_row=0)
    assert failed.value.kind in kinds, failed.value.message
    # the instance was discarded, not the fragment: filter and score still work
    assert frag.filter(ctx).passed is not None
    assert frag.score(ctx, ctx.nodes().copy()) is not None


def test_memory_bomb_stays_under_the_cap() -> None:
    limits = Limits(memory_bytes=4 * 2**20, fuel=20_000_000, timeout_seconds=0.5)
    module = get_runtime("wasmtime").compile(module_bytes(HOSTILE / "memory-bomb.wasm"), limits)
    instance = module.instantiate()
    with pytest.raises(CallError) as failed:
        instance.call("wssp_filter", 0)
    assert failed.value.kind in ("fuel", "timeout")
    assert instance.memory_size() <= limits.memory_bytes


# -- raw wssp_init, to see what a fragment declares from a given configuration text -------------

BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


def raw_init(path: Path, config: bytes,
             resources: tuple[str, ...] = BASE_RESOURCES) -> tuple[int, list[str], list[str]]:
    """Instantiate with plain wasmtime, fill the host fields wssp_init may read, call it with
    ``config`` verbatim: (status, reasons, want_labels)."""
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    module = wasmtime.Module(engine, module_bytes(path))
    linker = wasmtime.Linker(engine)

    def abort(*_: int) -> None:
        raise RuntimeError("env.abort")

    if ("env", "abort") in [(i.module, i.name) for i in module.imports]:
        i32 = wasmtime.ValType.i32()
        linker.define_func("env", "abort", wasmtime.FuncType([i32] * 4, []), abort)
    instance = linker.instantiate(store, module)
    exports = instance.exports(store)
    memory, alloc = exports["memory"], exports["wssp_alloc"]

    def put(data: bytes) -> int:
        ptr: int = alloc(store, max(len(data), 1))
        memory.write(store, data, ptr)
        return ptr

    ctx = alloc(store, 256)
    names = "\n".join(resources).encode()
    header = struct.pack("<IIII", 1, 64, 0, len(resources)) + struct.pack("<II", put(names),
                                                                            len(names))
    memory.write(store, header, ctx)
    status = exports["wssp_init"](store, ctx, put(config), len(config))

    def lines(offset: int) -> list[str]:
        ptr, length = struct.unpack("<II", memory.read(store, ctx + offset, ctx + offset + 8))
        text = memory.read(store, ptr, ptr + length).decode() if length else ""
        return text.split("\n") if text else []

    return status, lines(128), lines(136)


def test_default_declares_one_insufficient_reason_per_resource() -> None:
    status, reasons, wanted = raw_init(DEFAULT, b"{}", (*BASE_RESOURCES, GPU, "example.com/foo"))
    assert status == 0 and wanted == []
    assert reasons[:4] == [UNSCHEDULABLE, TAINTED, AFFINITY, "Too many pods"]
    for name in (*BASE_RESOURCES, GPU, "example.com/foo"):
        assert f"Insufficient {name}" in reasons


@pytest.mark.parametrize("path", [COST_TIER_C, COST_TIER_AS], ids=["c", "assemblyscript"])
@pytest.mark.parametrize(("config", "label"), [
    (b"{}", "cost-tier"),
    (b'{"label":"tier"}', "tier"),
    # whitespace, nested values to skip (with brackets inside strings), escapes, non-ASCII
    (b' {\n "other" : {"x": [1, "]", {"y": "}\\""}]} ,\t"allowed" : [ "a" , 5 , "b" ] ,'
     b' "label" : "ti\\u00e9r\\/x\\ud83d\\ude00" } ', "ti\u00e9r/x\U0001f600"),
    (b'{"label": 7}', "cost-tier"),  # not a string: the default
])
def test_config_reader(path: Path, config: bytes, label: str) -> None:
    status, reasons, wanted = raw_init(path, config)
    assert (status, reasons, wanted) == (0, [NOT_ALLOWED], [label])


@pytest.mark.parametrize("path", [COST_TIER_C, COST_TIER_AS], ids=["c", "assemblyscript"])
def test_empty_label_is_refused(path: Path) -> None:
    assert raw_init(path, b'{"label": ""}')[0] != 0
    with pytest.raises(LoadError, match="wssp_init returned"):
        Fragment.load(module_bytes(path), config={"label": ""})


# -- 3b. the default fragment ------------------------------------------------------------------

def node(name: str, extra: Mapping[str, int] | None = None, *, cpu: str = "4",
         memory: str = "8Gi", pods: int = 110) -> NodeBuilder:
    """A node builder with room for pods and, in ``extra``, more resources."""
    return make_node(name).capacity(extra, cpu=cpu, memory=memory, pods=pods)


def test_default_filter_reasons() -> None:
    nodes = [node("ok").label("zone", "a").obj(),
             node("cordoned").label("zone", "a").unschedulable().obj(),
             node("tainted").label("zone", "a").taint("dedicated", "infra").obj(),
             node("elsewhere").label("zone", "b").obj(),
             node("small", cpu="1").label("zone", "a").obj(),
             node("tight", memory="1Gi").label("zone", "a").obj(),
             node("full", pods=1).label("zone", "a").obj(),
             node("nogpu").label("zone", "a").obj()]
    running = {"full": [make_pod("r").obj()]}
    ctx = context(make_pod().req(cpu="2", memory="2Gi").node_selector(zone="a").obj(), nodes,
                  running)
    got = reasons_of(load(DEFAULT).filter(ctx), ctx)
    assert got == {"ok": [], "cordoned": [UNSCHEDULABLE], "tainted": [TAINTED],
                   "elsewhere": [AFFINITY], "small": ["Insufficient cpu"],
                   "tight": ["Insufficient memory"], "full": ["Too many pods"], "nogpu": []}

    # first failing check wins, in kube's plugin order
    ctx = context(make_pod().req(cpu="8").node_selector(zone="b").obj(), nodes, running)
    got = reasons_of(load(DEFAULT).filter(ctx), ctx)
    assert got["cordoned"] == [UNSCHEDULABLE] and got["tainted"] == [TAINTED]
    assert got["ok"] == [AFFINITY] and got["elsewhere"] == ["Insufficient cpu"]


def test_default_filter_extended_resources() -> None:
    nodes = [node("gpu4", {GPU: 4}).obj(), node("gpu1", {GPU: 1}).obj(), node("plain").obj(),
             node("storage", {"ephemeral-storage": 100}).obj()]
    ctx = context(make_pod().req({GPU: 2}).obj(), nodes, {"gpu4": [make_pod("g").req({GPU: 1})
                                                                  .obj()]})
    assert reasons_of(load(DEFAULT).filter(ctx), ctx) == {
        "gpu4": [], "gpu1": [f"Insufficient {GPU}"], "plain": [f"Insufficient {GPU}"],
        "storage": [f"Insufficient {GPU}"]}
    ctx = context(make_pod().req(ephemeral_storage=500).obj(), nodes)
    got = reasons_of(load(DEFAULT).filter(ctx), ctx)
    assert got == {name: ["Insufficient ephemeral-storage"] for name in got}


def test_default_node_affinity_operators() -> None:
    nodes = [node(name).labels(labels).obj() for name, labels in [
        ("a", {"zone": "a", "num": "5"}), ("b", {"zone": "b", "num": "07"}),
        ("c", {"zone": "c", "num": "x1"}), ("d", {"tier": "gold"})]]
    cases: list[tuple[Any, set[str]]] = [
        (make_pod().node_affinity_in("zone", "a", "b", "nowhere"), {"a", "b"}),
        (make_pod().node_affinity_not_in("zone", "a"), {"b", "c", "d"}),
        (make_pod().required_term(expr("tier", "Exists")), {"d"}),
        (make_pod().required_term(expr("tier", "DoesNotExist")), {"a", "b", "c"}),
        (make_pod().required_term(expr("num", "Gt", "5")), {"b"}),
        (make_pod().required_term(expr("num", "Lt", "6")), {"a"}),
        (make_pod().required_term(expr("num", "Gt", "-1"), expr("zone", "In", "b")), {"b"}),
        # terms are ORed, the nodeSelector ANDed with them
        (make_pod().node_affinity_in("zone", "a").node_affinity_in("tier", "gold"), {"a", "d"}),
        (make_pod().node_selector(zone="b").node_affinity_in("zone", "a")
         .node_affinity_in("num", "07"), {"b"}),
        (make_pod().required_term(fields=[field("In", "c")]), {"c"}),
        (make_pod().required_term(expr("zone", "Exists"), fields=[field("NotIn", "c")]),
         {"a", "b"}),
        (make_pod().node_selector(zone="nowhere"), set()),
    ]
    for builder, expected in cases:
        ctx = context(builder.obj(), nodes)
        result = load(DEFAULT).filter(ctx)
        assert result.passed is not None
        assert {ctx.table.names[i] for i in np.flatnonzero(result.passed)} == expected, \
            builder.obj()["spec"]


def test_default_score_most_free_memory() -> None:
    nodes = [node("big", memory="16Gi").obj(), node("half", memory="8Gi").obj(),
             node("used", memory="16Gi").obj(), node("none", memory="1Gi").obj()]
    ctx = context(make_pod().req(memory="1Gi").obj(), nodes,
                  {"used": [make_pod("r").req(memory="12Gi").obj()]})
    feasible = rows(ctx.table, ["big", "half", "used", "none"])
    got = scores(load(DEFAULT).score(ctx, feasible), ctx.table, feasible)
    assert got == {"big": 100, "half": 46, "used": 20, "none": 0}
    # only candidates count towards the maximum
    feasible = rows(ctx.table, ["half", "used"])
    got = scores(load(DEFAULT).score(ctx, feasible), ctx.table, feasible)
    assert got == {"half": 100, "used": 42}


# Differential: the built-in filters the default rule stands for, and its score.
DEFAULT_FEATURES = Features(labels=True, taints=True, unschedulable=True, resources=True,
                            affinity=True, tolerations=True)
BUILTIN_FILTERS: list[tuple[FilterPlugin, str | None]] = [
    (NodeUnschedulable(), UNSCHEDULABLE), (TaintToleration(), TAINTED),
    (NodeAffinity(), AFFINITY), (NodeResourcesFit(), None)]
DIFF_SETTINGS = settings(max_examples=100, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


@DIFF_SETTINGS
@given(scenarios(DEFAULT_FEATURES))
def test_default_filter_agrees_with_the_builtin_plugins(s: Scenario) -> None:
    ctx, refs = s.build()
    got = reasons_of(load(DEFAULT).filter(ctx), ctx)
    builtin = [(plugin.filter(ctx), message) for plugin, message in BUILTIN_FILTERS]
    for ref in refs:
        slot = ctx.table.slots[ref.name]
        expected: str | set[str] | None = None
        for result, message in builtin:
            if result.passed is None or result.passed[slot]:
                continue
            expected = message or {r.message for r in result.reasons if r.failed[slot]}
            break
        reasons = got[ref.name]
        if expected is None:
            assert reasons == [], ref.name
        elif isinstance(expected, str):
            assert reasons == [expected], ref.name
        else:
            assert len(reasons) == 1 and reasons[0] in expected, (ref.name, reasons, expected)


@DIFF_SETTINGS
@given(scenarios(Features(resources=True)))
def test_default_score_agrees_with_most_free_memory(s: Scenario) -> None:
    ctx, refs = s.build()
    feasible = s.feasible(ctx.table)
    got = scores(load(DEFAULT).score(ctx, feasible), ctx.table, feasible)
    builtin = NodeResourcesFit(strategy="MostFreeMemory").score(ctx, feasible)
    assert got == scores(builtin, ctx.table, feasible)
    chosen = [r for r in refs if feasible[ctx.table.slots[r.name]]]
    assert got == dict(zip([r.name for r in chosen],
                           reference.most_free_memory(ctx.pod, chosen), strict=True))


def test_default_follows_a_changing_table() -> None:
    """One instance across pods: rows rewritten by the host reach the guest."""
    table = build_table([node("a").obj(), node("b", cpu="1").obj()])
    frag = Fragment.load(module_bytes(DEFAULT), table=table)
    pod = make_pod().req(cpu="2").obj()
    ctx = CycleContext.for_pod(pod_info(pod), table)
    assert reasons_of(frag.filter(ctx), ctx) == {"a": [], "b": ["Insufficient cpu"]}
    table.set_node(node_info(node("b", cpu="8").unschedulable().obj()))
    table.set_node(node_info(node("c", cpu="8").obj()))
    ctx = CycleContext.for_pod(pod_info(pod), table)
    assert reasons_of(frag.filter(ctx), ctx) == {"a": [], "b": [UNSCHEDULABLE], "c": []}


def _random_node(rng: np.random.Generator, name: str) -> dict[str, Any]:
    b = node(name, cpu=str(int(rng.integers(1, 5))), memory=f"{int(rng.integers(1, 9))}Gi",
             pods=int(rng.integers(1, 6)))
    if rng.random() < 0.8:
        b = b.label("zone", str(rng.choice(["a", "b", "c"])))
    if rng.random() < 0.15:
        b = b.taint("dedicated", str(rng.choice(["infra", "gpu"])))
    if rng.random() < 0.1:
        b = b.unschedulable()
    return b.obj()


POD_SHAPES = [
    make_pod().req(cpu="500m", memory="1Gi").obj(),
    make_pod().req(cpu="500m", memory="1Gi").obj(),  # the same shape again: an incremental call
    # the same requests, other tolerations: only the pod_taints rows the host lists change
    make_pod().req(cpu="500m", memory="1Gi").toleration("dedicated", "infra").obj(),
    make_pod().req(cpu="2", memory="512Mi").obj(),
    make_pod().req(memory="3Gi").node_selector(zone="a").obj(),
    make_pod().req(cpu="1").toleration("dedicated", "infra").obj(),
    make_pod().req(cpu="100m").node_affinity_in("zone", "b", "c").toleration(
        "node.kubernetes.io/unschedulable", effect="NoSchedule").obj(),
]


@pytest.mark.parametrize("seed", range(6))
def test_incremental_calls_agree_with_a_fresh_instance(seed: int) -> None:
    """One instance kept across a random run of cluster changes and pods (ABI §4.3: it is told
    the changed rows and recomputes only those when the pod's inputs repeat) gives, at every
    step, the verdicts and scores of a fresh instance computing every row."""
    rng = np.random.default_rng(seed)
    table = build_table([_random_node(rng, f"n{i}") for i in range(12)])
    kept = Fragment.load(module_bytes(DEFAULT), table=table)
    base = compiled(DEFAULT)
    placed: list[tuple[str, str]] = []
    partial_calls = 0
    for step in range(120):
        op = rng.random()
        names = [table.names[i] for i in range(table.n) if table.valid[i]]
        if op < 0.45 and names:  # a pod lands on a node
            where = str(rng.choice(names))
            pod = pod_info(make_pod(f"p{step}").uid(f"u{step}").req(
                cpu=f"{int(rng.integers(1, 8)) * 100}m",
                memory=f"{int(rng.integers(1, 8)) * 128}Mi").obj())
            table.add_pod(table.slots[where], pod)
            placed.append((where, pod.uid))
        elif op < 0.6 and placed:  # one leaves
            where, uid = placed.pop(int(rng.integers(len(placed))))
            if where in table.slots:
                table.remove_pod(table.slots[where], uid)
        elif op < 0.75 and names:  # a node changes (capacity, labels, taints, cordon)
            table.set_node(node_info(_random_node(rng, str(rng.choice(names)))))
        elif op < 0.85:
            table.set_node(node_info(_random_node(rng, f"new{step}")))
        elif op < 0.9 and len(names) > 2:
            table.remove_node(str(rng.choice(names)))
        shape = POD_SHAPES[int(rng.integers(len(POD_SHAPES)))]
        ctx = CycleContext.for_pod(pod_info(shape), table)
        fresh = Fragment(name=base.name, module=base.module, config={}, has_filter=True,
                         has_score=True, digest=base.digest, runtime=base.runtime)
        got, want = kept.filter(ctx), fresh.filter(ctx)
        assert got.passed is not None and want.passed is not None
        assert reasons_of(got, ctx) == reasons_of(want, ctx), step
        feasible = want.passed & (rng.random(len(want.passed)) < 0.85)  # candidates vary too
        assert scores(kept.score(ctx, feasible), ctx.table, feasible) == \
            scores(fresh.score(ctx, feasible), ctx.table, feasible), step
        guest = kept.prepare(table)
        if guest.instance.memory()[guest.ctx + 100: guest.ctx + 104].view(np.uint32)[0] \
                != 0xFFFFFFFF:
            partial_calls += 1
    assert kept.stats.instances == 1 and kept.stats.failures == 0
    assert partial_calls > 30  # the run did exercise the incremental path


# -- 3c. examples ------------------------------------------------------------------------------

def test_gpu_binpack() -> None:
    nodes = [node("busy", {GPU: 4}).obj(), node("idle", {GPU: 8}).obj(),
             node("one", {GPU: 1}).obj(), node("cpu-only").obj(),
             node("cordoned", {GPU: 8}).unschedulable().obj()]
    running = {"busy": [make_pod("b").req({GPU: 2}).obj()],
               "one": [make_pod("o").req({GPU: 1}).obj()]}
    ctx = context(make_pod().req({GPU: 1}).obj(), nodes, running)
    frag = load(GPU_BINPACK)
    assert reasons_of(frag.filter(ctx), ctx) == {
        "busy": [], "idle": [], "one": [f"Insufficient {GPU}"],
        "cpu-only": [f"Insufficient {GPU}"], "cordoned": [UNSCHEDULABLE]}
    everyone = ctx.nodes().copy()
    assert scores(frag.score(ctx, everyone), ctx.table, everyone) == {
        "busy": 75, "idle": 12, "one": 100, "cpu-only": 0, "cordoned": 12}
    # a pod without GPUs: the score stage is neutral
    ctx = context(make_pod().req(cpu="1").obj(), nodes, running)
    assert set(scores(frag.score(ctx, everyone), ctx.table, everyone).values()) == {0}


def test_gpu_binpack_configured_resource() -> None:
    foo = "example.com/foo"
    nodes = [node("a", {foo: 10, GPU: 1}).obj(), node("b", {foo: 4, GPU: 1}).obj()]
    ctx = context(make_pod().req({foo: 2, GPU: 1}).obj(), nodes)
    feasible = ctx.nodes().copy()
    got = scores(load(GPU_BINPACK, {"resource": foo}).score(ctx, feasible), ctx.table, feasible)
    assert got == {"a": 20, "b": 50}
    got = scores(load(GPU_BINPACK).score(ctx, feasible), ctx.table, feasible)
    assert got == {"a": 100, "b": 100}


def zone_nodes(key: str = "topology.kubernetes.io/zone") -> list[Any]:
    return [node("a1").label(key, "a").obj(), node("a2").label(key, "a").obj(),
            node("b1").label(key, "b").obj(), node("c1").label(key, "c").obj(),
            node("nozone").obj()]


def test_zone_spread() -> None:
    running = {"a1": [make_pod(f"a1-{i}").obj() for i in range(2)],
               "a2": [make_pod("a2-0").obj()],  # zone a: 3 pods
               "b1": [make_pod("b1-0").obj()],  # zone b: 1
               "nozone": [make_pod(f"n-{i}").obj() for i in range(5)]}  # zone c: 0
    ctx = context(make_pod().obj(), zone_nodes(), running)
    frag = load(ZONE_SPREAD, filter=False)
    everyone = ctx.nodes().copy()
    assert scores(frag.score(ctx, everyone), ctx.table, everyone) == {
        "a1": 0, "a2": 0, "b1": 66, "c1": 100, "nozone": 0}
    # loads count every node of a zone, the range only the candidates' zones
    some = rows(ctx.table, ["a2", "b1"])
    assert scores(frag.score(ctx, some), ctx.table, some) == {"a2": 0, "b1": 100}
    # equal zones: everyone 100
    ctx = context(make_pod().obj(), zone_nodes())
    assert set(scores(frag.score(ctx, everyone), ctx.table, everyone).values()) == {0, 100}


def test_zone_spread_configured_label_and_no_filter_stage() -> None:
    running = {"b1": [make_pod("b").obj()]}
    ctx = context(make_pod().obj(), zone_nodes("zone"), running)
    frag = load(ZONE_SPREAD, {"label": "zone"}, filter=False)
    everyone = ctx.nodes().copy()
    assert scores(frag.score(ctx, everyone), ctx.table, everyone) == {
        "a1": 100, "a2": 100, "b1": 0, "c1": 100, "nozone": 0}
    with pytest.raises(LoadError, match="wssp_filter"):
        Fragment.load(module_bytes(ZONE_SPREAD))


COST_TIER_CONFIG = {"allowed": ["spot", "standard", "caf\u00e9", 'a"b'], "preferred": "standard"}


def tier_nodes() -> list[Any]:
    return [make_node(name).label("cost-tier", tier).obj() if tier else make_node(name).obj()
            for name, tier in [("spot", "spot"), ("std", "standard"), ("gold", "gold"),
                               ("none", None), ("cafe", "caf\u00e9"), ("quote", 'a"b')]]


@pytest.mark.parametrize("path", [COST_TIER_C, COST_TIER_AS], ids=["c", "assemblyscript"])
def test_cost_tier(path: Path) -> None:
    ctx = context(make_pod().obj(), tier_nodes())
    frag = load(path, COST_TIER_CONFIG)
    assert reasons_of(frag.filter(ctx), ctx) == {
        "spot": [], "std": [], "gold": [NOT_ALLOWED], "none": [NOT_ALLOWED], "cafe": [],
        "quote": []}
    everyone = ctx.nodes().copy()
    assert scores(frag.score(ctx, everyone), ctx.table, everyone) == {
        "spot": 50, "std": 100, "gold": 50, "none": 50, "cafe": 50, "quote": 50}
    # no configuration: everything passes, nothing is preferred
    frag = load(path)
    got = reasons_of(frag.filter(ctx), ctx)
    assert got == {name: [] for name in got} and len(got) == 6
    assert set(scores(frag.score(ctx, everyone), ctx.table, everyone).values()) == {50}


@pytest.mark.parametrize("path", [COST_TIER_C, COST_TIER_AS], ids=["c", "assemblyscript"])
def test_cost_tier_sees_tiers_that_appear_later(path: Path) -> None:
    table = build_table([make_node("gold").label("tier", "gold").obj()])
    frag = Fragment.load(module_bytes(path), table=table,
                         config={"label": "tier", "allowed": ["spot"], "preferred": "spot"})
    ctx = CycleContext.for_pod(pod_info(make_pod().obj()), table)
    assert reasons_of(frag.filter(ctx), ctx) == {"gold": [NOT_ALLOWED]}
    table.set_node(node_info(make_node("spot").label("tier", "spot").obj()))
    ctx = CycleContext.for_pod(pod_info(make_pod().obj()), table)
    assert reasons_of(frag.filter(ctx), ctx) == {"gold": [NOT_ALLOWED], "spot": []}
    everyone = ctx.nodes().copy()
    assert scores(frag.score(ctx, everyone), table, everyone) == {"gold": 50, "spot": 100}


TIERS = st.sampled_from([None, "spot", "standard", "gold", "caf\u00e9"])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TIERS, min_size=1, max_size=6),
       st.lists(st.sampled_from(["spot", "standard", "gold", "caf\u00e9", "x"]), max_size=3),
       st.one_of(st.none(), st.sampled_from(["spot", "gold", "x"])))
def test_cost_tier_c_and_assemblyscript_agree(tiers: list[str | None], allowed: list[str],
                                              preferred: str | None) -> None:
    nodes = [(make_node(f"n{i}").label("cost-tier", t) if t else make_node(f"n{i}")).obj()
             for i, t in enumerate(tiers)]
    config: dict[str, Any] = {"allowed": allowed}
    if preferred is not None:
        config["preferred"] = preferred
    ctx = context(make_pod().obj(), nodes)
    everyone = ctx.nodes().copy()
    answers = []
    for path in (COST_TIER_C, COST_TIER_AS):
        frag = load(path, config)
        answers.append((reasons_of(frag.filter(ctx), ctx),
                        scores(frag.score(ctx, everyone), ctx.table, everyone)))
    assert answers[0] == answers[1]
    passed = {name for name, rs in answers[0][0].items() if not rs}
    assert passed == {f"n{i}" for i, t in enumerate(tiers) if not allowed or t in allowed}


@DIFF_SETTINGS
@given(scenarios(Features(labels=True, affinity=True, resources=True)))
def test_least_cpu_assemblyscript_node_constraints(s: Scenario) -> None:
    """The AssemblyScript SDK's nodeMatches against the reference NodeAffinity rule."""
    ctx, refs = s.build()
    got = reasons_of(load(LEAST_CPU_AS).filter(ctx), ctx)
    for ref in refs:
        request = ctx.pod.requests.get("cpu", 0)
        if reference.node_affinity(ctx.pod, ref):
            expected = [AFFINITY]
        elif request > 0 and request > ref.allocatable("cpu") - ref.requested("cpu"):
            expected = ["Insufficient cpu"]
        else:
            expected = []
        assert got[ref.name] == expected, ref.name
    feasible = s.feasible(ctx.table)
    want = {}
    for ref in refs:
        if feasible[ctx.table.slots[ref.name]]:
            alloc = ref.allocatable("cpu")
            free = max(alloc - ref.requested("cpu") - ctx.pod.requests.get("cpu", 0), 0)
            want[ref.name] = free * 100 // alloc if alloc > 0 else 0
    assert scores(load(LEAST_CPU_AS).score(ctx, feasible), ctx.table, feasible) == want


def test_present_only_wat() -> None:
    nodes = [make_node(name).obj() for name in ("a", "b", "c")]
    ctx = context(make_pod().obj(), nodes, removed=["b"])
    frag = load(PRESENT_ONLY)
    assert reasons_of(frag.filter(ctx), ctx) == {"a": [], "c": []}
    feasible = rows(ctx.table, ["c"])
    assert scores(frag.score(ctx, feasible), ctx.table, feasible) == {"c": 50}
