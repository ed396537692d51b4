//! Shadow calls: the candidate version answers the same request as the
//! active one, after it, and its output is compared — nothing it says is
//! ever written.
//!
//! A reconcile hands the active call's request and answer to
//! [`ShadowLane::offer`] once the active call has returned; the lane spawns
//! the candidate's call on its own task (so the reconcile never waits), at
//! most `max_concurrent` at once. Offers beyond that wait in a bounded
//! backlog of `max_pending` parents (a newer offer for a parent replaces its
//! older one); only an offer beyond the backlog is dropped and counted, so a
//! slow candidate cannot build up unbounded work or memory, and a burst of
//! reconciles (a fleet converging at once) is still shadowed parent by
//! parent. The lane remembers which parents it has compared, so a memoised
//! pass ([`crate::decide::memo`]) still calls a parent the candidate has not
//! seen yet (see [`ShadowLane::owes`]).
//! The comparison ([`compare`]) walks children (keyed by kind, namespace and
//! name), status, conditions (keyed by type), events, requeue and finalized,
//! and reports each differing field by its dotted path, skipping the
//! declared volatile fields. The lane keeps counts and the first N distinct
//! differences, which the manager writes to `status.shadow`.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::Mutex;

use serde_json::Value;
use wr_runtime::{ReconcileRequest, ReconcileResponse};

use crate::candidate::Installed;
use crate::crd::{ShadowDifference, ShadowStatus};
use crate::observe::EngineObserver;

/// Longest value text kept in a difference.
const VALUE_CUT: usize = 200;

/// One field that differs: (child, field path, active value, candidate value).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDiff {
    /// `Kind namespace/name` of the child; None for the response's own fields.
    pub child: Option<String>,
    /// Dotted path of the field.
    pub field: String,
    /// The active version's value (None: absent).
    pub active: Option<Value>,
    /// The candidate's value (None: absent).
    pub candidate: Option<Value>,
}

/// A declared volatile field: a dotted path prefix, for one child kind or all.
#[derive(Debug, Clone, PartialEq)]
pub struct Volatile {
    kind: Option<String>,
    path: String,
}

impl Volatile {
    /// Parses `Kind:path` or `path`.
    pub fn parse(s: &str) -> Self {
        match s.split_once(':') {
            Some((k, p)) => Self {
                kind: Some(k.to_string()),
                path: p.to_string(),
            },
            None => Self {
                kind: None,
                path: s.to_string(),
            },
        }
    }

    fn covers(&self, kind: Option<&str>, path: &str) -> bool {
        if self.kind.is_some() && self.kind.as_deref() != kind {
            return false;
        }
        path == self.path
            || path
                .strip_prefix(self.path.as_str())
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    }
}

/// (kind, `Kind namespace/name`) of a child; a child without a namespace
/// goes to the parent's (as the host applies it).
fn child_key(c: &Value, parent_ns: Option<&str>) -> (String, String) {
    let kind = c["kind"].as_str().unwrap_or("").to_string();
    let ns = c["metadata"]["namespace"]
        .as_str()
        .or(parent_ns)
        .unwrap_or("");
    let name = c["metadata"]["name"].as_str().unwrap_or("");
    let label = if ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {ns}/{name}")
    };
    (kind, label)
}

/// Every field where `candidate` differs from `active`, volatile fields
/// aside, for a parent in namespace `parent_ns`: the children's first (by
/// `Kind namespace/name`), then the parent's own (status, conditions, events,
/// requeue, finalized).
pub fn compare(
    active: &ReconcileResponse,
    candidate: &ReconcileResponse,
    volatile: &[Volatile],
    parent_ns: Option<&str>,
) -> Vec<FieldDiff> {
    let mut out = child_diffs(active, candidate, volatile, parent_ns);
    for (field, av, cv) in own_diffs(active, candidate) {
        if volatile.iter().any(|v| v.covers(None, &field)) {
            continue;
        }
        out.push(FieldDiff {
            child: None,
            field,
            active: av,
            candidate: cv,
        });
    }
    out
}

/// The children's differences: a child only one side desires is one
/// `(absent)` difference; Secret values are redacted.
fn child_diffs(
    active: &ReconcileResponse,
    candidate: &ReconcileResponse,
    volatile: &[Volatile],
    parent_ns: Option<&str>,
) -> Vec<FieldDiff> {
    let index = |r: &ReconcileResponse| -> BTreeMap<String, (String, Value)> {
        r.children
            .iter()
            .map(|c| {
                let (kind, label) = child_key(c, parent_ns);
                (label, (kind, c.clone()))
            })
            .collect()
    };
    let (a, b) = (index(active), index(candidate));
    let labels: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for label in labels {
        match (a.get(label), b.get(label)) {
            (Some((kind, x)), Some((_, y))) => {
                let mut found = Vec::new();
                walk("", Some(x), Some(y), &mut found);
                for (field, av, cv) in found {
                    if volatile.iter().any(|v| v.covers(Some(kind), &field)) {
                        continue;
                    }
                    // Secret values never reach the WasmController's status.
                    let (av, cv) = match kind.as_str() {
                        "Secret" => (av.map(|_| redacted()), cv.map(|_| redacted())),
                        _ => (av, cv),
                    };
                    out.push(FieldDiff {
                        child: Some(label.clone()),
                        field,
                        active: av,
                        candidate: cv,
                    });
                }
            }
            (x, y) => out.push(FieldDiff {
                child: Some(label.clone()),
                field: "(absent)".into(),
                active: x.map(|_| Value::String("present".into())),
                candidate: y.map(|_| Value::String("present".into())),
            }),
        }
    }
    out
}

/// The parent's own differences, volatile fields not yet removed.
fn own_diffs(active: &ReconcileResponse, candidate: &ReconcileResponse) -> Vec<DiffLeaf> {
    let mut own = Vec::new();
    walk(
        "status",
        active.status.as_ref(),
        candidate.status.as_ref(),
        &mut own,
    );
    own.extend(condition_diffs(active, candidate));
    let events = |r: &ReconcileResponse| serde_json::to_value(&r.events).unwrap_or_default();
    if active.events != candidate.events {
        own.push((
            "events".into(),
            Some(events(active)),
            Some(events(candidate)),
        ));
    }
    if active.requeue_after_seconds != candidate.requeue_after_seconds {
        own.push((
            "requeueAfterSeconds".into(),
            active.requeue_after_seconds.map(Value::from),
            candidate.requeue_after_seconds.map(Value::from),
        ));
    }
    if active.finalized != candidate.finalized {
        own.push((
            "finalized".into(),
            Some(active.finalized.into()),
            Some(candidate.finalized.into()),
        ));
    }
    own
}

/// Conditions compared by type, at `conditions[TYPE].field`.
fn condition_diffs(active: &ReconcileResponse, candidate: &ReconcileResponse) -> Vec<DiffLeaf> {
    let conds = |r: &ReconcileResponse| -> Value {
        Value::Object(
            r.conditions
                .iter()
                .map(|c| (c.type_.clone(), serde_json::to_value(c).unwrap_or_default()))
                .collect(),
        )
    };
    let (ca, cb) = (conds(active), conds(candidate));
    let mut found = Vec::new();
    walk("", Some(&ca), Some(&cb), &mut found);
    found
        .into_iter()
        .map(|(field, av, cv)| {
            // `Ready.reason` → `conditions[Ready].reason`.
            let (ty, rest) = field.split_once('.').unwrap_or((field.as_str(), ""));
            let path = match rest {
                "" => format!("conditions[{ty}]"),
                r => format!("conditions[{ty}].{r}"),
            };
            (path, av, cv)
        })
        .collect()
}

fn redacted() -> Value {
    Value::String("(redacted)".into())
}

/// Collects (path, a, b) of every leaf where `a` and `b` differ. Objects are
/// walked key by key; arrays of equal length element by element; anything
/// else that differs is one leaf.
fn walk(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<DiffLeaf>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(&p, x.get(k), y.get(k), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                walk(&format!("{path}[{i}]"), Some(u), Some(v), out);
            }
        }
        _ => out.push((path.to_string(), a.cloned(), b.cloned())),
    }
}

type DiffLeaf = (String, Option<Value>, Option<Value>);

fn cut(v: &Option<Value>) -> Option<String> {
    let s = v.as_ref()?.to_string();
    if s.len() <= VALUE_CUT {
        return Some(s);
    }
    let mut end = VALUE_CUT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Some(format!("{}…", &s[..end]))
}

/// Settings of a shadow lane.
#[derive(Debug, Clone)]
pub struct LaneSettings {
    /// Calls that may run at once; more wait in the backlog.
    pub max_concurrent: usize,
    /// Parents whose offer may wait for a free call; more are dropped.
    pub max_pending: usize,
    /// Differences kept for the status.
    pub max_differences: usize,
    /// Declared volatile fields.
    pub volatile: Vec<Volatile>,
}

#[derive(Default)]
struct Tally {
    identical: u64,
    differing: u64,
    failing: u64,
    dropped: u64,
    differences: Vec<ShadowDifference>,
}

/// The shadow calls of one candidate in one controller.
pub struct ShadowLane {
    controller: String,
    settings: LaneSettings,
    work: Mutex<Work>,
    /// Hashes of the parents compared so far (a collision only means one
    /// parent is taken as seen: a missed extra call, never a wrong write).
    compared: Mutex<HashSet<u64>>,
    tally: Mutex<Tally>,
    observer: Option<Arc<dyn EngineObserver>>,
    /// Runs when the first difference (or failure) is found, so the manager
    /// reports it without waiting for its next poll.
    on_first: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// Calls running and offers waiting for one.
#[derive(Default)]
struct Work {
    running: usize,
    pending: VecDeque<Job>,
}

/// One offered comparison.
struct Job {
    parent: String,
    cand: Arc<Installed>,
    req: ReconcileRequest,
    active: ReconcileResponse,
}

fn parent_hash(parent: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parent.hash(&mut h);
    h.finish()
}

/// What one shadow call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowOutcome {
    /// Same output as the active version.
    Identical,
    /// Some field differs.
    Differing,
    /// The candidate failed where the active version answered.
    Failing,
    /// Not called: the lane and its backlog were full.
    Dropped,
}

impl ShadowOutcome {
    /// Metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ShadowOutcome::Identical => "identical",
            ShadowOutcome::Differing => "differing",
            ShadowOutcome::Failing => "failing",
            ShadowOutcome::Dropped => "dropped",
        }
    }
}

impl ShadowLane {
    /// A lane for `controller`.
    pub fn new(
        controller: &str,
        settings: LaneSettings,
        observer: Option<Arc<dyn EngineObserver>>,
        on_first: Option<Arc<dyn Fn() + Send + Sync>>,
    ) -> Arc<Self> {
        Self::resume(controller, settings, observer, on_first, None)
    }

    /// [`Self::new`] continuing from the counts a status already shows (a
    /// restarted host, the same candidate).
    pub fn resume(
        controller: &str,
        settings: LaneSettings,
        observer: Option<Arc<dyn EngineObserver>>,
        on_first: Option<Arc<dyn Fn() + Send + Sync>>,
        from: Option<&ShadowStatus>,
    ) -> Arc<Self> {
        let tally = from.map_or_else(Tally::default, |s| Tally {
            identical: s.identical,
            differing: s.differing,
            failing: s.failing,
            dropped: s.dropped,
            differences: s.differences.clone(),
        });
        Arc::new(Self {
            controller: controller.to_string(),
            settings,
            work: Mutex::new(Work::default()),
            compared: Mutex::new(HashSet::new()),
            tally: Mutex::new(tally),
            observer,
            on_first,
        })
    }

    /// Runs `cand`'s call for `req` on its own task and compares its answer
    /// with `active`; returns at once. Waits in the backlog when
    /// `max_concurrent` calls already run; dropped (and counted) when the
    /// backlog is full too.
    pub fn offer(
        self: &Arc<Self>,
        cand: &Arc<Installed>,
        parent: String,
        req: &ReconcileRequest,
        active: &ReconcileResponse,
    ) {
        let job = Job {
            req: cand.request(req),
            cand: cand.clone(),
            active: active.clone(),
            parent,
        };
        let start = {
            let mut w = self.work.lock().unwrap_or_else(|e| e.into_inner());
            if w.running < self.settings.max_concurrent {
                w.running += 1;
                Some(job)
            } else if let Some(older) = w.pending.iter_mut().find(|j| j.parent == job.parent) {
                // The newer request replaces the older one of the same parent.
                *older = job;
                None
            } else if w.pending.len() < self.settings.max_pending {
                w.pending.push_back(job);
                None
            } else {
                drop(w);
                self.record(ShadowOutcome::Dropped, &job.parent, Vec::new());
                None
            }
        };
        if let Some(job) = start {
            let lane = self.clone();
            tokio::spawn(async move { lane.run(job).await });
        }
    }

    /// True when shadow calls have not yet compared `parent`: a pass that
    /// could be memoised calls the active version anyway, so that every
    /// parent is shadowed at least once per candidate.
    pub fn owes(&self, parent: &str) -> bool {
        let compared = self.compared.lock().unwrap_or_else(|e| e.into_inner());
        !compared.contains(&parent_hash(parent))
    }

    /// Runs `job`, then the backlog, until it is empty.
    async fn run(self: Arc<Self>, mut job: Job) {
        loop {
            self.compare_one(&job).await;
            let next = {
                let mut w = self.work.lock().unwrap_or_else(|e| e.into_inner());
                let next = w.pending.pop_front();
                if next.is_none() {
                    w.running -= 1;
                }
                next
            };
            match next {
                Some(j) => job = j,
                None => return,
            }
        }
    }

    async fn compare_one(&self, job: &Job) {
        let r = job.cand.plugin.reconcile(&job.req, &job.cand.limits).await;
        match r {
            Ok(resp) => {
                let ns = job.req.parent["metadata"]["namespace"].as_str();
                let diffs = compare(&job.active, &resp, &self.settings.volatile, ns);
                let outcome = if diffs.is_empty() {
                    ShadowOutcome::Identical
                } else {
                    ShadowOutcome::Differing
                };
                self.record(outcome, &job.parent, diffs);
            }
            Err(e) => {
                tracing::debug!(parent = %job.parent, error = %e, "shadow call failed");
                let d = FieldDiff {
                    child: None,
                    field: "(call failed)".into(),
                    active: None,
                    candidate: Some(Value::String(e.to_string())),
                };
                self.record(ShadowOutcome::Failing, &job.parent, vec![d]);
            }
        }
    }

    fn record(&self, outcome: ShadowOutcome, parent: &str, diffs: Vec<FieldDiff>) {
        if outcome != ShadowOutcome::Dropped {
            self.compared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(parent_hash(parent));
        }
        let first = {
            let mut t = self.tally.lock().unwrap_or_else(|e| e.into_inner());
            let before = t.differing + t.failing;
            match outcome {
                ShadowOutcome::Identical => t.identical += 1,
                ShadowOutcome::Differing => t.differing += 1,
                ShadowOutcome::Failing => t.failing += 1,
                ShadowOutcome::Dropped => t.dropped += 1,
            }
            for d in diffs {
                if t.differences.len() >= self.settings.max_differences {
                    break;
                }
                let d = ShadowDifference {
                    parent: parent.to_string(),
                    child: d.child,
                    field: d.field,
                    active: cut(&d.active),
                    candidate: cut(&d.candidate),
                };
                let seen = t
                    .differences
                    .iter()
                    .any(|x| x.parent == d.parent && x.child == d.child && x.field == d.field);
                if !seen {
                    t.differences.push(d);
                }
            }
            before == 0 && t.differing + t.failing > 0
        };
        if let Some(obs) = &self.observer {
            obs.shadow_call(&self.controller, outcome.as_str());
        }
        if first && let Some(f) = &self.on_first {
            f();
        }
    }

    /// The counts and differences so far, for `status.shadow`.
    pub fn status(&self, candidate_digest: &str) -> ShadowStatus {
        let t = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        ShadowStatus {
            candidate_digest: candidate_digest.to_string(),
            identical: t.identical,
            differing: t.differing,
            failing: t.failing,
            dropped: t.dropped,
            differences: t.differences.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wr_runtime::{Condition, ConditionStatus};

    fn resp(children: Vec<Value>) -> ReconcileResponse {
        ReconcileResponse {
            children,
            conditions: vec![],
            status: None,
            requeue_after_seconds: None,
            events: vec![],
            finalized: false,
        }
    }

    fn cm(name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns"}, "data": data})
    }

    #[test]
    fn equal_outputs_have_no_difference() {
        let a = resp(vec![cm("x", json!({"k": "v"}))]);
        assert!(compare(&a, &a.clone(), &[], None).is_empty());
    }

    #[test]
    fn children_without_a_namespace_are_keyed_in_the_parents() {
        let mut a = resp(vec![cm("x", json!({"k": "v"}))]);
        a.children[0]["metadata"]
            .as_object_mut()
            .map(|m| m.remove("namespace"));
        let mut b = a.clone();
        b.children[0]["data"]["k"] = json!("w");
        let d = compare(&a, &b, &[], Some("pns"));
        assert_eq!(d[0].child.as_deref(), Some("ConfigMap pns/x"));
    }

    #[test]
    fn one_changed_field_is_reported_by_child_and_path() {
        let a = resp(vec![
            cm("x", json!({"k": "v", "same": "s"})),
            cm("y", json!({})),
        ]);
        let b = resp(vec![
            cm("x", json!({"k": "w", "same": "s"})),
            cm("y", json!({})),
        ]);
        assert_eq!(
            compare(&a, &b, &[], None),
            vec![FieldDiff {
                child: Some("ConfigMap ns/x".into()),
                field: "data.k".into(),
                active: Some(json!("v")),
                candidate: Some(json!("w")),
            }]
        );
    }

    #[test]
    fn secret_values_are_redacted() {
        let secret = |v: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "s", "namespace": "ns"}, "data": {"k": v}})
        };
        let d = compare(
            &resp(vec![secret("YQ==")]),
            &resp(vec![secret("Yg==")]),
            &[],
            None,
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "data.k");
        assert_eq!(d[0].active, Some(json!("(redacted)")));
        assert_eq!(d[0].candidate, Some(json!("(redacted)")));
    }

    #[test]
    fn a_missing_child_is_one_difference() {
        let a = resp(vec![cm("x", json!({}))]);
        let d = compare(&a, &resp(vec![]), &[], None);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "(absent)");
        assert_eq!(d[0].candidate, None);
    }

    #[test]
    fn volatile_fields_are_skipped_for_their_kind_or_everywhere() {
        let a = resp(vec![cm("x", json!({"at": "1", "k": "v"}))]);
        let b = resp(vec![cm("x", json!({"at": "2", "k": "v"}))]);
        assert!(compare(&a, &b, &[Volatile::parse("data.at")], None).is_empty());
        assert!(compare(&a, &b, &[Volatile::parse("ConfigMap:data.at")], None).is_empty());
        assert_eq!(
            compare(&a, &b, &[Volatile::parse("Secret:data.at")], None).len(),
            1
        );
        // A prefix covers what is below it, not a sibling sharing its spelling.
        assert!(compare(&a, &b, &[Volatile::parse("data")], None).is_empty());
        assert_eq!(compare(&a, &b, &[Volatile::parse("data.a")], None).len(), 1);
    }

    #[test]
    fn status_conditions_events_are_compared_by_path() {
        let mut a = resp(vec![]);
        a.status = Some(json!({"phase": "Ready", "n": 1}));
        a.conditions = vec![Condition {
            type_: "Ready".into(),
            status: ConditionStatus::True,
            reason: "Ok".into(),
            message: String::new(),
        }];
        let mut b = a.clone();
        b.status = Some(json!({"phase": "Pending", "n": 1}));
        b.conditions[0].reason = "Waiting".into();
        let fields: Vec<String> = compare(&a, &b, &[], None)
            .into_iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(fields, vec!["status.phase", "conditions[Ready].reason"]);
        assert!(
            compare(
                &a,
                &b,
                &[
                    Volatile::parse("status.phase"),
                    Volatile::parse("conditions[Ready]")
                ],
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn the_lane_keeps_counts_and_the_first_distinct_differences() {
        let lane = ShadowLane::new(
            "c",
            LaneSettings {
                max_concurrent: 1,
                max_pending: 1,
                max_differences: 2,
                volatile: vec![],
            },
            None,
            None,
        );
        let d = |f: &str| FieldDiff {
            child: None,
            field: f.into(),
            active: None,
            candidate: Some(json!("x".repeat(500))),
        };
        lane.record(ShadowOutcome::Identical, "ns/p", vec![]);
        lane.record(ShadowOutcome::Differing, "ns/p", vec![d("a")]);
        lane.record(ShadowOutcome::Differing, "ns/p", vec![d("a")]);
        lane.record(ShadowOutcome::Differing, "ns/q", vec![d("b"), d("c")]);
        lane.record(ShadowOutcome::Dropped, "ns/q", vec![]);
        let s = lane.status("sha256:c");
        assert_eq!(
            (s.identical, s.differing, s.failing, s.dropped),
            (1, 3, 0, 1)
        );
        let kept: Vec<(&str, &str)> = s
            .differences
            .iter()
            .map(|d| (d.parent.as_str(), d.field.as_str()))
            .collect();
        assert_eq!(kept, vec![("ns/p", "a"), ("ns/q", "b")]);
        assert!(
            s.differences[0]
                .candidate
                .as_ref()
                .is_some_and(|v| v.len() < 220)
        );
    }

    /// Answers once a permit is added: holds calls "running" for the test.
    struct Held(tokio::sync::Semaphore, Value);

    impl crate::plugin::ReconcilePlugin for Held {
        fn digest(&self) -> &str {
            "sha256:held"
        }
        fn reconcile<'a>(
            &'a self,
            _req: &'a ReconcileRequest,
            _limits: &'a wr_runtime::CallLimits,
        ) -> futures::future::BoxFuture<'a, Result<ReconcileResponse, crate::plugin::PluginError>>
        {
            Box::pin(async move {
                if let Ok(p) = self.0.acquire().await {
                    p.forget();
                }
                Ok(resp(vec![self.1.clone()]))
            })
        }
    }

    #[tokio::test]
    async fn offers_beyond_the_running_calls_wait_in_the_backlog_and_only_its_overflow_is_dropped()
    {
        let lane = ShadowLane::new(
            "c",
            LaneSettings {
                max_concurrent: 1,
                max_pending: 1,
                max_differences: 10,
                volatile: vec![],
            },
            None,
            None,
        );
        let plugin = Arc::new(Held(
            tokio::sync::Semaphore::new(0),
            cm("x", json!({"v": "new"})),
        ));
        let cand = Arc::new(Installed {
            digest: "sha256:held".into(),
            plugin: plugin.clone(),
            limits: wr_runtime::CallLimits::default(),
            config: None,
            route: crate::candidate::Route::Nobody,
            shadow: None,
            tally: Arc::default(),
        });
        let req: ReconcileRequest = serde_json::from_value(json!({
            "parent": {"metadata": {"name": "p", "namespace": "ns"}},
            "now": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        let active = resp(vec![cm("x", json!({"v": "old"}))]);
        // a runs; b waits (its second offer replaces the first); c overflows.
        for p in ["ns/a", "ns/b", "ns/b", "ns/c"] {
            lane.offer(&cand, p.into(), &req, &active);
        }
        assert_eq!(lane.status("d").dropped, 1);
        assert!(lane.owes("ns/a") && lane.owes("ns/b"));
        plugin.0.add_permits(10);
        for _ in 0..500 {
            if lane.status("d").differing >= 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let s = lane.status("d");
        assert_eq!((s.identical, s.differing, s.dropped), (0, 2, 1), "{s:?}");
        assert!(!lane.owes("ns/a") && !lane.owes("ns/b") && lane.owes("ns/c"));
        // The backlog drained: the next offer runs at once.
        lane.offer(&cand, "ns/c".into(), &req, &active);
        for _ in 0..500 {
            if !lane.owes("ns/c") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!lane.owes("ns/c"));
    }
}
