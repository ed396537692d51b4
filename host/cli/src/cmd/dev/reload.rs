//! The plugin author's inner loop: rebuild a component in `--plugin-dir` and
//! the running controller picks it up.
//!
//! The manager already re-reads local plugin files on its poll period; this
//! watcher makes the reload immediate and independent of that period by
//! annotating the WasmController when a file's size or mtime changes (an
//! annotation change makes the manager sync that controller, which re-reads
//! the file and hot-swaps the plugin when its digest differs). Polling the
//! file metadata is hand-written on purpose: two files, checked twice a
//! second, need no inotify crate, and polling also works on network and
//! container-mounted filesystems where inotify does not.

use std::path::Path;
use std::time::{Duration, SystemTime};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::seed::{FIELD_MANAGER, PluginFile};

/// Annotation bumped on a WasmController when its local component changed.
pub const CHANGED_ANNOTATION: &str = "dev.wasm-reconciler.dev/plugin-changed";

const POLL: Duration = Duration::from_millis(500);

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

/// The stamp of `path`, None when it cannot be read (e.g. mid-rebuild).
pub fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        len: m.len(),
        modified: m.modified().ok(),
    })
}

/// Watches `files` until `stop` turns true.
pub async fn watch(
    client: Client,
    files: Vec<PluginFile>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let api: Api<DynamicObject> = Api::all_with(
        client,
        &ApiResource::erase::<wr_engine::WasmController>(&()),
    );
    let mut seen: Vec<Option<Stamp>> = files.iter().map(|f| stamp(&f.path)).collect();
    let mut changes: u64 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.changed() => return,
        }
        for (f, last) in files.iter().zip(seen.iter_mut()) {
            let now = stamp(&f.path);
            if now.is_none() || now == *last {
                continue;
            }
            *last = now;
            changes += 1;
            tracing::info!(controller = %f.controller, plugin = %f.path.display(), action = "plugin-file-changed", "component rebuilt; reloading");
            let patch =
                json!({"metadata": {"annotations": {CHANGED_ANNOTATION: changes.to_string()}}});
            let pp = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            if let Err(e) = api.patch(&f.controller, &pp, &Patch::Merge(&patch)).await {
                // The manager's own poll still picks the file up.
                tracing::warn!(controller = %f.controller, error = %e, "cannot annotate WasmController; relying on the poll");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_changes_when_the_file_is_rewritten_and_is_none_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm");
        assert_eq!(stamp(&p), None);
        std::fs::write(&p, b"one").unwrap();
        let a = stamp(&p).unwrap();
        assert_eq!(stamp(&p), Some(a.clone()));
        std::fs::write(&p, b"longer").unwrap();
        assert_ne!(stamp(&p), Some(a));
    }
}
