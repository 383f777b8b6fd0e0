"""The links between the scheduler, the runner and the virtual package are typed.

The import contracts (``.importlinter``) keep the virtual package from importing the scheduler;
this keeps the links they still have from going around them through ``Any``: every attribute or
parameter that holds one of the components is typed with its class or its interface.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

import pyscheduler
from pyscheduler.scheduler import PlacementObserver, Scheduler
from pyscheduler.virtual.rebalancer import Rebalancer
from pyscheduler.virtual.refusals import RefusalHandler
from pyscheduler.virtual.types import Placement

ROOT = Path(pyscheduler.__file__).parent
FILES = [ROOT / "scheduler.py", ROOT / "runner.py", *sorted((ROOT / "virtual").glob("*.py"))]
# Names under which one component holds another.
LINKS = {"scheduler", "rebalancer", "placement", "observer", "burster", "provider", "cloud",
         "virtual_nodes", "fragments", "app"}


def _any(annotation: ast.expr | None) -> bool:
    """Whether an annotation is ``Any``, ``Any | None`` or ``Optional[Any]``."""
    if annotation is None:
        return False
    text = ast.unparse(annotation).replace(" ", "")
    return text in {"Any", "Any|None", "None|Any", "Optional[Any]", "typing.Any"}


def _links_typed_any(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.attr if isinstance(target, ast.Attribute) else \
                target.id if isinstance(target, ast.Name) else ""
            if name.lstrip("_") in LINKS and _any(node.annotation):
                found.append(f"{path.name}:{node.lineno} {name}")
        elif isinstance(node, ast.arg):
            if node.arg.lstrip("_") in LINKS and _any(node.annotation):
                found.append(f"{path.name}:{node.lineno} parameter {node.arg}")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_component_link_is_typed_any(path: Path) -> None:
    assert _links_typed_any(path) == []


def test_the_check_sees_an_any_typed_link(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from typing import Any\n"
                      "class S:\n"
                      "    def __init__(self, placement: Any) -> None:\n"
                      "        self.rebalancer: Any | None = None\n")
    assert sorted(_links_typed_any(sample)) == ["sample.py:3 parameter placement",
                                                "sample.py:4 rebalancer"]


def test_the_interfaces_are_what_each_side_holds() -> None:
    assert typing.get_type_hints(Rebalancer.__init__)["placement"] is Placement
    assert typing.get_type_hints(RefusalHandler.__init__)["placement"] is Placement
    assert typing.get_type_hints(Scheduler)["observer"] == PlacementObserver | None
    # The scheduler offers what the virtual package asks, and the rebalancer what the
    # scheduler tells (runtime-checkable structurally: every member is there).
    for member in ("try_placement", "reserve", "release", "most_room", "pool_refused",
                   "pool_price", "name", "client", "recorder", "metrics"):
        assert member in Placement.__annotations__ or hasattr(Placement, member), member
        assert hasattr(Scheduler, member) or member in ("name", "client", "recorder",
                                                        "metrics"), member
    for member in ("pod_seen", "pod_gone", "capacity_freed", "steer"):
        assert callable(getattr(Rebalancer, member)), member
