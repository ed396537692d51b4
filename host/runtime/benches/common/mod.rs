//! The request the runtime bench times and `examples/call_loop.rs` counts
//! instructions of: a StaticSite parent and 10 observed children. One copy,
//! so the two figures are always of the same call.

use serde_json::json;
use wr_runtime::ReconcileRequest;

/// The static-site request: parent + Deployment, ConfigMap, Service and 7
/// unrelated Secrets.
pub fn request() -> ReconcileRequest {
    let mut children = vec![
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web", "namespace": "demo" }, "status": { "availableReplicas": 2 } }),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web-content", "namespace": "demo" } }),
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web", "namespace": "demo" } }),
    ];
    for i in 0..7 {
        children.push(json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": format!("extra-{i}"), "namespace": "demo", "labels": { "a": "b" } }, "data": { "k": "dmFsdWU=" } }));
    }
    ReconcileRequest {
        parent: json!({
            "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
            "metadata": { "name": "web", "namespace": "demo", "generation": 3, "uid": "0000" },
            "spec": { "image": "nginx:1.27", "replicas": 2, "port": 8080,
                      "content": { "index.html": "<h1>hello</h1>".repeat(20), "about.html": "about" } },
        }),
        children,
        related: vec![],
        finalizing: false,
        config: None,
        now: "2026-01-15T12:00:00Z".into(),
    }
}
