"""The command line as users run it: exit codes, messages, files written."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

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
