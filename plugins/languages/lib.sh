# Shared by the language build scripts (sourced, not run).
#
# WR_LANG_OUT  where components go (default: $CARGO_TARGET_DIR/languages, or
#              <repo>/target/languages); tests/tests/languages_*.rs read from there.
# WR_CACHE     where toolchains are installed once and reused
#              (default: ~/.cache/wasm-reconciler).

wr_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wr_out="${WR_LANG_OUT:-${CARGO_TARGET_DIR:-$wr_repo/target}/languages}"
# Relative paths are relative to the repository (as cargo and the tests read them).
case "$wr_out" in /*) ;; *) wr_out="$wr_repo/$wr_out" ;; esac
wr_cache="${WR_CACHE:-$HOME/.cache/wasm-reconciler}"
mkdir -p "$wr_out" "$wr_cache"

wr_log() { echo "[$(basename "$(dirname "$0")") $(date -u +%H:%M:%S)] $*" >&2; }
wr_die() { wr_log "error: $*"; exit 1; }

# Short content hash of files, to key cached toolchains by their pins.
wr_key() { cat "$@" | sha256sum | cut -c1-16; }

# Runs apt-get install for the packages that are not installed yet (CI and
# developers are root here; elsewhere use sudo if present).
wr_apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  wr_log "apt-get install ${missing[*]}"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Prints size (raw and gzipped) of a built component.
wr_report() {
  local wasm=$1
  wr_log "built $wasm: $(stat -c %s "$wasm") bytes, $(gzip -9 -c "$wasm" | wc -c) gzipped"
}

# Hash of every file under the given paths (names and contents), to decide
# whether a component is up to date.
wr_tree_key() {
  find "$@" -type f ! -path '*/__pycache__/*' ! -path '*/node_modules/*' -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-32
}

# wr_up_to_date WASM KEY: true when WASM exists and was built from KEY.
wr_up_to_date() {
  [ -f "$1" ] && [ -f "$1.key" ] && [ "$(cat "$1.key")" = "$2" ]
}
