//! Built-in kinds: defaulting (the stored object of a minimal create),
//! validation (the error for an invalid object), strict field validation,
//! immutability, size limits.

use std::time::Duration;

use serde_json::{Value, json};

use super::{MERGE, cm, patch};
use crate::run::Run;
use crate::target::Req;

fn pod_spec(image: &str) -> Value {
    json!({"containers": [{"name": "c", "image": image}]})
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "x"}}, "spec": pod_spec("nginx")})
}

fn obj(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// Minimal objects whose stored form shows each kind's defaulting.
fn minimal() -> Vec<(&'static str, &'static str, Value)> {
    let sel = json!({"matchLabels": {"app": "x"}});
    vec![
        (
            "apps/v1",
            "deployments",
            obj(
                "apps/v1",
                "Deployment",
                "d",
                json!({"selector": sel, "template": template()}),
            ),
        ),
        (
            "apps/v1",
            "replicasets",
            obj(
                "apps/v1",
                "ReplicaSet",
                "rs",
                json!({"selector": sel, "template": template()}),
            ),
        ),
        (
            "apps/v1",
            "statefulsets",
            obj(
                "apps/v1",
                "StatefulSet",
                "ss",
                json!({"selector": sel, "serviceName": "ss", "template": template()}),
            ),
        ),
        (
            "apps/v1",
            "daemonsets",
            obj(
                "apps/v1",
                "DaemonSet",
                "ds",
                json!({"selector": sel, "template": template()}),
            ),
        ),
        (
            "batch/v1",
            "jobs",
            obj(
                "batch/v1",
                "Job",
                "j",
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}),
            ),
        ),
        (
            "batch/v1",
            "cronjobs",
            obj(
                "batch/v1",
                "CronJob",
                "cj",
                json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}),
            ),
        ),
        ("v1", "pods", obj("v1", "Pod", "p", pod_spec("nginx"))),
        (
            "v1",
            "services",
            obj(
                "v1",
                "Service",
                "svc",
                json!({"selector": {"app": "x"}, "ports": [{"port": 80}]}),
            ),
        ),
        (
            "v1",
            "persistentvolumeclaims",
            obj(
                "v1",
                "PersistentVolumeClaim",
                "pvc",
                json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
            ),
        ),
        (
            "v1",
            "serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
        ),
        (
            "v1",
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec"}, "stringData": {"a": "b"}}),
        ),
        ("v1", "configmaps", cm("cm", json!({"a": "b"}))),
        (
            "networking.k8s.io/v1",
            "ingresses",
            obj(
                "networking.k8s.io/v1",
                "Ingress",
                "ing",
                json!({"rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}]}),
            ),
        ),
        (
            "networking.k8s.io/v1",
            "networkpolicies",
            obj(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                "np",
                json!({"podSelector": {}}),
            ),
        ),
        (
            "policy/v1",
            "poddisruptionbudgets",
            obj(
                "policy/v1",
                "PodDisruptionBudget",
                "pdb",
                json!({"minAvailable": 1, "selector": sel}),
            ),
        ),
        (
            "autoscaling/v2",
            "horizontalpodautoscalers",
            obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "hpa",
                json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 3}),
            ),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
        ),
        (
            "coordination.k8s.io/v1",
            "leases",
            obj(
                "coordination.k8s.io/v1",
                "Lease",
                "l",
                json!({"holderIdentity": "me"}),
            ),
        ),
        (
            "discovery.k8s.io/v1",
            "endpointslices",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}]}),
        ),
        (
            "v1",
            "endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep"}, "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
        ),
        (
            "v1",
            "resourcequotas",
            obj("v1", "ResourceQuota", "rq", json!({"hard": {"pods": "10"}})),
        ),
        (
            "v1",
            "limitranges",
            obj(
                "v1",
                "LimitRange",
                "lr",
                json!({"limits": [{"type": "Container", "default": {"cpu": "100m"}}]}),
            ),
        ),
    ]
}

fn path(ns: &str, gv: &str, plural: &str) -> String {
    if gv == "v1" {
        format!("/api/v1/namespaces/{ns}/{plural}")
    } else {
        format!("/apis/{gv}/namespaces/{ns}/{plural}")
    }
}

pub async fn builtins(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("builtins").await?;
    // Pods need the namespace's `default` ServiceAccount where a controller makes one.
    for _ in 0..50 {
        if r.send(Req::get(format!(
            "/api/v1/namespaces/{ns}/serviceaccounts/default"
        )))
        .await?
        .ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (gv, plural, body) in minimal() {
        let resp = r
            .send(Req::with_body("POST", path(&ns, gv, plural), &body))
            .await?;
        let mut v = Run::view(&resp);
        // Status is written by controllers on the real cluster at their own pace.
        if let Some(b) = v["body"].as_object_mut() {
            b.remove("status");
        }
        r.record(&format!("builtins/defaults/{plural}"), v);
    }
    // What `kubectl get` prints of them (cells that controllers do not write).
    for (gv, plural) in [
        ("networking.k8s.io/v1", "ingresses"),
        ("networking.k8s.io/v1", "networkpolicies"),
        ("policy/v1", "poddisruptionbudgets"),
        ("v1", "limitranges"),
        ("coordination.k8s.io/v1", "leases"),
    ] {
        let resp = r
            .send(Req::get(path(&ns, gv, plural)).accept(crate::target::TABLE))
            .await?;
        let j = resp.json();
        // Kept as `{cells}` under `rows` so ages are normalised.
        let rows: Vec<Value> = j["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|row| json!({"cells": row["cells"]}))
            .collect();
        r.record(
            &format!("builtins/table-rows/{plural}"),
            json!({"code": resp.code, "rows": rows}),
        );
    }
    let deps = path(&ns, "apps/v1", "deployments");
    let dep = |name: &str, spec: Value| obj("apps/v1", "Deployment", name, spec);
    let sel = json!({"matchLabels": {"app": "x"}});
    let cases: Vec<(&str, String, Value)> = vec![
        (
            "deployment-replicas-string",
            deps.clone(),
            dep(
                "d1",
                json!({"replicas": "three", "selector": sel, "template": template()}),
            ),
        ),
        (
            "deployment-replicas-negative",
            deps.clone(),
            dep(
                "d2",
                json!({"replicas": -3, "selector": sel, "template": template()}),
            ),
        ),
        (
            "deployment-empty-image",
            deps.clone(),
            dep(
                "d3",
                json!({"selector": sel, "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec("")}}),
            ),
        ),
        (
            "deployment-selector-mismatch",
            deps.clone(),
            dep(
                "d4",
                json!({"selector": {"matchLabels": {"app": "y"}}, "template": template()}),
            ),
        ),
        (
            "deployment-missing-selector",
            deps.clone(),
            dep("d5", json!({"template": template()})),
        ),
        (
            "deployment-no-containers",
            deps.clone(),
            dep(
                "d6",
                json!({"selector": sel, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}}}),
            ),
        ),
        (
            "pod-invalid-container-name",
            path(&ns, "v1", "pods"),
            obj(
                "v1",
                "Pod",
                "p2",
                json!({"containers": [{"name": "Bad_Name", "image": "nginx"}]}),
            ),
        ),
        (
            "pod-invalid-resources",
            path(&ns, "v1", "pods"),
            obj(
                "v1",
                "Pod",
                "p3",
                json!({"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "lots"}}}]}),
            ),
        ),
        (
            "configmap-bad-key",
            path(&ns, "v1", "configmaps"),
            cm("bk", json!({"bad/key": "v"})),
        ),
        (
            "configmap-number-data",
            path(&ns, "v1", "configmaps"),
            cm("nd", json!({"n": 3})),
        ),
        (
            "configmap-too-large",
            path(&ns, "v1", "configmaps"),
            cm("big", json!({"k": "x".repeat(1536 * 1024)})),
        ),
        (
            "secret-tls-missing-keys",
            path(&ns, "v1", "secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {}}),
        ),
        (
            "secret-invalid-base64",
            path(&ns, "v1", "secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b64"}, "data": {"a": "not base64!"}}),
        ),
        (
            "service-nodeport",
            path(&ns, "v1", "services"),
            obj(
                "v1",
                "Service",
                "np",
                json!({"type": "NodePort", "selector": {"app": "x"}, "ports": [{"port": 80}]}),
            ),
        ),
        (
            "service-headless",
            path(&ns, "v1", "services"),
            obj(
                "v1",
                "Service",
                "hl",
                json!({"clusterIP": "None", "selector": {"app": "x"}, "ports": [{"port": 80}]}),
            ),
        ),
        (
            "service-no-ports",
            path(&ns, "v1", "services"),
            obj(
                "v1",
                "Service",
                "noports",
                json!({"selector": {"app": "x"}}),
            ),
        ),
        (
            "service-bad-protocol",
            path(&ns, "v1", "services"),
            obj(
                "v1",
                "Service",
                "proto",
                json!({"ports": [{"port": 80, "protocol": "ICMP"}]}),
            ),
        ),
        (
            "role-bad-rule",
            path(&ns, "rbac.authorization.k8s.io/v1", "roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r2"}, "rules": [{"resources": ["pods"]}]}),
        ),
        (
            "job-bad-restart-policy",
            path(&ns, "batch/v1", "jobs"),
            obj(
                "batch/v1",
                "Job",
                "j2",
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Always"}}}),
            ),
        ),
        (
            "cronjob-bad-schedule",
            path(&ns, "batch/v1", "cronjobs"),
            obj(
                "batch/v1",
                "CronJob",
                "cj2",
                json!({"schedule": "every day", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}}),
            ),
        ),
        (
            "label-value-invalid",
            path(&ns, "v1", "configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lv", "labels": {"a": "not valid!"}}}),
        ),
        (
            "annotations-too-large",
            path(&ns, "v1", "configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "an", "annotations": {"a": "x".repeat(300 * 1024)}}}),
        ),
    ];
    for (id, p, body) in cases {
        let resp = r.send(Req::with_body("POST", p, &body)).await?;
        let mut v = Run::view(&resp);
        if let Some(b) = v["body"].as_object_mut() {
            b.remove("status");
        }
        r.record(&format!("builtins/{id}"), v);
    }
    // The new Service's ClusterIP must not be the range's first address (the
    // `kubernetes` Service holds it).
    let svc = r
        .send(Req::get(format!("/api/v1/namespaces/{ns}/services/svc")))
        .await?
        .json();
    let ip = svc["spec"]["clusterIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    r.record(
        "builtins/service-cluster-ip-not-first",
        json!({"set": !ip.is_empty(), "endsInDot1": ip.ends_with(".1")}),
    );

    // Updates that validation refuses.
    r.call(
        "builtins/deployment-selector-change",
        patch(format!("{deps}/d"), MERGE, &json!({"spec": {"selector": {"matchLabels": {"app": "z"}}, "template": {"metadata": {"labels": {"app": "z"}}}}})),
    )
    .await?;
    let cms = path(&ns, "v1", "configmaps");
    r.send(Req::with_body("POST", cms.clone(), &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "imm"}, "data": {"a": "1"}, "immutable": true})))
        .await?;
    r.call(
        "builtins/configmap-immutable-write",
        patch(format!("{cms}/imm"), MERGE, &json!({"data": {"a": "2"}})),
    )
    .await?;
    r.call(
        "builtins/configmap-immutable-unset",
        patch(format!("{cms}/imm"), MERGE, &json!({"immutable": false})),
    )
    .await?;
    r.call("builtins/pod-spec-update", patch(format!("{}/p", path(&ns, "v1", "pods")), MERGE, &json!({"spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}})))
        .await?;
    r.call(
        "builtins/service-type-change-to-externalname",
        patch(
            format!("{}/svc", path(&ns, "v1", "services")),
            MERGE,
            &json!({"spec": {"type": "ExternalName"}}),
        ),
    )
    .await?;
    r.call(
        "builtins/scale-subresource",
        Req::get(format!("{deps}/d/scale")),
    )
    .await?;
    r.call(
        "builtins/scale-subresource-update",
        patch(
            format!("{deps}/d/scale"),
            MERGE,
            &json!({"spec": {"replicas": 4}}),
        ),
    )
    .await?;

    // Field validation: unknown and duplicate fields.
    let unknown = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}, "data": {}, "bogus": 1});
    for (id, q) in [
        ("field-validation-strict", "?fieldValidation=Strict"),
        ("field-validation-warn", "?fieldValidation=Warn&dryRun=All"),
        (
            "field-validation-ignore",
            "?fieldValidation=Ignore&dryRun=All",
        ),
        ("field-validation-default", "?dryRun=All"),
    ] {
        r.call(
            &format!("builtins/{id}"),
            Req::with_body("POST", format!("{cms}{q}"), &unknown),
        )
        .await?;
    }
    let dup = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1"},"data":{"b":"2"}}"#;
    r.call(
        "builtins/field-validation-duplicate-strict",
        Req::get(format!("{cms}?fieldValidation=Strict"))
            .method("POST")
            .raw_body(dup.to_vec()),
    )
    .await?;
    Ok(())
}
