"""The ``WsspSchedulerConfiguration`` custom resource: names, parsing, selectors and status.

A resource describes one fragment at one version. Its name is ``<name>-v<major>.<minor>.<patch>``
(``gpu-binpack-v1.2.0``), so several versions of a fragment live side by side and a pod can pin
one or follow the newest that is Ready. The CRD (``manifests/crd-wsspschedulerconfiguration.yaml``,
:data:`CRD_PATH`) lets the API server check types, enums, bounds and patterns, default
``failurePolicy``/``shadow``/``weight`` and prune unknown fields; :func:`parse_resource` checks
everything again, plus the rules the schema cannot state everywhere (the name's form on servers
that ignore a ``metadata.name`` pattern, ``sha256`` being required for remote URLs on servers
without CEL), and builds a frozen :class:`FragmentSpec`. It collects every problem before it
raises, each with its field path, so a resource's status can tell the whole story in one message:

    spec.sha256: required for remote URLs (s3://, http(s)://)
    spec.stages.score.weight: must be an integer between 1 and 100, got 0

Unknown fields are problems too (a typo must not silently fall back to a default): the API server
prunes them from what it stores, so this only matters for documents read from files.

:func:`selector` reads what a pod (``gpu-binpack-v1.2.0`` or ``gpu-binpack``) or the scheduler
configuration (``default:v1.0.0``) names. :func:`status_patch` builds the merge patch the scheduler
sends to the status subresource.

Semantic versions here are ``MAJOR.MINOR.PATCH`` without leading zeros (``1.02.0`` is refused, so
that two names can never mean the same version); pre-release and build suffixes are not allowed
(a ``+`` is not valid in a Kubernetes name anyway).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

from pyscheduler.api.problems import InputError
from pyscheduler.api.validation import is_qualified_name
from pyscheduler.settings import MAX_CALL_TIMEOUT_MILLISECONDS, is_int, render_value

__all__ = [
    "API_VERSION",
    "CRD_NAME",
    "CRD_PATH",
    "ALL_STAGES",
    "FAILURE_POLICIES",
    "LIFECYCLE_MODES",
    "GROUP",
    "KIND",
    "NAME_PATTERN",
    "PHASES",
    "PLURAL",
    "RUNTIMES",
    "SHORT_NAME",
    "STAGE_MODES",
    "URL_SCHEMES",
    "VERSION",
    "FragmentLimits",
    "FragmentSpec",
    "ResourceError",
    "StageSpec",
    "format_version",
    "parse_resource",
    "resource_name",
    "selector",
    "split_name",
    "status_patch",
]

GROUP: Final = "wssp.pyscheduler.io"
VERSION: Final = "v1alpha1"
PLURAL: Final = "wsspschedulerconfigurations"
KIND: Final = "WsspSchedulerConfiguration"
SHORT_NAME: Final = "wssp"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"
API_VERSION: Final = f"{GROUP}/{VERSION}"

_CRD_FILE: Final = "crd-wsspschedulerconfiguration.yaml"


def _crd_path() -> Path:
    """The manifest shipped inside the package if there is one, else the source tree's copy."""
    here = Path(__file__).resolve().parent
    candidates = (here / _CRD_FILE, here.parents[1] / "manifests" / _CRD_FILE)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return candidates[-1]


#: The CRD manifest, shared by the scheduler and the tests: ``manifests/`` of the source tree
#: (or a copy next to this module, where a package build puts one).
CRD_PATH: Final = _crd_path()

_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NUMBER: Final = r"(0|[1-9][0-9]*)"
_SEMVER: Final = rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}"
#: A resource name: ``<name>-v<semver>``. The whole name must also be at most 253 characters.
NAME_PATTERN: Final = re.compile(rf"^(?P<name>{_LABEL})-v(?P<version>{_SEMVER})$")
_BARE_NAME: Final = re.compile(_LABEL)
_COLON_FORM: Final = re.compile(rf"(?P<name>{_LABEL}):v(?P<version>{_SEMVER})")
_MAX_NAME: Final = 253
_SHA256: Final = re.compile(r"[a-f0-9]{64}")

URL_SCHEMES: Final[tuple[str, ...]] = ("s3", "https", "http", "file")
_REMOTE_SCHEMES: Final = ("s3", "https", "http")
STAGE_MODES: Final[tuple[str, ...]] = ("replace", "extend")
FAILURE_POLICIES: Final[tuple[str, ...]] = ("Fail", "Ignore", "Default")
RUNTIMES: Final[tuple[str, ...]] = ("wasmtime", "wasmer")
PHASES: Final[tuple[str, ...]] = ("Pending", "Loading", "Ready", "Quarantined", "Failed")

MAX_WEIGHT: Final = 100
MAX_TIMEOUT_MILLISECONDS: Final = MAX_CALL_TIMEOUT_MILLISECONDS
MAX_MEMORY_MIB: Final = 4096
_MAX_FUEL: Final = 2**63 - 1
_MAX_URL: Final = 2048
#: The longest condition/status message the CRD accepts.
MAX_MESSAGE: Final = 32768

_SPEC_FIELDS: Final = ("url", "sha256", "stages", "config", "limits", "failurePolicy", "shadow",
                       "runtime")
_STAGE_NAMES: Final = ("filter", "score")
#: The extension points after filtering (ABI minor 3), and the one mode each allows: a fragment
#: extends the host's prefilter, reserve, permit and binding, and decides the post-filter.
LIFECYCLE_MODES: Final[Mapping[str, str]] = MappingProxyType({
    "prefilter": "extend", "postfilter": "replace", "reserve": "extend", "unreserve": "extend",
    "permit": "extend", "prebind": "extend", "postbind": "extend"})
ALL_STAGES: Final[tuple[str, ...]] = _STAGE_NAMES + tuple(LIFECYCLE_MODES)
_FILTER_FIELDS: Final = ("mode",)
_SCORE_FIELDS: Final = ("mode", "weight")
_LIFECYCLE_FIELDS: Final = ("mode",)
_PREBIND_FIELDS: Final = ("mode", "allowedLabels", "allowedAnnotations")
#: The most entries one pre-bind allowlist may hold.
MAX_ALLOWLIST: Final = 64
#: Keys no pre-bind may set, whatever the allowlist says: the scheduler's own and Kubernetes'.
_RESERVED_KEY: Final = re.compile(r"^(wssp/|([^/]*\.)?(kubernetes\.io|k8s\.io)/)")
_LIMIT_FIELDS: Final = ("fuel", "timeoutMilliseconds", "memoryMiB")


# --------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class StageSpec:
    """How the fragment takes part in one stage: ``replace`` or ``extend`` the built-in stage.

    ``weight`` multiplies the fragment's scores (score stage only; 1 for a filter stage).
    """

    mode: str
    weight: int = 1
    #: pre-bind only: the label and annotation keys the fragment may set (``prefix/*`` entries
    #: allow every key under that prefix)
    allowed_labels: tuple[str, ...] = ()
    allowed_annotations: tuple[str, ...] = ()

    def allows(self, kind: str, key: str) -> bool:
        """Whether pre-bind may set the ``kind`` (``label`` or ``annotation``) ``key``."""
        if _RESERVED_KEY.match(key):
            return False
        entries = self.allowed_labels if kind == "label" else self.allowed_annotations
        return any(key == e or (e.endswith("/*") and key.startswith(e[:-1])) for e in entries)


@dataclass(frozen=True, slots=True)
class FragmentLimits:
    """The resource's limits; ``None`` means the scheduler's default applies."""

    fuel: int | None = None
    timeout_seconds: float | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class FragmentSpec:
    """A validated ``WsspSchedulerConfiguration``.

    ``resource_name`` is ``metadata.name``; ``name`` and ``version`` are its two parts.
    ``config`` is a read-only view of a private copy of ``spec.config`` (``{}`` when absent).
    """

    resource_name: str
    name: str
    version: tuple[int, int, int]
    generation: int
    uid: str
    url: str
    sha256: str | None
    filter: StageSpec | None
    score: StageSpec | None
    config: Mapping[str, Any]
    limits: FragmentLimits
    failure_policy: str
    shadow: bool
    runtime: str | None
    #: the extension points after filtering that ``spec.stages`` configures (the module's
    #: exports decide which it takes; these say how, and are required to be exported)
    lifecycle: Mapping[str, StageSpec] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def remote(self) -> bool:
        """True for s3:// and http(s):// URLs (which need a sha256)."""
        return _scheme(self.url) in _REMOTE_SCHEMES

    @property
    def config_json(self) -> str:
        """``config`` as the compact JSON text the host hands to ``wssp_init``."""
        return json.dumps(_thaw(self.config), separators=(",", ":"), ensure_ascii=False)


class ResourceError(InputError):
    """A resource that cannot be served, with every problem found.

    ``problems`` holds one ``"<field path>: <what is wrong>"`` line per problem; ``str()`` is the
    lines joined by newlines. ``resource_name`` is the resource's name ("" when it has none).
    """

    separator = "\n"

    def __init__(self, resource_name: str, problems: Sequence[str]) -> None:
        self.resource_name = resource_name
        super().__init__(problems)


# --------------------------------------------------------------------------------------------
# Names and selectors


def split_name(name: str) -> tuple[str, tuple[int, int, int]] | None:
    """``"gpu-binpack-v1.2.0"`` -> ``("gpu-binpack", (1, 2, 0))``; ``None`` if not of that form."""
    if not isinstance(name, str) or len(name) > _MAX_NAME:
        return None
    match = NAME_PATTERN.fullmatch(name)
    if match is None:
        return None
    return match["name"], _version(match["version"])


def format_version(version: tuple[int, int, int]) -> str:
    """``(1, 2, 0)`` -> ``"1.2.0"``."""
    return ".".join(str(part) for part in version)


@functools.lru_cache(maxsize=1024)
def resource_name(name: str, version: tuple[int, int, int]) -> str:
    """The name of the resource serving a fragment's version: ``("gpu", (1, 2, 0))`` ->
    ``"gpu-v1.2.0"`` (cached: a pod's selection asks it for every attempt)."""
    return f"{name}-v{format_version(version)}"


def selector(annotation: str) -> tuple[str, tuple[int, int, int] | None]:
    """What a fragment reference names: a fragment, and a version or ``None`` ("the newest Ready").

    Accepted forms (surrounding white space is ignored):

    * ``gpu-binpack-v1.2.0`` (a resource name): ``("gpu-binpack", (1, 2, 0))``;
    * ``gpu-binpack:v1.2.0`` (the scheduler configuration's form): the same;
    * ``gpu-binpack`` (a fragment name alone): ``("gpu-binpack", None)``.

    Raises ValueError naming the accepted forms for anything else.
    """
    if not isinstance(annotation, str):
        raise ValueError(f"a fragment reference must be a string, got {_render(annotation)}")
    text = annotation.strip()
    split = split_name(text)
    if split is not None:
        return split
    match = _COLON_FORM.fullmatch(text)
    if match is not None and len(match["name"]) + len(match["version"]) + 2 <= _MAX_NAME:
        return match["name"], _version(match["version"])
    if len(text) <= _MAX_NAME and _BARE_NAME.fullmatch(text):
        return text, None
    raise ValueError(
        f"invalid fragment reference {_render(annotation)}: expected "
        f"<name>-v<major>.<minor>.<patch> (e.g. gpu-binpack-v1.2.0), "
        f"<name>:v<major>.<minor>.<patch> (e.g. gpu-binpack:v1.2.0) or "
        f"a bare <name> for the newest Ready version, where <name> is lowercase letters, digits "
        f"and '-', starting and ending with a letter or digit")


def _version(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in text.split("."))
    return major, minor, patch


# --------------------------------------------------------------------------------------------
# Parsing


def parse_resource(obj: Mapping[str, Any]) -> FragmentSpec:
    """Validate a ``WsspSchedulerConfiguration`` (as decoded from JSON) and build its spec.

    Raises :class:`ResourceError` listing every problem (see the module docstring).
    """
    parser = _Parser()
    spec = parser.resource(obj)
    if parser.problems or spec is None:
        raise ResourceError(parser.resource_name, parser.problems or ["the resource is invalid"])
    return spec


_MISSING: Final = object()


class _Parser:
    """Walks one resource, collecting every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.resource_name = ""

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def mapping(self, value: object, path: str, known: Sequence[str] | None) -> Mapping[str, Any]:
        """``value`` as a mapping (``{}`` with a problem when it is not one); unknown keys fail."""
        if not isinstance(value, Mapping):
            self.fail(path, f"must be an object, got {_render(value)}")
            return {}
        if known is not None:
            for key in value:
                if key not in known:
                    self.fail(f"{path}.{key}", f"unknown field; known fields: {', '.join(known)}")
        return value

    def resource(self, obj: object) -> FragmentSpec | None:
        if not isinstance(obj, Mapping):
            self.fail("<resource>", f"must be an object, got {_render(obj)}")
            return None
        self.kind_and_version(obj)
        meta = self.mapping(obj.get("metadata", _MISSING), "metadata", None)
        name, version = self.name(meta)
        generation = meta.get("generation", 0)
        if not is_int(generation) or generation < 0:
            self.fail("metadata.generation", f"must be a non-negative integer, got "
                                             f"{_render(generation)}")
            generation = 0
        uid = meta.get("uid", "")
        if not isinstance(uid, str):
            self.fail("metadata.uid", f"must be a string, got {_render(uid)}")
            uid = ""

        raw_spec = obj.get("spec", _MISSING)
        if raw_spec is _MISSING:
            self.fail("spec", "required")
            return None
        spec = self.mapping(raw_spec, "spec", _SPEC_FIELDS)
        if not isinstance(raw_spec, Mapping):
            return None
        url, scheme = self.url(spec)
        sha256 = self.sha256(spec, scheme)
        filter_stage, score_stage = self.stages(spec)
        lifecycle = self.lifecycle(spec)
        config = self.config(spec)
        limits = self.limits(spec)
        failure_policy = self.choice(spec, "failurePolicy", "Fail", FAILURE_POLICIES)
        shadow = spec.get("shadow", False)
        if not isinstance(shadow, bool):
            self.fail("spec.shadow", f"must be true or false, got {_render(shadow)}")
            shadow = False
        runtime: str | None = None
        if spec.get("runtime") is not None:
            runtime = self.choice(spec, "runtime", "", RUNTIMES) or None
        if self.problems:
            return None
        return FragmentSpec(
            resource_name=self.resource_name, name=name, version=version, generation=generation,
            uid=uid, url=url, sha256=sha256, filter=filter_stage, score=score_stage,
            config=config, limits=limits, failure_policy=failure_policy, shadow=shadow,
            runtime=runtime, lifecycle=lifecycle)

    def kind_and_version(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind")
        if kind is not None and kind != KIND:
            self.fail("kind", f"must be {KIND}, got {_render(kind)}")
        api_version = obj.get("apiVersion")
        if api_version is not None and api_version != API_VERSION:
            self.fail("apiVersion", f"must be {API_VERSION}, got {_render(api_version)}")

    def name(self, meta: Mapping[str, Any]) -> tuple[str, tuple[int, int, int]]:
        name = meta.get("name", _MISSING)
        if name is _MISSING or name in ("", None):
            self.fail("metadata.name", "required")
            return "", (0, 0, 0)
        if isinstance(name, str):
            self.resource_name = name
        split = split_name(name) if isinstance(name, str) else None
        if split is None:
            self.fail("metadata.name", (
                f"must be <name>-v<major>.<minor>.<patch> (e.g. gpu-binpack-v1.2.0), where <name> "
                f"is lowercase letters, digits and '-', starting and ending with a letter or "
                f"digit, and the version numbers have no leading zeros; at most {_MAX_NAME} "
                f"characters; got {_render(name)}"))
            return "", (0, 0, 0)
        return split

    def url(self, spec: Mapping[str, Any]) -> tuple[str, str]:
        url = spec.get("url", _MISSING)
        if url is _MISSING or url is None:
            self.fail("spec.url", "required")
            return "", ""
        if not isinstance(url, str):
            self.fail("spec.url", f"must be a string, got {_render(url)}")
            return "", ""
        scheme = _scheme(url)
        if scheme not in URL_SCHEMES:
            self.fail("spec.url", f"must start with s3://, https://, http:// or file://, "
                                  f"got {_render(url)}")
            return url, ""
        problem = _url_problem(url, scheme)
        if problem:
            self.fail("spec.url", f"{problem}, got {_render(url)}")
        return url, scheme

    def sha256(self, spec: Mapping[str, Any], scheme: str) -> str | None:
        value = spec.get("sha256")
        if value is None:
            if scheme in _REMOTE_SCHEMES:
                self.fail("spec.sha256", "required for remote URLs (s3://, http(s)://)")
            return None
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            self.fail("spec.sha256", f"must be 64 lowercase hex digits, got {_render(value)}")
            return None
        return value

    def stages(self, spec: Mapping[str, Any]) -> tuple[StageSpec | None, StageSpec | None]:
        raw = spec.get("stages", _MISSING)
        if raw is _MISSING or raw is None:
            self.fail("spec.stages", "required (at least one of filter, score)")
            return None, None
        stages = self.mapping(raw, "spec.stages", ALL_STAGES)
        if not isinstance(raw, Mapping):
            return None, None
        if not any(name in stages for name in ALL_STAGES):
            self.fail("spec.stages", f"must configure at least one of {', '.join(ALL_STAGES)}")
            return None, None
        filter_stage = score_stage = None
        if "filter" in stages:
            filter_stage = self.stage(stages["filter"], "spec.stages.filter", _FILTER_FIELDS)
        if "score" in stages:
            score_stage = self.stage(stages["score"], "spec.stages.score", _SCORE_FIELDS)
        return filter_stage, score_stage

    def lifecycle(self, spec: Mapping[str, Any]) -> Mapping[str, StageSpec]:
        raw = spec.get("stages")
        if not isinstance(raw, Mapping):
            return MappingProxyType({})
        out = {}
        for name, only in LIFECYCLE_MODES.items():
            if name not in raw:
                continue
            path = f"spec.stages.{name}"
            value = {} if raw[name] is None else raw[name]
            section = self.mapping(value, path,
                                   _PREBIND_FIELDS if name == "prebind" else _LIFECYCLE_FIELDS)
            if not isinstance(value, Mapping):
                continue
            mode = section.get("mode", only)
            if mode != only:
                self.fail(f"{path}.mode", f"must be {only} (the only mode of this stage), got "
                                          f"{_render(mode)}")
                continue
            labels = self.allowlist(section, path, "allowedLabels")
            annotations = self.allowlist(section, path, "allowedAnnotations")
            out[name] = StageSpec(only, allowed_labels=labels, allowed_annotations=annotations)
        return MappingProxyType(out)

    def allowlist(self, section: Mapping[str, Any], path: str, key: str) -> tuple[str, ...]:
        raw = section.get(key)
        if raw is None:
            return ()
        path = f"{path}.{key}"
        if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
            self.fail(path, f"must be a list of keys, got {_render(raw)}")
            return ()
        if len(raw) > MAX_ALLOWLIST:
            self.fail(path, f"at most {MAX_ALLOWLIST} entries, got {len(raw)}")
            return ()
        out = []
        for i, entry in enumerate(raw):
            key_part = entry[:-2] + "/x" if entry.endswith("/*") else entry
            problems = is_qualified_name(key_part)
            if problems:
                self.fail(f"{path}[{i}]", f"{entry!r} is not a key or prefix/*: {problems[0]}")
            elif _RESERVED_KEY.match(key_part):
                self.fail(f"{path}[{i}]", f"{entry!r}: keys under wssp/, kubernetes.io and "
                                          f"k8s.io are the scheduler's and Kubernetes' own")
            else:
                out.append(entry)
        return tuple(out)

    def stage(self, value: object, path: str, known: Sequence[str]) -> StageSpec | None:
        section = self.mapping(value, path, known)
        if not isinstance(value, Mapping):
            return None
        mode = section.get("mode", _MISSING)
        ok = True
        if mode is _MISSING or mode is None:
            self.fail(f"{path}.mode", f"required (one of {', '.join(STAGE_MODES)})")
            ok = False
        elif not isinstance(mode, str) or mode not in STAGE_MODES:
            self.fail(f"{path}.mode", f"must be one of {', '.join(STAGE_MODES)}, "
                                      f"got {_render(mode)}")
            ok = False
        weight = section.get("weight", 1) if "weight" in known else 1
        if weight is None:
            weight = 1
        if not (is_int(weight) and 1 <= weight <= MAX_WEIGHT):
            self.fail(f"{path}.weight", f"must be an integer between 1 and {MAX_WEIGHT}, "
                                        f"got {_render(weight)}")
            ok = False
        return StageSpec(str(mode), int(weight)) if ok else None

    def config(self, spec: Mapping[str, Any]) -> Mapping[str, Any]:
        value = spec.get("config")
        if value is None:
            return MappingProxyType({})
        if not isinstance(value, Mapping):
            self.fail("spec.config", f"must be an object, got {_render(value)}")
            return MappingProxyType({})
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            self.fail("spec.config", "must hold only JSON values (objects, lists, strings, "
                                     "finite numbers, true, false, null)")
            return MappingProxyType({})
        return MappingProxyType(copy.deepcopy(dict(value)))

    def limits(self, spec: Mapping[str, Any]) -> FragmentLimits:
        raw = spec.get("limits")
        if raw is None:
            return FragmentLimits()
        section = self.mapping(raw, "spec.limits", _LIMIT_FIELDS)
        fuel = self.integer(section, "fuel", 1, _MAX_FUEL)
        timeout = self.integer(section, "timeoutMilliseconds", 1, MAX_TIMEOUT_MILLISECONDS)
        memory = self.integer(section, "memoryMiB", 1, MAX_MEMORY_MIB)
        return FragmentLimits(
            fuel=fuel,
            timeout_seconds=None if timeout is None else timeout / 1000,
            memory_bytes=None if memory is None else memory * 2**20)

    def integer(self, section: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
        value = section.get(key)
        if value is None:
            return None
        # JSON decoders may give 5.0 for 5; the API server accepts integral floats too.
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if is_int(value) and low <= value <= high:
            return value
        bound = f"between {low} and {high}" if high != _MAX_FUEL else f"of at least {low}"
        self.fail(f"spec.limits.{key}", f"must be an integer {bound}, got {_render(value)}")
        return None

    def choice(self, spec: Mapping[str, Any], key: str, default: str,
               choices: Sequence[str]) -> str:
        value = spec.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or value not in choices:
            self.fail(f"spec.{key}", f"must be one of {', '.join(choices)}, got {_render(value)}")
            return default
        return value


def _scheme(url: str) -> str:
    head, sep, _ = url.partition("://")
    return head if sep else ""


def _url_problem(url: str, scheme: str) -> str | None:
    """What is wrong with a URL whose scheme is known, or None."""
    if len(url) > _MAX_URL:
        return f"must be at most {_MAX_URL} characters"
    if any(ch.isspace() for ch in url):
        return "must not contain white space"
    rest = url[len(scheme) + 3:]
    if scheme == "s3":
        bucket, _, key = rest.partition("/")
        if not bucket or not key:
            return "must be s3://<bucket>/<key>"
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return "must be file:///<absolute path>"
        return None
    if not parts.hostname:
        return f"must be {scheme}://<host>/<path>"
    return None


def _render(value: object) -> str:
    return render_value(value, mapping="an object")


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(item) for item in value]
    return value


# --------------------------------------------------------------------------------------------
# Status


def status_patch(phase: str, *, generation: int, message: str, digest: str | None = None,
                 runtime: str | None = None, load_seconds: float | None = None, now: str,
                 previous: Mapping[str, Any] | None = None,
                 next_attempt: str | None = None) -> dict[str, Any]:
    """A JSON merge patch for the status subresource, describing the latest load attempt.

    Sets ``phase``, ``message``, ``observedGeneration`` and a ``Ready`` condition (``True`` only
    in phase Ready; ``reason`` is the phase). ``digest``, ``shortDigest``, ``runtime``,
    ``loadTime`` (``"0.120s"``) and ``loadedAt`` (``now``, phase Ready only) are set when known
    and removed (``null``) otherwise, so the status never mixes two attempts. ``now`` is an
    RFC 3339 time, and so is ``next_attempt`` (``nextAttemptAt``: when a failed fetch is
    retried, or a quarantined fragment called again). ``previous`` is the resource's current
    ``status``: when its Ready condition
    already has the same status, its ``lastTransitionTime`` is kept, as Kubernetes conditions
    require. Messages longer than the CRD allows are cut.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    if not is_int(generation) or generation < 0:
        raise ValueError(f"generation must be a non-negative integer, got {generation!r}")
    text = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."
    ready = "True" if phase == "Ready" else "False"
    since = now
    for condition in (previous or {}).get("conditions") or ():
        if (isinstance(condition, Mapping) and condition.get("type") == "Ready"
                and condition.get("status") == ready
                and isinstance(condition.get("lastTransitionTime"), str)):
            since = condition["lastTransitionTime"]
    status: dict[str, Any] = {
        "phase": phase,
        "message": text,
        "observedGeneration": generation,
        "conditions": [{
            "type": "Ready",
            "status": ready,
            "reason": phase,
            "message": text,
            "lastTransitionTime": since,
            "observedGeneration": generation,
        }],
        "digest": digest,
        "shortDigest": digest[:12] if digest else None,
        "runtime": runtime,
        "loadTime": None if load_seconds is None else f"{load_seconds:.3f}s",
        "loadedAt": now if phase == "Ready" else None,
        "nextAttemptAt": next_attempt,
    }
    if phase in ("Quarantined", "Ready") and load_seconds is None:
        # Entering or leaving quarantine is not a load: what the load recorded stays.
        del status["loadTime"], status["loadedAt"]
    return {"status": status}
