//! The host around the plugins (issue 20, "The host"): plugin loads of
//! different controllers do not wait for each other; status the API server
//! refuses or prunes is reported instead of vanishing; invalid output is
//! counted as the fault it is; `now` is never ahead of the clock; a child kind
//! the cluster does not serve is retried with backoff and said once; events
//! name children with their namespace. Each test runs the real manager with a
//! real `kube::Client` against the embedded API server over loopback.
//!
//! Logs are captured at the default level (`warn`) by one subscriber for the
//! whole binary; tests tell their lines apart by unique controller names.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, ensure};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wr_engine::Target;
use wr_engine::observe::{EngineObserver, FaultKind, ReconcileResult};
use wr_engine::plan::{ParentResult, Snapshot};
use wr_engine::{Manager, ManagerOptions, PluginLoader, ReconcilePlugin, WasmController};
use wr_tests::cluster::*;
use wr_tests::reload::{condition, controller_events, wait_controller_event};

// ---------------------------------------------------------------- log capture

/// Captures every log line at `warn` and above: the CLI's default filter.
fn capture_logs() {
    wr_tests::logs::init();
}

/// Captured lines that contain every one of `parts`.
fn log_lines(parts: &[&str]) -> Vec<String> {
    wr_tests::logs::lines(parts)
}

// ------------------------------------------------------------------ helpers

/// A CRD `<plural>.test.wasm-reconciler.dev` with the given scope and status schema.
fn crd(plural: &str, kind: &str, scope: &str, status: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{TEST_GROUP}")},
        "spec": {
            "group": TEST_GROUP,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": status
                }}}
            }]
        }
    })
}

fn free_status() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn ar(plural: &str, kind: &str) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: TEST_GROUP.into(),
        version: "v1".into(),
        api_version: format!("{TEST_GROUP}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A WasmController for `<plural>` owning ConfigMaps, loading `path`.
fn controller_for(name: &str, plural: &str, path: &std::path::Path) -> Value {
    json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": plural},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": path.display().to_string()},
            "resyncPeriodSeconds": 3600
        }
    })
}

/// Creates a namespaced test object of kind `k`.
async fn create_obj(
    env: &Env,
    k: &kube::api::ApiResource,
    ns: Option<&str>,
    name: &str,
) -> Result<()> {
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": k.api_version, "kind": k.kind, "metadata": meta, "spec": {"value": "v"}
    }))?;
    let api: Api<kube::api::DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, k),
        None => Api::all_with(env.client.clone(), k),
    };
    api.create(&Default::default(), &obj).await?;
    Ok(())
}

async fn get_obj(
    env: &Env,
    k: &kube::api::ApiResource,
    ns: Option<&str>,
    name: &str,
) -> Option<kube::api::DynamicObject> {
    let api: Api<kube::api::DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, k),
        None => Api::all_with(env.client.clone(), k),
    };
    api.get(name).await.ok()
}

/// Events about object `name` of `kind` in `ns`: (type, reason, message).
async fn events_about(
    env: &Env,
    ns: &str,
    kind: &str,
    name: &str,
) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(env.client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| {
                    e.involved_object.kind.as_deref() == Some(kind)
                        && e.involved_object.name.as_deref() == Some(name)
                })
                .map(|e| {
                    (
                        e.type_.unwrap_or_default(),
                        e.reason.unwrap_or_default(),
                        e.message.unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_cond(env: &Env, wc: &str, type_: &str, status: &str, reason: &str) -> Result<String> {
    eventually(&format!("{wc}: {type_}={status} {reason}"), 30, || async {
        let (s, r, m) = condition(env, wc, type_).await?;
        (s == status && r == reason).then_some(m)
    })
    .await
}

/// Counts what the engine tells its observer.
#[derive(Default)]
struct Seen {
    faults: Mutex<Vec<(String, Option<FaultKind>)>>,
    results: Mutex<Vec<(String, ReconcileResult)>>,
    loads: Mutex<Vec<String>>,
}

impl EngineObserver for Seen {
    fn plugin_call(&self, c: &str, _: Duration, fault: Option<FaultKind>) {
        self.faults.lock().unwrap().push((c.to_string(), fault));
    }
    fn reconcile_finished(&self, c: &str, r: ReconcileResult, _: Duration) {
        self.results.lock().unwrap().push((c.to_string(), r));
    }
    fn plugin_loaded(&self, c: &str, _reload: bool, _ok: bool) {
        self.loads.lock().unwrap().push(c.to_string());
    }
}

impl Seen {
    fn loads_of(&self, c: &str) -> usize {
        self.loads
            .lock()
            .unwrap()
            .iter()
            .filter(|x| *x == c)
            .count()
    }
}

// ------------------------------------------------------------------ item 9

/// Loads components whose bytes start with `slow:` only once the gate opens
/// (a 30 s JavaScript compile, without the 30 s); everything else through
/// the test loader at once.
struct GatedLoader {
    inner: Arc<TestLoader>,
    gate: Arc<tokio::sync::Semaphore>,
    slow_in_flight: Arc<AtomicUsize>,
    slow_most: Arc<AtomicUsize>,
    slow_done: Arc<AtomicUsize>,
}

impl PluginLoader for GatedLoader {
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>> {
        let inner = self.inner.clone();
        if !bytes.starts_with(b"slow:") {
            return inner.load(bytes);
        }
        let gate = self.gate.clone();
        let (now, most, done) = (
            self.slow_in_flight.clone(),
            self.slow_most.clone(),
            self.slow_done.clone(),
        );
        Box::pin(async move {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            let _open = gate.acquire().await;
            now.fetch_sub(1, Ordering::SeqCst);
            done.fetch_add(1, Ordering::SeqCst);
            inner.load(bytes).await
        })
    }
}

fn value_plugin(name: &str, value: &'static str) -> Arc<ScriptPlugin> {
    ScriptPlugin::new(name, move |req, _| {
        let mut r = configmap_children(req);
        for c in &mut r.children {
            c["data"]["value"] = json!(value);
        }
        Ok(r)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_plugin_load_holds_up_no_other_controller() -> Result<()> {
    capture_logs();
    let env = Env::start().await?;
    env.namespace("ns1").await?;
    install_crd(
        &env.client,
        crd("gadgets", "Gadget", "Namespaced", free_status()),
    )
    .await?;
    install_crd(
        &env.client,
        crd("sprockets", "Sprocket", "Namespaced", free_status()),
    )
    .await?;

    // Two large components whose loads never finish during the test.
    let mut slow_paths = Vec::new();
    for i in 0..2 {
        let mut bytes = format!("slow:{i}:").into_bytes();
        bytes.resize(wr_engine::loads::LARGE_COMPONENT_BYTES + 1, b'x');
        env.loader
            .register(&bytes, value_plugin(&format!("slow-{i}"), "slow"));
        let path = env.dir.path().join(format!("slow-{i}.wasm"));
        std::fs::write(&path, &bytes)?;
        slow_paths.push(path);
    }
    let gated = GatedLoader {
        inner: env.loader.clone(),
        gate: Arc::new(tokio::sync::Semaphore::new(0)),
        slow_in_flight: Arc::default(),
        slow_most: Arc::default(),
        slow_done: Arc::default(),
    };
    let (in_flight, most, done) = (
        gated.slow_in_flight.clone(),
        gated.slow_most.clone(),
        gated.slow_done.clone(),
    );
    let opts = ManagerOptions {
        plugin_poll: Duration::from_millis(500),
        parallel_loads: 2,
        ..ManagerOptions::default()
    };
    let manager = Manager::new(env.engine_client.clone(), Arc::new(gated), opts);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));

    // A small controller runs.
    let fast_a = env.plugin_file("load-fast-a", value_plugin("load-fast-a", "one"))?;
    env.create_controller(controller_for("load-fast-a", "widgets", &fast_a))
        .await?;
    env.create_widget("ns1", "w1", json!({})).await?;
    eventually("w1's child from the first version", 30, || async {
        let cm = env.configmaps("ns1").get("w1-a").await.ok()?;
        (cm.data["data"]["value"] == "one").then_some(())
    })
    .await?;

    // Two large loads start (one at a time: one slot is kept for small ones).
    for (i, p) in slow_paths.iter().enumerate() {
        env.create_controller(controller_for(&format!("load-slow-{i}"), "gadgets", p))
            .await?;
    }
    eventually("a large load in progress", 30, || async {
        (in_flight.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await?;

    // Meanwhile another small controller starts ...
    let fast_b = env.plugin_file("load-fast-b", value_plugin("load-fast-b", "b"))?;
    env.create_controller(controller_for("load-fast-b", "sprockets", &fast_b))
        .await?;
    let sprockets = ar("sprockets", "Sprocket");
    create_obj(&env, &sprockets, Some("ns1"), "s1").await?;
    eventually(
        "a new small controller starts during the large loads",
        30,
        || async {
            let s = get_obj(&env, &sprockets, Some("ns1"), "s1").await?;
            (ready_of(&s)?.0 == "True").then_some(())
        },
    )
    .await?;

    // ... and the running one hot-reloads a new version.
    let v2 = b"native-plugin:load-fast-a-v2".to_vec();
    env.loader
        .register(&v2, value_plugin("load-fast-a-v2", "two"));
    std::fs::write(&fast_a, &v2)?;
    eventually("w1's child from the hot-reloaded version", 30, || async {
        let cm = env.configmaps("ns1").get("w1-a").await.ok()?;
        (cm.data["data"]["value"] == "two").then_some(())
    })
    .await?;

    ensure!(
        done.load(Ordering::SeqCst) == 0,
        "the large loads were still held"
    );
    ensure!(
        most.load(Ordering::SeqCst) == 1,
        "large loads ran {} at once with 2 slots (one is kept for small components)",
        most.load(Ordering::SeqCst)
    );
    let _ = stop.send(());
    let _ = run.await;
    Ok(())
}

// ------------------------------------------------------------------ item 10

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_the_api_server_rejects_is_reported_on_parent_and_controller() -> Result<()> {
    capture_logs();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    // The status schema requires `phase`, which the plugin never sets.
    let strict = json!({"type": "object", "required": ["phase"], "properties": {
        "phase": {"type": "string"},
        "observedGeneration": {"type": "integer"},
        "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
    }});
    install_crd(&env.client, crd("stricts", "Strict", "Namespaced", strict)).await?;
    let p = ScriptPlugin::new("status-strict", |req, _| Ok(configmap_children(req)));
    let path = env.plugin_file("status-strict", p)?;
    env.create_controller(controller_for("status-strict", "stricts", &path))
        .await?;
    env.start_manager();
    let k = ar("stricts", "Strict");
    create_obj(&env, &k, Some("ns1"), "x1").await?;

    // On the parent: a Warning event naming the refused field.
    let evs = eventually("a StatusRejected event on the parent", 30, || async {
        let evs = events_about(&env, "ns1", "Strict", "x1").await;
        evs.iter().any(|e| e.1 == "StatusRejected").then_some(evs)
    })
    .await?;
    let ev = evs
        .iter()
        .find(|e| e.1 == "StatusRejected")
        .cloned()
        .unwrap_or_default();
    ensure!(ev.0 == "Warning" && ev.2.contains("phase"), "{ev:?}");

    // On the WasmController: a condition and an event.
    let msg = wait_cond(
        &env,
        "status-strict",
        "ParentStatusAccepted",
        "False",
        "StatusRejected",
    )
    .await?;
    ensure!(msg.contains("ns1/x1") && msg.contains("phase"), "{msg}");
    wait_controller_event(&env, "status-strict", "Warning", "StatusRejected", 30).await?;
    // In the log at the default level, naming the parent.
    let lines = log_lines(&["status-strict", "x1", "rejected the parent's status"]);
    ensure!(!lines.is_empty(), "no warning logged");
    // The children were still applied (only the status is refused).
    ensure!(env.configmaps("ns1").get("x1-a").await.is_ok());
    env.stop_manager().await;
    Ok(())
}

// ------------------------------------------------------------------ item 11

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_that_prunes_host_status_fields_is_reported_and_not_rewritten() -> Result<()> {
    capture_logs();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    // A status schema of its own, without conditions or observedGeneration.
    let legacy = json!({"type": "object", "properties": {"phase": {"type": "string"}}});
    install_crd(&env.client, crd("legacies", "Legacy", "Namespaced", legacy)).await?;
    let p = ScriptPlugin::new("status-legacy", |req, _| {
        let mut r = configmap_children(req);
        r.status = Some(json!({"phase": "Up"}));
        Ok(r)
    });
    let path = env.plugin_file("status-legacy", p.clone())?;
    env.create_controller(controller_for("status-legacy", "legacies", &path))
        .await?;
    env.start_manager();

    let msg = wait_cond(
        &env,
        "status-legacy",
        "ParentStatusSchema",
        "False",
        "StatusFieldsPruned",
    )
    .await?;
    ensure!(
        msg.contains("status.conditions") && msg.contains("status.observedGeneration"),
        "{msg}"
    );
    wait_controller_event(&env, "status-legacy", "Warning", "StatusFieldsPruned", 30).await?;

    let k = ar("legacies", "Legacy");
    create_obj(&env, &k, Some("ns1"), "l1").await?;
    eventually("the plugin's status stored", 30, || async {
        let o = get_obj(&env, &k, Some("ns1"), "l1").await?;
        (o.data["status"] == json!({"phase": "Up"})).then_some(())
    })
    .await?;
    // Later passes find the stored status right: no write of what the
    // server would drop again.
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(env.client.clone(), "ns1", &k);
    for i in 0..3 {
        let before = p.calls();
        api.patch(
            "l1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touch": i.to_string()}}})),
        )
        .await?;
        eventually("the plugin saw the touch", 10, || async {
            (p.calls() > before).then_some(())
        })
        .await?;
    }
    let writes: Vec<_> = env
        .writes("legacies", Some("wasm-reconciler/status-legacy"))
        .into_iter()
        .filter(|r| r.subresource.as_deref() == Some("status"))
        .collect();
    // Count the writes the server applied: a write sent from a snapshot that
    // had not seen the first write yet is refused by its resourceVersion
    // precondition (409), re-read and then found right — nothing is rewritten.
    let codes: Vec<u16> = writes.iter().map(|r| r.code).collect();
    let applied = codes.iter().filter(|c| **c < 300).count();
    ensure!(
        applied == 1,
        "status writes applied: {applied} (codes {codes:?})"
    );

    // `plan` compares against what the server stores: nothing to write.
    let wc: WasmController = Api::all(env.client.clone()).get("status-legacy").await?;
    let target = Target::resolve(&env.client, "status-legacy", &wc.spec).await?;
    let snap = Snapshot::take(&env.client, &target).await?;
    let plan = wr_engine::plan::plan(&target, &snap, p, "2026-11-30T12:00:00Z", None).await;
    let l1 = plan
        .parents
        .iter()
        .find(|x| x.name == "l1")
        .ok_or_else(|| anyhow::anyhow!("l1 not planned"))?;
    ensure!(
        !l1.status_write,
        "plan reports a status write: {:?}",
        l1.status
    );
    ensure!(l1.result == ParentResult::Unchanged, "{:?}", l1.result);
    env.stop_manager().await;
    Ok(())
}

// ------------------------------------------------------------------ item 12

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_output_counts_as_an_invalid_output_fault() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let seen = Arc::new(Seen::default());
    env.opts.observer = Some(seen.clone());
    // A Secret child, while the controller declares only ConfigMaps.
    let p = ScriptPlugin::new("fault-invalid", |_, _| {
        Ok(response(vec![json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "stringData": {"k": "v"}})]))
    });
    env.widget_controller("fault-invalid", p, false).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({})).await?;
    eventually("Ready=False InvalidPluginOutput", 30, || async {
        let w = env.widgets("ns1").get("w1").await.ok()?;
        let (s, r, _) = ready_of(&w)?;
        (s == "False" && r == "InvalidPluginOutput").then_some(())
    })
    .await?;
    let results = eventually("the reconcile counted", 10, || async {
        let r = seen.results.lock().unwrap().clone();
        (!r.is_empty()).then_some(r)
    })
    .await?;
    let faults = seen.faults.lock().unwrap().clone();
    ensure!(
        faults
            .iter()
            .any(|(c, f)| c == "fault-invalid" && *f == Some(FaultKind::InvalidOutput)),
        "plugin calls: {faults:?}"
    );
    ensure!(
        results
            .iter()
            .any(|(_, r)| *r == ReconcileResult::PluginFault)
            && results
                .iter()
                .all(|(_, r)| *r != ReconcileResult::PermanentError),
        "reconcile results: {results:?}"
    );
    env.stop_manager().await;
    Ok(())
}

// ------------------------------------------------------------------ item 13

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn now_is_never_ahead_of_the_clock() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let ahead = Arc::new(AtomicBool::new(false));
    let flag = ahead.clone();
    let p = ScriptPlugin::new("now-clock", move |req, _| {
        let wall = k8s_openapi::jiff::Timestamp::now();
        match req.now.parse::<k8s_openapi::jiff::Timestamp>() {
            Ok(now) if now <= wall => {}
            _ => flag.store(true, Ordering::SeqCst),
        }
        Ok(configmap_children(req))
    });
    env.widget_controller("now-clock", p.clone(), false).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({})).await?;
    // Calls spread over more than a second, so some fall in the second half
    // of a second (where rounding to the nearest second goes up).
    for i in 0..25 {
        let before = p.calls();
        env.widgets("ns1")
            .patch(
                "w1",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"touch": i.to_string()}}})),
            )
            .await?;
        eventually("the plugin saw the touch", 10, || async {
            (p.calls() > before).then_some(())
        })
        .await?;
        tokio::time::sleep(Duration::from_millis(70)).await;
    }
    ensure!(
        !ahead.load(Ordering::SeqCst),
        "a request's `now` was ahead of the wall clock"
    );
    env.stop_manager().await;
    Ok(())
}

// ------------------------------------------------------------------ item 14

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_kind_not_served_is_retried_with_backoff_and_said_once() -> Result<()> {
    capture_logs();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let seen = Arc::new(Seen::default());
    env.opts.observer = Some(seen.clone());
    let path = env.plugin_file(
        "unserved-kind",
        ScriptPlugin::new("unserved-kind", |req, _| Ok(configmap_children(req))),
    )?;
    let mut wc = controller_for("unserved-kind", "widgets", &path);
    wc["spec"]["childResources"] = json!([
        {"apiVersion": "v1", "resource": "configmaps"},
        {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "gizmos"}
    ]);
    env.create_controller(wc).await?;
    env.start_manager();
    let msg = wait_cond(&env, "unserved-kind", "Ready", "False", "ResourceNotFound").await?;
    ensure!(msg.contains("gizmos"), "{msg}");

    // A few seconds of retries (at 1 s, 3 s, 7 s with backoff).
    tokio::time::sleep(Duration::from_secs(4)).await;
    ensure!(
        seen.loads_of("unserved-kind") == 1,
        "the plugin was loaded {} times",
        seen.loads_of("unserved-kind")
    );
    let warns = log_lines(&["unserved-kind", "cannot start"]);
    ensure!(warns.len() == 1, "warnings: {warns:#?}");
    let evs: Vec<_> = controller_events(&env, "unserved-kind")
        .await
        .into_iter()
        .filter(|e| e.1 == "CannotStart")
        .collect();
    ensure!(evs.len() == 1 && evs[0].2.contains("gizmos"), "{evs:?}");

    // Once the kind is served, the controller starts without loading again.
    install_crd(
        &env.client,
        crd("gizmos", "Gizmo", "Namespaced", free_status()),
    )
    .await?;
    eventually("the controller started", 60, || async {
        let (s, _, _) = condition(&env, "unserved-kind", "Ready").await?;
        (s == "True").then_some(())
    })
    .await?;
    ensure!(seen.loads_of("unserved-kind") == 1);
    env.stop_manager().await;
    Ok(())
}

// ------------------------------------------------------------------ item 16

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_name_children_with_their_namespace() -> Result<()> {
    let mut env = Env::start().await?;
    for ns in ["team-a", "team-b"] {
        env.namespace(ns).await?;
    }
    install_crd(
        &env.client,
        crd("tenants", "Tenant", "Cluster", free_status()),
    )
    .await?;
    // A cluster-scoped parent with one child of the same name per namespace.
    let p = ScriptPlugin::new("child-names", |_, _| {
        Ok(response(
            ["team-a", "team-b"]
                .iter()
                .map(|ns| {
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "shared", "namespace": ns}, "data": {"k": "v"}})
                })
                .collect(),
        ))
    });
    let path = env.plugin_file("child-names", p)?;
    env.create_controller(controller_for("child-names", "tenants", &path))
        .await?;
    env.start_manager();
    create_obj(&env, &ar("tenants", "Tenant"), None, "t1").await?;
    let evs = eventually("the creation event", 30, || async {
        let evs = events_about(&env, "default", "Tenant", "t1").await;
        evs.iter().any(|e| e.1 == "ChildCreated").then_some(evs)
    })
    .await?;
    ensure!(
        evs.iter()
            .any(|e| e.2 == "created ConfigMap team-a/shared, ConfigMap team-b/shared"),
        "{evs:?}"
    );
    env.stop_manager().await;
    Ok(())
}
