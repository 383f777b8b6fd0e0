#!/usr/bin/env bash
# The demo: start the embedded cluster, drive it with plain kubectl, stop it again.
# KEEP=1 leaves the cluster running at the end (Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
workdir="${DEMO_DIR:-.demo}"
rm -rf "$workdir"; mkdir -p "$workdir"
export KUBECONFIG="$PWD/$workdir/kubeconfig"
cache="$PWD/$workdir/kube-cache"

pyscheduler sim up --workdir "$workdir" --cluster examples/cluster.yaml --log-format json \
  >"$workdir/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null || true' EXIT
for _ in $(seq 200); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
[ -s "$KUBECONFIG" ] || { echo "the embedded cluster did not start:"; cat "$workdir/sim.log"; exit 1; }
k() { echo "\$ kubectl $*"; kubectl --cache-dir "$cache" "$@"; echo; }
say() { printf '== %s\n\n' "$*"; }

say "The embedded cluster is up at $(grep -o 'https://[0-9.:]*' "$KUBECONFIG"): a loopback API server, simulated kubelets and controllers"
k get nodes -L topology.kubernetes.io/zone,node.kubernetes.io/instance-type
k get nodes -o 'custom-columns=NAME:.metadata.name,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,GPU:.status.allocatable.nvidia\.com/gpu,TAINTS:.spec.taints[*].key'

say "A pod that names its node runs on the simulated kubelet"
k apply -f examples/pinned-pod.yaml
sleep 1
k get pods -o wide
k get events --field-selector involvedObject.name=pinned

say "Controllers: a Deployment makes a ReplicaSet and pods (Pending: no scheduler runs here yet)"
k create deployment web --image=nginx:1.27 --replicas=3
sleep 1
k get deployments,replicasets,pods
k scale deployment web --replicas=1
sleep 1
k get pods -l app=web

say "Fault injection: a node that goes NotReady gets the node lifecycle taints"
k annotate node general-1 sim.pyscheduler.io/condition=NotReady
sleep 1
k get node general-1 -o 'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,TAINTS:.spec.taints[*].key'
k annotate node general-1 sim.pyscheduler.io/condition=Ready --overwrite

k delete deployment web
k delete pod pinned

cat <<TXT
== To use the embedded cluster yourself:
   .venv/bin/pyscheduler sim up --workdir $workdir --cluster examples/cluster.yaml &
   export KUBECONFIG=$PWD/$workdir/kubeconfig
   kubectl get nodes
TXT
if [ "${KEEP:-0}" = 1 ]; then
  echo "(KEEP=1: the cluster keeps running; Ctrl-C stops it)"; wait $sim
fi
