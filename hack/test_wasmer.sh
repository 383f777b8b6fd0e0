#!/usr/bin/env bash
# Runs the WebAssembly runtime tests on wasmer 1.1 as well as wasmtime.
#
# wasmer's Python wheels exist for Python <= 3.10 only, so this builds a Python 3.10 venv at
# .venv310 (once; reinstalled when setup.cfg or pyproject.toml change) with the project, wasmer
# 1.1 + cranelift, and wasmtime (the meter tests cross-check the two runtimes), then runs
# tests/unit/wasm/test_vm.py, test_meter.py, test_abi.py and test_stages.py there.
#
# The interpreter: $PYTHON310 when set, else ~/.pyenv/versions/3.10.13/bin/python, else
# python3.10 on PATH. Without one the script says so and exits 0 with a SKIPPED line.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=.venv310
STAMP="$VENV/.installed-stamp"

is_python310() {
    [ -n "$1" ] && [ -x "$1" ] &&
        "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 10) else 1)' 2>/dev/null
}

PY=""
for candidate in "${PYTHON310:-$HOME/.pyenv/versions/3.10.13/bin/python}" \
                 "$(command -v python3.10 || true)"; do
    if is_python310 "$candidate"; then
        PY="$candidate"
        break
    fi
done
if [ -z "$PY" ]; then
    echo "test_wasmer: no Python 3.10 interpreter (looked at \$PYTHON310," \
         "~/.pyenv/versions/3.10.13/bin/python and python3.10 on PATH); wasmer 1.1 has wheels" \
         "for Python <= 3.10 only"
    echo "SKIPPED: wasmer runtime tests (set PYTHON310=/path/to/python3.10 to run them)"
    exit 0
fi

if ! is_python310 "$VENV/bin/python"; then
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ setup.cfg -nt "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] \
        || [ sim/pyproject.toml -nt "$STAMP" ]; then
    pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -e . -e ./sim
    "${pip[@]}" pytest pytest-timeout numpy wasmer==1.1.0 wasmer-compiler-cranelift==1.1.0 wasmtime
    touch "$STAMP"
fi

# The point of this run is wasmer: fail, not skip, when it does not import.
"$VENV/bin/python" -c 'import wasmer, wasmer_compiler_cranelift, wasmtime'
exec "$VENV/bin/python" -m pytest -q tests/unit/wasm/test_vm.py tests/unit/wasm/test_meter.py tests/unit/wasm/test_abi.py \
    tests/unit/wasm/test_stages.py "$@"
