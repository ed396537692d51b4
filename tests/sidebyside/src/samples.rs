//! What a controller child measures about itself and reports on `stats`:
//! reconcile latencies, logic-call latencies, and (host variants) where the
//! time of plugin calls and API requests went. Shared by all three variants
//! so the report compares like with like.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Named sample sets, drained by each `stats` command.
#[derive(Default)]
pub struct Samples(Mutex<BTreeMap<&'static str, Vec<f64>>>);

impl Samples {
    /// Adds one duration to the set `what`.
    pub fn add(&self, what: &'static str, took: Duration) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(what)
            .or_default()
            .push(took.as_secs_f64() * 1e3);
    }

    /// Takes every set collected since the last drain.
    pub fn drain(&self) -> BTreeMap<String, Vec<f64>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }
}

/// The reply to `stats`: raw samples in milliseconds by set name.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ChildStats {
    /// Reconciles started since the process began.
    pub reconciles: u64,
    /// `reconcile` (whole reconcile), `logic` (plugin / hook / native call),
    /// `instantiate` and `wasm_call` (wasm only), `hook_logic` (webhook: time
    /// inside the hook server), `api <class>` (host client, per request class).
    pub samples_ms: BTreeMap<String, Vec<f64>>,
}

/// Sample set names.
pub mod set {
    /// One whole reconcile.
    pub const RECONCILE: &str = "reconcile";
    /// The logic call: the plugin call (wasm), the HTTP round trip (webhook),
    /// the Rust function (native).
    pub const LOGIC: &str = "logic";
    /// wasm: fresh Store + instantiate.
    pub const INSTANTIATE: &str = "instantiate";
    /// wasm: lower request, run, lift and parse the response.
    pub const WASM_CALL: &str = "wasm_call";
    /// webhook: time spent in the hook server's handler (parse, logic, encode).
    pub const HOOK_HANDLER: &str = "hook_handler";
    /// webhook-rtt: the delay actually added to the call (the injected
    /// network round trip).
    pub const HOOK_RTT: &str = "hook_rtt";
}
