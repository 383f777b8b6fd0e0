"""NodeResourcesBalancedAllocation: (1 - std of requested fractions) * 100."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.plugins.balanced_allocation import NAME, BalancedAllocation
from tests.unit.plugins.builders import (
    NodeBuilder,
    PodBuilder,
    context,
    make_node,
    make_pod,
    scores,
)

GPU = "nvidia.com/gpu"


def cluster(pod: PodBuilder, *nodes: NodeBuilder,
            used: dict[str, list[PodBuilder]] | None = None) -> Any:
    return context(pod.obj(), [n.obj() for n in nodes],
                   pods={k: [p.obj() for p in v] for k, v in (used or {}).items()})


@pytest.mark.parametrize(("ctx", "resources", "want"), [
    pytest.param(cluster(make_pod().req(cpu="3", memory=5000),
                         make_node("a").capacity(cpu="4", memory=10000),
                         make_node("b").capacity(cpu="6", memory=10000)),
                 None, {"a": 87, "b": 100}, id="differently sized nodes"),
    pytest.param(cluster(make_pod().req(cpu="500m", memory=500),
                         make_node("a").capacity(cpu="1", memory=1000),
                         used={"a": [make_pod("best-effort")]}),
                 None, {"a": 100},
                 id="actual requests: best-effort pods on the node weigh nothing"),
    pytest.param(cluster(make_pod().req(cpu="2", memory=500),
                         make_node("a").capacity(cpu="1", memory=1000)),
                 None, {"a": 75}, id="fractions are capped at 1"),
    pytest.param(cluster(make_pod().req(cpu="100m", memory=900),
                         make_node("a").capacity(cpu="1", memory=1000),
                         make_node("b").capacity(cpu="1")),
                 None, {"a": 60, "b": 100}, id="a single resource with allocatable scores 100"),
    pytest.param(cluster(make_pod(), make_node("a").capacity(cpu="1", memory=1000),
                         used={"a": [make_pod("x").req(cpu="1")]}),
                 None, {"a": 0}, id="best-effort pod is not scored"),
    pytest.param(cluster(make_pod().req({GPU: 1}, cpu="500m", memory=250),
                         make_node("a").capacity({GPU: 4}, cpu="1", memory=1000)),
                 ("cpu", "memory", GPU), {"a": 88},
                 id="three resources use the standard deviation"),
    pytest.param(cluster(make_pod().req(cpu="500m", memory=250),
                         make_node("a").capacity({GPU: 4}, cpu="1", memory=1000)),
                 ("cpu", "memory", GPU), {"a": 87},
                 id="extended resource not requested is left out"),
    pytest.param(cluster(make_pod().req({GPU: 1}),
                         make_node("a").capacity({GPU: 4}, cpu="1", memory=1000)),
                 None, {"a": 0}, id="requests outside the configured resources: best effort"),
])
def test_score(ctx: Any, resources: tuple[str, ...] | None, want: dict[str, int]) -> None:
    plugin = BalancedAllocation() if resources is None else BalancedAllocation(resources=resources)
    assert scores(plugin.score(ctx, ctx.nodes().copy()), ctx.table) == want


@pytest.mark.parametrize(("resources", "message"), [
    pytest.param((), "at least one", id="no resources"),
    pytest.param(("cpu", "cpu"), "duplicate", id="duplicate"),
    pytest.param(("",), r"resources\[0\]", id="empty name"),
])
def test_invalid_arguments(resources: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BalancedAllocation(resources=resources)


def test_name() -> None:
    assert NAME == BalancedAllocation.name == "NodeResourcesBalancedAllocation"
