# Everything sets itself up from nothing: a fresh machine needs only Python 3.11 (or python3).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test typecheck lint-imports unit demo bench bench-apiserver bench-scheduler clean

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

# pytest exits 5 when it collects nothing: that fails the target, as it should.
test: venv typecheck lint-imports
	$(VENV)/bin/pytest -q

demo: venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash hack/demo.sh

# Benchmarks print figures and assert nothing about time.
bench: bench-apiserver bench-scheduler

bench-apiserver: venv
	$(PY) hack/bench_apiserver.py

bench-scheduler: venv
	$(PY) hack/bench_scheduler.py all --json bench-scheduler.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache build *.egg-info
