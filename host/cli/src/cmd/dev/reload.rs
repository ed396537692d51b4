//! The plugin author's inner loop: rebuild a component in `--plugin-dir` and
//! the running controller picks it up.
//!
//! The manager already re-reads local plugin files on its poll period; this
//! watcher makes the reload immediate and independent of that period by
//! annotating the WasmController when a file's size or mtime changes (an
//! annotation change makes the manager sync that controller, which re-reads
//! the file and hot-swaps the plugin when its digest differs).
//!
//! Changes are noticed through filesystem notifications (`notify`: inotify on
//! Linux) on the files' directories — directories, because a rebuild may
//! replace the file (new inode) rather than rewrite it. A build writes in
//! several steps, so events are debounced: the files are compared only once
//! no event came for [`DEBOUNCE`]. Where the watcher cannot start (inotify
//! limits, some network or container-mounted filesystems) it falls back to
//! polling the files' metadata twice a second.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use notify::{RecursiveMode, Watcher};
use serde_json::json;
use tokio::sync::mpsc;

use super::seed::{FIELD_MANAGER, PluginFile};

/// Annotation bumped on a WasmController when its local component changed.
pub const CHANGED_ANNOTATION: &str = "dev.wasm-reconciler.dev/plugin-changed";

/// Poll period of the fallback.
const POLL: Duration = Duration::from_millis(500);
/// Quiet time after the last filesystem event before the files are compared.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

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

/// A filesystem watcher on the directories of `files`, sending one message
/// per event that names one of them. None (and a warning) when it cannot
/// start; the caller then polls.
fn notifications(
    files: &[PluginFile],
) -> Option<(notify::RecommendedWatcher, mpsc::UnboundedReceiver<()>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let names: BTreeSet<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let handler = move |ev: notify::Result<notify::Event>| match ev {
        Ok(ev) if ev.paths.iter().any(|p| names.contains(p)) => {
            let _ = tx.send(());
        }
        Ok(_) => {}
        // An overflowed queue may have lost our file's event: look anyway.
        Err(e) => {
            tracing::debug!(error = %e, "plugin directory watch error; checking the files");
            let _ = tx.send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the plugin directory; polling it instead");
            return None;
        }
    };
    let dirs: BTreeSet<&Path> = files.iter().filter_map(|f| f.path.parent()).collect();
    for d in dirs {
        if let Err(e) = watcher.watch(d, RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %d.display(), error = %e, "cannot watch the plugin directory; polling it instead");
            return None;
        }
    }
    Some((watcher, rx))
}

/// Watches `files` until `stop` turns true.
pub async fn watch(
    client: Client,
    files: Vec<PluginFile>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut changed = Changed::new(client, &files);
    match notifications(&files) {
        Some((_watcher, mut events)) => {
            tracing::debug!(files = files.len(), "watching plugin files for rebuilds");
            loop {
                tokio::select! {
                    ev = events.recv() => if ev.is_none() { return },
                    _ = stop.changed() => return,
                }
                // Debounce: wait until the build has been quiet for a while.
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(DEBOUNCE) => break,
                        ev = events.recv() => if ev.is_none() { return },
                        _ = stop.changed() => return,
                    }
                }
                changed.check(&files).await;
            }
        }
        None => loop {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = stop.changed() => return,
            }
            changed.check(&files).await;
        },
    }
}

/// The last stamps seen, and the annotation that nudges the manager.
struct Changed {
    api: Api<DynamicObject>,
    seen: Vec<Option<Stamp>>,
    changes: u64,
}

impl Changed {
    fn new(client: Client, files: &[PluginFile]) -> Self {
        Changed {
            api: Api::all_with(
                client,
                &ApiResource::erase::<wr_engine::WasmController>(&()),
            ),
            seen: files.iter().map(|f| stamp(&f.path)).collect(),
            changes: 0,
        }
    }

    /// Annotates the WasmController of every file whose stamp changed.
    async fn check(&mut self, files: &[PluginFile]) {
        for (f, last) in files.iter().zip(self.seen.iter_mut()) {
            let now = stamp(&f.path);
            if now.is_none() || now == *last {
                continue;
            }
            *last = now;
            self.changes += 1;
            tracing::info!(controller = %f.controller, plugin = %f.path.display(), action = "plugin-file-changed", "component rebuilt; reloading");
            let patch = json!({"metadata": {"annotations": {CHANGED_ANNOTATION: self.changes.to_string()}}});
            let pp = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            if let Err(e) = self
                .api
                .patch(&f.controller, &pp, &Patch::Merge(&patch))
                .await
            {
                // The manager's own poll still picks the file up.
                tracing::warn!(controller = %f.controller, error = %e, "cannot annotate WasmController; relying on the poll");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next(rx: &mut mpsc::UnboundedReceiver<()>) -> Option<()> {
        tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// A rewrite and a replacement (rename over the file, as some builds
    /// do) both arrive as notifications; other files in the directory do not.
    #[tokio::test]
    async fn rewrites_and_replacements_of_a_plugin_file_are_notified() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.wasm");
        std::fs::write(&p, b"one").unwrap();
        let files = vec![PluginFile {
            controller: "c".into(),
            path: p.clone(),
        }];
        let Some((_w, mut rx)) = notifications(&files) else {
            println!("SKIP: no filesystem notifications here (the fallback polls)");
            return;
        };
        std::fs::write(dir.path().join("other.txt"), b"x").unwrap();
        std::fs::write(&p, b"two").unwrap();
        assert_eq!(next(&mut rx).await, Some(()), "rewrite not notified");
        while rx.try_recv().is_ok() {}
        let tmp = dir.path().join("p.wasm.tmp");
        std::fs::write(&tmp, b"three").unwrap();
        while rx.try_recv().is_ok() {}
        std::fs::rename(&tmp, &p).unwrap();
        assert_eq!(next(&mut rx).await, Some(()), "replacement not notified");
    }

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
