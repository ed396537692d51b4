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

/// `bytes` with an extra custom section: the same component, another digest.
fn variant(bytes: &[u8], i: u32) -> Vec<u8> {
    let name = b"wr-variant";
    let payload = i.to_le_bytes();
    let body_len = 1 + name.len() + payload.len();
    let mut out = bytes.to_vec();
    out.push(0); // custom section id
    out.push(u8::try_from(body_len).unwrap()); // LEB128, < 128
    out.push(u8::try_from(name.len()).unwrap());
    out.extend_from_slice(name);
    out.extend_from_slice(&payload);
    out
}

#[tokio::test]
async fn idle_versions_are_bounded_and_versions_in_use_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = plugin_bytes("tombstone");
    let rt = runtime(dir.path());
    let kept = wr_runtime::IDLE_VERSIONS_KEPT;

    // Two versions a controller still serves with (held handles).
    let serving = rt.load(&variant(&bytes, 0)).unwrap();
    let previous = rt.load(&variant(&bytes, 1)).unwrap();
    // Then many versions loaded once and dropped.
    let total = kept as u32 + 4;
    for i in 2..2 + total {
        drop(rt.load(&variant(&bytes, i)).unwrap());
    }
    // Eviction runs at each load: the versions in use, the `kept` most recent
    // idle ones, and the one just loaded (idle only since it was dropped).
    let loaded = rt.loaded_digests();
    assert_eq!(
        loaded.len(),
        2 + kept + 1,
        "in use + the idle ones kept: {loaded:?}"
    );
    assert!(loaded.contains(&serving.digest().to_string()));
    assert!(loaded.contains(&previous.digest().to_string()));

    // The most recent idle version is still in memory ...
    let hits = rt.stats().memory_cache_hits;
    let recent = rt.load(&variant(&bytes, 1 + total)).unwrap();
    assert_eq!(rt.stats().memory_cache_hits, hits + 1);
    drop(recent);
    // ... the oldest idle one was evicted and comes back from the disk cache.
    let disk = rt.stats().disk_cache_hits;
    let old = rt.load(&variant(&bytes, 2)).unwrap();
    assert_eq!(rt.stats().disk_cache_hits, disk + 1);
    assert_eq!(
        rt.stats().compiled,
        u64::from(2 + total),
        "never compiled twice"
    );
    assert!(old.digest().starts_with("sha256:"));
}
