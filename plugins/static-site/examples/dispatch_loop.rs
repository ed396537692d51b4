//! Runs the plugin's whole guest-side call (parse the WIT request, reconcile,
//! serialise the answer) natively in a loop, on the runtime bench's request
//! (parent + 10 observed children): a harness for a native instruction
//! profile of the SDK's JSON work (`valgrind --tool=callgrind`), which the
//! JIT-compiled component does not give symbols for.
//!
//!     cargo run --release -p static-site --example dispatch_loop -- 1000

use wr_plugin_sdk::bindings::ReconcileRequest;
use wr_plugin_sdk::json;

fn request() -> ReconcileRequest {
    let mut children = vec![
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web", "namespace": "demo" }, "status": { "availableReplicas": 2 } }),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web-content", "namespace": "demo" } }),
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web", "namespace": "demo" } }),
    ];
    for i in 0..7 {
        children.push(json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": format!("extra-{i}"), "namespace": "demo", "labels": { "a": "b" } }, "data": { "k": "dmFsdWU=" } }));
    }
    let parent = json!({
        "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
        "metadata": { "name": "web", "namespace": "demo", "generation": 3, "uid": "0000" },
        "spec": { "image": "nginx:1.27", "replicas": 2, "port": 8080,
                  "content": { "index.html": "<h1>hello</h1>".repeat(20), "about.html": "about" } },
    });
    ReconcileRequest {
        parent: parent.to_string(),
        children: children.iter().map(|c| c.to_string()).collect(),
        related: vec![],
        finalizing: false,
        config: None,
        now: "2026-01-15T12:00:00Z".into(),
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let req = request();
    let mut bytes = 0;
    for _ in 0..n {
        let out = wr_plugin_sdk::__private::dispatch::<static_site::StaticSite>(req.clone())
            .expect("static-site answers");
        bytes += out.children.iter().map(String::len).sum::<usize>();
    }
    println!("{n} calls, {bytes} bytes of children");
}
