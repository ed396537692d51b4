//! The planner with a native plugin on a hand-built snapshot: every child
//! action, the condition diff, finalizer handling and failures.

use std::sync::Mutex;

use futures::future::BoxFuture;
use serde_json::json;
use wr_runtime::{CallLimits, FaultKind, ReconcileRequest, ReconcileResponse};

use crate::crd::UpdateMethod;
use crate::plugin::PluginError;

use super::*;
use crate::test_fixtures::{answer, cm, existing};

/// The shared controller, planning two parents at a time.
fn target(method: UpdateMethod, finalize: bool) -> Target {
    Target {
        concurrency: 2,
        ..crate::test_fixtures::target(method, finalize)
    }
}

struct Fixed(
    Mutex<Vec<ReconcileRequest>>,
    Result<ReconcileResponse, PluginError>,
);

impl ReconcilePlugin for Fixed {
    fn digest(&self) -> &str {
        "sha256:fixed"
    }
    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        _limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        self.0.lock().unwrap().push(req.clone());
        let r = self.1.clone();
        Box::pin(async move { r })
    }
}

fn parent() -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Site",
        "metadata": {"name": "s", "namespace": "ns", "uid": "p-uid", "generation": 2,
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {},
        "status": {"observedGeneration": 2, "conditions": [
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
             "observedGeneration": 2, "lastTransitionTime": "T0"}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn every_child_action_is_reported_with_the_request_a_reconcile_would_send() {
    let snap = Snapshot::from_objects(
        vec![parent()],
        vec![vec![
            existing(&cm("same", "1"), "p-uid", "u-same"),
            existing(&cm("edit", "1"), "p-uid", "u-edit"),
            existing(&cm("old", "1"), "p-uid", "u-old"),
            existing(&cm("taken", "1"), "other", "u-taken"),
        ]],
        vec![],
    );
    let p = Fixed(
        Mutex::default(),
        Ok(answer(vec![
            cm("same", "1"),
            cm("edit", "2"),
            cm("new", "1"),
            cm("taken", "1"),
        ])),
    );
    let out = plan_parent(
        &target(UpdateMethod::InPlace, false),
        &snap,
        &snap.parents()[0],
        &p,
        "T1",
    )
    .await;
    let actions: Vec<(&str, PlannedAction)> = out
        .children
        .iter()
        .map(|c| (c.name.as_str(), c.action))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("same", PlannedAction::Unchanged),
            ("edit", PlannedAction::Change),
            ("new", PlannedAction::Create),
            ("taken", PlannedAction::Conflict),
            ("old", PlannedAction::Delete),
        ]
    );
    assert_eq!(
        out.children[1].changes,
        vec![FieldChange {
            path: "/data/v".into(),
            old: Some(json!("1")),
            new: Some(json!("2"))
        }]
    );
    assert_eq!(out.children[4].uid.as_deref(), Some("u-old"));
    // Ready turns False: the conflict is reported as the engine reports it.
    assert_eq!(out.result, ParentResult::Changes);
    assert!(out.status_write);
    assert_eq!(out.conditions.len(), 1);
    let ready = out.conditions[0].new.as_ref().unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ChildConflict")
    );
    assert_eq!(
        ready.message,
        "ConfigMap ns/taken not applied: it is controlled by another owner"
    );
    // The request: owned children only (not the other owner's), no managedFields, config.
    let reqs = p.0.lock().unwrap();
    let names: Vec<&str> = reqs[0]
        .children
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, vec!["edit", "old", "same"]);
    assert!(reqs[0].parent["metadata"].get("managedFields").is_none());
    assert_eq!(reqs[0].config, Some(json!({"k": 1})));
    assert_eq!((reqs[0].now.as_str(), reqs[0].finalizing), ("T1", false));
}

#[tokio::test]
async fn strategies_and_a_converged_parent() {
    let snap = Snapshot::from_objects(
        vec![parent()],
        vec![vec![existing(&cm("a", "1"), "p-uid", "u-a")]],
        vec![],
    );
    for (method, want) in [
        (UpdateMethod::Recreate, PlannedAction::Recreate),
        (UpdateMethod::OnDelete, PlannedAction::Leave),
    ] {
        let p = Fixed(Mutex::default(), Ok(answer(vec![cm("a", "2")])));
        let out = plan_parent(&target(method, false), &snap, &snap.parents()[0], &p, "T").await;
        assert_eq!(out.children[0].action, want);
        assert_eq!(out.children[0].changes.len(), 1);
    }
    // OnDelete leaving a child is no write; the status is already right.
    let p = Fixed(Mutex::default(), Ok(answer(vec![cm("a", "2")])));
    let out = plan_parent(
        &target(UpdateMethod::OnDelete, false),
        &snap,
        &snap.parents()[0],
        &p,
        "T",
    )
    .await;
    assert_eq!(out.result, ParentResult::Unchanged);
    assert!(!out.status_write && out.conditions.is_empty());
}

#[tokio::test]
async fn finalizer_is_added_before_the_plugin_sees_the_parent_and_failures_are_reported() {
    let snap = Snapshot::from_objects(vec![parent()], vec![vec![]], vec![]);
    let p = Fixed(
        Mutex::default(),
        Err(PluginError::Fault {
            kind: FaultKind::Trap,
            message: "boom".into(),
        }),
    );
    let t = target(UpdateMethod::InPlace, true);
    let out = plan_parent(&t, &snap, &snap.parents()[0], &p, "T").await;
    assert_eq!(out.finalizer, Some(FinalizerChange::Add));
    assert_eq!(
        p.0.lock().unwrap()[0].parent["metadata"]["finalizers"],
        json!([t.finalizer])
    );
    assert_eq!(out.result, ParentResult::Error);
    assert_eq!(
        out.error.as_ref().map(|e| e.class),
        Some(FailureClass::Fault)
    );
    assert_eq!(out.conditions[0].new.as_ref().unwrap().reason, "PluginTrap");

    let bad = Fixed(
        Mutex::default(),
        Ok(answer(vec![json!({"kind": "Secret"})])),
    );
    let out = plan_parent(&t, &snap, &snap.parents()[0], &bad, "T").await;
    assert_eq!(
        out.error.as_ref().map(|e| e.class),
        Some(FailureClass::InvalidOutput)
    );
    let plan = Plan::new("c", "d", "T", vec![out]);
    assert_eq!((plan.summary.errors, plan.summary.parents), (1, 1));
}

/// `plan` runs the same rolling gate as a reconcile (rule 5a): the first
/// changed child is changed, the next is shown queued with why, and the
/// parent's `RollingUpdate` condition appears in the condition diff.
#[tokio::test]
async fn a_rolling_update_is_planned_one_child_at_a_time() {
    let snap = Snapshot::from_objects(
        vec![parent()],
        vec![vec![
            existing(&cm("a", "1"), "p-uid", "u-a"),
            existing(&cm("b", "1"), "p-uid", "u-b"),
        ]],
        vec![],
    );
    let p = Fixed(
        Mutex::default(),
        Ok(answer(vec![cm("a", "2"), cm("b", "2")])),
    );
    let t = target(UpdateMethod::RollingInPlace, false);
    let out = plan_parent(&t, &snap, &snap.parents()[0], &p, "2026-01-01T00:00:00Z").await;
    let actions: Vec<_> = out.children.iter().map(|c| c.action).collect();
    assert_eq!(actions, [PlannedAction::Change, PlannedAction::Queued]);
    assert_eq!(
        out.children[1].message.as_deref(),
        Some("rolling update: waiting for the children being updated")
    );
    assert_eq!(out.children[1].changes.len(), 1, "what would change later");
    let text = serde_json::to_string(&out.conditions).unwrap();
    assert!(
        text.contains("RollingUpdate") && text.contains("0/2 updated, updating ConfigMap ns/a"),
        "{text}"
    );
}
