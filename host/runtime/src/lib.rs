//! The plugin runtime: loads reconcile plugins (WebAssembly components that
//! implement `wit/reconciler.wit`) and calls them in a sandbox.
//!
//! - One shared wasmtime `Engine` (component model, async calls, epoch
//!   interruption, fuel metering, pooling allocator).
//! - Each distinct component is compiled once (in-memory map keyed by sha256)
//!   and precompiled artifacts are kept on disk, so a restart loads in
//!   milliseconds (see `cache`).
//! - Each call gets a fresh `Store` instantiated from an `InstancePre`: nothing
//!   survives between calls.
//! - WASI 0.2 is linked with an empty context (no files, env, args, network;
//!   frozen clocks; constant randomness; stdout/stderr captured into the log)
//!   so components built by standard toolchains load but learn nothing.

mod bindings;
mod cache;
mod call;
mod engine;
mod error;
mod sandbox;
pub mod types;
mod validate;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

pub use call::CallTimings;
pub use error::{CallError, FaultKind, LoadError, RuntimeError};
pub use types::*;

use bindings::ReconcilerPre;
use cache::DiskCache;
use engine::EpochTicker;
use sandbox::HostState;

/// Runtime-wide settings: one `Engine`, one pooling allocator, one disk cache.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Directory for precompiled artifacts (keyed by sha256 + wasmtime version + config).
    /// `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Upper bound on concurrently live instances (sizes the pooling allocator).
    pub max_instances: u32,
    /// Largest linear memory any plugin may be given (per-call caps are lower or equal).
    pub max_memory_bytes: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            max_instances: 64,
            max_memory_bytes: 256 << 20,
        }
    }
}

/// Per-call limits. Defaults are safe for untrusted plugins.
#[derive(Debug, Clone)]
pub struct CallLimits {
    /// Wall-clock budget for instantiate + call (enforced with epoch interruption).
    pub timeout: Duration,
    /// Linear memory cap; growing past it traps.
    pub max_memory_bytes: usize,
    /// Optional fuel budget (deterministic instruction count limit).
    pub fuel: Option<u64>,
    /// Cap on the total size of the response (children + status + messages), in bytes.
    pub max_response_bytes: usize,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            timeout: Duration::from_secs(1),
            max_memory_bytes: 64 << 20,
            fuel: None,
            max_response_bytes: 4 << 20,
        }
    }
}

/// Counters for observing the compile caches (tests assert on them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Components compiled from wasm bytes (`Component::new`).
    pub compiled: u64,
    /// Loads served from the precompiled disk cache.
    pub disk_cache_hits: u64,
    /// Loads served from the in-memory map (same bytes loaded before).
    pub memory_cache_hits: u64,
    /// Precompiled artifacts written to disk.
    pub disk_cache_writes: u64,
    /// Failures to write the disk cache (the load still succeeds).
    pub disk_cache_errors: u64,
}

#[derive(Default)]
struct Counters {
    compiled: AtomicU64,
    disk_cache_hits: AtomicU64,
    memory_cache_hits: AtomicU64,
    disk_cache_writes: AtomicU64,
    disk_cache_errors: AtomicU64,
}

/// Handle to the shared engine; cheap to clone.
#[derive(Clone)]
pub struct PluginRuntime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: Engine,
    linker: Linker<HostState>,
    cache: Option<DiskCache>,
    max_memory_bytes: usize,
    loaded: Mutex<HashMap<String, Plugin>>,
    counters: Counters,
    // Declared last so it is dropped (and joined) after everything else.
    _ticker: EpochTicker,
}

impl PluginRuntime {
    /// Creates the engine, the linker (host `log` + WASI with an empty
    /// context) and the epoch ticker thread.
    pub fn new(config: RuntimeConfig) -> Result<PluginRuntime, RuntimeError> {
        let engine = engine::build(&config)?;
        let mut linker: Linker<HostState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| RuntimeError::Linker(format!("{e:#}")))?;
        bindings::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| RuntimeError::Linker(format!("{e:#}")))?;
        let cache = match config.cache_dir {
            Some(dir) => Some(
                DiskCache::open(dir.clone(), engine::cache_key(&engine))
                    .map_err(|source| RuntimeError::CacheDir { path: dir, source })?,
            ),
            None => None,
        };
        let ticker = EpochTicker::start(engine.clone())?;
        Ok(PluginRuntime {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                cache,
                max_memory_bytes: config.max_memory_bytes,
                loaded: Mutex::new(HashMap::new()),
                counters: Counters::default(),
                _ticker: ticker,
            }),
        })
    }

    /// Loads a component: from the in-memory map if these bytes were loaded
    /// before, else from the disk cache, else by compiling (and caching) it.
    /// Validates that it implements the `reconciler` world.
    ///
    /// CPU-heavy and synchronous: async callers use `spawn_blocking`.
    pub fn load(&self, bytes: &[u8]) -> Result<Plugin, LoadError> {
        let sha = hex::encode(Sha256::digest(bytes));
        let digest = format!("sha256:{sha}");
        if let Some(plugin) = self.lock_loaded().get(&digest) {
            self.inner
                .counters
                .memory_cache_hits
                .fetch_add(1, Ordering::Relaxed);
            return Ok(plugin.clone());
        }
        let inner = &self.inner;
        let cached = inner
            .cache
            .as_ref()
            .and_then(|c| c.get(&inner.engine, &sha));
        let from_disk = cached.is_some();
        let component = match cached {
            Some(component) => {
                inner
                    .counters
                    .disk_cache_hits
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%digest, "loaded plugin from the precompiled cache");
                component
            }
            None => {
                let component = Component::new(&inner.engine, bytes)
                    .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
                inner.counters.compiled.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%digest, "compiled plugin");
                component
            }
        };
        let pre = validate::link(&inner.engine, &inner.linker, &component)?;
        // Only components that passed validation are written to the disk cache.
        if !from_disk {
            self.store_in_cache(&sha, &component);
        }
        let plugin = Plugin {
            inner: Arc::new(PluginInner {
                digest: digest.clone(),
                pre,
                max_memory_bytes: inner.max_memory_bytes,
            }),
        };
        self.lock_loaded().insert(digest, plugin.clone());
        Ok(plugin)
    }

    fn store_in_cache(&self, sha: &str, component: &Component) {
        let Some(cache) = &self.inner.cache else {
            return;
        };
        match cache.put(sha, component) {
            Ok(()) => {
                self.inner
                    .counters
                    .disk_cache_writes
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                self.inner
                    .counters
                    .disk_cache_errors
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "cannot write the precompiled cache; continuing without it");
            }
        }
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, HashMap<String, Plugin>> {
        // The map holds only finished values; a panic elsewhere cannot leave it half-written.
        self.inner.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets a plugin from the in-memory map (e.g. when no controller uses
    /// it any more). Live `Plugin` handles keep working.
    pub fn unload(&self, digest: &str) {
        self.lock_loaded().remove(digest);
    }

    /// Cache counters.
    pub fn stats(&self) -> RuntimeStats {
        let c = &self.inner.counters;
        RuntimeStats {
            compiled: c.compiled.load(Ordering::Relaxed),
            disk_cache_hits: c.disk_cache_hits.load(Ordering::Relaxed),
            memory_cache_hits: c.memory_cache_hits.load(Ordering::Relaxed),
            disk_cache_writes: c.disk_cache_writes.load(Ordering::Relaxed),
            disk_cache_errors: c.disk_cache_errors.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for PluginRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRuntime")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// A compiled, validated plugin; cheap to clone; callable concurrently.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

struct PluginInner {
    digest: String,
    pre: ReconcilerPre<HostState>,
    max_memory_bytes: usize,
}

impl Plugin {
    /// `sha256:<hex>` of the component bytes: the plugin's identity.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// Calls `reconcile` in a fresh instance under `limits`.
    pub async fn reconcile(
        &self,
        req: &ReconcileRequest,
        limits: &CallLimits,
    ) -> Result<ReconcileResponse, CallError> {
        self.reconcile_timed(req, limits).await.0
    }

    /// Like `reconcile`, also returning where the time went (for benches).
    pub async fn reconcile_timed(
        &self,
        req: &ReconcileRequest,
        limits: &CallLimits,
    ) -> (Result<ReconcileResponse, CallError>, CallTimings) {
        let (result, timings) =
            call::run(&self.inner.pre, self.inner.max_memory_bytes, req, limits).await;
        if let Err(err) = &result {
            tracing::debug!(digest = %self.inner.digest, error = %err, "plugin call failed");
        }
        (result, timings)
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("digest", &self.inner.digest)
            .finish_non_exhaustive()
    }
}
