#!/usr/bin/env bash
# Builds the Python plugins to WebAssembly components with componentize-py
# (CPython inside, ~18 MB per component, ~6 MB gzipped) and runs their unit
# tests with pytest.
#
#   plugins/python/build.sh            # install toolchain if needed, test, build
#   plugins/python/build.sh --no-test  # build only
#
# Output: $WR_LANG_OUT/python/<plugin>.wasm (see plugins/languages/lib.sh).
# The toolchain (requirements.txt, pinned) goes into a venv in the cache
# directory, keyed by requirements.txt. A component is rebuilt only when its
# sources, the SDK, the WIT or the toolchain changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../languages/lib.sh"
run_tests=1
[ "${1:-}" = "--no-test" ] && run_tests=0

python=${PYTHON:-python3}
command -v "$python" >/dev/null || wr_die "python3 (>= 3.10) is required"

venv="$wr_cache/py-$(wr_key "$here/requirements.txt")"
if [ ! -x "$venv/bin/componentize-py" ]; then
  wr_log "creating venv $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi

if [ $run_tests = 1 ]; then
  wr_log "pytest"
  (cd "$here" && PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
fi

mkdir -p "$wr_out/python"
for app in "$here"/*/app.py; do
  dir=$(dirname "$app")
  plugin=$(basename "$dir")
  wasm="$wr_out/python/$plugin.wasm"
  key=$(wr_tree_key "$dir" "$here/sdk" "$wr_repo/wit" "$here/requirements.txt")
  if wr_up_to_date "$wasm" "$key"; then
    wr_log "$plugin is up to date"
    continue
  fi
  # --stub-wasi: the component imports no WASI at all (a WASI call traps; the
  # SDK makes none). VIRTUAL_ENV is unset so only these paths are bundled.
  (cd "$dir" && env -u VIRTUAL_ENV PYTHONDONTWRITEBYTECODE=1 "$venv/bin/componentize-py" \
    -d "$wr_repo/wit" -w reconciler \
    componentize app -p "$dir" -p "$here/sdk" --stub-wasi -o "$wasm.tmp" >/dev/null)
  mv "$wasm.tmp" "$wasm"
  echo "$key" >"$wasm.key"
  wr_report "$wasm"
done
