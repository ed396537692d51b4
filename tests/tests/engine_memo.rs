//! Memoisation of pure plugins (rule 13, docs/memoisation.md) and the single
//! status write of a converging parent, at the wire: the real host against
//! the API server over loopback. Plugin calls are counted by the plugin
//! itself, memoised reconciles by the controller's counters, and writes from
//! the API server's request log.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use wr_engine::controller::ControllerStats;
use wr_engine::{PluginError, ReconcilePlugin};
use wr_runtime::{
    CallLimits, Condition, ConditionStatus, ContractVersion, PluginInfo, ReconcileRequest,
    ReconcileResponse, World,
};
use wr_tests::cluster::*;

const FM: &str = "wasm-reconciler/widgets";

fn init_tracing() {
    wr_tests::logs::init();
}

/// A [`ScriptPlugin`] that declares, as a 0.2.0 component does through
/// `info()`, whether it reads `now` (`None`: declares nothing, like 0.1.0).
struct Declared {
    inner: Arc<ScriptPlugin>,
    reads_now: Option<bool>,
}

impl ReconcilePlugin for Declared {
    fn digest(&self) -> &str {
        self.inner.digest()
    }

    fn info(&self) -> Option<PluginInfo> {
        self.reads_now.map(|reads_now| PluginInfo {
            contract: ContractVersion::V0_2,
            world: World::Reconciler,
            reads_now,
        })
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        self.inner.reconcile(req, limits)
    }
}

/// The standard ConfigMap children (data `value` from the spec, `config`
/// from the plugin config), an `Available` condition that is True once every
/// desired child is observed (as a real plugin reports readiness from what it
/// observes), and a status counting the observed children.
fn script(name: &str) -> Arc<ScriptPlugin> {
    ScriptPlugin::new(name, |req, _| Ok(observing(req)))
}

fn observing(req: &ReconcileRequest) -> ReconcileResponse {
    let mut r = configmap_children(req);
    let config = req
        .config
        .as_ref()
        .and_then(|c| c.get("tag"))
        .cloned()
        .unwrap_or(Value::Null);
    for c in &mut r.children {
        c["data"]["tag"] = json!(config.as_str().unwrap_or("none"));
    }
    let all_there = r.children.len() == req.children.len();
    r.conditions.push(Condition {
        type_: "Available".into(),
        status: if all_there {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        reason: if all_there {
            "AllChildren"
        } else {
            "Progressing"
        }
        .into(),
        message: String::new(),
    });
    r.status = Some(json!({"observedChildren": req.children.len()}));
    r
}

/// A Widget controller owning ConfigMaps, resyncing every second.
async fn controller(
    env: &Env,
    plugin: Arc<dyn ReconcilePlugin>,
    file: &str,
    memoize: Option<&str>,
    config: Value,
) -> Result<std::path::PathBuf> {
    controller_resyncing(env, plugin, file, memoize, config, 1).await
}

/// [`controller`] with another resync period.
async fn controller_resyncing(
    env: &Env,
    plugin: Arc<dyn ReconcilePlugin>,
    file: &str,
    memoize: Option<&str>,
    config: Value,
    resync_secs: u64,
) -> Result<std::path::PathBuf> {
    let path = env.plugin_file(file, plugin)?;
    let mut plugin_spec = json!({"path": path.display().to_string(), "config": config});
    if let Some(m) = memoize {
        plugin_spec["memoize"] = json!(m);
    }
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "widgets"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": plugin_spec,
            "resyncPeriodSeconds": resync_secs
        }
    }))
    .await?;
    Ok(path)
}

async fn stats(env: &Env) -> Result<Arc<ControllerStats>> {
    let m = env.manager().context("manager running")?;
    eventually("controller running", 20, || async {
        m.stats("widgets").await
    })
    .await
}

/// Starts the manager, creates `n` widgets and waits until each is Ready and
/// Available with all its children observed.
async fn converged_fleet(env: &mut Env, n: usize) -> Result<Arc<ControllerStats>> {
    env.namespace("ns1").await?;
    env.start_manager();
    for i in 0..n {
        env.create_widget(
            "ns1",
            &format!("w{i}"),
            json!({"value": "x", "children": ["a", "b"]}),
        )
        .await?;
    }
    for i in 0..n {
        let api = env.widgets("ns1");
        let name = format!("w{i}");
        eventually(&format!("{name} converged"), 30, || {
            let (api, name) = (api.clone(), name.clone());
            async move {
                let w = api.get(&name).await.ok()?;
                let s = &w.data["status"];
                let available = s["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Available" && c["status"] == "True");
                let (ready, _, _) = ready_of(&w)?;
                (available && ready == "True" && s["observedChildren"] == 2).then_some(())
            }
        })
        .await?;
    }
    stats(env).await
}

/// Counters over a window of resyncs.
#[derive(Debug)]
struct Window {
    calls: u64,
    memoised: u64,
    reconciles: u64,
    writes: Vec<wr_apiserver::RequestRecord>,
}

/// The controller's counters read in one order: memoised and plugin calls
/// first, reconciles last.
fn counters(p: &ScriptPlugin, s: &ControllerStats) -> (u64, u64, u64) {
    let m = s.memoised.load(Ordering::SeqCst);
    let c = p.calls();
    let r = s.reconciles.load(Ordering::SeqCst);
    (m, c, r)
}

/// Reconciles that neither called the plugin nor were memoised, plus those
/// in flight: a reconcile is counted when it starts and memoised or calls the
/// plugin later. With nothing in flight it is constant on a quiet fleet;
/// read in [`counters`]' order it is never below that constant.
fn unaccounted((m, c, r): (u64, u64, u64)) -> u64 {
    r.saturating_sub(m + c)
}

/// Counters read when no reconcile was in flight, as far as can be seen:
/// the read with the fewest unaccounted reconciles among a few, early once
/// three reads in a row agree.
async fn quiet_counters(p: &ScriptPlugin, s: &ControllerStats) -> (u64, u64, u64) {
    let mut best = counters(p, s);
    let mut same = 0;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let now = counters(p, s);
        same = if now == best { same + 1 } else { 0 };
        if unaccounted(now) < unaccounted(best) {
            best = now;
        }
        if same >= 2 {
            break;
        }
    }
    best
}

/// Lets the fleet resync until at least `reconciles` more reconciles ran,
/// and reports what happened meanwhile.
async fn resync_window(
    env: &Env,
    p: &ScriptPlugin,
    s: &ControllerStats,
    reconciles: u64,
) -> Result<Window> {
    env.server.clear_requests();
    let start = quiet_counters(p, s).await;
    eventually("resyncs ran", 30, || async {
        (s.reconciles.load(Ordering::SeqCst) >= start.2 + reconciles).then_some(())
    })
    .await?;
    window_since(env, p, s, start).await
}

/// What happened since `start` ([`quiet_counters`]), read when no reconcile
/// is in flight either: the reconcile that ended a caller's wait has usually
/// just started. A reconcile that neither called nor was memoised keeps the
/// unaccounted count above the start's for good, so after the wait the
/// caller's assertions still see it.
async fn window_since(
    env: &Env,
    p: &ScriptPlugin,
    s: &ControllerStats,
    start: (u64, u64, u64),
) -> Result<Window> {
    let mut end = counters(p, s);
    for _ in 0..200 {
        if unaccounted(end) <= unaccounted(start) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        end = counters(p, s);
    }
    Ok(Window {
        calls: end.1 - start.1,
        memoised: end.0 - start.0,
        reconciles: end.2 - start.2,
        writes: env
            .server
            .requests()
            .into_iter()
            // The manager's own report on the WasmController object (its
            // load and health conditions) is not a reconcile's write.
            .filter(|r| r.is_write() && r.resource != "wasmcontrollers")
            .collect(),
    })
}

/// Waits until every parent has been memoised at least once since `from`
/// (the fleet is quiet: each parent's last call found it converged).
async fn settled(s: &ControllerStats, n: u64) -> Result<()> {
    let from = s.memoised.load(Ordering::SeqCst);
    eventually("every parent memoised once", 30, || async {
        (s.memoised.load(Ordering::SeqCst) >= from + n).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_fleet_resyncs_with_no_plugin_call_and_no_write() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let p = script("pure");
    let plugin = Arc::new(Declared {
        inner: p.clone(),
        reads_now: Some(false),
    });
    controller(&env, plugin, "pure", None, json!({"tag": "t1"})).await?;
    let s = converged_fleet(&mut env, 3).await?;
    settled(&s, 3).await?;
    // Two resyncs of every parent at least.
    let w = resync_window(&env, &p, &s, 6).await?;
    assert_eq!(w.calls, 0, "no plugin call on a memoised resync: {w:?}");
    assert_eq!(w.memoised, w.reconciles, "every reconcile memoised: {w:?}");
    assert!(w.writes.is_empty(), "no write at all: {:?}", w.writes);
    Ok(())
}

/// Resync windows of one plugin declaration under one policy.
async fn resyncs_of(reads_now: Option<bool>, memoize: Option<&str>) -> Result<Window> {
    let mut env = Env::start().await?;
    let p = script("p");
    let plugin = Arc::new(Declared {
        inner: p.clone(),
        reads_now,
    });
    controller(&env, plugin, "p", memoize, json!({})).await?;
    let s = converged_fleet(&mut env, 2).await?;
    // A first window lets the convergence's last writes (aggregated events)
    // land; the second is the steady state.
    resync_window(&env, &p, &s, 4).await?;
    resync_window(&env, &p, &s, 6).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_reads_now_is_called_on_every_reconcile() -> Result<()> {
    init_tracing();
    for (reads_now, memoize, what) in [
        (Some(true), None, "declares it reads now"),
        // The opt-in never overrides a plugin's own declaration.
        (
            Some(true),
            Some("Always"),
            "declares it reads now, memoize: Always",
        ),
        (None, None, "declares nothing (0.1.0), memoize: Auto"),
        (Some(false), Some("Never"), "pure, memoize: Never"),
    ] {
        let w = resyncs_of(reads_now, memoize).await?;
        assert_eq!(w.memoised, 0, "{what}: {w:?}");
        assert_eq!(
            w.calls, w.reconciles,
            "{what}: one call per reconcile: {w:?}"
        );
        assert!(w.calls >= 6, "{what}: {w:?}");
        assert!(
            w.writes.is_empty(),
            "{what}: converged, nothing written: {:?}",
            w.writes
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_a_declaration_is_memoised_when_the_controller_opts_in() -> Result<()> {
    init_tracing();
    let w = resyncs_of(None, Some("Always")).await?;
    // The window may still see each parent's last converging call.
    assert!(w.calls <= 2, "at most the last call of each parent: {w:?}");
    assert!(w.memoised >= 4, "{w:?}");
    assert!(w.writes.is_empty(), "{:?}", w.writes);
    Ok(())
}

/// Annotation another actor sets on a child (as a Deployment's controller
/// sets its status); the plugin below reports it in the parent's status.
const READY_NOTE: &str = "example.com/ready";

/// [`observing`], plus `status.note`: the [`READY_NOTE`] of the parent's
/// child `-a` as observed, once there is one. A change of it is a status-only change: the
/// desired children do not carry the annotation, so nothing is applied.
fn reporting(req: &ReconcileRequest) -> ReconcileResponse {
    let mut r = observing(req);
    let name = req.parent["metadata"]["name"].as_str().unwrap_or_default();
    let note = req
        .children
        .iter()
        .find(|c| c["metadata"]["name"] == format!("{name}-a").as_str())
        .and_then(|c| c["metadata"]["annotations"][READY_NOTE].as_str());
    if let (Some(s), Some(note)) = (r.status.as_mut(), note) {
        s["note"] = json!(note);
    }
    r
}

/// Rule 13.4: a parent whose last pass wrote only its status is memoised
/// without waiting for a resync — every fresh parent (rule 14 leaves its
/// status to the pass its children's watch events trigger, which writes
/// it) and a parent whose status follows a child changed by someone else.
/// The echo of that status write queues one more pass, which records the
/// memo. Before it, such a parent's first resync called the plugin (the
/// side-by-side bench measured 1,379 calls at N = 10,000). The resync
/// period is an hour: only the echo can have recorded the memo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parents_whose_last_pass_wrote_only_status_are_memoised_before_any_resync() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let p = ScriptPlugin::new("reporting", |req, _| Ok(reporting(req)));
    let plugin = Arc::new(Declared {
        inner: p.clone(),
        reads_now: Some(false),
    });
    controller_resyncing(&env, plugin, "reporting", None, json!({}), 3600).await?;
    let n = 4;
    let s = converged_fleet(&mut env, n).await?;
    let entries = || s.memo_entries.load(Ordering::SeqCst);
    eventually("every converged parent memoised", 30, || async {
        (entries() == n as u64).then_some(())
    })
    .await?;

    // Someone else changes a child: the next pass writes only the status.
    for i in 0..n {
        env.configmaps("ns1")
            .patch(
                &format!("w{i}-a"),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {READY_NOTE: "yes"}}})),
            )
            .await?;
    }
    for i in 0..n {
        let api = env.widgets("ns1");
        let name = format!("w{i}");
        eventually(&format!("{name} reports the note"), 30, || {
            let (api, name) = (api.clone(), name.clone());
            async move {
                let w = api.get(&name).await.ok()?;
                (w.data["status"]["note"] == "yes").then_some(())
            }
        })
        .await?;
    }
    eventually(
        "every parent memoised again after its status write",
        30,
        || async { (entries() == n as u64).then_some(()) },
    )
    .await?;

    // A forced resync of the fleet: no plugin call, no write.
    env.server.clear_requests();
    let start = quiet_counters(&p, &s).await;
    env.manager()
        .context("manager running")?
        .requeue_matching(|_| true)
        .await;
    eventually("every parent reconciled once more", 30, || async {
        (s.reconciles.load(Ordering::SeqCst) >= start.2 + n as u64).then_some(())
    })
    .await?;
    let w = window_since(&env, &p, &s, start).await?;
    assert_eq!(w.calls, 0, "no plugin call on the forced resync: {w:?}");
    assert_eq!(w.memoised, w.reconciles, "every reconcile memoised: {w:?}");
    assert!(w.writes.is_empty(), "no write at all: {:?}", w.writes);
    Ok(())
}

async fn child_data(env: &Env, name: &str) -> Result<Value> {
    let cm = env.configmaps("ns1").get(name).await?;
    Ok(cm.data["data"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_input_config_or_plugin_version_calls_the_plugin_again() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let p = script("v1");
    let plugin = Arc::new(Declared {
        inner: p.clone(),
        reads_now: Some(false),
    });
    let v1_path = controller(&env, plugin, "v1", None, json!({"tag": "t1"})).await?;
    let s = converged_fleet(&mut env, 1).await?;
    settled(&s, 1).await?;

    // An input: the parent's spec.
    let before = p.calls();
    env.widgets("ns1")
        .patch(
            "w0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "y"}})),
        )
        .await?;
    eventually("child follows the parent's spec", 20, || async {
        (child_data(&env, "w0-a").await.ok()?["value"] == "y").then_some(())
    })
    .await?;
    assert!(p.calls() > before, "the plugin was called for the new spec");

    // The config (the controller restarts with it).
    let before = p.calls();
    let wc = kube::api::Api::<kube::api::DynamicObject>::all_with(
        env.client.clone(),
        &kube::api::ApiResource::erase::<wr_engine::WasmController>(&()),
    );
    wc.patch(
        "widgets",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"plugin": {"config": {"tag": "t2"}}}})),
    )
    .await?;
    eventually("child follows the config", 20, || async {
        (child_data(&env, "w0-a").await.ok()?["tag"] == "t2").then_some(())
    })
    .await?;
    assert!(
        p.calls() > before,
        "the plugin was called for the new config"
    );

    // A new plugin version: other bytes at the same path, hot reloaded.
    let v2 = ScriptPlugin::new("v2", |req, _| {
        let mut r = observing(req);
        for c in &mut r.children {
            c["data"]["version"] = json!("2");
        }
        Ok(r)
    });
    let path = env.plugin_file(
        "v2",
        Arc::new(Declared {
            inner: v2.clone(),
            reads_now: Some(false),
        }),
    )?;
    std::fs::copy(&path, &v1_path)?;
    eventually("child follows the new plugin version", 20, || async {
        (child_data(&env, "w0-a").await.ok()?["version"] == "2").then_some(())
    })
    .await?;
    assert!(v2.calls() > 0, "the new version was called");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_child_of_a_memoised_parent_is_repaired() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let p = script("pure");
    let plugin = Arc::new(Declared {
        inner: p.clone(),
        reads_now: Some(false),
    });
    controller(&env, plugin, "pure", None, json!({"tag": "t1"})).await?;
    let s = converged_fleet(&mut env, 1).await?;
    settled(&s, 1).await?;
    let before = p.calls();
    env.configmaps("ns1")
        .patch(
            "w0-a",
            &PatchParams::apply("intruder").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "w0-a"}, "data": {"value": "hacked"}})),
        )
        .await?;
    eventually("tampered child repaired", 20, || async {
        (child_data(&env, "w0-a").await.ok()?["value"] == "x").then_some(())
    })
    .await?;
    assert!(p.calls() > before, "the tamper made the plugin run again");
    // And the parent goes back to being memoised.
    settled(&s, 1).await?;
    Ok(())
}

/// The status writes of a fresh parent's convergence: children created, then
/// the plugin sees them and reports `Available` — one status write, not one
/// with `Available=False` followed by another with `Available=True`.
/// Deterministic since a pass waits for the child caches to show the host's
/// own child writes (`wr_engine::own_writes`): the pass that the first
/// child's watch event triggers no longer runs on a cache missing the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_parent_converges_with_one_status_write() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let p = script("pure");
    // Memoisation off: every pass runs the plugin and judges the status.
    controller(&env, p.clone(), "pure", Some("Never"), json!({})).await?;
    let s = converged_fleet(&mut env, 1).await?;
    // Two more passes (resyncs) after convergence: they write nothing.
    let rec0 = s.reconciles.load(Ordering::SeqCst);
    eventually("two more reconciles", 30, || async {
        (s.reconciles.load(Ordering::SeqCst) >= rec0 + 2).then_some(())
    })
    .await?;
    let status_writes: Vec<_> = env
        .writes("widgets", Some(FM))
        .into_iter()
        .filter(|r| r.subresource.as_deref() == Some("status"))
        // Writes the server applied: a pass that read the status before the
        // cache showed the first write sends a patch that fails its
        // resourceVersion precondition (409) and changes nothing.
        .filter(|r| (200..300).contains(&r.code))
        .collect();
    assert_eq!(status_writes.len(), 1, "{status_writes:#?}");
    Ok(())
}
