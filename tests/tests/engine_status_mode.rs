//! `spec.statusMode` (issue 18 item 5): with `Replace` a status field the
//! plugin stops setting disappears from the parent, with `Merge` (the default)
//! it stays; in both modes the host's `conditions` and `observedGeneration`
//! remain. The plugin sets an `inactive` block while the Widget's
//! `spec.stage` is 1 and stops setting it at stage 2 (the stale block seen
//! live with Metacontroller-style hooks under merge).

use std::sync::Arc;

use anyhow::Result;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use wr_tests::cluster::*;

fn stage(req: &wr_runtime::ReconcileRequest) -> i64 {
    req.parent
        .pointer("/spec/stage")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn plugin() -> Arc<ScriptPlugin> {
    ScriptPlugin::new("widgets", |req, _| {
        let mut r = configmap_children(req);
        r.status = Some(if stage(req) == 1 {
            json!({"phase": "Starting", "inactive": {"since": "stage 1"}})
        } else {
            json!({"phase": "Running"})
        });
        Ok(r)
    })
}

async fn controller(env: &Env, mode: Option<&str>) -> Result<()> {
    let path = env.plugin_file("widgets", plugin())?;
    let mut spec = json!({
        "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
        "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "plugin": {"path": path.display().to_string()},
        "resyncPeriodSeconds": 3600
    });
    if let Some(m) = mode {
        spec["statusMode"] = json!(m);
    }
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "widgets"},
        "spec": spec
    }))
    .await
}

/// Waits until the Widget's status says `phase` with Ready=True for its generation.
async fn wait_phase(env: &Env, name: &str, phase: &str) -> Result<DynamicObject> {
    let api = env.widgets("ns1");
    eventually(
        &format!("status.phase {phase} at the current generation"),
        20,
        || {
            let api = api.clone();
            async move {
                let w = api.get(name).await.ok()?;
                let (s, _, g) = ready_of(&w)?;
                let at_phase = w.data.pointer("/status/phase") == Some(&json!(phase));
                (s == "True" && g == w.metadata.generation && at_phase).then_some(w)
            }
        },
    )
    .await
}

/// Runs stage 1 then stage 2 under `mode`; returns the final status.
async fn run(mode: Option<&str>) -> Result<Value> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    controller(&env, mode).await?;
    env.start_manager();
    env.create_widget("ns1", "w", json!({"stage": 1})).await?;
    let w = wait_phase(&env, "w", "Starting").await?;
    assert_eq!(
        w.data.pointer("/status/inactive"),
        Some(&json!({"since": "stage 1"})),
        "stage 1 sets the inactive block"
    );
    env.widgets("ns1")
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"stage": 2}})),
        )
        .await?;
    let w = wait_phase(&env, "w", "Running").await?;
    env.stop_manager().await;
    let status = w.data.get("status").cloned().unwrap_or(Value::Null);
    assert_eq!(status["observedGeneration"], json!(w.metadata.generation));
    assert!(
        status["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready")),
        "{status}"
    );
    Ok(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_removes_a_field_the_plugin_stopped_setting() -> Result<()> {
    let status = run(Some("Replace")).await?;
    assert_eq!(status.get("inactive"), None, "{status}");
    let mut keys: Vec<&str> = status
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort();
    assert_eq!(keys, ["conditions", "observedGeneration", "phase"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_keeps_a_field_the_plugin_stopped_setting() -> Result<()> {
    let status = run(None).await?;
    assert_eq!(
        status.get("inactive"),
        Some(&json!({"since": "stage 1"})),
        "{status}"
    );
    Ok(())
}
