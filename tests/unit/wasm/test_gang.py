"""The gang fragment (``fragments/examples/gang``), in C and in AssemblyScript, through the host's
lifecycle calls (ABI minor 3), and the SDK helpers it is built on.

* Each stage on hand-made cases: pods outside a group pass; permit waits, with the configured
  time-out and a message, until the minMember-th member allows every waiting one; unreserve and
  postfilter reject the group's waiting members; prefilter refuses a pod of another group while
  one assembles.
* Both builds against a plain Python statement of the rule on random waiting rooms: same
  answers, values, messages and commands.
* The SDKs' helpers seen through the modules: the pod uid, the waiting lines' parser and label
  lookup, the cause texts, message and output buffers that start afresh every call and are
  reused (no allocation per call), the JSON object reader behind the configuration checks.
* ``gang.yaml`` is a valid resource for the committed module.
"""

from __future__ import annotations

import gc
import hashlib
import os
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyscheduler.framework.interface import CycleContext
from pyscheduler.wasm.errors import LoadError
from pyscheduler.wasm.fragment import Fragment
from pyscheduler.wasm.resource import parse_resource
from pyscheduler.wasm.vm import Limits
from pyscheduler.framework.pod import pod_info
from tests.unit.plugins.builders import build_table, context, make_node, make_pod

pytest.importorskip("wasmtime")

ROOT = Path(__file__).resolve().parents[3]
GANG_C = ROOT / "fragments" / "examples" / "gang" / "gang.wasm"
GANG_AS = ROOT / "fragments" / "assemblyscript" / "examples" / "gang" / "gang.wasm"
GANG_YAML = ROOT / "fragments" / "examples" / "gang" / "gang.yaml"
BUILDS = pytest.mark.parametrize("path", [GANG_C, GANG_AS], ids=["c", "assemblyscript"])

GROUP = "pod-group.wssp.io/name"
MIN = "pod-group.wssp.io/min-member"
LIMITS = Limits(timeout_seconds=30.0)
# ABI: permit answers, unreserve causes
ALLOW, DENY, WAIT = 0, 1, 2
CAUSES = {1: "refused after reserve", 2: "denied at permit", 3: "permit wait timed out",
          4: "binding failed", 5: "pod deleted or scheduler stopped leading", 9: "unknown cause"}


@cache
def module_bytes(path: Path) -> bytes:
    return path.read_bytes()


@cache
def _loaded(path: Path, config_json: str) -> Fragment:
    return Fragment.load(module_bytes(path), name=path.stem, config=json.loads(config_json),
                         filter=False, score=False, limits=LIMITS)


def gang(path: Path, config: Mapping[str, Any] | None = None) -> Fragment:
    """The module with ``config``, loaded once per configuration; each new table gets a fresh
    instance (the rule keeps no state, so a shared instance is no shortcut)."""
    return _loaded(path, json.dumps(dict(config or {}), sort_keys=True))


@pytest.fixture(scope="module", autouse=True)
def _drop_loaded() -> Iterator[None]:
    """Release the cached modules while wasmtime is still fully loaded."""
    yield
    _loaded.cache_clear()
    gc.collect()


# -- pods and waiting lines -----------------------------------------------------------------------

def pod(name: str, ns: str = "ml", group: str | None = None, min_member: str | None = None,
        labels: Mapping[str, str] | None = None, uid: str | None = None) -> dict[str, Any]:
    b = make_pod(name, ns)
    if group is not None:
        b = b.label(GROUP, group)
    for k, v in (labels or {}).items():
        b = b.label(k, v)
    if min_member is not None:
        b = b.annotation(MIN, min_member)
    if uid is not None:
        b = b.uid(uid)
    obj: dict[str, Any] = b.obj()
    return obj


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def line(obj: Mapping[str, Any], node: str = "n1") -> str:
    """A pod's line in the ABI's ``waiting`` text: ``<uid> <namespace>/<name> <node> <labels>``."""
    meta = obj["metadata"]
    labels = ",".join(f"{k}={v}" for k, v in sorted(meta.get("labels", {}).items()))
    return f"{meta['uid']} {meta['namespace']}/{meta['name']} {node} {labels}"


def waiting(*pods: Mapping[str, Any]) -> bytes:
    return "\n".join(line(p) for p in pods).encode()


NODES = [make_node(f"n{i}").capacity(cpu="8", memory="32Gi", pods=110).obj() for i in (1, 2)]


def ctx_for(obj: Mapping[str, Any]) -> CycleContext:
    return context(dict(obj), NODES)


Answer = tuple[int, int, str, tuple[tuple[str, str], ...]]


def call(path: Path, stage: str, obj: Mapping[str, Any], room: bytes = b"", *,
         config: Mapping[str, Any] | None = None, cause: int = 0) -> Answer:
    """One stage call; (answer, value, message, commands)."""
    node_row = 0 if stage in ("reserve", "unreserve", "permit", "prebind", "postbind") else None
    got = gang(path, config).call_sync(stage, ctx_for(obj), node_row=node_row, waiting=room,
                                       cause=cause)
    assert got.stage == stage
    return got.code, got.value, got.message, tuple(got.commands)


def members(prefix: str, n: int, ns: str = "ml", group: str = "trainer") -> list[dict[str, Any]]:
    return [pod(f"{prefix}-{i}", ns, group) for i in range(n)]


# -- 1. each stage -------------------------------------------------------------------------------

@BUILDS
def test_the_module_takes_exactly_its_four_stages(path: Path) -> None:
    assert gang(path).stages == {"prefilter", "postfilter", "permit", "unreserve"}
    assert not gang(path).has_filter and not gang(path).has_score


@BUILDS
@pytest.mark.parametrize("obj", [
    pytest.param(pod("solo"), id="no group label"),
    pytest.param(pod("solo", group=""), id="empty group name"),
    pytest.param(pod("solo", group="unknown"), id="group without a minMember"),
    pytest.param(pod("solo", labels={GROUP + "-x": "trainer"}), id="a longer label key"),
])
def test_a_pod_outside_a_gang_passes_every_stage(path: Path, obj: dict[str, Any]) -> None:
    room = waiting(*members("t", 2), pod("e-0", group="eval"))
    config = {"groups": {"trainer": 4, "eval": 2}}
    for stage in ("prefilter", "permit", "unreserve", "postfilter"):
        assert call(path, stage, obj, room, config=config, cause=3) == (0, 0, "", ()), stage


@BUILDS
def test_permit_waits_for_the_group_with_the_configured_timeout(path: Path) -> None:
    obj = pod("trainer-9", group="trainer", min_member="4")
    room = waiting(*members("t", 1),
                   pod("t-other-ns", "dev", "trainer"),  # same name, another namespace
                   pod("e-0", group="eval"))             # another group
    assert call(path, "permit", obj, room) == (
        WAIT, 60_000, "waiting for pod group ml/trainer: 2 of 4 members reserved", ())
    assert call(path, "permit", obj, b"", config={"timeoutSeconds": 5}) == (
        WAIT, 5_000, "waiting for pod group ml/trainer: 1 of 4 members reserved", ())


@BUILDS
def test_the_min_member_th_pod_allows_every_waiting_member(path: Path) -> None:
    group = members("t", 3)
    room = waiting(group[0], pod("e-0", group="eval"), group[1], pod("t-x", "dev", "trainer"),
                   group[2])
    obj = pod("trainer-9", group="trainer", min_member="4")
    allow_all = tuple(("allow", uid_of(p)) for p in group)
    assert call(path, "permit", obj, room) == (ALLOW, 0, "", allow_all)
    # more than enough: still every waiting member, in the host's order
    assert call(path, "permit", pod("t9", group="trainer", min_member="2"), room) == (
        ALLOW, 0, "", allow_all)
    # minMember 1: a group of one never waits
    assert call(path, "permit", pod("t9", group="solo", min_member="1")) == (ALLOW, 0, "", ())


@BUILDS
def test_min_member_from_the_configuration_and_the_annotation_first(path: Path) -> None:
    config = {"groups": {"trainer": 2, "eval": 3}}
    room = waiting(*members("t", 1))
    assert call(path, "permit", pod("t9", group="trainer"), room, config=config) == (
        ALLOW, 0, "", (("allow", "uid-ml-t-0"),))
    assert call(path, "permit", pod("t9", group="trainer", min_member="3"), room,
                config=config)[:3] == (
        WAIT, 60_000, "waiting for pod group ml/trainer: 2 of 3 members reserved")


@BUILDS
@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_unreserve_rejects_the_waiting_members_of_the_group(path: Path, cause: int) -> None:
    group = members("t", 2)
    room = waiting(group[0], pod("e-0", group="eval"), pod("t-x", "dev", "trainer"), group[1])
    obj = pod("trainer-5", group="trainer", min_member="4")
    assert call(path, "unreserve", obj, room, cause=cause) == (
        0, 0, f"pod group ml/trainer released: member ml/trainer-5 was unreserved "
              f"({CAUSES[cause]})", tuple(("reject", uid_of(p)) for p in group))
    # nobody waiting: nothing to reject
    assert call(path, "unreserve", obj, b"", cause=cause)[3] == ()


@BUILDS
def test_postfilter_rejects_the_waiting_members_of_the_group(path: Path) -> None:
    group = members("t", 3)
    room = waiting(*group, pod("e-0", group="eval"))
    obj = pod("trainer-7", group="trainer", min_member="4")
    assert call(path, "postfilter", obj, room) == (
        0, 0, "pod group ml/trainer cannot be placed: ml/trainer-7 fits no node",
        tuple(("reject", uid_of(p)) for p in group))


@BUILDS
def test_prefilter_refuses_another_group_while_one_assembles(path: Path) -> None:
    room = waiting(*members("t", 2))
    obj = pod("eval-0", group="eval", min_member="2")
    assert call(path, "prefilter", obj, room) == (
        1, 0, "pod group ml/eval is waiting for pod group ml/trainer to be placed (2 reserved)",
        ())
    # the other group's size is known from the configuration
    assert call(path, "prefilter", obj, room, config={"groups": {"trainer": 4}})[2] == (
        "pod group ml/eval is waiting for pod group ml/trainer to be placed (2/4 reserved)")
    # the assembling group's own pods, pods of no group and an empty room pass
    assert call(path, "prefilter", pod("t9", group="trainer", min_member="4"), room) == (
        0, 0, "", ())
    assert call(path, "prefilter", pod("plain"), room) == (0, 0, "", ())
    assert call(path, "prefilter", obj, b"") == (0, 0, "", ())
    # groups are per namespace: dev/trainer is another group than ml/trainer
    other_ns = pod("t9", "dev", "trainer", min_member="4")
    assert call(path, "prefilter", other_ns, room)[:3] == (
        1, 0, "pod group dev/trainer is waiting for pod group ml/trainer to be placed "
              "(2 reserved)")


@BUILDS
def test_two_waiting_groups_the_first_in_order_goes_on(path: Path) -> None:
    """Two groups waiting at once (a race): the one first in (namespace, name) order passes,
    the other is refused and names it."""
    room = waiting(pod("e-0", group="eval"), *members("t", 2), pod("e-1", group="eval"))
    assert call(path, "prefilter", pod("e9", group="eval", min_member="3"), room) == (
        0, 0, "", ())
    assert call(path, "prefilter", pod("t9", group="trainer", min_member="3"), room)[:3] == (
        1, 0, "pod group ml/trainer is waiting for pod group ml/eval to be placed (2 reserved)")
    # namespace first: "ab" < "ml", whatever the group names
    room = waiting(pod("a-0", "ab", "zzz"), *members("t", 1))
    assert call(path, "prefilter", pod("a9", "ab", "zzz", "2"), room)[0] == 0
    assert call(path, "prefilter", pod("t9", "ml", "trainer", "2"), room)[2] == (
        "pod group ml/trainer is waiting for pod group ab/zzz to be placed (1 reserved)")


@BUILDS
@pytest.mark.parametrize("value", ["0", "-2", "four", " 4", "4.0", ""])
def test_a_bad_min_member_annotation_is_refused_at_prefilter(path: Path, value: str) -> None:
    obj = pod("t9", group="trainer", min_member=value)
    assert call(path, "prefilter", obj) == (
        1, 0, f"pod group ml/trainer: annotation {MIN}={value} is not a positive integer", ())
    # later stages treat it as a pod outside a gang (prefilter keeps it from getting there)
    assert call(path, "permit", obj, waiting(*members("t", 2))) == (0, 0, "", ())


@BUILDS
def test_configured_keys(path: Path) -> None:
    config = {"groupLabel": "example.com/gang", "minMemberAnnotation": "example.com/size"}
    obj = make_pod("w9", "ml").label("example.com/gang", "g").annotation(
        "example.com/size", "3").obj()
    other = make_pod("w0", "ml").label("example.com/gang", "g").obj()
    room = waiting(other, pod("t-0", group="g"))  # the default label no longer counts
    assert call(path, "permit", obj, room, config=config) == (
        WAIT, 60_000, "waiting for pod group ml/g: 2 of 3 members reserved", ())
    # the default keys mean nothing now
    assert call(path, "permit", pod("t9", group="g", min_member="2"), room,
                config=config) == (0, 0, "", ())


@BUILDS
@pytest.mark.parametrize("config", [
    pytest.param({"groupLabel": ""}, id="empty groupLabel"),
    pytest.param({"groupLabel": 5}, id="groupLabel not a string"),
    pytest.param({"minMemberAnnotation": ["a"]}, id="annotation not a string"),
    pytest.param({"timeoutSeconds": 0}, id="timeout 0"),
    pytest.param({"timeoutSeconds": 4294968}, id="timeout beyond u32 milliseconds"),
    pytest.param({"timeoutSeconds": "60"}, id="timeout a string"),
    pytest.param({"timeoutSeconds": 1.5}, id="timeout a fraction"),
    pytest.param({"groups": ["trainer"]}, id="groups not an object"),
    pytest.param({"groups": {"trainer": 0}}, id="minMember 0"),
    pytest.param({"groups": {"a": 2, "trainer": "4"}}, id="minMember a string"),
])
def test_a_bad_configuration_fails_the_load(path: Path, config: dict[str, Any]) -> None:
    with pytest.raises(LoadError, match="wssp_init"):
        Fragment.load(module_bytes(path), config=config, filter=False, score=False)


@BUILDS
def test_a_good_configuration_loads(path: Path) -> None:
    config = {"groupLabel": "a/b", "minMemberAnnotation": "c", "timeoutSeconds": 4294967,
              "groups": {}, "unknown": {"nested": [1, {"x": 2}]}}
    obj = make_pod("p", "ml").label("a/b", "g").annotation("c", "2").obj()
    assert call(path, "permit", obj, config=config)[:2] == (WAIT, 4_294_967_000)
    escaped = {"groups": {'tr"ainer': 2}}  # a name the JSON text holds escaped: decoded
    assert call(path, "permit", pod("t9", group='tr"ainer'), config=escaped)[2] == (
        'waiting for pod group ml/tr"ainer: 1 of 2 members reserved')
    assert call(path, "permit", pod("t9", group="trainer"), config=escaped) == (0, 0, "", ())


# -- 2. the SDK helpers, through the modules ------------------------------------------------------

@BUILDS
def test_the_pods_own_uid_is_never_counted_as_a_waiting_member(path: Path) -> None:
    obj = pod("t9", group="trainer", min_member="2", uid="me")
    room = waiting(pod("t9-old", group="trainer", uid="me"))
    assert call(path, "permit", obj, room)[:3] == (
        WAIT, 60_000, "waiting for pod group ml/trainer: 1 of 2 members reserved")
    assert call(path, "unreserve", obj, room, cause=3)[3] == ()


@BUILDS
def test_waiting_lines_are_parsed_as_the_abi_writes_them(path: Path) -> None:
    obj = pod("t9", group="trainer", min_member="9")
    lines = [
        f"u1 ml/t1 n1 a=b,{GROUP}=trainer,c=d",   # label in the middle
        f"u2 ml/t2 n2 {GROUP}=trainer",           # the only label
        f"u3 ml/t3 n1 {GROUP}=trainerx",          # another group (longer value)
        f"u4 ml/t4 n1 {GROUP}x=trainer",          # another key (longer key)
        f"u5 ml/t5 n1 x{GROUP}=trainer",          # another key (prefix)
        "u6 ml/t6 n1 ",                           # no labels
        f"u7 ml/t7 {GROUP}=trainer",              # only two spaces: not a waiting line
        f"u8 ml-t8 n1 {GROUP}=trainer",           # no namespace/name: not a waiting line
        "",                                       # an empty line
        f"u9 ml/t9/x n3 z=1,{GROUP}=trainer",     # the name runs to the space
        f"u10 ml/t10 n1 {GROUP}=trainer,{GROUP}=other",  # the first value counts
    ]
    room = "\n".join(lines).encode()
    assert call(path, "unreserve", obj, room, cause=2)[3] == (
        ("reject", "u1"), ("reject", "u2"), ("reject", "u9"), ("reject", "u10"))
    assert call(path, "permit", obj, room)[2] == (
        "waiting for pod group ml/trainer: 5 of 9 members reserved")


@BUILDS
def test_outputs_start_afresh_every_call_and_their_buffers_are_reused(path: Path) -> None:
    """Hundreds of commands (well past the SDK buffers' first size), then one, then none, on
    the same instance: each call's output and message are its own; after the first call of a
    size, calls allocate nothing in guest memory."""
    frag = Fragment.load(module_bytes(path), filter=False, score=False, limits=LIMITS)
    big = waiting(*members("member-with-a-long-name", 600))
    small = waiting(*members("t", 1))
    obj = pod("trainer-x", group="trainer", min_member="2")
    ctx = ctx_for(obj)

    def permit(room: bytes) -> Answer:
        got = frag.call_sync("permit", ctx, node_row=0, waiting=room)
        return got.code, got.value, got.message, tuple(got.commands)

    first = permit(big)
    assert first[0] == ALLOW and len(first[3]) == 600
    assert first[3][-1] == ("allow", "uid-ml-member-with-a-long-name-599")
    assert permit(small) == (ALLOW, 0, "", (("allow", "uid-ml-t-0"),))
    got = frag.call_sync("unreserve", ctx, node_row=0, waiting=big, cause=3)
    assert len(got.commands) == 600 and got.message.endswith("(permit wait timed out)")
    assert frag.call_sync("permit", ctx, node_row=0).message == (
        "waiting for pod group ml/trainer: 1 of 2 members reserved")
    assert permit(b"") == (WAIT, 60_000,
                           "waiting for pod group ml/trainer: 1 of 2 members reserved", ())
    guest = frag.prepare(ctx.table)
    before = guest.instance.call("wssp_alloc", 8)
    for room in (big, small, b"", big):
        permit(room)
        frag.call_sync("unreserve", ctx, node_row=0, waiting=room, cause=1)
        frag.call_sync("postfilter", ctx, waiting=room)
        frag.call_sync("prefilter", ctx, waiting=room)
    after = guest.instance.call("wssp_alloc", 8)
    assert frag.prepare(ctx.table) is guest  # one instance served every call
    assert 0 < after - before <= 32, "the stage calls allocated guest memory"


@BUILDS
def test_no_state_between_calls(path: Path) -> None:
    """The same question on a fresh instance and on one that served other pods first."""
    obj = pod("t9", group="trainer", min_member="3")
    room = waiting(*members("t", 1), pod("e-0", group="eval"))
    fresh = call(path, "permit", obj, room)
    table = build_table(NODES)
    frag = Fragment.load(module_bytes(path), filter=False, score=False, limits=LIMITS,
                         table=table)
    guest = frag.prepare(table)
    for other in (pod("e9", group="eval", min_member="1"), pod("x"), obj):
        ctx = CycleContext.for_pod(pod_info(other), table)
        frag.call_sync("permit", ctx, node_row=0, waiting=waiting(*members("t", 5)))
        frag.call_sync("unreserve", ctx, node_row=1, waiting=room, cause=3)
        frag.call_sync("prefilter", ctx, waiting=room)
    got = frag.call_sync("permit", CycleContext.for_pod(pod_info(obj), table), node_row=0,
                         waiting=room)
    assert frag.prepare(table) is guest
    assert (got.code, got.value, got.message, tuple(got.commands)) == fresh


# -- 3. both builds against the rule ---------------------------------------------------------------

@dataclass(frozen=True)
class Member:
    uid: str
    ns: str
    name: str
    group: str | None


def reference(stage: str, obj: Mapping[str, Any], room: Sequence[Member],
              config: Mapping[str, Any], cause: int) -> Answer:
    """The gang rule (fragments/examples/gang/README.md), plainly."""
    meta = obj["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    group = meta.get("labels", {}).get(GROUP, "")
    groups = config.get("groups", {})
    timeout = config.get("timeoutSeconds", 60) * 1000
    if not group:
        return 0, 0, "", ()
    note = meta.get("annotations", {}).get(MIN)
    if note is not None:
        # Go's strconv.ParseInt: an optional sign, then ASCII digits only
        if not re.fullmatch(r"[+-]?[0-9]+", note) or int(note) < 1:
            if stage == "prefilter":
                return 1, 0, (f"pod group {ns}/{group}: annotation {MIN}={note} is not a "
                              f"positive integer"), ()
            return 0, 0, "", ()
        size = int(note)
    elif group in groups:
        size = groups[group]
    else:
        return 0, 0, "", ()
    mine = [m for m in room if m.group == group and m.ns == ns and m.uid != uid]
    if stage == "permit":
        if len(mine) + 1 >= size:
            return 0, 0, "", tuple(("allow", m.uid) for m in mine)
        return 2, timeout, (f"waiting for pod group {ns}/{group}: {len(mine) + 1} of {size} "
                            f"members reserved"), ()
    if stage == "unreserve":
        return 0, 0, (f"pod group {ns}/{group} released: member {ns}/{name} was unreserved "
                      f"({CAUSES.get(cause, 'unknown cause') if cause else 'no cause'})"), \
            tuple(("reject", m.uid) for m in mine)
    if stage == "postfilter":
        return 0, 0, f"pod group {ns}/{group} cannot be placed: {ns}/{name} fits no node", \
            tuple(("reject", m.uid) for m in mine)
    # prefilter
    others = [m for m in room if m.group and (m.ns, m.group) != (ns, group)]
    own = any(m.group == group and m.ns == ns for m in room)
    if own:
        blockers = [m for m in others if (m.ns, m.group) < (ns, group)]
    else:
        blockers = others
    if not blockers:
        return 0, 0, "", ()
    b = blockers[0]
    count = sum(1 for m in room if (m.ns, m.group) == (b.ns, b.group))
    known = f"/{groups[b.group]}" if b.group in groups else ""
    return 1, 0, (f"pod group {ns}/{group} is waiting for pod group {b.ns}/{b.group} to be "
                  f"placed ({count}{known} reserved)"), ()


CONFIGS: list[dict[str, Any]] = [
    {}, {"groups": {"a": 2, "b": 3}, "timeoutSeconds": 7}, {"groups": {"b": 1}}]
NAMESPACES = st.sampled_from(["ml", "ab"])
GROUPS = st.sampled_from(["a", "b", "c"])


@st.composite
def rooms(draw: st.DrawFn) -> list[Member]:
    entries = draw(st.lists(st.tuples(NAMESPACES, st.one_of(st.none(), GROUPS)), max_size=8))
    return [Member(f"uid-{i}", ns, f"w{i}", g) for i, (ns, g) in enumerate(entries)]


def room_text(room: Sequence[Member]) -> bytes:
    out = []
    for m in room:
        labels = "app=x" + (f",{GROUP}={m.group}" if m.group is not None else "")
        out.append(f"{m.uid} {m.ns}/{m.name} n1 {labels}")
    return "\n".join(out).encode()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rooms(), NAMESPACES, st.one_of(st.none(), GROUPS),
       st.one_of(st.none(), st.sampled_from(["1", "2", "3", "5", "0", "x", "+2", "-1"])),
       st.sampled_from(range(len(CONFIGS))), st.sampled_from([0, 1, 2, 3, 4, 5, 6]),
       st.booleans())
def test_c_and_assemblyscript_follow_the_rule(room: list[Member], ns: str, group: str | None,
                                               note: str | None, config_index: int, cause: int,
                                               reuse_uid: bool) -> None:
    config = CONFIGS[config_index]
    uid = room[0].uid if reuse_uid and room else "uid-me"
    obj = pod("me", ns, group, note, uid=uid)
    text = room_text(room)
    for stage in ("prefilter", "permit", "unreserve", "postfilter"):
        c = call(GANG_C, stage, obj, text, config=config, cause=cause)
        assemblyscript = call(GANG_AS, stage, obj, text, config=config, cause=cause)
        assert c == assemblyscript, stage
        want = reference(stage, obj, room, config, cause)
        assert c == want, stage


# -- 4. the example resource -----------------------------------------------------------------------

def test_the_example_resource_fits_the_committed_module() -> None:
    docs = list(yaml.safe_load_all(GANG_YAML.read_text()))
    resource = next(d for d in docs if d["kind"] == "WsspSchedulerConfiguration")
    spec = parse_resource(resource)
    assert spec.sha256 == hashlib.sha256(module_bytes(GANG_C)).hexdigest(), \
        "gang.yaml's sha256 is not the committed gang.wasm's: update it"
    assert spec.filter is None and spec.score is None
    frag = Fragment.load(module_bytes(GANG_C), config=spec.config, filter=False, score=False)
    assert set(spec.lifecycle) <= frag.stages
    assert spec.lifecycle["postfilter"].mode == "replace"
    # the example Job's pods form a group of four with this configuration
    job = next(d for d in docs if d["kind"] == "Job")
    template = job["spec"]["template"]["metadata"]
    assert template["labels"][GROUP] == "trainer"
    assert template["annotations"][MIN] == str(job["spec"]["parallelism"])
    assert spec.config["groups"]["trainer"] == job["spec"]["parallelism"]


# -- 5. the SDK helpers the gang rule does not use, through a probe built on the spot -------------

PROBE_C = r"""
#include "wssp.h"

WSSP_EXPORT("wssp_init") int wssp_init(wssp_ctx *ctx, const char *config, int len) {
    (void)ctx; (void)config; (void)len;
    return 0;
}

static void where(wssp_ctx *ctx) {
    wssp_message_add_cstr(ctx, " stage ");
    wssp_message_add_i64(ctx, ctx->stage);
    wssp_message_add_cstr(ctx, wssp_now_ms(ctx) > 1600000000000LL ? " clock" : " no clock");
    if (wssp_node_row(ctx) == WSSP_NO_ROW) {
        wssp_message_add_cstr(ctx, " no row");
    } else {
        wssp_message_add_cstr(ctx, " row ");
        wssp_message_add_i64(ctx, wssp_node_row(ctx));
    }
}

WSSP_EXPORT("wssp_prefilter") int wssp_prefilter(wssp_ctx *ctx) {
    for (wssp_u32 row = 0; row < wssp_rows(ctx); row++)
        wssp_set_prefilter_row(ctx, row, row % 2 == 0);
    wssp_set_answer(ctx, WSSP_PREFILTER_RESTRICT);
    wssp_set_message_cstr(ctx, "replaced below");
    wssp_set_message(ctx, wssp_pod_uid(ctx));
    where(ctx);
    return 0;
}

WSSP_EXPORT("wssp_postfilter") int wssp_postfilter(wssp_ctx *ctx) {
    wssp_set_answer(ctx, WSSP_POSTFILTER_NOMINATE);
    wssp_set_answer_value(ctx, 1);
    wssp_message_add_i64(ctx, -42);
    wssp_message_add_cstr(ctx, " ");
    wssp_message_add_i64(ctx, WSSP_I64_MIN);
    where(ctx);
    return 0;
}

WSSP_EXPORT("wssp_reserve") int wssp_reserve(wssp_ctx *ctx) {
    wssp_set_answer(ctx, WSSP_RESERVE_REJECT);
    where(ctx);
    return 0;
}

WSSP_EXPORT("wssp_unreserve") int wssp_unreserve(wssp_ctx *ctx) {
    wssp_output_allow(ctx, wssp_str_make("dropped", 7));
    wssp_output_clear(ctx);
    wssp_output_reject(ctx, wssp_str_make("a\nallow b", 9)); /* refused: two commands */
    wssp_output_reject(ctx, wssp_str_make("kept", 4));
    wssp_set_message_cstr(ctx, wssp_cause_text(wssp_cause(ctx)));
    where(ctx);
    return 0;
}

WSSP_EXPORT("wssp_prebind") int wssp_prebind(wssp_ctx *ctx) {
    static wssp_buf row;
    wssp_buf_clear(&row);
    wssp_buf_add_i64(&row, wssp_node_row(ctx));
    wssp_output_label(ctx, wssp_cstr("example.com/row"), wssp_buf_str(&row));
    wssp_output_annotation(ctx, wssp_cstr("example.com/uid"), wssp_pod_uid(ctx));
    wssp_output_label(ctx, wssp_cstr("example.com/empty"), wssp_str_make(0, 0));
    where(ctx);
    return 0;
}

WSSP_EXPORT("wssp_postbind") int wssp_postbind(wssp_ctx *ctx) {
    where(ctx);
    return 0;
}
"""

PROBE_AS = r"""
import {
  Context, NO_ROW, POSTFILTER_NOMINATE, PREFILTER_RESTRICT, RESERVE_REJECT, causeText, slice,
  sliceLen, slicePtr, textAt,
} from "SDK";
export { wssp_abi_v1, wssp_alloc } from "SDK";

export function wssp_init(ctx: usize, config: usize, len: i32): i32 {
  return 0;
}

function where(c: Context): void {
  c.messageAdd(" stage ");
  c.messageAddInt(c.stage);
  c.messageAdd(c.nowMs() > 1600000000000 ? " clock" : " no clock");
  if (c.nodeRow() == NO_ROW) {
    c.messageAdd(" no row");
  } else {
    c.messageAdd(" row ");
    c.messageAddInt(c.nodeRow());
  }
}

export function wssp_prefilter(ctx: usize): i32 {
  const c = Context.at(ctx);
  for (let row: u32 = 0; row < c.rows(); row++) c.setPrefilterRow(row, row % 2 == 0);
  c.setAnswer(PREFILTER_RESTRICT);
  c.setMessage("replaced below");
  c.setMessage("");
  c.messageAddSlice(c.podUid());
  where(c);
  return 0;
}

export function wssp_postfilter(ctx: usize): i32 {
  const c = Context.at(ctx);
  c.setAnswer(POSTFILTER_NOMINATE);
  c.setAnswerValue(1);
  c.messageAddInt(-42);
  c.messageAdd(" ");
  c.messageAddInt(i64.MIN_VALUE);
  where(c);
  return 0;
}

export function wssp_reserve(ctx: usize): i32 {
  const c = Context.at(ctx);
  c.setAnswer(RESERVE_REJECT);
  where(c);
  return 0;
}

const dropped = "dropped";
const two = "a\nallow b";
const kept = "kept";

export function wssp_unreserve(ctx: usize): i32 {
  const c = Context.at(ctx);
  const buf = String.UTF8.encode(dropped);
  c.outputAllow(slice(changetype<usize>(buf), 7));
  c.outputClear();
  const bad = String.UTF8.encode(two);
  c.outputReject(slice(changetype<usize>(bad), 9));
  const good = String.UTF8.encode(kept);
  c.outputReject(slice(changetype<usize>(good), 4));
  c.setMessage(causeText(c.cause));
  where(c);
  return 0;
}

export function wssp_prebind(ctx: usize): i32 {
  const c = Context.at(ctx);
  c.outputLabel("example.com/row", c.nodeRow().toString());
  const uid = c.podUid();
  c.outputAnnotation("example.com/uid", textAt(slicePtr(uid), sliceLen(uid)));
  c.outputLabel("example.com/empty", "");
  where(c);
  return 0;
}

export function wssp_postbind(ctx: usize): i32 {
  where(Context.at(ctx));
  return 0;
}
"""


def _build_probe(language: str, out: Path) -> Path:
    import shutil
    import subprocess

    from pyscheduler.wasm.tool import build
    if language == "c":
        if not shutil.which("clang"):
            pytest.skip("clang not installed")
        source = out / "probe"
        source.mkdir()
        (source / "probe.c").write_text(PROBE_C)
        return build(source)
    as_dir = ROOT / "fragments" / "assemblyscript"
    if not shutil.which("node") or not (as_dir / "node_modules" / ".bin" / "asc").exists():
        pytest.skip("AssemblyScript not installed (npm ci in fragments/assemblyscript)")
    entry = out / "probe.ts"
    sdk = Path(os.path.relpath(as_dir / "assembly" / "wssp", out)).as_posix()
    entry.write_text(PROBE_AS.replace('"SDK"', json.dumps(sdk)))
    wasm = out / "probe.wasm"
    done = subprocess.run(["node", str(as_dir / "build.mjs"), str(entry), str(wasm)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return wasm


@pytest.fixture(scope="module", params=["c", "assemblyscript"])
def probe(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return _build_probe(request.param, tmp_path_factory.mktemp(request.param)).read_bytes()


def test_sdk_stage_helpers(probe: bytes) -> None:
    obj = pod("p", uid="uid-1234")
    ctx = ctx_for(obj)
    frag = Fragment.load(probe, filter=False, score=False, limits=LIMITS, table=ctx.table)
    assert frag.stages == {"prefilter", "postfilter", "reserve", "unreserve", "prebind",
                           "postbind"}

    got = frag.call_sync("prefilter", ctx)
    assert (got.code, got.message) == (2, "uid-1234 stage 3 clock no row")
    assert got.rows is not None and got.rows.tolist()[:2] == [True, False]

    got = frag.call_sync("postfilter", ctx)
    assert (got.code, got.value, got.message) == (
        4, 1, "-42 -9223372036854775808 stage 4 clock no row")

    got = frag.call_sync("reserve", ctx, node_row=1)
    assert (got.code, got.message, got.commands) == (1, " stage 5 clock row 1", ())

    for cause, text in CAUSES.items():
        got = frag.call_sync("unreserve", ctx, node_row=0, cause=cause)
        assert got.message == f"{text} stage 6 clock row 0"
        assert tuple(got.commands) == (("reject", "kept"),)

    got = frag.call_sync("prebind", ctx, node_row=1)
    assert (got.code, got.message) == (0, " stage 8 clock row 1")
    assert tuple(got.commands) == (("label", "example.com/row=1"),
                                   ("annotation", "example.com/uid=uid-1234"),
                                   ("label", "example.com/empty="))

    got = frag.call_sync("postbind", ctx, node_row=0)
    assert (got.code, got.commands) == (0, ())
