//! wasmtime `Engine` configuration (plain or fuel-metered, see `lane`), the
//! epoch ticker that drives per-call timeouts, and the hash that keys the
//! precompiled cache.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::RuntimeConfig;
use crate::error::RuntimeError;

/// How often the ticker bumps the engine epoch; the timeout resolution.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Most core instances / memories / tables one plugin component may have.
/// Components made by `cargo build --target wasm32-wasip2` have a handful;
/// componentize-py (Python) makes 38 core instances, componentize-qjs
/// (JavaScript) 3 memories (docs/authoring.md).
const CORE_INSTANCES_PER_COMPONENT: u32 = 64;
const MEMORIES_PER_COMPONENT: u32 = 4;
const TABLES_PER_COMPONENT: u32 = 8;
/// Bytes of each reused linear memory kept resident between calls. On Linux
/// 6.7 and later wasmtime finds the pages a call dirtied with `PAGEMAP_SCAN`
/// (turned on below) and resets only those; older kernels memset this many
/// bytes (at most the memory's size) per call, so it stays moderate.
const KEEP_RESIDENT_BYTES: usize = 4 << 20;

/// Whether an engine compiles fuel accounting into the plugin code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metering {
    /// No fuel instrumentation: the fast path for calls without a fuel budget.
    Off,
    /// Every function and loop counts fuel; for calls with `CallLimits::fuel`.
    Fuel,
}

/// Builds an engine: component model, async, epoch interruption, fuel
/// metering when asked for, and a pooling allocator sized from
/// `RuntimeConfig` so instantiation is a few memcpys.
pub(crate) fn build(config: &RuntimeConfig, metering: Metering) -> Result<Engine, RuntimeError> {
    let instances = config.max_instances.max(1);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(instances * MEMORIES_PER_COMPONENT)
        .total_tables(instances * TABLES_PER_COMPONENT)
        .total_stacks(instances)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_memory_size(config.max_memory_bytes)
        .max_unused_warm_slots(instances.min(16))
        // Reset reused slots with memset instead of madvise for the first
        // pages: a fresh instance per call would otherwise page-fault its
        // whole working set back in on every call.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(64 << 10)
        // Reset only the pages a call dirtied (Linux >= 6.7; elsewhere the
        // memset above). wasmtime 48 leaves it off by default, so every call
        // used to memset its whole linear memory (~1 MiB for static-site: the
        // guest's stack alone is 1 MiB) when its store was dropped: the
        // instruction gate's plugin-call count halved with it on
        // (docs/benchmarks.md, "Plugin call cost (item 3), session 8").
        .pagemap_scan(Enabled::Auto);

    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(metering == Metering::Fuel)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&wasm).map_err(RuntimeError::Engine)
}

/// Key of the precompiled cache for this engine: wasmtime's version and its
/// own compatibility hash (target, tunables such as fuel metering, enabled
/// features), so artifacts of another version or config (e.g. the metered
/// engine's) are never offered to `deserialize`.
pub(crate) fn cache_key(engine: &Engine) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    wasmtime_version().hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let digest = hasher.0.finalize();
    hex::encode(&digest[..8])
}

/// The wasmtime version this crate is built against (pinned in the workspace).
/// Belt and braces: wasmtime's compatibility hash already includes its own
/// version, so a stale string here cannot make an incompatible artifact load.
pub(crate) fn wasmtime_version() -> &'static str {
    "48.0.8"
}

/// `std::hash::Hasher` over SHA-256, so the key is stable across processes
/// (std's `DefaultHasher` is not guaranteed to be).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Background thread that increments the engine epoch every `EPOCH_TICK`.
/// Stores set their deadline in ticks; the thread stops when dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: Engine) -> Result<Self, RuntimeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("wr-epoch-ticker".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_err(RuntimeError::EpochTicker)?;
        Ok(EpochTicker {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_depends_on_engine_config() {
        let a = build(&RuntimeConfig::default(), Metering::Off).unwrap();
        let b = build(&RuntimeConfig::default(), Metering::Off).unwrap();
        assert_eq!(cache_key(&a), cache_key(&b));
        let other = Engine::new(&Config::new()).unwrap();
        assert_ne!(cache_key(&a), cache_key(&other));
        // Fuel instrumentation changes the machine code: separate artifacts.
        let metered = build(&RuntimeConfig::default(), Metering::Fuel).unwrap();
        assert_ne!(cache_key(&a), cache_key(&metered));
    }
}
