#!/usr/bin/env bash
# Builds every example plugin to a WebAssembly component (wasm32-wasip2).
# Output: $TARGET/plugins/wasm32-wasip2/plugin/<name>.wasm, where TARGET is
# $CARGO_TARGET_DIR or ./target. Tests call the same build (see tests/src/plugins.rs),
# so running this first only saves them the wait.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
plugins=()
for manifest in plugins/*/Cargo.toml; do
  dir=$(dirname "$manifest")
  [ "$dir" = plugins/sdk ] && continue
  grep -q 'cdylib' "$manifest" || continue
  plugins+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n1)")
done
cargo build --target wasm32-wasip2 --profile plugin --target-dir "$target/plugins" "${plugins[@]}"
ls -l "$target/plugins/wasm32-wasip2/plugin/"*.wasm
