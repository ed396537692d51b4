//! The plugin runtime: loads reconcile plugins (WebAssembly components that
//! implement a world of the plugin contract: `wit/reconciler.wit`, 0.1.0, or
//! `wit/0.2.0/reconciler.wit`, 0.2.0) and calls them in a sandbox.
//!
//! - The contract version is found at load from the component's type
//!   (`validate`); each version has its own bindings (`bindings`), adapted to
//!   the one request/response shape in `types`, so callers never see it
//!   except through [`Plugin::info`].
//! - Two shared wasmtime engines ("lanes", see `lane`): a plain one without
//!   fuel instrumentation, used for every call without a fuel budget (the
//!   fast path), and a fuel-metered one, created on the first call that sets
//!   `CallLimits::fuel`; the plugin is compiled for it then, once, so a fuel
//!   budget is always enforced. Both use the component model, async calls,
//!   epoch interruption (timeouts) and a pooling allocator.
//! - Each distinct component is compiled once per engine (in-memory map keyed
//!   by sha256) and precompiled artifacts are kept on disk under a key that
//!   includes the engine config, so a restart loads in milliseconds (see
//!   `cache`).
//! - Each call gets a fresh `Store` instantiated from an `InstancePre`: nothing
//!   survives between calls.
//! - Calls run inline on the caller's task, or with `WR_PLUGIN_CALL_POOL=1`
//!   on a thread pool of their own (`pool`, opt-in until its gain under load
//!   is measured: the hop doubles a sequential call). Either way dropping a
//!   call's future ends it and frees its instance slot.
//! - WASI 0.2 is linked with an empty context (no files, env, args, network;
//!   frozen clocks; constant randomness; stdout/stderr captured into the log)
//!   so components built by standard toolchains load but learn nothing.

mod bindings;
mod cache;
mod call;
mod contract;
mod engine;
mod error;
mod lane;
mod pool;
mod sandbox;
pub mod types;
mod validate;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

pub use call::CallTimings;
pub use contract::{ContractVersion, PluginInfo, World};
pub use error::{CallError, FaultKind, InfoError, LoadError, RuntimeError};
pub use types::*;

use bindings::WorldPre;
use lane::Lanes;

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
            timeout: Duration::from_secs(2),
            max_memory_bytes: 64 << 20,
            fuel: None,
            max_response_bytes: 4 << 20,
        }
    }
}

/// Counters for observing the compile caches (tests assert on them). They
/// cover both engines: the lazy compile of a plugin for the fuel-metered
/// engine counts as a compile (or a disk cache hit) too.
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
pub(crate) struct Counters {
    pub(crate) compiled: AtomicU64,
    pub(crate) disk_cache_hits: AtomicU64,
    pub(crate) memory_cache_hits: AtomicU64,
    pub(crate) disk_cache_writes: AtomicU64,
    pub(crate) disk_cache_errors: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Handle to the shared engine; cheap to clone.
#[derive(Clone)]
pub struct PluginRuntime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    lanes: Arc<Lanes>,
    max_memory_bytes: usize,
    loaded: Mutex<Loaded>,
}

/// How many loaded versions nobody holds any more stay in memory (checked at
/// each load, so the version loaded last may briefly be one more), so that
/// flipping back to a recent version is instant. Versions in use (held by a
/// controller as serving or last-good) are never evicted and do not count.
/// Each idle version costs its compiled code (~3 MiB for a small Rust
/// component, ~330 MiB for an 18 MiB Python one); an evicted one comes back
/// from the disk cache in milliseconds.
pub const IDLE_VERSIONS_KEPT: usize = 4;

/// The in-memory map of loaded components, with a use tick for LRU eviction.
#[derive(Default)]
struct Loaded {
    plugins: HashMap<String, (Plugin, u64)>,
    tick: u64,
}

impl Loaded {
    fn get(&mut self, digest: &str) -> Option<Plugin> {
        self.tick += 1;
        let tick = self.tick;
        self.plugins.get_mut(digest).map(|(p, t)| {
            *t = tick;
            p.clone()
        })
    }

    fn insert(&mut self, digest: String, plugin: Plugin) {
        self.tick += 1;
        self.plugins.insert(digest, (plugin, self.tick));
        self.evict_idle();
    }

    /// Drops the least recently used idle versions beyond [`IDLE_VERSIONS_KEPT`].
    /// "Idle" = only this map holds the plugin (nobody serves with it).
    fn evict_idle(&mut self) {
        let mut idle: Vec<(u64, String)> = self
            .plugins
            .iter()
            .filter(|(_, (p, _))| Arc::strong_count(&p.inner) == 1)
            .map(|(d, (_, t))| (*t, d.clone()))
            .collect();
        if idle.len() <= IDLE_VERSIONS_KEPT {
            return;
        }
        idle.sort();
        let excess = idle.len() - IDLE_VERSIONS_KEPT;
        for (_, digest) in idle.into_iter().take(excess) {
            self.plugins.remove(&digest);
        }
    }
}

impl PluginRuntime {
    /// Creates the plain engine, its linker (host `log` + WASI with an empty
    /// context) and its epoch ticker. The fuel-metered engine is created on
    /// the first call with a fuel budget.
    pub fn new(config: RuntimeConfig) -> Result<PluginRuntime, RuntimeError> {
        let max_memory_bytes = config.max_memory_bytes;
        let lanes = Lanes::new(config)?;
        Ok(PluginRuntime {
            inner: Arc::new(RuntimeInner {
                lanes: Arc::new(lanes),
                max_memory_bytes,
                loaded: Mutex::new(Loaded::default()),
            }),
        })
    }

    /// Loads a component: from the in-memory map if these bytes were loaded
    /// before (in use, or among the [`IDLE_VERSIONS_KEPT`] most recent idle ones), else from the disk cache, else by compiling (and caching) it.
    /// Finds the contract version and world it implements from its type, and
    /// for 0.2.0 and later calls its `info` export once (in the sandbox, with
    /// the default limits) to read what it declares.
    ///
    /// CPU-heavy and synchronous: async callers use `spawn_blocking`.
    pub fn load(&self, bytes: &[u8]) -> Result<Plugin, LoadError> {
        let sha = hex::encode(Sha256::digest(bytes));
        let digest = format!("sha256:{sha}");
        let lanes = &self.inner.lanes;
        if let Some(plugin) = self.lock_loaded().get(&digest) {
            lanes.counters.bump(&lanes.counters.memory_cache_hits);
            return Ok(plugin);
        }
        let pre = lanes.plain().prepare(&sha, bytes, &lanes.counters)?;
        let info = read_info(&pre, self.inner.max_memory_bytes, &self.inner.lanes.slots)?;
        tracing::info!(
            %digest,
            contract = info.contract.as_str(),
            world = info.world.name(),
            reads_now = info.reads_now,
            "loaded plugin"
        );
        let plugin = Plugin {
            inner: Arc::new(PluginInner {
                digest: digest.clone(),
                sha256_hex: sha,
                bytes: Arc::from(bytes),
                info,
                pre,
                metered: tokio::sync::OnceCell::new(),
                lanes: Arc::clone(lanes),
                max_memory_bytes: self.inner.max_memory_bytes,
            }),
        };
        self.lock_loaded().insert(digest, plugin.clone());
        Ok(plugin)
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        // The map holds only finished values; a panic elsewhere cannot leave it half-written.
        self.inner.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets a plugin from the in-memory map (e.g. when no controller uses
    /// it any more). Live `Plugin` handles keep working.
    pub fn unload(&self, digest: &str) {
        self.lock_loaded().plugins.remove(digest);
    }

    /// Digests held in memory: versions in use plus up to
    /// [`IDLE_VERSIONS_KEPT`] idle ones.
    pub fn loaded_digests(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lock_loaded().plugins.keys().cloned().collect();
        v.sort();
        v
    }

    /// Cache counters.
    pub fn stats(&self) -> RuntimeStats {
        let c = &self.inner.lanes.counters;
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
    sha256_hex: String,
    /// The component bytes, kept to compile for the metered engine on the
    /// first call with a fuel budget.
    bytes: Arc<[u8]>,
    /// Contract version, world and declarations, read at load.
    info: PluginInfo,
    /// Pre-linked on the plain engine (no fuel instrumentation).
    pre: WorldPre,
    /// Pre-linked on the fuel-metered engine, once a call needed it.
    metered: tokio::sync::OnceCell<WorldPre>,
    lanes: Arc<Lanes>,
    max_memory_bytes: usize,
}

impl Plugin {
    /// `sha256:<hex>` of the component bytes: the plugin's identity.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// The contract version and world the component implements, and what it
    /// declared at load (e.g. whether it reads `now`).
    pub fn info(&self) -> &PluginInfo {
        &self.inner.info
    }

    /// Calls `customize` in a fresh instance under `limits`: the related
    /// objects this parent asks for. `Ok(None)` when the plugin does not
    /// export `customize` (every 0.1.0 plugin, and 0.2.0 plugins of world
    /// `reconciler`): the controller's related rules apply unnarrowed.
    pub async fn customize(
        &self,
        req: &CustomizeRequest,
        limits: &CallLimits,
    ) -> Result<Option<Vec<RelatedSelector>>, CallError> {
        if !self.inner.info.has_customize() {
            return Ok(None);
        }
        let op = call::customize_op(req)?;
        let plugin = self.clone();
        let limits = limits.clone();
        // Inline, or on the call pool when it is on (see `pool`).
        pool::run(async move {
            let pre = plugin.pre_for(&limits).await?;
            let _slot = plugin.slot().await?;
            call::customize(pre, plugin.inner.max_memory_bytes, op, &limits)
                .await
                .map(Some)
        })
        .await?
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
    ///
    /// A call with `limits.fuel` runs on the fuel-metered engine; the first
    /// such call compiles the plugin for it, which is not counted against the
    /// timeout. `timings` cover the call itself, not a hop to the call pool
    /// and back (when it is on).
    pub async fn reconcile_timed(
        &self,
        req: &ReconcileRequest,
        limits: &CallLimits,
    ) -> (Result<ReconcileResponse, CallError>, CallTimings) {
        match RequestText::new(req) {
            Ok(text) => self.reconcile_text_timed(text, limits).await,
            Err(err) => (Err(err), CallTimings::default()),
        }
    }

    /// Calls `reconcile` with a request whose objects are already JSON text
    /// (made by [`RequestText::new`]): for a caller that needs the text
    /// itself too (the engine hashes it for its memo), so the request is
    /// serialised once. The texts are handed to the plugin as they are.
    pub async fn reconcile_text(
        &self,
        req: RequestText,
        limits: &CallLimits,
    ) -> Result<ReconcileResponse, CallError> {
        self.reconcile_text_timed(req, limits).await.0
    }

    /// Like `reconcile_text`, also returning where the time went.
    pub async fn reconcile_text_timed(
        &self,
        req: RequestText,
        limits: &CallLimits,
    ) -> (Result<ReconcileResponse, CallError>, CallTimings) {
        // Lowered here: its wire form is owned and can move to the call pool
        // if it is on. Both lanes share the contract version.
        let wire = bindings::wire_request(self.inner.pre.contract(), req);
        let plugin = self.clone();
        let limits = limits.clone();
        // The guest runs inline, or on the call pool when it is on (see
        // `pool`); either way dropping this future ends the call.
        let outcome = pool::run(async move {
            let pre = match plugin.pre_for(&limits).await {
                Ok(pre) => pre,
                Err(err) => return (Err(err), CallTimings::default()),
            };
            let _slot = match plugin.slot().await {
                Ok(slot) => slot,
                Err(err) => return (Err(err), CallTimings::default()),
            };
            call::run(pre, plugin.inner.max_memory_bytes, wire, &limits).await
        })
        .await;
        let (result, timings) = outcome.unwrap_or_else(|err| (Err(err), CallTimings::default()));
        if let Err(err) = &result {
            tracing::debug!(digest = %self.inner.digest, error = %err, "plugin call failed");
        }
        (result, timings)
    }

    /// Waits for an instance slot (see `Lanes::slots`); held for the call.
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, CallError> {
        self.inner.lanes.slots.acquire().await.map_err(|_| {
            CallError::fault(
                FaultKind::Internal,
                "the runtime's instance slots are closed",
            )
        })
    }

    /// The pre-linked component for the lane `limits` need.
    async fn pre_for(&self, limits: &CallLimits) -> Result<&WorldPre, CallError> {
        match limits.fuel {
            None => Ok(&self.inner.pre),
            Some(_) => self.metered_pre().await,
        }
    }

    /// The plugin pre-linked on the fuel-metered engine, compiled (or read
    /// from the disk cache) on first use; concurrent first calls wait for
    /// one compile.
    async fn metered_pre(&self) -> Result<&WorldPre, CallError> {
        self.inner
            .metered
            .get_or_try_init(|| async {
                let lanes = Arc::clone(&self.inner.lanes);
                let bytes = Arc::clone(&self.inner.bytes);
                let sha = self.inner.sha256_hex.clone();
                let prepare = move || -> Result<WorldPre, String> {
                    let lane = lanes.metered().map_err(|e| e.to_string())?;
                    lane.prepare(&sha, &bytes, &lanes.counters)
                        .map_err(|e| e.to_string())
                };
                let prepared = match tokio::runtime::Handle::try_current() {
                    // Compiling takes hundreds of milliseconds of CPU: keep
                    // it off the async worker threads.
                    Ok(handle) => handle
                        .spawn_blocking(prepare)
                        .await
                        .unwrap_or_else(|e| Err(format!("compile task failed: {e}"))),
                    Err(_) => prepare(),
                };
                prepared.map_err(|message| {
                    CallError::fault(
                        FaultKind::Internal,
                        format!("cannot prepare the plugin for fuel metering: {message}"),
                    )
                })
            })
            .await
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("digest", &self.inner.digest)
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

/// What a freshly linked component declares. A 0.1.0 component cannot
/// declare anything: it is treated as reading `now` (never memoisable). A
/// 0.2.0 component's `info` export runs once, in the sandbox under the
/// default limits.
///
/// `load` is synchronous and may be called from inside an async task, where
/// blocking on the tokio runtime is not allowed, so the call runs on a short
/// thread of its own with a one-thread runtime (the epoch callback yields to
/// tokio). It costs one instantiation, once per load of new bytes.
fn read_info(
    pre: &WorldPre,
    max_memory_bytes: usize,
    slots: &tokio::sync::Semaphore,
) -> Result<PluginInfo, LoadError> {
    if pre.contract() == ContractVersion::V0_1 {
        return Ok(PluginInfo {
            contract: ContractVersion::V0_1,
            world: pre.world(),
            reads_now: true,
        });
    }
    std::thread::scope(|scope| {
        let call = scope.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| LoadError::Info(InfoError::Runtime(e)))?;
            runtime.block_on(async {
                let _slot = slots
                    .acquire()
                    .await
                    .map_err(|_| LoadError::Info(InfoError::SlotsClosed))?;
                call::info(pre, max_memory_bytes, &CallLimits::default())
                    .await
                    .map_err(|e| LoadError::Info(InfoError::Call(e)))
            })
        });
        call.join()
            .unwrap_or_else(|_| Err(LoadError::Info(InfoError::Panicked)))
    })
}
