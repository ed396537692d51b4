#!/usr/bin/env bash
# Builds the StarlingMonkey probe (probe.js) with componentize-js 0.23.0 in its
# default configuration and with `disableFeatures: ["http", "fetch-event"]`, into
# $WR_LANG_OUT/js/starlingmonkey-{default,no-http}.wasm, for
# tests/tests/languages_starlingmonkey.rs. The toolchain comes from npm (`npm ci`
# on the committed lockfile) into a cache directory keyed by the lockfile.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../languages/lib.sh"
command -v npm >/dev/null || wr_die "npm is required"
tools="$wr_cache/js-starlingmonkey-$(wr_key "$here/package-lock.json")"
if [ ! -d "$tools/node_modules/@bytecodealliance/componentize-js" ]; then
  wr_log "npm ci (componentize-js) into $tools"
  rm -rf "$tools.tmp" && mkdir -p "$tools.tmp"
  cp "$here/package.json" "$here/package-lock.json" "$tools.tmp/"
  (cd "$tools.tmp" && npm ci --no-audit --no-fund --loglevel=error)
  rm -rf "$tools" && mv "$tools.tmp" "$tools"
fi
mkdir -p "$wr_out/js"
key=$(wr_key "$here/probe.js" "$here/build.mjs" "$here/package-lock.json" "$wr_repo/wit/reconciler.wit")
if wr_up_to_date "$wr_out/js/starlingmonkey-no-http.wasm" "$key" \
  && [ -f "$wr_out/js/starlingmonkey-default.wasm" ]; then
  wr_log "starlingmonkey probes are up to date"
  exit 0
fi
# componentize-js reads the WIT inside its own WASI sandbox, which sees the
# working directory only: give it a copy there.
cp "$here/build.mjs" "$here/probe.js" "$wr_repo/wit/reconciler.wit" "$tools/"
(cd "$tools" && node build.mjs reconciler.wit "$wr_out/js")
echo "$key" >"$wr_out/js/starlingmonkey-no-http.wasm.key"
