//! Fault injection, controllable while the server runs (from Rust through
//! [`FaultHandle`], or over the admin HTTP path). Every random decision
//! comes from one seeded RNG drawn in request arrival order, so the same
//! seed and the same request sequence give the same faults.

use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// What an injected fault does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FaultAction {
    /// 409 Conflict (as for a stale resourceVersion), nothing committed.
    Conflict,
    /// 429 TooManyRequests with a `Retry-After` header, nothing committed.
    #[serde(rename_all = "camelCase")]
    TooManyRequests { retry_after_seconds: u64 },
    /// 500 InternalError, nothing committed.
    InternalError,
    /// 503 ServiceUnavailable, nothing committed.
    Unavailable,
    /// 403 Forbidden (as RBAC answers a verb the client may not use), nothing committed.
    Forbidden,
    /// Hold the request `hold_ms`, then answer 504 Timeout or, with
    /// `drop_connection`, close the connection without an answer. Nothing committed.
    #[serde(rename_all = "camelCase")]
    Timeout {
        hold_ms: u64,
        #[serde(default)]
        drop_connection: bool,
    },
    /// Perform the request (a write is committed), then close the connection
    /// without sending the response.
    CommitThenDrop,
    /// Delay the request by `ms` before serving it normally.
    Latency { ms: u64 },
    /// Serve a list from the snapshot `versions_behind` versions ago
    /// (bounded by the retained history).
    #[serde(rename_all = "camelCase")]
    StaleList { versions_behind: u64 },
}

impl FaultAction {
    pub fn name(&self) -> &'static str {
        match self {
            FaultAction::Conflict => "conflict",
            FaultAction::TooManyRequests { .. } => "tooManyRequests",
            FaultAction::InternalError => "internalError",
            FaultAction::Unavailable => "unavailable",
            FaultAction::Forbidden => "forbidden",
            FaultAction::Timeout { .. } => "timeout",
            FaultAction::CommitThenDrop => "commitThenDrop",
            FaultAction::Latency { .. } => "latency",
            FaultAction::StaleList { .. } => "staleList",
        }
    }
}

/// A rule: for matching requests, inject `action` with probability `rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    /// Verbs (get, list, watch, create, update, patch, delete, deletecollection); empty = all.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resource plurals (`configmaps`); empty = all.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Probability in [0, 1].
    pub rate: f64,
    pub action: FaultAction,
    /// Stop after this many injections (None = unlimited).
    #[serde(default)]
    pub times: Option<u64>,
}

impl FaultRule {
    /// A rule for every request of the given verbs (empty: all verbs).
    pub fn new(verbs: &[&str], rate: f64, action: FaultAction) -> Self {
        FaultRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resources: Vec::new(),
            rate,
            action,
            times: None,
        }
    }

    fn applies(&self, verb: &str, resource: &str) -> bool {
        (self.verbs.is_empty() || self.verbs.iter().any(|v| v == verb))
            && (self.resources.is_empty() || self.resources.iter().any(|r| r == resource))
            && self.times != Some(0)
    }
}

/// Faults on watch streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchFaults {
    /// Close every watch stream after this many events (bookmarks excluded).
    #[serde(default)]
    pub cut_after_events: Option<u64>,
    /// Close every watch stream after this many milliseconds.
    #[serde(default)]
    pub cut_after_ms: Option<u64>,
    /// The next this-many watches (and continued lists) get `410 Gone`.
    #[serde(default)]
    pub gone_next: u32,
}

/// The whole fault configuration, as set over the admin path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultSpec {
    #[serde(default)]
    pub rules: Vec<FaultRule>,
    #[serde(default)]
    pub watch: WatchFaults,
    /// Re-seed the RNG (replay a run).
    #[serde(default)]
    pub seed: Option<u64>,
}

/// One injected fault, in injection order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Injected {
    /// Sequence number of the request among those fault rules looked at.
    pub request: u64,
    pub verb: String,
    pub resource: String,
    pub fault: String,
}

/// The faults decided for one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    pub latency_ms: u64,
    /// The failing action (error, timeout, commit-then-drop), first match wins.
    pub action: Option<FaultAction>,
    pub stale_by: Option<u64>,
}

/// Fault name logged for a forced `410 Gone` (watch or continued list).
pub const FAULT_GONE: &str = "gone";
/// Fault name logged for a watch stream armed with a cut.
pub const FAULT_WATCH_CUT: &str = "watchCut";

struct State {
    spec: FaultSpec,
    rng: StdRng,
    seq: u64,
    injected: Vec<Injected>,
}

impl State {
    /// Logs a watch-level fault. It draws nothing from the RNG, so rule
    /// decisions stay replayable; `request` is the last rule-checked request.
    fn log_watch_fault(&mut self, fault: &str) {
        let request = self.seq;
        self.injected.push(Injected {
            request,
            verb: "watch|list".into(),
            resource: String::new(),
            fault: fault.into(),
        });
    }
}

/// Handle to the running server's faults. Cheap to clone.
#[derive(Clone)]
pub struct FaultHandle(Arc<Mutex<State>>);

impl std::fmt::Debug for FaultHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultHandle").finish_non_exhaustive()
    }
}

impl FaultHandle {
    pub fn new(seed: u64) -> Self {
        FaultHandle(Arc::new(Mutex::new(State {
            spec: FaultSpec::default(),
            rng: StdRng::seed_from_u64(seed),
            seq: 0,
            injected: Vec::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replace the configuration (re-seeding when `spec.seed` is set).
    pub fn set(&self, spec: FaultSpec) {
        let mut st = self.lock();
        if let Some(seed) = spec.seed {
            st.rng = StdRng::seed_from_u64(seed);
            st.seq = 0;
            st.injected.clear();
        }
        st.spec = spec;
    }

    pub fn spec(&self) -> FaultSpec {
        self.lock().spec.clone()
    }

    pub fn add_rule(&self, rule: FaultRule) {
        self.lock().spec.rules.push(rule);
    }

    pub fn set_watch(&self, watch: WatchFaults) {
        self.lock().spec.watch = watch;
    }

    /// The next `n` watches (and continued lists) fail with `410 Gone`.
    pub fn force_gone(&self, n: u32) {
        self.lock().spec.watch.gone_next = n;
    }

    /// Restart the RNG and the injection log.
    pub fn reseed(&self, seed: u64) {
        let mut st = self.lock();
        st.rng = StdRng::seed_from_u64(seed);
        st.seq = 0;
        st.injected.clear();
    }

    /// Remove every fault (the RNG keeps its position).
    pub fn clear(&self) {
        self.lock().spec = FaultSpec::default();
    }

    /// Faults injected so far, in order.
    pub fn injected(&self) -> Vec<Injected> {
        self.lock().injected.clone()
    }

    /// Decide the faults of one request. One RNG draw per applicable rule.
    pub fn decide(&self, verb: &str, resource: &str) -> Decision {
        let mut st = self.lock();
        let mut d = Decision::default();
        if st.spec.rules.is_empty() {
            return d;
        }
        st.seq += 1;
        let seq = st.seq;
        let State {
            spec,
            rng,
            injected,
            ..
        } = &mut *st;
        for rule in spec.rules.iter_mut() {
            if !rule.applies(verb, resource) {
                continue;
            }
            let roll: f64 = rng.random();
            if roll >= rule.rate {
                continue;
            }
            let used = match &rule.action {
                FaultAction::Latency { ms } => {
                    d.latency_ms += ms;
                    true
                }
                FaultAction::StaleList { versions_behind } => {
                    if verb == "list" {
                        d.stale_by = Some(*versions_behind);
                        true
                    } else {
                        false
                    }
                }
                other => {
                    if d.action.is_none() {
                        d.action = Some(other.clone());
                        true
                    } else {
                        false
                    }
                }
            };
            if used {
                if let Some(t) = rule.times.as_mut() {
                    *t = t.saturating_sub(1);
                }
                injected.push(Injected {
                    request: seq,
                    verb: verb.to_string(),
                    resource: resource.to_string(),
                    fault: rule.action.name().to_string(),
                });
            }
        }
        d
    }

    /// Should this watch / continued list be answered with 410? Consumes one,
    /// logged as fault `gone` (verb `watch|list`: the caller does not say which).
    pub fn take_gone(&self) -> bool {
        let mut st = self.lock();
        if st.spec.watch.gone_next > 0 {
            st.spec.watch.gone_next -= 1;
            st.log_watch_fault(FAULT_GONE);
            true
        } else {
            false
        }
    }

    /// The cuts armed on a watch starting now. A watch started while a cut is
    /// configured is logged once as fault `watchCut`: it is counted when armed,
    /// since the stream is then closed early unless its client leaves first.
    pub fn watch_cuts(&self) -> (Option<u64>, Option<u64>) {
        let mut st = self.lock();
        let cuts = (st.spec.watch.cut_after_events, st.spec.watch.cut_after_ms);
        if cuts.0.is_some() || cuts.1.is_some() {
            st.log_watch_fault(FAULT_WATCH_CUT);
        }
        cuts
    }

    /// Number of injected faults by name (rules and watch faults), for reports.
    pub fn counts(&self) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for i in &self.lock().injected {
            *out.entry(i.fault.clone()).or_insert(0) += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64) -> Vec<Injected> {
        let h = FaultHandle::new(seed);
        h.add_rule(FaultRule::new(&["create"], 0.5, FaultAction::InternalError));
        for _ in 0..64 {
            h.decide("create", "configmaps");
            h.decide("get", "configmaps");
        }
        h.injected()
    }

    #[test]
    fn same_seed_same_sequence() {
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(7).iter().all(|i| i.verb == "create"));
    }

    #[test]
    fn times_limits_injections_and_rules_filter_resources() {
        let h = FaultHandle::new(1);
        let mut rule = FaultRule::new(&[], 1.0, FaultAction::Conflict);
        rule.resources = vec!["secrets".into()];
        rule.times = Some(2);
        h.add_rule(rule);
        assert!(h.decide("update", "configmaps").action.is_none());
        assert_eq!(
            h.decide("update", "secrets").action,
            Some(FaultAction::Conflict)
        );
        assert_eq!(
            h.decide("update", "secrets").action,
            Some(FaultAction::Conflict)
        );
        assert!(h.decide("update", "secrets").action.is_none());
    }

    #[test]
    fn watch_faults_are_logged_and_counted_without_touching_the_rng() {
        let h = FaultHandle::new(3);
        assert_eq!(h.watch_cuts(), (None, None));
        assert!(!h.take_gone());
        assert!(h.counts().is_empty(), "nothing armed, nothing logged");
        h.set_watch(WatchFaults {
            cut_after_ms: Some(10),
            gone_next: 2,
            ..Default::default()
        });
        assert_eq!(h.watch_cuts(), (None, Some(10)));
        assert!(h.take_gone());
        assert!(h.take_gone());
        assert!(!h.take_gone());
        h.add_rule(FaultRule::new(&[], 1.0, FaultAction::Conflict));
        h.decide("get", "configmaps");
        let counts = h.counts();
        assert_eq!(counts.get(FAULT_GONE), Some(&2));
        assert_eq!(counts.get(FAULT_WATCH_CUT), Some(&1));
        assert_eq!(counts.get("conflict"), Some(&1));
        // Same rule draws as a handle that never saw watch faults.
        let plain = FaultHandle::new(3);
        plain.add_rule(FaultRule::new(&[], 0.5, FaultAction::Conflict));
        let h2 = FaultHandle::new(3);
        h2.add_rule(FaultRule::new(&[], 0.5, FaultAction::Conflict));
        h2.set_watch(WatchFaults {
            gone_next: 1,
            ..Default::default()
        });
        let mut a = Vec::new();
        let mut b = Vec::new();
        for _ in 0..32 {
            a.push(plain.decide("get", "x").action.is_some());
            h2.take_gone();
            h2.watch_cuts();
            b.push(h2.decide("get", "x").action.is_some());
        }
        assert_eq!(a, b);
    }

    #[test]
    fn spec_round_trips_as_json() {
        let spec: FaultSpec = serde_json::from_str(
            r#"{"rules":[{"verbs":["list"],"rate":1,"action":{"kind":"tooManyRequests","retryAfterSeconds":2}}],
                "watch":{"cutAfterEvents":3},"seed":5}"#,
        )
        .unwrap();
        assert_eq!(
            spec.rules[0].action,
            FaultAction::TooManyRequests {
                retry_after_seconds: 2
            }
        );
        assert_eq!(spec.watch.cut_after_events, Some(3));
    }
}
