"""The host side of ABI v1: resident columns, incremental rows, pod records, output checks.

The probe fragment (fixtures/probe.wat) reads the documented offsets directly, so a layout error
on the host shows up as a wrong verdict or score here.
"""

from __future__ import annotations

import struct
from typing import Any
from pathlib import Path

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pod import pod_info
from pyscheduler.wasm.abi import abi_marker
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.fragment import Fragment
from tests.unit.plugins.builders import build_table, expr, make_node, make_pod

wasmtime = pytest.importorskip("wasmtime")
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(params=["wasmtime", "wasmer"], autouse=True)
def runtime(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on both runtimes (wasmer where it is installed: Python 3.10)."""
    name: str = request.param
    if name == "wasmer":
        pytest.importorskip("wasmer")
    original = Fragment.load.__func__  # type: ignore[attr-defined]

    def load(cls: type[Fragment], wasm: bytes, **kwargs: object) -> Fragment:
        kwargs.setdefault("runtime", name)
        return original(cls, wasm, **kwargs)  # type: ignore[no-any-return]
    monkeypatch.setattr(Fragment, "load", classmethod(load))
    return name


def wat(text: str) -> bytes:
    data: bytes = wasmtime.wat2wasm(text)
    return data


PROBE = wat((FIXTURES / "probe.wat").read_text())


def zone_node(name: str, cpu: str = "4", zone: str | None = "a") -> dict[str, object]:
    b = make_node(name).capacity(cpu=cpu, memory="32Gi", pods=110)
    return (b.label("zone", zone) if zone else b).obj()


def by_name(table: NodeTable, values: np.ndarray) -> dict[str, int]:
    return {table.names[i]: int(values[i]) for i in range(table.n) if table.valid[i]}


def test_filter_reads_columns_labels_and_pod_record() -> None:
    table = build_table([zone_node("big"), zone_node("small", cpu="1"),
                         zone_node("nozone", zone=None)])
    frag = Fragment.load(PROBE, table=table)
    ctx = CycleContext.for_pod(pod_info(make_pod().req(cpu="2").obj()), table)
    result = frag.filter(ctx)
    assert result.passed is not None
    assert by_name(table, result.passed) == {"big": 1, "small": 0, "nozone": 0}
    reasons = {r.message: sorted(table.names[i] for i in np.flatnonzero(r.failed))
               for r in result.reasons}
    assert reasons == {"cpu too low": ["small"], "no zone": ["nozone"]}


def test_changed_rows_reach_the_guest_and_only_they_are_rewritten() -> None:
    table = build_table([zone_node("a"), zone_node("b")])
    frag = Fragment.load(PROBE, table=table)
    pod = pod_info(make_pod("p").req(cpu="1").obj())
    feasible = table.valid[: table.n].copy()
    first = frag.score(CycleContext.for_pod(pod, table), feasible)
    assert by_name(table, first) == {"a": 100, "b": 100}
    # 2 cpu used on "a": its free cpu drops to 2000m -> score 50; "b" is untouched.
    table.add_pod(table.slots["a"], pod_info(make_pod("used").req(cpu="2").obj()))
    guest = frag.prepare(table)
    mem_before = bytes(guest.instance.memory())
    second = frag.score(CycleContext.for_pod(pod, table), feasible)
    assert by_name(table, second) == {"a": 50, "b": 100}
    # A new node and a removed one: rows appear and disappear for the guest.
    table.set_node(node_info(zone_node("c", cpu="2")))
    table.remove_node("b")
    third = frag.score(CycleContext.for_pod(pod, table), table.valid[: table.n].copy())
    assert by_name(table, third) == {"a": 50, "c": 50}
    assert frag.stats.instances == 1  # all of it on one resident instance
    assert mem_before != bytes(guest.instance.memory())


def requirements_of(frag: Fragment, table: Any, obj: dict[str, Any]) -> tuple[
        bytes, int, list[str], list[tuple[int, str, int, tuple[int, ...]]]]:
    """Filter ``obj`` with ``frag`` and read back the pod record and its node requirements
    (term, label key, op, values) from the guest's memory."""
    frag.filter(CycleContext.for_pod(pod_info(obj), table))
    guest = frag.prepare(table)
    mem = guest.instance.memory()
    pod_ptr, pod_len = struct.unpack_from("<II", mem, guest.ctx + 64)
    record = bytes(mem[pod_ptr: pod_ptr + pod_len])
    r = len(table.resources)
    *_, n_reqs, req_off = struct.unpack_from("<qqiIII", record, 8 + 8 * r)
    keys_ptr, keys_len = struct.unpack_from("<II", mem, guest.ctx + 44)
    keys = bytes(mem[keys_ptr: keys_ptr + keys_len]).decode().split("\n")
    reqs = []
    off = req_off
    for _ in range(n_reqs):
        term, label, op, count = struct.unpack_from("<IIII", record, off)
        reqs.append((term, keys[label], op, struct.unpack_from(f"<{count}q", record, off + 16)))
        off += 16 + 8 * count
    return record, pod_len, keys, reqs


def test_a_requirement_kube_cannot_parse_reaches_the_guest_as_matching_nothing() -> None:
    table = build_table([zone_node("n1")])
    frag = Fragment.load(PROBE, table=table)
    obj = make_pod("p").required_term(expr("zone", "NotIn", "not a label value!")).obj()
    *_, reqs = requirements_of(frag, table, obj)
    assert reqs == [(1, "zone", 0, ())]  # In with no values (ABI.md 4.2)


def test_pod_record_layout() -> None:
    table = build_table([zone_node("n1"), make_node("n2").capacity(
        cpu="4", memory="32Gi", pods=110).label("zone", "b").label("size", "7").obj()])
    frag = Fragment.load(PROBE, table=table)
    obj = (make_pod("web", "shop").req(cpu="250m", memory="1Gi").label("app", "web")
           .node_selector(zone="b")
           .required_term(expr("size", "Gt", "5"), expr("zone", "NotIn", "c", "a")).obj())
    obj["metadata"]["annotations"] = {"note": "x", "multi": "a\nb"}
    record, pod_len, keys, reqs = requirements_of(frag, table, obj)
    guest = frag.prepare(table)
    mem = guest.instance.memory()
    ctx_ptr = guest.ctx
    size, r = struct.unpack_from("<II", record, 0)
    assert size == pod_len and r == len(table.resources)
    requests = struct.unpack_from(f"<{r}q", record, 8)
    assert requests[table.resource_index["cpu"]] == 250
    assert requests[table.resource_index["memory"]] == 2**30
    base = 8 + 8 * r
    nz_cpu, nz_mem, prio, n_terms, n_reqs, req_off = struct.unpack_from("<qqiIII", record, base)
    assert (nz_cpu, nz_mem, prio, n_terms, n_reqs) == (250, 2**30, 0, 1, 3)
    spans = struct.unpack_from("<8I", record, base + 32)
    texts = [record[spans[i]: spans[i] + spans[i + 1]].decode() for i in range(0, 8, 2)]
    assert texts == ["shop", "web", "app=web", "note=x"]
    assert keys[0] == "zone" and "size" in keys  # wanted first, then the pod's keys
    zone_ids = table.label_index["zone"].ids_by_value
    assert reqs == [(0, "zone", 0, (zone_ids["b"],)), (1, "size", 4, (5,)),
                    (1, "zone", 1, (-1, zone_ids["a"]))]
    # The value lines of a key: value id v is line v.
    n_labels, = struct.unpack_from("<I", mem, ctx_ptr + 36)
    values_ptr, = struct.unpack_from("<I", mem, ctx_ptr + 56)
    zone_col = keys.index("zone")
    vptr, vlen = struct.unpack_from("<II", mem, values_ptr + 8 * zone_col)
    lines = bytes(mem[vptr: vptr + vlen]).decode().split("\n")
    assert all(lines[i] == v for v, i in zone_ids.items()) and n_labels == len(keys)


def test_many_label_keys_move_to_a_larger_fresh_instance() -> None:
    node = make_node("n").capacity(cpu="4", memory="32Gi", pods=110).label("zone", "a")
    for i in range(40):
        node = node.label(f"k{i}", "v")
    table = build_table([node.obj()])
    frag = Fragment.load(PROBE, table=table)
    selector = {f"k{i}": "v" for i in range(40)}
    ctx = CycleContext.for_pod(pod_info(make_pod().node_selector(**selector).obj()), table)
    result = frag.filter(ctx)
    assert result.passed is not None and bool(result.passed[0])
    assert frag.stats.instances >= 2 and frag.prepare(table).label_capacity >= 41


def test_out_of_range_verdict_and_score_fail_the_call_and_drop_the_instance() -> None:
    text = (FIXTURES / "probe.wat").read_text()
    bad = wat(text.replace("(local.set $v (i32.const 2))", "(local.set $v (i32.const 9))")
              .replace("(i64.const 40)", "(i64.const 10)")
              .replace("(i64.const 100)) (then (local.set $s (i64.const 100)))",
                       "(i64.const 100)) (then (local.set $s (i64.const 250)))"))
    table = build_table([zone_node("nozone", zone=None), zone_node("ok")])
    frag = Fragment.load(bad, table=table)
    ctx = CycleContext.for_pod(pod_info(make_pod().obj()), table)
    with pytest.raises(CallError) as err:
        frag.filter(ctx)
    assert err.value.kind == "output"
    assert "verdict 9 for node nozone" in err.value.message
    with pytest.raises(CallError) as err:
        frag.score(ctx, table.valid[: table.n].copy())
    assert err.value.kind == "output" and "score 250" in err.value.message
    assert frag.stats.failures == 2 and frag.stats.instances == 2  # one per failed call


@pytest.mark.parametrize(("exports", "message"), [
    pytest.param({"memory": "memory"}, "missing ABI marker export wssp_abi_v1", id="no marker"),
    pytest.param({"wssp_abi_v2": "func"}, "fragment speaks ABI v2, this scheduler speaks v1",
                 id="newer major"),
])
def test_abi_marker(exports: dict[str, str], message: str) -> None:
    with pytest.raises(LoadError, match=message):
        abi_marker(exports)


def test_missing_stage_export_is_refused_at_load() -> None:
    text = (FIXTURES / "probe.wat").read_text().replace('(export "wssp_score")', "")
    with pytest.raises(LoadError, match="missing export wssp_score"):
        Fragment.load(wat(text))
    assert Fragment.load(wat(text), score=False).has_filter


def test_init_refusing_its_config_is_a_load_error() -> None:
    text = (FIXTURES / "probe.wat").read_text().replace(
        "(i32.store offset=140 (local.get $ctx) (i32.const 4))\n    (i32.const 0))",
        "(i32.store offset=140 (local.get $ctx) (i32.const 4))\n    (i32.const 3))")
    with pytest.raises(LoadError, match="wssp_init returned 3"):
        Fragment.load(wat(text))


def test_a_grown_table_gets_a_fresh_instance() -> None:
    table = NodeTable(capacity=4)
    frag = Fragment.load(PROBE, table=table)
    for i in range(200):
        table.set_node(node_info(zone_node(f"n{i}")))
    ctx = CycleContext.for_pod(pod_info(make_pod().req(cpu="1").obj()), table)
    result = frag.filter(ctx)
    assert result.passed is not None and int(result.passed[: table.n].sum()) == 200
    assert frag.stats.instances == 2


def test_virtual_rows_are_flagged_and_their_provider_taint_is_tolerated() -> None:
    """node_flags bit 3 marks a cloud pool's virtual node, bit 2 a node whose Ready condition
    is False. A virtual node's provider taint is left out of pod_taints (a virtual row is a
    candidate in the burst pass only, which tolerates it): one filter call answers for both
    passes. Any other taint stays, and so does the provider taint on a node that is not one of
    the pools' virtual nodes."""
    from pyscheduler.virtual.node import PoolConfig, virtual_node

    down = zone_node("down")
    down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    pool = virtual_node(PoolConfig("aci", "azure"), {"cpu": "100", "memory": "1Ti",
                                                     "pods": "100"})
    pool["spec"]["taints"].append({"key": "dedicated", "value": "db", "effect": "NoSchedule"})
    tainted = make_node("tainted").capacity(cpu="4", memory="32Gi", pods=110) \
        .taint("dedicated", "db").obj()
    foreign = make_node("other-vk").capacity(cpu="4", memory="32Gi", pods=110) \
        .taint("virtual-kubelet.io/provider", "azure").obj()
    table = build_table([zone_node("up"), down, pool, tainted, foreign])
    frag = Fragment.load(wat((FIXTURES / "flags.wat").read_text()), table=table, filter=False)
    every = table.valid[: table.n].copy()

    def seen(pod: dict[str, object], virtual_pass: bool = False) -> dict[str, int]:
        ctx = CycleContext.for_pod(pod_info(pod), table, virtual_pass=virtual_pass)
        return by_name(table, frag.score(ctx, every))
    # present 1, not ready 4, virtual 8; pod_taints bit 0: an untolerated taint.
    first = seen(make_pod().obj())
    assert first == {"up": 4 * 1, "down": 4 * (1 | 4), "wssp-virtual-aci": 4 * (1 | 8) + 1,
                     "tainted": 4 * 1 + 1, "other-vk": 4 * 1 + 1}
    assert seen(make_pod().obj(), virtual_pass=True) == first
    tolerant = seen(make_pod("db").toleration("dedicated", "db", effect="NoSchedule").obj())
    assert tolerant == {**first, "wssp-virtual-aci": 4 * (1 | 8), "tainted": 4 * 1}
