#!/usr/bin/env bash
# The out-of-tree authoring flow, per language, as a new user runs it: in a
# temporary directory outside the clone, `wasm-reconciler new` → the
# project's ./build.sh → `wasm-reconciler test` → `wasm-reconciler render
# --controller` → one reconcile through the host (`wasm-reconciler dev
# --plugin-dir build`, kubectl apply of the project's controller.yaml and
# example.yaml, then the example's Ready=True and its ConfigMap).
#
#   tests/authoring/new-projects.sh                 # rust js python c go
#   tests/authoring/new-projects.sh js c            # some languages
#
# Uses the toolchain caches of plugins/*/build.sh (~/.cache/wasm-reconciler,
# or $WR_CACHE) and cargo's registry; the Rust project builds with its own
# release profile into its own target dir (not the workspace's).
# WR_BIN: the wasm-reconciler binary (default: built here with cargo).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
langs=("$@")
[ ${#langs[@]} -gt 0 ] || langs=(rust js python c go)
log() { echo "[new-projects $(date -u +%H:%M:%S)] $*" >&2; }

if [ -z "${WR_BIN:-}" ]; then
  (cd "$repo" && cargo build --locked --quiet -p wasm-reconciler)
  WR_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/wasm-reconciler"
  case "$WR_BIN" in /*) ;; *) WR_BIN="$repo/$WR_BIN" ;; esac
fi
command -v kubectl >/dev/null || { log "kubectl is required"; exit 1; }

cache="${WR_CACHE:-$HOME/.cache/wasm-reconciler}"
work=$(mktemp -d /tmp/wr-new-projects.XXXXXX)
case "$work" in "$repo"/*) log "temp dir inside the clone"; exit 1 ;; esac
dev_pid=""
cleanup() {
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

for lang in "${langs[@]}"; do
  name="demo-$lang"
  dir="$work/$name"
  log "$lang: new"
  "$WR_BIN" new "$name" --lang "$lang" --dir "$dir" >/dev/null
  cd "$dir"
  log "$lang: build"
  # An out-of-tree project must not use the workspace's target dir or
  # profiles; the Rust one gets a target dir of its own in the toolchain
  # cache, so that a rerun (same project name) only relinks.
  build_env=(-u CARGO_TARGET_DIR)
  [ "$lang" = rust ] && build_env+=("CARGO_TARGET_DIR=$cache/new-projects-rust-target")
  env "${build_env[@]}" ./build.sh >"$work/$lang-build.log" 2>&1 || { cat "$work/$lang-build.log"; exit 1; }
  log "$lang: test"
  "$WR_BIN" test
  log "$lang: render"
  out=$("$WR_BIN" render --plugin "build/$name.wasm" --parent example.yaml --controller controller.yaml --now 2026-01-01T00:00:00Z --stats)
  grep -q "name: example-greeting" <<<"$out" || { echo "$out"; log "$lang: render output lacks the ConfigMap"; exit 1; }
  grep -q "message: hello from $name" <<<"$out" || { echo "$out"; exit 1; }

  log "$lang: one reconcile through the host (dev --plugin-dir build)"
  kc="$work/$lang.kubeconfig"
  "$WR_BIN" dev --port 0 --plugin-dir build --no-samples --kubeconfig-out "$kc" >"$work/$lang-dev.log" 2>&1 &
  dev_pid=$!
  for _ in $(seq 1 300); do [ -s "$kc" ] && kubectl --kubeconfig "$kc" get wasmcontrollers >/dev/null 2>&1 && break; sleep 0.1; done
  k() { kubectl --kubeconfig "$kc" "$@"; }
  k apply -f controller.yaml >/dev/null
  for _ in $(seq 1 100); do k apply -f example.yaml >/dev/null 2>&1 && break; sleep 0.2; done
  ready=""
  for _ in $(seq 1 150); do
    ready=$(k get "demo${lang}s.$name.example.com" example -n default -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
    [ "$ready" = True ] && break
    sleep 0.2
  done
  if [ "$ready" != True ]; then
    k get "demo${lang}s.$name.example.com" example -n default -o yaml || true
    tail -30 "$work/$lang-dev.log"
    log "$lang: the example did not become Ready"
    exit 1
  fi
  [ "$(k get configmap example-greeting -n default -o jsonpath='{.data.message}')" = "hello from $name" ] || { log "$lang: ConfigMap missing or wrong"; exit 1; }
  kill "$dev_pid" && wait "$dev_pid" || true
  dev_pid=""
  log "$lang: ok"
done
log "all ok: ${langs[*]}"
