//! Stumbles of the new-user trial (docs/new-user-trial.md) fixed in the host:
//! two WasmControllers on one parent resource (row 12). Each test runs the
//! real manager with a real `kube::Client` against the API server over
//! loopback.

use std::path::Path;

use anyhow::{Result, ensure};
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::{Value, json};
use wr_engine::WasmController;
use wr_tests::cluster::*;
use wr_tests::reload::{condition, controller_events};

/// A ConfigMap per Widget with `data.value` = `value`.
fn value_plugin(name: &str, value: &'static str) -> std::sync::Arc<ScriptPlugin> {
    ScriptPlugin::new(name, move |req, _| {
        let mut r = configmap_children(req);
        for c in &mut r.children {
            c["data"]["value"] = json!(value);
        }
        Ok(r)
    })
}

/// A WasmController for Widgets (named by `parent`) owning ConfigMaps.
fn widget_controller(name: &str, parent: Value, path: &Path) -> Value {
    json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": parent,
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": path.display().to_string()},
            "resyncPeriodSeconds": 3600
        }
    })
}

async fn wait_cond(env: &Env, wc: &str, status: &str, reason: &str) -> Result<String> {
    eventually(&format!("{wc}: Ready={status} {reason}"), 30, || async {
        let (s, r, m) = condition(env, wc, "Ready").await?;
        (s == status && r == reason).then_some(m)
    })
    .await
}

async fn child_value(env: &Env, ns: &str, name: &str) -> Option<String> {
    let cm = env.configmaps(ns).get(name).await.ok()?;
    cm.data["data"]["value"].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_controller_on_one_parent_resource_waits_for_the_first() -> Result<()> {
    wr_tests::logs::init();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let first = env.plugin_file("claim-first", value_plugin("claim-first", "first"))?;
    let second = env.plugin_file("claim-second", value_plugin("claim-second", "second"))?;
    let by_resource = json!({"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"});
    env.create_controller(widget_controller("claim-first", by_resource, &first))
        .await?;
    env.start_manager();
    wait_cond(&env, "claim-first", "True", "Running").await?;

    // The copy names the same resource by kind: it claims nothing.
    let by_kind = json!({"apiVersion": format!("{TEST_GROUP}/v1"), "kind": "Widget"});
    env.create_controller(widget_controller("claim-second", by_kind, &second))
        .await?;
    let msg = wait_cond(&env, "claim-second", "False", "ParentConflict").await?;
    ensure!(
        msg.contains("claim-first") && msg.contains(&format!("widgets.{TEST_GROUP}")),
        "{msg}"
    );
    let evs = controller_events(&env, "claim-second").await;
    ensure!(
        evs.iter()
            .any(|e| e.0 == "Warning" && e.1 == "ParentConflict"),
        "{evs:?}"
    );
    ensure!(
        condition(&env, "claim-first", "Ready").await.map(|c| c.0) == Some("True".into()),
        "the first controller kept its parent resource"
    );

    // Only the first one reconciles a new parent.
    env.create_widget("ns1", "w1", json!({})).await?;
    eventually("the first controller's child", 30, || async {
        (child_value(&env, "ns1", "w1-a").await.as_deref() == Some("first")).then_some(())
    })
    .await?;
    eventually("w1 Ready", 30, || async {
        let w = env.widgets("ns1").get("w1").await.ok()?;
        (ready_of(&w)?.0 == "True").then_some(())
    })
    .await?;
    let theirs = env.writes("configmaps", Some("wasm-reconciler/claim-second"));
    ensure!(theirs.is_empty(), "the second controller wrote {theirs:?}");

    // The first one goes: the second takes over by itself.
    let wcs: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &kube::api::ApiResource::erase::<WasmController>(&()),
    );
    wcs.delete("claim-first", &DeleteParams::default()).await?;
    wait_cond(&env, "claim-second", "True", "Running").await?;
    eventually("the second controller's child", 30, || async {
        (child_value(&env, "ns1", "w1-a").await.as_deref() == Some("second")).then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}
