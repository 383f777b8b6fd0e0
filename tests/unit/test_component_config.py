"""kube-scheduler's KubeSchedulerConfiguration read as it is: kube's plugin merging and
multiPoint expansion, pluginConfig, kube's validation messages, what is refused for safety, and
a second document for this scheduler's own settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyscheduler.config import ConfigError, load_config, parse_config, parse_documents
from pyscheduler.settings import DEFAULT_FILTER_PLUGINS, SchedulerConfig

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def kube(*extra: Any, **fields: Any) -> SchedulerConfig:
    return parse_documents([{**HEAD, **fields}, *extra], "k.yaml")


def profile(**fields: Any) -> SchedulerConfig:
    return kube(profiles=[{"schedulerName": "gpu", **fields}])


def errors(*extra: Any, **fields: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        kube(*extra, **fields)
    return [str(e) for e in caught.value.errors]


def profile_errors(**fields: Any) -> list[str]:
    return errors(profiles=[{"schedulerName": "gpu", **fields}])


def weights(config: SchedulerConfig) -> dict[str, int]:
    return {p.name: p.weight for p in config.plugins.score}


def test_the_head_alone_is_kubes_default_profile_under_this_schedulers_name() -> None:
    config = kube()
    native = parse_config(None, "defaults")
    assert config.scheduler_name == native.scheduler_name == "pyscheduler"
    assert config.plugins.filter == DEFAULT_FILTER_PLUGINS
    assert weights(config) == weights(native) == {
        "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
        "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
    assert config.preemption.enabled and config.preemption.order == "PreemptThenBurst"
    assert dataclasses.replace(config.leader_election, identity="") == dataclasses.replace(
        native.leader_election, identity="")


def test_disabling_all_scores_and_enabling_some_weights_them_zero_and_none_being_one() -> None:
    config = profile(plugins={"score": {"disabled": [{"name": "*"}], "enabled": [
        {"name": "ImageLocality", "weight": 7}, {"name": "NodeAffinity"},
        {"name": "TaintToleration", "weight": 0}]}})
    assert [(p.name, p.weight) for p in config.plugins.score] == [
        ("ImageLocality", 7), ("NodeAffinity", 1), ("TaintToleration", 1)]
    assert config.plugins.filter == DEFAULT_FILTER_PLUGINS  # other points untouched


def test_a_default_plugin_enabled_at_its_point_overrides_its_weight_in_place() -> None:
    config = profile(plugins={"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 9}]}})
    assert weights(config)["NodeResourcesFit"] == 9 and len(weights(config)) == 7


def test_multipoint_disabled_leaves_every_point_and_a_point_can_disable_one_of_them() -> None:
    config = profile(plugins={"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]},
                              "filter": {"disabled": [{"name": "PodTopologySpread"}]}})
    assert "InterPodAffinity" not in config.plugins.filter
    assert "InterPodAffinity" not in weights(config)
    assert "PodTopologySpread" not in config.plugins.filter
    assert weights(config)["PodTopologySpread"] == 2  # still scores
    config = profile(plugins={"multiPoint": {"enabled": [{"name": "ImageLocality",
                                                           "weight": 4}]}})
    assert weights(config)["ImageLocality"] == 4  # multiPoint's weight replaces the default


def test_a_profile_without_preemption_and_bursting_before_preemption() -> None:
    assert not profile(plugins={"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}
                       ).preemption.enabled
    config = profile(plugins={"postFilter": {"disabled": [{"name": "*"}], "enabled": [
        {"name": "CloudBurst"}, {"name": "DefaultPreemption"}]}})
    assert config.preemption.enabled and config.preemption.order == "BurstThenPreempt"


def test_unknown_plugins_and_plugins_at_points_they_do_not_extend_in_kubes_words() -> None:
    found = profile_errors(plugins={
        "filter": {"enabled": [{"name": "Foo"}, {"name": "ImageLocality"}]},
        "multiPoint": {"enabled": [{"name": "DynamicResources"}]},
        "score": {"enabled": [{"name": "NodeAffinity"}, {"name": "NodeAffinity"}]}})
    assert any(e.startswith('profiles[0].plugins.filter.enabled[0]: FilterPlugin "Foo" does '
                            "not exist; known plugins: CloudBurst, DefaultBinder") for e in found)
    assert 'profiles[0].plugins.filter.enabled[1]: plugin "ImageLocality" does not extend ' \
           "FilterPlugin plugin" in found
    assert 'profiles[0].plugins.multiPoint.enabled[0]: MultiPoint plugin "DynamicResources" ' \
           "does not exist: not implemented by pyscheduler yet" in found
    assert 'profiles[0].plugins.score.enabled[1]: plugin "NodeAffinity" already registered ' \
           'as "ScorePlugin"' in found


@pytest.mark.parametrize(("fields", "message"), [
    ({"percentageOfNodesToScore": 120},
     "percentageOfNodesToScore: Invalid value: 120: not in valid range [0-100]"),
    ({"podInitialBackoffSeconds": 0},
     "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
     "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to "
     "PodInitialBackoffSeconds"),
    ({"parallelism": 0},
     "parallelism: Invalid value: 0: should be an integer value greater than zero"),
    ({"profiles": []}, "profiles: Required value"),
    ({"profiles": [{"schedulerName": ""}]}, "profiles[0].schedulerName: Required value"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}, {"schedulerName": "a"}]},
     'profiles[2].schedulerName: Duplicate value: "profiles[0].schedulerName"'),
    ({"leaderElection": {"resourceLock": "configmaps"}},
     'leaderElection.resourceLock: Invalid value: "configmaps": resourceLock value must be '
     '"leases"'),
    ({"leaderElection": {"leaseDuration": "15x"}},
     'leaderElection.leaseDuration: Invalid value: "15x": must be a positive duration, such '
     "as 15s"),
    ({"extenders": [{"urlPrefix": "http://127.0.0.1:1"}]},
     "extenders: Forbidden: scheduler extenders are not supported here: write the logic as a "
     "fragment (wssp/schedulefragment)"),
    ({"clientConnection": {"kubeconfig": "/etc/k.conf"}},
     "clientConnection.kubeconfig: Forbidden: name the kubeconfig on the command line "
     "(--kubeconfig), or run in the cluster with its service account"),
    ({"profiles": [{"schedulerName": "x", "bogus": 1}]},
     'profiles[0].bogus: unknown field "bogus"; known fields: schedulerName, '
     "percentageOfNodesToScore, plugins, pluginConfig"),
])
def test_kubes_validation_messages(fields: dict[str, Any], message: str) -> None:
    assert message in errors(**fields)


def test_an_old_api_version_is_refused_naming_the_one_served() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_documents([{**HEAD, "apiVersion": "kubescheduler.config.k8s.io/v1beta3"}], "k")
    assert [str(e) for e in caught.value.errors] == [
        'apiVersion: no kind "KubeSchedulerConfiguration" is registered for version '
        '"kubescheduler.config.k8s.io/v1beta3"; use "kubescheduler.config.k8s.io/v1"']


def test_kube_schedulers_own_lease_is_refused() -> None:
    found = errors(leaderElection={"resourceName": "kube-scheduler"})
    assert any(e.startswith('leaderElection.resourceName: Invalid value: "kube-scheduler": '
                            "kube-system/kube-scheduler is kube-scheduler's own lease")
               for e in found)
    config = kube(leaderElection={"leaderElect": True, "resourceName": "mine",
                                  "resourceNamespace": "sched", "leaseDuration": "1m30s",
                                  "renewDeadline": "20s", "retryPeriod": "500ms"})
    election = config.leader_election
    assert (election.lease_name, election.lease_namespace) == ("mine", "sched")
    assert (election.lease_duration_seconds, election.renew_deadline_seconds,
            election.retry_period_seconds) == (90.0, 20.0, 0.5)


def test_plugins_this_scheduler_depends_on_cannot_be_left_out() -> None:
    found = profile_errors(plugins={"bind": {"disabled": [{"name": "DefaultBinder"}]},
                                    "multiPoint": {"disabled": [{"name": "SchedulingGates"}]}})
    assert 'profiles[0].plugins.bind: Forbidden: "DefaultBinder" cannot be left out here: ' \
           "this scheduler's bind depends on it" in found
    assert any(e.startswith('profiles[0].plugins.preEnqueue: Forbidden: "SchedulingGates"')
               for e in found)


def test_plugin_config_sets_each_plugins_arguments() -> None:
    config = profile(pluginConfig=[
        {"name": "NodeResourcesFit", "args": {
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
            "scoringStrategy": {"type": "MostAllocated", "resources": [
                {"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}}},
        {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
             "whenUnsatisfiable": "ScheduleAnyway"}]}},
        {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 20,
                                               "minCandidateNodesAbsolute": 5}}])
    assert config.scoring_strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in config.scoring_strategy.resources] == [
        ("cpu", 3), ("memory", 1)]
    spread = config.pod_topology_spread
    assert spread.defaulting_type == "List"
    assert [(c.max_skew, c.topology_key) for c in spread.default_constraints] == [
        (2, "topology.kubernetes.io/zone")]
    assert (config.preemption.min_candidate_nodes_percentage,
            config.preemption.min_candidate_nodes_absolute) == (20, 5)


def test_inter_pod_affinity_args_and_arguments_not_served_here() -> None:
    config = profile(pluginConfig=[{"name": "InterPodAffinity", "args": {
        "hardPodAffinityWeight": 5, "ignorePreferredTermsOfExistingPods": True}}])
    assert (config.inter_pod_affinity.hard_pod_affinity_weight,
            config.inter_pod_affinity.ignore_preferred_terms_of_existing_pods) == (5, True)
    found = profile_errors(pluginConfig=[
        {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}},
        {"name": "NodeAffinity", "args": {"addedAffinity": {}}}])
    assert any(e.startswith("profiles[0].pluginConfig[0].args.hardPodAffinityWeight: must be an "
                            "integer between 0 and 100") for e in found), found
    assert "profiles[0].pluginConfig[1].args: Forbidden: NodeAffinity takes no arguments " \
           "here (got addedAffinity)" in found


def test_plugin_config_problems_name_the_kube_path() -> None:
    found = profile_errors(pluginConfig=[
        {"name": "NodeResourcesFit", "args": {"kind": "FitArgs", "scoringStrategy": {
            "type": "Cheapest"}}},
        {"name": "NodeResourcesFit", "args": {}},
        {"name": "Nope", "args": {}},
        {"name": "DefaultPreemption", "args": {"minCandidates": 3}}])
    assert 'profiles[0].pluginConfig[0].args.kind: Invalid value: "FitArgs": must be ' \
           '"NodeResourcesFitArgs"' in found
    assert any(e.startswith("profiles[0].pluginConfig[0].args.scoringStrategy.type: must be "
                            "one of LeastAllocated") for e in found)
    assert 'profiles[0].pluginConfig[1]: Duplicate value: "NodeResourcesFit"' in found
    assert any(e.startswith('profiles[0].pluginConfig[2].name: Invalid value: "Nope": no such '
                            "plugin") for e in found)
    assert any(e.startswith('profiles[0].pluginConfig[3].args.minCandidates: unknown field')
               for e in found)


def test_a_second_document_holds_this_schedulers_own_settings() -> None:
    config = kube({"fragments": {"fuel": 1234}, "bindConcurrency": 3})
    assert config.fragments.fuel == 1234 and config.bind_concurrency == 3
    found = errors({"schedulerName": "other", "plugins": {"filter": []}})
    assert "schedulerName: Forbidden: set by the KubeSchedulerConfiguration of this file; " \
           "remove it from the second document" in found
    assert any(e.startswith("plugins: Forbidden") for e in found)
    found = errors({"preemption": {"victims": "AllPods", "enabled": False}})
    assert "preemption.enabled: Forbidden: set by the KubeSchedulerConfiguration of this " \
           "file (DefaultPreemption in a profile's postFilter and pluginConfig)" in found
    config = kube({"preemption": {"victims": "AllPods"}}, profiles=[
        {"schedulerName": "a"}, {"schedulerName": "b", "plugins": {
            "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}])
    assert [(p.scheduler_name, p.preemption.enabled, p.preemption.victims)
            for p in config.profiles] == [("a", True, "AllPods"), ("b", False, "AllPods")]


def test_several_profiles_each_with_its_plugins_and_the_process_settings_shared() -> None:
    config = kube({"bindConcurrency": 7}, percentageOfNodesToScore=50, profiles=[
        {"schedulerName": "spread"},
        {"schedulerName": "pack", "percentageOfNodesToScore": 100,
         "plugins": {"postFilter": {"disabled": [{"name": "CloudBurst"}]},
                     "score": {"disabled": [{"name": "*"}],
                               "enabled": [{"name": "NodeResourcesFit"}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {
             "scoringStrategy": {"type": "MostAllocated"}}}]}])
    spread, pack = config.profiles
    assert config.scheduler_names == {"spread", "pack"}
    assert (spread.scheduler_name, spread.scoring_strategy.type,
            spread.percentage_of_nodes_to_score, spread.plugins.cloud_burst) == (
        "spread", "LeastAllocated", 50, True)
    assert (pack.scheduler_name, pack.scoring_strategy.type, pack.percentage_of_nodes_to_score,
            pack.plugins.cloud_burst, weights(pack)) == (
        "pack", "MostAllocated", 100, False, {"NodeResourcesFit": 1})
    # the process's settings are the first profile's: one lease, one bind pool
    assert pack.leader_election == spread.leader_election
    assert pack.bind_concurrency == spread.bind_concurrency == 7
    assert spread.leader_election.lease_name == "spread"
    found = errors(profiles=[{"schedulerName": "a"}, {"schedulerName": "b", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Cheapest"}}}]}])
    assert any(e.startswith("profiles[1].pluginConfig[0].args.scoringStrategy.type: ")
               for e in found)


def test_a_file_with_both_documents_loads(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(yaml.safe_dump_all([
        {**HEAD, "profiles": [{"schedulerName": "batch", "plugins": {
            "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]},
        {"logLevel": "debug"}]))
    config = load_config(str(path))
    assert (config.scheduler_name, config.log_level, config.preemption.enabled) == (
        "batch", "debug", False)
    path.write_text(yaml.safe_dump_all([HEAD, HEAD]))
    with pytest.raises(ConfigError, match="one KubeSchedulerConfiguration and one settings "
                                          "document at most, got 2 and 0"):
        load_config(str(path))


def test_the_readmes_example_loads_as_it_says(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index("```yaml\napiVersion: kubescheduler.config.k8s.io/v1")
    block = readme[start + len("```yaml\n"):readme.index("```", start + 7)]
    path = tmp_path / "scheduler.yaml"
    path.write_text(block)
    config = load_config(str(path))
    assert [(p.scheduler_name, p.preemption.enabled, p.preemption.order,
             p.scoring_strategy.type) for p in config.profiles] == [
        ("pyscheduler", True, "PreemptThenBurst", "LeastAllocated"),
        ("pyscheduler-pack", False, "PreemptThenBurst", "MostAllocated"),
        ("pyscheduler-cloud-first", True, "BurstThenPreempt", "LeastAllocated")]
    assert config.virtual_nodes.enabled and config.schedule_fragment is None


@pytest.mark.parametrize("settings", [
    {},
    {"schedulerName": "batch", "plugins": {"score": {"NodeResourcesFit": 3, "ImageLocality": 1},
                                           "filter": ["NodeName", "NodeAffinity"]},
     "scoringStrategy": {"type": "MostAllocated", "resources": [
         {"name": "cpu", "weight": 2}, {"name": "nvidia.com/gpu", "weight": 5}]},
     "preemption": {"order": "BurstThenPreempt", "victims": "AllPods",
                    "minCandidateNodesAbsolute": 7},
     "virtualNodes": {"enabled": True, "cloudUrl": "http://127.0.0.1:1",
                      "pools": [{"name": "aci", "platform": "azure"}]},
     "leaderElection": {"leaseDurationSeconds": 30, "renewDeadlineSeconds": 20,
                        "retryPeriodSeconds": 1.5, "leaseNamespace": "sched"},
     "percentageOfNodesToScore": 40, "podInitialBackoffSeconds": 2,
     "interPodAffinity": {"hardPodAffinityWeight": 3},
     "podMaxBackoffSeconds": 20, "scheduleFragment": None},
    {"preemption": {"enabled": False},
     "scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
         "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}},
     "podTopologySpread": {"defaultingType": "List", "defaultConstraints": [
         {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
          "whenUnsatisfiable": "DoNotSchedule"}]}},
])
def test_a_scheduler_yaml_converts_to_a_kube_scheduler_configuration_that_reads_back_equal(
        settings: dict[str, Any]) -> None:
    from pyscheduler.component_config import from_settings
    from pyscheduler.config import dump_config

    native = parse_config(settings, "s.yaml")
    documents = from_settings(dump_config(native))
    assert documents[0]["kind"] == "KubeSchedulerConfiguration"
    again = parse_documents(yaml.safe_load_all(yaml.safe_dump_all(documents)), "k.yaml")
    assert dataclasses.replace(again, leader_election=dataclasses.replace(
        again.leader_election, identity="")) == dataclasses.replace(
        native, leader_election=dataclasses.replace(native.leader_election, identity=""))


def test_what_a_kube_scheduler_configuration_cannot_say_is_refused() -> None:
    from pyscheduler.component_config import from_settings
    from pyscheduler.config import dump_config

    with pytest.raises(ValueError, match="podInitialBackoffSeconds: 1.5 is no whole number"):
        from_settings(dump_config(parse_config({"podInitialBackoffSeconds": 1.5}, "s")))


def test_config_check_and_convert_on_the_command_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from pyscheduler.cli import parse_command_line

    def main(argv: list[str]) -> int:  # the command without main()'s logging set-up
        args = parse_command_line(argv)
        result: int = args.func(args)
        return result

    native = tmp_path / "scheduler.yaml"
    native.write_text("schedulerName: batch\npreemption: {enabled: false}\n")
    assert main(["config", "convert", str(native)]) == 0
    converted = tmp_path / "kube.yaml"
    converted.write_text(capsys.readouterr().out)
    assert main(["config", "check", str(converted)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("profile batch: filter NodeUnschedulable, ") and \
        out.rstrip().endswith("postFilter none")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**HEAD, "percentageOfNodesToScore": 120}))
    assert main(["config", "check", str(bad)]) == 2
    assert "percentageOfNodesToScore: Invalid value: 120: not in valid range [0-100]" in \
        capsys.readouterr().err
