//! JavaScript built with componentize-js (StarlingMonkey), the toolchain most
//! JavaScript users reach for first. Its default build imports `wasi:http`
//! (for `fetch()`), which the host does not provide: the load is refused with
//! a message naming the import and the documented fix. Built with that fix
//! (`disableFeatures: ["http", "fetch-event"]`: `http` alone still leaves
//! `wasi:http/types`, found by this test) the same source loads and reconciles.
//! The components come from `plugins/js/starlingmonkey/build.sh` (run by
//! `plugins/languages/build-all.sh`); skipped with the reason when not built,
//! except under CI.

use serde_json::json;
use wr_runtime::{CallLimits, LoadError, PluginRuntime, ReconcileRequest, RuntimeConfig};
use wr_tests::languages::{Components, components_in};

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_instances: 4,
        max_memory_bytes: 256 << 20,
    })
    .expect("runtime")
}

fn built(name: &str) -> Option<Vec<u8>> {
    match components_in(name, &["js"]) {
        Components::Skipped(why) => {
            eprintln!("skipped: {why}");
            None
        }
        Components::Ready(mut ready) => ready.pop().map(|(_, bytes)| bytes),
    }
}

#[test]
fn the_default_starlingmonkey_build_is_refused_naming_wasi_http_and_the_fix() {
    let Some(bytes) = built("starlingmonkey-default") else {
        return;
    };
    let err = runtime()
        .load(&bytes)
        .expect_err("a component importing wasi:http must not load");
    let text = err.to_string();
    assert!(
        matches!(&err, LoadError::UnknownImport { import, .. } if import.starts_with("wasi:http/")),
        "{err:?}"
    );
    assert!(
        text.contains("disableFeatures")
            && text.contains("\"http\"")
            && text.contains("\"fetch-event\""),
        "the message must name the fix: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starlingmonkey_build_without_http_loads_and_reconciles() {
    let Some(bytes) = built("starlingmonkey-no-http") else {
        return;
    };
    let plugin = runtime().load(&bytes).expect("the no-http build loads");
    let request = ReconcileRequest {
        parent: json!({"apiVersion": "example.com/v1", "kind": "Thing",
                       "metadata": {"name": "web", "namespace": "demo"}}),
        children: vec![],
        related: vec![],
        finalizing: false,
        config: None,
        now: "2026-01-15T12:00:00Z".into(),
    };
    let limits = CallLimits {
        max_memory_bytes: 256 << 20,
        ..CallLimits::default()
    };
    let response = plugin
        .reconcile(&request, &limits)
        .await
        .expect("the call succeeds");
    assert_eq!(response.children.len(), 1, "{response:?}");
    assert_eq!(response.children[0]["metadata"]["name"], "web-probe");
    assert_eq!(response.children[0]["data"]["built"], "componentize-js");
}
