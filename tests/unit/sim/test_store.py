"""The MVCC store: revisions, history window, watchers, pagination snapshots."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import pytest

from pyscheduler_sim import errors
from pyscheduler_sim.registry import Registry
from pyscheduler.api.labels import parse_label_selector
from pyscheduler_sim import store as store_module
from pyscheduler_sim.store import Store, encode


def cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {}}}


@pytest.fixture
def reg() -> Registry:
    return Registry(Store(history=5, max_watch_pending=3))


def test_every_write_bumps_the_one_revision(reg: Registry) -> None:
    cms = reg.type("", "v1", "configmaps")
    start = reg.store.rv
    a = reg.create(cms, "default", cm("a"))
    b = reg.create(reg.type("", "v1", "secrets"), "default", cm("b"))
    reg.remove_now(cms, "default", "a")
    assert int(a["metadata"]["resourceVersion"]) == start + 1
    assert int(b["metadata"]["resourceVersion"]) == start + 2
    assert reg.store.rv == start + 3


def test_watch_beyond_the_history_window_is_expired() -> None:
    reg = Registry(Store(history=5))
    cms = reg.type("", "v1", "configmaps")
    start = reg.store.rv
    for i in range(5):
        reg.create(cms, "default", cm(f"c{i}"))
    w = reg.watch(cms, "", None, None, str(start))  # exactly the window: still served
    assert [s.name for _, s in w.drain()] == [f"c{i}" for i in range(5)]
    reg.create(cms, "default", cm("c5"))
    with pytest.raises(errors.ApiError) as exc:
        reg.watch(cms, "", None, None, str(start))
    assert exc.value.code == 410 and exc.value.reason == "Expired"
    # Other resources' writes do not consume this resource's window.
    secrets = reg.type("", "v1", "secrets")
    for i in range(10):
        reg.create(secrets, "default", cm(f"s{i}"))
    reg.watch(cms, "", None, None, str(start + 1))


def test_watch_in_the_future_is_a_timeout(reg: Registry) -> None:
    with pytest.raises(errors.ApiError) as exc:
        reg.watch(reg.type("", "v1", "configmaps"), "", None, None, str(reg.store.rv + 100))
    assert exc.value.code == 504


def test_selector_transitions(reg: Registry) -> None:
    cms = reg.type("", "v1", "configmaps")
    w = reg.watch(cms, "default", parse_label_selector("on=yes"), None, str(reg.store.rv))
    reg.create(cms, "default", cm("x", {"on": "no"}))
    merge = "application/merge-patch+json"
    reg.patch(cms, "default", "x", merge, b'{"metadata":{"labels":{"on":"yes"}}}')
    reg.patch(cms, "default", "x", merge, b'{"data":{"k":"v"}}')
    left = reg.patch(cms, "default", "x", merge, b'{"metadata":{"labels":{"on":"no"}}}')
    reg.remove_now(cms, "default", "x")
    seen = [(t, s.obj["metadata"]["labels"]["on"], s.rv) for t, s in w.drain()]
    assert [t for t, _, _ in seen] == ["ADDED", "MODIFIED", "DELETED"]
    # Leaving the selection: the last matching state, at the revision of the write that left.
    assert seen[2][1] == "yes"
    assert seen[2][2] == int(left["metadata"]["resourceVersion"])


def test_slow_watcher_is_closed_not_buffered_forever(reg: Registry) -> None:
    cms = reg.type("", "v1", "configmaps")
    w = reg.watch(cms, "", None, None, str(reg.store.rv))
    for i in range(4):
        reg.create(cms, "default", cm(f"c{i}"))
    assert w.closed and w.overflowed
    assert w not in reg.store.tables[cms.key].watchers


def test_a_watcher_whose_reader_stopped_taking_events_is_closed() -> None:
    now = [100.0]
    reg = Registry(Store(slow_watcher_seconds=1.0, watch_buffer=3, clock=lambda: now[0]))
    cms = reg.type("", "v1", "configmaps")
    w = reg.watch(cms, "", None, None, str(reg.store.rv))
    for i in range(10):  # nothing is being written: a busy server, not a slow reader
        reg.create(cms, "default", cm(f"idle-{i}"))
    assert not w.closed and len(w.pending) == 10
    w.drain()
    w.writing_since = now[0]  # the stream is blocked writing
    for i in range(5):
        reg.create(cms, "default", cm(f"blocked-{i}"))
    assert not w.closed  # not for long enough yet
    now[0] += 1.0
    reg.create(cms, "default", cm("late"))
    assert w.closed and w.overflowed
    assert reg.store.tables[cms.key].slow_watchers_closed == 1


def test_watcher_wakes_on_events() -> None:
    async def run() -> list[str]:
        reg = Registry()
        cms = reg.type("", "v1", "configmaps")
        w = reg.watch(cms, "", None, None, str(reg.store.rv))
        asyncio.get_running_loop().call_later(0.01, reg.create, cms, "default", cm("late"))
        await w.wait(5)
        return [s.name for _, s in w.drain()]
    assert asyncio.run(run()) == ["late"]


def test_continue_token_expires_with_its_snapshot() -> None:
    now = [0.0]
    reg = Registry(Store(clock=lambda: now[0]))
    cms = reg.type("", "v1", "configmaps")
    for i in range(4):
        reg.create(cms, "default", cm(f"c{i}"))
    _, meta = reg.list(cms, "default", limit=2)
    items, _ = reg.list(cms, "default", limit=2, continue_token=meta["continue"])
    assert [s.name for s in items] == ["c2", "c3"]
    now[0] += 301
    with pytest.raises(errors.ApiError) as exc:
        reg.list(cms, "default", limit=2, continue_token=meta["continue"])
    assert exc.value.code == 410


def test_bad_continue_token_is_a_bad_request(reg: Registry) -> None:
    with pytest.raises(errors.ApiError) as exc:
        reg.list(reg.type("", "v1", "configmaps"), "default", limit=2, continue_token="%%%")
    assert exc.value.code == 400


def test_readers_get_private_copies(reg: Registry) -> None:
    cms = reg.type("", "v1", "configmaps")
    reg.create(cms, "default", cm("a"))
    got = reg.get(cms, "default", "a")
    got["metadata"]["labels"]["x"] = "mutated"
    assert reg.get(cms, "default", "a")["metadata"]["labels"] == {}


def test_a_generated_name_already_taken_is_drawn_again() -> None:
    """kube-apiserver's RetryGenerateName: a collision costs another draw, not a 409."""
    import random

    reg = Registry(Store())
    cms = reg.type("", "v1", "configmaps")
    reg.rng = random.Random(1)
    first = reg.create(cms, "default", {"metadata": {"generateName": "x-",
                                                     "namespace": "default"}})
    reg.rng = random.Random(1)  # the same draw again
    second = reg.create(cms, "default", {"metadata": {"generateName": "x-",
                                                      "namespace": "default"}})
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["metadata"]["name"].startswith("x-")


def test_stored_json_is_held_in_a_buffer_of_its_own_size(reg: Registry) -> None:
    # orjson hands back its output in the (4 KiB or more) buffer it grew: 150,000 stored pods
    # would each hold that much. The store keeps exactly the JSON.
    cms = reg.type("", "v1", "configmaps")
    reg.create(cms, "default", {**cm("a"), "data": {"k": "v"}})
    stored = reg.store.get(cms, "default", "a")
    assert stored is not None
    assert sys.getsizeof(stored.raw) - len(stored.raw) < 64
    assert orjson.loads(stored.raw)["data"] == {"k": "v"}
    assert sys.getsizeof(encode({"x": "y" * 100})) < 200


def test_decoded_views_are_shared_while_recent_and_not_pinned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    views = store_module._Views(3)
    monkeypatch.setattr(store_module, "_VIEWS", views)
    reg = Registry(Store(history=5))
    cms = reg.type("", "v1", "configmaps")
    for i in range(5):
        reg.create(cms, "default", cm(f"c{i}", {"i": str(i)}))
    stored = [reg.store.get(cms, "default", f"c{i}") for i in range(5)]
    assert all(s is not None for s in stored)
    first = stored[0].view  # type: ignore[union-attr]
    assert stored[0].view is first  # type: ignore[union-attr]
    for s in stored[1:]:
        assert s.view["metadata"]["labels"] == {"i": s.labels["i"]}  # type: ignore[union-attr]
    # Four other objects read since: the first one's decoded form is no longer held...
    assert len(views._views) == 3 and stored[0] not in views._views
    # ...and reading it again decodes the same object afresh.
    again = stored[0].view  # type: ignore[union-attr]
    assert again is not first and again == first
    # Field selectors (computed from the view) still see every object.
    assert [s.fields["metadata.name"] for s in stored] == [f"c{i}" for i in range(5)]  # type: ignore[union-attr]


def test_the_store_knows_which_objects_are_being_deleted(reg: Registry) -> None:
    cms = reg.type("", "v1", "configmaps")
    reg.create(cms, "default", {**cm("held"), "metadata": {
        **cm("held")["metadata"], "finalizers": ["example.com/hold"]}})
    reg.create(cms, "default", cm("other"))
    table = reg.store.table(cms)
    assert table.terminating == set()
    reg.delete(cms, "default", "held", {"propagationPolicy": "Orphan"})
    assert table.terminating == {("default", "held")}
    held = reg.get(cms, "default", "held")
    assert held["metadata"]["deletionTimestamp"]
    assert "orphan" in held["metadata"]["finalizers"]
    # The finalizers removed, the object goes, and with it its mark.
    held["metadata"]["finalizers"] = []
    reg.update(cms, "default", "held", held)
    assert reg.store.get(cms, "default", "held") is None
    assert table.terminating == set()


def test_the_garbage_collectors_resync_finds_owners_waiting_for_it(reg: Registry) -> None:
    from pyscheduler_sim.controllers import GarbageCollector

    gc = GarbageCollector(reg)
    cms = reg.type("", "v1", "configmaps")
    for name in ("orphaning", "foreground", "plain"):
        reg.create(cms, "default", {**cm(name), "metadata": {
            **cm(name)["metadata"], "finalizers": ["example.com/hold"]}})
    reg.delete(cms, "default", "orphaning", {"propagationPolicy": "Orphan"})
    reg.delete(cms, "default", "foreground", {"propagationPolicy": "Foreground"})
    reg.delete(cms, "default", "plain", {})
    owners = sorted(k for k in gc.all_keys() if isinstance(k, tuple) and k[0] == "owner")
    assert owners == [("owner", cms.key, "default", "foreground"),
                      ("owner", cms.key, "default", "orphaning")]
