//! The same request gives byte-identical output across 100 calls (fresh
//! store each time, frozen clocks, constant randomness).

use serde_json::json;
use wr_runtime::{CallLimits, PluginRuntime, ReconcileRequest, RuntimeConfig};
use wr_tests::plugins::plugin_bytes;

/// A StaticSite parent with 10 observed children (the bench input too).
fn request() -> ReconcileRequest {
    let mut children = vec![
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web", "namespace": "demo" }, "status": { "availableReplicas": 2 } }),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web-content", "namespace": "demo", "annotations": { "static-site.examples.wasm-reconciler.dev/content-hash": "old" } } }),
    ];
    for i in 0..8 {
        children.push(json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": format!("extra-{i}"), "namespace": "demo" } }));
    }
    ReconcileRequest {
        parent: json!({
            "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
            "metadata": { "name": "web", "namespace": "demo", "generation": 3 },
            "spec": { "image": "nginx:1.27", "replicas": 2, "port": 8080,
                      "content": { "index.html": "<h1>hi</h1>", "about.html": "about", "z.css": "body{}" } },
        }),
        children,
        related: vec![],
        finalizing: false,
        config: None,
        now: "2026-01-15T12:00:00Z".into(),
    }
}

#[tokio::test]
async fn hundred_calls_are_byte_identical() {
    let rt = PluginRuntime::new(RuntimeConfig::default()).unwrap();
    let plugin = rt.load(&plugin_bytes("static-site")).unwrap();
    let req = request();
    let first = serde_json::to_vec(
        &plugin
            .reconcile(&req, &CallLimits::default())
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(first.len() > 1000, "suspiciously small output");
    for i in 1..100 {
        let resp = plugin
            .reconcile(&req, &CallLimits::default())
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_vec(&resp).unwrap(),
            first,
            "call {i} differs"
        );
    }
}

#[tokio::test]
async fn sandbox_probes_are_deterministic_too() {
    let rt = PluginRuntime::new(RuntimeConfig::default()).unwrap();
    let plugin = rt.load(&plugin_bytes("adversarial")).unwrap();
    let mut req = request();
    req.config = Some(json!({ "mode": "read-clock" }));
    let first = plugin
        .reconcile(&req, &CallLimits::default())
        .await
        .unwrap();
    for _ in 0..10 {
        assert_eq!(
            plugin
                .reconcile(&req, &CallLimits::default())
                .await
                .unwrap(),
            first
        );
    }
}
