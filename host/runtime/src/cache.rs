//! Disk cache of precompiled components, so a restarted host loads a plugin in
//! milliseconds instead of recompiling it.
//!
//! File name: `<sha256 of the component>-<engine key>.cwasm`, where the engine
//! key hashes the wasmtime version and the engine's compatibility hash.
//!
//! # Safety argument for `Component::deserialize_file`
//!
//! Deserialising runs native code from the file without validation, so the
//! file must come from `Component::serialize` of a compatible engine. We only
//! read files this module wrote: the name binds the component's sha256 and the
//! engine key (wasmtime additionally checks version and config in the artifact
//! header and refuses mismatches), and files are written to a temporary name
//! and renamed into place, so a crash never leaves a partial artifact under a
//! final name. The cache directory must be writable only by the host's user:
//! whoever can write there can run code in the host process.

use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Directory + engine key; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    engine_key: String,
}

impl DiskCache {
    pub(crate) fn open(dir: PathBuf, engine_key: String) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(DiskCache { dir, engine_key })
    }

    fn path_for(&self, sha256_hex: &str) -> PathBuf {
        self.dir
            .join(format!("{sha256_hex}-{}.cwasm", self.engine_key))
    }

    /// Loads the precompiled component if present. A file that wasmtime
    /// refuses (e.g. corrupted) is removed and reported as a miss.
    pub(crate) fn get(&self, engine: &Engine, sha256_hex: &str) -> Option<Component> {
        let path = self.path_for(sha256_hex);
        if !path.is_file() {
            return None;
        }
        // SAFETY: see the module documentation: the file was written by
        // `put` below from `Component::serialize` for this engine key.
        #[allow(unsafe_code)]
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "discarding unusable precompiled artifact");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores the precompiled component atomically (temp file + rename).
    pub(crate) fn put(&self, sha256_hex: &str, component: &Component) -> Result<(), String> {
        let bytes = component
            .serialize()
            .map_err(|e| format!("cannot serialise component: {e:#}"))?;
        let path = self.path_for(sha256_hex);
        write_atomically(&self.dir, &path, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupted_artifact_is_a_miss_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let cache = DiskCache::open(dir.path().to_path_buf(), "k".into()).unwrap();
        let path = cache.path_for("abc");
        std::fs::write(&path, b"not an artifact").unwrap();
        assert!(cache.get(&engine, "abc").is_none());
        assert!(!path.exists());
    }

    #[test]
    fn put_then_get_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let cache = DiskCache::open(dir.path().to_path_buf(), "k".into()).unwrap();
        let component = Component::new(&engine, "(component)").unwrap();
        cache.put("abc", &component).unwrap();
        assert!(cache.get(&engine, "abc").is_some());
        // No temp files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["abc-k.cwasm".to_string()]);
    }
}
