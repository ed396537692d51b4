#!/usr/bin/env bash
# Regenerates the two committed artefacts the embedded API server's protobuf
# codec reads (host/apiserver/src/protobuf/):
#   k8s.binpb  - a FileDescriptorSet compiled from the generated.proto files of
#                k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver
#                and k8s.io/kube-aggregator (source info stripped);
#   index.txt  - kind -> message and the omitempty scalars, from the Go types
#                (tests/kube/cmd/protobuf-index).
# The module versions are the ones tests/kube/go.mod pins for the real control
# plane, so both sides speak the same Kubernetes version. The .proto files come
# from the Go module proxy (checksummed by tests/kube/go.sum) and are compiled
# by protox, a protobuf compiler in Rust (`cargo install protox --features bin`);
# nothing fetched is committed, only what is compiled from it.
# Run after changing the Kubernetes version in tests/kube/go.mod:
#   host/apiserver/protobuf/generate.sh
# With --check, regenerates into a temporary directory and fails when the
# committed artefacts differ (for CI, where Go and the modules are present).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
committed="$here/../src/protobuf"
out="$committed"
check=false
if [ "${1:-}" = "--check" ]; then check=true; out="$(mktemp -d)"; fi
kube="$here/../../../tests/kube"
protox="${PROTOX:-$(command -v protox || true)}"
if [ -z "$protox" ]; then
  echo "protox not found: cargo install protox@0.10.0 --locked --features bin" >&2
  exit 1
fi
inc="$(mktemp -d)"
trap 'rm -rf "$inc"' EXIT
mkdir -p "$inc/k8s.io"
cd "$kube"
files=()
for m in api apimachinery apiextensions-apiserver kube-aggregator; do
  dir="$(go mod download -json "k8s.io/$m" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -d "$dir" ] || { echo "no module directory for k8s.io/$m" >&2; exit 1; }
  ln -s "$dir" "$inc/k8s.io/$m"
  while IFS= read -r f; do
    files+=("k8s.io/$m/${f#"$dir/"}")
  done < <(find "$dir" -name generated.proto -not -path '*/testapigroup/*' -not -path '*/testdata/*' | sort)
done
(cd "$inc" && "$protox" --include . --include-imports --output "$out/k8s.binpb" "${files[@]}")
go run ./cmd/protobuf-index > "$out/index.txt"
if $check; then
  cmp "$out/k8s.binpb" "$committed/k8s.binpb" && cmp "$out/index.txt" "$committed/index.txt" || {
    echo "protobuf artefacts are stale: run host/apiserver/protobuf/generate.sh" >&2; exit 1; }
  rm -rf "$out"; echo "protobuf artefacts up to date" >&2; exit 0
fi
echo "wrote $out/k8s.binpb ($(wc -c < "$out/k8s.binpb") bytes) and $out/index.txt ($(wc -l < "$out/index.txt") lines)" >&2
