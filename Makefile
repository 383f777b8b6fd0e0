# Everything sets itself up from nothing: a fresh machine needs only Python 3.11 (or python3).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test typecheck lint-imports unit demo bench bench-apiserver bench-scheduler \
	bench-fragments bench-bursting fragments toolchain test-wasmer clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,fast]'
	touch $(STAMP)

venv: $(STAMP)

typecheck: venv
	$(VENV)/bin/mypy

lint-imports: venv
	$(VENV)/bin/lint-imports --no-cache

# Guest toolchains (clang + lld for C fragments, wabt for WAT), so that the tests can check the
# committed .wasm files against their sources. Installed with apt-get when missing and possible.
toolchain:
	@if ! command -v clang >/dev/null || ! command -v wasm-ld >/dev/null \
	    || ! command -v wat2wasm >/dev/null; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      clang lld wabt >/dev/null; \
	  else \
	    echo "toolchain: clang/lld/wabt missing and cannot be installed here:" \
	         "the fragment build check will be skipped"; \
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
bench: bench-apiserver bench-scheduler bench-fragments bench-bursting

bench-apiserver: venv
	$(PY) hack/bench_apiserver.py

bench-scheduler: venv
	$(PY) hack/bench_scheduler.py all --json bench-scheduler.json

bench-fragments: venv
	$(PY) hack/bench_fragments.py all --json bench-fragments.json
	@if [ -x .venv310/bin/python ] || bash hack/test_wasmer.sh --co -q >/dev/null 2>&1; then \
	  .venv310/bin/python hack/bench_fragments.py algorithm --runtime wasmer; fi

bench-bursting: venv
	$(PY) hack/bench_bursting.py --pods 1000

clean:
	rm -rf $(VENV) .venv310 .mypy_cache .pytest_cache build *.egg-info
