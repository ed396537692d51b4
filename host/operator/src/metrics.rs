//! The host's Prometheus metric families (prometheus-client), with one small
//! recording method per event. Labels are bounded: a controller is a
//! WasmController name, results, fault kinds and verbs are fixed sets, and no
//! metric is labelled by object name (the rule in `docs/architecture.md`).
//!
//! All names carry the prefix `wasm_reconciler_`; `docs/operations.md` lists them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::liveness::Liveness;

/// Prefix of every metric name.
pub const PREFIX: &str = "wasm_reconciler";

pub use wr_engine::{FaultKind, ReconcileResult};

/// The `result` label of a reconcile.
pub fn result_label(r: ReconcileResult) -> &'static str {
    match r {
        ReconcileResult::Success => "success",
        ReconcileResult::TransientError => "transient_error",
        ReconcileResult::PermanentError => "permanent_error",
        ReconcileResult::Conflict => "conflict",
        ReconcileResult::PluginFault => "plugin_fault",
    }
}

/// The `kind` label of a plugin fault: the runtime's fault kinds, grouped as
/// the metric has always named them (a response too large is invalid output;
/// a host-side failure while running the plugin counts as a trap).
pub fn fault_label(k: FaultKind) -> &'static str {
    match k {
        FaultKind::Trap | FaultKind::Internal => "trap",
        FaultKind::Timeout => "timeout",
        FaultKind::FuelExhausted => "fuel",
        FaultKind::MemoryLimit => "memory",
        FaultKind::InvalidOutput | FaultKind::ResponseTooLarge => "invalid_output",
    }
}

/// Whether a component was loaded for the first time or replaced (the `kind` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadKind {
    /// First load for a controller.
    Load,
    /// Hot reload after the source changed.
    Reload,
}

impl LoadKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadKind::Load => "load",
            LoadKind::Reload => "reload",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    controller: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShadowLabels {
    controller: String,
    outcome: &'static str,
}

/// Outcomes of a shadow call; anything else is reported as `other`.
const SHADOW_OUTCOMES: [&str; 4] = ["identical", "differing", "failing", "dropped"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoadLabels {
    controller: String,
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    verb: &'static str,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DigestLabels {
    controller: String,
    digest: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_buckets() -> Histogram {
    // 1 ms … ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn plugin_buckets() -> Histogram {
    // 0.25 ms … ~8 s
    Histogram::new(exponential_buckets(0.00025, 2.0, 16))
}

fn not_ready_buckets() -> Histogram {
    // 0.5 s … ~4.5 h
    Histogram::new(exponential_buckets(0.5, 2.0, 16))
}

/// Verbs of the Kubernetes API; anything else is reported as `other` so a
/// caller cannot blow up the label set.
const VERBS: [&str; 9] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "other",
];

/// Every metric family of the host. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    reconciles: Family<ResultLabels, Counter>,
    reconciles_memoised: Family<ControllerLabels, Counter>,
    reconcile_duration: HistogramFamily<ResultLabels>,
    plugin_call_duration: HistogramFamily<ControllerLabels>,
    plugin_faults: Family<KindLabels, Counter>,
    queue_depth: Family<ControllerLabels, Gauge>,
    queue_oldest_age: Family<ControllerLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    retries: Family<ControllerLabels, Counter>,
    api_requests: Family<ApiLabels, Counter>,
    parent_not_ready: HistogramFamily<ControllerLabels>,
    finalizers_pending: Family<ControllerLabels, Gauge>,
    plugin_loads: Family<LoadLabels, Counter>,
    active_digest: Family<DigestLabels, Gauge>,
    shadow_calls: Family<ShadowLabels, Counter>,
    leader: Gauge,
    digests: Mutex<HashMap<String, String>>,
    liveness: Liveness,
}

impl Metrics {
    /// Registers every family in `registry` under [`PREFIX`]. Queue depth and
    /// finished reconciles also feed `liveness` (the `/livez` rule), so wiring
    /// the metrics wires the probe.
    pub fn new(registry: &mut Registry, liveness: Liveness) -> Self {
        let m = Metrics {
            reconciles: Family::default(),
            reconciles_memoised: Family::default(),
            reconcile_duration: Family::new_with_constructor(reconcile_buckets),
            plugin_call_duration: Family::new_with_constructor(plugin_buckets),
            plugin_faults: Family::default(),
            queue_depth: Family::default(),
            queue_oldest_age: Family::default(),
            retries: Family::default(),
            api_requests: Family::default(),
            parent_not_ready: Family::new_with_constructor(not_ready_buckets),
            finalizers_pending: Family::default(),
            plugin_loads: Family::default(),
            active_digest: Family::default(),
            shadow_calls: Family::default(),
            leader: Gauge::default(),
            digests: Mutex::new(HashMap::new()),
            liveness,
        };
        let r = registry.sub_registry_with_prefix(PREFIX);
        r.register(
            "reconciles",
            "Reconciles finished, by controller and result",
            m.reconciles.clone(),
        );
        r.register(
            "reconciles_memoised",
            "Reconciles that skipped the plugin call and every write because the parent's inputs equalled those of its last converged call, by controller (also counted in reconciles_total)",
            m.reconciles_memoised.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile (read, plugin call, writes), by controller and result",
            m.reconcile_duration.clone(),
        );
        r.register(
            "plugin_call_duration_seconds",
            "Duration of one plugin call in the sandbox, by controller",
            m.plugin_call_duration.clone(),
        );
        r.register(
            "plugin_faults",
            "Plugin faults (trap, timeout, fuel, memory, invalid_output), by controller and kind",
            m.plugin_faults.clone(),
        );
        r.register(
            "queue_depth",
            "Parents waiting in the work queue, by controller",
            m.queue_depth.clone(),
        );
        r.register(
            "queue_oldest_item_age_seconds",
            "Age of the oldest item waiting in the work queue, by controller",
            m.queue_oldest_age.clone(),
        );
        r.register(
            "reconcile_retries",
            "Reconciles re-queued after an error, by controller",
            m.retries.clone(),
        );
        r.register(
            "api_requests",
            "Kubernetes API requests made by the host, by verb and HTTP code",
            m.api_requests.clone(),
        );
        r.register(
            "parent_not_ready_duration_seconds",
            "Time a parent spent not Ready before it became Ready, by controller",
            m.parent_not_ready.clone(),
        );
        r.register(
            "parents_finalizer_pending",
            "Deleting parents whose finalizer has been pending longer than the threshold, by controller",
            m.finalizers_pending.clone(),
        );
        r.register(
            "plugin_loads",
            "Plugin loads and hot reloads, by controller, kind and result",
            m.plugin_loads.clone(),
        );
        r.register(
            "plugin_active_info",
            "Digest of the plugin serving each controller (value always 1)",
            m.active_digest.clone(),
        );
        r.register(
            "shadow_calls",
            "Shadow calls of a candidate plugin version, by controller and outcome (identical, differing, failing, dropped)",
            m.shadow_calls.clone(),
        );
        r.register(
            "leader",
            "1 while this process holds the leader lease",
            m.leader.clone(),
        );
        m
    }

    /// A reconcile ended.
    pub fn reconcile_finished(
        &self,
        controller: &str,
        result: ReconcileResult,
        duration: Duration,
    ) {
        let l = ResultLabels {
            controller: controller.to_string(),
            result: result_label(result),
        };
        self.reconciles.get_or_create(&l).inc();
        self.reconcile_duration
            .get_or_create(&l)
            .observe(duration.as_secs_f64());
        self.liveness.progress();
    }

    /// A reconcile was memoised (plugin call and writes skipped).
    pub fn reconcile_memoised(&self, controller: &str) {
        self.reconciles_memoised
            .get_or_create(&controller_labels(controller))
            .inc();
    }

    /// One plugin call returned (successfully or not).
    pub fn plugin_call(&self, controller: &str, duration: Duration) {
        self.plugin_call_duration
            .get_or_create(&controller_labels(controller))
            .observe(duration.as_secs_f64());
    }

    /// The plugin faulted.
    pub fn plugin_fault(&self, controller: &str, kind: FaultKind) {
        let l = KindLabels {
            controller: controller.to_string(),
            kind: fault_label(kind),
        };
        self.plugin_faults.get_or_create(&l).inc();
    }

    /// Current depth of a controller's queue and the age of its oldest item.
    pub fn queue(&self, controller: &str, depth: usize, oldest: Option<Duration>) {
        let l = controller_labels(controller);
        let depth = u64::try_from(depth).unwrap_or(u64::MAX);
        self.queue_depth
            .get_or_create(&l)
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
        self.queue_oldest_age
            .get_or_create(&l)
            .set(oldest.map(|d| d.as_secs_f64()).unwrap_or(0.0));
        self.liveness.queue_depth(controller, depth);
    }

    /// A parent was re-queued after an error.
    pub fn retry(&self, controller: &str) {
        self.retries
            .get_or_create(&controller_labels(controller))
            .inc();
    }

    /// An API request returned `code` (0: no response, e.g. connection error).
    pub fn api_request(&self, verb: &str, code: u16) {
        let verb = VERBS
            .iter()
            .copied()
            .find(|v| *v == verb)
            .unwrap_or("other");
        let l = ApiLabels {
            verb,
            code: code.to_string(),
        };
        self.api_requests.get_or_create(&l).inc();
    }

    /// A parent became Ready after `not_ready_for` (since it was created or last
    /// stopped being Ready).
    pub fn parent_became_ready(&self, controller: &str, not_ready_for: Duration) {
        self.parent_not_ready
            .get_or_create(&controller_labels(controller))
            .observe(not_ready_for.as_secs_f64());
    }

    /// Number of deleting parents whose finalizer is older than the threshold.
    pub fn finalizers_pending(&self, controller: &str, count: usize) {
        self.finalizers_pending
            .get_or_create(&controller_labels(controller))
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// A component load or reload was attempted.
    pub fn plugin_loaded(&self, controller: &str, kind: LoadKind, ok: bool) {
        let l = LoadLabels {
            controller: controller.to_string(),
            kind: kind.as_str(),
            result: if ok { "success" } else { "error" },
        };
        self.plugin_loads.get_or_create(&l).inc();
    }

    /// The digest now serving `controller` (`None`: no plugin loaded). Only
    /// one series per controller exists at any time.
    pub fn active_digest(&self, controller: &str, digest: Option<&str>) {
        let mut digests = self.digests.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = digests.remove(controller) {
            self.active_digest.remove(&DigestLabels {
                controller: controller.to_string(),
                digest: old,
            });
        }
        if let Some(d) = digest {
            let l = DigestLabels {
                controller: controller.to_string(),
                digest: d.to_string(),
            };
            self.active_digest.get_or_create(&l).set(1);
            digests.insert(controller.to_string(), d.to_string());
        }
    }

    /// A shadow call of `controller`'s candidate ended with `outcome`.
    pub fn shadow_call(&self, controller: &str, outcome: &str) {
        let outcome = SHADOW_OUTCOMES
            .into_iter()
            .find(|o| *o == outcome)
            .unwrap_or("other");
        self.shadow_calls
            .get_or_create(&ShadowLabels {
                controller: controller.to_string(),
                outcome,
            })
            .inc();
    }

    /// Whether this process leads.
    pub fn leader(&self, is_leader: bool) {
        self.leader.set(i64::from(is_leader));
    }

    /// A controller was removed: drop its gauges so they do not report stale values.
    pub fn controller_removed(&self, controller: &str) {
        let l = controller_labels(controller);
        self.queue_depth.remove(&l);
        self.queue_oldest_age.remove(&l);
        self.finalizers_pending.remove(&l);
        self.active_digest(controller, None);
        self.liveness.queue_depth(controller, 0);
    }
}

fn controller_labels(controller: &str) -> ControllerLabels {
    ControllerLabels {
        controller: controller.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    fn text(r: &Registry) -> String {
        let mut s = String::new();
        encode(&mut s, r).unwrap();
        s
    }

    fn setup() -> (Registry, Metrics) {
        let mut r = Registry::default();
        let m = Metrics::new(&mut r, Liveness::new(Duration::from_secs(60)));
        (r, m)
    }

    #[test]
    fn memoised_reconciles_are_counted_by_controller_only() {
        let (r, m) = setup();
        m.reconcile_memoised("web");
        m.reconcile_memoised("web");
        let t = text(&r);
        assert!(
            t.contains(r#"wasm_reconciler_reconciles_memoised_total{controller="web"} 2"#),
            "{t}"
        );
    }

    #[test]
    fn shadow_calls_count_by_controller_and_a_bounded_outcome() {
        let (r, m) = setup();
        m.shadow_call("c", "differing");
        m.shadow_call("c", "differing");
        m.shadow_call("c", "sideways");
        let t = text(&r);
        assert!(
            t.contains(
                r#"wasm_reconciler_shadow_calls_total{controller="c",outcome="differing"} 2"#
            ),
            "{t}"
        );
        assert!(t.contains(r#"outcome="other"} 1"#), "{t}");
    }

    #[test]
    fn reconcile_counts_and_histogram_by_controller_and_result() {
        let (r, m) = setup();
        m.reconcile_finished("web", ReconcileResult::Success, Duration::from_millis(3));
        m.reconcile_finished("web", ReconcileResult::Success, Duration::from_millis(5));
        m.reconcile_finished(
            "web",
            ReconcileResult::PluginFault,
            Duration::from_millis(5),
        );
        let t = text(&r);
        assert!(
            t.contains(r#"wasm_reconciler_reconciles_total{controller="web",result="success"} 2"#),
            "{t}"
        );
        assert!(
            t.contains(
                r#"wasm_reconciler_reconciles_total{controller="web",result="plugin_fault"} 1"#
            ),
            "{t}"
        );
        assert!(t.contains(r#"wasm_reconciler_reconcile_duration_seconds_count{controller="web",result="success"} 2"#), "{t}");
    }

    #[test]
    fn unknown_verbs_collapse_to_other() {
        let (r, m) = setup();
        m.api_request("patch", 200);
        m.api_request("frobnicate", 500);
        let t = text(&r);
        assert!(
            t.contains(r#"wasm_reconciler_api_requests_total{verb="patch",code="200"} 1"#),
            "{t}"
        );
        assert!(
            t.contains(r#"wasm_reconciler_api_requests_total{verb="other",code="500"} 1"#),
            "{t}"
        );
        assert!(!t.contains("frobnicate"));
    }

    #[test]
    fn digest_info_keeps_one_series_per_controller() {
        let (r, m) = setup();
        m.active_digest("web", Some("sha256:aaa"));
        m.active_digest("web", Some("sha256:bbb"));
        let t = text(&r);
        assert!(!t.contains("sha256:aaa"), "{t}");
        assert!(
            t.contains(
                r#"wasm_reconciler_plugin_active_info{controller="web",digest="sha256:bbb"} 1"#
            ),
            "{t}"
        );
        m.controller_removed("web");
        assert!(!text(&r).contains("sha256:bbb"));
    }

    #[test]
    fn queue_gauges_feed_liveness() {
        let mut r = Registry::default();
        let live = Liveness::new(Duration::ZERO);
        let m = Metrics::new(&mut r, live.clone());
        m.queue("web", 4, Some(Duration::from_secs(2)));
        let t = text(&r);
        assert!(
            t.contains(r#"wasm_reconciler_queue_depth{controller="web"} 4"#),
            "{t}"
        );
        assert!(
            t.contains(r#"wasm_reconciler_queue_oldest_item_age_seconds{controller="web"} 2.0"#),
            "{t}"
        );
        assert!(
            live.check().is_err(),
            "zero stall limit and queued work must be a stall"
        );
        m.queue("web", 0, None);
        assert!(live.check().is_ok());
    }

    #[test]
    fn every_family_is_exposed_with_help() {
        let (r, m) = setup();
        m.plugin_call("c", Duration::from_millis(1));
        m.plugin_fault("c", FaultKind::FuelExhausted);
        m.retry("c");
        m.parent_became_ready("c", Duration::from_secs(3));
        m.finalizers_pending("c", 1);
        m.plugin_loaded("c", LoadKind::Reload, true);
        m.leader(true);
        let t = text(&r);
        for name in [
            "wasm_reconciler_plugin_call_duration_seconds_bucket",
            r#"wasm_reconciler_plugin_faults_total{controller="c",kind="fuel"} 1"#,
            r#"wasm_reconciler_reconcile_retries_total{controller="c"} 1"#,
            r#"wasm_reconciler_parent_not_ready_duration_seconds_count{controller="c"} 1"#,
            r#"wasm_reconciler_parents_finalizer_pending{controller="c"} 1"#,
            r#"wasm_reconciler_plugin_loads_total{controller="c",kind="reload",result="success"} 1"#,
            "wasm_reconciler_leader 1",
            "# HELP wasm_reconciler_plugin_faults Plugin faults",
        ] {
            assert!(t.contains(name), "missing {name} in\n{t}");
        }
    }
}
