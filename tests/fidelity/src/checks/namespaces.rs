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
    // What controllers put into a new namespace (a few seconds later).
    tokio::time::sleep(Duration::from_secs(3)).await;
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
    // Deletion: content first, then the namespace; new content is refused meanwhile.
    r.send(Req::with_body(
        "POST",
        format!("/api/v1/namespaces/{name}/configmaps"),
        &cm("c", json!({})),
    ))
    .await?;
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
    let late = r
        .send(Req::with_body(
            "POST",
            format!("/api/v1/namespaces/{name}/configmaps"),
            &cm("late", json!({})),
        ))
        .await?;
    // The namespace may already be gone (404) on a fast cluster: both outcomes are the
    // same guard, so record the reason only when refused as terminating.
    let lj = late.json();
    r.record(
        "namespaces/create-in-terminating-namespace",
        json!({"refused": !late.ok(), "reason": if late.code == 403 { lj["reason"].clone() } else { json!("-") },
               "message": if late.code == 403 { lj["message"].clone() } else { json!("-") }}),
    );
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
