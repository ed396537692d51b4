//! The engine's one seam for metrics and probes: an optional
//! [`EngineObserver`] in [`crate::ManagerOptions`] that the engine tells about
//! reconciles, plugin calls, queue depth, plugin loads and cache sync.
//!
//! A trait (not `wr_operator::Metrics` directly) so the engine does not depend
//! on Prometheus, tests can count events with a fake, and `dev` can run
//! without metrics. Every method has an empty default body. Calls happen on the
//! reconcile path, so implementations must be cheap and must not block.
//!
//! A reconcile returns a typed [`ReconcileReport`] (its queue outcome and how it
//! counts); the worker loop hands it to [`finished`]. Fault kinds are the
//! runtime's [`FaultKind`], carried as a type up to the metrics.

use std::time::Duration;

use kube::api::DynamicObject;
pub use wr_runtime::FaultKind;

use crate::plugin::PluginError;
use crate::queue::Outcome;

/// How a reconcile ended (the `result` label of the reconcile metrics; the one
/// type the engine and `wr_operator::Metrics` share).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Plugin ran and every write succeeded (or the parent is gone).
    Success,
    /// A transient error: retried with backoff.
    TransientError,
    /// A permanent plugin error (the plugin's own verdict) or a status the
    /// API server refused: no hot retry.
    PermanentError,
    /// The last attempt ended in a write conflict (409).
    Conflict,
    /// The plugin trapped, timed out, ran out of fuel or memory, or answered
    /// with invalid output (malformed, or rejected by the host's validation;
    /// not retried either).
    PluginFault,
}

/// What one reconcile did: when to run it next, and how it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileReport {
    /// For the work queue.
    pub outcome: Outcome,
    /// For the metrics.
    pub result: ReconcileResult,
}

/// Receives the engine's events. All methods default to doing nothing.
pub trait EngineObserver: Send + Sync {
    /// A reconcile of a parent of `controller` ended.
    fn reconcile_finished(&self, _controller: &str, _result: ReconcileResult, _took: Duration) {}
    /// A reconcile skipped the plugin call and every write: its inputs equalled
    /// those of the last call that found the parent converged (memoisation).
    /// It is also reported through [`EngineObserver::reconcile_finished`].
    fn reconcile_memoised(&self, _controller: &str) {}
    /// A plugin call returned; `fault` is set when the sandbox stopped it.
    fn plugin_call(&self, _controller: &str, _took: Duration, _fault: Option<FaultKind>) {}
    /// A parent was scheduled again after a failed reconcile.
    fn retry(&self, _controller: &str) {}
    /// Sampled about once a second: keys waiting to run and the oldest one's wait.
    fn queue(&self, _controller: &str, _depth: usize, _oldest: Option<Duration>) {}
    /// A parent became Ready after being not Ready for `not_ready_for`.
    fn parent_became_ready(&self, _controller: &str, _not_ready_for: Duration) {}
    /// Sampled: deleting parents whose finalizer has been pending longer than
    /// [`EngineObserver::finalizer_threshold`].
    fn finalizers_pending(&self, _controller: &str, _count: usize) {}
    /// Threshold for [`EngineObserver::finalizers_pending`].
    fn finalizer_threshold(&self) -> Duration {
        Duration::from_secs(300)
    }
    /// A component load (`reload`: a controller already had one) finished.
    fn plugin_loaded(&self, _controller: &str, _reload: bool, _ok: bool) {}
    /// The digest now serving `controller`.
    fn active_digest(&self, _controller: &str, _digest: Option<&str>) {}
    /// The controller stopped (deleted, invalid, or the manager is stopping).
    fn controller_removed(&self, _controller: &str) {}
    /// The manager's WasmController cache finished its first list.
    fn caches_synced(&self) {}
    /// A shadow call of a candidate version ended (`identical`, `differing`,
    /// `failing` or `dropped`; see [`crate::shadow`]).
    fn shadow_call(&self, _controller: &str, _outcome: &str) {}
}

/// Reports one finished reconcile: its result, duration and retry.
pub(crate) fn finished(
    observer: Option<&dyn EngineObserver>,
    controller: &str,
    report: &ReconcileReport,
    took: Duration,
) {
    let Some(obs) = observer else { return };
    obs.reconcile_finished(controller, report.result, took);
    if matches!(report.outcome, Outcome::Failure { .. }) {
        obs.retry(controller);
    }
}

/// The sandbox fault of a plugin error; `None` for the plugin's own verdicts.
pub fn fault_kind(e: &PluginError) -> Option<FaultKind> {
    match e {
        PluginError::Fault { kind, .. } => Some(*kind),
        PluginError::Permanent { .. } | PluginError::Transient { .. } => None,
    }
}

/// How long a parent was not Ready when a change makes it Ready: from the
/// last transition of the old `Ready` condition (or the creation time when it
/// had none) to the new condition's transition. `None` unless the change is a
/// not-Ready → Ready transition of an existing object.
pub fn not_ready_duration(old: &DynamicObject, new: &DynamicObject) -> Option<Duration> {
    let (old_ready, old_since) = ready_of(old);
    let (new_ready, new_since) = ready_of(new);
    if old_ready || !new_ready {
        return None;
    }
    let from = match old_since {
        Some(t) => t,
        None => old.metadata.creation_timestamp.as_ref()?.0,
    };
    let to = new_since?;
    let secs = to.duration_since(from).as_secs_f64();
    (secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

fn ready_of(o: &DynamicObject) -> (bool, Option<k8s_openapi::jiff::Timestamp>) {
    let cond = o
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"))
        });
    let Some(c) = cond else {
        return (false, None);
    };
    let ready = c.get("status").and_then(|s| s.as_str()) == Some("True");
    let since = c
        .get("lastTransitionTime")
        .and_then(|t| t.as_str())
        .and_then(|t| t.parse().ok());
    (ready, since)
}

/// Whether `parent` is deleting, still carries `finalizer`, and has been
/// deleting for longer than `threshold`.
pub fn finalizer_overdue(parent: &DynamicObject, finalizer: &str, threshold: Duration) -> bool {
    let Some(since) = &parent.metadata.deletion_timestamp else {
        return false;
    };
    if !crate::finalize::has_finalizer(parent, finalizer) {
        return false;
    }
    let age = k8s_openapi::jiff::Timestamp::now()
        .duration_since(since.0)
        .as_secs_f64();
    age > threshold.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn parent(ready: Option<(&str, &str)>) -> DynamicObject {
        let mut v = json!({
            "apiVersion": "x/v1", "kind": "P",
            "metadata": {"name": "p", "creationTimestamp": "2025-01-01T00:00:00Z"},
        });
        if let Some((status, at)) = ready {
            v["status"] = json!({"conditions": [
                {"type": "Ready", "status": status, "lastTransitionTime": at}
            ]});
        }
        obj(v)
    }

    #[test]
    fn first_ready_counts_from_creation() {
        let old = parent(None);
        let new = parent(Some(("True", "2025-01-01T00:00:07Z")));
        assert_eq!(not_ready_duration(&old, &new), Some(Duration::from_secs(7)));
    }

    #[test]
    fn recovery_counts_from_the_failure() {
        let old = parent(Some(("False", "2025-01-01T01:00:00Z")));
        let new = parent(Some(("True", "2025-01-01T01:00:30Z")));
        assert_eq!(
            not_ready_duration(&old, &new),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn staying_ready_or_becoming_unready_is_not_observed() {
        let ready = parent(Some(("True", "2025-01-01T01:00:00Z")));
        let later = parent(Some(("True", "2025-01-01T02:00:00Z")));
        let broken = parent(Some(("False", "2025-01-01T03:00:00Z")));
        assert_eq!(not_ready_duration(&ready, &later), None);
        assert_eq!(not_ready_duration(&ready, &broken), None);
    }

    #[derive(Default)]
    struct Count(std::sync::Mutex<Vec<(ReconcileResult, bool)>>);

    impl EngineObserver for Count {
        fn reconcile_finished(&self, _: &str, r: ReconcileResult, _: Duration) {
            self.0.lock().unwrap().push((r, false));
        }
        fn retry(&self, _: &str) {
            self.0
                .lock()
                .unwrap()
                .push((ReconcileResult::TransientError, true));
        }
    }

    #[test]
    fn a_failed_report_counts_its_result_and_a_retry() {
        let c = Count::default();
        let report = ReconcileReport {
            outcome: Outcome::Failure { at_least: None },
            result: ReconcileResult::PluginFault,
        };
        finished(Some(&c), "web", &report, Duration::ZERO);
        let ok = ReconcileReport {
            outcome: Outcome::Success { next: None },
            result: ReconcileResult::Success,
        };
        finished(Some(&c), "web", &ok, Duration::ZERO);
        assert_eq!(
            *c.0.lock().unwrap(),
            vec![
                (ReconcileResult::PluginFault, false),
                (ReconcileResult::TransientError, true),
                (ReconcileResult::Success, false),
            ]
        );
    }

    #[test]
    fn only_sandbox_faults_have_a_fault_kind() {
        let fault = PluginError::Fault {
            kind: FaultKind::FuelExhausted,
            message: String::new(),
        };
        assert_eq!(fault_kind(&fault), Some(FaultKind::FuelExhausted));
        let verdict = PluginError::Permanent {
            reason: "BadSpec".into(),
            message: String::new(),
        };
        assert_eq!(fault_kind(&verdict), None);
    }

    #[test]
    fn overdue_finalizer_needs_deletion_finalizer_and_age() {
        let mut v = json!({
            "apiVersion": "x/v1", "kind": "P",
            "metadata": {"name": "p", "finalizers": ["f"],
                         "deletionTimestamp": "2020-01-01T00:00:00Z"},
        });
        assert!(finalizer_overdue(
            &obj(v.clone()),
            "f",
            Duration::from_secs(60)
        ));
        assert!(!finalizer_overdue(
            &obj(v.clone()),
            "g",
            Duration::from_secs(60)
        ));
        v["metadata"]["deletionTimestamp"] = json!(
            k8s_openapi::jiff::Timestamp::now()
                .round(k8s_openapi::jiff::Unit::Second)
                .unwrap()
                .to_string()
        );
        assert!(!finalizer_overdue(&obj(v), "f", Duration::from_secs(3600)));
    }
}
