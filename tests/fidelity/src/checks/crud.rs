//! Create/read/update/delete semantics, their errors, and pagination.
//! The conformance suite's cases (host/apiserver/tests/conformance.rs), asked
//! of both servers.

use serde_json::{Value, json};

use super::{JSON_PATCH, MERGE, STRATEGIC, cm, list_view, patch};
use crate::run::Run;
use crate::target::Req;

pub async fn crud(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("crud").await?;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let post = |b: &Value| Req::with_body("POST", base.clone(), b);
    let created = r
        .call("crud/create", post(&cm("a", json!({"k": "1"}))))
        .await?;
    r.call("crud/get", Req::get(format!("{base}/a"))).await?;
    r.call("crud/create-duplicate", post(&cm("a", json!({}))))
        .await?;
    r.call("crud/get-missing", Req::get(format!("{base}/missing")))
        .await?;

    let mut obj = created.json();
    obj["data"]["k"] = json!("2");
    r.call(
        "crud/update",
        Req::with_body("PUT", format!("{base}/a"), &obj),
    )
    .await?;
    r.call(
        "crud/update-stale-resource-version",
        Req::with_body("PUT", format!("{base}/a"), &obj),
    )
    .await?;
    let cur = r.send(Req::get(format!("{base}/a"))).await?.json();
    let same = r
        .send(Req::with_body("PUT", format!("{base}/a"), &cur))
        .await?
        .json();
    r.record(
        "crud/noop-update-keeps-resource-version",
        json!(cur["metadata"]["resourceVersion"] == same["metadata"]["resourceVersion"]),
    );
    let mut unconditional = cm("a", json!({"k": "3"}));
    unconditional["metadata"]["labels"] = json!({"x": "y"});
    r.call(
        "crud/update-without-resource-version",
        Req::with_body("PUT", format!("{base}/a"), &unconditional),
    )
    .await?;
    r.call(
        "crud/update-missing",
        Req::with_body("PUT", format!("{base}/nope"), &cm("nope", json!({}))),
    )
    .await?;
    r.call(
        "crud/update-name-mismatch",
        Req::with_body("PUT", format!("{base}/a"), &cm("b", json!({}))),
    )
    .await?;
    let mut other_ns = cm("c", json!({}));
    other_ns["metadata"]["namespace"] = json!("elsewhere");
    r.call("crud/create-namespace-mismatch", post(&other_ns))
        .await?;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    r.call("crud/create-kind-mismatch", post(&secret)).await?;
    r.call("crud/create-invalid-name", post(&cm("Bad_Name", json!({}))))
        .await?;
    r.call(
        "crud/create-name-254",
        post(&cm(&"n".repeat(254), json!({}))),
    )
    .await?;
    r.call(
        "crud/create-without-name",
        post(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
    )
    .await?;
    r.call(
        "crud/create-generate-name",
        post(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}),
        ),
    )
    .await?;
    r.call(
        "crud/create-invalid-json",
        Req::get(base.clone())
            .raw_body(b"{not json".to_vec())
            .method("POST"),
    )
    .await?;
    r.call(
        "crud/create-unsupported-media-type",
        post(&cm("t", json!({}))).content_type("text/plain"),
    )
    .await?;
    r.call(
        "crud/create-in-missing-namespace",
        Req::with_body(
            "POST",
            "/api/v1/namespaces/nowhere-fid/configmaps",
            &cm("x", json!({})),
        ),
    )
    .await?;
    r.call(
        "crud/patch-collection",
        patch(base.clone(), MERGE, &json!({})),
    )
    .await?;
    r.call(
        "crud/get-unknown-resource",
        Req::get(format!("/api/v1/namespaces/{ns}/widgets")),
    )
    .await?;
    r.call(
        "crud/get-unknown-group",
        Req::get("/apis/nope.example.com/v1"),
    )
    .await?;

    // Patches.
    r.call(
        "crud/patch-merge",
        patch(format!("{base}/a"), MERGE, &json!({"data": {"m": "1"}})),
    )
    .await?;
    r.call(
        "crud/patch-json",
        patch(
            format!("{base}/a"),
            JSON_PATCH,
            &json!([{"op": "add", "path": "/data/j", "value": "1"}]),
        ),
    )
    .await?;
    r.call(
        "crud/patch-json-test-fails",
        patch(
            format!("{base}/a"),
            JSON_PATCH,
            &json!([{"op": "test", "path": "/data/j", "value": "2"}]),
        ),
    )
    .await?;
    r.call(
        "crud/patch-json-bad-path",
        patch(
            format!("{base}/a"),
            JSON_PATCH,
            &json!([{"op": "replace", "path": "/data/none", "value": "2"}]),
        ),
    )
    .await?;
    r.call(
        "crud/patch-strategic",
        patch(
            format!("{base}/a"),
            STRATEGIC,
            &json!({"metadata": {"labels": {"s": "1"}}}),
        ),
    )
    .await?;
    r.call(
        "crud/patch-missing",
        patch(format!("{base}/nope"), MERGE, &json!({"data": {}})),
    )
    .await?;
    r.call(
        "crud/patch-unsupported-type",
        patch(format!("{base}/a"), "application/xml", &json!({})),
    )
    .await?;
    r.call(
        "crud/patch-invalid-body",
        patch(format!("{base}/a"), MERGE, &json!([1, 2])),
    )
    .await?;
    r.call(
        "crud/patch-change-name",
        patch(
            format!("{base}/a"),
            MERGE,
            &json!({"metadata": {"name": "other"}}),
        ),
    )
    .await?;

    // Dry run, preconditions, delete.
    r.call(
        "crud/create-dry-run",
        post(&cm("dry", json!({}))).path_suffix("?dryRun=All"),
    )
    .await?;
    r.call("crud/get-after-dry-run", Req::get(format!("{base}/dry")))
        .await?;
    r.call(
        "crud/delete-uid-precondition",
        Req::with_body(
            "DELETE",
            format!("{base}/a"),
            &json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}),
        ),
    )
    .await?;
    r.call(
        "crud/delete-rv-precondition",
        Req::with_body(
            "DELETE",
            format!("{base}/a"),
            &json!({"preconditions": {"resourceVersion": "1"}}),
        ),
    )
    .await?;
    r.call(
        "crud/delete",
        Req::with_body("DELETE", format!("{base}/a"), &json!({})),
    )
    .await?;
    r.call(
        "crud/delete-missing",
        Req::with_body("DELETE", format!("{base}/a"), &json!({})),
    )
    .await?;
    r.call(
        "crud/delete-dry-run-missing",
        Req::with_body("DELETE", format!("{base}/a?dryRun=All"), &json!({})),
    )
    .await?;

    // Selectors and delete-collection.
    for (n, l) in [("s1", "one"), ("s2", "two"), ("s3", "one")] {
        let mut c = cm(n, json!({}));
        c["metadata"]["labels"] = json!({"sel": l});
        r.send(post(&c)).await?;
    }
    for (id, q) in [
        ("crud/list-label-selector", "labelSelector=sel%3Done"),
        (
            "crud/list-set-selector",
            "labelSelector=sel+in+(one,two),sel!%3Dtwo",
        ),
        (
            "crud/list-field-selector",
            "fieldSelector=metadata.name%3Ds2",
        ),
        ("crud/list-bad-label-selector", "labelSelector=a%3D%3D%3Db"),
        (
            "crud/list-unsupported-field-selector",
            "fieldSelector=data.x%3D1",
        ),
    ] {
        let resp = r.send(Req::get(format!("{base}?{q}"))).await?;
        let j = resp.json();
        if resp.ok() {
            r.record(id, list_view(resp.code, &j));
        } else {
            r.record(id, json!({"code": resp.code, "body": j}));
        }
    }
    r.call(
        "crud/delete-collection",
        Req::with_body(
            "DELETE",
            format!("{base}?labelSelector=sel%3Done"),
            &json!({}),
        ),
    )
    .await
    .map(|_| ())?;
    let rest = r
        .send(Req::get(format!("{base}?labelSelector=sel")))
        .await?;
    r.record(
        "crud/after-delete-collection",
        list_view(rest.code, &rest.json()),
    );
    Ok(())
}

/// limit/continue, remainingItemCount, consistency across pages, bad tokens.
pub async fn pagination(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("pagination").await?;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    for i in 0..7 {
        let mut c = cm(&format!("p-{i}"), json!({}));
        c["metadata"]["labels"] = json!({"parity": if i % 2 == 0 { "even" } else { "odd" }});
        r.send(Req::with_body("POST", base.clone(), &c)).await?;
    }
    let page = |q: String| Req::get(format!("{base}?{q}"));
    let p1 = r.send(page("limit=3".into())).await?;
    let j1 = p1.json();
    r.record("pagination/first-page", list_view(p1.code, &j1));
    let token = j1["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // A write between pages must not show up in later pages.
    r.send(Req::with_body("POST", base.clone(), &cm("p-9", json!({}))))
        .await?;
    let p2 = r.send(page(format!("limit=3&continue={token}"))).await?;
    let j2 = p2.json();
    r.record("pagination/second-page", list_view(p2.code, &j2));
    r.record(
        "pagination/pages-share-resource-version",
        json!(j1["metadata"]["resourceVersion"] == j2["metadata"]["resourceVersion"]),
    );
    let token2 = j2["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let p3 = r.send(page(format!("limit=3&continue={token2}"))).await?;
    r.record("pagination/last-page", list_view(p3.code, &p3.json()));
    let sel = r
        .send(page("limit=2&labelSelector=parity%3Deven".into()))
        .await?;
    r.record(
        "pagination/with-label-selector",
        list_view(sel.code, &sel.json()),
    );
    let all = r.send(page("limit=0".into())).await?;
    r.record("pagination/limit-zero", list_view(all.code, &all.json()));
    r.call(
        "pagination/bad-continue-token",
        page("limit=3&continue=bm90LWEtdG9rZW4".into()),
    )
    .await?;
    r.call(
        "pagination/continue-with-resource-version",
        page(format!("limit=3&continue={token}&resourceVersion=1")),
    )
    .await?;
    let rv0 = r.send(page("limit=2&resourceVersion=0".into())).await?;
    r.record(
        "pagination/resource-version-0-ignores-limit",
        json!({"code": rv0.code, "items": super::names(&rv0.json()).len()}),
    );
    let ns_list = r.send(Req::get("/api/v1/namespaces?limit=1")).await?;
    let nj = ns_list.json();
    r.record(
        "pagination/cluster-scoped-remaining-item-count-present",
        json!({"code": ns_list.code, "hasContinue": nj["metadata"]["continue"].is_string(),
               "hasRemaining": nj["metadata"]["remainingItemCount"].is_number()}),
    );
    Ok(())
}
