"""The scheduler's configuration: one validated, immutable value built once at start-up.

Design
------
* **One value, validated up front.** :func:`parse_config` turns a decoded YAML/JSON document into
  a :class:`SchedulerConfig` made of frozen, slotted dataclasses, or raises :class:`ConfigError`.
  Nothing downstream re-checks a setting, and nothing changes it while the scheduler runs (fail
  fast at start-up, never mid-cycle).
* **Errors name the field.** Every problem is reported with the field's YAML path, the rule it
  broke and the value that was given, e.g.
  ``scheduler.yaml: plugins.score.NodeAffinity.weight: must be an integer between 0 and 100,
  got "x"``. All problems in a document are collected and reported together, one per line, so a
  user fixes a file in one pass. Unknown fields are errors too (a typo must not silently fall
  back to a default), with the closest known name suggested.
* **Names.** The document uses camelCase like every Kubernetes configuration file; attributes are
  snake_case. :func:`dump_config` writes the camelCase form back, which is how ready-made
  configuration files (ConfigMaps, examples) are made, and
  ``parse_config(dump_config(c, include_identity=True))`` gives back ``c``.
* **The leader-election identity is per process.** It defaults to ``<hostname>_<uuid>``, computed
  when the configuration is loaded. :func:`dump_config` leaves it out unless asked, because a file
  shared by several replicas must not pin one identity: two schedulers with the same identity
  would both believe they hold the lease.
* **Defaults** follow kube-scheduler's default profile where one exists: the filter plugins of the
  default profile that this scheduler implements, the default score weights, the
  ``NodeResourcesFit`` scoring strategy (LeastAllocated, cpu 1 / memory 1), the queue back-off of
  1 s to 10 s, the 5 minute ``podMaxInUnschedulablePodsDuration`` and client-go's leader-election
  timings (15 s / 10 s / 2 s). ``percentageOfNodesToScore`` departs on purpose: kube defaults to
  its adaptive sampling (0); we default to 100 because our pipeline scores every node in one
  vectorized pass, so sampling buys little and costs placement quality.

Plugin lists replace, they do not merge: a ``plugins.filter`` list is the complete set of enabled
filter plugins, and a ``plugins.score`` map the complete set of score plugins with their weights.
A score weight is either an integer or a mapping ``{weight: N}`` (the form :func:`dump_config`
writes, which leaves room for per-plugin arguments later).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import yaml
from yaml.constructor import ConstructorError

from pyscheduler import component_config
from pyscheduler.api import names
from pyscheduler.api.problems import InputError
from pyscheduler.api.validation import is_qualified_name, validate_labels
from pyscheduler.settings import (
    ASSUMED_POD_TTL_SECONDS,
    BIND_CONCURRENCY,
    BIND_TIMEOUT_SECONDS,
    DEFAULT_FILTER_PLUGINS,
    DEFAULT_LEASE_NAMESPACE,
    DEFAULT_METRICS_ADDRESS,
    DEFAULT_SCHEDULER_NAME,
    DEFAULT_SCHEDULE_FRAGMENT,
    DEFAULT_SCORE_WEIGHTS,
    DefaultSpreadConstraint,
    FILTER_PLUGINS,
    FragmentsConfig,
    InterPodAffinityConfig,
    LEADER_ELECTION_JITTER,
    LOG_LEVELS,
    LeaderElectionConfig,
    MAX_BIND_CONCURRENCY,
    MAX_CALL_TIMEOUT_MILLISECONDS,
    MAX_RESOURCE_WEIGHT,
    MAX_SCORE_WEIGHT,
    MAX_SHAPE_SCORE,
    MAX_SHAPE_UTILIZATION,
    PluginsConfig,
    PodTopologySpreadConfig,
    PREEMPTION_ORDERS,
    PREEMPTION_VICTIMS,
    PROFILE_FIELDS,
    PreemptionConfig,
    RebalancerConfig,
    ResourceWeight,
    SCORE_PLUGINS,
    SCORING_STRATEGY_TYPES,
    SPREAD_DEFAULTING_TYPES,
    SchedulerConfig,
    ScorePlugin,
    ScoringStrategy,
    SecretRef,
    StorageSettings,
    UtilizationShapePoint,
    VirtualNodesConfig,
    VirtualPool,
    default_identity,
    is_int,
    render_value,
)

__all__ = [
    "RESERVED_POOL_LABELS",
    "RUNTIMES",
    "ConfigError",
    "ConfigProblem",
    "dump_config",
    "load_config",
    "parse_config",
    "parse_host_port",
]
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE: Final = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL)
_HOSTNAME_RE: Final = re.compile(
    r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?")
# A Kubernetes resource name: an optional DNS-subdomain prefix and a qualified name.
_RESOURCE_NAME_RE: Final = re.compile(
    rf"({_DNS1123_LABEL}(\.{_DNS1123_LABEL})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


# --------------------------------------------------------------------------------------------
# Errors


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem: the YAML path of the field (empty for the document itself) and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(InputError):
    """The configuration is unreadable or invalid; the message names every offending field.

    ``source`` names the document (usually its file path); ``errors`` lists each problem, and
    ``problems`` the same as lines (``<source>: <field>: <what is wrong>``).
    """

    separator = "\n"

    def __init__(self, source: str, errors: Sequence[ConfigProblem]) -> None:
        self.source = source
        self.errors: tuple[ConfigProblem, ...] = tuple(errors)
        super().__init__(f"{source}: {error}" for error in self.errors)


# --------------------------------------------------------------------------------------------
# Loading and parsing


class _StrictSafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error.

    Plain ``safe_load`` keeps the last of two equal keys and silently drops the first setting.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | None) -> SchedulerConfig:
    """Read and validate the YAML file at ``path``; ``None`` gives the defaults.

    Raises :class:`ConfigError` when the file cannot be read, is not YAML, or is invalid.
    """
    if path is None:
        return parse_config(None, "<defaults>")
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [ConfigProblem("", f"cannot read the file: {exc}")]) from exc
    try:
        documents = list(yaml.load_all(text, Loader=_StrictSafeLoader))  # noqa: S506
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = exc.problem or "unreadable"
        if exc.context:
            what += f" ({exc.context})"
        raise ConfigError(path, [ConfigProblem("", f"invalid YAML{where}: {what}")]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(path, [ConfigProblem("", f"invalid YAML: {exc}")]) from exc
    return parse_documents(documents, path)


def parse_documents(documents: Sequence[object], source: str) -> SchedulerConfig:
    """The configuration from a file's YAML documents: one settings document
    (``scheduler.yaml``), or kube-scheduler's ``KubeSchedulerConfiguration`` with at most one
    settings document beside it for what this scheduler adds
    (:mod:`pyscheduler.component_config`)."""
    documents = [d for d in documents if d is not None]
    kube = [d for d in documents if component_config.is_kube_scheduler_configuration(d)]
    settings = [d for d in documents if not component_config.is_kube_scheduler_configuration(d)]
    if len(kube) > 1 or len(settings) > 1:
        raise ConfigError(source, [ConfigProblem("", (
            f"one {component_config.KIND} and one settings document at most, got "
            f"{len(kube)} and {len(settings)}"))])
    if not kube:
        return parse_config(settings[0] if settings else None, source)
    extra = settings[0] if settings else None
    if extra is not None and not isinstance(extra, Mapping):
        raise ConfigError(source, [ConfigProblem("", (
            f"the settings document must be a mapping, got {render_value(extra)}"))])
    translated = component_config.translate(cast("Mapping[str, Any]", kube[0]), extra)
    problems = [ConfigProblem(path, message) for path, message in translated.problems]
    profiles: list[SchedulerConfig] = []
    for document, paths in zip(translated.profiles, translated.paths):
        bursting = bool(document.pop(component_config.BURSTING_KEY, True))
        parser = _Parser()
        config = parser.config(document)
        problems += [ConfigProblem(component_config.kube_path(paths, e.path), e.message)
                     for e in parser.errors]
        profiles.append(dataclasses.replace(config, plugins=dataclasses.replace(
            config.plugins, cloud_burst=bursting)))
    problems = list(dict.fromkeys(problems))  # a shared field's problem once, not per profile
    if problems or not profiles:
        raise ConfigError(source, problems or [ConfigProblem("profiles", "Required value")])
    base = profiles[0]
    return dataclasses.replace(base, more_profiles=tuple(
        dataclasses.replace(base, **{name: getattr(p, name) for name in PROFILE_FIELDS})
        for p in profiles[1:]))


def parse_config(data: object, source: str) -> SchedulerConfig:
    """Validate a decoded document (``None`` or a mapping) and build the configuration.

    ``source`` names the document in error messages. Raises :class:`ConfigError` listing every
    problem found.
    """
    parser = _Parser()
    config = parser.config(data)
    if parser.errors:
        raise ConfigError(source, parser.errors)
    return config


def parse_host_port(address: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` for IPv6) and check both parts; raise ValueError if bad.

    The host may be an IP address, a DNS host name, or empty (every interface); the port is
    0–65535, 0 meaning any free port. The error message ends with ``got "<address>"``.
    """
    problem = _host_port_problem(address)
    if problem:
        raise ValueError(f"{problem}, got {render_value(address)}")
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _host_port_problem(address: str) -> str | None:
    if address.startswith("["):
        close = address.find("]")
        if close < 0 or address[close + 1:close + 2] != ":":
            return "must be host:port, with an IPv6 host in brackets ([::1]:10259)"
        host, port = address[1:close], address[close + 2:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "the host in brackets must be an IPv6 address"
    else:
        host, sep, port = address.rpartition(":")
        if not sep:
            return "must be host:port (e.g. 127.0.0.1:10259)"
        if ":" in host:
            return "an IPv6 host must be in brackets ([::1]:10259)"
        if host and not _is_ip(host) and not (
                len(host) <= 253 and _HOSTNAME_RE.fullmatch(host)
                and all(len(label) <= 63 for label in host.rstrip(".").split("."))):
            return "the host must be an IP address or a host name"
    if not port.isascii() or not port.isdigit() or int(port) > 65535:
        return "the port must be a number between 0 and 65535"
    return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _suggest(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean "X"?)`` for the closest of ``choices`` to ``word``, or "" if none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {choice.lower(): choice for choice in choices}
        close = [lowered[word.lower()]] if word.lower() in lowered else []
    return f' (did you mean "{close[0]}"?)' if close else ""


_TOP_LEVEL_FIELDS: Final = (
    "schedulerName", "plugins", "scoringStrategy", "percentageOfNodesToScore", "leaderElection",
    "metricsAddress", "bindConcurrency", "bindTimeoutSeconds", "podInitialBackoffSeconds",
    "podMaxBackoffSeconds", "podMaxInUnschedulablePodsSeconds", "assumedPodTTLSeconds",
    "logLevel", "seed", "scheduleFragment", "fragments", "storage", "virtualNodes",
    "rebalancer", "preemption", "podTopologySpread", "interPodAffinity",
)
_POD_TOPOLOGY_SPREAD_FIELDS: Final = ("defaultingType", "defaultConstraints")
_INTER_POD_AFFINITY_FIELDS: Final = ("hardPodAffinityWeight",
                                     "ignorePreferredTermsOfExistingPods")
_DEFAULT_CONSTRAINT_FIELDS: Final = ("maxSkew", "topologyKey", "whenUnsatisfiable",
                                     "labelSelector", "matchLabelKeys", "minDomains",
                                     "nodeAffinityPolicy", "nodeTaintsPolicy")
_WHEN_UNSATISFIABLE: Final = ("DoNotSchedule", "ScheduleAnyway")
_NODE_INCLUSION_POLICIES: Final = ("Honor", "Ignore")
_PREEMPTION_FIELDS: Final = ("enabled", "order", "victims", "minCandidateNodesPercentage",
                             "minCandidateNodesAbsolute")
_REBALANCER_FIELDS: Final = ("enabled", "intervalSeconds", "minCloudSeconds",
                             "maxMovesPerCycle", "maxMovesPerNamespace", "readyTimeoutSeconds",
                             "dryRun")
_VIRTUAL_FIELDS: Final = ("enabled", "cloudUrl", "cloudToken", "cloudTimeoutSeconds", "pools",
                          "heartbeatSeconds", "refreshSeconds", "notReadyAfterSeconds",
                          "orphanGraceSeconds", "reconcileSeconds")
_POOL_FIELDS: Final = ("name", "platform", "maxPods", "labels")
#: Labels every virtual node carries, set by pyscheduler: a pool's ``labels`` may not set them.
RESERVED_POOL_LABELS: Final = frozenset({
    names.TYPE_LABEL, names.ROLE_LABEL, "kubernetes.io/hostname", names.PLATFORM_LABEL,
    names.POOL_LABEL, "kubernetes.io/os", "beta.kubernetes.io/os",
    "node.kubernetes.io/exclude-from-external-load-balancers",
    "alpha.service-controller.exclude-balancer"})
#: kube-scheduler's cap on a permit wait.
MAX_PERMIT_WAIT_SECONDS: Final = 900.0
_FRAGMENTS_FIELDS: Final = ("runtime", "fuel", "timeoutMilliseconds", "memoryMiB",
                             "maxTimeoutMilliseconds", "logLinesPerSecond", "logBurst",
                             "quarantineAfterFailures", "quarantineSeconds", "callThreadNice",
                             "inlineCallMilliseconds", "maxPermitWaitSeconds")
_STORAGE_FIELDS: Final = ("endpoint", "accessKey", "secretKey", "secure", "region",
                          "credentialsSecret", "allowedFileDirs", "maxBytes", "timeoutSeconds",
                          "allowedHttpHosts", "allowPrivateAddresses")
_SECRET_REF_FIELDS: Final = ("namespace", "name")
# An allowed web server: a host name, an IPv4 address or a bracketed IPv6 one, maybe a port.
_HTTP_HOST: Final = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)"
                               r"(:[0-9]{1,5})?$")
_SCHEDULE_FRAGMENT: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?:v\d+\.\d+\.\d+$")
RUNTIMES: Final = ("wasmtime", "wasmer")
_PLUGINS_FIELDS: Final = ("filter", "score")
_SCORE_PLUGIN_FIELDS: Final = ("weight",)
_SCORING_STRATEGY_FIELDS: Final = ("type", "resources", "requestedToCapacityRatio")
_REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
_RATIO_FIELDS: Final = ("shape",)
_SHAPE_POINT_FIELDS: Final = ("utilization", "score")
_RESOURCE_FIELDS: Final = ("name", "weight")
_LEADER_ELECTION_FIELDS: Final = (
    "enabled", "leaseName", "leaseNamespace", "leaseDurationSeconds", "renewDeadlineSeconds",
    "retryPeriodSeconds", "identity",
)

_MISSING: Final = object()


class _Parser:
    """Walks one document, collecting every problem instead of stopping at the first.

    Each reader returns the parsed value, or the default when the field is absent or invalid (an
    error is recorded then), so later checks still run on a well-typed value. Rules that relate
    two fields run only when both fields were valid, so one mistake gives one message.
    """

    def __init__(self) -> None:
        self.errors: list[ConfigProblem] = []

    def fail(self, path: str, message: str) -> None:
        self.errors.append(ConfigProblem(path, message))

    def mapping(self, value: object, path: str, known: Sequence[str]) -> Mapping[str, object]:
        if not isinstance(value, Mapping):
            self.fail(path, f"must be a mapping, got {render_value(value)}")
            return {}
        result: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.fail(_join(path, key), f"field names must be strings, got {render_value(key)}")
            elif key not in known:
                hint = _suggest(key, known) or f"; known fields: {', '.join(known)}"
                self.fail(_join(path, key), "unknown field" + hint)
            else:
                result[key] = item
        return result

    # ---- scalar readers -------------------------------------------------------------------

    def integer(self, section: Mapping[str, object], key: str, path: str, default: int,
                low: int, high: int) -> int:
        value = section.get(key, _MISSING)
        if value is _MISSING:
            return default
        if is_int(value) and low <= value <= high:
            return value
        self.fail(_join(path, key), f"must be an integer between {low} and {high}, "
                                    f"got {render_value(value)}")
        return default

    def number(self, section: Mapping[str, object], key: str, path: str, default: float,
               low: float, high: float) -> float:
        value = section.get(key, _MISSING)
        if value is _MISSING:
            return default
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value) and low <= value <= high:
            return float(value)
        self.fail(_join(path, key), f"must be a number between {low:g} and {high:g}, "
                                    f"got {render_value(value)}")
        return default

    def seconds(self, section: Mapping[str, object], key: str, path: str,
                default: float) -> tuple[float, bool]:
        """A positive number of seconds, and whether the value given (or the default) is valid."""
        value = section.get(key, _MISSING)
        if value is _MISSING:
            return default, True
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value) or value <= 0):
            self.fail(_join(path, key), f"must be a number of seconds greater than 0, "
                                        f"got {render_value(value)}")
            return default, False
        return float(value), True

    def boolean(self, section: Mapping[str, object], key: str, path: str, default: bool) -> bool:
        value = section.get(key, _MISSING)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.fail(_join(path, key), f"must be true or false, got {render_value(value)}")
            return default
        return value

    def choice(self, section: Mapping[str, object], key: str, path: str, default: str,
               choices: Sequence[str]) -> str:
        value = section.get(key, _MISSING)
        if value is _MISSING:
            return default
        if not isinstance(value, str) or value not in choices:
            hint = _suggest(value, choices) if isinstance(value, str) else ""
            self.fail(_join(path, key), f"must be one of {', '.join(choices)}, "
                                        f"got {render_value(value)}{hint}")
            return default
        return value

    def dns_name(self, section: Mapping[str, object], key: str, path: str, default: str,
                 *, label: bool = False) -> str:
        value = section.get(key, _MISSING)
        if value is _MISSING:
            return default
        pattern, limit = (_DNS1123_LABEL_RE, 63) if label else (_DNS1123_SUBDOMAIN_RE, 253)
        if not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value):
            what = ("an RFC 1123 label (lowercase letters, digits and '-', starting and ending "
                    f"with a letter or digit, at most {limit} characters)") if label else (
                    "an RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
                    f"ending with a letter or digit, at most {limit} characters)")
            self.fail(_join(path, key), f"must be {what}, got {render_value(value)}")
            return default
        return value

    # ---- sections -------------------------------------------------------------------------

    def config(self, data: object) -> SchedulerConfig:
        top = {} if data is None else self.mapping(data, "", _TOP_LEVEL_FIELDS)
        name = self.dns_name(top, "schedulerName", "", DEFAULT_SCHEDULER_NAME)
        plugins = self.plugins(top.get("plugins", _MISSING))
        strategy = self.scoring_strategy(top.get("scoringStrategy", _MISSING))
        percentage = self.integer(top, "percentageOfNodesToScore", "", 100, 0, 100)
        election = self.leader_election(top.get("leaderElection", _MISSING), name)

        address = DEFAULT_METRICS_ADDRESS
        given = top.get("metricsAddress", _MISSING)
        if given is not _MISSING and not isinstance(given, str):
            self.fail("metricsAddress", f"must be a host:port string, got {render_value(given)}")
        elif isinstance(given, str):
            try:
                parse_host_port(given)
            except ValueError as exc:
                self.fail("metricsAddress", str(exc))
            else:
                address = given

        concurrency = self.integer(top, "bindConcurrency", "", BIND_CONCURRENCY, 1,
                                   MAX_BIND_CONCURRENCY)
        bind_timeout, _ = self.seconds(top, "bindTimeoutSeconds", "", BIND_TIMEOUT_SECONDS)
        initial, initial_ok = self.seconds(top, "podInitialBackoffSeconds", "", 1.0)
        maximum, maximum_ok = self.seconds(top, "podMaxBackoffSeconds", "", 10.0)
        # kube-scheduler's ValidateKubeSchedulerConfiguration: the back-off may only grow.
        if initial_ok and maximum_ok and maximum < initial:
            self.fail("podMaxBackoffSeconds",
                      f"must be greater than or equal to podInitialBackoffSeconds ({initial:g}), "
                      f"got {maximum:g}")
        unschedulable, _ = self.seconds(top, "podMaxInUnschedulablePodsSeconds", "", 300.0)
        ttl, _ = self.seconds(top, "assumedPodTTLSeconds", "", ASSUMED_POD_TTL_SECONDS)
        level = self.choice(top, "logLevel", "", "info", LOG_LEVELS)

        seed: int | None = None
        given = top.get("seed")
        if is_int(given) and given >= 0:
            seed = given
        elif given is not None:
            self.fail("seed", f"must be a non-negative integer or null, got {render_value(given)}")

        fragment: str | None = DEFAULT_SCHEDULE_FRAGMENT
        given = top.get("scheduleFragment", _MISSING)
        if given is None or given == "":
            fragment = None
        elif given is not _MISSING:
            if isinstance(given, str) and _SCHEDULE_FRAGMENT.match(given):
                fragment = given
            else:
                self.fail("scheduleFragment", f"must be name:vX.Y.Z (e.g. default:v1.0.0) or "
                                              f"null, got {render_value(given)}")
        fragments = self.fragments(top.get("fragments", _MISSING))
        storage = self.storage(top.get("storage", _MISSING))
        virtual = self.virtual_nodes(top.get("virtualNodes", _MISSING))
        rebalancer = self.rebalancer(top.get("rebalancer", _MISSING))
        preemption = self.preemption(top.get("preemption", _MISSING))
        spread = self.pod_topology_spread(top.get("podTopologySpread", _MISSING))
        affinity = self.inter_pod_affinity(top.get("interPodAffinity", _MISSING))

        return SchedulerConfig(
            schedule_fragment=fragment, fragments=fragments, storage=storage,
            virtual_nodes=virtual, rebalancer=rebalancer, preemption=preemption,
            pod_topology_spread=spread, inter_pod_affinity=affinity,
            scheduler_name=name, plugins=plugins, scoring_strategy=strategy,
            percentage_of_nodes_to_score=percentage, leader_election=election,
            metrics_address=address, bind_concurrency=concurrency,
            bind_timeout_seconds=bind_timeout, pod_initial_backoff_seconds=initial,
            pod_max_backoff_seconds=maximum, pod_max_in_unschedulable_pods_seconds=unschedulable,
            assumed_pod_ttl_seconds=ttl, log_level=level, seed=seed,
        )

    def fragments(self, value: object) -> FragmentsConfig:
        path = "fragments"
        section = {} if value is _MISSING else self.mapping(value, path, _FRAGMENTS_FIELDS)
        default = FragmentsConfig()
        runtime = self.choice(section, "runtime", path, default.runtime, RUNTIMES)
        fuel = self.integer(section, "fuel", path, default.fuel, 1, 2**62)
        limit_ms = self.integer(section, "maxTimeoutMilliseconds", path,
                                MAX_CALL_TIMEOUT_MILLISECONDS, 1, MAX_CALL_TIMEOUT_MILLISECONDS)
        timeout_ms = self.integer(section, "timeoutMilliseconds", path,
                                  min(int(default.timeout_seconds * 1000), limit_ms), 1,
                                  MAX_CALL_TIMEOUT_MILLISECONDS)
        if timeout_ms > limit_ms:
            self.fail(_join(path, "timeoutMilliseconds"),
                      f"must not exceed fragments.maxTimeoutMilliseconds ({limit_ms}), "
                      f"got {timeout_ms}")
        memory = self.integer(section, "memoryMiB", path, default.memory_mib, 1, 4096)
        rate = self.number(section, "logLinesPerSecond", path, default.log_lines_per_second,
                           0.01, 100_000)
        burst = self.integer(section, "logBurst", path, default.log_burst, 1, 1_000_000)
        failures = self.integer(section, "quarantineAfterFailures", path,
                                default.quarantine_after_failures, 1, 1_000_000)
        quarantine, _ = self.seconds(section, "quarantineSeconds", path,
                                     default.quarantine_seconds)
        nice = self.integer(section, "callThreadNice", path, default.call_thread_nice, 0, 19)
        inline_ms = self.integer(section, "inlineCallMilliseconds", path,
                                 round(default.inline_call_seconds * 1000), 0, 50)
        permit_wait, _ = self.seconds(section, "maxPermitWaitSeconds", path,
                                      default.max_permit_wait_seconds)
        if permit_wait > MAX_PERMIT_WAIT_SECONDS:
            self.fail(_join(path, "maxPermitWaitSeconds"),
                      f"must be at most {MAX_PERMIT_WAIT_SECONDS:g} (15 minutes, as in "
                      f"kube-scheduler), got {permit_wait:g}")
        return FragmentsConfig(runtime=runtime, fuel=fuel, timeout_seconds=timeout_ms / 1000,
                               memory_mib=memory, max_timeout_seconds=limit_ms / 1000,
                               log_lines_per_second=rate, log_burst=burst,
                               quarantine_after_failures=failures,
                               quarantine_seconds=quarantine, call_thread_nice=nice,
                               inline_call_seconds=inline_ms / 1000,
                               max_permit_wait_seconds=permit_wait)

    def storage(self, value: object) -> StorageSettings:
        path = "storage"
        section = {} if value is _MISSING else self.mapping(value, path, _STORAGE_FIELDS)
        default = StorageSettings()
        texts: dict[str, str | None] = {}
        for key in ("endpoint", "accessKey", "secretKey", "region"):
            given = section.get(key)
            if given is not None and not (isinstance(given, str) and given):
                self.fail(_join(path, key), f"must be a non-empty string, got {render_value(given)}")
                given = None
            texts[key] = given
        secret: SecretRef | None = None
        given = section.get("credentialsSecret")
        if given is not None:
            ref = self.mapping(given, _join(path, "credentialsSecret"), _SECRET_REF_FIELDS)
            ref_path = _join(path, "credentialsSecret")
            ns = self.dns_name(ref, "namespace", ref_path, "kube-system", label=True)
            secret_name = self.dns_name(ref, "name", ref_path, "")
            if not secret_name:
                self.fail(_join(ref_path, "name"), "is required")
            secret = SecretRef(ns, secret_name)
        dirs: tuple[str, ...] = ()
        given = section.get("allowedFileDirs")
        if given is not None:
            if not isinstance(given, list):
                self.fail(_join(path, "allowedFileDirs"),
                          f"must be a list of absolute directory paths, got {render_value(given)}")
            else:
                for i, d in enumerate(given):
                    if not (isinstance(d, str) and d.startswith("/")):
                        self.fail(f"{path}.allowedFileDirs[{i}]",
                                  f"must be an absolute directory path, got {render_value(d)}")
                dirs = tuple(d for d in given if isinstance(d, str) and d.startswith("/"))
        max_bytes = self.integer(section, "maxBytes", path, default.max_bytes, 1, 2**31)
        timeout, _ = self.seconds(section, "timeoutSeconds", path, default.timeout_seconds)
        hosts: list[str] = []
        given = section.get("allowedHttpHosts")
        if given is not None and not isinstance(given, list):
            self.fail(_join(path, "allowedHttpHosts"),
                      f"must be a list of host or host:port strings, got {render_value(given)}")
        elif given is not None:
            for i, host in enumerate(given):
                if not (isinstance(host, str) and _HTTP_HOST.fullmatch(host)):
                    self.fail(f"{path}.allowedHttpHosts[{i}]",
                              f"must be a host name or address, optionally with :port (no "
                              f"scheme or path), got {render_value(host)}")
                else:
                    hosts.append(host)
        return StorageSettings(
            endpoint=texts["endpoint"], access_key=texts["accessKey"],
            secret_key=texts["secretKey"], secure=self.boolean(section, "secure", path, False),
            region=texts["region"], credentials_secret=secret, allowed_file_dirs=dirs,
            max_bytes=max_bytes, timeout_seconds=timeout, allowed_http_hosts=tuple(hosts),
            allow_private_addresses=self.boolean(section, "allowPrivateAddresses", path, False))

    def virtual_nodes(self, value: object) -> VirtualNodesConfig:
        path = "virtualNodes"
        section = {} if value is _MISSING else self.mapping(value, path, _VIRTUAL_FIELDS)
        d = VirtualNodesConfig()
        enabled = self.boolean(section, "enabled", path, False)
        url = section.get("cloudUrl", "")
        if not isinstance(url, str) or (url and not url.startswith(("http://", "https://"))):
            self.fail(_join(path, "cloudUrl"), f"must be an http(s) URL, got {render_value(url)}")
            url = ""
        if enabled and not url:
            self.fail(_join(path, "cloudUrl"), "is required when virtualNodes.enabled is true")
        token = section.get("cloudToken")
        if token is not None and not isinstance(token, str):
            self.fail(_join(path, "cloudToken"), f"must be a string, got {render_value(token)}")
            token = None
        timeout, _ = self.seconds(section, "cloudTimeoutSeconds", path, d.cloud_timeout_seconds)
        pools: list[VirtualPool] = []
        given = section.get("pools", [])
        if not isinstance(given, list):
            self.fail(_join(path, "pools"), f"must be a list, got {render_value(given)}")
            given = []
        seen: set[str] = set()
        for i, item in enumerate(given):
            ppath = f"{path}.pools[{i}]"
            entry = self.mapping(item, ppath, _POOL_FIELDS)
            name = self.dns_name(entry, "name", ppath, "", label=True)
            platform = entry.get("platform")
            if not name:
                self.fail(_join(ppath, "name"), "is required")
            elif name in seen:
                self.fail(_join(ppath, "name"), f'duplicate pool "{name}"')
            seen.add(name)
            if not isinstance(platform, str) or not platform:
                self.fail(_join(ppath, "platform"),
                          f"must be a non-empty string, got {render_value(platform)}")
                platform = ""
            max_pods = entry.get("maxPods")
            if max_pods is not None and not (is_int(max_pods) and max_pods >= 0):
                self.fail(_join(ppath, "maxPods"),
                          f"must be a non-negative integer or null, got {render_value(max_pods)}")
                max_pods = None
            labels = entry.get("labels") or {}
            problems = validate_labels(labels, _join(ppath, "labels"))
            for problem in problems:
                self.fail(problem.field, problem.body)
            for key in sorted(set(labels) & RESERVED_POOL_LABELS if isinstance(
                    labels, Mapping) else ()):
                self.fail(_join(_join(ppath, "labels"), key),
                          "is set by pyscheduler on every virtual node and cannot be given")
            if problems or not isinstance(labels, Mapping):
                labels = {}
            pools.append(VirtualPool(name, str(platform), max_pods, tuple(sorted(
                (str(k), str(v)) for k, v in labels.items()
                if k not in RESERVED_POOL_LABELS))))
        if enabled and not pools:
            self.fail(_join(path, "pools"), "needs at least one pool when enabled")
        return VirtualNodesConfig(
            enabled=enabled, cloud_url=str(url), cloud_token=token,
            cloud_timeout_seconds=timeout, pools=tuple(pools),
            heartbeat_seconds=self.seconds(section, "heartbeatSeconds", path,
                                           d.heartbeat_seconds)[0],
            refresh_seconds=self.seconds(section, "refreshSeconds", path, d.refresh_seconds)[0],
            not_ready_after_seconds=self.seconds(section, "notReadyAfterSeconds", path,
                                                 d.not_ready_after_seconds)[0],
            orphan_grace_seconds=self.seconds(section, "orphanGraceSeconds", path,
                                              d.orphan_grace_seconds)[0],
            reconcile_seconds=self.seconds(section, "reconcileSeconds", path,
                                           d.reconcile_seconds)[0])

    def rebalancer(self, value: object) -> RebalancerConfig:
        path = "rebalancer"
        section = {} if value is _MISSING else self.mapping(value, path, _REBALANCER_FIELDS)
        d = RebalancerConfig()
        return RebalancerConfig(
            enabled=self.boolean(section, "enabled", path, d.enabled),
            interval_seconds=self.seconds(section, "intervalSeconds", path,
                                          d.interval_seconds)[0],
            min_cloud_seconds=self.seconds(section, "minCloudSeconds", path,
                                           d.min_cloud_seconds)[0],
            max_moves_per_cycle=self.integer(section, "maxMovesPerCycle", path,
                                             d.max_moves_per_cycle, 1, 10_000),
            max_moves_per_namespace=self.integer(section, "maxMovesPerNamespace", path,
                                                 d.max_moves_per_namespace, 1, 10_000),
            ready_timeout_seconds=self.seconds(section, "readyTimeoutSeconds", path,
                                               d.ready_timeout_seconds)[0],
            dry_run=self.boolean(section, "dryRun", path, d.dry_run))

    def preemption(self, value: object) -> PreemptionConfig:
        path = "preemption"
        section = {} if value is _MISSING else self.mapping(value, path, _PREEMPTION_FIELDS)
        d = PreemptionConfig()
        percentage = self.integer(section, "minCandidateNodesPercentage", path,
                                  d.min_candidate_nodes_percentage, 0, 100)
        absolute = self.integer(section, "minCandidateNodesAbsolute", path,
                                d.min_candidate_nodes_absolute, 0, 1_000_000)
        if percentage == 0 and absolute == 0:
            # kube's ValidateDefaultPreemptionArgs: a dry run must look for some candidate.
            self.fail(_join(path, "minCandidateNodesAbsolute"),
                      "cannot be zero at the same time as minCandidateNodesPercentage")
        return PreemptionConfig(
            enabled=self.boolean(section, "enabled", path, d.enabled),
            order=self.choice(section, "order", path, d.order, PREEMPTION_ORDERS),
            victims=self.choice(section, "victims", path, d.victims, PREEMPTION_VICTIMS),
            min_candidate_nodes_percentage=percentage, min_candidate_nodes_absolute=absolute)

    def inter_pod_affinity(self, value: object) -> InterPodAffinityConfig:
        """kube's InterPodAffinityArgs, with ``ValidateInterPodAffinityArgs``'s range."""
        path = "interPodAffinity"
        section = {} if value is _MISSING else self.mapping(value, path,
                                                             _INTER_POD_AFFINITY_FIELDS)
        default = InterPodAffinityConfig()
        return InterPodAffinityConfig(
            hard_pod_affinity_weight=self.integer(section, "hardPodAffinityWeight", path,
                                                  default.hard_pod_affinity_weight, 0, 100),
            ignore_preferred_terms_of_existing_pods=self.boolean(
                section, "ignorePreferredTermsOfExistingPods", path,
                default.ignore_preferred_terms_of_existing_pods))

    def pod_topology_spread(self, value: object) -> PodTopologySpreadConfig:
        """kube's PodTopologySpreadArgs, with the rules of ``ValidatePodTopologySpreadArgs``."""
        path = "podTopologySpread"
        section = {} if value is _MISSING else self.mapping(value, path,
                                                             _POD_TOPOLOGY_SPREAD_FIELDS)
        # kube's v1 defaulting: System when unset, even with defaultConstraints given.
        kind = self.choice(section, "defaultingType", path, "System", SPREAD_DEFAULTING_TYPES)
        list_path = _join(path, "defaultConstraints")
        given = section.get("defaultConstraints")
        if given is None:
            given = []
        elif not isinstance(given, list):
            self.fail(list_path, f"must be a list of topology spread constraints, "
                                 f"got {render_value(given)}")
            given = []
        if kind == "System" and given:
            self.fail(_join(path, "defaultingType"),
                      'Invalid value: "System": when .defaultConstraints are not empty '
                      "(use List to give your own)")
        constraints: list[DefaultSpreadConstraint] = []
        seen: dict[tuple[str, str], int] = {}
        for index, item in enumerate(given):
            where = f"{list_path}[{index}]"
            parsed = self.default_constraint(item, where)
            key, when = (item.get("topologyKey"), item.get("whenUnsatisfiable")) \
                if isinstance(item, Mapping) else (None, None)
            if isinstance(key, str) and isinstance(when, str) and key and when:
                pair = (key, when)
                if pair in seen:
                    # kube's validateConstraintNotRepeat.
                    self.fail(where, f"Duplicate value: {{{pair[0]}, {pair[1]}}} (the same "
                                     f"topologyKey and whenUnsatisfiable as "
                                     f"defaultConstraints[{seen[pair]}])")
                    continue
                seen[pair] = index
            if parsed is not None:
                constraints.append(parsed)
        return PodTopologySpreadConfig(defaulting_type=kind,
                                       default_constraints=tuple(constraints))

    def default_constraint(self, value: object, where: str) -> DefaultSpreadConstraint | None:
        """One of ``podTopologySpread.defaultConstraints``; None when it is invalid."""
        entry = self.mapping(value, where, _DEFAULT_CONSTRAINT_FIELDS)
        if not isinstance(value, Mapping):
            return None
        before = len(self.errors)
        skew = entry.get("maxSkew", _MISSING)
        if skew is _MISSING:
            self.fail(_join(where, "maxSkew"), "is required")
        elif not (is_int(skew) and skew > 0):
            self.fail(_join(where, "maxSkew"),
                      f"not in valid range (0, inf), got {render_value(skew)}")
        key = entry.get("topologyKey", "")
        if not isinstance(key, str):
            self.fail(_join(where, "topologyKey"), f"must be a label name, "
                                                   f"got {render_value(key)}")
        elif not key:
            self.fail(_join(where, "topologyKey"), "is required: can not be empty")
        else:
            for problem in is_qualified_name(key):
                self.fail(_join(where, "topologyKey"), f"{problem}, got {render_value(key)}")
        when = entry.get("whenUnsatisfiable", "")
        if when in ("", None):
            self.fail(_join(where, "whenUnsatisfiable"), "is required: can not be empty")
        else:
            when = self.choice(entry, "whenUnsatisfiable", where, "", _WHEN_UNSATISFIABLE)
        if "labelSelector" in entry:
            self.fail(_join(where, "labelSelector"),
                      "Forbidden: constraint must not define a selector, as they deduced for "
                      "each pod (from the Services, ReplicationControllers, ReplicaSets and "
                      "StatefulSets that select it)")
        if "matchLabelKeys" in entry:
            # kube accepts the field but then replaces the selector it narrows: it does nothing.
            self.fail(_join(where, "matchLabelKeys"),
                      "has no effect in a default constraint (its selector is deduced for each "
                      "pod); remove it")
        min_domains = entry.get("minDomains")
        if min_domains is not None:
            if not (is_int(min_domains) and min_domains > 0):
                self.fail(_join(where, "minDomains"), f"must be greater than 0, "
                                                      f"got {render_value(min_domains)}")
            elif when == "ScheduleAnyway":
                # The Pod API's rule (validateMinDomains): minDomains only means something to
                # the filter.
                self.fail(_join(where, "minDomains"),
                          "can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                          f"not {when}")
        affinity = entry.get("nodeAffinityPolicy")
        if affinity is not None:
            affinity = self.choice(entry, "nodeAffinityPolicy", where, "",
                                   _NODE_INCLUSION_POLICIES)
        taints = entry.get("nodeTaintsPolicy")
        if taints is not None:
            taints = self.choice(entry, "nodeTaintsPolicy", where, "", _NODE_INCLUSION_POLICIES)
        if len(self.errors) != before:
            return None
        assert is_int(skew) and isinstance(key, str) and isinstance(when, str)
        return DefaultSpreadConstraint(
            max_skew=skew, topology_key=key, when_unsatisfiable=when,
            min_domains=min_domains if is_int(min_domains) else None,
            node_affinity_policy=affinity if isinstance(affinity, str) else None,
            node_taints_policy=taints if isinstance(taints, str) else None)

    def plugins(self, value: object) -> PluginsConfig:
        if value is _MISSING:
            return PluginsConfig()
        section = self.mapping(value, "plugins", _PLUGINS_FIELDS)
        filters = DEFAULT_FILTER_PLUGINS
        if "filter" in section:
            filters = self.filter_plugins(section["filter"], "plugins.filter")
        score = PluginsConfig().score
        if "score" in section:
            score = self.score_plugins(section["score"], "plugins.score")
        return PluginsConfig(filter=filters, score=score)

    def filter_plugins(self, value: object, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(path, f"must be a list of filter plugin names, got {render_value(value)}")
            return DEFAULT_FILTER_PLUGINS
        names: list[str] = []
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if not isinstance(item, str) or item not in FILTER_PLUGINS:
                self.fail(where, _unknown_plugin("filter", item, FILTER_PLUGINS))
            elif item in names:
                self.fail(where, f'"{item}" is listed twice')
            else:
                names.append(item)
        return tuple(names)

    def score_plugins(self, value: object, path: str) -> tuple[ScorePlugin, ...]:
        if not isinstance(value, Mapping):
            self.fail(path, f"must be a mapping of score plugin name to weight, "
                            f"got {render_value(value)}")
            return PluginsConfig().score
        plugins: list[ScorePlugin] = []
        for name, spec in value.items():
            where = _join(path, name)
            if not isinstance(name, str) or name not in SCORE_PLUGINS:
                self.fail(where, _unknown_plugin("score", name, SCORE_PLUGINS))
                continue
            weight_path, weight = where, spec
            if isinstance(spec, Mapping):
                fields = self.mapping(spec, where, _SCORE_PLUGIN_FIELDS)
                weight_path = _join(where, "weight")
                weight = fields.get("weight", _MISSING)
                if weight is _MISSING:
                    self.fail(weight_path, "is required")
                    continue
            if is_int(weight) and 0 <= weight <= MAX_SCORE_WEIGHT:
                plugins.append(ScorePlugin(name, weight))
            else:
                self.fail(weight_path, f"must be an integer between 0 and {MAX_SCORE_WEIGHT}, "
                                       f"got {render_value(weight)}")
        return tuple(plugins)

    def scoring_strategy(self, value: object) -> ScoringStrategy:
        if value is _MISSING:
            return ScoringStrategy()
        path = "scoringStrategy"
        section = self.mapping(value, path, _SCORING_STRATEGY_FIELDS)
        kind = self.choice(section, "type", path, "LeastAllocated", SCORING_STRATEGY_TYPES)
        resources = ScoringStrategy().resources
        if "resources" in section:
            resources = self.resources(section["resources"], _join(path, "resources"))
        shape: tuple[UtilizationShapePoint, ...] = ()
        ratio_path = _join(path, "requestedToCapacityRatio")
        ratio = section.get("requestedToCapacityRatio")
        if ratio is not None and kind != _REQUESTED_TO_CAPACITY_RATIO:
            self.fail(ratio_path, f"is only used with type {_REQUESTED_TO_CAPACITY_RATIO}; "
                                  f"type is {kind}")
        elif ratio is not None:
            fields = self.mapping(ratio, ratio_path, _RATIO_FIELDS)
            if isinstance(ratio, Mapping):
                shape = self.shape(fields.get("shape", _MISSING), _join(ratio_path, "shape"))
        elif kind == _REQUESTED_TO_CAPACITY_RATIO:
            self.fail(ratio_path, f"is required when type is {_REQUESTED_TO_CAPACITY_RATIO} "
                                  "(e.g. {shape: [{utilization: 0, score: 0}, "
                                  "{utilization: 100, score: 10}]})")
        return ScoringStrategy(type=kind, resources=resources, shape=shape)

    def shape(self, value: object, path: str) -> tuple[UtilizationShapePoint, ...]:
        """RequestedToCapacityRatio's points, with kube's ``validateFunctionShape`` rules."""
        if value is _MISSING:
            self.fail(path, "is required: at least one point must be specified")
            return ()
        if not isinstance(value, list) or not value:
            self.fail(path, f"must be a non-empty list of {{utilization, score}} points "
                            f"(at least one point must be specified), got {render_value(value)}")
            return ()
        points: list[UtilizationShapePoint] = []
        ok = True
        previous: int | None = None
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            entry = self.mapping(item, where, _SHAPE_POINT_FIELDS)
            if not isinstance(item, Mapping):
                ok = False
                continue
            numbers: list[int] = []
            for key, top in (("utilization", MAX_SHAPE_UTILIZATION), ("score", MAX_SHAPE_SCORE)):
                if key not in entry:
                    self.fail(_join(where, key), "is required")
                    continue
                before = len(self.errors)
                number = self.integer(entry, key, where, -1, 0, top)
                if len(self.errors) == before:
                    numbers.append(number)
            if len(numbers) != 2:
                ok = False
                continue
            if previous is not None and numbers[0] <= previous:
                self.fail(_join(where, "utilization"),
                          f"utilization values must be sorted in increasing order: must be "
                          f"greater than {previous}, got {numbers[0]}")
                ok = False
            previous = numbers[0]
            points.append(UtilizationShapePoint(numbers[0], numbers[1]))
        return tuple(points) if ok else ()

    def resources(self, value: object, path: str) -> tuple[ResourceWeight, ...]:
        if not isinstance(value, list) or not value:
            self.fail(path, f"must be a non-empty list of {{name, weight}} entries, "
                            f"got {render_value(value)}")
            return ScoringStrategy().resources
        result: list[ResourceWeight] = []
        seen: set[str] = set()
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            entry = self.mapping(item, where, _RESOURCE_FIELDS)
            if not isinstance(item, Mapping):
                continue
            name: str | None = None
            given = entry.get("name", _MISSING)
            if given is _MISSING:
                self.fail(_join(where, "name"), "is required")
            elif (not isinstance(given, str) or len(given) > 316
                    or not _RESOURCE_NAME_RE.fullmatch(given)):
                self.fail(_join(where, "name"), f"must be a resource name such as cpu, memory "
                                                f"or nvidia.com/gpu, got {render_value(given)}")
            elif given in seen:
                self.fail(_join(where, "name"), f'"{given}" is listed twice')
            else:
                name = given
                seen.add(given)
            weight = entry.get("weight", 1)
            if not (is_int(weight) and 1 <= weight <= MAX_RESOURCE_WEIGHT):
                self.fail(_join(where, "weight"), f"must be an integer between 1 and "
                                                  f"{MAX_RESOURCE_WEIGHT}, got {render_value(weight)}")
            elif name is not None:
                result.append(ResourceWeight(name, weight))
        return tuple(result)

    def leader_election(self, value: object, scheduler_name: str) -> LeaderElectionConfig:
        path = "leaderElection"
        section = {} if value is _MISSING else self.mapping(value, path, _LEADER_ELECTION_FIELDS)
        enabled = self.boolean(section, "enabled", path, True)
        lease_name = self.dns_name(section, "leaseName", path, scheduler_name)
        namespace = self.dns_name(section, "leaseNamespace", path, DEFAULT_LEASE_NAMESPACE,
                                  label=True)
        duration, duration_ok = self.seconds(section, "leaseDurationSeconds", path, 15.0)
        deadline, deadline_ok = self.seconds(section, "renewDeadlineSeconds", path, 10.0)
        retry, retry_ok = self.seconds(section, "retryPeriodSeconds", path, 2.0)
        # client-go's NewLeaderElector rules: a leader must renew before its lease runs out, and
        # the renew deadline must leave room for at least one retry including its jitter.
        if duration_ok and deadline_ok and deadline >= duration:
            self.fail(_join(path, "renewDeadlineSeconds"),
                      f"must be less than leaseDurationSeconds ({duration:g}), got {deadline:g}")
        if deadline_ok and retry_ok and deadline <= LEADER_ELECTION_JITTER * retry:
            self.fail(_join(path, "retryPeriodSeconds"),
                      f"must be less than renewDeadlineSeconds / {LEADER_ELECTION_JITTER:g} "
                      f"({deadline / LEADER_ELECTION_JITTER:g}) so that a retry with jitter still "
                      f"fits before the renew deadline, got {retry:g}")
        given = section.get("identity", _MISSING)
        identity = given if isinstance(given, str) and given.strip() else default_identity()
        if given is not _MISSING and identity is not given:
            self.fail(_join(path, "identity"), f"must be a non-empty string, "
                                               f"got {render_value(given)}")
        return LeaderElectionConfig(
            enabled=enabled, lease_name=lease_name, lease_namespace=namespace,
            lease_duration_seconds=duration, renew_deadline_seconds=deadline,
            retry_period_seconds=retry, identity=identity,
        )


def _unknown_plugin(kind: str, name: object, known: Sequence[str]) -> str:
    hint = _suggest(name, known) if isinstance(name, str) else ""
    other = "score" if kind == "filter" else "filter"
    if name in (SCORE_PLUGINS if kind == "filter" else FILTER_PLUGINS):
        hint = f" (it is a {other} plugin)"
    return (f"unknown {kind} plugin {render_value(name)}{hint}; known {kind} plugins: "
            f"{', '.join(known)}")


# --------------------------------------------------------------------------------------------
# Writing


def _number(value: float) -> int | float:
    """Whole numbers of seconds are written as integers, for files people read."""
    return int(value) if float(value).is_integer() else value


def _default_constraint(c: DefaultSpreadConstraint) -> dict[str, Any]:
    """A default spread constraint as written in the document (unset fields left out)."""
    out: dict[str, Any] = {"maxSkew": c.max_skew, "topologyKey": c.topology_key,
                           "whenUnsatisfiable": c.when_unsatisfiable}
    if c.min_domains is not None:
        out["minDomains"] = c.min_domains
    if c.node_affinity_policy is not None:
        out["nodeAffinityPolicy"] = c.node_affinity_policy
    if c.node_taints_policy is not None:
        out["nodeTaintsPolicy"] = c.node_taints_policy
    return out


def dump_config(config: SchedulerConfig, *, include_identity: bool = False) -> dict[str, Any]:
    """The configuration as a camelCase document that :func:`parse_config` reads back.

    Every field is written, defaults included, so a dumped file documents itself, except
    ``leaderElection.identity`` unless ``include_identity`` (see the module docstring): without it
    the document reads back equal but for a freshly computed identity. The result is plain dicts,
    lists, strings and numbers, ready for ``yaml.safe_dump`` or ``json.dumps``.
    """
    election = config.leader_election
    document: dict[str, Any] = {
        "schedulerName": config.scheduler_name,
        "plugins": {
            "filter": list(config.plugins.filter),
            "score": {plugin.name: {"weight": plugin.weight} for plugin in config.plugins.score},
        },
        "scoringStrategy": {
            "type": config.scoring_strategy.type,
            "resources": [{"name": resource.name, "weight": resource.weight}
                          for resource in config.scoring_strategy.resources],
            "requestedToCapacityRatio": {"shape": [
                {"utilization": point.utilization, "score": point.score}
                for point in config.scoring_strategy.shape]}
            if config.scoring_strategy.shape else None,
        },
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "leaderElection": {
            "enabled": election.enabled,
            "leaseName": election.lease_name,
            "leaseNamespace": election.lease_namespace,
            "leaseDurationSeconds": _number(election.lease_duration_seconds),
            "renewDeadlineSeconds": _number(election.renew_deadline_seconds),
            "retryPeriodSeconds": _number(election.retry_period_seconds),
        },
        "metricsAddress": config.metrics_address,
        "bindConcurrency": config.bind_concurrency,
        "bindTimeoutSeconds": _number(config.bind_timeout_seconds),
        "podInitialBackoffSeconds": _number(config.pod_initial_backoff_seconds),
        "podMaxBackoffSeconds": _number(config.pod_max_backoff_seconds),
        "podMaxInUnschedulablePodsSeconds": _number(config.pod_max_in_unschedulable_pods_seconds),
        "assumedPodTTLSeconds": _number(config.assumed_pod_ttl_seconds),
        "logLevel": config.log_level,
        "seed": config.seed,
        "scheduleFragment": config.schedule_fragment,
        "fragments": {
            "runtime": config.fragments.runtime,
            "fuel": config.fragments.fuel,
            "timeoutMilliseconds": round(config.fragments.timeout_seconds * 1000),
            "memoryMiB": config.fragments.memory_mib,
            "maxTimeoutMilliseconds": round(config.fragments.max_timeout_seconds * 1000),
            "logLinesPerSecond": _number(config.fragments.log_lines_per_second),
            "logBurst": config.fragments.log_burst,
            "quarantineAfterFailures": config.fragments.quarantine_after_failures,
            "quarantineSeconds": _number(config.fragments.quarantine_seconds),
            "callThreadNice": config.fragments.call_thread_nice,
            "inlineCallMilliseconds": round(config.fragments.inline_call_seconds * 1000),
            "maxPermitWaitSeconds": _number(config.fragments.max_permit_wait_seconds),
        },
        "storage": {
            "endpoint": config.storage.endpoint,
            "accessKey": config.storage.access_key,
            "secretKey": config.storage.secret_key,
            "secure": config.storage.secure,
            "region": config.storage.region,
            "credentialsSecret": None if config.storage.credentials_secret is None else {
                "namespace": config.storage.credentials_secret.namespace,
                "name": config.storage.credentials_secret.name},
            "allowedFileDirs": list(config.storage.allowed_file_dirs),
            "maxBytes": config.storage.max_bytes,
            "timeoutSeconds": _number(config.storage.timeout_seconds),
            "allowedHttpHosts": list(config.storage.allowed_http_hosts),
            "allowPrivateAddresses": config.storage.allow_private_addresses,
        },
        "virtualNodes": {
            "enabled": config.virtual_nodes.enabled,
            "cloudUrl": config.virtual_nodes.cloud_url,
            "cloudToken": config.virtual_nodes.cloud_token,
            "cloudTimeoutSeconds": _number(config.virtual_nodes.cloud_timeout_seconds),
            "pools": [{"name": p.name, "platform": p.platform, "maxPods": p.max_pods,
                       "labels": dict(p.labels)}
                      for p in config.virtual_nodes.pools],
            "heartbeatSeconds": _number(config.virtual_nodes.heartbeat_seconds),
            "refreshSeconds": _number(config.virtual_nodes.refresh_seconds),
            "notReadyAfterSeconds": _number(config.virtual_nodes.not_ready_after_seconds),
            "orphanGraceSeconds": _number(config.virtual_nodes.orphan_grace_seconds),
            "reconcileSeconds": _number(config.virtual_nodes.reconcile_seconds),
        },
        "rebalancer": {
            "enabled": config.rebalancer.enabled,
            "intervalSeconds": _number(config.rebalancer.interval_seconds),
            "minCloudSeconds": _number(config.rebalancer.min_cloud_seconds),
            "maxMovesPerCycle": config.rebalancer.max_moves_per_cycle,
            "maxMovesPerNamespace": config.rebalancer.max_moves_per_namespace,
            "readyTimeoutSeconds": _number(config.rebalancer.ready_timeout_seconds),
            "dryRun": config.rebalancer.dry_run,
        },
        "preemption": {
            "enabled": config.preemption.enabled,
            "order": config.preemption.order,
            "victims": config.preemption.victims,
            "minCandidateNodesPercentage": config.preemption.min_candidate_nodes_percentage,
            "minCandidateNodesAbsolute": config.preemption.min_candidate_nodes_absolute,
        },
        "podTopologySpread": {
            "defaultingType": config.pod_topology_spread.defaulting_type,
            "defaultConstraints": [_default_constraint(c) for c in
                                   config.pod_topology_spread.default_constraints],
        },
        "interPodAffinity": {
            "hardPodAffinityWeight": config.inter_pod_affinity.hard_pod_affinity_weight,
            "ignorePreferredTermsOfExistingPods":
                config.inter_pod_affinity.ignore_preferred_terms_of_existing_pods,
        },
    }
    if include_identity:
        document["leaderElection"]["identity"] = election.identity
    return document
