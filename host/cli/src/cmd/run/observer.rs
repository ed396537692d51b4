//! Adapts the engine's [`EngineObserver`] seam to the Prometheus families of
//! [`wr_operator::Metrics`] and to the `/readyz` "caches synced" flag. The
//! reconcile result and fault kind are the engine's (the runtime's
//! `FaultKind`) all the way to the metric labels: nothing is translated here.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use wr_engine::{EngineObserver, FaultKind, ReconcileResult};
use wr_operator::Metrics;
use wr_operator::metrics::LoadKind;

/// Records engine events into `metrics`; sets `synced` when the manager's
/// cache has done its first list.
pub struct MetricsObserver {
    metrics: Arc<Metrics>,
    synced: watch::Sender<bool>,
    finalizer_threshold: Duration,
}

impl MetricsObserver {
    /// An observer feeding `metrics` and the readiness flag `synced`.
    pub fn new(
        metrics: Arc<Metrics>,
        synced: watch::Sender<bool>,
        finalizer_threshold: Duration,
    ) -> Self {
        MetricsObserver {
            metrics,
            synced,
            finalizer_threshold,
        }
    }
}

impl EngineObserver for MetricsObserver {
    fn reconcile_finished(&self, controller: &str, result: ReconcileResult, took: Duration) {
        self.metrics.reconcile_finished(controller, result, took);
    }

    fn reconcile_memoised(&self, controller: &str) {
        self.metrics.reconcile_memoised(controller);
    }

    fn plugin_call(&self, controller: &str, took: Duration, fault: Option<FaultKind>) {
        self.metrics.plugin_call(controller, took);
        if let Some(f) = fault {
            self.metrics.plugin_fault(controller, f);
        }
    }

    fn retry(&self, controller: &str) {
        self.metrics.retry(controller);
    }

    fn queue(&self, controller: &str, depth: usize, oldest: Option<Duration>) {
        self.metrics.queue(controller, depth, oldest);
    }

    fn parent_became_ready(&self, controller: &str, not_ready_for: Duration) {
        self.metrics.parent_became_ready(controller, not_ready_for);
    }

    fn finalizers_pending(&self, controller: &str, count: usize) {
        self.metrics.finalizers_pending(controller, count);
    }

    fn finalizer_threshold(&self) -> Duration {
        self.finalizer_threshold
    }

    fn plugin_loaded(&self, controller: &str, reload: bool, ok: bool) {
        let kind = if reload {
            LoadKind::Reload
        } else {
            LoadKind::Load
        };
        self.metrics.plugin_loaded(controller, kind, ok);
    }

    fn active_digest(&self, controller: &str, digest: Option<&str>) {
        self.metrics.active_digest(controller, digest);
    }

    fn controller_removed(&self, controller: &str) {
        self.metrics.controller_removed(controller);
    }

    fn caches_synced(&self) {
        self.synced.send_replace(true);
    }

    fn shadow_call(&self, controller: &str, outcome: &str) {
        self.metrics.shadow_call(controller, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;
    use wr_operator::Liveness;

    #[test]
    fn engine_events_land_in_the_families_and_the_ready_flag() {
        let mut registry = Registry::default();
        let metrics = Arc::new(Metrics::new(
            &mut registry,
            Liveness::new(Duration::from_secs(60)),
        ));
        let (tx, rx) = watch::channel(false);
        let obs = MetricsObserver::new(metrics, tx, Duration::from_secs(300));
        obs.reconcile_finished("web", ReconcileResult::Conflict, Duration::from_millis(2));
        obs.plugin_call(
            "web",
            Duration::from_millis(1),
            Some(FaultKind::FuelExhausted),
        );
        obs.plugin_loaded("web", true, false);
        obs.caches_synced();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for series in [
            r#"wasm_reconciler_reconciles_total{controller="web",result="conflict"} 1"#,
            r#"wasm_reconciler_plugin_faults_total{controller="web",kind="fuel"} 1"#,
            r#"wasm_reconciler_plugin_loads_total{controller="web",kind="reload",result="error"} 1"#,
        ] {
            assert!(text.contains(series), "missing {series} in\n{text}");
        }
        assert!(*rx.borrow());
    }
}
