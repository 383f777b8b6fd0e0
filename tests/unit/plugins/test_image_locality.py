"""ImageLocality: kube's image_locality_test.go cases, normalization, and the table's image index
(spread counts and sizes kept as nodes come, change and go)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pod import normalized_image_name, pod_info
from pyscheduler.plugins.image_locality import NAME, ImageLocality, priority
from tests.unit.plugins.builders import (
    NodeBuilder,
    PodBuilder,
    context,
    make_node,
    make_pod,
    scores,
)

MB = 1024 * 1024


# kube's test nodes (image_locality_test.go)
def node_40_300_2000(name: str) -> NodeBuilder:
    return make_node(name).image("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1", size=40 * MB) \
        .image("gcr.io/300:latest", "gcr.io/300:v1", size=300 * MB) \
        .image("gcr.io/2000:latest", size=2000 * MB)


def node_250_10(name: str) -> NodeBuilder:
    return make_node(name).image("gcr.io/250:latest", size=250 * MB) \
        .image("gcr.io/10:latest", "gcr.io/10:v1", size=10 * MB)


def node_600_40_900(name: str) -> NodeBuilder:
    return make_node(name).image("gcr.io/600:latest", size=600 * MB) \
        .image("gcr.io/40:latest", size=40 * MB).image("gcr.io/900:latest", size=900 * MB)


def node_300_600_900(name: str) -> NodeBuilder:
    return make_node(name).image("gcr.io/300:latest", size=300 * MB) \
        .image("gcr.io/600:latest", size=600 * MB).image("gcr.io/900:latest", size=900 * MB)


def node_4000_30(name: str) -> NodeBuilder:
    return make_node(name).image("gcr.io/4000:latest", size=4000 * MB) \
        .image("gcr.io/30:latest", size=30 * MB)


def node_20_30_40(name: str) -> NodeBuilder:
    return make_node(name).image("gcr.io/20:latest", size=20 * MB) \
        .image("gcr.io/30:latest", size=30 * MB).image("gcr.io/40:latest", size=40 * MB)


def pod(*images: str, init: tuple[str, ...] = ()) -> PodBuilder:
    b = make_pod().bare()
    for image in init:
        b.image(image, init=True)
    for image in images:
        b.image(image)
    return b


def score_all(p: PodBuilder, nodes: list[NodeBuilder]) -> dict[str, int]:
    ctx = context(p.obj(), [n.obj() for n in nodes])
    return scores(ImageLocality().score(ctx, ctx.nodes().copy()), ctx.table)


@pytest.mark.parametrize(("p", "nodes", "want"), [
    # 40M * 1/2 < 23M: min threshold; 100 * (250M * 1/2 - 23M) / (1000M * 2 - 23M) = 5
    pytest.param(pod("gcr.io/40", "gcr.io/250"),
                 [node_40_300_2000("node1"), node_250_10("node2")], {"node1": 0, "node2": 5},
                 id="two images spread on two nodes, prefer the larger image one"),
    # 100 * ((40M + 300M) * 1/2 - 23M) / (1000M * 2 - 23M) = 7
    pytest.param(pod("gcr.io/40", "gcr.io/300"),
                 [node_40_300_2000("node1"), node_250_10("node2")], {"node1": 7, "node2": 0},
                 id="two images on one node, prefer this node"),
    # 4000M * 1/2 >= 1000M * 2: max threshold; 10M * 1/2 < 23M
    pytest.param(pod("gcr.io/10", "gcr.io/4000"),
                 [node_4000_30("node1"), node_250_10("node2")], {"node1": 100, "node2": 0},
                 id="if exceed limit, use limit"),
    # 100 * (4000M * 1/3 - 23M) / (1000M * 2 - 23M) = 66
    pytest.param(pod("gcr.io/10", "gcr.io/4000"),
                 [node_4000_30("node1"), node_250_10("node2"), make_node("node3")],
                 {"node1": 66, "node2": 0, "node3": 0},
                 id="if exceed limit, use limit (with node which has no images present)"),
    # 100 * (600M * 2/3 + 900M * 2/3 - 23M) / (1000M * 3 - 23M) = 32, and + 300M * 1/3: 36
    pytest.param(pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
                 [node_600_40_900("node1"), node_300_600_900("node2"), make_node("node3")],
                 {"node1": 32, "node2": 36, "node3": 0},
                 id="pod with multiple large images, node2 is preferred"),
    # 100 * (30M + 40M * 1/2 - 23M) / (1000M * 2 - 23M) = 1; 100 * (30M - 23M) / ... = 0
    pytest.param(pod("gcr.io/30", "gcr.io/40"),
                 [node_20_30_40("node1"), node_4000_30("node2")], {"node1": 1, "node2": 0},
                 id="pod with multiple small images"),
    # 100 * (300M * 1/2 - 23M) / (1000M * 2 - 23M) = 6
    pytest.param(pod("gcr.io/30", init=("gcr.io/300",)),
                 [node_40_300_2000("node1"), node_20_30_40("node2")], {"node1": 6, "node2": 0},
                 id="include InitContainers: two images spread on two nodes, prefer the larger"),
])
def test_kube_cases(p: PodBuilder, nodes: list[NodeBuilder], want: dict[str, int]) -> None:
    assert score_all(p, nodes) == want


def digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(("name", "want"), [
    pytest.param("root", "root:latest", id="add :latest postfix 1"),
    pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="add :latest postfix 2"),
    pytest.param("root:tag", "root:tag", id="keep it as is 1"),
    pytest.param("root@" + digest("root"), "root@" + digest("root"), id="keep it as is 2"),
    pytest.param("nginx", "nginx:latest", id="no registry or namespace is added"),
    pytest.param("", ":latest", id="no image at all"),
])
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


@pytest.mark.parametrize(("p", "want"), [
    pytest.param(pod("nginx"), {"a": 100, "b": 0}, id="tagless pod image matches :latest"),
    pytest.param(pod("nginx:1.25"), {"a": 0, "b": 0}, id="another tag does not match"),
    pytest.param(pod("nginx@" + digest("nginx")), {"a": 100, "b": 0},
                 id="a digest matches the node's digest name"),
    pytest.param(pod("docker.io/library/nginx"), {"a": 0, "b": 100},
                 id="the registry-qualified form is a different name, as in kube"),
    pytest.param(pod("nginx", "nginx"), {"a": 100, "b": 0},
                 id="an image used twice counts twice (and so does the threshold)"),
    pytest.param(pod("nginx", "busybox"), {"a": 49, "b": 0},
                 id="a container whose image no node has still raises the threshold"),
    pytest.param(make_pod().bare(), {"a": 0, "b": 0}, id="no containers"),
])
def test_names_and_containers(p: PodBuilder, want: dict[str, int]) -> None:
    # Both nodes hold one 2000 MiB image each, under different names; 1 of 2 nodes: spread 1/2.
    a = make_node("a").image("nginx:latest", "nginx@" + digest("nginx"), size=2000 * MB)
    b = make_node("b").image("docker.io/library/nginx:latest", size=2000 * MB)
    assert score_all(p, [a, b]) == want


def test_priority_thresholds() -> None:
    assert priority(0, 1) == 0
    assert priority(23 * MB, 1) == 0
    assert priority(1000 * MB, 1) == 100
    assert priority(5000 * MB, 2) == 100
    assert priority(23 * MB + 977 * MB // 2, 1) == 50
    assert priority(23 * MB + 977 * MB // 2 - 1, 1) == 49  # integer division, like Go


def table_of(*nodes: NodeBuilder) -> NodeTable:
    table = NodeTable(capacity=2)
    for n in nodes:
        table.set_node(node_info(n.obj()))
    return table


def image_score(table: NodeTable, *images: str) -> dict[str, int]:
    ctx = CycleContext.for_pod(pod_info(pod(*images).obj()), table)
    return scores(ImageLocality().score(ctx, ctx.nodes().copy()), table)


def test_spread_follows_nodes_as_they_come_and_go() -> None:
    big = 1500 * MB
    table = table_of(make_node("a").image("app:v1", size=big), make_node("b"), make_node("c"))
    # 1500M * 1/3 = 500M: 100 * (500M - 23M) / 977M = 48
    assert image_score(table, "app:v1") == {"a": 48, "b": 0, "c": 0}
    table.set_node(node_info(make_node("b").image("app:v1", size=big).obj()))
    # 1500M * 2/3 = 1000M: the maximum; node a's row did not change, its score did.
    assert image_score(table, "app:v1") == {"a": 100, "b": 100, "c": 0}
    table.remove_node("c")  # 2 of 2 nodes
    assert image_score(table, "app:v1") == {"a": 100, "b": 100}
    table.set_node(node_info(make_node("a").obj()))  # a dropped the image: 1 of 2
    # 1500M * 1/2 = 750M: 100 * 727 / 977 = 74
    assert image_score(table, "app:v1") == {"a": 0, "b": 74}
    table.remove_node("b")
    assert table.image_nodes("app:v1") is None
    assert image_score(table, "app:v1") == {"a": 0}


def test_size_is_the_first_listing_nodes_as_in_kubes_cache() -> None:
    table = table_of(make_node("a").image("app:v1", size=500 * MB),
                     make_node("b").image("app:v1", size=900 * MB))
    found = table.image_nodes("app:v1")
    assert found is not None and found[0] == 500 * MB
    assert sorted(found[1].tolist()) == [0, 1]
    # The first holder goes: the name stays known with its size.
    table.remove_node("a")
    found = table.image_nodes("app:v1")
    assert found is not None and found[0] == 500 * MB and found[1].tolist() == [1]
    # The only holder reports a new size: kube drops and re-creates the entry with it.
    table.set_node(node_info(make_node("b").image("app:v1", size=700 * MB).obj()))
    found = table.image_nodes("app:v1")
    assert found is not None and found[0] == 700 * MB
    # Not the only holder: the size stays.
    table.set_node(node_info(make_node("c").image("app:v1", size=100 * MB).obj()))
    table.set_node(node_info(make_node("b").image("app:v1", size=300 * MB).obj()))
    found = table.image_nodes("app:v1")
    assert found is not None and found[0] == 700 * MB and sorted(found[1].tolist()) == [0, 1]


def test_a_name_listed_twice_on_a_node_counts_once_with_its_first_size() -> None:
    node = make_node("a").image("x:1", size=30 * MB).image("x:1", "y:1", size=60 * MB)
    assert list(node_info(node.obj()).images) == [("x:1", 30 * MB), ("y:1", 60 * MB)]
    table = table_of(node)
    found = table.image_nodes("x:1")
    assert found is not None and found[0] == 30 * MB and found[1].tolist() == [0]


@pytest.mark.parametrize(("raw", "want"), [
    pytest.param([{"names": ["a:1"], "sizeBytes": -5}], [("a:1", 0)], id="negative size"),
    pytest.param([{"names": ["a:1"], "sizeBytes": "big"}], [("a:1", 0)], id="not a number"),
    pytest.param([{"names": ["a:1"]}], [("a:1", 0)], id="no size"),
    pytest.param([{"sizeBytes": 5}, "junk", {"names": [7, "b:1"], "sizeBytes": 5}],
                 [("b:1", 5)], id="entries without usable names are skipped"),
    pytest.param([{"names": ["a:1"], "sizeBytes": 2**60}], [("a:1", 2**53)],
                 id="sizes above 2^53 count as 2^53"),
    pytest.param("junk", [], id="not a list"),
])
def test_unusual_status_images(raw: object, want: list[tuple[str, int]]) -> None:
    node = make_node("a").obj()
    node["status"]["images"] = raw
    assert list(node_info(node).images) == want


def test_ids_of_forgotten_names_are_reused() -> None:
    table = table_of(make_node("a").image("one:1", size=1), make_node("b").image("two:1", size=2))
    table.remove_node("a")
    table.set_node(node_info(make_node("c").image("three:1", size=3).obj()))
    assert table.image_nodes("one:1") is None
    assert len(table._image_names) == 2  # "three:1" took the id "one:1" had
    found = table.image_nodes("three:1")
    assert found is not None and found[0] == 3 and found[1].tolist() == [table.slots["c"]]


def test_holes_and_rows_without_images_score_zero() -> None:
    ctx = context(pod("app:v1").obj(),
                  [make_node("x").image("app:v1", size=4000 * MB).obj(),
                   make_node("y").image("app:v1", size=4000 * MB).obj(), make_node("z").obj()],
                  removed=["x"])
    got = ImageLocality().score(ctx, ctx.nodes().copy())
    assert got.dtype == np.int64 and len(got) == ctx.n
    # 4000M * 1/2 = 2000M >= the 1000M maximum of one container
    assert got.tolist() == [0, 100, 0]


def test_name() -> None:
    assert NAME == ImageLocality.name == "ImageLocality"
