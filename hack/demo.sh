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

say "pyscheduler runs next to it (pods choose it with spec.schedulerName: pyscheduler)"
pyscheduler run --kubeconfig "$KUBECONFIG" --config "$workdir/scheduler.yaml" --log-format json \
  >"$workdir/scheduler.log" 2>&1 &
sched=$!
trap 'kill $sched $sim 2>/dev/null; wait $sched $sim 2>/dev/null || true' EXIT
fetch() { python -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('$1', timeout=2).read().decode())"; }
for _ in $(seq 100); do fetch http://127.0.0.1:10259/readyz >/dev/null 2>&1 && break; sleep 0.1; done
echo "(scheduler log: $workdir/scheduler.log; metrics: http://127.0.0.1:10259/metrics)"
echo

say "Workloads with spread, anti-affinity, taints and GPUs, node preferences, and two pods that cannot fit"
k apply -f examples/workloads.yaml
for _ in $(seq 100); do
  running=$(kubectl --cache-dir "$cache" get pods --field-selector status.phase=Running -o name | wc -l)
  reported=$(kubectl --cache-dir "$cache" get pod wants-nvme \
    -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status}')
  [ "$running" -ge 16 ] && [ "$reported" = False ] && break; sleep 0.2
done
k get pods -o wide --sort-by=.spec.nodeName
echo "== Placement by node"
kubectl --cache-dir "$cache" get pods -o json | python hack/placement.py
echo
k describe pod wants-nvme | sed -n '/^Conditions/,$p'
echo "\$ kubectl get pod too-big -o jsonpath='{.metadata.annotations.wssp/decision}'"
kubectl --cache-dir "$cache" get pod too-big -o jsonpath='{.metadata.annotations.wssp/decision}'
echo; echo

say "A new node that fits: the waiting pod is scheduled at once"
k label node general-3 disk=nvme
sleep 1
k get pod wants-nvme -o wide

say "Controllers: scaling a Deployment down deletes pods in kube's order"
k scale deployment web --replicas=3
sleep 1.5
k get pods -l app=web -o wide

echo "== Scheduler metrics (kube-scheduler's names)"
fetch http://127.0.0.1:10259/metrics | grep -E '^scheduler_schedule_attempts_total|^scheduler_pending_pods' || true
echo

say "Fault injection: a node that goes NotReady gets the node lifecycle taints"
k annotate node general-1 sim.pyscheduler.io/condition=NotReady
sleep 1
k get node general-1 -o 'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,TAINTS:.spec.taints[*].key'
k annotate node general-1 sim.pyscheduler.io/condition=Ready --overwrite

k delete -f examples/workloads.yaml --wait=false
k delete pod pinned

cat <<TXT
== To use the embedded cluster yourself:
   .venv/bin/pyscheduler sim up --workdir $workdir --cluster examples/cluster.yaml &
   export KUBECONFIG=$PWD/$workdir/kubeconfig
   kubectl get nodes
   .venv/bin/pyscheduler run --kubeconfig $workdir/kubeconfig --config $workdir/scheduler.yaml &
   kubectl apply -f examples/workloads.yaml
TXT
if [ "${KEEP:-0}" = 1 ]; then
  echo "(KEEP=1: the cluster keeps running; Ctrl-C stops it)"; wait $sim
fi
