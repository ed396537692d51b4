# Shared by the kubectl scripts: starts the standalone embedded API server
# ("$BIN apiserver") on a free port in a temporary directory ($WORK), points
# KUBECONFIG at it and stops it (and removes $WORK) on exit.
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BIN" apiserver --port 0 --kubeconfig-out "$WORK/kubeconfig" >"$WORK/url" 2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do [ -s "$WORK/url" ] && break; sleep 0.1; done
[ -s "$WORK/url" ] || { echo "server did not start"; cat "$WORK/server.log"; exit 1; }
export KUBECONFIG="$WORK/kubeconfig"
