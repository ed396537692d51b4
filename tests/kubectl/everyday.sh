#!/usr/bin/env bash
# The kubectl commands a user types every day, run against any cluster.
# Each step's output (stdout+stderr) and exit code go to OUTDIR/NN-name.txt,
# unjudged: the fidelity program (tests/fidelity) runs this script against the
# embedded server and a real kube-apiserver and compares the two (normalised).
# Usage: tests/kubectl/everyday.sh KUBECONFIG OUTDIR [TOKEN]
#   KUBECTL: kubectl binary (default kubectl 1.32; plain `kubectl` picks a
#   version from the server's). TOKEN: suffix of the names created (random).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
export KUBECONFIG="$1"
OUT="$2"
TOKEN="${3:-r$RANDOM}"
KUBECTL="${KUBECTL:-/usr/lib/google-cloud-sdk/bin/kubectl.1.32}"
NS="fid-$TOKEN-kubectl"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
k() { "$KUBECTL" --cache-dir "$WORK/cache" "$@"; }

N=0
# step NAME CMD...: runs CMD, records exit code and output.
step() {
  local name="$1"; shift
  N=$((N + 1))
  local f; f="$OUT/$(printf %02d "$N")-$name.txt"
  local out rc
  out=$("$@" 2>&1); rc=$?
  printf 'exit=%s\n%s\n' "$rc" "$out" >"$f"
}

step version-server sh -c "'$KUBECTL' version -o json | grep -E '\"(major|minor)\"' | tail -2"
# Built-in resources only (a shared cluster may serve other CRDs): core, a
# group without a dot, or a *.k8s.io group.
step api-resources sh -c "'$KUBECTL' --cache-dir '$WORK/cache' api-resources -o name | awk -F. 'NF<=2 || /\\.k8s\\.io\$/' | sort"
step api-resources-apps k api-resources --api-group=apps -o wide
step api-resources-rbac k api-resources --api-group=rbac.authorization.k8s.io
step api-versions-core sh -c "'$KUBECTL' --cache-dir '$WORK/cache' api-versions | grep -E '^(v1|apps/v1|batch/v1|rbac.authorization.k8s.io/v1|apiextensions.k8s.io/v1)$'"
step create-namespace k create namespace "$NS"
step namespace-labels k get namespace "$NS" -o jsonpath='{.metadata.labels}'

# Workloads.
step create-deployment k create deployment web --image=nginx --replicas=2 -n "$NS"
step deployment-spec k get deployment web -n "$NS" -o jsonpath='{.spec}'
step scale k scale deployment web --replicas=3 -n "$NS"
step wait-for-jsonpath k wait --for=jsonpath='{.spec.replicas}'=3 deployment/web -n "$NS" --timeout=10s
step edit env KUBE_EDITOR="sed -i s/replicas:\ 3/replicas:\ 4/" "$KUBECTL" --cache-dir "$WORK/cache" edit deployment web -n "$NS"
step replicas-after-edit k get deployment web -n "$NS" -o jsonpath='{.spec.replicas}'
step run k run nginx --image=nginx --restart=Never -n "$NS" --labels=app=nginx
step pod-spec k get pod nginx -n "$NS" -o jsonpath='{.spec.containers[0].image} {.spec.restartPolicy} {.spec.dnsPolicy} {.spec.schedulerName} {.spec.terminationGracePeriodSeconds}'
step create-job k create job hello --image=busybox -n "$NS" -- echo hi
step job-spec k get job hello -n "$NS" -o jsonpath='{.spec.backoffLimit} {.spec.completions} {.spec.parallelism} {.spec.template.spec.restartPolicy}'
step create-service-clusterip k create service clusterip web --tcp=80:8080 -n "$NS"
step service-spec k get service web -n "$NS" -o jsonpath='{.spec.type} {.spec.ports} {.spec.selector} {.spec.sessionAffinity}'
step create-role k create role pod-reader --verb=get,list --resource=pods -n "$NS"
step create-rolebinding k create rolebinding read-pods --role=pod-reader --user=alice -n "$NS"
step role-rules k get role pod-reader -n "$NS" -o jsonpath='{.rules}'
step get-deployments k get deployments -n "$NS"
step get-services-wide k get services -n "$NS" -o wide

# Explain (OpenAPI).
step explain-deployment-replicas k explain deployment.spec.replicas
step explain-configmap k explain configmap
step explain-pod-containers-image k explain pod.spec.containers.image

# Apply: client-side, diff, server-side, prune.
cat >"$WORK/cm.yaml" <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: $NS
  labels: {fid: prune}
data:
  mode: fast
YAML
cat >"$WORK/cm2.yaml" <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
  namespace: $NS
  labels: {fid: prune}
data:
  a: "1"
YAML
sed 's/name: settings/name: old/' "$WORK/cm.yaml" >"$WORK/old.yaml"
step apply k apply -f "$WORK/cm.yaml"
step apply-second k apply -f "$WORK/old.yaml"
step diff-unchanged k diff -f "$WORK/cm.yaml"
step diff-changed sh -c "sed 's/fast/slow/' '$WORK/cm.yaml' | '$KUBECTL' --cache-dir '$WORK/cache' diff -f - | grep -E '^[-+] ' | grep -v -E 'generation|resourceVersion|managedFields|time:'"
step apply-server-side k apply --server-side -f "$WORK/cm2.yaml"
step apply-server-side-conflict sh -c "sed 's/\"1\"/\"2\"/' '$WORK/cm2.yaml' | '$KUBECTL' --cache-dir '$WORK/cache' apply --server-side --field-manager=other -f -"
step apply-server-side-force sh -c "sed 's/\"1\"/\"2\"/' '$WORK/cm2.yaml' | '$KUBECTL' --cache-dir '$WORK/cache' apply --server-side --field-manager=other --force-conflicts -f -"
mkdir -p "$WORK/prune" && cp "$WORK/cm.yaml" "$WORK/prune/"
step apply-prune k apply --prune -l fid=prune -f "$WORK/prune"
step after-prune k get configmaps -n "$NS" -l fid=prune -o name
step apply-again-unchanged k apply -f "$WORK/cm.yaml"
step describe-configmap k describe configmap settings -n "$NS"

# Bounded watch: events for a labelled ConfigMap that exists, changes, goes.
k create configmap watched -n "$NS" --from-literal=a=1 >/dev/null
k label configmap watched -n "$NS" fid=watch >/dev/null
"$KUBECTL" --cache-dir "$WORK/cache" get configmaps -n "$NS" -l fid=watch -w --output-watch-events >"$WORK/watch.txt" 2>&1 &
WATCH=$!
until_seen() { for _ in $(seq 1 300); do grep -q "^$1 " "$WORK/watch.txt" && return; sleep 0.1; done; }
until_seen ADDED
k patch configmap watched -n "$NS" --type merge -p '{"data":{"a":"2"}}' >/dev/null
until_seen MODIFIED
k delete configmap watched -n "$NS" >/dev/null
until_seen DELETED
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null
step get-watch sh -c "cat '$WORK/watch.txt'"

# Events, auth.
step events-for-deployment k events -n "$NS" --for deployment/web
step auth-can-i k auth can-i create deployments -n "$NS"
step auth-can-i-all k auth can-i '*' '*'
step auth-can-i-as-alice k auth can-i list pods -n "$NS" --as=alice
step auth-can-i-as-alice-denied k auth can-i delete pods -n "$NS" --as=alice
step auth-whoami k auth whoami -o jsonpath='{.status.userInfo.username}'

# Deletion with each cascade mode.
step delete-cascade-orphan k delete deployment web -n "$NS" --cascade=orphan
step replicasets-after-orphan sh -c "'$KUBECTL' --cache-dir '$WORK/cache' get replicasets -n '$NS' -o name | sed 's/web-[a-z0-9]*/web-<hash>/'"
step create-deployment-2 k create deployment web2 --image=nginx -n "$NS"
step delete-cascade-foreground k delete deployment web2 -n "$NS" --cascade=foreground --timeout=30s
step delete-cascade-background k delete job hello -n "$NS" --cascade=background
step delete-pod-no-wait k delete pod nginx -n "$NS" --wait=false
step wait-for-delete k wait --for=delete pod/nginx -n "$NS" --timeout=30s
step delete-namespace k delete namespace "$NS" --timeout=60s
step get-deleted k get configmaps -n "$NS"
