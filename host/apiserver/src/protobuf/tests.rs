//! Round trips (JSON → protobuf → JSON) for every built-in kind: realistic
//! objects as the real server returns them, and for every kind with a
//! protobuf message a synthetic object with every field set.

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use super::envelope::{decode, encode, supports};
use super::schema;
use super::special::{Special, special};

fn round_trip(obj: &Value) -> Value {
    let pb = encode(obj).unwrap_or_else(|e| panic!("encode {}: {e}", obj["kind"]));
    assert!(pb.starts_with(b"k8s\0"));
    decode(&pb).unwrap_or_else(|e| panic!("decode {}: {e}", obj["kind"]))
}

fn assert_round_trip(obj: Value) {
    let back = round_trip(&obj);
    assert_eq!(
        back, obj,
        "{} did not survive protobuf:\n  got  {}\n  want {}",
        obj["kind"], back, obj
    );
}

fn meta(name: &str) -> Value {
    json!({
        "name": name, "namespace": "default",
        "uid": "6f1c1c3e-5a8e-4a8f-9f1e-2b3a4c5d6e7f", "resourceVersion": "1234",
        "generation": 2, "creationTimestamp": "2026-11-30T10:00:00Z",
        "labels": {"app": name, "tier": "web"},
        "annotations": {"example.com/note": "hello"},
        "managedFields": [{
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
        }]
    })
}

fn pod_template(name: &str) -> Value {
    json!({
        "metadata": {"creationTimestamp": null, "labels": {"app": name}},
        "spec": {
            "containers": [{
                "name": "web", "image": "nginx:1.27",
                "args": ["--port", "8080"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "MODE", "value": "prod"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "livenessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 5,
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
                "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}}
            }],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule",
                "tolerationSeconds": 300}],
            "automountServiceAccountToken": false
        }
    })
}

#[test]
#[allow(clippy::too_many_lines)] // a table of objects, not logic
fn realistic_objects_survive_protobuf() {
    let objects = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": pod_template("web"),
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
            "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                "conditions": [{"type": "Available", "status": "True",
                    "lastUpdateTime": "2026-11-30T10:00:05Z", "lastTransitionTime": "2026-11-30T10:00:05Z",
                    "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("web"),
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                               {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https"}],
                "selector": {"app": "web"}, "clusterIP": "10.96.0.12", "clusterIPs": ["10.96.0.12"],
                "type": "ClusterIP", "sessionAffinity": "None", "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {}}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("reader"),
            "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods", "configmaps"]},
                      {"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("reader"),
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"},
                         {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("pi"),
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6, "ttlSecondsAfterFinished": 100,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "6f1c1c3e"}},
                "manualSelector": false, "suspend": false, "completionMode": "NonIndexed",
                "podReplacementPolicy": "TerminatingOrFailed",
                "template": pod_template("pi")},
            "status": {"startTime": "2026-11-30T10:00:00Z", "active": 1, "ready": 0, "terminating": 0,
                "uncountedTerminatedPods": {}}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("nightly"),
            "spec": {"schedule": "0 3 * * *", "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
                "suspend": false, "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"creationTimestamp": null}, "spec": {"template": pod_template("nightly")}}},
            "status": {"lastScheduleTime": "2026-11-30T03:00:00Z"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("web-1"),
            "spec": pod_template("web")["spec"].clone(),
            "status": {"phase": "Running", "podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}],
                "startTime": "2026-11-30T10:00:01Z", "qosClass": "Burstable",
                "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0, "image": "nginx:1.27",
                    "imageID": "", "started": true,
                    "state": {"running": {"startedAt": "2026-11-30T10:00:02Z"}}, "lastState": {}}]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cfg"),
            "data": {"app.yaml": "a: 1\n", "empty": ""}, "binaryData": {"logo": "iVBORw0KGgo="},
            "immutable": true}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("tls"), "type": "kubernetes.io/tls",
            "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}}),
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "uid": "u", "resourceVersion": "9", "creationTimestamp": "2026-11-30T10:00:00Z",
                "labels": {"kubernetes.io/metadata.name": "team-a"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("db"),
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                "template": pod_template("db"), "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "volumeClaimTemplates": [{"metadata": {"name": "data", "creationTimestamp": null},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                        "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
                    "status": {"phase": "Pending"}}],
                "revisionHistoryLimit": 10, "persistentVolumeClaimRetentionPolicy":
                    {"whenDeleted": "Retain", "whenScaled": "Retain"}},
            "status": {"replicas": 0, "availableReplicas": 0}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta("web"),
            "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["example.com"], "secretName": "tls"}],
                "rules": [{"host": "example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]},
            "status": {"loadBalancer": {}}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("web"),
            "spec": {"minAvailable": "50%", "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta("web"),
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]},
            "status": {"desiredReplicas": 0}}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("leader"),
            "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15,
                "acquireTime": "2026-11-30T10:00:00.123456Z", "renewTime": "2026-11-30T10:00:10.000001Z",
                "leaseTransitions": 0}}),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": meta("web.1"),
            "eventTime": "2026-11-30T10:00:00.500000Z", "reportingController": "wasm-reconciler",
            "reportingInstance": "host-1", "action": "Reconcile", "reason": "Created",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web", "apiVersion": "apps/v1"},
            "note": "created", "type": "Normal"}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "uid": "u", "resourceVersion": "5", "generation": 1,
                "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                    "shortNames": ["wd"], "categories": ["all"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "required": ["size"], "properties": {
                            "size": {"type": "integer", "minimum": 1.0, "maximum": 10.0, "default": 3},
                            "mode": {"type": "string", "enum": ["a", "b"]},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                        "status": {"type": "object", "x-kubernetes-int-or-string": true}}}},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                        "statusReplicasPath": ".status.size"}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}],
                "conversion": {"strategy": "None"}},
            "status": {"conditions": [{"type": "Established", "status": "True",
                "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted"}],
                "acceptedNames": {"plural": "widgets", "kind": "Widget"}, "storedVersions": ["v1"]}}),
        json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": "deployments.apps \"web\" not found", "reason": "NotFound",
            "details": {"name": "web", "group": "apps", "kind": "deployments",
                "causes": [{"reason": "FieldValueInvalid", "message": "bad", "field": "spec.replicas"}]},
            "code": 404}),
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"resourceVersion": "77", "continue": "abc"},
            "items": [{"metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}}]}),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
            "preconditions": {"uid": "u", "resourceVersion": "3"}, "dryRun": ["All"], "gracePeriodSeconds": 0}),
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta("db-1"),
            "data": {"spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}, "revision": 1}),
        json!({"apiVersion": "v1", "kind": "List", "metadata": {},
            "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}]}),
    ];
    for obj in objects {
        assert_round_trip(obj);
    }
}

/// A value for every field, recursing to a depth, with non-zero scalars (so
/// nothing is legitimately omitted on the way back).
fn synthetic(s: &schema::Schema, desc: &MessageDescriptor, depth: usize) -> Value {
    if desc.name().starts_with("JSONSchemaPropsOr") {
        // Either-or types: take the schema side.
        let Some(Kind::Message(schema)) = desc.get_field_by_name("schema").map(|f| f.kind()) else {
            panic!("{} without schema", desc.full_name());
        };
        return synthetic(s, &schema, depth);
    }
    if let Some(special) = special(desc) {
        return match special {
            Special::IntOrString => json!("25%"),
            Special::Quantity => json!("250m"),
            Special::Time => json!("2026-11-30T10:00:00Z"),
            Special::MicroTime => json!("2026-11-30T10:00:00.123456Z"),
            Special::Duration => json!("1m30s"),
            Special::Raw => json!({"a": [1, "b"]}),
            Special::StringList => json!(["get", "list"]),
        };
    }
    let mut out = Map::new();
    if depth == 0 {
        return Value::Object(out);
    }
    for fd in desc.fields() {
        let one = |kind: &Kind| -> Option<Value> {
            Some(match kind {
                Kind::String => json!(format!("s-{}", fd.name())),
                Kind::Bool => json!(true),
                Kind::Bytes => json!("AQID"),
                Kind::Double | Kind::Float => json!(1.5),
                Kind::Message(m) => {
                    if depth == 1 && special(m).is_none() {
                        return None;
                    }
                    synthetic(s, m, depth - 1)
                }
                _ => json!(7),
            })
        };
        let v = if fd.is_map() {
            let Kind::Message(entry) = fd.kind() else {
                continue;
            };
            match one(&entry.map_entry_value_field().kind()) {
                Some(v) => json!({"k": v}),
                None => continue,
            }
        } else if fd.is_list() {
            match one(&fd.kind()) {
                Some(v) => json!([v]),
                None => continue,
            }
        } else {
            match one(&fd.kind()) {
                Some(v) => v,
                None => continue,
            }
        };
        if s.is_inline(&fd) {
            // Embedded structs: their fields sit in this object.
            if let Value::Object(fields) = v {
                out.extend(fields);
            }
            continue;
        }
        out.insert(s.json_name(&fd).to_string(), v);
    }
    Value::Object(out)
}

#[test]
fn every_kind_with_every_field_survives_protobuf() {
    let s = schema::get().unwrap();
    let mut kinds: Vec<(&str, &str)> = s.kinds().collect();
    kinds.sort();
    assert!(kinds.len() > 400, "only {} kinds in the index", kinds.len());
    for (api_version, kind) in kinds {
        let desc = s.message_for(api_version, kind).unwrap();
        let mut obj = synthetic(s, &desc, 6);
        let m = obj.as_object_mut().unwrap();
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
        // Embedded objects in `List` come back as what they are.
        let back = round_trip(&obj);
        assert_eq!(back, obj, "{api_version} {kind}");
    }
}

#[test]
fn zero_values_follow_go_json() {
    // What a Go client sends for `kubectl create deployment`: non-pointer
    // scalars are always on the wire, pointer ones only when set.
    let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "generateName": "", "namespace": "", "uid": "", "resourceVersion": "",
            "generation": 0, "creationTimestamp": null},
        "spec": {"replicas": 0, "paused": false, "minReadySeconds": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"creationTimestamp": null}, "spec": {"containers": [
                {"name": "", "image": "nginx", "ports": [{"containerPort": 0}]}]}}}});
    let back = round_trip(&obj);
    assert_eq!(
        back,
        json!({"kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": "web", "creationTimestamp": null},
            "spec": {"replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"creationTimestamp": null}, "spec": {"containers": [
                    {"name": "", "image": "nginx", "ports": [{"containerPort": 0}]}]}}}})
    );
}

#[test]
fn custom_resources_and_garbage_are_refused() {
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}});
    let e = encode(&cr).unwrap_err();
    assert!(e.to_string().contains("has no protobuf form"), "{e}");
    assert!(!supports(&cr));
    assert!(decode(b"k8s\0\xff\xff").is_err());
    assert!(decode(b"{}").is_err());
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "three"}});
    let e = encode(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.replicas: expected a 32-bit integer, got string"
    );
}

/// `null` and absent are the same to every Kubernetes client; Go writes
/// `null` for nil slices and zero times where protobuf has nothing. Numbers
/// compare as numbers (`1` and `1.0`), to 12 digits.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        // 12 significant digits: serde_json's default float parser may be one
        // unit in the last place off Go's shortest representation.
        Value::Number(n) => n.as_f64().map_or(v.clone(), |f| json!(format!("{f:.11e}"))),
        other => other.clone(),
    }
}

/// Where two JSON values first differ, for readable failures.
fn first_diff(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => {
                        if let Some(d) = first_diff(u, v, &p) {
                            return Some(d);
                        }
                    }
                    (u, v) => return Some(format!("{p}: {u:?} vs {v:?}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_diff(u, v, &format!("{path}/{i}"))),
        _ => (a != b).then(|| format!("{path}: {a} vs {b}")),
    }
}

/// The reference: Go's own types, filled by Kubernetes' fuzzer, marshalled by
/// Go to protobuf and to JSON (tests/kube/cmd/protobuf-fixtures). Every kind
/// the schemes register must decode to Go's JSON, and Go's JSON must encode
/// to protobuf that decodes back to it.
#[test]
fn every_kind_decodes_as_go_marshals_it() {
    let kube = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/kube");
    let mut total = 0;
    for seed in ["1", "2", "3"] {
        let out = match std::process::Command::new("go")
            .args(["run", "./cmd/protobuf-fixtures", seed])
            .current_dir(kube)
            .output()
        {
            Ok(o) if o.status.success() => o,
            Ok(o) => panic!(
                "protobuf-fixtures failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => {
                eprintln!("skipped: no Go toolchain to run the reference ({e})");
                return;
            }
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Value = serde_json::from_str(line).unwrap();
            let what = format!("{} {} (seed {seed})", f["apiVersion"], f["kind"]);
            let pb = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                f["protobuf"].as_str().unwrap(),
            )
            .unwrap();
            let want = normalized(&f["json"]);
            let got = decode(&pb).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = normalized(&got);
            assert!(
                got == want,
                "{what}: decoded protobuf differs from Go's JSON at {:?}",
                first_diff(&got, &want, "")
            );
            let again = decode(&encode(&f["json"]).unwrap_or_else(|e| panic!("{what}: {e}")))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let again = normalized(&again);
            assert!(
                again == want,
                "{what}: Go's JSON did not survive encoding at {:?}",
                first_diff(&again, &want, "")
            );
            total += 1;
        }
    }
    assert!(total > 1000, "only {total} fixtures");
}
