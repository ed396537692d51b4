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
}

/// Whether a call's outcome counts against the rollout.
fn judged_fault(r: &Result<ReconcileResponse, PluginError>) -> bool {
    matches!(
        r,
        Err(PluginError::Fault { .. } | PluginError::Permanent { .. })
    )
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

    #[test]
    fn faults_at_the_threshold_pass() {
        let (j, _) = judge(4, 50);
        for f in [true, false, true, false] {
            j.record(f);
        }
        assert_eq!(j.verdict(), Verdict::Passed);
    }
}
