"""Tests for pyscheduler.config: defaults, every field's error message, round trips."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyscheduler.config import (
    ConfigError,
    ConfigProblem,
    dump_config,
    load_config,
    parse_config,
    parse_host_port,
)
from pyscheduler.settings import (
    FILTER_PLUGINS,
    LeaderElectionConfig,
    PluginsConfig,
    ResourceWeight,
    SchedulerConfig,
    ScorePlugin,
    ScoringStrategy,
    UtilizationShapePoint,
)

SRC = "scheduler.yaml"


def error_of(document: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(document, SRC)
    return str(info.value)


# ---- defaults ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("get", "expected"), [
    pytest.param(lambda c: c.scheduler_name, "pyscheduler", id="schedulerName"),
    pytest.param(lambda c: c.plugins.filter, (
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
        "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
        "VolumeZone", "PodTopologySpread", "InterPodAffinity"), id="filter plugins"),
    pytest.param(lambda c: c.plugins.score_weights, {
        "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
        "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1},
        id="score weights"),
    pytest.param(lambda c: c.scoring_strategy, ScoringStrategy(
        "LeastAllocated", (ResourceWeight("cpu", 1), ResourceWeight("memory", 1))),
        id="scoringStrategy"),
    pytest.param(lambda c: c.percentage_of_nodes_to_score, 100, id="percentageOfNodesToScore"),
    pytest.param(lambda c: c.leader_election.enabled, True, id="leaderElection.enabled"),
    pytest.param(lambda c: c.leader_election.lease_name, "pyscheduler", id="leaseName"),
    pytest.param(lambda c: c.leader_election.lease_namespace, "kube-system", id="leaseNamespace"),
    pytest.param(lambda c: (c.leader_election.lease_duration_seconds,
                            c.leader_election.renew_deadline_seconds,
                            c.leader_election.retry_period_seconds), (15, 10, 2),
                 id="lease timings"),
    pytest.param(lambda c: c.metrics_address, "127.0.0.1:10259", id="metricsAddress"),
    pytest.param(lambda c: (c.metrics_host, c.metrics_port), ("127.0.0.1", 10259),
                 id="metrics host and port"),
    pytest.param(lambda c: c.bind_concurrency, 16, id="bindConcurrency"),
    pytest.param(lambda c: c.bind_timeout_seconds, 10, id="bindTimeoutSeconds"),
    pytest.param(lambda c: c.pod_initial_backoff_seconds, 1, id="podInitialBackoffSeconds"),
    pytest.param(lambda c: c.pod_max_backoff_seconds, 10, id="podMaxBackoffSeconds"),
    pytest.param(lambda c: c.pod_max_in_unschedulable_pods_seconds, 300,
                 id="podMaxInUnschedulablePodsSeconds"),
    pytest.param(lambda c: c.assumed_pod_ttl_seconds, 30, id="assumedPodTTLSeconds"),
    pytest.param(lambda c: c.log_level, "info", id="logLevel"),
    pytest.param(lambda c: c.seed, None, id="seed"),
])
def test_defaults(get: Callable[[SchedulerConfig], object], expected: object) -> None:
    for config in (load_config(None), parse_config({}, SRC), parse_config(None, SRC),
                   SchedulerConfig()):
        assert get(config) == expected


def test_identity_is_hostname_and_a_fresh_suffix() -> None:
    first, second = load_config(None), load_config(None)
    prefix = socket.gethostname() + "_"
    assert first.leader_election.identity.startswith(prefix)
    assert len(first.leader_election.identity) > len(prefix)
    assert first.leader_election.identity != second.leader_election.identity


def test_lease_name_follows_scheduler_name() -> None:
    config = parse_config({"schedulerName": "gpu-scheduler"}, SRC)
    assert config.leader_election.lease_name == "gpu-scheduler"
    config = parse_config({"schedulerName": "gpu-scheduler",
                           "leaderElection": {"leaseName": "other"}}, SRC)
    assert config.leader_election.lease_name == "other"


def test_a_full_document() -> None:
    config = parse_config({
        "schedulerName": "burst.example.com",
        "plugins": {"filter": ["NodeName", "NodeResourcesFit"],
                    "score": {"NodeResourcesFit": {"weight": 5}, "TaintToleration": 0}},
        "scoringStrategy": {"type": "MostFreeMemory",
                            "resources": [{"name": "memory", "weight": 3},
                                          {"name": "nvidia.com/gpu"}]},
        "percentageOfNodesToScore": 0,
        "leaderElection": {"enabled": False, "leaseNamespace": "scheduling",
                           "leaseDurationSeconds": 30, "renewDeadlineSeconds": 20.5,
                           "retryPeriodSeconds": 4, "identity": "me"},
        "metricsAddress": "[::1]:0",
        "bindConcurrency": 1024, "bindTimeoutSeconds": 2.5,
        "podInitialBackoffSeconds": 0.5, "podMaxBackoffSeconds": 0.5,
        "podMaxInUnschedulablePodsSeconds": 60, "assumedPodTTLSeconds": 5,
        "logLevel": "debug", "seed": 42,
    }, SRC)
    assert config == SchedulerConfig(
        scheduler_name="burst.example.com",
        plugins=PluginsConfig(filter=("NodeName", "NodeResourcesFit"),
                              score=(ScorePlugin("NodeResourcesFit", 5),
                                     ScorePlugin("TaintToleration", 0))),
        scoring_strategy=ScoringStrategy("MostFreeMemory", (ResourceWeight("memory", 3),
                                                            ResourceWeight("nvidia.com/gpu", 1))),
        percentage_of_nodes_to_score=0,
        leader_election=LeaderElectionConfig(
            enabled=False, lease_name="burst.example.com", lease_namespace="scheduling",
            lease_duration_seconds=30, renew_deadline_seconds=20.5, retry_period_seconds=4,
            identity="me"),
        metrics_address="[::1]:0", bind_concurrency=1024, bind_timeout_seconds=2.5,
        pod_initial_backoff_seconds=0.5, pod_max_backoff_seconds=0.5,
        pod_max_in_unschedulable_pods_seconds=60, assumed_pod_ttl_seconds=5,
        log_level="debug", seed=42)
    assert (config.metrics_host, config.metrics_port) == ("::1", 0)


def test_requested_to_capacity_ratio() -> None:
    config = parse_config({"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": "nvidia.com/gpu", "weight": 2}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                               {"utilization": 100, "score": 10}]}}}, SRC)
    assert config.scoring_strategy == ScoringStrategy(
        "RequestedToCapacityRatio", (ResourceWeight("nvidia.com/gpu", 2),),
        (UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10)))
    dumped = dump_config(config)["scoringStrategy"]
    assert dumped["requestedToCapacityRatio"] == {"shape": [
        {"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    # Other types dump the field as null, which reads back as "not given".
    assert dump_config(SchedulerConfig())["scoringStrategy"]["requestedToCapacityRatio"] is None
    assert parse_config({"scoringStrategy": {"requestedToCapacityRatio": None}},
                        SRC).scoring_strategy == ScoringStrategy()


def test_empty_plugin_lists_are_kept() -> None:
    config = parse_config({"plugins": {"filter": [], "score": {}}}, SRC)
    assert config.plugins == PluginsConfig(filter=(), score=())


# ---- every field's bad-value message ---------------------------------------------------------

SUBDOMAIN = ("must be an RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
             "ending with a letter or digit, at most 253 characters)")
LABEL = ("must be an RFC 1123 label (lowercase letters, digits and '-', starting and ending with "
         "a letter or digit, at most 63 characters)")
KNOWN_FILTERS = ", ".join(FILTER_PLUGINS)
KNOWN_SCORES = ("TaintToleration, NodeAffinity, NodeResourcesFit, PodTopologySpread, "
                "InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality")
STRATEGIES = "LeastAllocated, MostAllocated, RequestedToCapacityRatio, MostFreeMemory"
SHAPE = "scoringStrategy.requestedToCapacityRatio.shape"
RATIO = "RequestedToCapacityRatio"
POSITIVE = "must be a number of seconds greater than 0"


@pytest.mark.parametrize(("document", "message"), [
    pytest.param([1, 2], "must be a mapping, got a list", id="document not a mapping"),
    pytest.param("text", 'must be a mapping, got "text"', id="document a string"),
    pytest.param({"schedulerName": "Py_Scheduler"},
                 f'schedulerName: {SUBDOMAIN}, got "Py_Scheduler"', id="schedulerName uppercase"),
    pytest.param({"schedulerName": "a" * 254},
                 f'schedulerName: {SUBDOMAIN}, got "{"a" * 76}...', id="schedulerName too long"),
    pytest.param({"schedulerName": 7}, f"schedulerName: {SUBDOMAIN}, got 7",
                 id="schedulerName number"),
    pytest.param({"plugins": ["NodeName"]}, "plugins: must be a mapping, got a list",
                 id="plugins a list"),
    pytest.param({"plugins": {"filter": "NodeName"}},
                 'plugins.filter: must be a list of filter plugin names, got "NodeName"',
                 id="filter not a list"),
    pytest.param({"plugins": {"filter": ["NodeName", "GCEPDLimits"]}},
                 f'plugins.filter[1]: unknown filter plugin "GCEPDLimits"; known filter '
                 f"plugins: {KNOWN_FILTERS}", id="unknown filter plugin"),
    pytest.param({"plugins": {"filter": ["NodeAfinity"]}},
                 f'plugins.filter[0]: unknown filter plugin "NodeAfinity" (did you mean '
                 f'"NodeAffinity"?); known filter plugins: {KNOWN_FILTERS}',
                 id="misspelt filter plugin"),
    pytest.param({"plugins": {"filter": ["NodeResourcesBalancedAllocation"]}},
                 f'plugins.filter[0]: unknown filter plugin "NodeResourcesBalancedAllocation" '
                 f"(it is a score plugin); known filter plugins: {KNOWN_FILTERS}",
                 id="score plugin as a filter"),
    pytest.param({"plugins": {"score": {"NodeName": 1}}},
                 f'plugins.score.NodeName: unknown score plugin "NodeName" (it is a filter '
                 f"plugin); known score plugins: {KNOWN_SCORES}", id="filter plugin as a score"),
    pytest.param({"plugins": {"filter": ["NodeName", "NodeName"]}},
                 'plugins.filter[1]: "NodeName" is listed twice', id="filter plugin twice"),
    pytest.param({"plugins": {"score": ["NodeAffinity"]}},
                 "plugins.score: must be a mapping of score plugin name to weight, got a list",
                 id="score not a mapping"),
    pytest.param({"plugins": {"score": {"Gravity": 1}}},
                 f'plugins.score.Gravity: unknown score plugin "Gravity"; known '
                 f"score plugins: {KNOWN_SCORES}", id="unknown score plugin"),
    pytest.param({"plugins": {"score": {"NodeAffinity": {"weight": "x"}}}},
                 'plugins.score.NodeAffinity.weight: must be an integer between 0 and 100, '
                 'got "x"', id="score weight not a number"),
    pytest.param({"plugins": {"score": {"NodeAffinity": {"weight": 101}}}},
                 "plugins.score.NodeAffinity.weight: must be an integer between 0 and 100, "
                 "got 101", id="score weight above 100"),
    pytest.param({"plugins": {"score": {"NodeAffinity": -1}}},
                 "plugins.score.NodeAffinity: must be an integer between 0 and 100, got -1",
                 id="short score weight negative"),
    pytest.param({"plugins": {"score": {"NodeAffinity": 1.5}}},
                 "plugins.score.NodeAffinity: must be an integer between 0 and 100, got 1.5",
                 id="short score weight fractional"),
    pytest.param({"plugins": {"score": {"NodeAffinity": True}}},
                 "plugins.score.NodeAffinity: must be an integer between 0 and 100, got true",
                 id="score weight a bool"),
    pytest.param({"plugins": {"score": {"NodeAffinity": {}}}},
                 "plugins.score.NodeAffinity.weight: is required", id="score weight missing"),
    pytest.param({"plugins": {"score": {"NodeAffinity": {"weight": 1, "args": {}}}}},
                 'plugins.score.NodeAffinity.args: unknown field; known fields: weight',
                 id="score plugin unknown field"),
    pytest.param({"scoringStrategy": "LeastAllocated"},
                 'scoringStrategy: must be a mapping, got "LeastAllocated"',
                 id="scoringStrategy a string"),
    pytest.param({"scoringStrategy": {"type": "Balanced"}},
                 f'scoringStrategy.type: must be one of {STRATEGIES}, got "Balanced"',
                 id="scoringStrategy unknown type"),
    pytest.param({"scoringStrategy": {"type": "mostallocated"}},
                 f'scoringStrategy.type: must be one of {STRATEGIES}, got "mostallocated" (did '
                 f'you mean "MostAllocated"?)', id="scoringStrategy type case"),
    pytest.param({"scoringStrategy": {"type": RATIO}},
                 "scoringStrategy.requestedToCapacityRatio: is required when type is "
                 "RequestedToCapacityRatio (e.g. {shape: [{utilization: 0, score: 0}, "
                 "{utilization: 100, score: 10}]})", id="ratio without a shape"),
    pytest.param({"scoringStrategy": {"requestedToCapacityRatio": {"shape": [
        {"utilization": 0, "score": 0}]}}},
                 "scoringStrategy.requestedToCapacityRatio: is only used with type "
                 "RequestedToCapacityRatio; type is LeastAllocated", id="shape for another type"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {}}},
                 f"{SHAPE}: is required: at least one point must be specified",
                 id="ratio without shape field"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": [1]}},
                 "scoringStrategy.requestedToCapacityRatio: must be a mapping, got a list",
                 id="ratio a list"),
    pytest.param({"scoringStrategy": {"type": RATIO,
                                      "requestedToCapacityRatio": {"shape": []}}},
                 f"{SHAPE}: must be a non-empty list of {{utilization, score}} points (at least "
                 f"one point must be specified), got a list", id="shape empty"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": 0, "score": 0}, {"utilization": 0, "score": 10}]}}},
                 f"{SHAPE}[1].utilization: utilization values must be sorted in increasing "
                 f"order: must be greater than 0, got 0", id="shape utilization repeated"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": 60, "score": 0}, {"utilization": 40, "score": 10}]}}},
                 f"{SHAPE}[1].utilization: utilization values must be sorted in increasing "
                 f"order: must be greater than 60, got 40", id="shape utilization decreasing"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": 101, "score": 0}]}}},
                 f"{SHAPE}[0].utilization: must be an integer between 0 and 100, got 101",
                 id="shape utilization above 100"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": -1, "score": 0}]}}},
                 f"{SHAPE}[0].utilization: must be an integer between 0 and 100, got -1",
                 id="shape utilization negative"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": 0, "score": 100}]}}},
                 f"{SHAPE}[0].score: must be an integer between 0 and 10, got 100",
                 id="shape score on the node score scale"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": 0, "score": 1.5}]}}},
                 f"{SHAPE}[0].score: must be an integer between 0 and 10, got 1.5",
                 id="shape score fractional"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilization": 0}]}}},
                 f"{SHAPE}[0].score: is required", id="shape score missing"),
    pytest.param({"scoringStrategy": {"type": RATIO, "requestedToCapacityRatio": {"shape": [
        {"utilisation": 0, "score": 1}]}}},
                 f'{SHAPE}[0].utilisation: unknown field (did you mean "utilization"?)\n'
                 f"{SRC}: {SHAPE}[0].utilization: is required", id="shape misspelt field"),
    pytest.param({"scoringStrategy": {"type": RATIO,
                                      "requestedToCapacityRatio": {"shape": ["0,10"]}}},
                 f'{SHAPE}[0]: must be a mapping, got "0,10"', id="shape point a string"),
    pytest.param({"scoringStrategy": {"resources": []}},
                 "scoringStrategy.resources: must be a non-empty list of {name, weight} "
                 "entries, got a list", id="resources empty"),
    pytest.param({"scoringStrategy": {"resources": {"cpu": 1}}},
                 "scoringStrategy.resources: must be a non-empty list of {name, weight} "
                 "entries, got a mapping", id="resources a mapping"),
    pytest.param({"scoringStrategy": {"resources": ["cpu"]}},
                 'scoringStrategy.resources[0]: must be a mapping, got "cpu"',
                 id="resource a string"),
    pytest.param({"scoringStrategy": {"resources": [{"weight": 1}]}},
                 "scoringStrategy.resources[0].name: is required", id="resource name missing"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu cores"}]}},
                 'scoringStrategy.resources[0].name: must be a resource name such as cpu, '
                 'memory or nvidia.com/gpu, got "cpu cores"', id="resource name invalid"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}},
                 'scoringStrategy.resources[1].name: "cpu" is listed twice',
                 id="resource twice"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}},
                 "scoringStrategy.resources[0].weight: must be an integer between 1 and 100, "
                 "got 0", id="resource weight zero"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu", "wieght": 2}]}},
                 'scoringStrategy.resources[0].wieght: unknown field (did you mean "weight"?)',
                 id="resource misspelt field"),
    pytest.param({"percentageOfNodesToScore": 101},
                 "percentageOfNodesToScore: must be an integer between 0 and 100, got 101",
                 id="percentage above 100"),
    pytest.param({"percentageOfNodesToScore": -5},
                 "percentageOfNodesToScore: must be an integer between 0 and 100, got -5",
                 id="percentage negative"),
    pytest.param({"percentageOfNodesToScore": "50%"},
                 'percentageOfNodesToScore: must be an integer between 0 and 100, got "50%"',
                 id="percentage with a sign"),
    pytest.param({"leaderElection": True}, "leaderElection: must be a mapping, got true",
                 id="leaderElection a bool"),
    pytest.param({"leaderElection": {"enabled": "yes"}},
                 'leaderElection.enabled: must be true or false, got "yes"',
                 id="enabled a string"),
    pytest.param({"leaderElection": {"leaseName": "Lease"}},
                 f'leaderElection.leaseName: {SUBDOMAIN}, got "Lease"', id="leaseName invalid"),
    pytest.param({"leaderElection": {"leaseNamespace": "kube.system"}},
                 f'leaderElection.leaseNamespace: {LABEL}, got "kube.system"',
                 id="leaseNamespace with a dot"),
    pytest.param({"leaderElection": {"leaseDurationSeconds": 0}},
                 f"leaderElection.leaseDurationSeconds: {POSITIVE}, got 0",
                 id="leaseDuration zero"),
    pytest.param({"leaderElection": {"renewDeadlineSeconds": "10s"}},
                 f'leaderElection.renewDeadlineSeconds: {POSITIVE}, got "10s"',
                 id="renewDeadline a Go duration"),
    pytest.param({"leaderElection": {"retryPeriodSeconds": -2}},
                 f"leaderElection.retryPeriodSeconds: {POSITIVE}, got -2",
                 id="retryPeriod negative"),
    pytest.param({"leaderElection": {"identity": ""}},
                 'leaderElection.identity: must be a non-empty string, got ""',
                 id="identity empty"),
    pytest.param({"leaderElection": {"identity": 12}},
                 "leaderElection.identity: must be a non-empty string, got 12",
                 id="identity a number"),
    pytest.param({"metricsAddress": 10259},
                 "metricsAddress: must be a host:port string, got 10259", id="address a number"),
    pytest.param({"metricsAddress": "localhost"},
                 'metricsAddress: must be host:port (e.g. 127.0.0.1:10259), got "localhost"',
                 id="address without port"),
    pytest.param({"metricsAddress": "127.0.0.1:65536"},
                 "metricsAddress: the port must be a number between 0 and 65535, "
                 'got "127.0.0.1:65536"', id="port too large"),
    pytest.param({"metricsAddress": "127.0.0.1:http"},
                 "metricsAddress: the port must be a number between 0 and 65535, "
                 'got "127.0.0.1:http"', id="port a name"),
    pytest.param({"metricsAddress": "::1:10259"},
                 'metricsAddress: an IPv6 host must be in brackets ([::1]:10259), '
                 'got "::1:10259"', id="bare IPv6"),
    pytest.param({"metricsAddress": "[127.0.0.1]:10259"},
                 "metricsAddress: the host in brackets must be an IPv6 address, "
                 'got "[127.0.0.1]:10259"', id="IPv4 in brackets"),
    pytest.param({"metricsAddress": "my_host:10259"},
                 "metricsAddress: the host must be an IP address or a host name, "
                 'got "my_host:10259"', id="bad host name"),
    pytest.param({"bindConcurrency": 0},
                 "bindConcurrency: must be an integer between 1 and 1024, got 0",
                 id="bindConcurrency zero"),
    pytest.param({"bindConcurrency": 1025},
                 "bindConcurrency: must be an integer between 1 and 1024, got 1025",
                 id="bindConcurrency too large"),
    pytest.param({"bindTimeoutSeconds": None}, f"bindTimeoutSeconds: {POSITIVE}, got null",
                 id="bindTimeout null"),
    pytest.param({"bindTimeoutSeconds": float("inf")},
                 f"bindTimeoutSeconds: {POSITIVE}, got Infinity", id="bindTimeout infinite"),
    pytest.param({"podInitialBackoffSeconds": 0},
                 f"podInitialBackoffSeconds: {POSITIVE}, got 0", id="initial backoff zero"),
    pytest.param({"podMaxBackoffSeconds": [10]},
                 f"podMaxBackoffSeconds: {POSITIVE}, got a list", id="max backoff a list"),
    pytest.param({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
                 "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds "
                 "(5), got 2", id="max backoff below initial"),
    pytest.param({"podMaxInUnschedulablePodsSeconds": -1},
                 f"podMaxInUnschedulablePodsSeconds: {POSITIVE}, got -1",
                 id="max in unschedulable negative"),
    pytest.param({"assumedPodTTLSeconds": False},
                 f"assumedPodTTLSeconds: {POSITIVE}, got false", id="assumed TTL a bool"),
    pytest.param({"logLevel": "verbose"},
                 'logLevel: must be one of debug, info, warning, error, got "verbose"',
                 id="logLevel unknown"),
    pytest.param({"logLevel": "WARNING"},
                 'logLevel: must be one of debug, info, warning, error, got "WARNING" '
                 '(did you mean "warning"?)', id="logLevel uppercase"),
    pytest.param({"seed": -1}, "seed: must be a non-negative integer or null, got -1",
                 id="seed negative"),
    pytest.param({"seed": "42"}, 'seed: must be a non-negative integer or null, got "42"',
                 id="seed a string"),
    pytest.param({1: 2}, "1: field names must be strings, got 1", id="key not a string"),
])
def test_bad_value_message(document: object, message: str) -> None:
    assert error_of(document) == f"{SRC}: {message}"


def test_error_carries_fields_as_data() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"plugins": {"score": {"NodeAffinity": {"weight": "x"}}}}, SRC)
    assert isinstance(info.value, ValueError)
    assert info.value.source == SRC
    assert info.value.errors == (ConfigProblem(
        "plugins.score.NodeAffinity.weight", 'must be an integer between 0 and 100, got "x"'),)


def test_every_error_is_reported_at_once() -> None:
    message = error_of({"bindConcurrency": 0, "logLevel": "loud", "seed": "s",
                        "leaderElection": {"leaseNamespace": "A"}})
    assert message.splitlines() == [
        f"{SRC}: leaderElection.leaseNamespace: {LABEL}, got \"A\"",
        f"{SRC}: bindConcurrency: must be an integer between 1 and 1024, got 0",
        f'{SRC}: logLevel: must be one of debug, info, warning, error, got "loud"',
        f'{SRC}: seed: must be a non-negative integer or null, got "s"',
    ]


# ---- unknown fields ---------------------------------------------------------------------------


@pytest.mark.parametrize(("document", "message"), [
    pytest.param({"schedulername": "x"}, 'schedulername: unknown field (did you mean "schedulerName"?)',
                 id="top-level case"),
    pytest.param({"percentageOfNodeToScore": 50},
                 'percentageOfNodeToScore: unknown field (did you mean "percentageOfNodesToScore"?)',
                 id="top-level typo"),
    pytest.param({"podMaxBackoff": 3},
                 'podMaxBackoff: unknown field (did you mean "podMaxBackoffSeconds"?)',
                 id="missing unit suffix"),
    pytest.param({"leaderElection": {"leaseDuration": 15}},
                 'leaderElection.leaseDuration: unknown field (did you mean '
                 '"leaseDurationSeconds"?)', id="leaderElection kube spelling"),
    pytest.param({"leaderElection": {"leaseNamspace": "x"}},
                 'leaderElection.leaseNamspace: unknown field (did you mean "leaseNamespace"?)',
                 id="leaderElection typo"),
    pytest.param({"leaderElection": {"resourceLock": "leases"}},
                 "leaderElection.resourceLock: unknown field; known fields: enabled, leaseName, "
                 "leaseNamespace, leaseDurationSeconds, renewDeadlineSeconds, "
                 "retryPeriodSeconds, identity", id="leaderElection kube-only field"),
    pytest.param({"plugins": {"filters": []}},
                 'plugins.filters: unknown field (did you mean "filter"?)', id="plugins plural"),
    pytest.param({"scoringStrategy": {"kind": "LeastAllocated"}},
                 "scoringStrategy.kind: unknown field; known fields: type, resources, "
                 "requestedToCapacityRatio",
                 id="no close name lists the known ones"),
    pytest.param({"apiVersion": "v1"},
                 "apiVersion: unknown field; known fields: schedulerName, plugins, "
                 "scoringStrategy, percentageOfNodesToScore, leaderElection, metricsAddress, "
                 "bindConcurrency, bindTimeoutSeconds, podInitialBackoffSeconds, "
                 "podMaxBackoffSeconds, podMaxInUnschedulablePodsSeconds, assumedPodTTLSeconds, "
                 "logLevel, seed, scheduleFragment, fragments, storage, virtualNodes, rebalancer, "
                 "preemption, podTopologySpread, interPodAffinity",
                     id="kube header"),
])
def test_unknown_field_suggestion(document: object, message: str) -> None:
    assert error_of(document) == f"{SRC}: {message}"


# ---- leader-election timing rules -------------------------------------------------------------


@pytest.mark.parametrize(("lease", "renew", "retry", "message"), [
    pytest.param(15, 10, 2, None, id="client-go defaults"),
    pytest.param(60, 40, 10, None, id="longer timings"),
    pytest.param(1.5, 1, 0.5, None, id="fractional seconds"),
    pytest.param(10, 10, 2, "leaderElection.renewDeadlineSeconds: must be less than "
                            "leaseDurationSeconds (10), got 10", id="renew equals lease"),
    pytest.param(10, 12, 2, "leaderElection.renewDeadlineSeconds: must be less than "
                            "leaseDurationSeconds (10), got 12", id="renew above lease"),
    pytest.param(15, 10, 10, "leaderElection.retryPeriodSeconds: must be less than "
                             "renewDeadlineSeconds / 1.2 (8.33333) so that a retry with jitter "
                             "still fits before the renew deadline, got 10",
                 id="retry equals renew"),
    pytest.param(15, 10, 9, "leaderElection.retryPeriodSeconds: must be less than "
                            "renewDeadlineSeconds / 1.2 (8.33333) so that a retry with jitter "
                            "still fits before the renew deadline, got 9",
                 id="retry with jitter past renew"),
    pytest.param(15, 10, 8, None, id="retry with jitter just fits"),
])
def test_leader_election_timing_rules(lease: float, renew: float, retry: float,
                                      message: str | None) -> None:
    document = {"leaderElection": {"leaseDurationSeconds": lease, "renewDeadlineSeconds": renew,
                                   "retryPeriodSeconds": retry}}
    if message is None:
        election = parse_config(document, SRC).leader_election
        assert (election.lease_duration_seconds, election.renew_deadline_seconds,
                election.retry_period_seconds) == (lease, renew, retry)
    else:
        assert error_of(document) == f"{SRC}: {message}"


def test_timing_rules_apply_against_defaults() -> None:
    # renewDeadline must beat the default 15 s lease even when only the deadline is set.
    assert error_of({"leaderElection": {"renewDeadlineSeconds": 20}}) == (
        f"{SRC}: leaderElection.renewDeadlineSeconds: must be less than leaseDurationSeconds "
        "(15), got 20")


def test_an_invalid_timing_gives_one_message_not_two() -> None:
    assert error_of({"leaderElection": {"renewDeadlineSeconds": 0}}) == (
        f"{SRC}: leaderElection.renewDeadlineSeconds: {POSITIVE}, got 0")


# ---- round trips ------------------------------------------------------------------------------

CUSTOM = {
    "schedulerName": "burst",
    "plugins": {"filter": ["TaintToleration", "NodeResourcesFit"],
                "score": {"NodeResourcesFit": 7}},
    "scoringStrategy": {"type": "MostAllocated",
                        "resources": [{"name": "cpu", "weight": 2}, {"name": "memory"}]},
    "percentageOfNodesToScore": 40,
    "leaderElection": {"enabled": False, "leaseDurationSeconds": 20.5,
                       "identity": "scheduler-0"},
    "metricsAddress": "0.0.0.0:0",
    "bindConcurrency": 4, "bindTimeoutSeconds": 0.25, "podMaxBackoffSeconds": 60,
    "logLevel": "warning", "seed": 7,
}


@pytest.mark.parametrize("document", [
    pytest.param({}, id="defaults"),
    pytest.param(CUSTOM, id="customized"),
    pytest.param({"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": "cpu", "weight": 3}, {"name": "nvidia.com/gpu", "weight": 5}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                               {"utilization": 80, "score": 10},
                                               {"utilization": 100, "score": 2}]}}},
        id="RequestedToCapacityRatio"),
])
def test_round_trip_through_dump_config(document: dict[str, Any]) -> None:
    config = parse_config(document, SRC)
    assert parse_config(dump_config(config, include_identity=True), SRC) == config
    # Through YAML text, the way ready-made files are written and read.
    text = yaml.safe_dump(dump_config(config, include_identity=True), sort_keys=False)
    assert parse_config(yaml.safe_load(text), SRC) == config


def test_dump_leaves_the_identity_out_by_default() -> None:
    config = parse_config(CUSTOM, SRC)
    dumped = dump_config(config)
    assert "identity" not in dumped["leaderElection"]
    again = parse_config(dumped, SRC)
    assert again.leader_election.identity != config.leader_election.identity
    assert dataclasses.replace(again, leader_election=config.leader_election) == config


def test_dump_is_camel_case_and_plain_data() -> None:
    dumped = dump_config(SchedulerConfig())
    assert list(dumped) == [
        "schedulerName", "plugins", "scoringStrategy", "percentageOfNodesToScore",
        "leaderElection", "metricsAddress", "bindConcurrency", "bindTimeoutSeconds",
        "podInitialBackoffSeconds", "podMaxBackoffSeconds", "podMaxInUnschedulablePodsSeconds",
        "assumedPodTTLSeconds", "logLevel", "seed", "scheduleFragment", "fragments", "storage",
        "virtualNodes", "rebalancer", "preemption", "podTopologySpread", "interPodAffinity"]
    assert dumped["plugins"]["score"]["NodeAffinity"] == {"weight": 2}
    assert dumped["leaderElection"]["leaseDurationSeconds"] == 15
    assert isinstance(dumped["leaderElection"]["leaseDurationSeconds"], int)
    assert yaml.safe_load(yaml.safe_dump(dumped)) == dumped


def test_values_are_frozen() -> None:
    config = SchedulerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.scheduler_name = "other"  # type: ignore[misc]
    assert not hasattr(config, "__dict__")


# ---- files ------------------------------------------------------------------------------------


def test_load_config_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text("schedulerName: from-file\nplugins:\n  score:\n    NodeAffinity:\n"
                    "      weight: 9\n")
    config = load_config(str(path))
    assert config.scheduler_name == "from-file"
    assert config.plugins.score == (ScorePlugin("NodeAffinity", 9),)


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing set\n")
    config = load_config(str(path))
    defaults = SchedulerConfig()
    election = dataclasses.replace(defaults.leader_election,
                                   identity=config.leader_election.identity)
    assert config == dataclasses.replace(defaults, leader_election=election)


def test_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("plugins:\n  score:\n    NodeAffinity:\n      weight: x\n")
    with pytest.raises(ConfigError, match=r"^.*bad\.yaml: plugins\.score\.NodeAffinity\.weight: "
                                          r'must be an integer between 0 and 100, got "x"$'):
        load_config(str(path))


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("schedulerName: [unclosed\n", "invalid YAML at line 2, column 1: ",
                 id="syntax error"),
    pytest.param("seed: 1\nseed: 2\n",
                 "invalid YAML at line 2, column 1: duplicate key 'seed'", id="duplicate key"),
    pytest.param("leaderElection:\n  enabled: true\n  enabled: false\n",
                 "invalid YAML at line 3, column 3: duplicate key 'enabled'",
                 id="nested duplicate key"),
])
def test_unreadable_yaml(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert str(info.value).startswith(f"{path}: {message}")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match=r"absent\.yaml: cannot read the file: "):
        load_config(str(path))


# ---- helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "expected"), [
    pytest.param("127.0.0.1:10259", ("127.0.0.1", 10259), id="IPv4"),
    pytest.param("[::1]:80", ("::1", 80), id="IPv6"),
    pytest.param("localhost:0", ("localhost", 0), id="any port"),
    pytest.param("scheduler.kube-system.svc:10259", ("scheduler.kube-system.svc", 10259),
                 id="DNS name"),
    pytest.param(":10259", ("", 10259), id="every interface"),
])
def test_parse_host_port(address: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(address) == expected


@pytest.mark.parametrize(("percentage", "nodes", "expected"), [
    pytest.param(100, 5000, 5000, id="100 percent scores all"),
    pytest.param(0, 50, 50, id="small cluster scores all"),
    pytest.param(0, 1000, 420, id="adaptive 42 percent of 1000"),
    pytest.param(0, 5000, 500, id="adaptive 10 percent of 5000"),
    pytest.param(0, 20000, 1000, id="adaptive floor of 5 percent"),
    pytest.param(10, 200, 100, id="never fewer than 100"),
    pytest.param(30, 1000, 300, id="fixed percentage"),
])
def test_num_feasible_nodes_to_find_matches_kube(percentage: int, nodes: int,
                                                 expected: int) -> None:
    config = SchedulerConfig(percentage_of_nodes_to_score=percentage)
    assert config.num_feasible_nodes_to_find(nodes) == expected


@pytest.mark.parametrize(("document", "message"), [
    pytest.param({"scheduleFragment": "default-v1.0.0"},
                 "scheduleFragment: must be name:vX.Y.Z (e.g. default:v1.0.0) or null, got "
                 '"default-v1.0.0"', id="resource name instead of name:version"),
    pytest.param({"fragments": {"runtime": "wasm3"}},
                 'fragments.runtime: must be one of wasmtime, wasmer, got "wasm3" (did you mean "wasmer"?)',
                 id="unknown runtime"),
    pytest.param({"fragments": {"memoryMiB": 0}},
                 "fragments.memoryMiB: must be an integer between 1 and 4096, got 0",
                 id="memory cap zero"),
    pytest.param({"storage": {"allowedFileDirs": ["relative/dir"]}},
                 'storage.allowedFileDirs[0]: must be an absolute directory path, got '
                 '"relative/dir"', id="relative file dir"),
    pytest.param({"storage": {"credentialsSecret": {"namespace": "kube-system"}}},
                 "storage.credentialsSecret.name: is required", id="secret without name"),
    pytest.param({"fragments": {"timeoutMilliseconds": 5000}},
                 "fragments.timeoutMilliseconds: must be an integer between 1 and 1000, got "
                 "5000", id="a deadline above the ceiling"),
    pytest.param({"fragments": {"maxTimeoutMilliseconds": 200, "timeoutMilliseconds": 300}},
                 "fragments.timeoutMilliseconds: must not exceed "
                 "fragments.maxTimeoutMilliseconds (200), got 300",
                 id="a default deadline above the configured maximum"),
    pytest.param({"fragments": {"maxTimeoutMilliseconds": 2000}},
                 "fragments.maxTimeoutMilliseconds: must be an integer between 1 and 1000, got "
                 "2000", id="a maximum above the CRD's"),
    pytest.param({"fragments": {"callThreadNice": 20}},
                 "fragments.callThreadNice: must be an integer between 0 and 19, got 20",
                 id="nice out of range"),
    pytest.param({"fragments": {"logLinesPerSecond": 0}},
                 "fragments.logLinesPerSecond: must be a number between 0.01 and 100000, got 0",
                 id="no log lines at all"),
    pytest.param({"fragments": {"quarantineSeconds": -1}},
                 "fragments.quarantineSeconds: must be a number of seconds greater than 0, "
                 "got -1", id="negative quarantine"),
    pytest.param({"storage": {"allowedHttpHosts": ["https://example.org/x"]}},
                 "storage.allowedHttpHosts[0]: must be a host name or address, optionally with "
                 ':port (no scheme or path), got "https://example.org/x"', id="a URL for a host"),
    pytest.param({"storage": {"allowedHttpHosts": "example.org"}},
                 "storage.allowedHttpHosts: must be a list of host or host:port strings, got "
                 '"example.org"', id="hosts not a list"),
])
def test_fragment_sections_reject_bad_values(document: object, message: str) -> None:
    assert error_of(document) == f"{SRC}: {message}"


def test_fragment_sections_round_trip() -> None:
    config = parse_config({"scheduleFragment": None, "fragments": {
        "runtime": "wasmer", "fuel": 1000, "timeoutMilliseconds": 20, "memoryMiB": 8},
        "storage": {"endpoint": "127.0.0.1:9000", "accessKey": "a", "secretKey": "b",
                    "allowedFileDirs": ["/srv/fragments"]}}, "x")
    assert config.schedule_fragment is None
    assert config.fragments.runtime == "wasmer" and config.fragments.timeout_seconds == 0.02
    assert config.storage.allowed_file_dirs == ("/srv/fragments",)
    assert config.fragments.max_timeout_seconds == 1.0  # the ceiling, by default
    assert config.fragments.inline_call_seconds == 0.005
    tuned = parse_config({"fragments": {
        "maxTimeoutMilliseconds": 400, "timeoutMilliseconds": 100, "logLinesPerSecond": 2.5,
        "logBurst": 7, "quarantineAfterFailures": 3, "quarantineSeconds": 12,
        "callThreadNice": 0, "inlineCallMilliseconds": 0},
        "storage": {"allowedHttpHosts": ["fragments.example.org", "10.0.0.5:8080", "[fd00::1]"],
                    "allowPrivateAddresses": True}}, "x")
    f = tuned.fragments
    assert (f.max_timeout_seconds, f.timeout_seconds, f.log_lines_per_second, f.log_burst,
            f.quarantine_after_failures, f.quarantine_seconds, f.call_thread_nice,
            f.inline_call_seconds) == (0.4, 0.1, 2.5, 7, 3, 12.0, 0, 0.0)
    assert tuned.storage.allowed_http_hosts == ("fragments.example.org", "10.0.0.5:8080",
                                                "[fd00::1]")
    assert parse_config(dump_config(tuned), "x").fragments == f
    again = parse_config(dump_config(config), "x")
    assert dataclasses.replace(again, leader_election=config.leader_election) == config
    assert SchedulerConfig().schedule_fragment == "default:v1.0.0"


@pytest.mark.parametrize(("document", "message"), [
    pytest.param({"virtualNodes": {"enabled": True, "pools": [{"name": "aci",
                                                              "platform": "azure"}]}},
                 "virtualNodes.cloudUrl: is required when virtualNodes.enabled is true",
                 id="no cloud url"),
    pytest.param({"virtualNodes": {"enabled": True, "cloudUrl": "http://127.0.0.1:1"}},
                 "virtualNodes.pools: needs at least one pool when enabled", id="no pools"),
    pytest.param({"virtualNodes": {"cloudUrl": "http://x", "pools": [
        {"name": "aci", "platform": "azure"}, {"name": "aci", "platform": "azure"}]}},
        'virtualNodes.pools[1].name: duplicate pool "aci"', id="duplicate pool"),
    pytest.param({"virtualNodes": {"cloudUrl": "http://x", "pools": [
        {"name": "aci", "platform": "azure", "maxPods": -1}]}},
        "virtualNodes.pools[0].maxPods: must be a non-negative integer or null, got -1",
        id="negative cap"),
    pytest.param({"virtualNodes": {"cloudUrl": "http://x", "pools": [
        {"name": "aci", "platform": "azure", "labels": {"type": "gpu"}}]}},
        "virtualNodes.pools[0].labels.type: is set by pyscheduler on every virtual node and "
        "cannot be given", id="a reserved label"),
    pytest.param({"virtualNodes": {"cloudUrl": "http://x", "pools": [
        {"name": "aci", "platform": "azure",
         "labels": {"topology.kubernetes.io/zone": "west 1"}}]}},
        'virtualNodes.pools[0].labels: Invalid value: "west 1": a valid label must be an empty '
        "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
        "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        id="a bad label value"),
    pytest.param({"virtualNodes": {"cloudUrl": "http://x", "pools": [
        {"name": "aci", "platform": "azure", "labels": ["zone"]}]}},
        'virtualNodes.pools[0].labels: Invalid value: ["zone"]: must be an object',
        id="labels not a mapping"),
    pytest.param({"rebalancer": {"maxMovesPerCycle": 0}},
                 "rebalancer.maxMovesPerCycle: must be an integer between 1 and 10000, got 0",
                 id="no moves"),
])
def test_virtual_node_sections_reject_bad_values(document: object, message: str) -> None:
    assert error_of(document) == f"{SRC}: {message}"


def test_pool_labels_round_trip() -> None:
    config = parse_config({"virtualNodes": {"cloudUrl": "http://x", "pools": [
        {"name": "aci", "platform": "azure",
         "labels": {"topology.kubernetes.io/zone": "westeurope-1",
                    "topology.kubernetes.io/region": "westeurope"}},
        {"name": "eci", "platform": "alibaba"}]}}, "x")
    aci, eci = config.virtual_nodes.pools
    assert aci.labels == (("topology.kubernetes.io/region", "westeurope"),
                          ("topology.kubernetes.io/zone", "westeurope-1"))
    assert eci.labels == ()
    assert parse_config(dump_config(config), "x").virtual_nodes == config.virtual_nodes


def test_preemption_defaults_and_round_trip() -> None:
    config = SchedulerConfig()
    assert config.preemption.enabled and config.preemption.order == "PreemptThenBurst"
    assert config.preemption.victims == "OwnPods"
    assert (config.preemption.min_candidate_nodes_percentage,
            config.preemption.min_candidate_nodes_absolute) == (10, 100)
    given = parse_config({"preemption": {"enabled": False, "order": "BurstThenPreempt",
                                         "victims": "AllPods",
                                         "minCandidateNodesPercentage": 0,
                                         "minCandidateNodesAbsolute": 5}}, "x")
    assert given.preemption.order == "BurstThenPreempt" and not given.preemption.enabled
    assert given.preemption.victims == "AllPods"
    assert parse_config(dump_config(given), "x").preemption == given.preemption


@pytest.mark.parametrize(("document", "message"), [
    pytest.param({"preemption": {"order": "PreemptFirst"}},
                 "preemption.order: must be one of PreemptThenBurst, BurstThenPreempt, "
                 'got "PreemptFirst" (did you mean "PreemptThenBurst"?)', id="unknown order"),
    pytest.param({"preemption": {"victims": "ownpods"}},
                 'preemption.victims: must be one of OwnPods, AllPods, got "ownpods" '
                 '(did you mean "OwnPods"?)', id="victims case"),
    pytest.param({"preemption": {"minCandidateNodesPercentage": 101}},
                 "preemption.minCandidateNodesPercentage: must be an integer between 0 and 100, "
                 "got 101", id="percentage above 100"),
    pytest.param({"preemption": {"minCandidateNodesPercentage": 0,
                                 "minCandidateNodesAbsolute": 0}},
                 "preemption.minCandidateNodesAbsolute: cannot be zero at the same time as "
                 "minCandidateNodesPercentage", id="both zero"),
    pytest.param({"preemption": {"victim": "AllPods"}},
                 'preemption.victim: unknown field (did you mean "victims"?)', id="misspelt"),
])
def test_preemption_rejects_bad_values(document: object, message: str) -> None:
    assert error_of(document) == f"{SRC}: {message}"
