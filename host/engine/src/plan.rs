//! Preview of a candidate plugin over a controller's live parents
//! (`wasm-reconciler plan`): what a rollout would do, computed without writing.
//!
//! For each parent it builds the `ReconcileRequest` a reconcile would build
//! (same parent, children owned through the controller owner reference,
//! related objects, `finalizing`, `config`, managedFields stripped), calls the
//! candidate, validates the answer with [`validate_response`], and decides each
//! child with [`apply::decide`] — the function the reconcile path acts on — so
//! the preview and the rollout cannot disagree. Status is computed with
//! [`next_status`], the function the reconcile path writes with. Plugins are
//! pure functions of the request, so the result is exact for the state read.
//!
//! What a plan cannot know: API errors a write would meet, objects changing
//! between the plan and the rollout, and the host's in-memory hold on parents
//! after a permanent error (a plan always calls the plugin).

mod fields;
mod report;
mod snapshot;
mod target;

use std::sync::Arc;

use futures::StreamExt;
use kube::api::DynamicObject;
use serde_json::Value;
use wr_runtime::{ReconcileRequest, RelatedObjects};

use crate::apply::{self, ChildAction, OwnerRef};
use crate::controller::StartError;
use crate::crd::RelatedScope;
use crate::finalize;
use crate::plugin::{PluginError, ReconcilePlugin};
use crate::queue::ObjectKey;
use crate::status::{DesiredCondition, StatusUpdate, next_status};
use crate::status_schema::StatusSchema;
use crate::validate::validate_response;

pub use fields::{ConditionChange, ConditionView, FieldChange};
pub use report::{
    ActionTotals, ChildPlan, FailureClass, FinalizerChange, ParentPlan, ParentResult, Plan,
    PlanFailure, PlannedAction, Summary,
};
pub use snapshot::Snapshot;
pub use target::{PlanTarget, TargetChild, TargetRelated, call_limits, related_matches};

/// `apiVersion` of the JSON plan document.
pub const PLAN_API_VERSION: &str = "wasm-reconciler.dev/plan/v1";

/// Why a plan could not be computed at all.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A resource the controller names could not be resolved.
    #[error(transparent)]
    Resolve(#[from] StartError),
    /// Reading from the API server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
/// Plans every parent in `snap` (or those in `only`), `target.concurrency` at a time.
pub async fn plan(
    target: &PlanTarget,
    snap: &Snapshot,
    plugin: Arc<dyn ReconcilePlugin>,
    now: &str,
    only: Option<&[ObjectKey]>,
) -> Plan {
    let parents: Vec<&DynamicObject> = snap
        .parents()
        .iter()
        .filter(|p| only.is_none_or(|keys| keys.contains(&snapshot::key_of(p))))
        .collect();
    let plugin_ref = plugin.as_ref();
    let planned: Vec<ParentPlan> = futures::stream::iter(parents)
        .map(|p| plan_parent(target, snap, p, plugin_ref, now))
        .buffered(target.concurrency)
        .collect()
        .await;
    Plan::new(&target.name, plugin.digest(), now, planned)
}

fn to_json(o: &DynamicObject) -> Value {
    let mut o = o.clone();
    o.metadata.managed_fields = None;
    serde_json::to_value(&o).unwrap_or(Value::Null)
}

fn empty_plan(parent: &DynamicObject, finalizing: bool) -> ParentPlan {
    ParentPlan {
        namespace: parent.metadata.namespace.clone(),
        name: parent.metadata.name.clone().unwrap_or_default(),
        uid: parent.metadata.uid.clone().unwrap_or_default(),
        result: ParentResult::Unchanged,
        finalizing,
        finalizer: None,
        children: Vec::new(),
        conditions: Vec::new(),
        status: Vec::new(),
        status_write: false,
        error: None,
        skipped: None,
        requeue_after_seconds: None,
    }
}

/// Plans one parent: the same steps as one reconcile, without the writes.
pub async fn plan_parent(
    target: &PlanTarget,
    snap: &Snapshot,
    parent: &DynamicObject,
    plugin: &dyn ReconcilePlugin,
    now: &str,
) -> ParentPlan {
    let deleting = parent.metadata.deletion_timestamp.is_some();
    let has_fin = finalize::has_finalizer(parent, &target.finalizer);
    let mut out = empty_plan(parent, deleting);
    let mut parent = parent.clone();
    if deleting && !has_fin {
        out.result = ParentResult::Skipped;
        out.skipped = Some("being deleted without this controller's finalizer".into());
        return out;
    }
    if deleting && !target.finalize {
        out.result = ParentResult::Skipped;
        out.finalizer = Some(FinalizerChange::Remove);
        out.skipped = Some("being deleted and finalize is off: finalizer released".into());
        return out;
    }
    if !deleting && target.finalize && !has_fin {
        out.finalizer = Some(FinalizerChange::Add);
        parent
            .metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(target.finalizer.clone());
    } else if !target.finalize && has_fin {
        out.finalizer = Some(FinalizerChange::Remove);
        if let Some(f) = parent.metadata.finalizers.as_mut() {
            f.retain(|x| *x != target.finalizer);
        }
    }
    let uid = out.uid.clone();
    let parent_ns = parent
        .metadata
        .namespace
        .clone()
        .filter(|_| target.parent.namespaced);

    // Observed children and related objects, selected as the reconcile does.
    let mut observed: Vec<(usize, &DynamicObject)> = Vec::new();
    for (i, kind) in target.children.iter().enumerate() {
        for c in snap.owned_by(i, &uid) {
            if !kind.resolved.namespaced
                || !target.parent.namespaced
                || c.metadata.namespace == parent.metadata.namespace
            {
                observed.push((i, c));
            }
        }
    }
    let mut related = Vec::new();
    for (i, r) in target.related.iter().enumerate() {
        let ns = match (r.rule.scope, target.parent.namespaced) {
            (RelatedScope::Namespace, true) => parent.metadata.namespace.as_deref(),
            _ => None,
        };
        let group = RelatedObjects::group(&mut related, &r.key);
        for o in snap.related_in(i, ns) {
            if related_matches(&r.rule, r.selector.as_ref(), o) {
                group.push(to_json(o));
            }
        }
    }
    let req = ReconcileRequest {
        parent: to_json(&parent),
        children: observed.iter().map(|(_, c)| to_json(c)).collect(),
        related,
        finalizing: deleting,
        config: target.config.clone(),
        now: now.to_string(),
    };
    let current_status = parent.data.get("status");
    let failed = |out: &mut ParentPlan, f: PlanFailure| {
        // The engine writes Ready=False and keeps the plugin's other conditions.
        let update = StatusUpdate {
            conditions: vec![DesiredCondition::ready(false, &f.reason, &f.message)],
            replace_conditions: false,
            plugin_status: None,
        };
        status_effect(
            out,
            target.status_schema.as_ref(),
            current_status,
            parent.metadata.generation,
            &update,
            now,
        );
        out.result = ParentResult::Error;
        out.error = Some(f);
    };

    let resp = match plugin.reconcile(&req, &target.limits).await {
        Ok(r) => r,
        Err(e) => {
            failed(&mut out, failure_of(e));
            return out;
        }
    };
    let desired = match validate_response(&resp, &target.declared, parent_ns.as_deref()) {
        Ok(d) => d,
        Err(invalid) => {
            failed(
                &mut out,
                PlanFailure {
                    class: FailureClass::InvalidOutput,
                    reason: "InvalidPluginOutput".into(),
                    message: invalid.0,
                },
            );
            return out;
        }
    };
    out.requeue_after_seconds = resp.requeue_after_seconds;

    let owner = OwnerRef {
        api_version: target.parent.ar.api_version.clone(),
        kind: target.parent.ar.kind.clone(),
        name: out.name.clone(),
        uid: uid.clone(),
    };
    let mut conflict: Option<String> = None;
    for d in &desired {
        let kind = &target.children[d.kind_index];
        let obj = apply::desired_object(&d.object, &owner);
        let key = ObjectKey {
            namespace: d.namespace.clone(),
            name: d.name.clone(),
        };
        let existing = snap.child(d.kind_index, &key);
        let action = apply::decide(&obj, existing, &uid, kind.method);
        let mut child = ChildPlan {
            api_version: kind.resolved.ar.api_version.clone(),
            kind: kind.resolved.ar.kind.clone(),
            namespace: d.namespace.clone(),
            name: d.name.clone(),
            action: PlannedAction::Unchanged,
            uid: existing.and_then(|e| e.metadata.uid.clone()),
            changes: Vec::new(),
            message: None,
        };
        let explain = |e: Option<&DynamicObject>| match e {
            Some(e) => fields::child_changes(
                &obj,
                &serde_json::to_value(e).unwrap_or(Value::Null),
                e.metadata.managed_fields.as_deref().unwrap_or(&[]),
                &target.field_manager,
            ),
            None => Vec::new(),
        };
        child.action = match action {
            ChildAction::Create => PlannedAction::Create,
            ChildAction::Unchanged => PlannedAction::Unchanged,
            ChildAction::Wait => PlannedAction::Wait,
            ChildAction::Apply => PlannedAction::Change,
            ChildAction::Recreate { .. } => PlannedAction::Recreate,
            ChildAction::Left => PlannedAction::Leave,
            ChildAction::Collision(why) => {
                let label =
                    apply::child_label(&kind.resolved.ar.kind, d.namespace.as_deref(), &d.name);
                let message = apply::collision_message(&label, &why);
                conflict.get_or_insert_with(|| message.clone());
                child.message = Some(message);
                PlannedAction::Conflict
            }
        };
        if matches!(
            child.action,
            PlannedAction::Change | PlannedAction::Recreate | PlannedAction::Leave
        ) {
            child.changes = explain(existing);
        }
        out.children.push(child);
    }
    for (i, c) in &observed {
        let name = c.metadata.name.clone().unwrap_or_default();
        let wanted = desired
            .iter()
            .any(|d| d.kind_index == *i && d.name == name && d.namespace == c.metadata.namespace);
        if wanted || c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let r = &target.children[*i].resolved.ar;
        out.children.push(ChildPlan {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: c.metadata.namespace.clone(),
            name,
            action: PlannedAction::Delete,
            uid: c.metadata.uid.clone(),
            changes: Vec::new(),
            message: None,
        });
    }

    let ready = match &conflict {
        None => DesiredCondition::ready(true, "Reconciled", ""),
        Some(m) => DesiredCondition::ready(false, "ChildConflict", m),
    };
    let mut conditions = vec![ready];
    conditions.extend(resp.conditions.iter().map(DesiredCondition::from_plugin));
    if deleting && resp.finalized && conflict.is_none() {
        out.finalizer = Some(FinalizerChange::Remove);
    } else {
        let update = StatusUpdate {
            conditions,
            replace_conditions: true,
            plugin_status: resp.status.clone(),
        };
        status_effect(
            &mut out,
            target.status_schema.as_ref(),
            current_status,
            parent.metadata.generation,
            &update,
            now,
        );
    }
    let writes = out.status_write
        || out.finalizer.is_some()
        || out
            .children
            .iter()
            .any(|c| !matches!(c.action, PlannedAction::Unchanged | PlannedAction::Leave));
    out.result = if writes {
        ParentResult::Changes
    } else {
        ParentResult::Unchanged
    };
    out
}

/// The status the reconcile would write, compared as the API server would
/// store it: fields the parent CRD prunes neither count as changes nor make a
/// write (the reconcile path skips such a write too).
fn status_effect(
    out: &mut ParentPlan,
    schema: Option<&StatusSchema>,
    current: Option<&Value>,
    generation: Option<i64>,
    update: &StatusUpdate,
    now: &str,
) {
    let Some(new) = next_status(current, generation, update, now) else {
        return;
    };
    let stored = match schema {
        Some(s) => s.stored(&new),
        None => Some(new),
    };
    if stored.as_ref() == current {
        return;
    }
    let empty = Value::Object(Default::default());
    let stored = stored.unwrap_or_else(|| empty.clone());
    out.status_write = true;
    out.conditions = fields::condition_changes(current, Some(&stored));
    out.status = fields::value_changes(current.unwrap_or(&empty), &stored, &["conditions"]);
}

fn failure_of(e: PluginError) -> PlanFailure {
    match e {
        PluginError::Permanent { reason, message } => PlanFailure {
            class: if reason == "InvalidPluginOutput" {
                FailureClass::InvalidOutput
            } else {
                FailureClass::Permanent
            },
            reason,
            message,
        },
        PluginError::Transient { reason, message } => PlanFailure {
            class: FailureClass::Transient,
            reason,
            message,
        },
        PluginError::Fault { kind, message } => PlanFailure {
            class: FailureClass::Fault,
            reason: kind,
            message,
        },
    }
}

#[cfg(test)]
mod tests;
