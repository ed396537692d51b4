//! Adoption (issue 18 item 4) and Metacontroller leftovers (item 6), end to
//! end: an object already at a desired child's name with no controller owner
//! is a conflict by default (`spec.adoption: Never`) and adopted with
//! `Orphans`; a child Metacontroller made (field manager `metacontroller`,
//! its last-applied annotation, fields the plugin does not set) loses all of
//! that in the reconcile that adopts it.

use std::sync::Arc;

use anyhow::Result;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use wr_tests::cluster::*;

const FM: &str = "wasm-reconciler/widgets";
const MC_ANNOTATION: &str = "metacontroller.k8s.io/last-applied-configuration";

async fn controller(env: &Env, adoption: Option<&str>) -> Result<Arc<ScriptPlugin>> {
    let plugin = ScriptPlugin::new("widgets", |req, _| Ok(configmap_children(req)));
    let path = env.plugin_file("widgets", plugin.clone())?;
    let mut spec = json!({
        "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
        "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "plugin": {"path": path.display().to_string()},
        "resyncPeriodSeconds": 3600
    });
    if let Some(a) = adoption {
        spec["adoption"] = json!(a);
    }
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "widgets"},
        "spec": spec
    }))
    .await?;
    Ok(plugin)
}

/// ConfigMap `w-a` as Metacontroller would have left it: written by manager
/// `metacontroller`, with its annotation, a label and a data key the plugin
/// does not set, and (when given) a controller reference to `owner`.
async fn metacontroller_child(env: &Env, owner: Option<&DynamicObject>) -> Result<()> {
    let mut obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "w-a", "namespace": env.ns("ns1"),
            "labels": {"app": "w", "metacontroller-era": "yes"},
            "annotations": {MC_ANNOTATION: "{\"data\":{\"value\":\"old\"}}"}
        },
        "data": {"value": "old", "stale": "x"}
    });
    if let Some(p) = owner {
        obj["metadata"]["ownerReferences"] = json!([{
            "apiVersion": format!("{TEST_GROUP}/v1"), "kind": "Widget",
            "name": p.metadata.name, "uid": p.metadata.uid,
            "controller": true, "blockOwnerDeletion": true
        }]);
    }
    let pp = PostParams {
        field_manager: Some("metacontroller".into()),
        ..PostParams::default()
    };
    env.configmaps("ns1")
        .create(&pp, &serde_json::from_value(obj)?)
        .await?;
    Ok(())
}

/// Waits until Widget `w` is Ready=`status` at its generation; returns it
/// with the reason.
async fn wait_ready(env: &Env, status: &str) -> Result<(DynamicObject, String)> {
    let api = env.widgets("ns1");
    eventually(&format!("w Ready={status}"), 30, || {
        let api = api.clone();
        async move {
            let w = api.get("w").await.ok()?;
            let (s, r, g) = ready_of(&w)?;
            (s == status && g == w.metadata.generation).then_some((w, r))
        }
    })
    .await
}

fn managers(cm: &DynamicObject) -> Vec<String> {
    cm.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect()
}

/// The leftovers are gone and the child is exactly what the plugin asks for,
/// controlled by `w`.
fn assert_taken_over(cm: &DynamicObject, w: &DynamicObject) {
    let owners = cm.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0].uid, w.metadata.uid.clone().unwrap_or_default());
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(cm.data.get("data"), Some(&json!({"value": "v"})));
    let ann = cm.metadata.annotations.clone().unwrap_or_default();
    assert!(!ann.contains_key(MC_ANNOTATION), "{ann:?}");
    let labels = cm.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("metacontroller-era"), None, "{labels:?}");
    let m = managers(cm);
    assert!(!m.iter().any(|m| m == "metacontroller"), "{m:?}");
    assert!(m.iter().any(|m| m == FM), "{m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_is_a_conflict_by_default() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    controller(&env, None).await?;
    metacontroller_child(&env, None).await?;
    env.start_manager();
    env.create_widget("ns1", "w", json!({})).await?;
    let (_, reason) = wait_ready(&env, "False").await?;
    assert_eq!(reason, "ChildConflict");
    env.stop_manager().await;
    let cm = env.configmaps("ns1").get("w-a").await?;
    assert_eq!(cm.metadata.owner_references, None);
    assert_eq!(cm.data["data"], json!({"value": "old", "stale": "x"}));
    assert!(managers(&cm).iter().all(|m| m == "metacontroller"));
    assert!(env.writes("configmaps", Some(FM)).is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_metacontroller_made_is_adopted_and_its_leftovers_removed() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let plugin = controller(&env, Some("Orphans")).await?;
    metacontroller_child(&env, None).await?;
    env.start_manager();
    env.create_widget("ns1", "w", json!({})).await?;
    let (w, _) = wait_ready(&env, "True").await?;
    env.stop_manager().await;
    let cm = env.configmaps("ns1").get("w-a").await?;
    assert_taken_over(&cm, &w);
    // In one reconcile: the host's writes to the child are the ownership
    // move (JSON patch) and one apply, and nothing wrote it since. (The real
    // cluster's audit log does not record the patch type.)
    let writes: Vec<(String, Option<String>)> = env
        .writes("configmaps", Some(FM))
        .into_iter()
        .filter(|r| r.name.as_deref() == Some("w-a"))
        .map(|r| (r.verb, r.patch_type))
        .collect();
    let verbs: Vec<&str> = writes.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(verbs, ["patch", "patch"], "{writes:?}");
    if !env.server.is_real() {
        assert_eq!(writes[0].1.as_deref(), Some("json"));
        assert_eq!(writes[1].1.as_deref(), Some("apply"));
    }
    assert!(plugin.calls() >= 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metacontroller_child_of_the_parent_is_cleaned_without_adoption() -> Result<()> {
    // Metacontroller put the same controller reference (same parent uid) on
    // its children, so after a migration they are already "ours".
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    controller(&env, None).await?;
    let w = env.create_widget("ns1", "w", json!({})).await?;
    metacontroller_child(&env, Some(&w)).await?;
    env.start_manager();
    let (w, _) = wait_ready(&env, "True").await?;
    let api = env.configmaps("ns1");
    let cm = eventually("w-a without the annotation", 30, || {
        let api = api.clone();
        async move {
            let cm = api.get("w-a").await.ok()?;
            let ann = cm.metadata.annotations.clone().unwrap_or_default();
            (!ann.contains_key(MC_ANNOTATION)).then_some(cm)
        }
    })
    .await?;
    env.stop_manager().await;
    assert_taken_over(&cm, &w);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_outside_the_parent_selector_is_not_adopted() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    controller(&env, Some("Orphans")).await?;
    metacontroller_child(&env, None).await?;
    env.start_manager();
    env.create_widget(
        "ns1",
        "w",
        json!({"selector": {"matchLabels": {"app": "other"}}}),
    )
    .await?;
    let (w, reason) = wait_ready(&env, "False").await?;
    env.stop_manager().await;
    assert_eq!(reason, "ChildConflict");
    let msg = w
        .data
        .pointer("/status/conditions")
        .map(Value::to_string)
        .unwrap_or_default();
    assert!(msg.contains("spec.selector"), "{msg}");
    let cm = env.configmaps("ns1").get("w-a").await?;
    assert_eq!(cm.metadata.owner_references, None);
    Ok(())
}
