//! One table-driven test per rule of `docs/reconciliation-rules.md`, on the
//! decision core alone: no API server, no plugin, no async. The rule number
//! and name are in each test's name.

use std::time::Duration;

use serde_json::{Value, json};
use wr_runtime::{Condition, ConditionStatus, Event, EventType, FaultKind, ReconcileResponse};

use super::*;
use crate::crd::{RelatedResource, UpdateMethod};
use crate::plan::Snapshot;
use crate::status_schema::{SchemaCheck, StatusSchema};
use crate::target::TargetRelated;
use crate::test_fixtures::{answer, cm, existing, resolved, target};

const UID: &str = "p-uid";
const NOW: &str = "2026-01-01T00:10:00Z";

/// A parent at generation 2; `deleting`, and the host's finalizer when `fin`.
fn parent(deleting: bool, fin: bool) -> DynamicObject {
    let mut v = json!({
        "apiVersion": "example.com/v1", "kind": "Site",
        "metadata": {"name": "s", "namespace": "ns", "uid": UID, "generation": 2,
                     "resourceVersion": "5", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"v": "1"},
    });
    if fin {
        v["metadata"]["finalizers"] = json!([finalize::finalizer_name("c")]);
    }
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    serde_json::from_value(v).unwrap()
}

fn snap(children: Vec<DynamicObject>) -> Snapshot {
    Snapshot::from_objects(vec![], vec![children], vec![])
}

/// Observes `p` in `src` and decides with `result`.
fn run(
    t: &Target,
    p: DynamicObject,
    src: &Snapshot,
    result: Result<ReconcileResponse, PluginError>,
) -> Decision {
    let observed = observe(t, p, src);
    decide(t, &observed, src, &result, NOW)
}

fn answered(d: Decision) -> Answer {
    match d {
        Decision::Answered(a) => a,
        Decision::Failed(f) => panic!("expected an answer, got {f:?}"),
    }
}

fn ready_of(s: &Settle) -> (&'static str, String) {
    let ready = &s.status.as_ref().expect("a status")[0];
    (ready.status, ready.reason.clone())
}

impl std::ops::Index<usize> for StatusUpdate {
    type Output = DesiredCondition;
    fn index(&self, i: usize) -> &DesiredCondition {
        &self.conditions[i]
    }
}

#[test]
fn rule01_deletion_is_checked_first() {
    // (deleting, has finalizer, finalize on) → (finalizer change, stops)
    let cases = [
        (true, false, true, None, true),
        (true, false, false, None, true),
        (true, true, false, Some(FinalizerChange::Remove), true),
        (true, true, true, None, false),
    ];
    for (deleting, fin, on, want_fin, want_stop) in cases {
        let a = admit(
            &target(UpdateMethod::InPlace, on),
            &parent(deleting, fin),
            None,
        );
        assert_eq!(a.finalizer, want_fin, "{deleting} {fin} {on}");
        assert_eq!(
            matches!(a.then, Then::Stop(_)),
            want_stop,
            "{deleting} {fin} {on}"
        );
    }
}

#[test]
fn rule02_finalizer_goes_on_before_anything_is_created_and_off_only_when_done() {
    let t = target(UpdateMethod::InPlace, true);
    // Added before the plugin is called; the plugin sees it.
    let a = admit(&t, &parent(false, false), None);
    assert_eq!(
        (a.finalizer, &a.then),
        (Some(FinalizerChange::Add), &Then::Call)
    );
    let p = with_finalizer(&t, &parent(false, false), a.finalizer);
    let req = request(&t, &observe(&t, p, &snap(vec![])), "T");
    assert_eq!(req.parent["metadata"]["finalizers"], json!([t.finalizer]));
    // Already there: nothing to do. Finalize turned off: the stale one goes.
    assert_eq!(admit(&t, &parent(false, true), None).finalizer, None);
    let off = target(UpdateMethod::InPlace, false);
    let a = admit(&off, &parent(false, true), None);
    assert_eq!(
        (a.finalizer, a.then),
        (Some(FinalizerChange::Remove), Then::Call)
    );
    // Removed only when the plugin finalized and no child problem is left.
    let problem = Problem {
        reason: "ApplyFailed",
        message: "x".into(),
    };
    for (finalized, problems, remove) in [
        (true, vec![], true),
        (true, vec![problem.clone()], false),
        (false, vec![], false),
    ] {
        let mut r = answer(vec![]);
        r.finalized = finalized;
        let a = answered(run(&t, parent(true, true), &snap(vec![]), Ok(r)));
        let s = a.settle(&problems);
        assert_eq!(s.remove_finalizer, remove, "{finalized} {problems:?}");
        assert_eq!(s.status.is_none(), remove, "no status write on the way out");
        assert_eq!(s.requeue == Requeue::Never, remove);
    }
}

#[test]
fn rule03_the_request_is_the_current_level_not_an_event() {
    let mut t = target(UpdateMethod::InPlace, false);
    t.related = vec![TargetRelated {
        rule: RelatedResource {
            api_version: "v1".into(),
            resource: None,
            kind: Some("Secret".into()),
            names: Some(vec!["wanted".into()]),
            selector: None,
            scope: RelatedScope::Namespace,
            name: None,
        },
        key: "secrets".into(),
        selector: None,
        resolved: resolved("v1", "Secret", "secrets"),
    }];
    let secret = |ns: &str, name: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns}}))
        .unwrap()
    };
    let mut elsewhere = existing(&cm("far", "1"), UID, "u-far");
    elsewhere.metadata.namespace = Some("other".into());
    let src = Snapshot::from_objects(
        vec![],
        vec![vec![
            existing(&cm("mine", "1"), UID, "u-mine"),
            existing(&cm("theirs", "1"), "other-uid", "u-theirs"),
            elsewhere,
        ]],
        vec![vec![
            secret("ns", "wanted"),
            secret("ns", "unwanted"),
            secret("other", "wanted"),
        ]],
    );
    let req = request(
        &t,
        &observe(&t, parent(false, false), &src),
        "2026-01-01T00:00:00Z",
    );
    let names = |l: &[Value]| -> Vec<String> {
        l.iter()
            .map(|o| format!("{}/{}", o["metadata"]["namespace"], o["metadata"]["name"]))
            .collect()
    };
    // Owned through the controller reference, in the parent's namespace only.
    assert_eq!(names(&req.children), vec![r#""ns"/"mine""#]);
    // Related: the rule's names, in the parent's namespace.
    // grouped under the rule's key (its plural, as it has no name).
    assert_eq!(req.related.len(), 1);
    assert_eq!(req.related[0].name, "secrets");
    assert_eq!(names(&req.related[0].objects), vec![r#""ns"/"wanted""#]);
    assert!(req.parent["metadata"].get("managedFields").is_none());
    assert_eq!(
        (req.finalizing, req.config.clone(), req.now.as_str()),
        (false, Some(json!({"k": 1})), "2026-01-01T00:00:00Z")
    );
}

#[test]
fn rule04_objects_this_parent_does_not_control_are_never_taken_over() {
    let t = target(UpdateMethod::InPlace, false);
    let mut orphan = existing(&cm("orphan", "1"), UID, "u-o");
    orphan.metadata.owner_references = None;
    let src = snap(vec![
        existing(&cm("taken", "1"), "other-uid", "u-t"),
        orphan,
    ]);
    let a = answered(run(
        &t,
        parent(false, false),
        &src,
        Ok(answer(vec![cm("taken", "1"), cm("orphan", "1")])),
    ));
    for step in &a.children {
        assert!(
            matches!(step.action, ChildAction::Collision(_)),
            "{}: {:?}",
            step.name,
            step.action
        );
    }
    // Known before any write; Ready says so, and nothing of theirs is deleted.
    let problems = a.known_problems();
    assert_eq!(problems.len(), 2);
    assert_eq!(
        problems[0].message,
        "ConfigMap ns/taken not applied: it is controlled by another owner"
    );
    assert!(a.deletes.is_empty());
    let s = a.settle(&problems);
    assert_eq!(ready_of(&s), ("False", "ChildConflict".into()));
    assert!(!s.healthy);
}

/// Rule 4's opt-in exception: with `spec.adoption: Orphans` an orphan is
/// adopted; another controller's object still is not; a child of this
/// parent still carrying Metacontroller's annotation is taken over.
#[test]
fn rule04_adoption_takes_orphans_only_when_asked() {
    let mut t = target(UpdateMethod::InPlace, false);
    t.adoption = crate::crd::Adoption::Orphans;
    let mut orphan = existing(&cm("orphan", "1"), UID, "u-o");
    orphan.metadata.owner_references = None;
    let mut leftover = existing(&cm("mc", "1"), UID, "u-m");
    leftover
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(crate::adopt::METACONTROLLER_ANNOTATION.into(), "{}".into());
    let src = snap(vec![
        existing(&cm("taken", "1"), "other-uid", "u-t"),
        orphan,
        leftover,
    ]);
    let a = answered(run(
        &t,
        parent(false, false),
        &src,
        Ok(answer(vec![
            cm("taken", "1"),
            cm("orphan", "1"),
            cm("mc", "1"),
        ])),
    ));
    let actions: Vec<&ChildAction> = a.children.iter().map(|s| &s.action).collect();
    assert!(
        matches!(actions[0], ChildAction::Collision(_)),
        "{actions:?}"
    );
    assert_eq!(actions[1], &ChildAction::Adopt);
    assert_eq!(actions[2], &ChildAction::TakeOver);
    assert_eq!(a.known_problems().len(), 1);
}

#[test]
fn rule05_a_child_is_written_only_when_it_differs_and_as_its_strategy_says() {
    let mut going = existing(&cm("a", "1"), UID, "u-a");
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    let same = existing(&cm("a", "1"), UID, "u-a");
    let cases: Vec<(UpdateMethod, Option<DynamicObject>, ChildAction)> = vec![
        (UpdateMethod::InPlace, None, ChildAction::Create),
        (
            UpdateMethod::InPlace,
            Some(same.clone()),
            ChildAction::Unchanged,
        ),
        (
            UpdateMethod::Recreate,
            Some(same.clone()),
            ChildAction::Unchanged,
        ),
        (UpdateMethod::OnDelete, Some(same), ChildAction::Unchanged),
        (
            UpdateMethod::InPlace,
            Some(existing(&cm("a", "0"), UID, "u-a")),
            ChildAction::Apply,
        ),
        (
            UpdateMethod::Recreate,
            Some(existing(&cm("a", "0"), UID, "u-a")),
            ChildAction::Recreate { uid: "u-a".into() },
        ),
        (
            UpdateMethod::OnDelete,
            Some(existing(&cm("a", "0"), UID, "u-a")),
            ChildAction::Left,
        ),
        (UpdateMethod::InPlace, Some(going), ChildAction::Wait),
    ];
    for (method, there, want) in cases {
        let t = target(method, false);
        let src = snap(there.into_iter().collect());
        let a = answered(run(
            &t,
            parent(false, false),
            &src,
            Ok(answer(vec![cm("a", "1")])),
        ));
        assert_eq!(a.children[0].action, want, "{method:?}");
        assert!(a.known_problems().is_empty());
    }
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table of rule-6 cases, read top to bottom"
)]
fn rule06_errors_are_classified_and_permanent_ones_do_not_loop() {
    let t = target(UpdateMethod::InPlace, false);
    let err = |e: PluginError| Err(e);
    // (plugin result, class, reason, remembered, requeue, counted as)
    type Case = (
        Result<ReconcileResponse, PluginError>,
        FailureClass,
        &'static str,
        bool,
        Requeue,
        ReconcileResult,
    );
    let cases: Vec<Case> = vec![
        (
            err(PluginError::Permanent {
                reason: "BadSpec".into(),
                message: "m".into(),
            }),
            FailureClass::Permanent,
            "BadSpec",
            true,
            Requeue::Resync,
            ReconcileResult::PermanentError,
        ),
        (
            err(PluginError::Transient {
                reason: "NotYet".into(),
                message: "m".into(),
            }),
            FailureClass::Transient,
            "NotYet",
            false,
            Requeue::Backoff,
            ReconcileResult::TransientError,
        ),
        (
            err(PluginError::Fault {
                kind: FaultKind::Timeout,
                message: "m".into(),
            }),
            FailureClass::Fault,
            "PluginTimeout",
            false,
            Requeue::Backoff,
            ReconcileResult::PluginFault,
        ),
        (
            err(PluginError::Fault {
                kind: FaultKind::InvalidOutput,
                message: "m".into(),
            }),
            FailureClass::InvalidOutput,
            INVALID_OUTPUT,
            true,
            Requeue::Resync,
            ReconcileResult::PluginFault,
        ),
        // Output the host's validation rejects: the whole answer, nothing applied.
        (
            Ok(answer(vec![cm("ok", "1"), json!({"kind": "Secret"})])),
            FailureClass::InvalidOutput,
            INVALID_OUTPUT,
            true,
            Requeue::Resync,
            ReconcileResult::PluginFault,
        ),
    ];
    for (result, class, reason, remember, requeue, counted) in cases {
        let Decision::Failed(f) = run(&t, parent(false, false), &snap(vec![]), result) else {
            panic!("{reason}: expected a failure");
        };
        assert_eq!(
            (
                f.failure.class,
                f.failure.reason.as_str(),
                f.remember,
                f.requeue,
                f.result
            ),
            (class, reason, remember, requeue, counted)
        );
        assert_eq!(f.status[0].reason, reason);
        assert_eq!(
            (f.event.kind, f.event.reason.as_str()),
            (EventKind::Warning, reason)
        );
    }
    // A remembered permanent failure holds the parent without a plugin call,
    // restating Ready=False; a deleting parent is never held.
    let hold = Hold {
        reason: "BadSpec".into(),
        message: "m".into(),
        wait: Duration::from_secs(9),
    };
    let a = admit(&t, &parent(false, false), Some(&hold));
    let Then::Hold { status, wait } = a.then else {
        panic!("expected a hold");
    };
    assert_eq!(
        (status[0].status, status[0].reason.as_str(), wait),
        ("False", "BadSpec", hold.wait)
    );
    let fin = target(UpdateMethod::InPlace, true);
    assert_eq!(
        admit(&fin, &parent(true, true), Some(&hold)).then,
        Then::Call
    );
}

#[test]
fn rule07_status_reports_the_observation_with_a_host_owned_ready() {
    let t = target(UpdateMethod::InPlace, false);
    let mut r = answer(vec![]);
    r.conditions = vec![Condition {
        type_: "Synced".into(),
        status: ConditionStatus::False,
        reason: "Drift".into(),
        message: "m".into(),
    }];
    r.status = Some(json!({"phase": "A"}));
    let a = answered(run(&t, parent(false, false), &snap(vec![]), Ok(r)));
    let problem = Problem {
        reason: "ApplyFailed",
        message: "applying x".into(),
    };
    for (problems, want) in [
        (vec![], ("True", "Reconciled")),
        (vec![problem], ("False", "ApplyFailed")),
    ] {
        let s = a.settle(&problems);
        let u = s.status.as_ref().unwrap();
        assert_eq!(
            (u[0].type_.as_str(), u[0].status, u[0].reason.as_str()),
            ("Ready", want.0, want.1)
        );
        // The plugin's conditions follow Ready and replace its old ones.
        assert_eq!(u[1].type_, "Synced");
        assert!(u.replace_conditions);
        // observedGeneration on the status and on every condition.
        let new = status_to_write(&t, None, Some(2), u, "T").unwrap();
        assert_eq!(new["observedGeneration"], 2);
        assert_eq!(new["phase"], "A");
        assert!(
            new["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["observedGeneration"] == 2)
        );
    }
    // A failed call keeps the plugin's earlier conditions (it said nothing new).
    assert!(!failed_status("X", "m").replace_conditions);
}

#[test]
fn rule08_children_no_longer_desired_are_deleted_unless_already_going() {
    let t = target(UpdateMethod::InPlace, false);
    let mut going = existing(&cm("going", "1"), UID, "u-g");
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    let src = snap(vec![
        existing(&cm("keep", "1"), UID, "u-k"),
        existing(&cm("old", "1"), UID, "u-old"),
        going,
    ]);
    let a = answered(run(
        &t,
        parent(false, false),
        &src,
        Ok(answer(vec![cm("keep", "1")])),
    ));
    let deletes: Vec<(&str, &str)> = a
        .deletes
        .iter()
        .map(|d| (d.name.as_str(), d.uid.as_str()))
        .collect();
    assert_eq!(deletes, vec![("old", "u-old")]);
}

#[test]
fn rule09_a_status_that_would_not_change_is_not_written() {
    let t = target(UpdateMethod::InPlace, false);
    let u = failed_status("BadSpec", "m");
    let first = status_to_write(&t, None, Some(2), &u, "T1").unwrap();
    // Written once; the same decision later changes nothing (the transition
    // time is kept while the condition's status stays).
    assert_eq!(status_to_write(&t, Some(&first), Some(2), &u, "T2"), None);
    // A host field the parent CRD prunes is no change either.
    let mut pruning = target(UpdateMethod::InPlace, false);
    pruning.status_schema = SchemaCheck::Read(StatusSchema::new(
        "sites.example.com",
        json!({"type": "object", "properties": {"status": {"type": "object",
            "properties": {"conditions": {"type": "array", "items": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}),
    ));
    let stored = pruning.schema().unwrap().stored(&first).unwrap();
    assert_ne!(stored, first, "the schema prunes observedGeneration");
    assert_eq!(
        status_to_write(&pruning, Some(&stored), Some(2), &u, "T2"),
        None
    );
    // A new generation is a change.
    assert!(status_to_write(&t, Some(&first), Some(3), &u, "T2").is_some());
}

#[test]
fn rule10_the_next_run_is_the_plugins_requeue_the_resync_or_never() {
    let t = target(UpdateMethod::InPlace, true);
    for (deleting, finalized, after, want) in [
        (false, false, None, Requeue::Resync),
        (
            false,
            false,
            Some(30),
            Requeue::Within(Duration::from_secs(30)),
        ),
        (true, true, Some(30), Requeue::Never),
        (true, false, None, Requeue::Resync),
    ] {
        let mut r = answer(vec![]);
        r.finalized = finalized;
        r.requeue_after_seconds = after;
        let a = answered(run(&t, parent(deleting, true), &snap(vec![]), Ok(r)));
        assert_eq!(
            a.settle(&[]).requeue,
            want,
            "{deleting} {finalized} {after:?}"
        );
    }
}

#[test]
fn rule11_the_plugins_events_are_recorded_on_the_parent() {
    let t = target(UpdateMethod::InPlace, false);
    let mut r = answer(vec![]);
    r.events = vec![
        Event {
            type_: EventType::Normal,
            reason: "Built".into(),
            message: "ok".into(),
        },
        Event {
            type_: EventType::Warning,
            reason: "Slow".into(),
            message: "hm".into(),
        },
    ];
    let a = answered(run(&t, parent(false, false), &snap(vec![]), Ok(r)));
    let got: Vec<(EventKind, &str)> = a
        .events
        .iter()
        .map(|e| (e.kind, e.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![(EventKind::Normal, "Built"), (EventKind::Warning, "Slow")]
    );
}

/// `to_json` builds the plugin's view from the object's parts: it must be
/// exactly what serialising the whole object gives (same keys, same order),
/// minus `managedFields`.
/// Rule 12: after a status conflict the status write alone is retried only
/// while the spec the plugin answered for still stands; anything else runs
/// the pass again on the fresh state. (The retry itself is executed by
/// `reconcile.rs`; end to end in `engine_scenarios.rs`.)
#[test]
fn rule12_a_status_conflict_retries_the_status_alone_only_for_the_same_spec() {
    let obj = |uid: &str, generation: i64, deleting: bool| -> DynamicObject {
        let mut v = json!({"apiVersion": "x/v1", "kind": "P",
            "metadata": {"name": "p", "uid": uid, "generation": generation}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(v).unwrap()
    };
    let seen = obj("u", 2, false);
    for (fresh, status_only) in [
        (obj("u", 2, false), true),
        (obj("u", 3, false), false),
        (obj("other", 2, false), false),
        (obj("u", 2, true), false),
    ] {
        assert_eq!(
            same_spec(&seen, &fresh),
            status_only,
            "{:?}",
            fresh.metadata
        );
    }
}

#[test]
fn to_json_is_the_serialised_object_without_managed_fields() {
    let untyped = DynamicObject {
        types: None,
        ..parent(false, true)
    };
    let no_data = DynamicObject {
        data: Value::Null,
        ..parent(true, false)
    };
    for o in [parent(false, true), parent(true, false), untyped, no_data] {
        let mut whole = serde_json::to_value(&o).unwrap();
        whole["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        let got = to_json(&o);
        assert_eq!(got, whole);
        assert_eq!(
            serde_json::to_string(&got).unwrap(),
            serde_json::to_string(&whole).unwrap(),
            "same key order"
        );
    }
}
