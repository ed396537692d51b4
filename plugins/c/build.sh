#!/usr/bin/env bash
# Builds the C plugins to WebAssembly components and runs their native unit
# tests. The components are small (~40 KB) and import nothing but the host's
# `log`: the SDK avoids libc stdio, so no WASI adapter is needed.
#
#   plugins/c/build.sh            # install toolchain if needed, test, build
#   plugins/c/build.sh --no-test  # build only
#
# Toolchain: Debian's clang-19, lld-19, wasi-libc (apt-get, as root or with
# sudo), and `wit-bindgen` + `wasm-tools` from crates.io (cargo install,
# pinned, only the C generator / component features, into the cache dir).
# Output: $WR_LANG_OUT/c/<plugin>.wasm (see plugins/languages/lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../languages/lib.sh"
run_tests=1
[ "${1:-}" = "--no-test" ] && run_tests=0

WIT_BINDGEN_VERSION=0.61.1 # same as the Rust SDK's wit-bindgen
WASM_TOOLS_VERSION=1.263.0

wr_apt_install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32
clang=clang-19
sysroot=/usr # Debian's wasi-libc: /usr/include/wasm32-wasi, /usr/lib/wasm32-wasi

tools="$wr_cache/c-tools-wb$WIT_BINDGEN_VERSION-wt$WASM_TOOLS_VERSION"
if [ ! -x "$tools/bin/wit-bindgen" ] || [ ! -x "$tools/bin/wasm-tools" ]; then
  command -v cargo >/dev/null || wr_die "cargo is required to install wit-bindgen and wasm-tools"
  wr_log "cargo install wit-bindgen-cli $WIT_BINDGEN_VERSION and wasm-tools $WASM_TOOLS_VERSION into $tools"
  # A target dir of its own: never waits on (or invalidates) the workspace's.
  env -u CARGO_TARGET_DIR -u RUSTFLAGS cargo install --locked --quiet --root "$tools" \
    --target-dir "$tools/build" wit-bindgen-cli@"$WIT_BINDGEN_VERSION" --no-default-features --features c
  env -u CARGO_TARGET_DIR -u RUSTFLAGS cargo install --locked --quiet --root "$tools" \
    --target-dir "$tools/build" wasm-tools@"$WASM_TOOLS_VERSION" --no-default-features --features component,validate
  rm -rf "$tools/build"
fi

sdk_sources=("$here"/sdk/src/{arena,format,json,plugin,names,sha256}.c)
cflags=(-std=c11 -Wall -Wextra -Werror -I"$here/sdk/include")

if [ $run_tests = 1 ]; then
  cc=${CC:-cc}
  sanitize=(-fsanitize=address,undefined)
  echo 'int main(void){return 0;}' | "$cc" -x c - "${sanitize[@]}" -o /dev/null 2>/dev/null || sanitize=()
  for dir in "$here"/*/; do
    [ -f "$dir/component.c" ] || continue
    plugin=$(basename "$dir")
    bin="$wr_out/c/test-$plugin"
    mkdir -p "$wr_out/c"
    plugin_sources=()
    for f in "$dir"*.c; do [ "$(basename "$f")" = component.c ] || plugin_sources+=("$f"); done
    wr_log "native tests ($plugin)"
    "$cc" "${cflags[@]}" -g "${sanitize[@]}" -I"$dir" "${sdk_sources[@]}" "$here/sdk/src/log_native.c" \
      "${plugin_sources[@]}" "$here/test/test_main.c" -o "$bin"
    "$bin"
  done
fi

gen="$wr_out/c/bindings"
rm -rf "$gen" && mkdir -p "$gen"
"$tools/bin/wit-bindgen" c "$wr_repo/wit" --world reconciler --out-dir "$gen" >/dev/null

for dir in "$here"/*/; do
  [ -f "$dir/component.c" ] || continue
  plugin=$(basename "$dir")
  wasm="$wr_out/c/$plugin.wasm"
  # -mexec-model=reactor: a library-style module (no main); --gc-sections
  # and --strip-all keep it small.
  "$clang" --target=wasm32-wasi --sysroot="$sysroot" -Os "${cflags[@]}" -I"$dir" -I"$gen" \
    -mexec-model=reactor -Wl,--gc-sections -Wl,--strip-all \
    "${sdk_sources[@]}" "$here/sdk/src/export.c" "$dir"*.c \
    "$gen/reconciler.c" "$gen/reconciler_component_type.o" -o "$wr_out/c/$plugin.core.wasm"
  "$tools/bin/wasm-tools" component new "$wr_out/c/$plugin.core.wasm" -o "$wasm.tmp"
  "$tools/bin/wasm-tools" validate "$wasm.tmp"
  # The host links WASI with an empty context; this plugin should need none.
  if "$tools/bin/wasm-tools" component wit "$wasm.tmp" | grep -q 'import wasi:'; then
    wr_die "$plugin imports WASI; the C SDK is meant to need none (stdio or clocks linked in?)"
  fi
  mv "$wasm.tmp" "$wasm"
  rm -f "$wr_out/c/$plugin.core.wasm"
  wr_report "$wasm"
done
