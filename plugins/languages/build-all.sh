#!/usr/bin/env bash
# Builds the example plugins in every non-Rust language (JavaScript, Python,
# C, Go) and runs each language's native unit tests. Installs the toolchains
# on first use (npm ci, a venv with componentize-py, apt-get clang-19 + a
# venv with PyPI's prebuilt wasm-tools, npm ci of Wizer for Go; Go itself
# must be on PATH) into ~/.cache/wasm-reconciler, so a rerun only rebuilds
# what changed. On a cold machine all of it takes about 2 min on 2 cores
# (docs/authoring.md, "Toolchains and CI").
#
#   plugins/languages/build-all.sh            # toolchains, tests, components
#   plugins/languages/build-all.sh --no-test  # components only
#
# Components land in $WR_LANG_OUT/<lang>/<plugin>.wasm (default
# $CARGO_TARGET_DIR/languages or target/languages), where
# tests/tests/languages_*.rs and the language bench load them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

total_start=$(date +%s)
summary=()
for lang in js python c go; do
  start=$(date +%s)
  "$here/../$lang/build.sh" "$@"
  summary+=("$lang: $(($(date +%s) - start)) s")
done
wr_log "done in $(($(date +%s) - total_start)) s (${summary[*]}); components in $wr_out"
