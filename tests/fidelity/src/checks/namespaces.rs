//! Namespaces: what a new one looks like, the protected ones, the
//! `default/kubernetes` Service, deletion and the lifecycle guard.

use std::time::Duration;

use serde_json::json;

use super::cm;
use crate::run::Run;
use crate::target::Req;

pub async fn namespaces(r: &Run) -> anyhow::Result<()> {
    let name = r.ns("nsx");
    r.call(
        "namespaces/create",
        Req::with_body(
            "POST",
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        ),
    )
    .await?;
    r.call(
        "namespaces/name-64-characters",
        Req::with_body(
            "POST",
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n".repeat(64)}}),
        ),
    )
    .await?;
    r.call(
        "namespaces/invalid-name",
        Req::with_body(
            "POST",
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Team_A"}}),
        ),
    )
    .await?;
    for protected in ["default", "kube-system", "kube-public"] {
        r.call_status(
            &format!("namespaces/delete-{protected}"),
            Req::with_body(
                "DELETE",
                format!("/api/v1/namespaces/{protected}?dryRun=All"),
                &json!({}),
            ),
        )
        .await?;
    }
    let svc = r
        .send(Req::get("/api/v1/namespaces/default/services/kubernetes"))
        .await?;
    let j = svc.json();
    r.record(
        "namespaces/kubernetes-service",
        json!({"code": svc.code, "labels": j["metadata"]["labels"], "type": j["spec"]["type"],
               "ports": j["spec"]["ports"].as_array().map(|ps| ps.iter().map(|p| json!({"name": p["name"], "port": p["port"], "protocol": p["protocol"]})).collect::<Vec<_>>())}),
    );
    // What controllers put into a new namespace (the `default` ServiceAccount
    // within a second or so where a controller makes one; 10 s at most).
    for _ in 0..100 {
        let sa = format!("/api/v1/namespaces/{name}/serviceaccounts/default");
        if r.send(Req::get(sa)).await?.ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (id, res) in [
        ("service-accounts", "serviceaccounts"),
        ("config-maps", "configmaps"),
    ] {
        let l = r
            .send(Req::get(format!("/api/v1/namespaces/{name}/{res}")))
            .await?;
        r.record(
            &format!("namespaces/new-namespace-{id}"),
            json!(super::names(&l.json())),
        );
    }
    // Deletion: content first, then the namespace; new content is refused
    // meanwhile. A finalizer on one object keeps the namespace terminating
    // until it is removed, so the refusal is observed on every cluster.
    let cms = format!("/api/v1/namespaces/{name}/configmaps");
    let mut held = cm("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    r.send(Req::with_body("POST", cms.clone(), &held)).await?;
    let del = r
        .send(Req::with_body(
            "DELETE",
            format!("/api/v1/namespaces/{name}"),
            &json!({}),
        ))
        .await?;
    let dj = del.json();
    r.record(
        "namespaces/delete",
        json!({"code": del.code, "kind": dj["kind"], "phase": dj["status"]["phase"], "deletionTimestamp": dj["metadata"]["deletionTimestamp"].is_string()}),
    );
    r.call_status(
        "namespaces/create-in-terminating-namespace",
        Req::with_body("POST", cms.clone(), &cm("late", json!({}))),
    )
    .await?;
    // The held object is marked for deletion by the namespace's deletion.
    let mut marked = false;
    for _ in 0..100 {
        let h = r.send(Req::get(format!("{cms}/held"))).await?.json();
        if h["metadata"]["deletionTimestamp"].is_string() {
            marked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    r.record("namespaces/deletion-marks-contents", json!(marked));
    r.send(super::patch(
        format!("{cms}/held"),
        super::MERGE,
        &json!({"metadata": {"finalizers": null}}),
    ))
    .await?;
    let mut gone = false;
    for _ in 0..300 {
        if r.send(Req::get(format!("/api/v1/namespaces/{name}")))
            .await?
            .code
            == 404
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    r.record("namespaces/deleted-within-30s", json!(gone));
    Ok(())
}
