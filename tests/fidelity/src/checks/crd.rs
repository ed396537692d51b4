//! CustomResourceDefinitions: their own validation, conditions and
//! discovery; custom objects' defaults, pruning, strict field validation,
//! wrong types, scale and status subresources, tables, size limit.

use std::time::Duration;

use serde_json::{Value, json};

use super::{MERGE, list_view, patch};
use crate::run::Run;
use crate::target::{Req, TABLE};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn crd(group: &str, plural: &str, kind: &str, schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind,
                           "shortNames": ["fw"], "categories": ["fidelity"]},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
                               "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                               "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}
    })
}

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 1, "minimum": 0},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "replicas": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "nested": {"type": "object", "default": {}, "properties": {"depth": {"type": "integer", "default": 3}}}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}})
}

pub async fn crd_area(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("crd").await?;
    let group = format!("{}.fidelity.example.com", r.token);
    let created = r
        .send(Req::with_body(
            "POST",
            CRDS,
            &crd(&group, "widgets", "Widget", schema()),
        ))
        .await?;
    r.record(
        "crd/create",
        json!({"code": created.code, "kind": created.json()["kind"]}),
    );
    let name = format!("{CRDS}/widgets.{group}");
    let mut conditions = Value::Null;
    for _ in 0..300 {
        let j = r.send(Req::get(name.clone())).await?.json();
        let c = &j["status"]["conditions"];
        if c.as_array()
            .into_iter()
            .flatten()
            .any(|x| x["type"] == "Established" && x["status"] == "True")
        {
            conditions = c.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut conds: Vec<Value> = conditions
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"type": c["type"], "status": c["status"], "reason": c["reason"], "message": c["message"]}))
        .collect();
    conds.sort_by_key(|c| c["type"].as_str().unwrap_or_default().to_string());
    r.record("crd/established-conditions", json!(conds));
    let stored = r.send(Req::get(name.clone())).await?.json();
    r.record("crd/stored-spec", stored["spec"].clone());
    let base = format!("/apis/{group}/v1/namespaces/{ns}/widgets");
    r.until_ok(&base).await?;
    let disc = r.send(Req::get(format!("/apis/{group}/v1"))).await?;
    r.record("crd/discovery", Run::view(&disc));

    let w = |name: &str, spec: Value| json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": name}, "spec": spec});
    let post = |q: &str, b: &Value| Req::with_body("POST", format!("{base}{q}"), b);
    r.call("crd/defaults", post("", &w("d", json!({"replicas": 1}))))
        .await?;
    r.call(
        "crd/unknown-field-strict",
        post("?fieldValidation=Strict", &w("s", json!({"bogus": 1}))),
    )
    .await?;
    r.call(
        "crd/unknown-field-warn",
        post("?fieldValidation=Warn", &w("wn", json!({"bogus": 1}))),
    )
    .await?;
    r.call(
        "crd/unknown-field-ignore",
        post("?fieldValidation=Ignore", &w("ig", json!({"bogus": 1}))),
    )
    .await?;
    r.call(
        "crd/unknown-field-default",
        post("", &w("df", json!({"bogus": 1}))),
    )
    .await?;
    r.call("crd/unknown-metadata-field-strict", post("?fieldValidation=Strict", &json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "mf", "bogus": 1}}))).await?;
    r.call("crd/wrong-type", post("", &w("wt", json!({"size": "big"}))))
        .await?;
    r.call("crd/enum", post("", &w("en", json!({"mode": "c"}))))
        .await?;
    r.call("crd/minimum", post("", &w("mi", json!({"size": -1}))))
        .await?;
    r.call(
        "crd/max-items",
        post("", &w("mx", json!({"tags": ["a", "b", "c"]}))),
    )
    .await?;
    // kube-apiserver lists the errors of a CR in Go map order (random from
    // run to run): compared as sets.
    let resp = r
        .send(post("", &w("se", json!({"size": "big", "mode": "c"}))))
        .await?;
    r.record("crd/several-errors", errors_as_sets(Run::view(&resp)));
    r.call("crd/invalid-name", post("", &w("Bad_Name", json!({}))))
        .await?;
    r.call(
        "crd/too-large",
        post(
            "",
            &w(
                "big",
                json!({"mode": "a", "pad": "x".repeat(2 * 1024 * 1024)}),
            ),
        ),
    )
    .await
    .map(|_| ())?;

    // Scale and status subresources.
    r.send(post("", &w("sc", json!({"replicas": 2})))).await?;
    r.call("crd/scale-get", Req::get(format!("{base}/sc/scale")))
        .await?;
    r.call(
        "crd/scale-patch",
        patch(
            format!("{base}/sc/scale"),
            MERGE,
            &json!({"spec": {"replicas": 5}}),
        ),
    )
    .await?;
    let after = r.send(Req::get(format!("{base}/sc"))).await?.json();
    r.record("crd/scale-changed-spec", json!({"replicas": after["spec"]["replicas"], "generation": after["metadata"]["generation"]}));
    r.call(
        "crd/status-patch-ignores-spec",
        patch(
            format!("{base}/sc/status"),
            MERGE,
            &json!({"spec": {"size": 9}, "status": {"replicas": 5}}),
        ),
    )
    .await?;
    r.call(
        "crd/main-patch-ignores-status",
        patch(
            format!("{base}/sc"),
            MERGE,
            &json!({"status": {"replicas": 7}}),
        ),
    )
    .await?;
    for (id, p) in [
        ("crd/table", base.clone()),
        ("crd/table-one", format!("{base}/sc")),
    ] {
        let resp = r.send(Req::get(p).accept(TABLE)).await?;
        let mut v = Run::view(&resp);
        // Column descriptions (Go doc text) are not shown by kubectl; not compared.
        for c in v["body"]["columnDefinitions"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            if let Some(o) = c.as_object_mut() {
                o.remove("description");
            }
        }
        r.record(id, v);
    }
    let l = r.send(Req::get(format!("{base}?limit=1"))).await?;
    r.record("crd/list-limit", list_view(l.code, &l.json()));

    // CRDs the API server must refuse.
    let plain = json!({"type": "object"});
    let bad: Vec<(&str, Value)> = vec![
        ("non-structural", {
            let mut c = crd(
                &format!("ns.{group}"),
                "things",
                "Thing",
                json!({"properties": {"spec": {"type": "object"}}}),
            );
            c["spec"]["versions"][0]["subresources"] = json!({});
            c
        }),
        (
            "builtin-group",
            crd("apps", "replicasets", "ReplicaSet", plain.clone()),
        ),
        (
            "group-without-dot",
            crd("widgets", "gadgets", "Gadget", plain.clone()),
        ),
        ("name-mismatch", {
            let mut c = crd(&format!("nm.{group}"), "things", "Thing", plain.clone());
            c["metadata"]["name"] = json!(format!("other.nm.{group}"));
            c
        }),
        ("no-storage-version", {
            let mut c = crd(&format!("sv.{group}"), "things", "Thing", plain.clone());
            c["spec"]["versions"][0]["storage"] = json!(false);
            c
        }),
        (
            "bad-default",
            crd(
                &format!("bd.{group}"),
                "things",
                "Thing",
                json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}}}}),
            ),
        ),
    ];
    for (id, body) in bad {
        let resp = r.send(Req::with_body("POST", CRDS, &body)).await?;
        let mut v = Run::view(&resp);
        if resp.ok() {
            v = json!({"code": resp.code, "accepted": true});
        }
        r.record(&format!("crd/refuse-{id}"), v);
    }
    let del = r
        .send(Req::with_body("DELETE", name.clone(), &json!({})))
        .await?;
    r.record("crd/delete", json!({"code": del.code}));
    let mut gone = 0;
    for _ in 0..300 {
        gone = r.send(Req::get(base.clone())).await?.code;
        if gone == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    r.record("crd/resource-gone-after-delete", json!(gone));
    Ok(())
}

/// A 422 view with `details.causes` sorted by field and the `[a, b]` list of
/// the message sorted.
fn errors_as_sets(mut v: Value) -> Value {
    if let Some(causes) = v
        .pointer_mut("/body/details/causes")
        .and_then(Value::as_array_mut)
    {
        causes.sort_by_key(|c| c["field"].as_str().unwrap_or_default().to_string());
    }
    if let Some(m) = v.pointer("/body/message").and_then(Value::as_str)
        && let Some((head, list)) = m.split_once(": [")
        && let Some(list) = list.strip_suffix(']')
    {
        let mut parts: Vec<&str> = list.split(", spec.").collect();
        let first = parts.remove(0).to_string();
        let mut items: Vec<String> = vec![first];
        items.extend(parts.iter().map(|p| format!("spec.{p}")));
        items.sort();
        v["body"]["message"] = Value::String(format!("{head}: [{}]", items.join(", ")));
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_lists_compare_as_sets() {
        let a = serde_json::json!({"body": {"message": "W \"se\" is invalid: [spec.size: x, y, spec.mode: z]",
            "details": {"causes": [{"field": "spec.size"}, {"field": "spec.mode"}]}}});
        let b = serde_json::json!({"body": {"message": "W \"se\" is invalid: [spec.mode: z, spec.size: x, y]",
            "details": {"causes": [{"field": "spec.mode"}, {"field": "spec.size"}]}}});
        assert_eq!(super::errors_as_sets(a), super::errors_as_sets(b));
    }
}
