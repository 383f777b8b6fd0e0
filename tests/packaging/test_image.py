"""The container image, tested where no container engine runs.

What the image runs is tested by doing what its Dockerfile does, step by step, on this machine:

1. the build context: the files the builder stage copies, filtered by ``.dockerignore``;
2. the wheel built from that context (``pip wheel``), checked for its package data;
3. a fresh virtual environment (no system site packages, no pip) with the wheel and its
   dependencies installed from binary wheels only, with the Python version of the image's base;
4. the final stage's ``ENTRYPOINT`` resolved through its ``ENV PATH`` and started with its
   environment, as its ``USER`` (when the tests run as root), against the embedded cluster
   (``pyscheduler sim up``) with a read-only view of everything but an empty ``$TMPDIR``;
5. the end-to-end suite (``tests/e2e``) against that cluster and that process;
6. afterwards: nothing was written into the environment, ``$TMPDIR`` or anywhere else.

The Dockerfile is also read statically for what a build would only show at deploy time (a
non-numeric user, an entrypoint that is not the console script, a base image Python that the
wheel was never tested with). ``hack/kind-e2e.sh`` — the same suite in a kind cluster with the
real image — is checked for syntax and run when Docker and kind are both available.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from configparser import ConfigParser
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
KIND_SCRIPT = ROOT / "hack" / "kind-e2e.sh"
DEFAULT_FRAGMENT = "pyscheduler/wasm/fragments/default-v1.0.0.wasm"
# The image's virtual environment, mapped to the test's own wherever the Dockerfile names it.
IMAGE_VENV = "/opt/venv"
# What a container starts with before the image's ENV (Docker's default PATH; the python image
# sets LANG).
CONTAINER_BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "LANG": "C.UTF-8"}


# -- reading the Dockerfile -----------------------------------------------------------------------

@dataclass
class Instruction:
    keyword: str
    value: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"the stage FROM {self.base} has no {keyword}"
        return found[-1]


@dataclass
class Dockerfile:
    args: dict[str, str]  # ARGs before the first FROM, with their defaults
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise AssertionError(f"no stage named {name}")


def _substitute(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise AssertionError(f"${name} is not defined where it is used: {text}")
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, text)


def parse_dockerfile(text: str) -> Dockerfile:
    """Instructions per stage, with continuation lines joined and comments dropped (comment
    lines inside a continued instruction are dropped too, as Docker does)."""
    logical: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        logical.append((start, " ".join(part.strip() for part in pending if part.strip())))
        pending = []
    assert not pending, "the Dockerfile ends in a continuation line"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for number, line in logical:
        keyword, _, value = line.partition(" ")
        keyword, value = keyword.upper(), value.strip()
        if keyword == "FROM":
            words = value.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            assert len(words) in (1, 3), f"line {number}: FROM {value}"
            stages.append(Stage(_substitute(words[0], args), name))
        elif not stages:
            assert keyword == "ARG", f"line {number}: {keyword} before the first FROM"
            key, _, default = value.partition("=")
            args[key] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, value, number))
    assert stages, "the Dockerfile has no FROM"
    return Dockerfile(args, stages)


def env_of(stage: Stage, base: dict[str, str]) -> dict[str, str]:
    """The environment after the stage's ENV instructions, applied in order over ``base``."""
    env = dict(base)
    for instruction in stage.all("ENV"):
        words = shlex.split(instruction.value)
        if words and "=" not in words[0]:  # the old "ENV key value" form
            env[words[0]] = _substitute(" ".join(words[1:]), env)
            continue
        for word in words:
            key, _, value = word.partition("=")
            env[key] = _substitute(value, env)
    return env


def copies(stage: Stage) -> list[tuple[dict[str, str], list[str], str]]:
    """Each COPY as (flags, sources, destination)."""
    result = []
    for instruction in stage.all("COPY"):
        words = shlex.split(instruction.value)
        flags = {}
        while words and words[0].startswith("--"):
            key, _, value = words.pop(0)[2:].partition("=")
            flags[key] = value
        result.append((flags, words[:-1], words[-1]))
    return result


# -- .dockerignore, as BuildKit reads it ----------------------------------------------------------

def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.index("]", i + 1)
            out.append("[" + pattern[i + 1:end].replace("\\", "\\\\") + "]")
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


class DockerIgnore:
    """The last pattern that matches a path or one of its parent directories decides; ``!``
    patterns re-include."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = posixpath.normpath(line.lstrip("!").strip().lstrip("/"))
            self.rules.append((negate, _glob_regex(pattern)))

    def excluded(self, path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        result = False
        for negate, regex in self.rules:
            if any(regex.match(prefix) for prefix in prefixes):
                result = not negate
        return result


# -- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def dockerignore() -> DockerIgnore:
    return DockerIgnore(DOCKERIGNORE.read_text())


def _setup_cfg() -> ConfigParser:
    parser = ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser


def _base_python(dockerfile: Dockerfile) -> str:
    """``3.11`` from ``python:3.11-slim``, for every stage (the venv's interpreter link must
    hold in the final stage, so the builder must use the same one)."""
    versions = set()
    for stage in dockerfile.stages:
        match = re.fullmatch(r"python:(\d+\.\d+)-slim(?:-\w+)?", stage.base)
        assert match, f"FROM {stage.base}: expected an official python:X.Y-slim image"
        versions.add(match.group(1))
    assert len(versions) == 1, f"the stages use different Pythons: {versions}"
    return versions.pop()


def _extras(dockerfile: Dockerfile) -> str:
    """The extras the builder installs the wheel with (``[fast]``)."""
    runs = " ".join(i.value for i in dockerfile.stage("builder").all("RUN"))
    match = re.search(r"pyscheduler-\*\.whl\)?\"?(\[[\w,]+\])", runs)
    assert match, "the builder does not install dist/pyscheduler-*.whl"
    return match.group(1)


@pytest.fixture(scope="module")
def build_context(dockerfile: Dockerfile, dockerignore: DockerIgnore,
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the builder copies, as Docker would send them (after .dockerignore)."""
    context = tmp_path_factory.mktemp("context")
    for flags, sources, _ in copies(dockerfile.stage("builder")):
        assert "from" not in flags
        for source in sources:
            origin = ROOT / source
            files = [origin] if origin.is_file() else sorted(p for p in origin.rglob("*")
                                                             if p.is_file())
            for path in files:
                relative = path.relative_to(ROOT).as_posix()
                if not dockerignore.excluded(relative):
                    (context / relative).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, context / relative)
    return context


@pytest.fixture(scope="module")
def wheel(build_context: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--disable-pip-version-check", "--wheel-dir", str(out),
                           str(build_context)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    built = sorted(out.glob("pyscheduler-*.whl"))
    assert len(built) == 1, built
    return built[0]


@dataclass
class Identity:
    """Who runs the entrypoint: the image's USER when the tests run as root, else ourselves."""
    uid: int
    gid: int
    dedicated: bool  # True: a user that owns nothing here, so it can write nowhere but /tmp

    def popen_args(self) -> dict[str, Any]:
        if not self.dedicated:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def _image_user(dockerfile: Dockerfile) -> tuple[int, int]:
    user = dockerfile.final.last("USER").value
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and (not gid or gid.isdigit()), \
        f"USER {user}: must be numeric (runAsNonRoot can only verify a numeric user)"
    return int(uid), int(gid or uid)


@pytest.fixture(scope="module")
def identity(dockerfile: Dockerfile) -> Identity:
    uid, gid = _image_user(dockerfile)
    if os.geteuid() != 0:
        return Identity(os.geteuid(), os.getegid(), dedicated=False)
    return Identity(uid, gid, dedicated=True)


def _interpreter(version: str, identity: Identity) -> str:
    """A Python ``version`` the image's user can run (a root-only pyenv would not do)."""
    candidates = [shutil.which(f"python{version}"), f"/usr/local/bin/python{version}",
                  f"/usr/bin/python{version}"]
    tried = []
    for candidate in candidates:
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        try:
            probe = subprocess.run([candidate, "-c", "import sys, ssl, venv; "
                                    "print(sys.executable, '%d.%d' % sys.version_info[:2])"],
                                   capture_output=True, text=True, timeout=60, cwd="/",
                                   **identity.popen_args())
        except OSError as exc:  # e.g. below a directory only root may enter
            tried.append(f"{candidate}: {exc}")
            continue
        tried.append(f"{candidate}: {probe.stdout.strip() or probe.stderr.strip()[-200:]}")
        if probe.returncode == 0:
            executable, found = str(probe.stdout).split()
            assert found == version
            return executable
    pytest.skip(f"no Python {version} (the image's base) that uid {identity.uid} can run: "
                f"{tried or 'none installed'}")


@dataclass
class Installed:
    root: Path  # readable by the image's user; removed at the end
    venv: Path
    python: str


@pytest.fixture(scope="module")
def installed(dockerfile: Dockerfile, wheel: Path, identity: Identity) -> Iterator[Installed]:
    """The wheel in a fresh virtual environment, installed as the builder installs it."""
    interpreter = _interpreter(_base_python(dockerfile), identity)
    root = Path(tempfile.mkdtemp(prefix="pyscheduler-image-"))
    try:
        root.chmod(0o755)  # the image's user must read the environment, as in the image
        venv = root / "venv"
        proc = subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        # The project's pip installs into it (pip --python): the environment gets no pip of its
        # own, as in the image. Binary wheels only, as in the image. Not compiled to bytecode:
        # that only saves start-up time, and the environment is read-only to the entrypoint.
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
             "-q", "--disable-pip-version-check", "--no-compile", "--only-binary=:all:",
             f"{wheel}{_extras(dockerfile)}"],
            capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"installing the wheel failed:\n{proc.stdout}\n{proc.stderr}"
        yield Installed(root, venv, interpreter)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the Dockerfile, read -------------------------------------------------------------------------

def test_the_entrypoint_is_the_console_script_run_command_in_exec_form(
        dockerfile: Dockerfile) -> None:
    entrypoint = json.loads(dockerfile.final.last("ENTRYPOINT").value)  # exec form: no shell
    scripts = dict(
        (name.strip(), target.strip()) for name, _, target in
        (line.partition("=") for line in
         _setup_cfg()["options.entry_points"]["console_scripts"].strip().splitlines()))
    assert entrypoint[0] in scripts, f"{entrypoint[0]} is not a console script: {scripts}"
    module, _, function = scripts[entrypoint[0]].partition(":")
    assert (module, function) == ("pyscheduler.cli", "main")
    from pyscheduler import cli

    args = cli.build_parser().parse_args(entrypoint[1:])
    assert args.func is cli._run, f"{entrypoint} does not start the scheduler"


def test_the_final_stage_runs_as_a_numeric_non_root_user_it_creates(
        dockerfile: Dockerfile) -> None:
    uid, gid = _image_user(dockerfile)
    assert uid != 0 and gid != 0
    creation = " ".join(i.value for i in dockerfile.final.all("RUN"))
    assert re.search(rf"useradd\b.*--uid {uid}\b.*--gid {gid}\b", creation), \
        f"user {uid} is not created in /etc/passwd"
    assert re.search(rf"groupadd\b.*--gid {gid}\b", creation)
    assert "--no-create-home" in creation, "the user's home would be a writable directory"


def test_the_final_stage_holds_the_virtual_environment_and_needs_no_writes(
        dockerfile: Dockerfile) -> None:
    final = dockerfile.final
    assert [(flags.get("from"), sources, dest) for flags, sources, dest in copies(final)] == \
        [("builder", [IMAGE_VENV], IMAGE_VENV)], "the final stage copies the venv, nothing else"
    env = env_of(final, CONTAINER_BASE_ENV)
    assert env["PATH"].split(":")[0] == f"{IMAGE_VENV}/bin"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/nonexistent"
    builder_runs = " ".join(i.value for i in dockerfile.stage("builder").all("RUN"))
    # Bytecode the interpreter never re-validates against source timestamps nor rewrites.
    assert re.search(rf"compileall .*--invalidation-mode unchecked-hash .*{IMAGE_VENV}",
                     builder_runs)
    assert "--only-binary=:all:" in builder_runs


def test_labels_and_exposed_port(dockerfile: Dockerfile) -> None:
    from pyscheduler.config import parse_config

    labels = dict(
        (key, value) for key, _, value in
        (word.partition("=") for word in shlex.split(
            " ".join(i.value for i in dockerfile.final.all("LABEL")))))
    metadata = _setup_cfg()["metadata"]
    assert labels["org.opencontainers.image.title"] == metadata["name"]
    assert labels["org.opencontainers.image.licenses"] == metadata["license"]
    assert labels["org.opencontainers.image.description"] == metadata["description"]
    assert labels["org.opencontainers.image.version"] == "${VERSION}"
    exposed = {int(i.value.split("/")[0]) for i in dockerfile.final.all("EXPOSE")}
    assert exposed == {parse_config({}, "defaults").metrics_port}


def test_the_image_and_the_deployment_agree(dockerfile: Dockerfile) -> None:
    manifest = ROOT / "manifests" / "deployment.yaml"
    if not manifest.exists():
        pytest.skip("manifests/deployment.yaml does not exist")
    deployment = yaml.safe_load(manifest.read_text())
    pod = deployment["spec"]["template"]["spec"]
    uid, gid = _image_user(dockerfile)
    context = pod.get("securityContext") or {}
    assert context.get("runAsUser", uid) == uid and context.get("runAsGroup", gid) == gid
    container = pod["containers"][0]
    assert container["image"].split(":")[0] == "pyscheduler"
    assert "command" not in container, "the Deployment must keep the image's ENTRYPOINT"
    ports = {p["containerPort"] for p in container.get("ports") or []}
    exposed = {int(i.value.split("/")[0]) for i in dockerfile.final.all("EXPOSE")}
    assert exposed <= ports


def test_the_context_holds_what_the_builder_copies_and_nothing_else(
        dockerfile: Dockerfile, dockerignore: DockerIgnore, build_context: Path) -> None:
    for _, sources, _ in copies(dockerfile.stage("builder")):
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file"
            assert not dockerignore.excluded(source.rstrip("/")), \
                f".dockerignore leaves out {source}, which the builder copies"
    for left_out in (".venv", ".git", "tests", "hack", "fragments", "dist", "build",
                     "pyscheduler/__pycache__/cli.cpython-311.pyc"):
        assert dockerignore.excluded(left_out), f".dockerignore lets {left_out} in"
    sent = {p.relative_to(build_context).as_posix() for p in build_context.rglob("*")
            if p.is_file()}
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pyscheduler").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert package <= sent
    assert not any("__pycache__" in path for path in sent)


# -- the wheel ------------------------------------------------------------------------------------

def test_the_wheel_holds_the_package_its_data_and_the_entry_point(
        wheel: Path, build_context: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert archive.read(DEFAULT_FRAGMENT) == (ROOT / DEFAULT_FRAGMENT).read_bytes()
        entry_points = archive.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "pyscheduler/py.typed" in names
    modules = {p.relative_to(build_context).as_posix()
               for p in (build_context / "pyscheduler").rglob("*.py")}
    assert modules <= names, f"missing from the wheel: {sorted(modules - names)[:10]}"
    assert re.search(r"^pyscheduler = pyscheduler\.cli:main$", entry_points, re.M)


def test_the_wheel_of_the_repository_holds_no_simulator(tmp_path: Path) -> None:
    """``make wheel`` (a wheel of the repository as it is) ships the scheduler only: the embedded
    cluster and the simulated cloud are the package in sim/, with dependencies of their own."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--disable-pip-version-check", "--wheel-dir", str(tmp_path),
                           str(ROOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    [built] = sorted(tmp_path.glob("pyscheduler-*.whl"))
    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"pyscheduler"}, packages
    assert not [n for n in names if "sim" in n.split("/")[-1].removesuffix(".py").split("_")
                or n.startswith(("pyscheduler/sim/", "sim/"))], names
    requires = [line for line in metadata.decode().splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    # What only the embedded cluster needs (TLS certificates, JSON patch) is not required.
    assert not [r for r in requires if "cryptography" in r or "jsonpatch" in r], requires
    assert "Requires-Dist: pyscheduler-sim; extra == \"sim\"" in metadata.decode()


def test_sim_commands_say_how_to_install_the_embedded_cluster_when_it_is_absent(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    from pyscheduler import cli

    def no_plugins(**kwargs: Any) -> list[Any]:
        return []

    monkeypatch.setattr(importlib.metadata, "entry_points", no_plugins)
    for argv in (["sim", "up", "--workdir", "x"], ["cloud-sim", "serve"]):
        # (Not cli.main: it would point the process-wide logging at this test's captured output.)
        args = cli.build_parser().parse_args(argv)
        assert args.func(args) == 2
        err = capsys.readouterr().err
        assert err == (f"pyscheduler {argv[0]}: not installed here: it comes with the embedded "
                       "cluster, a package of its own: pip install ./sim from a checkout of "
                       "pyscheduler, or pip install 'pyscheduler[sim]'\n"), err
    assert "sim" in cli.build_parser().format_help()  # listed, with the hint


def test_the_base_python_is_supported_and_is_the_one_the_wheel_is_tested_with(
        dockerfile: Dockerfile, installed: Installed) -> None:
    version = _base_python(dockerfile)
    assert version == dockerfile.args["PYTHON_VERSION"]
    metadata = _setup_cfg()
    assert version in SpecifierSet(metadata["options"]["python_requires"])
    assert f"Programming Language :: Python :: {version}" in metadata["metadata"]["classifiers"]
    probe = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import sys, importlib.metadata as m; "
         "print('%d.%d' % sys.version_info[:2]); print(m.metadata('wasmtime')['Requires-Python'])"],
        capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    tested, wasmtime_requires = probe.stdout.split("\n")[:2]
    assert tested == version
    assert version in SpecifierSet(wasmtime_requires), \
        f"wasmtime needs Python {wasmtime_requires}, the image has {version}"


# -- the installed entrypoint against the embedded cluster ----------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory below ``root`` with its size and modification time."""
    state = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            state[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
    return state


@dataclass
class SimCluster:
    workdir: Path
    kubeconfig: Path  # as `sim up` wrote it (embedded CA data), for the suite
    server: str
    token: str
    ca_pem: str


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """``pyscheduler sim up`` (the project's own), three nodes, no simulated cloud."""
    import base64

    workdir = tmp_path_factory.mktemp("sim")
    log = (workdir / "sim.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "pyscheduler.cli", "sim", "up", "--workdir",
                             str(workdir), "--nodes", "3", "--no-cloud"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        kubeconfig = workdir / "kubeconfig"
        deadline = time.monotonic() + 60
        while not kubeconfig.exists():
            assert proc.poll() is None, f"sim up exited: {(workdir / 'sim.log').read_text()}"
            assert time.monotonic() < deadline, "sim up wrote no kubeconfig within 60 s"
            time.sleep(0.1)
        document = yaml.safe_load(kubeconfig.read_text())
        cluster = document["clusters"][0]["cluster"]
        yield SimCluster(workdir, kubeconfig, cluster["server"],
                         document["users"][0]["user"]["token"],
                         base64.b64decode(cluster["certificate-authority-data"]).decode())
    finally:
        _stop(proc, signal.SIGINT)
        log.close()


def _install_crd_and_namespace(sim: SimCluster, lease_namespace: str) -> None:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    try:
        crd = yaml.safe_load((ROOT / "manifests" / "crd-wsspschedulerconfiguration.yaml")
                             .read_text())
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        try:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": lease_namespace}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    finally:
        api.close()


def _lease_holder(sim: SimCluster, namespace: str, name: str) -> str | None:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
        holder: str | None = lease.spec.holder_identity
        return holder
    finally:
        api.close()


def _scheduler_config(root: Path, port: int, fragment_dir: Path) -> dict[str, Any]:
    """The configuration the manifests install (when they exist), with the metrics on a free
    loopback port and fragments read from ``fragment_dir`` instead of MinIO."""
    shipped = ROOT / "manifests" / "config" / "scheduler.yaml"
    document: dict[str, Any] = yaml.safe_load(shipped.read_text()) if shipped.exists() else {}
    document["metricsAddress"] = f"127.0.0.1:{port}"
    document["storage"] = {"allowedFileDirs": [str(fragment_dir)]}
    (root / "scheduler.yaml").write_text(yaml.safe_dump(document))
    from pyscheduler.config import load_config

    load_config(str(root / "scheduler.yaml"))  # a bad shipped configuration fails here first
    return document


def test_the_installed_entrypoint_schedules_on_the_embedded_cluster(
        dockerfile: Dockerfile, installed: Installed, identity: Identity,
        sim: SimCluster, tmp_path: Path) -> None:
    from pyscheduler.config import load_config

    root = installed.root
    # What the process may read, readable by the image's user; the token is a loopback test's.
    (root / "ca.crt").write_text(sim.ca_pem)
    (root / "kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": sim.server,
                                                 "certificate-authority": str(root / "ca.crt")}}],
        "users": [{"name": "sim", "user": {"token": sim.token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}]}))
    fragment_dir = root / "fragments"
    fragment_dir.mkdir()
    port = _free_port()
    document = _scheduler_config(root, port, fragment_dir)
    config = load_config(str(root / "scheduler.yaml"))
    for path in (root / "ca.crt", root / "kubeconfig", root / "scheduler.yaml"):
        path.chmod(0o644)
    fragment_dir.chmod(0o755)
    # The emptyDir a pod would mount at /tmp: the only place the process could write.
    tmpdir = root / "tmp"
    tmpdir.mkdir(mode=0o700)
    if identity.dedicated:
        os.chown(tmpdir, identity.uid, identity.gid)
    le = config.leader_election
    _install_crd_and_namespace(sim, le.lease_namespace)

    final = dockerfile.final
    env = env_of(final, {**CONTAINER_BASE_ENV, "TMPDIR": str(tmpdir)})
    env = {key: value.replace(IMAGE_VENV, str(installed.venv)) for key, value in env.items()}
    home = Path(env["HOME"])
    assert not home.exists(), f"HOME={home} exists on this machine: the test needs it absent"
    entrypoint = json.loads(final.last("ENTRYPOINT").value)
    executable = shutil.which(entrypoint[0], path=env["PATH"])
    assert executable == str(installed.venv / "bin" / entrypoint[0]), executable
    workdir = final.last("WORKDIR").value
    # The package, and so its fragment, is the installed one (not this checkout).
    where = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import pyscheduler.wasm.manager as m; print(m.PACKAGED_DIR)"],
        env=env, cwd=workdir, capture_output=True, text=True, timeout=60,
        **identity.popen_args())
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.venv / "lib"), where.stdout

    before = _tree(installed.venv)
    started = time.time()

    def written() -> list[str]:
        """What the process wrote: into its environment, into $TMPDIR, or anywhere else."""
        found = [f"{installed.venv}: {path}" for path in
                 sorted(set(_tree(installed.venv).items()) ^ set(before.items()))]
        found += [str(path) for path in tmpdir.iterdir()]
        if identity.dedicated and shutil.which("find"):
            # A user that owns nothing can write only into world-writable directories.
            places = [p for p in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(p)]
            scan = subprocess.run(
                ["find", *places, "-xdev", "-path", str(tmpdir), "-prune", "-o",
                 "-user", str(identity.uid), "-newermt", f"@{started - 1:.0f}", "-print"],
                capture_output=True, text=True, timeout=120)
            found += scan.stdout.split()
        return found

    log_path = tmp_path / "scheduler.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [executable, *entrypoint[1:], "--kubeconfig", str(root / "kubeconfig"),
             "--config", str(root / "scheduler.yaml")],
            env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
            **identity.popen_args())
        try:
            metrics = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while _http_status(f"{metrics}/readyz") != 200:
                assert proc.poll() is None, \
                    f"the entrypoint exited ({proc.returncode}):\n{log_path.read_text()}"
                assert time.monotonic() < deadline, \
                    f"/readyz not ready within 120 s:\n{log_path.read_text()}"
                time.sleep(0.2)

            junit = tmp_path / "e2e.xml"
            default = document.get("scheduleFragment", "default:v1.0.0")
            suite_env = {key: value for key, value in os.environ.items()
                         if not key.startswith("E2E_")}
            suite_env.update({
                "E2E_KUBECONFIG": str(sim.kubeconfig), "E2E_METRICS_URL": metrics,
                "E2E_FRAGMENT_DIR": str(fragment_dir), "E2E_SCHEDULER_NAME": config.scheduler_name,
                "E2E_LEASE_NAME": le.lease_name, "E2E_LEASE_NAMESPACE": le.lease_namespace,
                "E2E_DEFAULT_FRAGMENT": default.replace(":", "-") if default else "",
                "E2E_TIMEOUT_SECONDS": "60"})
            suite = subprocess.run(
                [sys.executable, "-m", "pytest", "tests/e2e", "-q", "-p", "no:cacheprovider",
                 f"--junitxml={junit}"],
                cwd=ROOT, env=suite_env, capture_output=True, text=True, timeout=600)
            assert suite.returncode == 0, \
                f"tests/e2e failed:\n{suite.stdout[-6000:]}\n{suite.stderr[-2000:]}\n" \
                f"scheduler log:\n{log_path.read_text()[-4000:]}"
            cases = ET.parse(junit).getroot().iter("testcase")
            outcomes = {case.get("name"): [child.tag for child in case] for case in cases}
            skipped = {name for name, tags in outcomes.items() if "skipped" in tags}
            # The scheduler is a process here, not pods in a namespace: only that one skips.
            assert skipped == {"test_every_scheduler_replica_is_ready"}, outcomes
            assert len(outcomes) >= 9, outcomes
            assert proc.poll() is None, "the scheduler died during the suite"
            # While it runs (a temporary file would be gone after exit): nothing written.
            assert written() == [], "the entrypoint wrote files"
        finally:
            returncode = _stop(proc)  # SIGTERM, as the kubelet stops a container
    log_text = log_path.read_text()
    assert returncode == 0, f"the entrypoint exited {returncode} on SIGTERM:\n{log_text}"
    # It handed the lease back on the way out, so a standby takes over at once.
    assert not _lease_holder(sim, le.lease_namespace, le.lease_name)
    records = [json.loads(line) for line in log_text.splitlines() if line.startswith("{")]
    assert records, f"no JSON log lines (the image logs JSON without a terminal):\n{log_text}"
    errors = [r for r in records if r.get("level") in ("error", "critical")]
    assert not errors, errors
    assert "Permission denied" not in log_text and "Read-only file system" not in log_text
    assert written() == [], "the entrypoint wrote files"


# -- make image -----------------------------------------------------------------------------------

def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_make_image_says_which_engine_is_missing(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    _stub(tmp_path, "docker", "exit 1")  # installed, but no daemon answers `docker info`
    _stub(tmp_path, "podman", "exit 125")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "image"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "docker (installed, but 'docker info' fails" in proc.stderr, proc.stderr
    assert "podman (installed, but 'podman info' fails" in proc.stderr, proc.stderr


def test_make_image_builds_with_the_engine_that_answers(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    record = tmp_path / "calls"
    _stub(tmp_path, "docker", "exit 1")
    _stub(tmp_path, "podman", f'echo "$@" >> {record}')
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "image", "IMAGE=pyscheduler:t1"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    from pyscheduler import __version__

    calls = record.read_text().splitlines()
    assert calls[0] == "info"
    words = calls[1].split()
    assert words[0] == "build" and words[-3:] == ["-t", "pyscheduler:t1", "."]
    assert f"VERSION={__version__}" in words


# -- the kind end-to-end script -------------------------------------------------------------------

@pytest.mark.timeout(3600)
def test_the_kind_script_parses_and_runs_where_docker_and_kind_are(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(KIND_SCRIPT)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert os.access(KIND_SCRIPT, os.X_OK), "hack/kind-e2e.sh is not executable"
    missing = []
    if shutil.which("docker") is None:
        missing.append("docker is not installed")
    elif subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        missing.append("no Docker engine answers 'docker info'")
    if shutil.which("kind") is None:
        missing.append("kind is not installed")
    if missing:
        pytest.skip(f"hack/kind-e2e.sh needs Docker and kind: {'; '.join(missing)}")
    run = subprocess.run(["bash", str(KIND_SCRIPT)], cwd=ROOT, capture_output=True, text=True,
                         timeout=3600,
                         env={**os.environ, "KIND_CLUSTER_NAME": f"pyscheduler-t{os.getpid()}"})
    assert run.returncode == 0, f"{run.stdout[-8000:]}\n{run.stderr[-4000:]}"
