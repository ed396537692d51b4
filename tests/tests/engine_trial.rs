//! Stumbles of the new-user trial (docs/new-user-trial.md) fixed in the host:
//! two WasmControllers on one parent resource (row 12), a child the API
//! server rejects (row 13), the PARENT column of `kubectl get wasmcontrollers`
//! (row 20), a parent kind the host may not list (row 15). Each test runs the
//! real manager with a real `kube::Client` against the API server over
//! loopback.

use std::path::Path;

use anyhow::{Result, ensure};
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::{Value, json};
use wr_apiserver::{FaultAction, FaultRule};
use wr_engine::WasmController;
use wr_tests::cluster::*;
use wr_tests::reload::{condition, controller_events, wait_controller_event};

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
    wait_controller_event(&env, "claim-second", "Warning", "ParentConflict", 30).await?;
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

/// (NAME, PARENT) of each row of `kubectl get wasmcontrollers` (the Table
/// the API server renders from the CRD's printer columns).
async fn parent_column(env: &Env) -> Result<Vec<(String, String)>> {
    let req = http::Request::get("/apis/wasm-reconciler.dev/v1alpha1/wasmcontrollers")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())?;
    let table: Value = env.client.request(req).await?;
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    let at = |name: &str| cols.iter().position(|c| *c == name);
    let (Some(n), Some(p)) = (at("Name"), at("Parent")) else {
        anyhow::bail!("no Name/Parent columns: {cols:?}");
    };
    let cell = |row: &Value, i: usize| row["cells"][i].as_str().unwrap_or("").to_string();
    Ok(table["rows"]
        .as_array()
        .map(|rows| rows.iter().map(|r| (cell(r, n), cell(r, p))).collect())
        .unwrap_or_default())
}

/// Warning events about object `name` of `kind` in `ns`: (reason, message).
async fn warnings_about(env: &Env, ns: &str, kind: &str, name: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(env.client.clone(), ns);
    let Ok(list) = api.list(&Default::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
        })
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_the_api_server_rejects_gets_a_warning_event_on_the_parent() -> Result<()> {
    wr_tests::logs::init();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    // ConfigMap data values must be strings: the API server refuses a number.
    let p = ScriptPlugin::new("child-invalid", |req, _| {
        let mut r = configmap_children(req);
        for c in &mut r.children {
            c["data"]["message"] = json!(5);
        }
        Ok(r)
    });
    let path = env.plugin_file("child-invalid", p)?;
    let parent = json!({"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"});
    env.create_controller(widget_controller("child-invalid", parent, &path))
        .await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({})).await?;
    eventually("w1 Ready=False ChildInvalid", 30, || async {
        let w = env.widgets("ns1").get("w1").await.ok()?;
        let (s, r, _) = ready_of(&w)?;
        (s == "False" && r == "ChildInvalid").then_some(())
    })
    .await?;
    let ns = env.ns("ns1");
    let evs = eventually("a ChildInvalid Warning event on w1", 30, || async {
        let evs = warnings_about(&env, &ns, "Widget", "w1").await;
        evs.iter().any(|e| e.0 == "ChildInvalid").then_some(evs)
    })
    .await?;
    let msg = &evs
        .iter()
        .find(|e| e.0 == "ChildInvalid")
        .map(|e| e.1.clone())
        .unwrap_or_default();
    ensure!(
        msg.contains("ConfigMap")
            && msg.contains("w1-a")
            && msg.contains("rejected by the API server"),
        "{msg}"
    );
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_wasmcontrollers_shows_the_parent_resource() -> Result<()> {
    wr_tests::logs::init();
    let mut env = Env::start().await?;
    let p = ScriptPlugin::new("parent-column", |req, _| Ok(configmap_children(req)));
    let path = env.plugin_file("parent-column", p)?;
    // Named by kind; the column shows the resource it resolves to.
    let parent = json!({"apiVersion": format!("{TEST_GROUP}/v1"), "kind": "Widget"});
    env.create_controller(widget_controller("parent-column", parent, &path))
        .await?;
    env.start_manager();
    wait_cond(&env, "parent-column", "True", "Running").await?;
    let want = format!("widgets.{TEST_GROUP}");
    let table = eventually("the PARENT column", 30, || async {
        let t = parent_column(&env).await.ok()?;
        t.iter()
            .any(|(n, p)| n == "parent-column" && p == &want)
            .then_some(t)
    })
    .await;
    ensure!(table.is_ok(), "{:?}", parent_column(&env).await?);
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_parent_kind_is_said_once_on_the_wasmcontroller() -> Result<()> {
    if wr_tests::target::skip_on_real("injects 403s with the embedded server's faults") {
        return Ok(());
    }
    wr_tests::logs::init();
    let mut env = Env::start().await?;
    // The host's RBAC lacks list and watch on the parent resource.
    let mut rule = FaultRule::new(&["list", "watch"], 1.0, FaultAction::Forbidden);
    rule.resources = vec!["widgets".into()];
    env.server.faults().add_rule(rule);
    let p = ScriptPlugin::new("forbidden-parent", |req, _| Ok(configmap_children(req)));
    let path = env.plugin_file("forbidden-parent", p)?;
    let parent = json!({"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"});
    env.create_controller(widget_controller("forbidden-parent", parent, &path))
        .await?;
    env.start_manager();
    let msg = wait_cond(&env, "forbidden-parent", "False", "Forbidden").await?;
    ensure!(
        msg.contains("list") && msg.contains(&format!("widgets.{TEST_GROUP}")),
        "{msg}"
    );
    // A Warning event, one, though the watch keeps failing and the controller re-syncs.
    let evs = eventually("a Forbidden event", 30, || async {
        let evs = controller_events(&env, "forbidden-parent").await;
        evs.iter().any(|e| e.1 == "Forbidden").then_some(evs)
    })
    .await?;
    let said: Vec<_> = evs.iter().filter(|e| e.1 == "Forbidden").collect();
    ensure!(said.len() == 1 && said[0].0 == "Warning", "{evs:?}");
    // Granted: the controller is Ready again by itself.
    env.server.faults().clear();
    wait_cond(&env, "forbidden-parent", "True", "Running").await?;
    env.stop_manager().await;
    Ok(())
}
