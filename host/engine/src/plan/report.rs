//! What a plan reports: per parent, per child, and the totals — the `-o json`
//! document of `wasm-reconciler plan` (schema `wasm-reconciler.dev/plan/v1`,
//! documented in docs/hot-reload.md; fields are only ever added).

use serde::{Deserialize, Serialize};

use super::fields::{ConditionChange, FieldChange};
use super::{FinalizerChange, PLAN_API_VERSION, PlanFailure};

/// What would happen to one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PlannedAction {
    /// Does not exist: created.
    Create,
    /// Exists and differs: updated in place (server-side apply).
    Change,
    /// Exists and differs, Recreate strategy: deleted, then created anew.
    Recreate,
    /// Exists and differs, OnDelete strategy: left as it is.
    Leave,
    /// No longer desired: deleted.
    Delete,
    /// Already as desired: no write.
    Unchanged,
    /// Being deleted: the host waits for it to go, then creates it.
    Wait,
    /// The name is taken by an object this parent does not control: not applied.
    Conflict,
    /// Exists and differs, rolling strategy: waits for the children updated
    /// before it to pass their status checks.
    Queued,
}

/// One child of a parent plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildPlan {
    /// apiVersion.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (absent for cluster-scoped children).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// What would happen.
    pub action: PlannedAction,
    /// uid of the existing object, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// For change/recreate/leave: the fields that differ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// For conflict: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The overall result for one parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ParentResult {
    /// No write at all.
    Unchanged,
    /// At least one child action, status write or finalizer change.
    Changes,
    /// The plugin failed or its output was rejected.
    Error,
    /// Not reconciled by the plugin (being deleted without the host's finalizer,
    /// or finalization disabled).
    Skipped,
}

/// The plan for one parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentPlan {
    /// Namespace (absent for cluster-scoped parents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// uid.
    pub uid: String,
    /// Overall result.
    pub result: ParentResult,
    /// The parent is being deleted (the plugin is asked to finalize).
    pub finalizing: bool,
    /// Finalizer change, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<FinalizerChange>,
    /// Every desired child and every child that would be deleted, in the
    /// plugin's order, deletions last.
    pub children: Vec<ChildPlan>,
    /// Conditions whose status/reason/message would change.
    pub conditions: Vec<ConditionChange>,
    /// Other `.status` fields that would change (`conditions` excluded).
    pub status: Vec<FieldChange>,
    /// Whether the host would write the parent's status.
    pub status_write: bool,
    /// The plugin's failure, for `result: error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<PlanFailure>,
    /// Why the plugin is not called, for `result: skipped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The plugin's requeue hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<u32>,
}

/// Counts of child actions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionTotals {
    /// Children created.
    pub create: usize,
    /// Children changed in place.
    pub change: usize,
    /// Children recreated.
    pub recreate: usize,
    /// Children left (OnDelete).
    pub leave: usize,
    /// Children deleted.
    pub delete: usize,
    /// Children already as desired.
    pub unchanged: usize,
    /// Children being deleted, waited for.
    pub wait: usize,
    /// Children not applied (name taken).
    pub conflict: usize,
    /// Children held back by a rolling update.
    #[serde(default)]
    pub queued: usize,
}

impl ActionTotals {
    fn add(&mut self, a: PlannedAction) {
        let n = match a {
            PlannedAction::Create => &mut self.create,
            PlannedAction::Change => &mut self.change,
            PlannedAction::Recreate => &mut self.recreate,
            PlannedAction::Leave => &mut self.leave,
            PlannedAction::Delete => &mut self.delete,
            PlannedAction::Unchanged => &mut self.unchanged,
            PlannedAction::Wait => &mut self.wait,
            PlannedAction::Conflict => &mut self.conflict,
            PlannedAction::Queued => &mut self.queued,
        };
        *n += 1;
    }
}

/// Totals over all parents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Parents planned.
    pub parents: usize,
    /// Parents with no write at all.
    pub unchanged: usize,
    /// Parents with at least one write.
    pub with_changes: usize,
    /// Parents whose plugin call failed or whose output was rejected.
    pub errors: usize,
    /// Parents the plugin is not called for.
    pub skipped: usize,
    /// Child actions.
    pub children: ActionTotals,
    /// Condition changes.
    pub condition_changes: usize,
    /// Parents whose status would be written.
    pub status_writes: usize,
    /// Finalizers added.
    pub finalizers_added: usize,
    /// Finalizers removed.
    pub finalizers_removed: usize,
}

/// A whole plan (the `-o json` document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// [`PLAN_API_VERSION`].
    pub api_version: String,
    /// WasmController name.
    pub controller: String,
    /// Digest of the candidate plugin.
    pub plugin_digest: String,
    /// The `now` every request carried.
    pub now: String,
    /// One entry per parent, ordered by namespace and name.
    pub parents: Vec<ParentPlan>,
    /// Totals.
    pub summary: Summary,
}

impl Plan {
    /// Sums up `parents`.
    pub fn new(controller: &str, digest: &str, now: &str, parents: Vec<ParentPlan>) -> Plan {
        let mut s = Summary {
            parents: parents.len(),
            ..Summary::default()
        };
        for p in &parents {
            match p.result {
                ParentResult::Unchanged => s.unchanged += 1,
                ParentResult::Changes => s.with_changes += 1,
                ParentResult::Error => s.errors += 1,
                ParentResult::Skipped => s.skipped += 1,
            }
            for c in &p.children {
                s.children.add(c.action);
            }
            s.condition_changes += p.conditions.len();
            s.status_writes += usize::from(p.status_write);
            match p.finalizer {
                Some(FinalizerChange::Add) => s.finalizers_added += 1,
                Some(FinalizerChange::Remove) => s.finalizers_removed += 1,
                None => {}
            }
        }
        Plan {
            api_version: PLAN_API_VERSION.to_string(),
            controller: controller.to_string(),
            plugin_digest: digest.to_string(),
            now: now.to_string(),
            parents,
            summary: s,
        }
    }
}
