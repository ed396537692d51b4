#!/usr/bin/env bash
# Runs the unit tests (pytest), then builds build/{{name}}.wasm with
# componentize-py (CPython inside: ~18 MB, ~6 MB gzipped; `publish` chunks it).
#
# The toolchain is pinned by tools/requirements.txt and installed once into a
# venv at ${WR_CACHE:-~/.cache/wasm-reconciler}/py-<hash of that file>, the
# same cache the wasm-reconciler repository's own Python build uses.
# Needs python3 (>= 3.10) with venv.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
python=${PYTHON:-python3}
cache="${WR_CACHE:-$HOME/.cache/wasm-reconciler}"
venv="$cache/py-$(cat tools/requirements.txt | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/componentize-py" ]; then
  echo "creating venv $venv" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tools/requirements.txt
fi
[ "${1:-}" = "--no-test" ] || (cd src && PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider .)
mkdir -p build
# --stub-wasi: the component imports no WASI (a WASI call traps; the SDK makes none).
(cd src && env -u VIRTUAL_ENV PYTHONDONTWRITEBYTECODE=1 "$venv/bin/componentize-py" \
  -d "$here/wit" -w reconciler componentize app -p "$here/src" -p "$here/sdk" \
  --stub-wasi -o "$here/build/{{name}}.wasm" >/dev/null)
echo "built build/{{name}}.wasm ($(stat -c %s build/{{name}}.wasm) bytes)"
