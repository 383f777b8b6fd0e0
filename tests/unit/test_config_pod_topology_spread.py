"""The ``podTopologySpread`` section: kube's PodTopologySpreadArgs (``defaultingType``,
``defaultConstraints``), its defaults, its round trip and ``ValidatePodTopologySpreadArgs``'
rules with messages naming the field."""

from __future__ import annotations

import pytest
import yaml

from pyscheduler.config import ConfigError, dump_config, parse_config
from pyscheduler.settings import (
    SYSTEM_DEFAULT_SPREAD_CONSTRAINTS,
    DefaultSpreadConstraint,
    PodTopologySpreadConfig,
    SchedulerConfig,
)

SRC = "scheduler.yaml"
ZONE = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}


def errors_of(document: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(document, SRC)
    return [str(e) for e in info.value.errors]


def listed(*constraints: object, kind: str = "List") -> dict[str, object]:
    return {"podTopologySpread": {"defaultingType": kind,
                                  "defaultConstraints": list(constraints)}}


def test_defaults_are_kubes_system_defaulting() -> None:
    config = SchedulerConfig().pod_topology_spread
    assert config == PodTopologySpreadConfig("System", ())
    assert config.constraints == SYSTEM_DEFAULT_SPREAD_CONSTRAINTS == (
        DefaultSpreadConstraint(3, "kubernetes.io/hostname", "ScheduleAnyway"),
        DefaultSpreadConstraint(5, "topology.kubernetes.io/zone", "ScheduleAnyway"))
    assert parse_config({"podTopologySpread": {}}, SRC).pod_topology_spread == config
    assert dump_config(SchedulerConfig())["podTopologySpread"] == {
        "defaultingType": "System", "defaultConstraints": []}


def test_list_defaulting_round_trips() -> None:
    document = listed(
        {**ZONE, "minDomains": 2, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
        {"maxSkew": 4, "topologyKey": "kubernetes.io/hostname",
         "whenUnsatisfiable": "ScheduleAnyway"})
    config = parse_config(document, SRC)
    assert config.pod_topology_spread == PodTopologySpreadConfig("List", (
        DefaultSpreadConstraint(1, "zone", "DoNotSchedule", 2, "Ignore", "Honor"),
        DefaultSpreadConstraint(4, "kubernetes.io/hostname", "ScheduleAnyway")))
    dumped = dump_config(config, include_identity=True)
    assert dumped["podTopologySpread"] == document["podTopologySpread"]
    again = parse_config(yaml.safe_load(yaml.safe_dump(dumped, sort_keys=False)), SRC)
    assert again == config


def test_list_without_constraints_means_no_defaulting() -> None:
    config = parse_config({"podTopologySpread": {"defaultingType": "List"}}, SRC)
    assert config.pod_topology_spread.constraints == ()


@pytest.mark.parametrize(("document", "expected"), [
    pytest.param({"podTopologySpread": {"defaultConstraints": [ZONE]}},
                 ['podTopologySpread.defaultingType: Invalid value: "System": when '
                  ".defaultConstraints are not empty (use List to give your own)"],
                 id="defaultingType defaults to System, which takes no constraints"),
    pytest.param(listed(ZONE, kind="System"),
                 ['podTopologySpread.defaultingType: Invalid value: "System": when '
                  ".defaultConstraints are not empty (use List to give your own)"],
                 id="System with constraints"),
    pytest.param({"podTopologySpread": {"defaultingType": "system"}},
                 ['podTopologySpread.defaultingType: must be one of System, List, got "system" '
                  '(did you mean "System"?)'],
                 id="unsupported defaultingType"),
    pytest.param(listed({**ZONE, "maxSkew": 0}),
                 ["podTopologySpread.defaultConstraints[0].maxSkew: not in valid range "
                  "(0, inf), got 0"],
                 id="maxSkew must be positive"),
    pytest.param(listed({**ZONE, "maxSkew": -1}),
                 ["podTopologySpread.defaultConstraints[0].maxSkew: not in valid range "
                  "(0, inf), got -1"],
                 id="negative maxSkew"),
    pytest.param(listed({"topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}),
                 ["podTopologySpread.defaultConstraints[0].maxSkew: is required"],
                 id="maxSkew missing"),
    pytest.param(listed({**ZONE, "topologyKey": ""}),
                 ["podTopologySpread.defaultConstraints[0].topologyKey: is required: can not "
                  "be empty"],
                 id="empty topologyKey"),
    pytest.param(listed({**ZONE, "topologyKey": "not a key"}),
                 ["podTopologySpread.defaultConstraints[0].topologyKey: name part must consist "
                  "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                  "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
                  'got "not a key"'],
                 id="topologyKey is a label name"),
    pytest.param(listed({**ZONE, "whenUnsatisfiable": ""}),
                 ["podTopologySpread.defaultConstraints[0].whenUnsatisfiable: is required: can "
                  "not be empty"],
                 id="empty whenUnsatisfiable"),
    pytest.param(listed({**ZONE, "whenUnsatisfiable": "Later"}),
                 ["podTopologySpread.defaultConstraints[0].whenUnsatisfiable: must be one of "
                  'DoNotSchedule, ScheduleAnyway, got "Later"'],
                 id="unsupported whenUnsatisfiable"),
    pytest.param(listed({**ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}),
                 ["podTopologySpread.defaultConstraints[0].labelSelector: Forbidden: constraint "
                  "must not define a selector, as they deduced for each pod (from the Services, "
                  "ReplicationControllers, ReplicaSets and StatefulSets that select it)"],
                 id="no labelSelector in default constraints"),
    pytest.param(listed({**ZONE, "matchLabelKeys": ["pod-template-hash"]}),
                 ["podTopologySpread.defaultConstraints[0].matchLabelKeys: has no effect in a "
                  "default constraint (its selector is deduced for each pod); remove it"],
                 id="matchLabelKeys would do nothing"),
    pytest.param(listed({**ZONE, "minDomains": 0}),
                 ["podTopologySpread.defaultConstraints[0].minDomains: must be greater than 0, "
                  "got 0"],
                 id="minDomains positive"),
    pytest.param(listed({**ZONE, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}),
                 ["podTopologySpread.defaultConstraints[0].minDomains: can only use minDomains "
                  "if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"],
                 id="minDomains only with DoNotSchedule"),
    pytest.param(listed({**ZONE, "nodeTaintsPolicy": "honor"}),
                 ["podTopologySpread.defaultConstraints[0].nodeTaintsPolicy: must be one of "
                  'Honor, Ignore, got "honor" (did you mean "Honor"?)'],
                 id="node inclusion policy"),
    pytest.param(listed(ZONE, {**ZONE, "maxSkew": 2}),
                 ["podTopologySpread.defaultConstraints[1]: Duplicate value: "
                  "{zone, DoNotSchedule} (the same topologyKey and whenUnsatisfiable as "
                  "defaultConstraints[0])"],
                 id="duplicate topologyKey and whenUnsatisfiable"),
    pytest.param(listed({**ZONE, "maxSkew": 0}, {**ZONE, "maxSkew": 2}),
                 ["podTopologySpread.defaultConstraints[0].maxSkew: not in valid range "
                  "(0, inf), got 0",
                  "podTopologySpread.defaultConstraints[1]: Duplicate value: "
                  "{zone, DoNotSchedule} (the same topologyKey and whenUnsatisfiable as "
                  "defaultConstraints[0])"],
                 id="a duplicate of an invalid constraint is still a duplicate"),
    pytest.param(listed({**ZONE, "maxskew": 1}),
                 ['podTopologySpread.defaultConstraints[0].maxskew: unknown field (did you mean '
                  '"maxSkew"?)'],
                 id="misspelt field"),
    pytest.param({"podTopologySpread": {"defaultingType": "List", "defaultConstraints": {}}},
                 ["podTopologySpread.defaultConstraints: must be a list of topology spread "
                  "constraints, got a mapping"],
                 id="constraints not a list"),
    pytest.param(listed("zone"),
                 ['podTopologySpread.defaultConstraints[0]: must be a mapping, got "zone"'],
                 id="constraint not a mapping"),
])
def test_validation(document: object, expected: list[str]) -> None:
    assert errors_of(document) == expected
