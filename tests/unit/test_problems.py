"""Every "this input cannot be used" error lists all its problems the same way."""

from __future__ import annotations

import pytest

from pyscheduler.api.problems import InputError
from pyscheduler.config import ConfigError, parse_config
from pyscheduler.framework.pod import PodSpecError, pod_info
from pyscheduler.nodepools import NodePoolError, parse_node_pools
from pyscheduler.virtual.conversion import PodConversionError, build_instance_request
from pyscheduler.wasm.resource import ResourceError, parse_resource


def test_each_kind_of_bad_input_is_an_input_error_with_every_problem() -> None:
    with pytest.raises(ConfigError) as config:
        parse_config({"seed": "x", "logLevel": "loud"}, "s.yaml")
    with pytest.raises(PodSpecError) as pod:
        pod_info({"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}},
                           {"name": "b", "resources": {"requests": {"memory": "-1x"}}}]}})
    with pytest.raises(PodConversionError) as conversion:
        build_instance_request({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
                                "spec": {"containers": []}}, "aci")
    with pytest.raises(NodePoolError) as pools:
        parse_node_pools({"nodePools": [{"name": "a"}]})
    with pytest.raises(ResourceError) as resource:
        parse_resource({"metadata": {"name": "x-v1.0.0"}, "spec": {}})
    for info in (config, pod, conversion, pools, resource):
        err = info.value
        assert isinstance(err, InputError) and isinstance(err, ValueError)
        assert err.problems and str(err) == err.separator.join(err.problems), err
    assert len(config.value.problems) == 2 and len(pod.value.problems) == 2
    assert config.value.problems[0].startswith("s.yaml: ")
    assert pools.value.problems == ("nodePools[0].count: required",)
