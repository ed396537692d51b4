//! A candidate plugin version installed in a running controller: which
//! parents it serves (the canary [`Route`]), its shadow lane, and the
//! counters the rollout's gates read.
//!
//! The manager builds a new [`Installed`] whenever the candidate or the
//! rollout step changes and swaps it into the controller; a reconcile reads
//! it once ([`crate::controller`]'s `candidate()`), so a pass never mixes two
//! routes. Lanes and counters are `Arc`s so that a route change keeps them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use kube::core::{Selector, SelectorExt};
use serde_json::Value;
use wr_runtime::{CallLimits, ReconcileRequest};

use crate::plugin::{PluginError, ReconcilePlugin};
use crate::queue::ObjectKey;
use crate::shadow::ShadowLane;

/// One rule of a route (a rollout step).
#[derive(Debug, Clone)]
pub enum StepMatch {
    /// Parents whose [`crate::canary::bucket`] is below this.
    Percent(u32),
    /// Parents in these namespaces.
    Namespaces(Vec<String>),
    /// Parents whose labels match.
    Selector(Selector),
}

/// Which parents the candidate serves.
#[derive(Debug, Clone, Default)]
pub enum Route {
    /// None: the active version serves every parent (shadow only).
    #[default]
    Nobody,
    /// Parents matching any of these steps (the steps reached so far).
    Steps(Vec<StepMatch>),
    /// Every parent (promoted).
    Everybody,
}

impl Route {
    /// True when the candidate serves the parent `namespace/name` with `labels`.
    pub fn serves(
        &self,
        namespace: Option<&str>,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        match self {
            Route::Nobody => false,
            Route::Everybody => true,
            Route::Steps(steps) => steps.iter().any(|s| match s {
                StepMatch::Percent(p) => crate::canary::bucket(namespace, name) < *p,
                StepMatch::Namespaces(ns) => namespace.is_some_and(|n| ns.iter().any(|x| x == n)),
                StepMatch::Selector(sel) => sel.matches(labels),
            }),
        }
    }

    /// [`Self::serves`] for a parent object.
    pub fn serves_object(&self, parent: &kube::api::DynamicObject) -> bool {
        let empty = BTreeMap::new();
        self.serves(
            parent.metadata.namespace.as_deref(),
            parent.metadata.name.as_deref().unwrap_or_default(),
            parent.metadata.labels.as_ref().unwrap_or(&empty),
        )
    }
}

/// Outcomes of the candidate's own calls (parents it serves), for the gates.
#[derive(Debug, Default)]
pub struct CanaryTally {
    faults: AtomicU32,
    permanent: AtomicU32,
    /// Parents the candidate has answered for (their health is its doing).
    served: std::sync::Mutex<std::collections::HashSet<ObjectKey>>,
}

impl CanaryTally {
    /// The candidate answered a call for `key`.
    pub fn served(&self, key: &ObjectKey) {
        self.served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone());
    }

    /// True once the candidate has answered a call for `key`.
    pub fn has_served(&self, key: &ObjectKey) -> bool {
        self.served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }

    /// Counts one candidate call's result.
    pub fn record<T>(&self, r: &Result<T, PluginError>) {
        match r {
            Err(PluginError::Fault { .. }) => {
                self.faults.fetch_add(1, Ordering::Relaxed);
            }
            Err(PluginError::Permanent { .. }) => {
                self.permanent.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// (faults, permanent errors) since the last reset.
    pub fn counts(&self) -> (u32, u32) {
        (
            self.faults.load(Ordering::Relaxed),
            self.permanent.load(Ordering::Relaxed),
        )
    }

    /// A new step starts: count afresh.
    pub fn reset(&self) {
        self.faults.store(0, Ordering::Relaxed);
        self.permanent.store(0, Ordering::Relaxed);
    }
}

/// The candidate as a running controller holds it.
pub struct Installed {
    /// `sha256:<hex>` of the candidate.
    pub digest: String,
    /// The loaded candidate.
    pub plugin: Arc<dyn ReconcilePlugin>,
    /// Its own sandbox limits.
    pub limits: CallLimits,
    /// `config` handed to it instead of the active version's, when set.
    pub config: Option<Value>,
    /// Parents it serves.
    pub route: Route,
    /// Shadow comparisons (None: shadow calls are off).
    pub shadow: Option<Arc<ShadowLane>>,
    /// Its own calls' faults and permanent errors.
    pub tally: Arc<CanaryTally>,
}

impl Installed {
    /// `req` as the candidate sees it (its own `config` when it has one).
    pub fn request(&self, req: &ReconcileRequest) -> ReconcileRequest {
        let mut r = req.clone();
        if let Some(c) = &self.config {
            r.config = Some(c.clone());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_select_by_namespace_selector_or_everybody() {
        let labels: BTreeMap<String, String> = [("tier".to_string(), "web".to_string())].into();
        let none = BTreeMap::new();
        let sel: Selector = kube::core::Expression::Equal("tier".into(), "web".into()).into();
        let r = Route::Steps(vec![
            StepMatch::Namespaces(vec!["a".into()]),
            StepMatch::Selector(sel),
        ]);
        assert!(r.serves(Some("a"), "x", &none));
        assert!(r.serves(Some("b"), "x", &labels));
        assert!(!r.serves(Some("b"), "x", &none));
        assert!(!Route::Nobody.serves(Some("a"), "x", &labels));
        assert!(Route::Everybody.serves(None, "x", &none));
    }

    #[test]
    fn the_tally_counts_faults_and_permanent_errors_only() {
        let t = CanaryTally::default();
        t.record::<()>(&Err(PluginError::Fault {
            kind: wr_runtime::FaultKind::Trap,
            message: String::new(),
        }));
        t.record::<()>(&Err(PluginError::Permanent {
            reason: "R".into(),
            message: String::new(),
        }));
        t.record::<()>(&Err(PluginError::Transient {
            reason: "R".into(),
            message: String::new(),
        }));
        t.record::<()>(&Ok(()));
        assert_eq!(t.counts(), (1, 1));
        t.reset();
        assert_eq!(t.counts(), (0, 0));
    }
}
