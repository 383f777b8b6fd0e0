"""The pods held at a fragment's permit: every way a wait ends, what the guest is shown, and
that a wait belongs to the fragment that asked for it."""

from __future__ import annotations

import asyncio

from pyscheduler.framework.lifecycle import WaitingRoom, WaitOutcome
from pyscheduler.framework.pod import PodInfo, pod_info


def pod(name: str, labels: dict[str, str] | None = None) -> PodInfo:
    return pod_info({"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}",
                                  "labels": labels or {}},
                     "spec": {"containers": [{"name": "c", "image": "x"}]}})


def test_allow_ends_the_wait_and_the_pod_leaves_the_room() -> None:
    released: list[WaitOutcome] = []

    async def body() -> tuple[str, str]:
        room = WaitingRoom(on_release=released.append)
        held = room.enter(pod("a"), "n1", "gang-v1.0.0", 30)
        assert "uid-a" in room and len(room) == 1
        asyncio.get_running_loop().call_soon(room.allow, "gang-v1.0.0", "uid-a")
        outcome = await room.wait(held)
        assert "uid-a" not in room and len(room) == 0
        return outcome

    assert asyncio.run(body()) == ("allow", "")
    assert released == ["allow"]


def test_only_the_fragment_that_holds_the_pod_can_release_it() -> None:
    async def body() -> tuple[bool, bool, tuple[str, str]]:
        room = WaitingRoom()
        held = room.enter(pod("a"), "n1", "gang-v1.0.0", 30)
        other = room.allow("other-v1.0.0", "uid-a")
        unknown = room.reject("gang-v1.0.0", "uid-nobody", "no")
        room.reject("gang-v1.0.0", "uid-a", "group released")
        return other, unknown, await room.wait(held)

    assert asyncio.run(body()) == (False, False, ("reject", "group released"))


def test_a_wait_times_out_with_kubes_message() -> None:
    released: list[WaitOutcome] = []

    async def body() -> tuple[str, str]:
        room = WaitingRoom(on_release=released.append)
        held = room.enter(pod("a"), "n1", "gang-v1.0.0", 0.05)
        outcome = await room.wait(held)
        assert len(room) == 0
        # Too late: the pod is no longer waiting.
        assert not room.allow("gang-v1.0.0", "uid-a")
        return outcome

    how, message = asyncio.run(body())
    assert how == "timeout"
    assert message == "rejected due to timeout after waiting 0.05s at permit of fragment " \
                      "gang-v1.0.0"
    assert released == ["timeout"]


def test_a_deleted_pod_ends_its_wait_whoever_holds_it() -> None:
    async def body() -> tuple[str, str]:
        room = WaitingRoom()
        held = room.enter(pod("a"), "n1", "gang-v1.0.0", 30)
        asyncio.get_running_loop().call_soon(room.gone, "uid-a")
        return await room.wait(held)

    assert asyncio.run(body()) == ("gone", "the pod was deleted")


def test_cancelling_the_waiter_empties_the_room() -> None:
    async def body() -> int:
        room = WaitingRoom()
        held = room.enter(pod("a"), "n1", "gang-v1.0.0", 30)
        task = asyncio.get_running_loop().create_task(room.wait(held))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return len(room)

    assert asyncio.run(body()) == 0


def test_the_waiting_lines_list_a_fragments_pods_with_their_labels() -> None:
    async def body() -> tuple[bytes, bytes, bytes]:
        room = WaitingRoom()
        room.enter(pod("a", {"pod-group.wssp.io/name": "g1", "app": "x"}), "n1", "gang", 30)
        room.enter(pod("b"), "n2", "gang", 30)
        room.enter(pod("c", {"app": "y"}), "n3", "other", 30)
        return room.lines("gang"), room.lines("other"), room.lines("none")

    gang, other, none = asyncio.run(body())
    assert gang == b"uid-a ml/a n1 app=x,pod-group.wssp.io/name=g1\nuid-b ml/b n2 "
    assert other == b"uid-c ml/c n3 app=y"
    assert none == b""


def test_the_waiting_lines_follow_the_room_as_pods_come_and_go() -> None:
    async def body() -> list[bytes]:
        room = WaitingRoom()
        seen = [room.lines("gang")]
        held = room.enter(pod("a"), "n1", "gang", 30)
        seen.append(room.lines("gang"))
        room.enter(pod("b"), "n2", "gang", 30)
        seen.append(room.lines("gang"))
        room.allow("gang", "uid-a")
        await room.wait(held)
        seen.append(room.lines("gang"))
        return seen

    assert asyncio.run(body()) == [b"", b"uid-a ml/a n1 ", b"uid-a ml/a n1 \nuid-b ml/b n2 ",
                                   b"uid-b ml/b n2 "]
