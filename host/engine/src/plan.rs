//! Preview of a candidate plugin over a controller's live parents
//! (`wasm-reconciler plan`): what a rollout would do, computed without writing.
//!
//! For each parent it asks the decision core ([`crate::decide`]) — the same
//! functions the reconcile path executes — for the admission (finalizer,
//! skip), the request (same parent, owned children, related objects,
//! `finalizing`, `config`, managedFields stripped), and, with the candidate's
//! answer, the decision (validation, each child's action, deletions, status,
//! requeue), and renders that decision instead of writing it. So the preview
//! and the rollout cannot disagree. Plugins are pure functions of the
//! request, so the result is exact for the state read.
//!
//! What a plan cannot know: API errors a write would meet, objects changing
//! between the plan and the rollout, and the host's in-memory hold on parents
//! after a permanent error (a plan always calls the plugin).

mod fields;
mod report;
mod snapshot;

use std::sync::Arc;

use futures::StreamExt;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::apply::ChildAction;
use crate::decide::{self, Decision, Source, Then};
use crate::plugin::ReconcilePlugin;
use crate::queue::ObjectKey;
use crate::status::StatusUpdate;
use crate::target::{StartError, Target};

pub use crate::decide::{FailureClass, FinalizerChange, PlanFailure};
pub use fields::{ConditionChange, ConditionView, FieldChange};
pub use report::{ActionTotals, ChildPlan, ParentPlan, ParentResult, Plan, PlannedAction, Summary};
pub use snapshot::Snapshot;

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
    target: &Target,
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

/// Plans one parent: the decision one reconcile would take
/// ([`crate::decide`]), rendered without the writes.
pub async fn plan_parent(
    target: &Target,
    snap: &Snapshot,
    parent: &DynamicObject,
    plugin: &dyn ReconcilePlugin,
    now: &str,
) -> ParentPlan {
    let mut out = empty_plan(parent, parent.metadata.deletion_timestamp.is_some());
    // A plan does not know the host's in-memory hold on failed parents.
    let admission = decide::admit(target, parent, None);
    out.finalizer = admission.finalizer;
    if let Then::Stop(why) = admission.then {
        out.result = ParentResult::Skipped;
        out.skipped = Some(why.into());
        return out;
    }
    let parent = decide::with_finalizer(target, parent, admission.finalizer);
    let mut observed = decide::observe(target, parent, snap);
    let result = call_plugin(target, &mut observed, plugin, now).await;
    let current = observed.parent.data.get("status");
    let generation = observed.parent.metadata.generation;
    match decide::decide(target, &observed, snap, &result, now) {
        Decision::Failed(f) => {
            if target.writes_status(&observed.parent) {
                status_effect(&mut out, target, current, generation, &f.status, now);
            }
            out.result = ParentResult::Error;
            out.error = Some(f.failure);
        }
        Decision::Answered(answer) => {
            out.requeue_after_seconds = result.as_ref().ok().and_then(|r| r.requeue_after_seconds);
            render_answer(&mut out, target, snap, &observed, &answer, now);
        }
    }
    out
}

/// The plugin's answer for an observed parent the controller selects (after
/// its `customize` answer narrowed the related objects, as the running
/// controller does, crate::related); a detached answer for one it does not.
async fn call_plugin(
    target: &Target,
    observed: &mut decide::Observed,
    plugin: &dyn ReconcilePlugin,
    now: &str,
) -> Result<wr_runtime::ReconcileResponse, crate::plugin::PluginError> {
    if !target.selects(&observed.parent) {
        return Ok(decide::detached());
    }
    let selection = crate::related::ask(target, &observed.parent, plugin).await?;
    selection.narrow(target, observed);
    let req = decide::request(target, observed, now);
    plugin.reconcile(&req, &target.limits).await
}

/// Renders an answered decision: every child's planned action, the
/// deletions, the settled finalizer and status (without API errors the only
/// problems are the known collisions), and whether anything would be written.
fn render_answer(
    out: &mut ParentPlan,
    target: &Target,
    snap: &Snapshot,
    observed: &decide::Observed,
    answer: &decide::Answer,
    now: &str,
) {
    for step in &answer.children {
        let existing = snap.child(
            step.kind,
            &ObjectKey {
                namespace: step.namespace.clone(),
                name: step.name.clone(),
            },
        );
        out.children
            .push(child_plan(target, step, existing.as_deref()));
    }
    for d in &answer.deletes {
        let r = &target.children[d.kind].resolved.ar;
        out.children.push(ChildPlan {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: d.namespace.clone(),
            name: d.name.clone(),
            action: PlannedAction::Delete,
            uid: Some(d.uid.clone()),
            changes: Vec::new(),
            message: None,
        });
    }
    let settle = answer.settle(&answer.known_problems());
    if settle.remove_finalizer {
        out.finalizer = Some(FinalizerChange::Remove);
    }
    if let Some(update) = settle
        .status
        .as_ref()
        .filter(|_| target.writes_status(&observed.parent))
    {
        let current = observed.parent.data.get("status");
        let generation = observed.parent.metadata.generation;
        status_effect(out, target, current, generation, update, now);
    }
    let writes = out.status_write
        || out.finalizer.is_some()
        || out.children.iter().any(|c| {
            !matches!(
                c.action,
                PlannedAction::Unchanged | PlannedAction::Leave | PlannedAction::Queued
            )
        });
    out.result = if writes {
        ParentResult::Changes
    } else {
        ParentResult::Unchanged
    };
}

/// How a plan shows one decided child.
fn child_plan(
    target: &Target,
    step: &decide::ChildStep,
    existing: Option<&DynamicObject>,
) -> ChildPlan {
    let r = &target.children[step.kind].resolved.ar;
    let action = match &step.action {
        ChildAction::Create => PlannedAction::Create,
        ChildAction::Unchanged => PlannedAction::Unchanged,
        ChildAction::Wait => PlannedAction::Wait,
        ChildAction::Apply | ChildAction::Adopt | ChildAction::TakeOver => PlannedAction::Change,
        ChildAction::Recreate { .. } => PlannedAction::Recreate,
        ChildAction::Left => PlannedAction::Leave,
        ChildAction::Collision(_) => PlannedAction::Conflict,
        ChildAction::Queued(_) => PlannedAction::Queued,
    };
    let changes = match existing {
        Some(e)
            if matches!(
                action,
                PlannedAction::Change
                    | PlannedAction::Recreate
                    | PlannedAction::Leave
                    | PlannedAction::Queued
            ) =>
        {
            fields::child_changes(
                &step.object,
                &serde_json::to_value(e).unwrap_or(Value::Null),
                e.metadata.managed_fields.as_deref().unwrap_or(&[]),
                &target.field_manager,
            )
        }
        _ => Vec::new(),
    };
    ChildPlan {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: step.namespace.clone(),
        name: step.name.clone(),
        action,
        uid: step.existing_uid.clone(),
        changes,
        message: match &step.action {
            ChildAction::Queued(why) => Some(why.clone()),
            _ => step.collision().map(|p| p.message),
        },
    }
}

/// The status the reconcile would write ([`decide::status_to_write`]),
/// shown as the API server would store it.
fn status_effect(
    out: &mut ParentPlan,
    target: &Target,
    current: Option<&Value>,
    generation: Option<i64>,
    update: &StatusUpdate,
    now: &str,
) {
    let Some(new) = decide::status_to_write(target, current, generation, update, now) else {
        return;
    };
    let stored = match target.schema() {
        Some(s) => s.stored(&new),
        None => Some(new),
    };
    let empty = Value::Object(Default::default());
    let stored = stored.unwrap_or_else(|| empty.clone());
    out.status_write = true;
    out.conditions = fields::condition_changes(current, Some(&stored));
    out.status = fields::value_changes(current.unwrap_or(&empty), &stored, &["conditions"]);
}

#[cfg(test)]
mod tests;
