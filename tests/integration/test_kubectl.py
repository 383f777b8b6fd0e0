"""kubectl, unmodified, against the embedded cluster."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time

import pytest
from kubernetes import client

from pyscheduler_sim.admission import TOPOLOGY_LABELS
from tests.conftest import Kubectl, wait_for

pytestmark = pytest.mark.kubectl

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: demo}}
spec:
  nodeName: {node}
  containers:
    - name: c
      image: nginx:1.27
      resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"""


def test_get_nodes_prints_kube_columns(kubectl: Kubectl) -> None:
    out = kubectl("get", "nodes").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [line.split()[:2] for line in out[1:]] == [
        ["node-0", "Ready"], ["node-1", "Ready"], ["node-2", "Ready"]]


def test_create_get_label_annotate_describe_delete(kubectl: Kubectl, namespace: str) -> None:
    created = kubectl("create", "-n", namespace, "-f", "-",
                      input=POD.format(name="demo", node="node-1"))
    assert created.stdout.strip() == "pod/demo created"
    wait_for(lambda: kubectl.json("get", "pod", "demo", "-n", namespace)["status"]
             .get("phase") == "Running", what="Running")
    wide = kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert wide[1].split()[:3] == ["demo", "1/1", "Running"] and "node-1" in wide[1]

    assert "pod/demo labeled" in kubectl("label", "pod", "demo", "-n", namespace,
                                         "tier=web").stdout
    assert "pod/demo annotated" in kubectl("annotate", "pod", "demo", "-n", namespace,
                                           "note=hello").stdout
    pod = kubectl.json("get", "pod", "demo", "-n", namespace)
    node = kubectl.json("get", "node", "node-1")["metadata"]["labels"]
    # Created on a node, the pod carries the node's topology labels (kube's
    # PodTopologyLabels admission).
    assert pod["metadata"]["labels"] == {
        "app": "demo", "tier": "web", **{k: node[k] for k in TOPOLOGY_LABELS}}
    assert pod["metadata"]["annotations"]["note"] == "hello"
    assert kubectl("get", "pods", "-n", namespace, "-l", "tier=web", "-o", "name"
                   ).stdout.strip() == "pod/demo"

    described = kubectl("describe", "pod", "demo", "-n", namespace).stdout
    # (kubectl aligns the values to the longest key shown, which depends on the fields set.)
    assert re.search(r"^Node:\s+node-1/", described, re.MULTILINE), described
    assert re.search(r"^QoS Class:\s+Burstable$", described, re.MULTILINE), described

    kubectl("delete", "pod", "demo", "-n", namespace, "--wait=true")
    assert kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.strip() == ""


def test_label_overwrite_and_removal(kubectl: Kubectl, namespace: str) -> None:
    kubectl("create", "-n", namespace, "-f", "-", input=POD.format(name="l", node="node-0"))
    failed = kubectl("label", "pod", "l", "-n", namespace, "app=other", check=False)
    assert failed.returncode != 0 and "already has a value" in failed.stderr
    kubectl("label", "pod", "l", "-n", namespace, "app=other", "--overwrite")
    kubectl("label", "pod", "l", "-n", namespace, "app-")
    assert set(kubectl.json("get", "pod", "l", "-n", namespace)["metadata"]["labels"]) == set(
        TOPOLOGY_LABELS)


def test_apply_creates_then_updates(kubectl: Kubectl, namespace: str) -> None:
    cm = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\n"
          "data: {{level: '{level}'}}\n")
    assert "created" in kubectl("apply", "-n", namespace, "-f", "-",
                                input=cm.format(level=1)).stdout
    assert "configured" in kubectl("apply", "-n", namespace, "-f", "-",
                                   input=cm.format(level=2)).stdout
    assert kubectl.json("get", "cm", "settings", "-n", namespace)["data"] == {"level": "2"}


def test_get_watch_streams_changes(kubectl: Kubectl, namespace: str) -> None:
    proc = subprocess.Popen([*kubectl.base, "get", "pods", "-n", namespace, "-w",
                             "--output-watch-events"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        time.sleep(1.0)
        kubectl("create", "-n", namespace, "-f", "-", input=POD.format(name="w", node="node-2"))
        wait_for(lambda: any("Running" in line for line in lines), timeout=15,
                 what="watch output showing the pod Running")
    finally:
        proc.terminate()
        proc.wait(10)
    events = [line.split()[0] for line in lines if line.split() and line.split()[0] != "EVENT"]
    assert events[0] == "ADDED" and "MODIFIED" in events


def test_create_deployment_and_scale(kubectl: Kubectl, namespace: str,
                                     core: client.CoreV1Api) -> None:
    kubectl("create", "deployment", "web", "-n", namespace, "--image=nginx:1.27",
            "--replicas=3")
    wait_for(lambda: len(core.list_namespaced_pod(namespace, label_selector="app=web").items)
             == 3, what="3 pods")
    out = kubectl("get", "deployment", "web", "-n", namespace).stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    kubectl("scale", "deployment", "web", "-n", namespace, "--replicas=1")
    wait_for(lambda: len([p for p in core.list_namespaced_pod(
        namespace, label_selector="app=web").items if not p.metadata.deletion_timestamp]) == 1,
        what="scaled to 1")
    dep = kubectl.json("get", "deployment", "web", "-n", namespace)
    assert dep["spec"]["replicas"] == 1


def test_crd_with_printer_columns(kubectl: Kubectl) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {"group": "example.org", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                           "shortNames": ["gd"]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "additionalPrinterColumns": [
                                   {"name": "Color", "type": "string",
                                    "jsonPath": ".spec.color"}],
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}}
    kubectl("create", "-f", "-", input=json.dumps(crd))
    try:
        kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "example.org/v1", "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": "default"}, "spec": {"color": "teal"}}))
        out = kubectl("get", "gd", "-n", "default").stdout.splitlines()
        assert out[0].split() == ["NAME", "COLOR"]
        assert out[1].split() == ["g1", "teal"]
    finally:
        kubectl("delete", "crd", "gadgets.example.org")


def test_errors_are_reported_like_a_real_server(kubectl: Kubectl) -> None:
    missing = kubectl("get", "pod", "nope", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in missing.stderr
    bad = kubectl("create", "configmap", "Bad_Name", check=False)
    assert bad.returncode == 1 and "Invalid" in bad.stderr
