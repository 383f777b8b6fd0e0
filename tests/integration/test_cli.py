"""The command line as users run it: exit codes, messages, files written."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pyscheduler.config import load_config

CLI = [sys.executable, "-m", "pyscheduler.cli"]


def test_run_with_a_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "scheduler.yaml"
    bad.write_text("schedulerName: pyscheduler\nbindConcurency: 4\n")
    proc = subprocess.run([*CLI, "run", "--config", str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "bindConcurency" in proc.stderr and "bindConcurrency" in proc.stderr


def test_sim_up_with_a_bad_cluster_file_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("nodePools:\n  - name: a\n    count: -1\n")
    proc = subprocess.run([*CLI, "sim", "up", "--workdir", str(tmp_path), "--cluster",
                           str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "nodePools[0].count" in proc.stderr


def test_sim_up_writes_a_kubeconfig_and_a_ready_scheduler_config(tmp_path: Path) -> None:
    proc = subprocess.Popen([*CLI, "sim", "up", "--workdir", str(tmp_path), "--nodes", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "listening on https://127.0.0.1:" in first and "with 2 nodes" in first
        kubeconfig = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        config = load_config(str(tmp_path / "scheduler.yaml"))
        assert config.scheduler_name == "pyscheduler"
        nodes = subprocess.run(["kubectl", "--kubeconfig", str(tmp_path / "kubeconfig"),
                                "get", "nodes", "-o", "name"], capture_output=True, text=True,
                               timeout=60)
        assert nodes.stdout.split() == ["node/node-0", "node/node-1"]
    finally:
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0


# -- stopping always works, and every failure is one line --------------------------------------

def unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig for an API server that is not there (nothing listens on the port)."""
    from tests.conftest import free_port

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {
            "server": f"https://127.0.0.1:{free_port()}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}))
    return path


def ends_within(proc: subprocess.Popen[str], seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.poll()


def wait_for_line(proc: subprocess.Popen[str], text: str, seconds: float = 30) -> str:
    """Read the process's merged output until a line containing ``text``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r} in:\n{''.join(seen)}")


@pytest.mark.parametrize(("command", "ready", "sig"), [
    # Before, `run` waited for its informers to sync before it looked at signals: with the API
    # server away, only SIGKILL ended it.
    pytest.param("run", "health server listening", signal.SIGTERM,
                 id="run, API server unreachable, SIGTERM"),
    pytest.param("run", "health server listening", signal.SIGINT,
                 id="run, API server unreachable, SIGINT"),
    pytest.param("sim", "listening on", signal.SIGTERM, id="sim up, SIGTERM"),
    pytest.param("cloud-sim", "listening on", signal.SIGTERM, id="cloud-sim serve, SIGTERM"),
])
def test_long_running_commands_stop_on_a_signal(tmp_path: Path, command: str, ready: str,
                                                sig: signal.Signals) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("metricsAddress: 127.0.0.1:0\n")
    args = {
        "run": ["run", "--kubeconfig", str(unreachable_kubeconfig(tmp_path)), "--config",
                str(config), "--log-format", "console"],
        "sim": ["sim", "up", "--workdir", str(tmp_path), "--nodes", "1", "--no-cloud"],
        "cloud-sim": ["cloud-sim", "serve"],
    }[command]
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        wait_for_line(proc, ready)
        if command == "run":
            time.sleep(1.0)  # the informers are now retrying their first list
        proc.send_signal(sig)
        assert ends_within(proc, 20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_with_its_metrics_port_taken_says_so_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "scheduler.yaml"
        config.write_text(f"metricsAddress: 127.0.0.1:{port}\n")
        proc = subprocess.run([*CLI, "run", "--kubeconfig", str(unreachable_kubeconfig(tmp_path)),
                               "--config", str(config)], capture_output=True, text=True,
                              timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"pyscheduler run: cannot listen on 127.0.0.1:{port} for /metrics and health checks: "
        f"Address already in use")


@pytest.mark.parametrize("command", [["fragment", "list"],
                                     ["fragment", "publish", "{module}", "--name", "m",
                                      "--version", "1.0.0", "--endpoint", "127.0.0.1:1"]],
                         ids=["list", "publish"])
@pytest.mark.parametrize("kubeconfig", ["missing", "garbage", "unreachable"])
def test_fragment_commands_report_a_kubeconfig_problem_in_one_line(
        tmp_path: Path, command: list[str], kubeconfig: str) -> None:
    from tests.integration.test_fragments import uniform_wat, wat_bytes

    module = tmp_path / "m.wasm"
    module.write_bytes(wat_bytes(uniform_wat()))
    path = {"missing": tmp_path / "absent", "garbage": tmp_path / "garbage",
            "unreachable": unreachable_kubeconfig(tmp_path)}[kubeconfig]
    if kubeconfig == "garbage":
        path.write_text("{{ this is: [not a kubeconfig\n")
    args = [a.format(module=module) for a in command]
    proc = subprocess.run([*CLI, *args, "--kubeconfig", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"pyscheduler {' '.join(command[:2])}: "), \
        proc.stderr


@pytest.mark.parametrize(("module", "expected"), [
    pytest.param("wasi-import.wasm", "import wasi_snapshot_preview1.fd_write", id="WASI"),
    pytest.param("invalid.wasm", "not a WebAssembly module", id="not wasm"),
    pytest.param("init-fails.wasm", "wssp_init returned 1", id="refuses its config"),
])
def test_fragment_publish_refuses_a_module_the_scheduler_would_refuse(
        tmp_path: Path, module: str, expected: str) -> None:
    hostile = Path(__file__).resolve().parents[2] / "fragments" / "hostile" / module
    proc = subprocess.run([*CLI, "fragment", "publish", str(hostile), "--name", "h",
                           "--version", "1.0.0", "--kubeconfig", str(tmp_path / "absent"),
                           "--endpoint", "127.0.0.1:1"], capture_output=True, text=True,
                          timeout=120)
    # Refused before the kubeconfig or the object storage is even looked at.
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("pyscheduler fragment publish: ") and expected in proc.stderr


def test_json_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`pyscheduler fragment test ... --json | head` ended in a BrokenPipeError traceback."""
    from tests.integration.test_fragments import uniform_wat, wat_bytes

    module = tmp_path / "m.wasm"
    module.write_bytes(wat_bytes(uniform_wat()))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"nodePools": [{"name": "n", "count": 50, "cpu": "4",
                                                    "memory": "8Gi"}]}))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
         "spec": {"containers": [{"name": "c", "image": "x"}]}} for i in range(100)]))
    proc = subprocess.Popen([*CLI, "fragment", "test", str(module), "--cluster", str(nodes),
                             "--pods", str(pods), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)  # like `head -c 10`: read a little, then go away
    proc.stdout.close()
    proc.wait(60)
    err = proc.stderr.read()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141
