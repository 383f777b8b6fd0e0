#!/usr/bin/env bash
# Rebuild every WebAssembly module of the repository from source, with pinned flags:
#
#   pyscheduler/wasm/fragments/default-v1.0.0.wasm   fragments/default/default.c        (C)
#   fragments/examples/<name>/<name>.wasm            fragments/examples/<name>/<name>.c (C)
#   fragments/assemblyscript/examples/<name>/<name>.wasm   the <name>.ts next to it   (AssemblyScript)
#   fragments/wat/*.wasm, fragments/hostile/*.wasm   *.wat                              (wabt)
#   fragments/hostile/invalid.wasm                   fixed garbage bytes
#
# Usage:
#   hack/build_fragments.sh           rebuild in place
#   hack/build_fragments.sh --check   rebuild into a temporary directory and fail, listing them,
#                                     when committed modules differ from a fresh build
#
# Builds are deterministic: the same toolchain gives the same bytes. A piece whose toolchain is
# missing is skipped with a message (exit status 0); so is, under --check, a piece whose
# toolchain version differs from the pinned one (other versions emit other, equally valid,
# bytes). Pinned: clang/wasm-ld 14 (Debian 12), wabt 1.0.32, AssemblyScript from
# fragments/assemblyscript/package-lock.json (installed with `npm ci` when missing, unless
# BUILD_FRAGMENTS_NO_INSTALL=1).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

PINNED_CLANG_MAJOR=14
PINNED_WABT=1.0.32

CHECK=0
case "${1:-}" in
  "") ;;
  --check) CHECK=1 ;;
  -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if [[ $CHECK == 1 ]]; then
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
else
  OUT=$ROOT
fi

BUILT=()     # relative paths produced by this run
SKIPPED=()   # pieces not built, with the reason

note() { printf '%s\n' "$*" >&2; }

# Builds run in parallel (asc alone takes seconds to start); `finish` waits for them all.
PIDS=()
JOBS=()
job() { # description, command...
  local what=$1
  shift
  "$@" &
  PIDS+=("$!")
  JOBS+=("$what")
}
finish() {
  local failed=0 i
  for i in "${!PIDS[@]}"; do
    if ! wait "${PIDS[$i]}"; then
      note "failed: ${JOBS[$i]}"
      failed=1
    fi
  done
  return $failed
}
skip() { SKIPPED+=("$1: $2"); note "skip: $1 ($2)"; }
out() { mkdir -p "$(dirname "$OUT/$1")"; printf '%s' "$OUT/$1"; }

# -- C (clang + wasm-ld) -----------------------------------------------------------------------

# Freestanding wasm32, ABI-allowed features only (MVP + mutable globals, bulk memory, sign
# extension), no libc, exports declared in the sources, symbols and custom sections stripped.
C_FLAGS=(--target=wasm32 -mcpu=mvp -mbulk-memory -msign-ext -mmutable-globals
         -O2 -ffreestanding -nostdlib -fno-exceptions -fno-ident
         -Wall -Wextra -Werror
         "-ffile-prefix-map=$ROOT/=" -I fragments/c
         -Wl,--no-entry -Wl,--strip-all -Wl,-z,stack-size=65536)

c_toolchain() {
  command -v clang >/dev/null 2>&1 || { echo "clang not found"; return 1; }
  command -v wasm-ld >/dev/null 2>&1 || { echo "wasm-ld not found (install lld)"; return 1; }
  local major
  major=$(clang -dumpversion | cut -d. -f1)
  if [[ $CHECK == 1 && $major != "$PINNED_CLANG_MAJOR" ]]; then
    echo "clang $major, committed modules were built with clang $PINNED_CLANG_MAJOR"
    return 1
  fi
  # clang must know the wasm32 target and find wasm-ld
  echo 'int x;' | clang --target=wasm32 -nostdlib -Wl,--no-entry -x c - -o /dev/null \
    2>/dev/null || { echo "clang cannot link wasm32"; return 1; }
}

compile_c() { # source, output path
  clang "${C_FLAGS[@]}" -o "$2" "$1" && chmod 644 "$2"
}

build_c() { # source, output (relative)
  job "$2" compile_c "$1" "$(out "$2")"
  BUILT+=("$2")
}

if why=$(c_toolchain); then
  build_c fragments/default/default.c pyscheduler/wasm/fragments/default-v1.0.0.wasm
  for dir in fragments/examples/*/; do
    name=$(basename "$dir")
    [[ -f "$dir$name.c" ]] && build_c "$dir$name.c" "${dir}$name.wasm"
  done
else
  skip "C fragments" "$why"
fi

# -- WAT (wabt) --------------------------------------------------------------------------------

wat_toolchain() {
  command -v wat2wasm >/dev/null 2>&1 || { echo "wat2wasm not found (install wabt)"; return 1; }
  local version
  version=$(wat2wasm --version)
  if [[ $CHECK == 1 && $version != "$PINNED_WABT" ]]; then
    echo "wabt $version, committed modules were built with wabt $PINNED_WABT"
    return 1
  fi
}

if why=$(wat_toolchain); then
  for wat in fragments/wat/*.wat fragments/hostile/*.wat; do
    wasm=${wat%.wat}.wasm
    job "$wasm" wat2wasm "$wat" -o "$(out "$wasm")"
    BUILT+=("$wasm")
  done
else
  skip "WAT modules" "$why"
fi

# Not a module at all: the wasm magic and version, then bytes no section starts with.
printf '\0asm\1\0\0\0\377\377\377\377this is not a WebAssembly module\n' \
  > "$(out fragments/hostile/invalid.wasm)"
BUILT+=(fragments/hostile/invalid.wasm)

# -- AssemblyScript ----------------------------------------------------------------------------

AS_DIR=fragments/assemblyscript
AS_ASC=$AS_DIR/node_modules/.bin/asc

as_toolchain() {
  command -v node >/dev/null 2>&1 || { echo "node not found"; return 1; }
  if [[ ! -x $AS_ASC ]]; then
    [[ ${BUILD_FRAGMENTS_NO_INSTALL:-0} == 1 ]] \
      && { echo "$AS_DIR/node_modules missing and BUILD_FRAGMENTS_NO_INSTALL=1"; return 1; }
    command -v npm >/dev/null 2>&1 || { echo "npm not found"; return 1; }
    note "installing AssemblyScript into $AS_DIR/node_modules (npm ci)"
    (cd "$AS_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2) \
      || { echo "npm ci failed (offline?)"; return 1; }
  fi
}

if why=$(as_toolchain); then
  # One compiler process for every entry: asc takes seconds to start.
  AS_ARGS=()
  for entry in "$AS_DIR"/examples/*/*.ts; do
    wasm=${entry%.ts}.wasm
    AS_ARGS+=("${entry#"$AS_DIR"/}" "$(out "$wasm")")
    BUILT+=("$wasm")
  done
  job "AssemblyScript fragments" node "$AS_DIR/build.mjs" "${AS_ARGS[@]}"
else
  skip "AssemblyScript fragments" "$why"
fi

# -- report ------------------------------------------------------------------------------------

finish || { note "build failed"; exit 1; }

if [[ $CHECK == 0 ]]; then
  note "built ${#BUILT[@]} modules${SKIPPED:+, skipped ${#SKIPPED[@]} piece(s)}"
  exit 0
fi

differ=()
for rel in "${BUILT[@]}"; do
  if [[ ! -f $rel ]]; then
    differ+=("$rel (not committed)")
  elif ! cmp -s "$rel" "$OUT/$rel"; then
    differ+=("$rel")
  fi
done

# Every module in the tree must come from a source (checked when nothing was skipped).
if (( ${#SKIPPED[@]} == 0 )); then
  while IFS= read -r rel; do
    known=0
    for b in "${BUILT[@]}"; do [[ $b == "$rel" ]] && known=1 && break; done
    (( known )) || differ+=("$rel (no source builds it)")
  done < <(find fragments pyscheduler/wasm/fragments -name '*.wasm' -not -path '*/node_modules/*' \
             | sed 's|^\./||' | sort)
fi

if (( ${#differ[@]} )); then
  note "these modules differ from a fresh build (run hack/build_fragments.sh and commit):"
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
note "ok: ${#BUILT[@]} modules match their sources${SKIPPED:+ (${#SKIPPED[@]} piece(s) skipped)}"
