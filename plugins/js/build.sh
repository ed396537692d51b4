#!/usr/bin/env bash
# Builds the JavaScript plugins to WebAssembly components with
# componentize-qjs (QuickJS-NG engine, ~1 MB per component) and runs their
# unit tests with node's test runner.
#
#   plugins/js/build.sh            # install toolchain if needed, test, build
#   plugins/js/build.sh --no-test  # build only
#
# Output: $WR_LANG_OUT/js/<plugin>.wasm (see plugins/languages/lib.sh).
# The toolchain comes from the npm registry with `npm ci` on the committed
# lockfile, into a cache directory keyed by the lockfile, so reruns skip it.
# A component is rebuilt only when its sources, the SDK, the WIT or the lockfile changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../languages/lib.sh"
run_tests=1
[ "${1:-}" = "--no-test" ] && run_tests=0

command -v node >/dev/null || wr_die "node is required (Node.js >= 18)"
command -v npm >/dev/null || wr_die "npm is required"

tools="$wr_cache/js-$(wr_key "$here/package-lock.json")"
if [ ! -x "$tools/node_modules/.bin/componentize-qjs" ]; then
  wr_log "npm ci into $tools"
  rm -rf "$tools.tmp" && mkdir -p "$tools.tmp"
  cp "$here/package.json" "$here/package-lock.json" "$tools.tmp/"
  (cd "$tools.tmp" && npm ci --no-audit --no-fund --loglevel=error)
  rm -rf "$tools" && mv "$tools.tmp" "$tools"
fi

if [ $run_tests = 1 ]; then
  wr_log "node --test"
  (cd "$here" && node --test test/)
fi

mkdir -p "$wr_out/js"
for entry in "$here"/*/component.js; do
  plugin=$(basename "$(dirname "$entry")")
  wasm="$wr_out/js/$plugin.wasm"
  key=$(wr_tree_key "$(dirname "$entry")" "$here/sdk" "$wr_repo/wit" "$here/package-lock.json")
  if wr_up_to_date "$wasm" "$key"; then
    wr_log "$plugin is up to date"
    continue
  fi
  # --sync: no component-model async ABI; --stub-wasi: the component imports
  # no WASI at all (any WASI call would trap; the SDK makes none);
  # --opt-size: the smaller QuickJS build.
  "$tools/node_modules/.bin/componentize-qjs" \
    --wit "$wr_repo/wit" --world reconciler \
    --js "$entry" --module-root "$here" \
    --sync --stub-wasi --opt-size \
    -o "$wasm.tmp" >/dev/null
  mv "$wasm.tmp" "$wasm"
  echo "$key" >"$wasm.key"
  wr_report "$wasm"
done

# The StarlingMonkey probe (componentize-js, default and without wasi:http):
# what the host does with the other JavaScript toolchain
# (tests/tests/languages_starlingmonkey.rs).
"$here/starlingmonkey/build.sh"
