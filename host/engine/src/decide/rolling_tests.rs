//! Rule 5a of `docs/reconciliation-rules.md` (rolling updates), on the
//! decision core alone: which changed children are updated, which wait, and
//! what the parent's conditions say.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::crd::{ConditionCheck, FieldCheck, UpdateMethod};
use crate::decide::{Answer, Decision, Requeue, decide, observe};
use crate::plan::Snapshot;
use crate::test_fixtures::{answer, cm, existing, target};

const UID: &str = "p-uid";
const NOW: &str = "2026-01-01T00:10:00Z";
const FM: &str = "wasm-reconciler/c";

fn parent() -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Site",
        "metadata": {"name": "s", "namespace": "ns", "uid": UID, "generation": 1},
    }))
    .unwrap()
}

fn ready_check() -> StatusChecks {
    StatusChecks {
        conditions: vec![ConditionCheck {
            type_: "Ready".into(),
            status: None,
            reason: None,
        }],
        fields: vec![FieldCheck {
            path: "status.observedGeneration".into(),
            equals_path: Some("metadata.generation".into()),
            value: None,
        }],
    }
}

fn rolling_target(method: UpdateMethod, max_unavailable: usize) -> Target {
    let mut t = target(method, false);
    t.children[0].rolling = Rolling {
        checks: ready_check(),
        max_unavailable,
        deadline: Duration::from_secs(60),
    };
    t
}

/// Child `name` with data `v`, written by the host at `written`, `ready` or not.
fn child(name: &str, v: &str, ready: bool, written: &str) -> DynamicObject {
    let mut o = existing(&cm(name, v), UID, &format!("u-{name}"));
    o.metadata.generation = Some(2);
    o.metadata.creation_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
    o.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some(FM.into()),
        operation: Some("Apply".into()),
        time: Some(Time(written.parse().unwrap())),
        ..Default::default()
    }]);
    o.data["status"] = json!({
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
    });
    o
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

fn run(t: &Target, children: Vec<DynamicObject>, want: &[(&str, &str)]) -> Answer {
    let src = Snapshot::from_objects(vec![], vec![children], vec![]);
    let observed = observe(t, parent(), &src);
    let resp = answer(want.iter().map(|(n, v)| cm(n, v)).collect());
    match decide(t, &observed, &src, &Ok(resp), NOW) {
        Decision::Answered(a) => a,
        Decision::Failed(f) => panic!("{f:?}"),
    }
}

fn actions(a: &Answer) -> Vec<(String, &'static str)> {
    a.children
        .iter()
        .map(|s| {
            let what = match s.action {
                ChildAction::Apply => "apply",
                ChildAction::Recreate { .. } => "recreate",
                ChildAction::Queued(_) => "queued",
                ChildAction::Unchanged => "unchanged",
                ChildAction::Create => "create",
                _ => "other",
            };
            (s.name.clone(), what)
        })
        .collect()
}

fn rollout(a: &Answer) -> (&'static str, String, String) {
    let c = &a.rollout.as_ref().expect("a rollout").condition;
    assert_eq!(c.type_, CONDITION);
    (c.status, c.reason.clone(), c.message.clone())
}

const FRESH: &str = "2026-01-01T00:09:50Z";

#[test]
fn rule05a_one_changed_child_at_a_time_in_the_plugins_order() {
    for (method, verb) in [
        (UpdateMethod::RollingInPlace, "apply"),
        (UpdateMethod::RollingRecreate, "recreate"),
    ] {
        let t = rolling_target(method, 1);
        let old = ["a", "b", "c"].map(|n| child(n, "1", true, FRESH)).to_vec();
        let a = run(&t, old, &[("a", "2"), ("b", "2"), ("c", "2")]);
        let names = |v: Vec<(String, &'static str)>| v;
        assert_eq!(
            names(actions(&a)),
            [
                ("a".to_string(), verb),
                ("b".to_string(), "queued"),
                ("c".to_string(), "queued")
            ],
            "{method:?}"
        );
        assert_eq!(
            rollout(&a),
            (
                "True",
                "Progressing".into(),
                "0/3 updated, updating ConfigMap ns/a".into()
            )
        );
        assert!(a.known_problems().is_empty());
    }
}

#[test]
fn rule05a_the_next_child_waits_until_the_updated_one_passes_its_checks() {
    let t = rolling_target(UpdateMethod::RollingInPlace, 1);
    let a = run(
        &t,
        vec![
            child("a", "2", false, FRESH),
            child("b", "1", true, FRESH),
            child("c", "1", true, FRESH),
        ],
        &[("a", "2"), ("b", "2"), ("c", "2")],
    );
    assert_eq!(
        actions(&a)[1..],
        [("b".into(), "queued"), ("c".into(), "queued")]
    );
    assert_eq!(
        rollout(&a),
        (
            "True",
            "Progressing".into(),
            "1/3 updated, waiting for ConfigMap ns/a: condition Ready is False".into()
        )
    );
    assert_eq!(
        a.children[1].action,
        ChildAction::Queued("rolling update: waiting for ConfigMap ns/a".into())
    );
    // Looked at again by the deadline (60 s after the write at 00:09:50).
    let s = a.settle(&a.known_problems());
    assert_eq!(s.requeue, Requeue::Within(Duration::from_secs(50)));
    assert_eq!(s.status.as_ref().unwrap().conditions[0].status, "True");

    // Once it passes, the next one goes.
    let a = run(
        &t,
        vec![
            child("a", "2", true, FRESH),
            child("b", "1", true, FRESH),
            child("c", "1", true, FRESH),
        ],
        &[("a", "2"), ("b", "2"), ("c", "2")],
    );
    assert_eq!(
        actions(&a)[1..],
        [("b".into(), "apply"), ("c".into(), "queued")]
    );
}

#[test]
fn rule05a_a_stale_generation_counts_as_not_available() {
    let t = rolling_target(UpdateMethod::RollingInPlace, 1);
    let mut a0 = child("a", "2", true, FRESH);
    a0.metadata.generation = Some(3);
    let a = run(
        &t,
        vec![a0, child("b", "1", true, FRESH)],
        &[("a", "2"), ("b", "2")],
    );
    assert_eq!(actions(&a)[1], ("b".into(), "queued"));
    assert_eq!(
        rollout(&a).2,
        "1/2 updated, waiting for ConfigMap ns/a: status.observedGeneration is 2, not metadata.generation 3"
    );
}

#[test]
fn rule05a_a_child_past_its_deadline_stops_the_rollout_and_the_parent_says_why() {
    let t = rolling_target(UpdateMethod::RollingRecreate, 2);
    let a = run(
        &t,
        vec![
            child("a", "2", false, "2026-01-01T00:08:00Z"),
            child("b", "1", true, FRESH),
            child("c", "1", true, FRESH),
        ],
        &[("a", "2"), ("b", "2"), ("c", "2")],
    );
    // maxUnavailable 2 would allow one more, but a stalled rollout stops.
    assert_eq!(
        actions(&a)[1..],
        [("b".into(), "queued"), ("c".into(), "queued")]
    );
    let want = "1/3 updated, rollout stopped: ConfigMap ns/a has not passed its status \
                checks within 60s: condition Ready is False";
    assert_eq!(rollout(&a), ("False", "Stalled".into(), want.into()));
    let problems = a.known_problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].reason, STALLED);
    let s = a.settle(&problems);
    let ready = &s.status.as_ref().unwrap().conditions[0];
    assert_eq!((ready.status, ready.reason.as_str()), ("False", STALLED));
    assert_eq!(ready.message, want);
    assert!(!s.healthy);
}

#[test]
fn rule05a_max_unavailable_is_a_batch_and_broken_children_go_first() {
    let t = rolling_target(UpdateMethod::RollingInPlace, 2);
    let a = run(
        &t,
        vec![
            child("a", "1", true, FRESH),
            child("b", "1", true, FRESH),
            child("c", "1", false, FRESH),
        ],
        &[("a", "2"), ("b", "2"), ("c", "2")],
    );
    assert_eq!(
        actions(&a),
        [
            ("a".into(), "apply"),
            ("b".into(), "queued"),
            ("c".into(), "apply")
        ]
    );
}

#[test]
fn rule05a_new_children_are_created_at_once_and_count_as_unavailable() {
    let t = rolling_target(UpdateMethod::RollingInPlace, 1);
    let a = run(
        &t,
        vec![child("a", "1", true, FRESH)],
        &[("a", "2"), ("n", "2")],
    );
    assert_eq!(
        actions(&a),
        [("a".into(), "queued"), ("n".into(), "create")]
    );
    assert_eq!(
        rollout(&a).2,
        "0/2 updated, waiting for ConfigMap ns/n: not created yet"
    );
}

#[test]
fn rule05a_a_finished_rollout_is_complete_and_other_methods_have_none() {
    let t = rolling_target(UpdateMethod::RollingInPlace, 1);
    let a = run(
        &t,
        vec![child("a", "2", true, FRESH), child("b", "2", true, FRESH)],
        &[("a", "2"), ("b", "2")],
    );
    assert_eq!(
        rollout(&a),
        ("True", "Complete".into(), "2/2 updated".into())
    );
    let s = a.settle(&[]);
    let types: Vec<&str> = s
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, ["Ready", CONDITION]);
    assert_eq!(s.requeue, Requeue::Resync);
    let t = target(UpdateMethod::InPlace, false);
    let a = run(&t, vec![child("a", "1", true, FRESH)], &[("a", "2")]);
    assert!(a.rollout.is_none());
}

#[test]
fn checks_name_what_failed() {
    let checks = StatusChecks {
        conditions: vec![ConditionCheck {
            type_: "Available".into(),
            status: Some("True".into()),
            reason: Some("Serving".into()),
        }],
        fields: vec![FieldCheck {
            path: "status.phase".into(),
            equals_path: None,
            value: Some(json!("Running")),
        }],
    };
    let obj = |conds: Value, phase: Value| json!({"status": {"conditions": conds, "phase": phase}});
    let cases = [
        (
            obj(json!([]), json!("Running")),
            Err("condition Available is missing"),
        ),
        (
            obj(
                json!([{"type": "Available", "status": "Unknown"}]),
                json!("Running"),
            ),
            Err("condition Available is Unknown"),
        ),
        (
            obj(
                json!([{"type": "Available", "status": "True", "reason": "Starting"}]),
                json!("Running"),
            ),
            Err("condition Available has reason \"Starting\", not \"Serving\""),
        ),
        (
            obj(
                json!([{"type": "Available", "status": "True", "reason": "Serving"}]),
                json!("Pending"),
            ),
            Err("status.phase is \"Pending\", not \"Running\""),
        ),
        (
            obj(
                json!([{"type": "Available", "status": "True", "reason": "Serving"}]),
                Value::Null,
            ),
            Err("status.phase is not set"),
        ),
        (
            obj(
                json!([{"type": "Available", "status": "True", "reason": "Serving"}]),
                json!("Running"),
            ),
            Ok(()),
        ),
    ];
    for (o, want) in cases {
        assert_eq!(check(&checks, &o), want.map_err(str::to_string), "{o}");
    }
    // Numbers compare by value.
    let gen_check = StatusChecks {
        fields: ready_check().fields,
        ..Default::default()
    };
    let o = json!({"metadata": {"generation": 4}, "status": {"observedGeneration": 4.0}});
    assert_eq!(check(&gen_check, &o), Ok(()));
}
