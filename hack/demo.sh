#!/usr/bin/env bash
# The demo: start the embedded cluster, use it with plain kubectl, and stop it again.
# Set KEEP=1 to leave the cluster running at the end (Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
workdir="${DEMO_DIR:-.demo}"
rm -rf "$workdir"; mkdir -p "$workdir"
export KUBECONFIG="$PWD/$workdir/kubeconfig"
export KUBECACHEDIR="$PWD/$workdir/kube-cache"

pyscheduler sim up --workdir "$workdir" --cluster examples/cluster.yaml --log-format json \
  >"$workdir/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
[ -s "$KUBECONFIG" ] || { echo "the embedded cluster did not start:"; cat "$workdir/sim.log"; exit 1; }
k() { echo "\$ kubectl $*"; kubectl --cache-dir "$KUBECACHEDIR" "$@"; echo; }

head -1 "$workdir/sim.log" >/dev/null
echo "== the embedded cluster is up: $(grep -o 'http://[0-9.:]*' "$KUBECONFIG")"
echo
k get nodes -L topology.kubernetes.io/zone,node.kubernetes.io/instance-type
k create deployment web --image=nginx:1.27 --replicas=3
sleep 1.5
k get deployments,replicasets,pods -o wide
k scale deployment web --replicas=1
sleep 2
k get pods
k delete deployment web

cat <<TXT
== To use the embedded cluster yourself:
   pyscheduler sim up --workdir $workdir --cluster examples/cluster.yaml &
   export KUBECONFIG=$PWD/$workdir/kubeconfig
   kubectl get nodes
TXT
if [ "${KEEP:-0}" = 1 ]; then
  echo "(KEEP=1: the cluster keeps running; Ctrl-C stops it)"; wait $sim
fi
