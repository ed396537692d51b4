//! Server-side apply: managedFields, conflicts and their messages, force,
//! field removal, errors.

use serde_json::{Value, json};

use super::{APPLY, MERGE, cm, patch};
use crate::run::Run;
use crate::target::Req;

pub async fn apply(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("apply").await?;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let ap = |name: &str, q: &str, body: &Value| patch(format!("{cms}/{name}?{q}"), APPLY, body);
    r.call(
        "apply/create",
        ap("s", "fieldManager=a", &cm("s", json!({"x": "1", "y": "1"}))),
    )
    .await?;
    r.call(
        "apply/same-again",
        ap("s", "fieldManager=a", &cm("s", json!({"x": "1", "y": "1"}))),
    )
    .await?;
    r.call(
        "apply/conflict",
        ap("s", "fieldManager=b", &cm("s", json!({"x": "2"}))),
    )
    .await?;
    r.call(
        "apply/shared-value-no-conflict",
        ap("s", "fieldManager=c", &cm("s", json!({"y": "1"}))),
    )
    .await?;
    r.call(
        "apply/force",
        ap(
            "s",
            "fieldManager=b&force=true",
            &cm("s", json!({"x": "2"})),
        ),
    )
    .await?;
    r.call(
        "apply/drop-field",
        ap("s", "fieldManager=a", &cm("s", json!({"z": "1"}))),
    )
    .await?;
    r.call(
        "apply/update-then-apply",
        patch(
            format!("{cms}/s?fieldManager=u"),
            MERGE,
            &json!({"data": {"x": "3"}}),
        ),
    )
    .await?;
    r.call(
        "apply/conflict-with-update",
        ap("s", "fieldManager=a", &cm("s", json!({"x": "4"}))),
    )
    .await?;
    r.call(
        "apply/without-field-manager",
        ap("s", "", &cm("s", json!({}))),
    )
    .await?;
    r.call(
        "apply/name-mismatch",
        ap("s", "fieldManager=a", &cm("t", json!({}))),
    )
    .await?;
    r.call(
        "apply/kind-mismatch",
        ap(
            "s",
            "fieldManager=a",
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        ),
    )
    .await?;
    r.call(
        "apply/missing-kind",
        ap(
            "s",
            "fieldManager=a",
            &json!({"apiVersion": "v1", "metadata": {"name": "s"}}),
        ),
    )
    .await?;
    r.call(
        "apply/dry-run",
        ap(
            "d",
            "fieldManager=a&dryRun=All",
            &cm("d", json!({"x": "1"})),
        ),
    )
    .await?;
    r.call("apply/get-after-dry-run", Req::get(format!("{cms}/d")))
        .await?;
    r.call(
        "apply/yaml-body",
        patch(format!("{cms}/yb?fieldManager=a"), APPLY, &json!(null)).raw_body(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yb\ndata:\n  k: v\n".to_vec(),
        ),
    )
    .await?;
    // YAML 1.1, as kube-apiserver reads it: a bare `y` is the boolean true.
    r.call(
        "apply/yaml-name-y-is-a-boolean",
        patch(format!("{cms}/y?fieldManager=a"), APPLY, &json!(null)).raw_body(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n".to_vec(),
        ),
    )
    .await?;
    r.call(
        "apply/invalid-yaml",
        patch(format!("{cms}/y?fieldManager=a"), APPLY, &json!(null))
            .raw_body(b"apiVersion: v1\nkind: [\n".to_vec()),
    )
    .await?;

    // A Deployment: list-map keys (containers by name) in fieldsV1.
    let deps = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let dep = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": containers}}}})
    };
    r.call(
        "apply/deployment",
        patch(
            format!("{deps}/web?fieldManager=a"),
            APPLY,
            &dep(json!([{"name": "c", "image": "nginx"}])),
        ),
    )
    .await?;
    r.call(
        "apply/deployment-second-manager-adds-container",
        patch(
            format!("{deps}/web?fieldManager=b"),
            APPLY,
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                    "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox"}]}}}}),
        ),
    )
    .await?;
    r.call(
        "apply/deployment-conflict-on-image",
        patch(
            format!("{deps}/web?fieldManager=b"),
            APPLY,
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "httpd"}]}}}}),
        ),
    )
    .await?;
    r.call(
        "apply/deployment-invalid",
        patch(
            format!("{deps}/bad?fieldManager=a"),
            APPLY,
            &dep(json!([{"name": "c", "image": ""}])),
        ),
    )
    .await?;
    wrong_types(r, &cms, &deps).await
}

/// A wrongly typed value in an apply configuration: structured-merge-diff's
/// plain error, a 500 (kubernetes/kubernetes#139253), worded per expected
/// type; the same body in a create is the JSON decoder's 400.
async fn wrong_types(r: &Run, cms: &str, deps: &str) -> anyhow::Result<()> {
    let bad_cm = cm("wt", json!({"message": 5}));
    r.call(
        "apply/wrong-type-string",
        patch(format!("{cms}/wt?fieldManager=a"), APPLY, &bad_cm),
    )
    .await?;
    r.call(
        "apply/wrong-type-create-is-a-decoding-error",
        Req::with_body("POST", cms.to_string(), &bad_cm),
    )
    .await?;
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "wt"},
        "spec": {"replicas": "two", "selector": {"matchLabels": {"app": "wt"}},
                 "template": {"metadata": {"labels": {"app": "wt"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    r.call(
        "apply/wrong-type-numeric",
        patch(format!("{deps}/wt?fieldManager=a"), APPLY, &d),
    )
    .await?;
    d["spec"]["replicas"] = json!(1);
    d["spec"]["template"]["spec"]["containers"][0]["ports"] =
        json!([{"containerPort": 80, "name": 5}]);
    r.call(
        "apply/wrong-type-in-keyed-lists",
        patch(format!("{deps}/wt?fieldManager=a"), APPLY, &d),
    )
    .await?;
    d["spec"]["template"]["spec"]["containers"][0]["ports"] = json!([]);
    d["spec"]["strategy"] = json!("Recreate");
    r.call(
        "apply/wrong-type-map",
        patch(format!("{deps}/wt?fieldManager=a"), APPLY, &d),
    )
    .await?;
    Ok(())
}
