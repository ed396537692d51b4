//! Native unit tests of the teardown state machine.

use super::*;

fn parent() -> Value {
    json!({
        "apiVersion": "examples.wasm-reconciler.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {
            "name": "ws", "namespace": "team", "uid": "u-1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": { "owner": "alice", "data": { "k": "v" } },
    })
}

fn finalizing(children: Vec<Value>) -> Request {
    let mut p = parent();
    p["metadata"]["deletionTimestamp"] = json!("2026-02-01T00:00:00Z");
    let mut req = Request::new(p);
    req.finalizing = true;
    req.children = children.into();
    req.now = "2026-02-01T00:00:10Z".into();
    req
}

fn cm(name: &str) -> Value {
    object("v1", "ConfigMap", Some("team"), name)
}

fn names(resp: &Response) -> Vec<&str> {
    resp.children.iter().filter_map(|c| c.name()).collect()
}

#[test]
fn alive_parent_has_data_and_tombstone() {
    let resp = Tombstone::reconcile(&Request::new(parent())).unwrap();
    assert_eq!(names(&resp), vec!["ws-data", "ws-tombstone"]);
    assert_eq!(resp.children[0]["data"], json!({ "k": "v" }));
    assert_eq!(resp.children[1]["data"]["owner"], json!("alice"));
    assert!(!resp.finalized);
}

#[test]
fn teardown_goes_data_then_tombstone_then_finalized() {
    let step1 = Tombstone::reconcile(&finalizing(vec![cm("ws-data"), cm("ws-tombstone")])).unwrap();
    assert_eq!(names(&step1), vec!["ws-tombstone"]);
    assert!(!step1.finalized);

    let step2 = Tombstone::reconcile(&finalizing(vec![cm("ws-tombstone")])).unwrap();
    assert!(step2.children.is_empty());
    assert!(!step2.finalized);

    let step3 = Tombstone::reconcile(&finalizing(vec![])).unwrap();
    assert!(step3.children.is_empty());
    assert!(step3.finalized);
}

#[test]
fn grace_period_keeps_the_tombstone_and_requeues() {
    let mut req = finalizing(vec![cm("ws-tombstone")]);
    req.config = Some(json!({ "graceSeconds": 60 }));
    let resp = Tombstone::reconcile(&req).unwrap();
    assert_eq!(names(&resp), vec!["ws-tombstone"]);
    // deleted at :00, now :10, grace 60 -> 50 s left.
    assert_eq!(resp.requeue_after_seconds, Some(50));
    req.now = "2026-02-01T00:01:00Z".into();
    let resp = Tombstone::reconcile(&req).unwrap();
    assert!(resp.children.is_empty());
    assert!(!resp.finalized);
}

#[test]
fn missing_owner_is_a_permanent_error() {
    let mut p = parent();
    p["spec"] = json!({});
    let err = Tombstone::reconcile(&Request::new(p)).unwrap_err();
    assert!(err.is_permanent());
    assert!(err.message().starts_with("spec.owner"), "{}", err.message());
}
