//! The engine's one seam for metrics and probes: an optional
//! [`EngineObserver`] in [`crate::ManagerOptions`] that the engine tells about
//! reconciles, plugin calls, queue depth, plugin loads and cache sync.
//!
//! A trait (not `wr_operator::Metrics` directly) so the engine does not depend
//! on Prometheus, tests can count events with a fake, and `dev` can run
//! without metrics. Every method has an empty default body. Calls happen on the
//! reconcile path, so implementations must be cheap and must not block.
//!
//! The result of a reconcile is classified from its [`Outcome`] plus notes the
//! reconcile leaves on the way ([`note`], a task-local set by the worker loop
//! in [`observed`]) — the plugin's verdict and a final write conflict — so the
//! reconcile code itself needs no extra return values.

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;

use crate::plugin::PluginError;
use crate::queue::Outcome;

/// How a reconcile ended (the `result` label of the reconcile metrics).
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

/// Which sandbox limit or failure stopped a plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultClass {
    /// A WebAssembly trap (or a host-side failure while running the plugin).
    Trap,
    /// The wall-clock budget ran out.
    Timeout,
    /// The fuel budget ran out.
    Fuel,
    /// The memory cap was hit.
    Memory,
    /// The output was malformed or too large.
    InvalidOutput,
}

/// Receives the engine's events. All methods default to doing nothing.
pub trait EngineObserver: Send + Sync {
    /// A reconcile of a parent of `controller` ended.
    fn reconcile_finished(&self, _controller: &str, _result: ReconcileResult, _took: Duration) {}
    /// A plugin call returned; `fault` is set when the sandbox stopped it.
    fn plugin_call(&self, _controller: &str, _took: Duration, _fault: Option<FaultClass>) {}
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
}

tokio::task_local! {
    static NOTE: Cell<Option<ReconcileResult>>;
}

/// Leaves a note about the reconcile running on this task (no-op outside
/// [`observed`]). A plugin fault or permanent error outranks later notes.
pub(crate) fn note(result: ReconcileResult) {
    let _ = NOTE.try_with(|n| {
        let keep = matches!(
            n.get(),
            Some(ReconcileResult::PluginFault | ReconcileResult::PermanentError)
        );
        if !keep {
            n.set(Some(result));
        }
    });
}

/// Runs one reconcile and reports its result, duration and retry.
pub(crate) async fn observed(
    observer: Option<&dyn EngineObserver>,
    controller: &str,
    reconcile: impl Future<Output = Outcome>,
) -> Outcome {
    let Some(obs) = observer else {
        return reconcile.await;
    };
    let started = Instant::now();
    let (outcome, noted) = NOTE
        .scope(Cell::new(None), async {
            let o = reconcile.await;
            (o, NOTE.with(Cell::get))
        })
        .await;
    let result = classify(outcome, noted);
    obs.reconcile_finished(controller, result, started.elapsed());
    if matches!(outcome, Outcome::Failure { .. }) {
        obs.retry(controller);
    }
    outcome
}

/// The `result` label from the queue outcome and the notes left on the way.
fn classify(outcome: Outcome, noted: Option<ReconcileResult>) -> ReconcileResult {
    match (noted, outcome) {
        (Some(r @ (ReconcileResult::PluginFault | ReconcileResult::PermanentError)), _) => r,
        (Some(ReconcileResult::Conflict), Outcome::Failure { .. }) => ReconcileResult::Conflict,
        (_, Outcome::Failure { .. }) => ReconcileResult::TransientError,
        (_, Outcome::Success { .. } | Outcome::Forget) => ReconcileResult::Success,
    }
}

/// Reports one plugin call and notes its verdict for the reconcile result.
pub(crate) fn plugin_returned<T>(
    observer: Option<&dyn EngineObserver>,
    controller: &str,
    took: Duration,
    result: &Result<T, PluginError>,
) {
    let fault = match result {
        Ok(_) => None,
        Err(e) => fault_class(e),
    };
    match (result, fault) {
        (_, Some(_)) => note(ReconcileResult::PluginFault),
        (Err(PluginError::Permanent { .. }), None) => note(ReconcileResult::PermanentError),
        _ => {}
    }
    if let Some(obs) = observer {
        obs.plugin_call(controller, took, fault);
    }
}

/// The fault class of a plugin error; `None` for the plugin's own verdicts.
/// Malformed output arrives as a permanent `InvalidPluginOutput` (see
/// [`crate::wasm::map_error`]) but is a sandbox fault for the metrics.
pub fn fault_class(e: &PluginError) -> Option<FaultClass> {
    match e {
        PluginError::Permanent { reason, .. } if reason == "InvalidPluginOutput" => {
            Some(FaultClass::InvalidOutput)
        }
        PluginError::Permanent { .. } | PluginError::Transient { .. } => None,
        PluginError::Fault { kind, .. } => Some(match kind.as_str() {
            "PluginTimeout" => FaultClass::Timeout,
            "PluginFuelExhausted" => FaultClass::Fuel,
            "PluginMemoryLimit" => FaultClass::Memory,
            "PluginInvalidOutput" | "PluginResponseTooLarge" => FaultClass::InvalidOutput,
            _ => FaultClass::Trap,
        }),
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

    #[test]
    fn faults_and_permanent_errors_win_over_the_outcome() {
        let fail = Outcome::Failure { at_least: None };
        let ok = Outcome::Success { next: None };
        assert_eq!(
            classify(ok, Some(ReconcileResult::PermanentError)),
            ReconcileResult::PermanentError
        );
        assert_eq!(
            classify(fail, Some(ReconcileResult::PluginFault)),
            ReconcileResult::PluginFault
        );
        assert_eq!(
            classify(fail, Some(ReconcileResult::Conflict)),
            ReconcileResult::Conflict
        );
        // A conflict that a later attempt got past is a success.
        assert_eq!(
            classify(ok, Some(ReconcileResult::Conflict)),
            ReconcileResult::Success
        );
        assert_eq!(classify(fail, None), ReconcileResult::TransientError);
        assert_eq!(classify(Outcome::Forget, None), ReconcileResult::Success);
    }

    #[test]
    fn sandbox_faults_map_to_classes_and_verdicts_do_not() {
        let f = |kind: &str| PluginError::Fault {
            kind: kind.into(),
            message: String::new(),
        };
        assert_eq!(fault_class(&f("PluginTimeout")), Some(FaultClass::Timeout));
        assert_eq!(
            fault_class(&f("PluginFuelExhausted")),
            Some(FaultClass::Fuel)
        );
        assert_eq!(
            fault_class(&f("PluginMemoryLimit")),
            Some(FaultClass::Memory)
        );
        assert_eq!(fault_class(&f("PluginTrap")), Some(FaultClass::Trap));
        let invalid = PluginError::Permanent {
            reason: "InvalidPluginOutput".into(),
            message: String::new(),
        };
        assert_eq!(fault_class(&invalid), Some(FaultClass::InvalidOutput));
        let verdict = PluginError::Permanent {
            reason: "BadSpec".into(),
            message: String::new(),
        };
        assert_eq!(fault_class(&verdict), None);
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

    #[tokio::test]
    async fn notes_left_inside_the_reconcile_reach_the_observer() {
        let c = Count::default();
        let out = observed(Some(&c), "web", async {
            plugin_returned::<()>(
                None,
                "web",
                Duration::ZERO,
                &Err(PluginError::Fault {
                    kind: "PluginTrap".into(),
                    message: String::new(),
                }),
            );
            Outcome::Failure { at_least: None }
        })
        .await;
        assert_eq!(out, Outcome::Failure { at_least: None });
        assert_eq!(
            *c.0.lock().unwrap(),
            vec![
                (ReconcileResult::PluginFault, false),
                (ReconcileResult::TransientError, true)
            ]
        );
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
