//! Judging a newly rolled-out plugin version by its first reconciles, for the
//! optional automatic rollback (`spec.plugin.rollback`).
//!
//! The new version is wrapped in a [`Judged`] plugin that counts the outcome of
//! its first `window` calls. Faults (trap, timeout, fuel, memory, malformed
//! output) and permanent errors count against it; transient errors and
//! successes do not. When the window is full the verdict is fixed and
//! `on_verdict` runs (the manager re-syncs the controller and, on `Failed`,
//! swaps the previous version back in).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

use futures::future::BoxFuture;
use wr_runtime::{CallLimits, ReconcileRequest, ReconcileResponse};

use crate::crd::RollbackPolicy;
use crate::plugin::{PluginError, ReconcilePlugin};

/// Outcome of judging a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Fewer than `window` calls so far.
    Pending,
    /// The fault rate stayed within the threshold.
    Passed,
    /// Too many faults: roll back.
    Failed,
}

/// Counters of one version under judgement.
pub struct Judge {
    window: u32,
    threshold_percent: u32,
    calls: AtomicU32,
    faults: AtomicU32,
    verdict: AtomicU8,
    on_verdict: Box<dyn Fn() + Send + Sync>,
}

impl Judge {
    /// A judge for `policy`; `on_verdict` runs once, when the verdict is fixed.
    pub fn new(policy: &RollbackPolicy, on_verdict: Box<dyn Fn() + Send + Sync>) -> Arc<Self> {
        Arc::new(Self {
            window: policy.window(),
            threshold_percent: policy.threshold(),
            calls: AtomicU32::new(0),
            faults: AtomicU32::new(0),
            verdict: AtomicU8::new(0),
            on_verdict,
        })
    }

    /// Records one call outcome (ignored once the window is full).
    pub fn record(&self, fault: bool) {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n > self.window {
            return;
        }
        if fault {
            self.faults.fetch_add(1, Ordering::SeqCst);
        }
        if n == self.window {
            let faults = self.faults.load(Ordering::SeqCst);
            let failed = u64::from(faults) * 100 > u64::from(self.threshold_percent) * u64::from(n);
            self.verdict
                .store(if failed { 2 } else { 1 }, Ordering::SeqCst);
            (self.on_verdict)();
        }
    }

    /// The verdict so far.
    pub fn verdict(&self) -> Verdict {
        match self.verdict.load(Ordering::SeqCst) {
            0 => Verdict::Pending,
            1 => Verdict::Passed,
            _ => Verdict::Failed,
        }
    }

    /// (faulty calls, judged calls) so far.
    pub fn counts(&self) -> (u32, u32) {
        (
            self.faults.load(Ordering::SeqCst),
            self.calls.load(Ordering::SeqCst).min(self.window),
        )
    }

    /// Threshold in percent.
    pub fn threshold_percent(&self) -> u32 {
        self.threshold_percent
    }
}

/// A plugin whose calls are reported to a [`Judge`].
pub struct Judged {
    inner: Arc<dyn ReconcilePlugin>,
    judge: Arc<Judge>,
}

impl Judged {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ReconcilePlugin>, judge: Arc<Judge>) -> Arc<Self> {
        Arc::new(Self { inner, judge })
    }
}

impl ReconcilePlugin for Judged {
    fn digest(&self) -> &str {
        self.inner.digest()
    }

    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        self.inner.info()
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move {
            let r = self.inner.reconcile(req, limits).await;
            self.judge.record(judged_fault(&r));
            r
        })
    }

    fn reconcile_text<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        text: wr_runtime::RequestText,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move {
            let r = self.inner.reconcile_text(req, text, limits).await;
            self.judge.record(judged_fault(&r));
            r
        })
    }

    /// Passed on (without it a 0.2.0 candidate's `customize` was never
    /// called under a rollback policy, and its related rules applied
    /// unnarrowed). A failed `customize` fails its pass before any reconcile
    /// call, so it counts as that pass's outcome; a good one does not count
    /// (the pass's reconcile call will).
    fn customize<'a>(
        &'a self,
        req: &'a wr_runtime::CustomizeRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<Option<Vec<wr_runtime::RelatedSelector>>, PluginError>> {
        Box::pin(async move {
            let r = self.inner.customize(req, limits).await;
            if let Err(e) = &r
                && counts_against(e)
            {
                self.judge.record(true);
            }
            r
        })
    }
}

/// Whether a call's outcome counts against the rollout.
fn judged_fault(r: &Result<ReconcileResponse, PluginError>) -> bool {
    r.as_ref().err().is_some_and(counts_against)
}

fn counts_against(e: &PluginError) -> bool {
    matches!(e, PluginError::Fault { .. } | PluginError::Permanent { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn judge(window: u32, pct: u32) -> (Arc<Judge>, Arc<AtomicUsize>) {
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let j = Judge::new(
            &RollbackPolicy {
                reconciles: Some(window),
                max_fault_percent: Some(pct),
            },
            Box::new(move || {
                f.fetch_add(1, Ordering::SeqCst);
            }),
        );
        (j, fired)
    }

    #[test]
    fn too_many_faults_fail_the_version_once_the_window_is_full() {
        let (j, fired) = judge(4, 50);
        j.record(true);
        j.record(true);
        j.record(true);
        assert_eq!(j.verdict(), Verdict::Pending);
        j.record(false);
        assert_eq!(j.verdict(), Verdict::Failed);
        assert_eq!(j.counts(), (3, 4));
        j.record(false);
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }

    /// A candidate whose `customize` answers `fail` (a trap) or one selector.
    struct Customizing {
        fail: bool,
    }

    impl ReconcilePlugin for Customizing {
        fn digest(&self) -> &str {
            "sha256:customizing"
        }
        fn reconcile<'a>(
            &'a self,
            _req: &'a ReconcileRequest,
            _limits: &'a CallLimits,
        ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
            Box::pin(async {
                Err(PluginError::Transient {
                    reason: "Unused".into(),
                    message: String::new(),
                })
            })
        }
        fn customize<'a>(
            &'a self,
            _req: &'a wr_runtime::CustomizeRequest,
            _limits: &'a CallLimits,
        ) -> BoxFuture<'a, Result<Option<Vec<wr_runtime::RelatedSelector>>, PluginError>> {
            let fail = self.fail;
            Box::pin(async move {
                if fail {
                    return Err(PluginError::Fault {
                        kind: wr_runtime::FaultKind::Trap,
                        message: "unreachable".into(),
                    });
                }
                Ok(Some(Vec::new()))
            })
        }
    }

    #[tokio::test]
    async fn a_judged_candidate_is_asked_customize_and_its_faults_count() {
        let req = wr_runtime::CustomizeRequest {
            parent: serde_json::json!({}),
            config: None,
        };
        let limits = CallLimits::default();
        let (j, _) = judge(2, 50);
        let good = Judged::new(Arc::new(Customizing { fail: false }), j.clone());
        assert_eq!(good.customize(&req, &limits).await, Ok(Some(Vec::new())));
        assert_eq!(j.counts(), (0, 0), "a good customize is not a pass outcome");
        let bad = Judged::new(Arc::new(Customizing { fail: true }), j.clone());
        assert!(bad.customize(&req, &limits).await.is_err());
        assert_eq!(j.counts(), (1, 1));
    }

    #[test]
    fn faults_at_the_threshold_pass() {
        let (j, _) = judge(4, 50);
        for f in [true, false, true, false] {
            j.record(f);
        }
        assert_eq!(j.verdict(), Verdict::Passed);
    }
}
