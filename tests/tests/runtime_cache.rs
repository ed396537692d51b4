//! Compile caches: the in-memory map (same bytes loaded twice) and the
//! precompiled disk cache (a new runtime on the same directory), asserted
//! through `PluginRuntime::stats()`.

use serde_json::json;
use wr_runtime::{CallLimits, PluginRuntime, ReconcileRequest, RuntimeConfig, RuntimeStats};
use wr_tests::plugins::plugin_bytes;

fn runtime(dir: &std::path::Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(dir.to_path_buf()),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn second_load_comes_from_the_caches() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = plugin_bytes("tombstone");

    let first = runtime(dir.path());
    let a = first.load(&bytes).unwrap();
    assert_eq!(
        first.stats(),
        RuntimeStats {
            compiled: 1,
            disk_cache_writes: 1,
            ..RuntimeStats::default()
        }
    );
    let b = first.load(&bytes).unwrap();
    assert_eq!(a.digest(), b.digest());
    assert_eq!(first.stats().memory_cache_hits, 1);
    assert_eq!(first.stats().compiled, 1);

    // A "restarted" host: new runtime, same directory.
    let second = runtime(dir.path());
    let c = second.load(&bytes).unwrap();
    assert_eq!(
        second.stats(),
        RuntimeStats {
            disk_cache_hits: 1,
            ..RuntimeStats::default()
        }
    );
    assert_eq!(c.digest(), a.digest());
    assert!(c.digest().starts_with("sha256:") && c.digest().len() == 7 + 64);

    // The deserialised plugin works.
    let req = ReconcileRequest {
        parent: json!({ "apiVersion": "x/v1", "kind": "Workspace", "metadata": { "name": "ws" }, "spec": { "owner": "a" } }),
        children: vec![],
        related: vec![],
        finalizing: false,
        config: None,
        now: "2026-01-15T12:00:00Z".into(),
    };
    let resp = c.reconcile(&req, &CallLimits::default()).await.unwrap();
    assert_eq!(resp.children.len(), 2);
}

#[tokio::test]
async fn invalid_components_are_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    assert!(rt.load(b"(component)").is_err());
    assert_eq!(rt.stats().disk_cache_writes, 0);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
