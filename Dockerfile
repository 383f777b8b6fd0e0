# syntax=docker/dockerfile:1
#
# The pyscheduler image: `make image` builds it (docker or podman), hack/kind-e2e.sh runs the
# end-to-end tests against it in a kind cluster, and tests/packaging/test_image.py runs the
# same installation (the wheel in a fresh virtual environment, started as below) on the
# embedded cluster.
#
# Two stages. The builder makes the wheel from the sources and installs it with its
# dependencies into a virtual environment at /opt/venv. The final stage is the same slim
# Python with that environment copied in and nothing else: no compiler, no sources, and no pip
# in the environment (the base image keeps its own).
#
# It runs as user 10001 (numeric, so that the kubelet can verify runAsNonRoot) and writes
# nothing at run time, so it runs with readOnlyRootFilesystem: bytecode is compiled here, the
# interpreter is told not to try again (PYTHONDONTWRITEBYTECODE), and HOME names a directory
# that does not exist. In a pod the scheduler reads its service account's token and CA from the
# mounted files and writes no temporary file. Only a kubeconfig with embedded certificate data
# (`certificate-authority-data`, `client-key-data`) makes the kubernetes client write that data
# to files under $TMPDIR (/tmp): mount an emptyDir at /tmp when you run it that way.

# wasmtime's wheels are built for every CPython from 3.9 on; 3.11 is what the project is tested
# with (tests/packaging/test_image.py checks that the two agree).
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY pyscheduler/ pyscheduler/
# Dependencies come as binary wheels only: this image has no compiler, and a dependency without
# a wheel for this Python must fail the build rather than half-build. The venv gets no pip of
# its own (the builder's pip installs into it). Bytecode is compiled with unchecked hashes, so
# the interpreter never compares it with the sources' timestamps nor rewrites it.
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv --without-pip /opt/venv \
 && python -m pip --python /opt/venv/bin/python install --no-compile --only-binary=:all: \
        "$(ls /dist/pyscheduler-*.whl)[fast]" \
 && /opt/venv/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv/lib \
 && /opt/venv/bin/python -c "import importlib.resources as r; \
        p = r.files('pyscheduler.wasm') / 'fragments' / 'default-v1.0.0.wasm'; \
        assert p.is_file(), f'{p} is missing from the wheel'" \
 && /opt/venv/bin/pyscheduler version

FROM python:${PYTHON_VERSION}-slim
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="pyscheduler" \
      org.opencontainers.image.description="A standalone Kubernetes scheduler with WebAssembly scheduling fragments and cloud bursting" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN groupadd --system --gid 10001 pyscheduler \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin pyscheduler
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/nonexistent
USER 10001:10001
WORKDIR /
# /metrics, /healthz, /livez and /readyz (metricsAddress; set it to 0.0.0.0:10259 in a pod).
EXPOSE 10259
ENTRYPOINT ["pyscheduler", "run"]
