//! The decision core: what one reconcile of one parent should do, as plain
//! data, with no I/O, no async and no API server — in the spirit of
//! kube-runtime's `reconcile → Action`.
//!
//! A reconcile asks it three questions, in order:
//!
//! 1. [`admit`]: before the plugin is called — skip a parent being deleted
//!    without this host's finalizer, release one when finalization is off,
//!    add the finalizer before any child can exist, or hold a parent whose
//!    last answer for this generation was a permanent error.
//! 2. [`observe`] + [`request`]: which owned children and related objects the
//!    plugin sees, and the request it gets.
//! 3. [`decide`]: given the plugin's answer (or classified error), the
//!    [`Decision`] — every child's action with its reason, the children to
//!    delete, the status (host-owned `Ready` plus the plugin's conditions,
//!    `observedGeneration` filled in by [`crate::status::next_status`]), the
//!    events, the requeue, and how the reconcile is counted.
//!
//! After the writes, [`Answer::settle`] turns the problems the writes met
//! (none in a preview, beyond the collisions the decision already knows) into
//! the final `Ready` condition, the finalizer removal and the requeue.
//!
//! The reconcile path (`crate::reconcile`) executes a decision against the API
//! server; `plan` ([`crate::plan`]) renders the same decision. So a preview
//! and a rollout cannot disagree about anything a plugin decides.

use std::sync::Arc;
use std::time::Duration;

use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wr_runtime::{EventType, FaultKind, ReconcileRequest, ReconcileResponse, RelatedObjects};

use crate::apply::{self, ChildAction, OwnerRef};
use crate::crd::RelatedScope;
use crate::events::EventKind;
use crate::finalize;
use crate::observe::ReconcileResult;
use crate::plugin::PluginError;
use crate::queue::ObjectKey;
use crate::status::{DesiredCondition, StatusUpdate, next_status};
use crate::target::Target;
use crate::validate::{DesiredChild, validate_response};

pub mod converge;
pub mod memo;
pub mod rolling;
#[cfg(test)]
mod tests;

/// What happens to the host's finalizer on the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FinalizerChange {
    /// Added before the first child is created.
    Add,
    /// Removed (finalized, or finalization disabled).
    Remove,
}

/// A permanent failure the host remembers for a parent's generation: no new
/// plugin call until the generation changes or `wait` has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The failure's reason (the `Ready` condition's).
    pub reason: String,
    /// The failure's message.
    pub message: String,
    /// How long the hold still lasts.
    pub wait: Duration,
}

/// What to do before the plugin is called.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// The finalizer change to write first, if any.
    pub finalizer: Option<FinalizerChange>,
    /// Then what.
    pub then: Then,
}

/// The step after the finalizer change of an [`Admission`].
#[derive(Debug, Clone, PartialEq)]
pub enum Then {
    /// Nothing more for this parent (why, for logs and previews).
    Stop(&'static str),
    /// A remembered permanent failure: write this status, no plugin call,
    /// look again after `wait`.
    Hold {
        /// `Ready=False` with the remembered reason, other conditions kept.
        status: StatusUpdate,
        /// When to look again.
        wait: Duration,
    },
    /// Observe, call the plugin, [`decide`].
    Call,
}

/// Rules 1–2 of `docs/reconciliation-rules.md`: check deletion first; the
/// finalizer goes on before anything is created and comes off only when this
/// host is done. `hold` is the permanent failure remembered for this parent's
/// current uid and generation, if any (a preview passes `None`).
pub fn admit(target: &Target, parent: &DynamicObject, hold: Option<&Hold>) -> Admission {
    let deleting = parent.metadata.deletion_timestamp.is_some();
    let has_fin = finalize::has_finalizer(parent, &target.finalizer);
    // Decorator mode: an object that does not match (any more) gets no
    // finalizer, and loses this host's.
    let finalize = target.finalize && target.selects(parent);
    let stop = |finalizer, why| Admission {
        finalizer,
        then: Then::Stop(why),
    };
    if deleting && !has_fin {
        return stop(None, "being deleted without this controller's finalizer");
    }
    if deleting && !finalize {
        return stop(
            Some(FinalizerChange::Remove),
            "being deleted and finalize is off: finalizer released",
        );
    }
    let finalizer = match (finalize, has_fin) {
        (true, false) if !deleting => Some(FinalizerChange::Add),
        (false, true) => Some(FinalizerChange::Remove),
        _ => None,
    };
    let then = match hold {
        Some(h) if !deleting => Then::Hold {
            status: failed_status(&h.reason, &h.message),
            wait: h.wait,
        },
        _ => Then::Call,
    };
    Admission { finalizer, then }
}

/// The parent as the plugin sees it after the admission's finalizer change.
pub fn with_finalizer(
    target: &Target,
    parent: &DynamicObject,
    change: Option<FinalizerChange>,
) -> DynamicObject {
    let mut p = parent.clone();
    match change {
        Some(FinalizerChange::Add) => p
            .metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(target.finalizer.clone()),
        Some(FinalizerChange::Remove) => {
            if let Some(f) = p.metadata.finalizers.as_mut() {
                f.retain(|x| *x != target.finalizer);
            }
        }
        None => {}
    }
    p
}

/// Where the observed state comes from: the engine's watch caches or a
/// plan's snapshot. Indexes follow the target's declared order.
pub trait Source {
    /// Objects of child kind `kind` controlled by the parent with `uid`.
    fn owned_by(&self, kind: usize, uid: &str) -> Vec<Arc<DynamicObject>>;
    /// Objects of related rule `rule` in namespace `ns` (`None`: all).
    fn related_in(&self, rule: usize, ns: Option<&str>) -> Vec<Arc<DynamicObject>>;
    /// The object of child kind `kind` named `key`, whoever owns it.
    fn child(&self, kind: usize, key: &ObjectKey) -> Option<Arc<DynamicObject>>;
}

/// What the host observed for one parent.
pub struct Observed {
    /// The parent (after the admission's finalizer change).
    pub parent: DynamicObject,
    /// Owned children (kind index, object), each in the parent's namespace
    /// when both are namespaced.
    pub children: Vec<(usize, Arc<DynamicObject>)>,
    /// Related objects the rules select, in rule order, each with its rule's index.
    pub related: Vec<(usize, Arc<DynamicObject>)>,
}

/// Collects the observed state of `parent` from `src` (rule 3: level-based —
/// the current children and related objects, never an event payload).
pub fn observe(target: &Target, parent: DynamicObject, src: &dyn Source) -> Observed {
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let mut children = Vec::new();
    for (i, kind) in target.children.iter().enumerate() {
        for c in src.owned_by(i, &uid) {
            if !kind.resolved.namespaced
                || !target.parent.namespaced
                || c.metadata.namespace == parent.metadata.namespace
            {
                children.push((i, c));
            }
        }
    }
    let mut related = Vec::new();
    for (i, r) in target.related.iter().enumerate() {
        let ns = match (r.rule.scope, target.parent.namespaced) {
            (RelatedScope::Namespace, true) => parent.metadata.namespace.as_deref(),
            _ => None,
        };
        related.extend(
            src.related_in(i, ns)
                .into_iter()
                .filter(|o| r.matches(o))
                .map(|o| (i, o)),
        );
    }
    Observed {
        parent,
        children,
        related,
    }
}

/// An object as the plugin receives it (no `managedFields`).
///
/// Built from the object's parts — the same keys in the same order as
/// `serde_json::to_value(o)` — because only the metadata needs converting:
/// the rest is already a `Value` and is cloned, not re-serialised.
pub fn to_json(o: &DynamicObject) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(t) = &o.types {
        out.insert("apiVersion".into(), Value::String(t.api_version.clone()));
        out.insert("kind".into(), Value::String(t.kind.clone()));
    }
    let mut meta = serde_json::to_value(&o.metadata).unwrap_or(Value::Null);
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
    }
    out.insert("metadata".into(), meta);
    match &o.data {
        Value::Object(data) => {
            for (k, v) in data {
                out.insert(k.clone(), v.clone());
            }
        }
        Value::Null => {}
        // Not an object: what serialising the whole object would give.
        _ => return serde_json::to_value(o).unwrap_or(Value::Null),
    }
    Value::Object(out)
}

/// The request the plugin gets for `observed` at `now`.
pub fn request(target: &Target, observed: &Observed, now: &str) -> ReconcileRequest {
    // One group per rule, keyed as the plugin reads it (an empty group when
    // nothing matched, so a plugin can tell "none" from "not declared").
    let mut related = Vec::new();
    for r in &target.related {
        RelatedObjects::group(&mut related, &r.key);
    }
    for (i, o) in &observed.related {
        if let Some(r) = target.related.get(*i) {
            RelatedObjects::group(&mut related, &r.key).push(to_json(o));
        }
    }
    ReconcileRequest {
        parent: to_json(&observed.parent),
        children: observed.children.iter().map(|(_, c)| to_json(c)).collect(),
        related,
        finalizing: observed.parent.metadata.deletion_timestamp.is_some(),
        config: target.config.clone(),
        now: now.to_string(),
    }
}

/// Kinds of per-parent failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureClass {
    /// The plugin returned a permanent error.
    Permanent,
    /// The plugin returned a transient error.
    Transient,
    /// The sandbox stopped the call (trap, timeout, fuel, memory).
    Fault,
    /// The output was malformed or failed validation: nothing would be applied.
    InvalidOutput,
}

/// A plugin call (or its output) that failed for one parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFailure {
    /// `permanent`, `transient`, `fault` or `invalidOutput`.
    pub class: FailureClass,
    /// CamelCase reason (what the Ready condition would say).
    pub reason: String,
    /// Detail.
    pub message: String,
}

/// The reason the host reports for output it cannot use.
pub const INVALID_OUTPUT: &str = "InvalidPluginOutput";

/// Rule 6: how a plugin error is classified (what the `Ready` condition
/// says, and whether a retry can help).
pub fn classify_error(e: &PluginError) -> PlanFailure {
    let (class, reason, message) = match e {
        PluginError::Permanent { reason, message } => (FailureClass::Permanent, reason, message),
        PluginError::Transient { reason, message } => (FailureClass::Transient, reason, message),
        PluginError::Fault {
            kind: FaultKind::InvalidOutput,
            message,
        } => {
            return PlanFailure {
                class: FailureClass::InvalidOutput,
                reason: INVALID_OUTPUT.into(),
                message: message.clone(),
            };
        }
        PluginError::Fault { kind, message } => {
            return PlanFailure {
                class: FailureClass::Fault,
                reason: kind.reason().into(),
                message: message.clone(),
            };
        }
    };
    PlanFailure {
        class,
        reason: reason.clone(),
        message: message.clone(),
    }
}

/// One event the host records on the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    /// Normal or Warning.
    pub kind: EventKind,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// When the parent is looked at again (the executor adds jitter to the resync).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Not again (finalized and released).
    Never,
    /// At the resync period.
    Resync,
    /// After this long, or at the resync period if that comes first.
    Within(Duration),
    /// With the queue's per-key backoff.
    Backoff,
}

/// What the plugin's failure means for this parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    /// The classified failure.
    pub failure: PlanFailure,
    /// `Ready=False` with the failure, the plugin's other conditions kept.
    pub status: StatusUpdate,
    /// A Warning event with the failure.
    pub event: PlannedEvent,
    /// Remember the failure for this generation (no plugin call until it
    /// changes or the resync passes).
    pub remember: bool,
    /// Resync (permanent) or backoff (transient, fault).
    pub requeue: Requeue,
    /// How the reconcile counts in the metrics.
    pub result: ReconcileResult,
}

/// One desired child and what to do with it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildStep {
    /// Index of its kind in the target.
    pub kind: usize,
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// The object the host applies (owner reference and hash added).
    pub object: Value,
    /// The decision ([`apply::decide`], per the kind's update strategy).
    pub action: ChildAction,
    /// uid of the object there now, if any.
    pub existing_uid: Option<String>,
    /// How logs, events and conditions name it.
    pub label: String,
}

/// An owned child no longer desired: deleted (uid precondition).
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteStep {
    /// Index of its kind in the target.
    pub kind: usize,
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Its uid (delete precondition).
    pub uid: String,
    /// How logs, events and conditions name it.
    pub label: String,
}

/// A problem that keeps a parent from being Ready: a collision the decision
/// knows, or an API error a write met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// CamelCase reason for `Ready=False`.
    pub reason: &'static str,
    /// Detail (names the child).
    pub message: String,
}

/// The plugin answered with valid output.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Desired children, in the plugin's order.
    pub children: Vec<ChildStep>,
    /// Owned children no longer desired.
    pub deletes: Vec<DeleteStep>,
    /// The plugin's conditions.
    pub conditions: Vec<DesiredCondition>,
    /// The plugin's status object.
    pub plugin_status: Option<Value>,
    /// The plugin's events.
    pub events: Vec<PlannedEvent>,
    /// The parent is being deleted.
    pub deleting: bool,
    /// The plugin says its cleanup is done.
    pub finalized: bool,
    /// The plugin's requested requeue.
    pub requeue_after: Option<Duration>,
    /// The rolling update of the rolling child kinds, if any
    /// ([`rolling::gate`]).
    pub rollout: Option<rolling::Rollout>,
}

/// Rule 12: after a status write met a conflict, whether the status computed
/// for `seen` still applies to the `fresh` read — the same object at the
/// same spec generation and deletion state — so the status write alone is
/// retried; anything else runs the pass again on the fresh state.
pub fn same_spec(seen: &DynamicObject, fresh: &DynamicObject) -> bool {
    let (a, b) = (&seen.metadata, &fresh.metadata);
    a.uid == b.uid
        && a.generation.is_some()
        && a.generation == b.generation
        && a.deletion_timestamp.is_some() == b.deletion_timestamp.is_some()
}

/// The result of [`decide`].
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The plugin failed, or its output was rejected whole (nothing applied).
    Failed(Failed),
    /// The plugin answered.
    Answered(Answer),
}

/// What follows once the writes of an [`Answer`] are done.
#[derive(Debug, Clone, PartialEq)]
pub struct Settle {
    /// The status to write (`None`: the finalizer comes off instead).
    pub status: Option<StatusUpdate>,
    /// Remove the finalizer (finalized, no problem left).
    pub remove_finalizer: bool,
    /// The parent is healthy (no problem).
    pub healthy: bool,
    /// When to look again (problems with a retry are the executor's call).
    pub requeue: Requeue,
}

/// The status of a parent whose plugin call failed: `Ready=False` with the
/// failure, the plugin's other conditions kept (rule 7).
pub fn failed_status(reason: &str, message: &str) -> StatusUpdate {
    StatusUpdate {
        conditions: vec![DesiredCondition::ready(false, reason, message)],
        replace_conditions: false,
        plugin_status: None,
    }
}

/// What stands for the plugin's answer for an object a decorator no longer
/// selects (the plugin is not called): no children, so its attachments are
/// deleted, and finalized.
pub fn detached() -> ReconcileResponse {
    ReconcileResponse {
        children: Vec::new(),
        conditions: Vec::new(),
        status: None,
        requeue_after_seconds: None,
        events: Vec::new(),
        finalized: true,
    }
}

/// Decides everything one reconcile does with the plugin's `result` for
/// `observed` at `now` (RFC 3339, for rolling-update deadlines); `src` tells
/// what object (any owner) sits at each name the plugin's children take.
pub fn decide(
    target: &Target,
    observed: &Observed,
    src: &dyn Source,
    result: &Result<ReconcileResponse, PluginError>,
    now: &str,
) -> Decision {
    let resp = match result {
        Ok(r) => r,
        Err(e) => return Decision::Failed(failed(classify_error(e))),
    };
    let ns = target.child_namespace(&observed.parent);
    let desired = match validate_response(resp, &target.declared, ns) {
        Ok(d) => d,
        Err(invalid) => {
            return Decision::Failed(failed(PlanFailure {
                class: FailureClass::InvalidOutput,
                reason: INVALID_OUTPUT.into(),
                message: invalid.0,
            }));
        }
    };
    let mut children = child_steps(target, observed, src, &desired);
    let rollout = rolling::gate(target, &mut children, src, now);
    Decision::Answered(Answer {
        children,
        rollout,
        deletes: delete_steps(target, observed, &desired),
        conditions: resp
            .conditions
            .iter()
            .map(DesiredCondition::from_plugin)
            .collect(),
        plugin_status: resp.status.clone(),
        events: resp.events.iter().map(planned_event).collect(),
        deleting: observed.parent.metadata.deletion_timestamp.is_some(),
        finalized: resp.finalized,
        requeue_after: resp
            .requeue_after_seconds
            .map(|s| Duration::from_secs(u64::from(s))),
    })
}

/// Rules 4–5: each desired child with the object the host applies and what
/// to do with it, judged against whatever object holds its name now.
fn child_steps(
    target: &Target,
    observed: &Observed,
    src: &dyn Source,
    desired: &[DesiredChild],
) -> Vec<ChildStep> {
    let parent = &observed.parent;
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let adopt = crate::adopt::AdoptPolicy::of(target.adoption, parent);
    let owner = OwnerRef {
        api_version: target.parent.ar.api_version.clone(),
        kind: target.parent.ar.kind.clone(),
        name: parent.metadata.name.clone().unwrap_or_default(),
        uid: uid.clone(),
    };
    desired
        .iter()
        .map(|d| {
            let kind = &target.children[d.kind_index];
            let key = ObjectKey {
                namespace: d.namespace.clone(),
                name: d.name.clone(),
            };
            // A child this parent owns was decoded for the request already;
            // only other names are looked up (decoded) again.
            let existing = observed
                .children
                .iter()
                .find(|(i, c)| {
                    *i == d.kind_index
                        && c.metadata.name.as_deref() == Some(d.name.as_str())
                        && c.metadata.namespace == d.namespace
                })
                .map(|(_, c)| Arc::clone(c))
                .or_else(|| src.child(d.kind_index, &key));
            let existing = existing.as_deref();
            let mut object = apply::desired_object(&d.object, &owner);
            if target.shard_labels {
                crate::shard_bucket::label_child(&mut object, &crate::cache::key_of(parent));
            }
            ChildStep {
                kind: d.kind_index,
                action: apply::decide_adopting(&object, existing, &uid, kind.method, Some(&adopt)),
                existing_uid: existing.and_then(|e| e.metadata.uid.clone()),
                label: apply::child_label(&kind.resolved.ar.kind, d.namespace.as_deref(), &d.name),
                namespace: d.namespace.clone(),
                name: d.name.clone(),
                object,
            }
        })
        .collect()
}

/// Rule 8: owned children the plugin no longer wants, unless already going.
fn delete_steps(target: &Target, observed: &Observed, desired: &[DesiredChild]) -> Vec<DeleteStep> {
    observed
        .children
        .iter()
        .filter(|(i, c)| {
            let name = c.metadata.name.as_deref().unwrap_or_default();
            let wanted = desired.iter().any(|d| {
                d.kind_index == *i && d.name == name && d.namespace == c.metadata.namespace
            });
            !wanted && c.metadata.deletion_timestamp.is_none()
        })
        .map(|(i, c)| {
            let name = c.metadata.name.clone().unwrap_or_default();
            DeleteStep {
                kind: *i,
                label: apply::child_label(
                    &target.children[*i].resolved.ar.kind,
                    c.metadata.namespace.as_deref(),
                    &name,
                ),
                namespace: c.metadata.namespace.clone(),
                name,
                uid: c.metadata.uid.clone().unwrap_or_default(),
            }
        })
        .collect()
}

fn planned_event(e: &wr_runtime::Event) -> PlannedEvent {
    PlannedEvent {
        kind: match e.type_ {
            EventType::Normal => EventKind::Normal,
            EventType::Warning => EventKind::Warning,
        },
        reason: e.reason.clone(),
        message: e.message.clone(),
    }
}

fn failed(failure: PlanFailure) -> Failed {
    let (remember, requeue, result) = match failure.class {
        FailureClass::Permanent => (true, Requeue::Resync, ReconcileResult::PermanentError),
        FailureClass::InvalidOutput => (true, Requeue::Resync, ReconcileResult::PluginFault),
        FailureClass::Transient => (false, Requeue::Backoff, ReconcileResult::TransientError),
        FailureClass::Fault => (false, Requeue::Backoff, ReconcileResult::PluginFault),
    };
    Failed {
        status: failed_status(&failure.reason, &failure.message),
        event: PlannedEvent {
            kind: EventKind::Warning,
            reason: failure.reason.clone(),
            message: failure.message.clone(),
        },
        failure,
        remember,
        requeue,
        result,
    }
}

impl ChildStep {
    /// The problem this step is known to have before any write: a name taken
    /// by an object this parent does not control (rule 4: never taken over).
    pub fn collision(&self) -> Option<Problem> {
        match &self.action {
            ChildAction::Collision(why) => Some(Problem {
                reason: "ChildConflict",
                message: apply::collision_message(&self.label, why),
            }),
            _ => None,
        }
    }
}

impl Answer {
    /// The problems known before any write (collisions in child order,
    /// then a stalled rollout).
    pub fn known_problems(&self) -> Vec<Problem> {
        self.children
            .iter()
            .filter_map(ChildStep::collision)
            .chain(self.stalled())
            .collect()
    }

    /// The stalled rollout, if any: a problem no write can fix.
    pub fn stalled(&self) -> Option<Problem> {
        self.rollout.as_ref().and_then(|r| r.stalled.clone())
    }

    /// Rules 7–8: the status, finalizer and requeue once the writes met
    /// `problems` (in child order, deletions last). `Ready` is True only
    /// without a problem; a finalized parent loses the finalizer only then.
    pub fn settle(&self, problems: &[Problem]) -> Settle {
        let ready = match problems.first() {
            None => DesiredCondition::ready(true, "Reconciled", ""),
            Some(p) => DesiredCondition::ready(false, p.reason, &p.message),
        };
        let remove_finalizer = self.deleting && self.finalized && problems.is_empty();
        let status = (!remove_finalizer).then(|| {
            let mut conditions = vec![ready];
            conditions.extend(self.rollout.as_ref().map(|r| r.condition.clone()));
            conditions.extend(self.conditions.iter().cloned());
            StatusUpdate {
                conditions,
                replace_conditions: true,
                plugin_status: self.plugin_status.clone(),
            }
        });
        let requeue = if remove_finalizer {
            Requeue::Never
        } else {
            let recheck = self.rollout.as_ref().and_then(|r| r.recheck);
            let first = match (self.requeue_after, recheck) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            first.map_or(Requeue::Resync, Requeue::Within)
        };
        Settle {
            status,
            remove_finalizer,
            healthy: problems.is_empty(),
            requeue,
        }
    }
}

/// Rule 9: the status the host would store, or `None` when the write would
/// change nothing — compared as the API server would store it, so fields the
/// parent CRD prunes neither count as changes nor make a write.
pub fn status_to_write(
    target: &Target,
    current: Option<&Value>,
    generation: Option<i64>,
    update: &StatusUpdate,
    now: &str,
) -> Option<Value> {
    let new = next_status(current, generation, update, target.status_mode, now)?;
    match target.schema() {
        Some(s) if s.stored(&new).as_ref() == current => None,
        _ => Some(new),
    }
}
