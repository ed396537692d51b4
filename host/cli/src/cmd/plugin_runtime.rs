//! The plugin runtime for commands that run plugins on the user's machine
//! (`render`, `plan`): one precompiled-plugin cache shared between them, and a
//! cache directory that cannot be used degrades to compiling without it
//! rather than failing the command.

use std::path::{Path, PathBuf};

use anyhow::Context;
use wr_runtime::{PluginRuntime, RuntimeConfig};

/// Exit code for a plugin that cannot be loaded or faults: a fault of the
/// plugin (`render`, `test` and `publish` agree on it).
pub const EXIT_FAULT: u8 = 5;

/// `$XDG_CACHE_HOME/wasm-reconciler`, else `~/.cache/wasm-reconciler`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(base.join("wasm-reconciler"))
}

/// The cache directory from `--no-cache` / `--cache-dir`, else the default.
pub fn cache_dir(no_cache: bool, explicit: Option<&PathBuf>) -> Option<PathBuf> {
    if no_cache {
        None
    } else {
        explicit.cloned().or_else(default_cache_dir)
    }
}

/// A runtime with `config`; when its cache directory is unusable, a warning
/// and a runtime without the disk cache.
pub fn create(config: RuntimeConfig) -> anyhow::Result<PluginRuntime> {
    match PluginRuntime::new(config.clone()) {
        Ok(rt) => Ok(rt),
        Err(wr_runtime::RuntimeError::CacheDir { path, source }) => {
            tracing::warn!(path = %path.display(), error = %source, "plugin cache unusable; compiling without it");
            PluginRuntime::new(RuntimeConfig {
                cache_dir: None,
                ..config
            })
            .context("cannot create the plugin runtime")
        }
        Err(err) => Err(err).context("cannot create the plugin runtime"),
    }
}
