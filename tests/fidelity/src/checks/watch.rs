//! Watch event sequences: resume from a resourceVersion, label-selector
//! transitions, a single object by field selector, and the watch-list
//! protocol (initial events, then a bookmark marking their end).

use serde_json::{Value, json};

use super::{MERGE, cm, patch};
use crate::run::Run;
use crate::target::Req;

/// The events of a watch body (one JSON object per line).
fn events(body: &[u8]) -> Vec<Value> {
    body.split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| {
            serde_json::from_slice(l)
                .unwrap_or_else(|_| json!({"unparsed": String::from_utf8_lossy(l)}))
        })
        .collect()
}

/// Events as (type, object) with bookmarks reduced to their annotations.
fn view(code: u16, body: &[u8]) -> Value {
    let evs: Vec<Value> = events(body)
        .into_iter()
        // Periodic bookmarks (no annotations) come when the server chooses
        // (kube-apiserver's watch cache: near the watch's timeout, by chance).
        .filter(|e| !(e["type"] == "BOOKMARK" && e["object"]["metadata"]["annotations"].is_null()))
        .map(|e| {
            if e["type"] == "BOOKMARK" {
                json!({"type": "BOOKMARK", "annotations": e["object"]["metadata"]["annotations"]})
            } else {
                json!({"type": e["type"], "object": e["object"]})
            }
        })
        .collect();
    json!({"code": code, "events": evs})
}

pub async fn watch(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("watch").await?;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let post = |b: &Value| Req::with_body("POST", base.clone(), b);
    let a = r.send(post(&cm("a", json!({})))).await?.json();
    let from = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    r.send(post(&cm("b", json!({})))).await?;
    r.send(patch(
        format!("{base}/a"),
        MERGE,
        &json!({"data": {"x": "1"}}),
    ))
    .await?;
    r.send(patch(
        format!("{base}/a"),
        MERGE,
        &json!({"metadata": {"labels": {"w": "1"}}}),
    ))
    .await?;
    r.send(patch(
        format!("{base}/a"),
        MERGE,
        &json!({"metadata": {"labels": {"w": "2"}}}),
    ))
    .await?;
    r.send(Req::with_body("DELETE", format!("{base}/b"), &json!({})))
        .await?;

    let w = |q: &str| Req::get(format!("{base}?watch=1&timeoutSeconds=2&{q}"));
    let (all, sel, one, list) = tokio::join!(
        r.send(w(&format!("resourceVersion={from}"))),
        r.send(w(&format!("resourceVersion={from}&labelSelector=w%3D1"))),
        r.send(w(&format!(
            "resourceVersion={from}&fieldSelector=metadata.name%3Db"
        ))),
        r.send(w(
            "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
        )),
    );
    let all = all?;
    r.record(
        "watch/resume-from-resource-version",
        view(all.code, &all.body),
    );
    let sel = sel?;
    r.record(
        "watch/label-selector-transitions",
        view(sel.code, &sel.body),
    );
    let one = one?;
    r.record("watch/field-selector", view(one.code, &one.body));
    let list = list?;
    r.record(
        "watch/watch-list-initial-events",
        view(list.code, &list.body),
    );
    let bad = r.send(w("resourceVersion=abc")).await?;
    r.record("watch/invalid-resource-version", view(bad.code, &bad.body));
    Ok(())
}
