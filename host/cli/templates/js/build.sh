#!/usr/bin/env bash
# Runs the unit tests (node --test), then builds build/{{name}}.wasm with
# componentize-qjs (QuickJS-NG engine, ~1 MB components).
#
# The toolchain is pinned by tools/package-lock.json and installed once with
# `npm ci` into ${WR_CACHE:-~/.cache/wasm-reconciler}/js-<hash of the lockfile>,
# the same cache the wasm-reconciler repository's own JS build uses.
# Needs node (>= 18) and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
command -v node >/dev/null || { echo "node is required (Node.js >= 18)" >&2; exit 1; }
cache="${WR_CACHE:-$HOME/.cache/wasm-reconciler}"
tools="$cache/js-$(cat tools/package-lock.json | sha256sum | cut -c1-16)"
if [ ! -x "$tools/node_modules/.bin/componentize-qjs" ]; then
  echo "npm ci into $tools" >&2
  rm -rf "$tools.tmp" && mkdir -p "$tools.tmp"
  cp tools/package.json tools/package-lock.json "$tools.tmp/"
  (cd "$tools.tmp" && npm ci --no-audit --no-fund --loglevel=error)
  rm -rf "$tools" && mv "$tools.tmp" "$tools"
fi
[ "${1:-}" = "--no-test" ] || node --test src/
mkdir -p build
# --sync: no component-model async ABI; --stub-wasi: the component imports no
# WASI (the host gives plugins none that is useful); --opt-size: smaller build.
"$tools/node_modules/.bin/componentize-qjs" --wit wit --world reconciler \
  --js src/component.js --module-root "$here" --sync --stub-wasi --opt-size \
  -o build/{{name}}.wasm >/dev/null
echo "built build/{{name}}.wasm ($(stat -c %s build/{{name}}.wasm) bytes)"
