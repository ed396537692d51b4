//! Deletion and lifecycle: finalizers, garbage collection by owner
//! references (background, foreground, orphan), the status subresource and
//! generation of a built-in kind.

use std::time::Duration;

use serde_json::{Value, json};

use super::{MERGE, cm, patch};
use crate::run::Run;
use crate::target::Req;

/// Polls `path` until it is 404 (30 s at most); true when it went.
async fn gone(r: &Run, path: &str) -> anyhow::Result<bool> {
    for _ in 0..300 {
        if r.send(Req::get(path)).await?.code == 404 {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(false)
}

pub async fn lifecycle(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("lifecycle").await?;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let create = |body: Value| Req::with_body("POST", base.clone(), &body);
    let owned = |name: &str, owner: &Value, block: bool| {
        let mut c = cm(name, json!({}));
        c["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block}]);
        c
    };
    for (policy, block) in [
        ("Background", false),
        ("Foreground", true),
        ("Orphan", false),
    ] {
        let p = policy.to_lowercase();
        let owner = r
            .send(create(cm(&format!("owner-{p}"), json!({}))))
            .await?
            .json();
        r.send(create(owned(&format!("dep-{p}"), &owner, block)))
            .await?;
        r.call(
            &format!("lifecycle/delete-{p}"),
            Req::with_body(
                "DELETE",
                format!("{base}/owner-{p}"),
                &json!({"propagationPolicy": policy}),
            ),
        )
        .await?;
        let owner_gone = gone(r, &format!("{base}/owner-{p}")).await?;
        let dep_path = format!("{base}/dep-{p}");
        let dep_gone = if policy == "Orphan" {
            // The collector has had its chance to (wrongly) delete it.
            tokio::time::sleep(Duration::from_secs(1)).await;
            r.send(Req::get(dep_path.clone())).await?.code == 404
        } else {
            gone(r, &dep_path).await?
        };
        let dj = r.send(Req::get(dep_path)).await?.json();
        r.record(
            &format!("lifecycle/after-delete-{p}"),
            json!({"ownerGone": owner_gone, "dependentGone": dep_gone,
                   "dependentOwnerReferences": dj["metadata"]["ownerReferences"]}),
        );
    }

    // Finalizers hold deletion; none may be added meanwhile.
    let mut f = cm("held", json!({}));
    f["metadata"]["finalizers"] = json!(["example.com/hold"]);
    r.send(create(f)).await?;
    r.call(
        "lifecycle/delete-with-finalizer",
        Req::with_body("DELETE", format!("{base}/held"), &json!({})),
    )
    .await?;
    r.call(
        "lifecycle/add-finalizer-during-deletion",
        patch(
            format!("{base}/held"),
            MERGE,
            &json!({"metadata": {"finalizers": ["example.com/hold", "example.com/late"]}}),
        ),
    )
    .await?;
    r.call(
        "lifecycle/update-during-deletion",
        patch(format!("{base}/held"), MERGE, &json!({"data": {"a": "1"}})),
    )
    .await?;
    r.call(
        "lifecycle/delete-again",
        Req::with_body("DELETE", format!("{base}/held"), &json!({})),
    )
    .await?;
    r.call(
        "lifecycle/remove-finalizer",
        patch(
            format!("{base}/held"),
            MERGE,
            &json!({"metadata": {"finalizers": null}}),
        ),
    )
    .await?;
    r.record(
        "lifecycle/gone-after-finalizer",
        json!(gone(r, &format!("{base}/held")).await?),
    );

    // Generation and the status subresource of a Deployment.
    let deps = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    r.send(Req::with_body(
        "POST",
        deps.clone(),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"app": "d"}},
                         "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    ))
    .await?;
    let generation = |v: &Value| json!({"generation": v["metadata"]["generation"], "observed": v["status"]["observedGeneration"], "replicas": v["spec"]["replicas"], "statusReplicas": v["status"]["replicas"]});
    let s = r
        .send(patch(
            format!("{deps}/d/status"),
            MERGE,
            &json!({"status": {"replicas": 7, "observedGeneration": 1}, "spec": {"replicas": 5}}),
        ))
        .await?;
    r.record(
        "lifecycle/status-patch",
        json!({"code": s.code, "object": generation(&s.json())}),
    );
    let m = r
        .send(patch(
            format!("{deps}/d"),
            MERGE,
            &json!({"spec": {"replicas": 3}, "status": {"replicas": 1}}),
        ))
        .await?;
    r.record(
        "lifecycle/spec-patch",
        json!({"code": m.code, "object": generation(&m.json())}),
    );
    let l = r
        .send(patch(
            format!("{deps}/d"),
            MERGE,
            &json!({"metadata": {"labels": {"x": "y"}}}),
        ))
        .await?;
    r.record(
        "lifecycle/metadata-patch-keeps-generation",
        json!({"code": l.code, "object": generation(&l.json())}),
    );
    Ok(())
}
