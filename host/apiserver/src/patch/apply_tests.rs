//! Server-side apply scenarios, each taken from documented kube-apiserver
//! behaviour (kubernetes.io "Server-Side Apply": conflicts, shared
//! ownership, transferring ownership, field removal, merge strategies).

use serde_json::{Value, json};

use super::*;

const T0: &str = "2024-05-01T10:00:00Z";
const T1: &str = "2024-05-01T10:05:00Z";
const T2: &str = "2024-05-01T10:10:00Z";

fn schema() -> Schema {
    Schema::for_builtin("apps", "Deployment")
}

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn apply(
    cur: Option<&Value>,
    cfg: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    let opts = ApplyOptions {
        manager,
        force,
        subresource: None,
        now,
    };
    server_side_apply(cur, cfg, &schema(), &opts)
}

fn entry<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager)
}

fn owns(obj: &Value, manager: &str, fields_v1_path: &[&str]) -> bool {
    let Some(e) = entry(obj, manager) else {
        return false;
    };
    let mut node = &e["fieldsV1"];
    for p in fields_v1_path {
        node = &node[*p];
    }
    node.is_object()
}

#[test]
fn apply_create_records_an_apply_entry_without_identity_fields() {
    let cfg = deploy(json!({"replicas": 2}));
    let out = apply(None, &cfg, "kubectl", false, T0).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    let mf = &out["metadata"]["managedFields"];
    assert_eq!(
        mf,
        &json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
                 "time": T0, "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
    );
}

#[test]
fn same_value_from_two_appliers_is_shared_without_conflict() {
    let cfg = deploy(json!({"replicas": 3}));
    let a = apply(None, &cfg, "a", false, T0).unwrap();
    let b = apply(Some(&a), &cfg, "b", false, T1).unwrap();
    assert!(owns(&b, "a", &["f:spec", "f:replicas"]));
    assert!(owns(&b, "b", &["f:spec", "f:replicas"]));
}

#[test]
fn different_value_on_a_field_owned_by_another_applier_conflicts() {
    let a = apply(None, &deploy(json!({"replicas": 3})), "a", false, T0).unwrap();
    let err = apply(Some(&a), &deploy(json!({"replicas": 5})), "b", false, T1).unwrap_err();
    assert_eq!(err.http_status(), 409);
    assert_eq!(
        err.status_message(),
        "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
    );
    match err {
        PatchError::Conflict { conflicts } => {
            assert_eq!(conflicts.len(), 1);
            assert_eq!(conflicts[0].manager, "a");
            assert_eq!(conflicts[0].field, ".spec.replicas");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn force_takes_ownership_from_the_other_applier() {
    let a = apply(
        None,
        &deploy(json!({"replicas": 3, "paused": false})),
        "a",
        false,
        T0,
    )
    .unwrap();
    let b = apply(Some(&a), &deploy(json!({"replicas": 5})), "b", true, T1).unwrap();
    assert_eq!(b["spec"]["replicas"], 5);
    assert!(owns(&b, "b", &["f:spec", "f:replicas"]));
    assert!(!owns(&b, "a", &["f:spec", "f:replicas"]));
    assert!(owns(&b, "a", &["f:spec", "f:paused"]));
}

#[test]
fn conflicts_list_every_field_grouped_by_manager() {
    let a = apply(
        None,
        &deploy(json!({"replicas": 3, "paused": false})),
        "a",
        false,
        T0,
    )
    .unwrap();
    let err = apply(
        Some(&a),
        &deploy(json!({"replicas": 5, "paused": true})),
        "b",
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(
        err.status_message(),
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.paused\n- .spec.replicas"
    );
}

#[test]
fn omitting_a_previously_applied_field_removes_it() {
    let cfg1 = deploy(json!({"replicas": 3, "paused": true}));
    let one = apply(None, &cfg1, "a", false, T0).unwrap();
    let two = apply(Some(&one), &deploy(json!({"replicas": 3})), "a", false, T1).unwrap();
    assert!(two["spec"].get("paused").is_none());
    assert!(!owns(&two, "a", &["f:spec", "f:paused"]));
}

#[test]
fn omitted_field_stays_when_another_manager_also_owns_it() {
    // The documented hand-over of `replicas` to an autoscaler: the second
    // manager applies the same value, then the first stops applying it.
    let a = apply(
        None,
        &deploy(json!({"replicas": 3, "paused": false})),
        "a",
        false,
        T0,
    )
    .unwrap();
    let b = apply(Some(&a), &deploy(json!({"replicas": 3})), "hpa", false, T1).unwrap();
    let a2 = apply(Some(&b), &deploy(json!({"paused": false})), "a", false, T2).unwrap();
    assert_eq!(a2["spec"]["replicas"], 3);
    assert!(owns(&a2, "hpa", &["f:spec", "f:replicas"]));
    assert!(!owns(&a2, "a", &["f:spec", "f:replicas"]));
}

#[test]
fn update_takes_ownership_and_a_later_apply_conflicts_with_the_updater() {
    let a = apply(None, &deploy(json!({"replicas": 3})), "kubectl", false, T0).unwrap();
    // `kubectl scale` / client-side apply: a patch then an Update record.
    let mut scaled = apply_merge_patch(&a, &json!({"spec": {"replicas": 5}})).unwrap();
    let mf = track_update(
        Some(&a),
        &scaled,
        &schema(),
        "kubectl-client-side-apply",
        None,
        T1,
    );
    scaled["metadata"]["managedFields"] = mf;
    assert!(!owns(&scaled, "kubectl", &["f:spec", "f:replicas"]));
    assert!(owns(
        &scaled,
        "kubectl-client-side-apply",
        &["f:spec", "f:replicas"]
    ));
    let err = apply(
        Some(&scaled),
        &deploy(json!({"replicas": 3})),
        "kubectl",
        false,
        T2,
    )
    .unwrap_err();
    assert_eq!(
        err.status_message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
}

fn with_containers(containers: Value) -> Value {
    deploy(json!({"template": {"spec": {"containers": containers}}}))
}

#[test]
fn keyed_list_items_from_two_managers_merge_by_key() {
    let a = apply(
        None,
        &with_containers(json!([{"name": "web", "image": "nginx"}])),
        "a",
        false,
        T0,
    )
    .unwrap();
    let b = apply(
        Some(&a),
        &with_containers(json!([{"name": "side", "image": "envoy"}])),
        "b",
        false,
        T1,
    )
    .unwrap();
    let names: Vec<&str> = b["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["web", "side"]);
    let web = [
        "f:spec",
        "f:template",
        "f:spec",
        "f:containers",
        "k:{\"name\":\"web\"}",
        "f:image",
    ];
    let side = [
        "f:spec",
        "f:template",
        "f:spec",
        "f:containers",
        "k:{\"name\":\"side\"}",
        "f:image",
    ];
    assert!(owns(&b, "a", &web) && !owns(&b, "a", &side));
    assert!(owns(&b, "b", &side) && !owns(&b, "b", &web));
    // `a` re-applying only its own container leaves `b`'s alone.
    let a2 = apply(
        Some(&b),
        &with_containers(json!([{"name": "web", "image": "nginx:2"}])),
        "a",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(
        a2["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn omitting_a_keyed_list_item_removes_it() {
    let two = json!([{"name": "web", "image": "nginx"}, {"name": "side", "image": "envoy"}]);
    let one = apply(None, &with_containers(two), "a", false, T0).unwrap();
    let out = apply(
        Some(&one),
        &with_containers(json!([{"name": "web", "image": "nginx"}])),
        "a",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web", "image": "nginx"}])
    );
}

#[test]
fn atomic_list_is_replaced_whole_and_owned_whole() {
    let c = |args: Value| with_containers(json!([{"name": "web", "args": args}]));
    let a = apply(None, &c(json!(["x", "y"])), "a", false, T0).unwrap();
    let err = apply(Some(&a), &c(json!(["z"])), "b", false, T1).unwrap_err();
    assert_eq!(
        err.status_message(),
        "Apply failed with 1 conflict: conflict with \"a\": .spec.template.spec.containers[name=\"web\"].args"
    );
    let b = apply(Some(&a), &c(json!(["z"])), "b", true, T1).unwrap();
    assert_eq!(
        b["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["z"])
    );
}

#[test]
fn finalizers_are_a_set_each_value_owned_separately() {
    let fin = |f: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": f}})
    };
    let a = apply(None, &fin(json!(["example.com/a"])), "a", false, T0).unwrap();
    let b = apply(Some(&a), &fin(json!(["example.com/b"])), "b", false, T1).unwrap();
    assert_eq!(
        b["metadata"]["finalizers"],
        json!(["example.com/a", "example.com/b"])
    );
    assert!(owns(
        &b,
        "b",
        &["f:metadata", "f:finalizers", "v:\"example.com/b\""]
    ));
    let a2 = apply(Some(&b), &fin(json!([])), "a", false, T2).unwrap();
    assert_eq!(a2["metadata"]["finalizers"], json!(["example.com/b"]));
}

#[test]
fn labels_and_annotations_are_owned_per_key() {
    let meta = |labels: Value, ann: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels, "annotations": ann}})
    };
    let a = apply(
        None,
        &meta(json!({"x": "1"}), json!({"note": "a"})),
        "a",
        false,
        T0,
    )
    .unwrap();
    let b = apply(
        Some(&a),
        &meta(json!({"y": "2"}), json!({"other": "b"})),
        "b",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(b["metadata"]["labels"], json!({"x": "1", "y": "2"}));
    assert_eq!(
        b["metadata"]["annotations"],
        json!({"note": "a", "other": "b"})
    );
    assert_eq!(b["metadata"]["name"], "web");
    // Changing another manager's label value is a conflict on that key only.
    let err = apply(
        Some(&b),
        &meta(json!({"x": "9"}), json!({})),
        "b",
        false,
        T2,
    )
    .unwrap_err();
    assert_eq!(
        err.status_message(),
        "Apply failed with 1 conflict: conflict with \"a\": .metadata.labels.x"
    );
}

#[test]
fn reapplying_the_same_config_is_a_no_op() {
    let cfg = with_containers(json!([{"name": "web", "image": "nginx"}]));
    let one = apply(None, &cfg, "a", false, T0).unwrap();
    let two = apply(Some(&one), &cfg, "a", false, T1).unwrap();
    assert!(is_noop(&one, &two));
    assert_eq!(entry(&two, "a").unwrap()["time"], T0);
}

#[test]
fn config_changes_bump_the_entry_time() {
    let one = apply(None, &deploy(json!({"replicas": 1})), "a", false, T0).unwrap();
    let two = apply(Some(&one), &deploy(json!({"replicas": 2})), "a", false, T1).unwrap();
    assert!(!is_noop(&one, &two));
    assert_eq!(entry(&two, "a").unwrap()["time"], T1);
}

#[test]
fn keyed_item_without_its_key_is_rejected() {
    let err = apply(
        None,
        &with_containers(json!([{"image": "nginx"}])),
        "a",
        false,
        T0,
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::Invalid(_)));
    assert!(err.status_message().contains("omits key field \"name\""));
}

#[test]
fn managed_fields_in_the_config_are_rejected() {
    let mut cfg = deploy(json!({}));
    cfg["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let err = apply(None, &cfg, "a", false, T0).unwrap_err();
    assert_eq!(err.http_status(), 400);
}

#[test]
fn status_subresource_appliers_are_separate_entries() {
    let st = |phase: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "status": {"observedGeneration": 1, "phase": phase}})
    };
    let opts = ApplyOptions {
        manager: "ctl",
        force: false,
        subresource: Some("status"),
        now: T0,
    };
    let a = server_side_apply(None, &st("A"), &schema(), &opts).unwrap();
    assert_eq!(entry(&a, "ctl").unwrap()["subresource"], "status");
    let other = ApplyOptions {
        manager: "other",
        force: false,
        subresource: Some("status"),
        now: T1,
    };
    let err = server_side_apply(Some(&a), &st("B"), &schema(), &other).unwrap_err();
    assert_eq!(
        err.status_message(),
        "Apply failed with 1 conflict: conflict with \"ctl\" with subresource \"status\": .status.phase"
    );
}

#[test]
fn an_applier_with_nothing_left_drops_out_of_managed_fields() {
    let a = apply(None, &deploy(json!({"replicas": 3})), "a", false, T0).unwrap();
    let b = apply(Some(&a), &deploy(json!({"replicas": 4})), "b", true, T1).unwrap();
    assert!(entry(&b, "a").is_none());
    assert_eq!(b["metadata"]["managedFields"].as_array().unwrap().len(), 1);
}

#[test]
fn main_resource_apply_ignores_status_when_the_kind_has_a_status_subresource() {
    let s = schema().with_status_subresource(true);
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "status": {"replicas": 1}});
    let cfg = deploy(json!({"replicas": 2}));
    let mut cfg_with_status = cfg.clone();
    cfg_with_status["status"] = json!({"replicas": 7});
    let opts = ApplyOptions {
        manager: "a",
        force: false,
        subresource: None,
        now: T0,
    };
    let out = server_side_apply(Some(&live), &cfg_with_status, &s, &opts).unwrap();
    assert_eq!(out["status"], json!({"replicas": 1}));
    assert!(!owns(&out, "a", &["f:status"]));
    assert!(owns(&out, "a", &["f:spec", "f:replicas"]));
}

#[test]
fn status_subresource_apply_sets_only_status() {
    let live = deploy(json!({"replicas": 1}));
    let mut cfg = deploy(json!({"replicas": 9}));
    cfg["status"] = json!({"readyReplicas": 1});
    let opts = ApplyOptions {
        manager: "ctl",
        force: false,
        subresource: Some("status"),
        now: T0,
    };
    let out = server_side_apply(Some(&live), &cfg, &schema(), &opts).unwrap();
    assert_eq!(out["spec"]["replicas"], 1);
    assert_eq!(out["status"]["readyReplicas"], 1);
    assert!(!owns(&out, "ctl", &["f:spec"]));
}

#[test]
fn server_owned_metadata_survives_an_apply_that_nulls_it() {
    // `kubectl create --dry-run=client -o yaml` output carries
    // `creationTimestamp: null`; applying it must not erase the real one.
    let mut live = deploy(json!({"replicas": 1}));
    live["metadata"]["uid"] = json!("u-1");
    live["metadata"]["creationTimestamp"] = json!(T0);
    live["metadata"]["resourceVersion"] = json!("42");
    let mut cfg = deploy(json!({"replicas": 1}));
    cfg["metadata"]["creationTimestamp"] = Value::Null;
    cfg["metadata"]["uid"] = json!("forged");
    let out = apply(Some(&live), &cfg, "a", false, T1).unwrap();
    assert_eq!(out["metadata"]["creationTimestamp"], T0);
    assert_eq!(out["metadata"]["uid"], "u-1");
    assert_eq!(out["metadata"]["resourceVersion"], "42");
    // A resourceVersion in the configuration is a precondition for the
    // server to check, so it is passed through, not replaced.
    cfg["metadata"]["resourceVersion"] = json!("41");
    let stale = apply(Some(&live), &cfg, "a", false, T1).unwrap();
    assert_eq!(stale["metadata"]["resourceVersion"], "41");
}

#[test]
fn kubectl_server_side_apply_rewrites_the_client_side_annotation() {
    const LAST: &str = "kubectl.kubernetes.io/last-applied-configuration";
    let mut live = deploy(json!({"replicas": 1}));
    live["metadata"]["annotations"] = json!({ LAST: "{\"old\":true}\n" });
    let cfg = deploy(json!({"replicas": 2}));
    let out = apply(Some(&live), &cfg, "kubectl", false, T1).unwrap();
    let text = out["metadata"]["annotations"][LAST].as_str().unwrap();
    assert!(text.ends_with('\n'));
    let parsed: Value = serde_json::from_str(text).unwrap();
    assert_eq!(parsed, cfg);
    // Other managers leave it alone.
    let other = apply(Some(&live), &cfg, "helm", false, T1).unwrap();
    assert_eq!(other["metadata"]["annotations"][LAST], "{\"old\":true}\n");
}

fn client_side_applied(replicas_in_annotation: i64) -> Value {
    // What `kubectl apply` (client-side) leaves: the object, its
    // last-applied annotation, and an Update entry for
    // kubectl-client-side-apply.
    const LAST: &str = "kubectl.kubernetes.io/last-applied-configuration";
    let mut obj = deploy(json!({"replicas": 3}));
    let last = deploy(json!({"replicas": replicas_in_annotation}));
    obj["metadata"]["annotations"] = json!({ LAST: format!("{last}\n") });
    let mf = track_update(None, &obj, &schema(), "kubectl-client-side-apply", None, T0);
    obj["metadata"]["managedFields"] = mf;
    obj
}

#[test]
fn kubectl_upgrading_from_client_side_apply_takes_matching_fields_without_force() {
    let live = client_side_applied(3);
    let out = apply(
        Some(&live),
        &deploy(json!({"replicas": 5})),
        "kubectl",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(out["spec"]["replicas"], 5);
    assert!(owns(&out, "kubectl", &["f:spec", "f:replicas"]));
    // Another manager gets the plain conflict.
    let err = apply(
        Some(&live),
        &deploy(json!({"replicas": 5})),
        "other",
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(err.http_status(), 409);
}

#[test]
fn kubectl_upgrade_still_conflicts_on_fields_changed_since_the_client_side_apply() {
    let live = client_side_applied(2);
    let err = apply(
        Some(&live),
        &deploy(json!({"replicas": 5})),
        "kubectl",
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(
        err.status_message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
}

#[test]
fn a_first_apply_that_changes_nothing_records_ownership_without_a_time() {
    // kube-apiserver v1.37.2: manager "c" applying a value "a" already set
    // shares the field, and its entry has no `time` (so it sorts first).
    let one = apply(None, &deploy(json!({"replicas": 2})), "a", false, T0).unwrap();
    let two = apply(Some(&one), &deploy(json!({"replicas": 2})), "c", false, T1).unwrap();
    let c = entry(&two, "c").unwrap();
    assert!(c.get("time").is_none());
    assert!(owns(&two, "c", &["f:spec", "f:replicas"]));
    assert_eq!(two["metadata"]["managedFields"][0]["manager"], "c");
}
