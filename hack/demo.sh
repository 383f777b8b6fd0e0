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

say "Fragment storage: an S3 server on loopback (the MinIO protocol) and the WsspSchedulerConfiguration CRD"
s3port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python -m moto.server -H 127.0.0.1 -p "$s3port" >"$workdir/s3.log" 2>&1 &
s3=$!
trap 'kill $s3 $sim 2>/dev/null; wait $s3 $sim 2>/dev/null || true' EXIT
export MINIO_ENDPOINT="127.0.0.1:$s3port" MINIO_ACCESS_KEY=demo MINIO_SECRET_KEY=demo-secret-key
python - "$workdir/scheduler.yaml" <<'PY'
import os, sys, yaml
path = sys.argv[1]
config = yaml.safe_load(open(path))
config["storage"].update(endpoint=os.environ["MINIO_ENDPOINT"],
                         accessKey=os.environ["MINIO_ACCESS_KEY"],
                         secretKey=os.environ["MINIO_SECRET_KEY"])
# Quick moves back for the demo (defaults: a sweep every 30 s, 60 s on the cloud first).
config["rebalancer"].update(intervalSeconds=2, minCloudSeconds=3)
open(path, "w").write(yaml.safe_dump(config, sort_keys=False))
PY
k apply -f manifests/crd-wsspschedulerconfiguration.yaml

say "pyscheduler runs next to it (pods choose it with spec.schedulerName: pyscheduler)"
pyscheduler run --kubeconfig "$KUBECONFIG" --config "$workdir/scheduler.yaml" --log-format json \
  >"$workdir/scheduler.log" 2>&1 &
sched=$!
trap 'kill $sched $s3 $sim 2>/dev/null; wait $sched $s3 $sim 2>/dev/null || true' EXIT
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

say "WebAssembly fragments: placement logic chosen per pod, published to object storage, hot-swapped"
k label node general-0 general-1 cost-tier=spot
k label node general-2 cost-tier=standard
k label node general-3 cost-tier=premium
tier='{"label": "cost-tier", "allowed": ["spot", "standard"], "preferred": "spot"}'
kubectl --cache-dir "$cache" get nodes -o yaml >"$workdir/nodes.yaml"
echo "\$ pyscheduler fragment test fragments/examples/cost-tier/cost-tier.wasm --cluster nodes.yaml --pods examples/tiered.yaml  (offline what-if)"
python - "$workdir/pod.yaml" <<'PY'
import sys, yaml
d = yaml.safe_load(open("examples/tiered.yaml"))
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tiered-example"},
       "spec": d["spec"]["template"]["spec"]}
open(sys.argv[1], "w").write(yaml.safe_dump(pod))
PY
pyscheduler fragment test fragments/examples/cost-tier/cost-tier.wasm --cluster "$workdir/nodes.yaml" \
  --pods "$workdir/pod.yaml" --fragment-config "$tier"
echo
echo "\$ pyscheduler fragment publish fragments/examples/cost-tier/cost-tier.wasm --name cost-tier --version 1.0.0 --fragment-config '$tier'"
pyscheduler fragment publish fragments/examples/cost-tier/cost-tier.wasm --name cost-tier \
  --version 1.0.0 --fragment-config "$tier" --kubeconfig "$KUBECONFIG"
for _ in $(seq 50); do
  [ "$(kubectl --cache-dir "$cache" get wssp cost-tier-v1.0.0 -o jsonpath='{.status.phase}')" = Ready ] && break
  sleep 0.1
done
k get wssp
k apply -f examples/tiered.yaml
sleep 2
k get pods -l app=tiered -o 'custom-columns=POD:.metadata.name,NODE:.spec.nodeName'
k get nodes -L cost-tier
say "Version 1.1.0 prefers the standard tier: pods that name just 'cost-tier' follow it, no restart"
tier2='{"label": "cost-tier", "allowed": ["spot", "standard"], "preferred": "standard"}'
pyscheduler fragment publish fragments/examples/cost-tier/cost-tier.wasm --name cost-tier \
  --version 1.1.0 --fragment-config "$tier2" --kubeconfig "$KUBECONFIG"
for _ in $(seq 50); do
  [ "$(kubectl --cache-dir "$cache" get wssp cost-tier-v1.1.0 -o jsonpath='{.status.phase}')" = Ready ] && break
  sleep 0.1
done
k scale deployment tiered --replicas=6
sleep 2
k get pods -l app=tiered -o 'custom-columns=POD:.metadata.name,NODE:.spec.nodeName'
echo "\$ pyscheduler fragment list"
pyscheduler fragment list --kubeconfig "$KUBECONFIG"
echo
fetch http://127.0.0.1:10259/metrics | grep -E '^pyscheduler_fragment_(calls_total|info)' | grep -v 'result="ok"} 0' || true
echo
k delete -f examples/tiered.yaml --wait=false

say "Cloud bursting: more pods than the real nodes hold; the rest runs behind virtual nodes"
k get nodes -l type=virtual-kubelet -o 'custom-columns=NAME:.metadata.name,PLATFORM:.metadata.labels.wssp/cloud-platform,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,PODS:.status.allocatable.pods,TAINTS:.spec.taints[*].key'
k apply -f examples/burst.yaml
for _ in $(seq 150); do
  n=$(kubectl --cache-dir "$cache" get pods -l app=burst --field-selector status.phase=Running -o name | wc -l)
  [ "$n" -ge 14 ] && break; sleep 0.2
done
k get pods -l app=burst -o 'custom-columns=POD:.metadata.name,NODE:.spec.nodeName,IP:.status.podIP,VIRTUAL:.metadata.labels.wssp/virtual-node'
virtual_pod=$(kubectl --cache-dir "$cache" get pods -l app=burst,wssp/virtual-node=true \
  -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
[ -n "$virtual_pod" ] && k get events --field-selector "involvedObject.name=$virtual_pod" \
  -o 'custom-columns=REASON:.reason,MESSAGE:.message'
on_cloud() { kubectl --cache-dir "$cache" get pods -l app=burst -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c wssp-virtual || true; }
before=$(on_cloud)
say "Capacity frees up (web scales to zero): the rebalancer moves cloud pods back"
k scale deployment web --replicas=0
for _ in $(seq 100); do
  [ "$(on_cloud)" -lt "$before" ] && [ "$(kubectl --cache-dir "$cache" get pods -l app=burst --field-selector status.phase=Running -o name | wc -l)" -ge 14 ] && break
  sleep 0.3
done
sleep 2
k get pods -l app=burst -o 'custom-columns=POD:.metadata.name,NODE:.spec.nodeName'
k get events --field-selector reason=Rebalance -o 'custom-columns=POD:.involvedObject.name,MESSAGE:.message'
fetch http://127.0.0.1:10259/metrics | grep -E '^pyscheduler_(virtual_bursts_total|rebalance_moves_total|cloud_requests_total)' | grep -v ' 0.0$' | head -12 || true
echo
k delete -f examples/burst.yaml --wait=false

echo "== Scheduler metrics (kube-scheduler's names)"
fetch http://127.0.0.1:10259/metrics | grep -E '^scheduler_schedule_attempts_total|^scheduler_pending_pods' || true
echo

say "Fault injection: a node that goes NotReady gets the node lifecycle taints"
k annotate node general-1 sim.pyscheduler.io/condition=NotReady
sleep 1
k get node general-1 -o 'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,TAINTS:.spec.taints[*].key'
k annotate node general-1 sim.pyscheduler.io/condition=Ready --overwrite

k delete -f examples/workloads.yaml --wait=false --ignore-not-found
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
