#!/usr/bin/env bash
# Builds the real control plane (kube-apiserver, kube-controller-manager, etcd) from
# the Go modules pinned in go.mod/go.sum into a cache directory keyed by version:
#   ${WR_KUBE_CACHE:-$HOME/.cache/wasm-reconciler/kube}/<key>/bin/
# Prints that bin directory on its last line. A second run with the same key is a
# no-op; the Go build and module caches (GOCACHE, GOMODCACHE) live outside the clone.
set -euo pipefail
cd "$(dirname "$0")"
k8s=$(awk '$1=="k8s.io/kubernetes"{print $2}' go.mod)
etcd=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' go.mod)
key="k8s-${k8s}_etcd-${etcd}_$(sha256sum go.sum | cut -c1-12)"
out="${WR_KUBE_CACHE:-$HOME/.cache/wasm-reconciler/kube}/$key/bin"
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/etcd" ]; then
  echo "$out"; exit 0
fi
mkdir -p "$out.tmp"
minor=$(echo "$k8s" | cut -d. -f2)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
start=$(date +%s)
for cmd in etcd kube-apiserver kube-controller-manager; do
  t0=$(date +%s)
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp/$cmd" "./cmd/$cmd" >&2
  echo "built $cmd in $(( $(date +%s) - t0 )) s ($(du -h "$out.tmp/$cmd" | cut -f1))" >&2
done
rm -rf "$out" && mv "$out.tmp" "$out"
echo "control plane built in $(( $(date +%s) - start )) s" >&2
echo "$out"
