//! The part of kube-apiserver's bootstrap RBAC policy a client meets first,
//! created (when absent) by a server that enforces RBAC: `cluster-admin` for
//! `system:masters`, discovery and the self-reviews (`kubectl auth can-i`,
//! `whoami`) for every authenticated user, health and version for everyone.
//! Rules and names are kube's (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`).

use serde_json::{Value, json};

use crate::store::{Expect, Store, obj_key};

use super::rbac::GROUP;

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "uid": uuid::Uuid::new_v4().to_string(),
        "creationTimestamp": crate::meta::now_rfc3339(),
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole", "metadata": meta(name), "rules": rules})
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRoleBinding", "metadata": meta(name),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoles and ClusterRoleBindings.
pub fn policy() -> Vec<(&'static str, Value)> {
    let get = json!(["get"]);
    vec![
        (
            "clusterroles",
            role(
                "cluster-admin",
                json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                       {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:discovery",
                json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                    "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
                    "verbs": get}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:basic-user",
                json!([{"apiGroups": ["authorization.k8s.io"],
                        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                        "verbs": ["create"]},
                       {"apiGroups": ["authentication.k8s.io"],
                        "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                        "verbs": get}]),
            ),
        ),
        (
            "clusterrolebindings",
            binding("cluster-admin", &["system:masters"]),
        ),
        (
            "clusterrolebindings",
            binding("system:discovery", &["system:authenticated"]),
        ),
        (
            "clusterrolebindings",
            binding("system:basic-user", &["system:authenticated"]),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
    ]
}

/// Create the policy objects that do not exist yet (a user's edits persist).
pub fn install(store: &Store) {
    for (resource, obj) in policy() {
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let res = format!("{GROUP}/{resource}");
        let key = obj_key("", &name);
        if store.get(&res, &key).is_none() {
            let _ = store.commit(&res, &key, Expect::Absent, Some(obj));
        }
    }
}
