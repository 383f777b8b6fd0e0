"""What the tests of fragments in the running scheduler share: a cluster with the
``WsspSchedulerConfiguration`` CRD, a resource applied and waited for until Ready, and the
scheduler's own view (pods held at permit, pods assumed, fragment call counts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler.wasm.resource import CRD_PATH, GROUP, PLURAL, VERSION
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for


@contextmanager
def fragment_cluster(request: pytest.FixtureRequest, workdir: Path,
                     nodes: int) -> Iterator[AnyCluster]:
    """``nodes`` nodes of 4 cpu and 8 GiB, with the CRD installed and served, on the server the
    test runs against."""
    spec = ClusterSpec(pools=[PoolSpec(name="node", count=nodes, cpu="4", memory="8Gi")],
                       pod_start_seconds=0.05)
    with open_cluster(request, spec, workdir) as c:
        api = config.new_client_from_config(config_file=str(c.kubeconfig))
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load(CRD_PATH.read_text()))
        custom = client.CustomObjectsApi(api)
        wait_for(lambda: served(custom), what="the CRD to be served")
        yield c


def served(custom: client.CustomObjectsApi) -> bool:
    """Whether the fragment resources are served yet (a real server answers 404 for a while
    after the CRD is created)."""
    try:
        custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def apply_fragment(custom: client.CustomObjectsApi, resource: str, path: Path,
                   stages: dict[str, Any], **spec: Any) -> None:
    """Create the resource for the module at ``path`` and wait until it is Ready."""
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
        "metadata": {"name": resource},
        "spec": {"url": f"file://{path}", "stages": stages, **spec}})
    wait_for(lambda: (custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, resource)
                      .get("status") or {}).get("phase") == "Ready",
             what=f"{resource} to be Ready")


def held_at_permit(s: SchedulerThread) -> int:
    return int(s.call(lambda: len(s.app.scheduler.permits)))


def assumed(s: SchedulerThread) -> int:
    return int(s.call(lambda: s.app.scheduler.cache.sizes()["assumed_pods"]))


def calls(s: SchedulerThread, fragment: str, stage: str, result: str = "ok") -> float:
    registry = s.call(lambda: s.app.metrics.registry)
    value = registry.get_sample_value("pyscheduler_fragment_calls_total", {
        "fragment": fragment, "stage": stage, "result": result})
    return value or 0.0
