#!/usr/bin/env bash
# Builds helm from the Go module pinned in go.mod/go.sum (`tool helm.sh/helm/v3/cmd/helm`)
# into a cache directory keyed by version, like tests/kube/build.sh:
#   ${WR_HELM_CACHE:-$HOME/.cache/wasm-reconciler/helm}/<key>/bin/helm
# Prints that bin directory on its last line. A second run with the same key is a
# no-op; the Go build and module caches (GOCACHE, GOMODCACHE) live outside the clone.
# The ldflags are those of helm's own Makefile for a release tag.
set -euo pipefail
cd "$(dirname "$0")"
helm=$(awk '$1=="helm.sh/helm/v3"{print $2}' go.mod)
clientgo=$(awk '$1=="k8s.io/client-go"{print $2}' go.mod)
key="helm-${helm}_$(sha256sum go.sum | cut -c1-12)"
out="${WR_HELM_CACHE:-$HOME/.cache/wasm-reconciler/helm}/$key/bin"
if [ -x "$out/helm" ]; then
  echo "$out"; exit 0
fi
mkdir -p "$out.tmp"
# client-go v0.X.Y speaks Kubernetes 1.X: helm's lint and template default to it.
k8s_minor=$(echo "$clientgo" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
t0=$(date +%s)
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp/helm" helm.sh/helm/v3/cmd/helm >&2
echo "built helm in $(( $(date +%s) - t0 )) s ($(du -h "$out.tmp/helm" | cut -f1))" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
