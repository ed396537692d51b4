//! A lane is one wasmtime `Engine` with everything tied to it: the linker,
//! the precompiled disk cache (keyed by that engine's config) and the epoch
//! ticker. Compiled code belongs to one engine, so a component is compiled
//! once per lane it is called on.
//!
//! The runtime has two lanes (`Lanes`):
//!
//! - **plain**: no fuel instrumentation. Every load compiles here and every
//!   call without a fuel budget runs here. Fuel accounting is compiled into
//!   every function entry and loop back-edge when `Config::consume_fuel` is
//!   on, so leaving it out is the fast path.
//! - **metered**: fuel instrumentation on. Created on the first call that
//!   has `CallLimits::fuel`; the plugin is then compiled (or read from the
//!   disk cache, under a different key) for it once, lazily, and its calls
//!   with a fuel budget run there. A budget is therefore always enforced.

use std::sync::{Mutex, OnceLock};

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::bindings::{self, WorldPre};
use crate::cache::DiskCache;
use crate::engine::{self, EpochTicker, Metering};
use crate::error::{LoadError, RuntimeError};
use crate::sandbox::HostState;
use crate::{Counters, RuntimeConfig};

/// One engine, its linker, its cache and its ticker.
pub(crate) struct Lane {
    engine: Engine,
    linker: Linker<HostState>,
    cache: Option<DiskCache>,
    // Declared last so it is dropped (and joined) after everything else.
    _ticker: EpochTicker,
}

impl Lane {
    /// Creates the engine, the linker (host `log` of every contract version +
    /// WASI with an empty context), opens the disk cache and starts the epoch ticker.
    pub(crate) fn new(config: &RuntimeConfig, metering: Metering) -> Result<Lane, RuntimeError> {
        let engine = engine::build(config, metering)?;
        let mut linker: Linker<HostState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(RuntimeError::Linker)?;
        bindings::add_to_linker(&mut linker).map_err(RuntimeError::Linker)?;
        let cache = match &config.cache_dir {
            Some(dir) => Some(
                DiskCache::open(dir.clone(), engine::cache_key(&engine)).map_err(|source| {
                    RuntimeError::CacheDir {
                        path: dir.clone(),
                        source,
                    }
                })?,
            ),
            None => None,
        };
        let ticker = EpochTicker::start(engine.clone())?;
        Ok(Lane {
            engine,
            linker,
            cache,
            _ticker: ticker,
        })
    }

    /// Gets the component for this lane from the disk cache or by compiling
    /// it, finds the world it implements and pre-links it for that world. Only validated
    /// components are written to the disk cache.
    pub(crate) fn prepare(
        &self,
        sha256_hex: &str,
        bytes: &[u8],
        counters: &Counters,
    ) -> Result<WorldPre, LoadError> {
        let cached = self
            .cache
            .as_ref()
            .and_then(|c| c.get(&self.engine, sha256_hex));
        let from_disk = cached.is_some();
        let component = match cached {
            Some(component) => {
                counters.bump(&counters.disk_cache_hits);
                tracing::debug!(
                    sha256 = sha256_hex,
                    "loaded plugin from the precompiled cache"
                );
                component
            }
            None => {
                // wasmtime reads bytes without the magic as WebAssembly text
                // and would say only "input bytes aren't valid utf-8".
                if !bytes.starts_with(b"\0asm") && std::str::from_utf8(bytes).is_err() {
                    let head = bytes
                        .iter()
                        .take(8)
                        .copied()
                        .map(std::ascii::escape_default);
                    return Err(LoadError::NotWasm {
                        len: bytes.len(),
                        head: format!("\"{}\"", head.flatten().map(char::from).collect::<String>()),
                    });
                }
                let component = Component::new(&self.engine, bytes).map_err(LoadError::Compile)?;
                counters.bump(&counters.compiled);
                tracing::debug!(sha256 = sha256_hex, "compiled plugin");
                component
            }
        };
        let pre = crate::validate::link(&self.engine, &self.linker, &component)?;
        if !from_disk {
            self.store_in_cache(sha256_hex, &component, counters);
        }
        Ok(pre)
    }

    fn store_in_cache(&self, sha256_hex: &str, component: &Component, counters: &Counters) {
        let Some(cache) = &self.cache else {
            return;
        };
        match cache.put(sha256_hex, component) {
            Ok(()) => counters.bump(&counters.disk_cache_writes),
            Err(error) => {
                counters.bump(&counters.disk_cache_errors);
                tracing::warn!(%error, "cannot write the precompiled cache; continuing without it");
            }
        }
    }
}

/// The plain lane, the lazily created metered lane and the shared counters.
/// Shared (`Arc`) by the runtime and every `Plugin`, so a plugin handle keeps
/// its engines and their epoch tickers alive (timeouts keep working) even
/// after the `PluginRuntime` is dropped.
pub(crate) struct Lanes {
    config: RuntimeConfig,
    plain: Lane,
    metered: OnceLock<Lane>,
    /// Serialises creation of the metered lane (`OnceLock::get_or_try_init`
    /// is not stable).
    metered_init: Mutex<()>,
    pub(crate) counters: Counters,
    /// One permit per live instance: every call waits here, first come first
    /// served, instead of failing when the pooling allocator is full. Without
    /// it, controllers whose `maxConcurrentReconciles` add up to more than
    /// `max_instances` would see calls refused as faults while another
    /// controller is busy (and a rollback judge would count them). One
    /// semaphore across both lanes: each lane's pool is that large, so
    /// neither can be exhausted.
    pub(crate) slots: tokio::sync::Semaphore,
}

impl Lanes {
    pub(crate) fn new(config: RuntimeConfig) -> Result<Lanes, RuntimeError> {
        let plain = Lane::new(&config, Metering::Off)?;
        let slots = tokio::sync::Semaphore::new(config.max_instances.max(1) as usize);
        Ok(Lanes {
            slots,
            config,
            plain,
            metered: OnceLock::new(),
            metered_init: Mutex::new(()),
            counters: Counters::default(),
        })
    }

    /// The lane without fuel instrumentation.
    pub(crate) fn plain(&self) -> &Lane {
        &self.plain
    }

    /// The fuel-metered lane, created on first use (its engine reserves its
    /// own pooling-allocator address space and starts its own ticker, which
    /// runtimes that never meter fuel should not pay for).
    pub(crate) fn metered(&self) -> Result<&Lane, RuntimeError> {
        if let Some(lane) = self.metered.get() {
            return Ok(lane);
        }
        // The guard protects no data, only creation; poisoning is harmless.
        let _guard = self.metered_init.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lane) = self.metered.get() {
            return Ok(lane);
        }
        let lane = Lane::new(&self.config, Metering::Fuel)?;
        tracing::debug!("created the fuel-metered engine");
        Ok(self.metered.get_or_init(|| lane))
    }

    /// Whether the metered lane exists (for tests).
    #[cfg(test)]
    pub(crate) fn has_metered(&self) -> bool {
        self.metered.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metered_lane_is_created_once_on_demand() {
        let lanes = Lanes::new(RuntimeConfig::default()).unwrap();
        assert!(!lanes.has_metered());
        let first: *const Lane = lanes.metered().unwrap();
        let second: *const Lane = lanes.metered().unwrap();
        assert!(lanes.has_metered());
        assert!(std::ptr::eq(first, second));
    }

    #[test]
    fn only_the_metered_lane_accepts_a_fuel_budget() {
        // call.rs relies on this: a budget that reached the plain engine
        // would be refused, never silently ignored.
        let lanes = Lanes::new(RuntimeConfig::default()).unwrap();
        let mut plain = wasmtime::Store::new(&lanes.plain().engine, ());
        assert!(plain.set_fuel(10).is_err());
        let metered_engine = &lanes.metered().unwrap().engine;
        let mut metered = wasmtime::Store::new(metered_engine, ());
        assert!(metered.set_fuel(10).is_ok());
    }

    #[test]
    fn invalid_bytes_fail_on_either_lane() {
        let lanes = Lanes::new(RuntimeConfig::default()).unwrap();
        let counters = Counters::default();
        for lane in [lanes.plain(), lanes.metered().unwrap()] {
            assert!(matches!(
                lane.prepare("x", b"not wasm", &counters),
                Err(LoadError::Compile(_))
            ));
        }
    }

    #[test]
    fn binary_bytes_without_the_magic_are_said_to_be_no_webassembly() {
        // Not "input bytes aren't valid utf-8" (wasmtime's answer when it
        // reads them as WebAssembly text).
        let lanes = Lanes::new(RuntimeConfig::default()).unwrap();
        let bytes = [0x8b_u8, 0x1f, 0xff, b'P', b'K', 0, 1, 2, 3, 4];
        let err = match lanes.plain().prepare("x", &bytes, &Counters::default()) {
            Err(e) => e,
            Ok(_) => panic!("garbage loaded"),
        };
        assert_eq!(
            err.to_string(),
            "not a WebAssembly component: 10 bytes that do not start with the WebAssembly magic \\0asm (they start with \"\\x8b\\x1f\\xffPK\\x00\\x01\\x02\")"
        );
    }
}
