# Everything sets itself up from nothing: a fresh machine needs only Python 3.11 (or python3).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test typecheck lint-imports unit demo bench bench-apiserver bench-scheduler \
	bench-fragments bench-bursting bench-fairness bench-shapes bench-startup bench-scale bench-pairs \
	bench-kube \
	fragments \
	toolchain test-wasmer clean image wheel

$(STAMP): setup.cfg pyproject.toml sim/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,fast]'
	$(PY) -m pip install -q --disable-pip-version-check -e ./sim
	touch $(STAMP)

venv: $(STAMP)

typecheck: venv
	$(VENV)/bin/mypy

lint-imports: venv
	$(VENV)/bin/lint-imports --no-cache

# Guest toolchains (clang + lld for C fragments, wabt for WAT), so that the tests can check the
# committed .wasm files against their sources, and Prometheus (prometheus + promtool), which the
# monitoring test starts on loopback to run every dashboard query and alert. Installed with
# apt-get when missing and possible. The prometheus package must not leave a service running:
# a policy-rc.d refusing every start is put in place for the install when there is none, and
# on a machine run by systemd the unit is stopped and disabled afterwards.
toolchain:
	@if ! command -v clang >/dev/null || ! command -v wasm-ld >/dev/null \
	    || ! command -v wat2wasm >/dev/null || ! command -v prometheus >/dev/null \
	    || ! command -v promtool >/dev/null; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    policy=; \
	    if [ ! -e /usr/sbin/policy-rc.d ]; then \
	      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
	      && policy=1; \
	    fi; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      clang lld wabt >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends prometheus >/dev/null; status=$$?; \
	    if [ -n "$$policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; \
	    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then \
	      systemctl disable --now prometheus >/dev/null 2>&1 || true; \
	    fi; \
	    exit $$status; \
	  else \
	    echo "toolchain: clang/lld/wabt/prometheus missing and cannot be installed here:" \
	         "the fragment build check and the Prometheus test will be skipped"; \
	  fi; \
	fi

# Rebuild every fragment from source (C, WAT, AssemblyScript).
fragments: toolchain
	bash hack/build_fragments.sh

# The runtime tests again on wasmer, which installs on Python 3.10 only (its own venv).
test-wasmer:
	bash hack/test_wasmer.sh

# pytest exits 5 when it collects nothing: that fails the target, as it should.
test: venv toolchain typecheck lint-imports
	$(VENV)/bin/pytest -q
	bash hack/test_wasmer.sh

demo: venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash hack/demo.sh

# Benchmarks print figures and assert nothing about time.
bench: bench-apiserver bench-scheduler bench-pairs bench-fragments bench-bursting bench-fairness \
	bench-shapes bench-startup bench-scale bench-kube

bench-apiserver: venv
	$(PY) hack/bench_apiserver.py

bench-scheduler: venv
	$(PY) hack/bench_scheduler.py all --json bench-scheduler.json

# The shipped configuration against the built-in profile alone: twin clusters, batches of
# 10,000 pods alternating in ABBA order, each pair's ratio and the pooled one.
bench-pairs: venv
	$(PY) hack/bench_scheduler.py pairs --rounds 6 --json bench-pairs.json

# pyscheduler beside kube-scheduler on a real kube-apiserver: KUBEBUILDER_ASSETS names the
# binaries (setup-envtest); BENCH_KUBECONFIG (and BENCH_APISERVER_PID) a server of your own.
bench-kube: venv
	for size in "1000 3000" "5000 10000"; do set -- $$size; \
	  $(PY) hack/bench_kube.py --nodes $$1 --pods $$2 --rounds 2 \
	    $${BENCH_KUBECONFIG:+--kubeconfig $$BENCH_KUBECONFIG} \
	    $${BENCH_APISERVER_PID:+--apiserver-pid $$BENCH_APISERVER_PID} || exit 1; done

bench-fragments: venv
	$(PY) hack/bench_fragments.py all --json bench-fragments.json
	@if [ -x .venv310/bin/python ] || bash hack/test_wasmer.sh --co -q >/dev/null 2>&1; then \
	  .venv310/bin/python hack/bench_fragments.py algorithm stages --runtime wasmer; fi

bench-bursting: venv
	$(PY) hack/bench_bursting.py --pods 1000

bench-fairness: venv
	$(PY) hack/bench_fairness.py --nodes 1000 --pods 2000 --turns 3 --json bench-fairness.json

# kube-scheduler's scheduler_perf workloads for preemption, volumes and churn, at kube's sizes,
# beside the throughput kube-scheduler must reach on them in its CI.
bench-shapes: venv
	$(PY) hack/bench_perf_shapes.py --json bench-shapes.json

bench-startup: venv
	$(PY) hack/bench_startup.py --nodes 1000 --repeat 5 --json bench-startup-1000.json
	$(PY) hack/bench_startup.py --nodes 5000 --repeat 5 --json bench-startup-5000.json

# Kubernetes' scale envelope: 5000 nodes and 150,000 bound pods (a mix of ReplicaSets with
# spread and anti-affinity), beside an empty cluster of 5000 nodes: start-up to synced, peak
# RSS, 10,000 new pods, creation-to-binding latency at 100 pods/s; the embedded API server's
# RSS and list times at that size. The two clusters run side by side and (c)'s batches alternate
# (ABBA). Takes about 9 minutes (--pods 30000 for a quicker look).
bench-scale: venv
	$(PY) hack/bench_scale.py --json bench-scale.json

# The wheel (dist/pyscheduler-<version>-py3-none-any.whl), built as the Dockerfile builds it.
wheel: venv
	rm -f dist/pyscheduler-*.whl
	$(PY) -m pip wheel -q --disable-pip-version-check --no-deps --wheel-dir dist .
	@ls dist/pyscheduler-*.whl

# The container image (Dockerfile) with docker or podman, whichever engine answers
# (CONTAINER_ENGINE=podman to choose). IMAGE names it; the manifests deploy pyscheduler:dev.
IMAGE ?= pyscheduler:dev
CONTAINER_ENGINE ?=

image:
	@engine="$(CONTAINER_ENGINE)"; tried=""; \
	if [ -z "$$engine" ]; then \
	  for candidate in docker podman; do \
	    if ! command -v $$candidate >/dev/null 2>&1; then \
	      tried="$$tried $$candidate (not installed);"; \
	    elif ! $$candidate info >/dev/null 2>&1; then \
	      tried="$$tried $$candidate (installed, but '$$candidate info' fails: no engine answers);"; \
	    else engine=$$candidate; break; fi; \
	  done; \
	fi; \
	if [ -z "$$engine" ]; then \
	  echo "make image: needs a container engine, and none answers:$$tried" \
	       "start the Docker daemon or install podman (or set CONTAINER_ENGINE)" >&2; \
	  exit 1; \
	fi; \
	version=$$(sed -n 's/^__version__ = "\(.*\)"$$/\1/p' pyscheduler/__init__.py); \
	revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown); \
	echo "$$engine build -t $(IMAGE) ."; \
	$$engine build --build-arg VERSION="$$version" --build-arg REVISION="$$revision" \
	  -t $(IMAGE) .

clean:
	rm -rf $(VENV) .venv310 .mypy_cache .pytest_cache build dist *.egg-info
