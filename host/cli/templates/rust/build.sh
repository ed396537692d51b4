#!/usr/bin/env bash
# Runs the unit tests, then builds build/{{name}}.wasm (a wasm32-wasip2 component).
# Needs rustup and cargo; adds the wasm32-wasip2 target when missing.
set -euo pipefail
cd "$(dirname "$0")"
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
[ "${1:-}" = "--no-test" ] || cargo test --quiet
cargo build --release --target wasm32-wasip2
target="${CARGO_TARGET_DIR:-target}"
mkdir -p build
cp "$target/wasm32-wasip2/release/{{crate}}.wasm" build/{{name}}.wasm
echo "built build/{{name}}.wasm ($(stat -c %s build/{{name}}.wasm) bytes)"
