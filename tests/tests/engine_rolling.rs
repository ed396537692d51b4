//! Rolling updates (issue 18 item 2) at the wire: a Widget owns five `Gadget`
//! children (a test CRD with a status subresource) updated with
//! `RollingInPlace`, gated on `Ready=True` and `status.observedGeneration ==
//! metadata.generation`. The test plays the gadgets' own controller: it marks
//! an updated gadget ready only after seeing it unready twice in a row (about
//! 200 ms), so children updated together would be seen together.
//!
//! Proved from the API server: the request log (between two host updates of
//! different gadgets, the first one's readiness was written), the gadgets'
//! statuses as listed by the simulated controller (never two updated-but-not-
//! ready gadgets), and the parent's `RollingUpdate` / `Ready` conditions when
//! a gadget never becomes ready.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wr_tests::cluster::*;

const SIM: &str = "gadget-sim";
const HOST: &str = "wasm-reconciler/rolling";

fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{TEST_GROUP}")},
        "spec": {
            "group": TEST_GROUP,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

fn gadgets(env: &Env) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: TEST_GROUP.into(),
        version: "v1".into(),
        api_version: format!("{TEST_GROUP}/v1"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    Api::namespaced_with(env.client.clone(), &env.ns("ns1"), &ar)
}

/// Five gadgets `<parent>-0..4` with `spec.value` = the parent's.
fn plugin() -> Arc<ScriptPlugin> {
    ScriptPlugin::new("rolling", |req, _| {
        let name = req.parent["metadata"]["name"].as_str().unwrap_or("x");
        let value = req.parent["spec"]["value"].clone();
        Ok(response(
            (0..5)
                .map(|i| {
                    json!({"apiVersion": format!("{TEST_GROUP}/v1"), "kind": "Gadget",
                       "metadata": {"name": format!("{name}-{i}")},
                       "spec": {"value": value}})
                })
                .collect(),
        ))
    })
}

async fn setup(method: &str, deadline: u32) -> Result<Env> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    install_crd(&env.client, gadget_crd()).await?;
    let path = env.plugin_file("rolling", plugin())?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "rolling"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{
                "apiVersion": format!("{TEST_GROUP}/v1"), "resource": "gadgets",
                "updateStrategy": {
                    "method": method,
                    "progressDeadlineSeconds": deadline,
                    "statusChecks": {
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "fields": [{"path": "status.observedGeneration", "equalsPath": "metadata.generation"}]
                    }
                }
            }],
            "plugin": {"path": path.display().to_string()},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.start_manager();
    Ok(env)
}

/// What the simulated gadget controller saw.
#[derive(Default)]
struct SimLog {
    /// Most gadgets seen updated (generation ahead of observedGeneration) at once.
    most_unready: usize,
}

/// The gadgets' controller: marks a gadget ready for its generation once it
/// has seen it unready on two consecutive ticks, except gadgets in `stuck`
/// whose `spec.value` is `stuck_value`.
fn simulate(
    api: Api<DynamicObject>,
    stuck: Option<(String, String)>,
    log: Arc<Mutex<SimLog>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen: BTreeMap<String, i64> = BTreeMap::new();
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            let unready: Vec<&DynamicObject> = list
                .items
                .iter()
                .filter(|g| {
                    g.data
                        .pointer("/status/observedGeneration")
                        .and_then(Value::as_i64)
                        != g.metadata.generation
                })
                .collect();
            {
                let mut l = log.lock().unwrap();
                l.most_unready = l.most_unready.max(unready.len());
            }
            let mut next = BTreeMap::new();
            for g in unready {
                let name = g.metadata.name.clone().unwrap_or_default();
                let generation = g.metadata.generation.unwrap_or(0);
                let value = g.data.pointer("/spec/value").and_then(Value::as_str);
                if stuck
                    .as_ref()
                    .is_some_and(|(n, v)| *n == name && Some(v.as_str()) == value)
                {
                    continue;
                }
                if seen.get(&name) != Some(&generation) {
                    next.insert(name, generation);
                    continue;
                }
                let status = json!({"status": {"observedGeneration": generation,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Simulated",
                                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                let pp = PatchParams {
                    field_manager: Some(SIM.into()),
                    ..PatchParams::default()
                };
                if let Err(e) = api.patch_status(&name, &pp, &Patch::Merge(&status)).await {
                    eprintln!("simulated gadget controller: status of {name}: {e}");
                }
            }
            seen = next;
        }
    })
}

fn condition(w: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let c = w
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    Some((s("status"), s("reason"), s("message")))
}

async fn values(api: &Api<DynamicObject>) -> Vec<String> {
    let mut v: Vec<(String, String)> = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|g| {
            (
                g.metadata.name.clone().unwrap_or_default(),
                g.data
                    .pointer("/spec/value")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, v)| v).collect()
}

async fn wait_condition(
    env: &Env,
    type_: &str,
    want: impl Fn(&(String, String, String)) -> bool,
) -> Result<(String, String, String)> {
    let api = env.widgets("ns1");
    eventually(&format!("parent condition {type_}"), 30, || {
        let api = api.clone();
        let want = &want;
        async move { condition(&api.get("w1").await.ok()?, type_).filter(want) }
    })
    .await
}

/// All five created and ready, then the parent changed: the request log
/// from there on.
async fn start_rollout(env: &Env, log: &Mutex<SimLog>) -> Result<()> {
    env.create_widget("ns1", "w1", json!({"value": "v1"}))
        .await?;
    wait_condition(env, "RollingUpdate", |c| c.1 == "Complete").await?;
    assert_eq!(values(&gadgets(env)).await, ["v1"; 5]);
    env.server.clear_requests();
    // The five created together were unready together; from here on only updates count.
    log.lock().unwrap().most_unready = 0;
    env.widgets("ns1")
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "v2"}})),
        )
        .await?;
    Ok(())
}

async fn one_child_at_a_time(method: &str) -> Result<()> {
    let env = setup(method, 600).await?;
    let log = Arc::new(Mutex::new(SimLog::default()));
    let sim = simulate(gadgets(&env), None, log.clone());
    start_rollout(&env, &log).await?;
    // Complete for the parent's new generation (its status said Complete
    // for the old one before the change).
    let api = env.widgets("ns1");
    eventually("rollout complete for generation 2", 60, || async {
        let w = api.get("w1").await.ok()?;
        let c = condition(&w, "RollingUpdate")?;
        let generation = w
            .data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64);
        (generation == Some(2) && c.1 == "Complete" && c.2 == "5/5 updated").then_some(())
    })
    .await?;
    sim.abort();
    assert_eq!(values(&gadgets(&env)).await, ["v2"; 5]);

    // The request log: a host write to a gadget while another gadget the
    // host updated has not had its readiness written yet is two updates at once.
    let mut updating: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    let writes = env.writes("gadgets", None);
    for r in &writes {
        let name = r.name.clone().unwrap_or_default();
        // Deletes carry no field manager; only the host deletes gadgets.
        let fm = match r.verb.as_str() {
            "delete" => Some(HOST),
            _ => r.field_manager.as_deref(),
        };
        match (fm, r.subresource.as_deref()) {
            (Some(HOST), None) if r.code < 300 => {
                let others: Vec<&String> = updating.iter().filter(|n| **n != name).collect();
                assert!(
                    others.is_empty(),
                    "{name} updated while {others:?} not ready yet"
                );
                if updating.insert(name.clone()) {
                    order.push(name);
                }
            }
            (Some(SIM), Some("status")) => {
                updating.remove(&name);
            }
            _ => {}
        }
    }
    assert_eq!(order, ["w1-0", "w1-1", "w1-2", "w1-3", "w1-4"]);
    let deletes = writes
        .iter()
        .filter(|r| r.verb == "delete" && r.code < 300)
        .count();
    let recreated = if method == "RollingRecreate" { 5 } else { 0 };
    assert_eq!(
        deletes, recreated,
        "{method}: gadgets deleted to be recreated"
    );
    let most = log.lock().unwrap().most_unready;
    assert_eq!(most, 1, "gadgets seen updated and not ready at once");
    let ready = condition(&env.widgets("ns1").get("w1").await?, "Ready");
    assert_eq!(ready.map(|r| r.0), Some("True".into()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_in_place_updates_one_child_at_a_time() -> Result<()> {
    one_child_at_a_time("RollingInPlace").await
}

/// Each gadget is deleted (uid precondition) and created anew; the next one
/// waits until the new one is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_recreate_replaces_one_child_at_a_time() -> Result<()> {
    one_child_at_a_time("RollingRecreate").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_never_becomes_ready_stops_the_rollout_and_the_parent_says_why() -> Result<()>
{
    let env = setup("RollingInPlace", 3).await?;
    let log = Arc::new(Mutex::new(SimLog::default()));
    let stuck = Some(("w1-2".to_string(), "v2".to_string()));
    let sim = simulate(gadgets(&env), stuck, log.clone());
    start_rollout(&env, &log).await?;

    let waiting = wait_condition(&env, "RollingUpdate", |c| c.1 == "Progressing").await?;
    assert_eq!(waiting.0, "True");
    let stalled = wait_condition(&env, "RollingUpdate", |c| c.1 == "Stalled").await?;
    let want = "3/5 updated, rollout stopped: Gadget ns1/w1-2 has not passed its status \
                checks within 3s: status.observedGeneration is 1, not metadata.generation 2";
    let ns1 = env.ns("ns1");
    assert_eq!(stalled.0, "False");
    assert_eq!(stalled.2, want.replace("ns1/", &format!("{ns1}/")));
    let ready = condition(&env.widgets("ns1").get("w1").await?, "Ready").expect("Ready");
    assert_eq!(
        (ready.0.as_str(), ready.1.as_str()),
        ("False", "RolloutStalled")
    );
    assert_eq!(ready.2, stalled.2);

    // Stopped: the gadgets after the stuck one were never written by the
    // host, and stay as they were while the host keeps looking.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    sim.abort();
    assert_eq!(values(&gadgets(&env)).await, ["v2", "v2", "v2", "v1", "v1"]);
    let touched: BTreeSet<String> = env
        .writes("gadgets", Some(HOST))
        .into_iter()
        .filter_map(|r| r.name)
        .collect();
    assert_eq!(
        touched,
        ["w1-0", "w1-1", "w1-2"].map(String::from).into(),
        "host writes"
    );
    Ok(())
}
