//! Conformance of the embedded API server with kube-apiserver semantics,
//! exercised through a real `kube::Client` (typed and dynamic) over loopback.

mod common;

use std::collections::BTreeMap;

use common::{cm, eventually, rv, server, server_with, status};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
    WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

#[tokio::test]
async fn typed_crud_with_conflicts_and_not_found() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await?;
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let first_rv = rv(&created.metadata);
    assert!(first_rv > 0);

    let dup = status(api.create(&PostParams::default(), &cm("a", &[])).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "configmaps \"a\" already exists");

    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let updated = api.replace("a", &PostParams::default(), &changed).await?;
    assert!(rv(&updated.metadata) > first_rv);
    assert_eq!(updated.metadata.uid, created.metadata.uid);

    // Same stale resourceVersion again: 409 Conflict with the real message.
    let stale = status(api.replace("a", &PostParams::default(), &changed).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        stale.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    assert_eq!(api.get("a").await?.data.unwrap()["k"], "2");
    api.delete("a", &DeleteParams::default()).await?;
    let missing = status(api.get("a").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "configmaps \"a\" not found");
    assert!(srv.resource_version() > rv(&updated.metadata));
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn noop_update_does_not_bump_resource_version() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await?;
    let same = api.replace("a", &PostParams::default(), &created).await?;
    assert_eq!(rv(&same.metadata), rv(&created.metadata));
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn generate_name_and_namespace_must_exist() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut c = cm("", &[]);
    c.metadata.name = None;
    c.metadata.generate_name = Some("gen-".into());
    let created = api.create(&PostParams::default(), &c).await?;
    assert!(created.name_any().starts_with("gen-") && created.name_any().len() == 9);
    let nowhere: Api<ConfigMap> = Api::namespaced(client, "nowhere");
    let e = status(nowhere.create(&PostParams::default(), &cm("x", &[])).await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn list_with_selectors_and_consistent_pagination() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..25 {
        let mut c = cm(&format!("cm-{i:02}"), &[]);
        c.metadata.labels = Some(BTreeMap::from([
            (
                "parity".to_string(),
                if i % 2 == 0 { "even" } else { "odd" }.to_string(),
            ),
            ("idx".to_string(), i.to_string()),
        ]));
        api.create(&PostParams::default(), &c).await?;
    }
    let even = api
        .list(&ListParams::default().labels("parity=even"))
        .await?;
    assert_eq!(even.items.len(), 13);
    let set = api
        .list(&ListParams::default().labels("idx in (1,2,3),parity!=odd"))
        .await?;
    assert_eq!(
        set.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        vec!["cm-02"]
    );
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=cm-07"))
        .await?;
    assert_eq!(by_name.items.len(), 1);
    let bad = status(api.list(&ListParams::default().fields("data.x=1")).await);
    assert_eq!(bad.code, 400);

    let page1 = api.list(&ListParams::default().limit(10)).await?;
    assert_eq!(page1.items.len(), 10);
    let token = page1.metadata.continue_.clone().expect("more pages");
    // Writes after the first page must not leak into the following pages.
    api.create(&PostParams::default(), &cm("cm-99", &[]))
        .await?;
    api.delete("cm-20", &DeleteParams::default()).await?;
    let mut names: Vec<String> = page1.items.iter().map(|c| c.name_any()).collect();
    let mut token = Some(token);
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(10).continue_token(&t))
            .await?;
        assert_eq!(
            page.metadata.resource_version,
            page1.metadata.resource_version
        );
        names.extend(page.items.iter().map(|c| c.name_any()));
        token = page.metadata.continue_.filter(|s| !s.is_empty());
    }
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn watch_resumes_from_resource_version_without_gaps_or_duplicates() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api.create(&PostParams::default(), &cm("a", &[])).await?;
    let from = rv(&a.metadata);
    api.create(&PostParams::default(), &cm("b", &[])).await?;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await?;
    api.delete("b", &DeleteParams::default()).await?;
    let stream = api
        .watch(&WatchParams::default().timeout(2), &from.to_string())
        .await?;
    let events: Vec<_> = stream.try_collect().await?;
    let seen: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(c) => Some(("ADDED".into(), c.name_any())),
            WatchEvent::Modified(c) => Some(("MODIFIED".into(), c.name_any())),
            WatchEvent::Deleted(c) => Some(("DELETED".into(), c.name_any())),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("ADDED".to_string(), "b".to_string()),
            ("MODIFIED".to_string(), "a".to_string()),
            ("DELETED".to_string(), "b".to_string()),
        ]
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn watch_with_label_selector_turns_label_changes_into_added_and_deleted() -> anyhow::Result<()>
{
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api.create(&PostParams::default(), &cm("a", &[])).await?;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"sel": "yes"}}})),
    )
    .await?;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"sel": "no"}}})),
    )
    .await?;
    let wp = WatchParams::default().labels("sel=yes").timeout(1);
    let events: Vec<_> = api
        .watch(&wp, &rv(&a.metadata).to_string())
        .await?
        .try_collect()
        .await?;
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(_) => Some("ADDED"),
            WatchEvent::Modified(_) => Some("MODIFIED"),
            WatchEvent::Deleted(_) => Some("DELETED"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec!["ADDED", "DELETED"]);
    // The DELETED event carries the object as it last matched (the watch
    // cache's PrevObject), at the resourceVersion of the change.
    let now = api.get("a").await?;
    let Some(WatchEvent::Deleted(gone)) = events.last() else {
        anyhow::bail!("no DELETED event: {events:?}");
    };
    assert_eq!(gone.labels().get("sel").map(String::as_str), Some("yes"));
    assert_eq!(
        gone.metadata.resource_version,
        now.metadata.resource_version
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn watch_from_compacted_version_is_410_and_watcher_relists() -> anyhow::Result<()> {
    let (srv, client) = server_with(wr_apiserver::Config {
        watch_history: 5,
        ..Default::default()
    })
    .await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api.create(&PostParams::default(), &cm("c0", &[])).await?;
    for i in 1..10 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await?;
    }
    let mut stream = api
        .watch(&WatchParams::default(), &rv(&first.metadata).to_string())
        .await?
        .boxed();
    match stream.try_next().await? {
        Some(WatchEvent::Error(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected 410, got {other:?}"),
    }

    // kube-runtime's watcher: a 410 on re-watch makes it relist cleanly.
    let mut w = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut init_done = 0;
    let mut seen_late = false;
    let mut saw_gone = false;
    while init_done < 2 || !seen_late {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(20), w.next())
            .await?
            .expect("watcher ended");
        let ev = match ev {
            Ok(ev) => ev,
            Err(watcher::Error::WatchError(s)) if s.code == 410 => {
                saw_gone = true;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match ev {
            watcher::Event::InitDone => {
                init_done += 1;
                if init_done == 1 {
                    // Next watch connection gets 410; cut the current one.
                    srv.faults().force_gone(1);
                    srv.faults().set_watch(wr_apiserver::WatchFaults {
                        cut_after_events: Some(1),
                        gone_next: 1,
                        ..Default::default()
                    });
                    api.create(&PostParams::default(), &cm("late", &[])).await?;
                } else {
                    srv.faults().clear();
                }
            }
            watcher::Event::InitApply(c) if init_done == 1 && c.name_any() == "late" => {
                seen_late = true;
            }
            _ => {}
        }
    }
    assert!(saw_gone, "the re-watch was answered with 410");
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn server_side_apply_conflicts_between_managers_and_force() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "1"}});
    api.patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&a))
        .await?;
    let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "2"}});
    let conflict = status(
        api.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&b))
            .await,
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(conflict.message.contains("alice"), "{}", conflict.message);
    assert!(conflict.message.contains(".data.x"), "{}", conflict.message);
    let forced = api
        .patch("ssa", &PatchParams::apply("bob").force(), &Patch::Apply(&b))
        .await?;
    assert_eq!(forced.data.unwrap()["x"], "2");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"bob".to_string()));
    srv.shutdown().await;
    Ok(())
}

/// A patch that changes only managedFields is stored (kube-apiserver's no-op
/// check compares the encoded object, managedFields included): the way
/// client-go's `csaupgrade` moves a client-side manager's fields to an
/// applier, after which one apply removes the fields it no longer sets.
/// Checked against kube-apiserver v1.37 (the engine's Metacontroller
/// take-over, `tests/tests/engine_adoption.rs` on the real cluster).
#[tokio::test]
async fn a_patch_of_managed_fields_alone_moves_ownership() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams {
        field_manager: Some("old-client".into()),
        ..PostParams::default()
    };
    let made = api
        .create(&pp, &cm("moved", &[("keep", "1"), ("drop", "1")]))
        .await?;
    let mut entries = serde_json::to_value(made.metadata.managed_fields.clone())?;
    entries[0]["manager"] = json!("applier");
    entries[0]["operation"] = json!("Apply");
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": made.metadata.resource_version},
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
    ]))?;
    let moved = api
        .patch("moved", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await?;
    assert_ne!(rv(&moved.metadata), rv(&made.metadata), "a real write");
    let managers: Vec<String> = moved
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["applier"]);
    let keep = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "moved"}, "data": {"keep": "1"}});
    let after = api
        .patch(
            "moved",
            &PatchParams::apply("applier"),
            &Patch::Apply(&keep),
        )
        .await?;
    let data = after.data.unwrap_or_default();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["keep"]);
    srv.shutdown().await;
    Ok(())
}

/// Kubernetes SSA: applying the same value another manager applied makes the
/// field shared; when the first manager stops applying it, it stays (the
/// second still owns it). An apply that changes only ownership is a write.
#[tokio::test]
async fn server_side_apply_shared_ownership_survives_one_manager_letting_go() -> anyhow::Result<()>
{
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let both = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"x": "1", "y": "1"}});
    api.patch("shared", &PatchParams::apply("alice"), &Patch::Apply(&both))
        .await?;
    let x_only = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"x": "1"}});
    let shared = api
        .patch("shared", &PatchParams::apply("bob"), &Patch::Apply(&x_only))
        .await?;
    let managers: Vec<String> = shared
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"bob".to_string()), "{managers:?}");
    let y_only = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"y": "1"}});
    let after = api
        .patch(
            "shared",
            &PatchParams::apply("alice"),
            &Patch::Apply(&y_only),
        )
        .await?;
    let data = after.data.unwrap_or_default();
    assert_eq!(
        data.get("x").map(String::as_str),
        Some("1"),
        "bob still owns x"
    );
    assert_eq!(data.get("y").map(String::as_str), Some("1"));
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn finalizers_hold_deletion_and_cannot_be_added_during_it() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = cm("f", &[]);
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await?;
    api.delete("f", &DeleteParams::default()).await?;
    let held = api.get("f").await?;
    assert!(held.metadata.deletion_timestamp.is_some());

    let add = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}});
    let e = status(
        api.patch("f", &PatchParams::default(), &Patch::Merge(&add))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .contains("no new finalizers can be added if the object is being deleted")
    );

    let remove = json!({"metadata": {"finalizers": null}});
    api.patch("f", &PatchParams::default(), &Patch::Merge(&remove))
        .await?;
    assert_eq!(status(api.get("f").await).code, 404);
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn delete_preconditions() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let c = api.create(&PostParams::default(), &cm("p", &[])).await?;
    let wrong = DeleteParams::default().preconditions(Preconditions {
        uid: Some("not-the-uid".into()),
        resource_version: None,
    });
    assert_eq!(status(api.delete("p", &wrong).await).code, 409);
    let stale = DeleteParams::default().preconditions(Preconditions {
        uid: None,
        resource_version: Some("1".into()),
    });
    assert_eq!(status(api.delete("p", &stale).await).code, 409);
    let right = DeleteParams::default().preconditions(Preconditions {
        uid: c.metadata.uid.clone(),
        resource_version: c.metadata.resource_version.clone(),
    });
    api.delete("p", &right).await?;
    assert_eq!(status(api.get("p").await).code, 404);
    srv.shutdown().await;
    Ok(())
}

fn owned_by(name: &str, owner: &ConfigMap, block: bool) -> ConfigMap {
    let mut c = cm(name, &[]);
    c.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.name_any(),
            uid: owner.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(block),
            controller: Some(true),
        },
    ]);
    c
}

#[tokio::test]
async fn background_garbage_collection_removes_dependents() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let parent = api
        .create(&PostParams::default(), &cm("parent", &[]))
        .await?;
    api.create(&PostParams::default(), &owned_by("child", &parent, false))
        .await?;
    api.delete("parent", &DeleteParams::background()).await?;
    assert!(eventually(|| async { api.get_opt("child").await.ok().flatten().is_none() }).await);
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let parent = api
        .create(&PostParams::default(), &cm("parent", &[]))
        .await?;
    let mut child = owned_by("child", &parent, true);
    child.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &child).await?;
    api.delete("parent", &DeleteParams::foreground()).await?;
    // The child is being deleted but held; the parent waits for it.
    assert!(
        eventually(|| async {
            api.get_opt("child")
                .await
                .ok()
                .flatten()
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
        })
        .await
    );
    let p = api.get("parent").await?;
    assert!(p.metadata.deletion_timestamp.is_some());
    assert!(p.finalizers().contains(&"foregroundDeletion".to_string()));
    api.patch(
        "child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    assert!(eventually(|| async { api.get_opt("parent").await.ok().flatten().is_none() }).await);
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_owner() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let parent = api
        .create(&PostParams::default(), &cm("parent", &[]))
        .await?;
    api.create(&PostParams::default(), &owned_by("child", &parent, false))
        .await?;
    api.delete("parent", &DeleteParams::orphan()).await?;
    assert!(eventually(|| async { api.get_opt("parent").await.ok().flatten().is_none() }).await);
    let child = api.get("child").await?;
    assert!(
        child
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn namespace_deletion_removes_its_contents() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("doomed".into());
    nss.create(&PostParams::default(), &ns).await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "doomed");
    api.create(&PostParams::default(), &cm("inside", &[]))
        .await?;
    nss.delete("doomed", &DeleteParams::default()).await?;
    let terminating = nss.get("doomed").await;
    if let Ok(t) = terminating {
        assert_eq!(
            t.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
        let e = status(api.create(&PostParams::default(), &cm("late", &[])).await);
        assert_eq!(e.code, 403);
    }
    assert!(eventually(|| async { nss.get_opt("doomed").await.ok().flatten().is_none() }).await);
    assert!(api.list(&ListParams::default()).await?.items.is_empty());
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn dry_run_writes_nothing() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let before = srv.resource_version();
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let out = api.create(&pp, &cm("dry", &[("a", "b")])).await?;
    assert_eq!(out.name_any(), "dry");
    assert!(api.get_opt("dry").await?.is_none());
    api.create(&PostParams::default(), &cm("real", &[])).await?;
    let after_create = srv.resource_version();
    api.patch(
        "real",
        &PatchParams::default().dry_run(),
        &Patch::Merge(json!({"data": {"x": "y"}})),
    )
    .await?;
    api.delete("real", &DeleteParams::default().dry_run())
        .await?;
    assert!(
        !api.get("real")
            .await?
            .data
            .unwrap_or_default()
            .contains_key("x")
    );
    assert_eq!(srv.resource_version(), after_create);
    assert_eq!(after_create, before + 1);
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn deployment_generation_and_status_subresource() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}},
        "status": {"replicas": 9}
    }))?;
    let d = api.create(&PostParams::default(), &d).await?;
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(
        d.status.as_ref().and_then(|s| s.replicas),
        None,
        "status is reset on create"
    );
    // Metadata-only change: no generation bump.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await?;
    assert_eq!(d.metadata.generation, Some(1));
    // Status through /status: no generation bump, spec ignored there.
    let d = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}, "status": {"replicas": 3}})),
        )
        .await?;
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(d.spec.replicas, Some(1));
    // Status on the main resource is ignored; spec change bumps generation.
    let d = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"replicas": 5}})),
        )
        .await?;
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas), Some(3));
    srv.shutdown().await;
    Ok(())
}

fn crd() -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_yaml::from_str(include_str!(
        "../../../tests/kubectl/widgets-crd.yaml"
    ))?)
}

async fn widgets(client: &Client) -> anyhow::Result<Api<DynamicObject>> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd()?).await?;
    let established = crds.get("widgets.example.com").await?;
    let conds = established
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    Ok(Api::namespaced_with(client.clone(), "default", &ar))
}

fn widget(name: &str, spec: serde_json::Value) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec
    }))?)
}

#[tokio::test]
async fn crd_registers_resources_in_discovery() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    widgets(&client).await?;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await?;
    let group = discovery.get("example.com").expect("group discovered");
    let (ar, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status")
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn custom_resources_validate_prune_and_track_generation() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api = widgets(&client).await?;
    let bad = status(
        api.create(
            &PostParams::default(),
            &widget("bad", json!({"size": "big"}))?,
        )
        .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));
    assert!(bad.message.contains("spec.size"), "{}", bad.message);
    let missing = status(
        api.create(
            &PostParams::default(),
            &widget("m", json!({"color": "red"}))?,
        )
        .await,
    );
    assert!(
        missing.message.contains("spec.size: Required value"),
        "{}",
        missing.message
    );

    let w = api
        .create(
            &PostParams::default(),
            &widget("w", json!({"size": 1, "unknown": true}))?,
        )
        .await?;
    assert!(
        w.data["spec"].get("unknown").is_none(),
        "unknown fields are pruned"
    );
    assert_eq!(w.metadata.generation, Some(1));
    let w = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await?;
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(w.data["status"]["ready"], true);
    let w = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await?;
    assert_eq!(w.metadata.generation, Some(1));
    let w = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await?;
    assert_eq!(w.metadata.generation, Some(2));
    assert_eq!(
        w.data["status"]["ready"], true,
        "main resource keeps status"
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_resource() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api = widgets(&client).await?;
    api.create(&PostParams::default(), &widget("w", json!({"size": 1}))?)
        .await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await?;
    assert!(
        eventually(|| async {
            crds.get_opt("widgets.example.com")
                .await
                .ok()
                .flatten()
                .is_none()
        })
        .await
    );
    let e = status(api.list(&ListParams::default()).await);
    assert_eq!(e.code, 404);
    srv.shutdown().await;
    Ok(())
}

async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    ct: &str,
    body: Vec<u8>,
) -> anyhow::Result<(u16, serde_json::Value)> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(kube::client::Body::from(body))?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await?
        .to_bytes();
    Ok((
        code,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    ))
}

#[tokio::test]
async fn bad_input_gets_kube_apiserver_answers() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, body) = raw(
        &client,
        "POST",
        cms,
        "application/json",
        b"{not json".to_vec(),
    )
    .await?;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(body["kind"], "Status");
    let (code, _) = raw(&client, "POST", cms, "application/yaml", b"a: [".to_vec()).await?;
    assert_eq!(code, 400);
    let wrong = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    let (code, _) = raw(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&wrong)?,
    )
    .await?;
    assert_eq!(code, 400);
    let (code, body) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/gizmos",
        "application/json",
        vec![],
    )
    .await?;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": "a".repeat(4 << 20)}});
    let (code, body) = raw(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&big)?,
    )
    .await?;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    let yaml =
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n".to_vec();
    let (code, body) = raw(&client, "POST", cms, "application/yaml", yaml).await?;
    assert_eq!((code, body["data"]["k"].as_str()), (201, Some("v")));
    let (code, body) = raw(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&json!({"metadata": {"name": "Bad_Name"}}))?,
    )
    .await?;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.name");
    srv.shutdown().await;
    Ok(())
}

/// Status codes and bodies as kube-apiserver v1.37.2 answers them (each was
/// different before; compared with the real server by `tests/fidelity`).
#[tokio::test]
async fn status_codes_and_bodies_match_kube_apiserver() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let raw = |method: &str, path: &str, body: Vec<u8>| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body)
    };
    let send = |req: http::Request<Vec<u8>>| {
        let client = client.clone();
        async move {
            let resp = client.send(req.map(kube::client::Body::from)).await?;
            let code = resp.status().as_u16();
            let bytes = http_body_util::BodyExt::collect(resp.into_body())
                .await?
                .to_bytes();
            anyhow::Ok((code, bytes.to_vec()))
        }
    };
    let json_of = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap_or_default();

    // An object held by a finalizer: DELETE answers 200 with the object.
    let mut c = cm("held", &[]);
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await?;
    let (code, body) = send(raw(
        "DELETE",
        "/api/v1/namespaces/default/configmaps/held",
        b"{}".to_vec(),
    )?)
    .await?;
    assert_eq!(code, 200);
    assert_eq!(json_of(&body)["kind"], "ConfigMap");

    // With a body, DeleteOptions come from the body alone: `?dryRun=All`
    // beside a `{}` body deletes for real (kube-apiserver's delete handler).
    api.create(&PostParams::default(), &cm("dry", &[])).await?;
    let (code, _) = send(raw(
        "DELETE",
        "/api/v1/namespaces/default/configmaps/dry?dryRun=All",
        b"{}".to_vec(),
    )?)
    .await?;
    assert_eq!(code, 200);
    assert_eq!(status(api.get("dry").await).code, 404);

    // A delete's Success Status has no empty `group`.
    api.create(&PostParams::default(), &cm("gone", &[])).await?;
    let (code, body) = send(raw(
        "DELETE",
        "/api/v1/namespaces/default/configmaps/gone",
        b"{}".to_vec(),
    )?)
    .await?;
    assert_eq!(code, 200);
    assert!(json_of(&body)["details"].get("group").is_none());

    // An unknown resource of a served group version: Status with `details: {}`;
    // an unknown group: the mux's plain-text 404.
    let (code, body) = send(raw("GET", "/api/v1/namespaces/default/widgets", vec![])?).await?;
    assert_eq!((code, json_of(&body)["details"].clone()), (404, json!({})));
    let (code, body) = send(raw("GET", "/apis/nope.example.com/v1", vec![])?).await?;
    assert_eq!((code, body.as_slice()), (404, &b"404 page not found\n"[..]));

    // A body in a media type the server does not read is a 415.
    let (code, _) = send(
        http::Request::builder()
            .method("POST")
            .uri("/api/v1/namespaces/default/configmaps")
            .header("content-type", "text/plain")
            .body(br#"{"metadata":{"name":"t"}}"#.to_vec())?,
    )
    .await?;
    assert_eq!(code, 415);

    // An apply configuration without the resource's kind is a 400.
    let (code, body) = send(
        http::Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/default/configmaps/k?fieldManager=m")
            .header("content-type", "application/apply-patch+yaml")
            .body(b"apiVersion: v1\nmetadata:\n  name: k\n".to_vec())?,
    )
    .await?;
    assert_eq!(code, 400);
    assert_eq!(json_of(&body)["message"], "invalid object type: /v1, Kind=");

    // resourceVersion=0 is served whole, whatever the limit (the watch cache).
    api.create(&PostParams::default(), &cm("l1", &[])).await?;
    api.create(&PostParams::default(), &cm("l2", &[])).await?;
    let (code, body) = send(raw(
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=1&resourceVersion=0",
        vec![],
    )?)
    .await?;
    assert_eq!(code, 200);
    let list = json_of(&body);
    assert!(list["items"].as_array().map_or(0, Vec::len) >= 2, "{list}");
    assert!(list["metadata"].get("continue").is_none());

    // `continue` with a resourceVersion is refused.
    let (code, body) = send(raw(
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=1&continue=abc&resourceVersion=1",
        vec![],
    )?)
    .await?;
    assert_eq!(code, 400);
    assert_eq!(
        json_of(&body)["message"],
        "specifying resource version is not allowed when using continue"
    );
    srv.shutdown().await;
    Ok(())
}
