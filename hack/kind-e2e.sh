#!/usr/bin/env bash
# End-to-end test in a kind cluster: create the cluster, build the image and load it into the
# nodes, apply manifests/ (with the image just built), wait for the scheduler, run tests/e2e
# against it, and delete the cluster, whatever happened.
#
#   hack/kind-e2e.sh                      # needs Docker (an engine that answers), kind, kubectl
#   KEEP_CLUSTER=1 hack/kind-e2e.sh       # leave the cluster running afterwards
#
# Settings (environment):
#   KIND_CLUSTER_NAME   cluster name (default pyscheduler-e2e; must not exist yet)
#   KIND_NODE_IMAGE     node image (default: kind's own)
#   IMAGE               image to build and deploy (default pyscheduler:kind-e2e)
#   PYTHON              interpreter with pytest and the project installed (default .venv/bin/python,
#                       `make venv` creates it)
#   ROLLOUT_TIMEOUT     bound of each wait for the cluster (default 300s)
#   KEEP_CLUSTER=1      do not delete the cluster at the end
#   PYTEST_ARGS         extra pytest arguments (e.g. "-x -k fragment")
#
# The manifests need the prometheus-operator CRDs for their ServiceMonitor and PrometheusRule;
# when the cluster lacks them (a fresh kind cluster does) those two objects are left out.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER=${KIND_CLUSTER_NAME:-pyscheduler-e2e}
IMAGE=${IMAGE:-pyscheduler:kind-e2e}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-300s}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
NAMESPACE=pyscheduler-system
LEASE=pyscheduler

die() {
  echo "kind-e2e: $*" >&2
  exit 2
}

# -- what this needs --------------------------------------------------------------------------
command -v docker >/dev/null 2>&1 \
  || die "docker is not installed (https://docs.docker.com/engine/install/); kind runs its nodes as Docker containers"
docker info >/dev/null 2>&1 \
  || die "docker is installed but no Docker engine answers ('docker info' fails): start the Docker daemon"
command -v kind >/dev/null 2>&1 \
  || die "kind is not installed (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
command -v kubectl >/dev/null 2>&1 \
  || die "kubectl is not installed (https://kubernetes.io/docs/tasks/tools/)"
[ -x "$PYTHON" ] || die "$PYTHON does not exist: run 'make venv' first, or set PYTHON"
"$PYTHON" -c 'import pytest, kubernetes, minio, prometheus_client' 2>/dev/null \
  || die "$PYTHON lacks pytest or the project's dependencies: run 'make venv'"
case "$IMAGE" in
  */*) die "IMAGE=$IMAGE: give a local name:tag without a registry (the manifests deploy 'pyscheduler')" ;;
  *:*) ;;
  *) die "IMAGE=$IMAGE: give name:tag (a :latest tag would make the nodes try to pull it)" ;;
esac
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  die "a kind cluster named $CLUSTER exists already: delete it ('kind delete cluster --name $CLUSTER') or set KIND_CLUSTER_NAME"
fi

WORK=$(mktemp -d)
CREATED=0
FORWARDS=()

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local status=$?
  for pid in ${FORWARDS[@]+"${FORWARDS[@]}"}; do
    kill "$pid" 2>/dev/null || true
  done
  if [ "$CREATED" = 1 ]; then
    if [ "$KEEP_CLUSTER" = 1 ]; then
      echo "kind-e2e: keeping cluster $CLUSTER: 'kind export kubeconfig --name $CLUSTER' to use" \
           "it, 'kind delete cluster --name $CLUSTER' to delete it"
    else
      echo "kind-e2e: deleting cluster $CLUSTER"
      kind delete cluster --name "$CLUSTER" || true
    fi
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() {
  echo
  echo "== $*"
}

# `kubectl port-forward` to $1 (pod/x or svc/y), port $2, from a free local port, which is put
# in the variable named $3. (Not in a $(...) subshell: the process must be known to cleanup.)
port_forward() {
  local log="$WORK/forward-${1//\//-}.log" port=""
  kubectl -n "$NAMESPACE" port-forward "$1" ":$2" >"$log" 2>&1 &
  FORWARDS+=("$!")
  for _ in $(seq 1 150); do
    port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || die "kubectl port-forward $1 did not start: $(cat "$log")"
  printf -v "$3" '%s' "$port"
}

# -- the cluster and the image ----------------------------------------------------------------
step "building $IMAGE"
make -C "$ROOT" image IMAGE="$IMAGE" CONTAINER_ENGINE=docker

step "creating kind cluster $CLUSTER"
cat >"$WORK/kind.yaml" <<'EOF'
# One control plane and two workers: the scheduler's two replicas spread over the workers, and
# the test pods have more than one node to choose from.
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
EOF
# kind writes the cluster's context into $KUBECONFIG: a file of this run's, not the user's.
export KUBECONFIG="$WORK/kubeconfig"
CREATED=1
kind create cluster --name "$CLUSTER" --config "$WORK/kind.yaml" --wait "$ROLLOUT_TIMEOUT" \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}

step "loading $IMAGE into the nodes"
kind load docker-image "$IMAGE" --name "$CLUSTER"

# -- the manifests, with the image just built -------------------------------------------------
step "applying manifests/"
mkdir "$WORK/overlay"
# kustomize takes a base only by a relative path.
BASE=$("$PYTHON" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' \
  "$ROOT/manifests" "$WORK/overlay")
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "  - $BASE"
  echo "images:"
  echo "  - name: pyscheduler"
  echo "    newName: ${IMAGE%:*}"
  echo "    newTag: ${IMAGE##*:}"
  if ! kubectl get crd servicemonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com \
      >/dev/null 2>&1; then
    echo "kind-e2e: no prometheus-operator CRDs in the cluster: leaving out the ServiceMonitor and PrometheusRule" >&2
    echo "patches:"
    echo "  - target:"
    echo "      group: monitoring.coreos.com"
    echo "    patch: |-"
    echo "      \$patch: delete"
    echo "      apiVersion: monitoring.coreos.com/v1"
    echo "      kind: Any"
    echo "      metadata:"
    echo "        name: any"
  fi
} >"$WORK/overlay/kustomization.yaml"
kubectl kustomize "$WORK/overlay" >"$WORK/rendered.yaml"
grep -q "image: $IMAGE\$" "$WORK/rendered.yaml" \
  || die "the rendered manifests do not deploy $IMAGE (is the Deployment's image still 'pyscheduler:<tag>'?)"
kubectl apply -k "$WORK/overlay"

step "waiting for the scheduler and MinIO"
kubectl wait --for condition=Established --timeout "$ROLLOUT_TIMEOUT" \
  crd/wsspschedulerconfigurations.wssp.pyscheduler.io
kubectl -n "$NAMESPACE" rollout status deployment/pyscheduler --timeout "$ROLLOUT_TIMEOUT"
kubectl -n "$NAMESPACE" rollout status statefulset/minio --timeout "$ROLLOUT_TIMEOUT"
kubectl -n "$NAMESPACE" wait --for condition=Complete --timeout "$ROLLOUT_TIMEOUT" \
  job/minio-create-bucket

HOLDER=""
for _ in $(seq 1 150); do
  HOLDER=$(kubectl -n "$NAMESPACE" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' \
    2>/dev/null || true)
  [ -n "$HOLDER" ] && break
  sleep 2
done
[ -n "$HOLDER" ] || die "no replica took the Lease $NAMESPACE/$LEASE"
# The identity is <hostname>_<uuid>, and a pod's hostname is its name.
LEADER=${HOLDER%%_*}
echo "leader: $LEADER"

METRICS_PORT="" S3_PORT=""
port_forward "pod/$LEADER" 10259 METRICS_PORT
port_forward svc/minio 9000 S3_PORT
ACCESS_KEY=$(kubectl -n "$NAMESPACE" get secret pyscheduler-minio -o jsonpath='{.data.accessKey}' | base64 --decode)
SECRET_KEY=$(kubectl -n "$NAMESPACE" get secret pyscheduler-minio -o jsonpath='{.data.secretKey}' | base64 --decode)

# -- the tests --------------------------------------------------------------------------------
step "running tests/e2e"
status=0
(
  cd "$ROOT"
  # shellcheck disable=SC2086  # PYTEST_ARGS is a list of words
  E2E_KUBECONFIG="$KUBECONFIG" \
  E2E_NAMESPACE="$NAMESPACE" \
  E2E_LEASE_NAMESPACE="$NAMESPACE" \
  E2E_LEASE_NAME="$LEASE" \
  E2E_METRICS_URL="http://127.0.0.1:$METRICS_PORT" \
  E2E_S3_ENDPOINT="127.0.0.1:$S3_PORT" \
  E2E_S3_ACCESS_KEY="$ACCESS_KEY" \
  E2E_S3_SECRET_KEY="$SECRET_KEY" \
  E2E_S3_BUCKET=fragments \
  "$PYTHON" -m pytest tests/e2e -v -p no:cacheprovider ${PYTEST_ARGS:-}
) || status=$?

if [ "$status" != 0 ]; then
  step "tests failed ($status): the scheduler's state"
  kubectl -n "$NAMESPACE" get pods -o wide || true
  kubectl -n "$NAMESPACE" logs "pod/$LEADER" --tail 200 || true
fi
exit "$status"
