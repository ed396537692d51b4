//! Per-parent related objects (issue 18 item 1), end to end: the real
//! `team-config` component (world `reconciler-with-customize`) run by the
//! engine against the API server. Each Widget asks, through `customize`, for
//! the ConfigMaps labelled `team=<spec.team>`; the plugin merges what it is
//! handed and reports the names in `status.sources` without filtering, so
//! the status shows exactly what each call received.
//!
//! The component is wrapped in a counting plugin (same bytes, same runtime)
//! so the test sees the reconcile and `customize` calls per parent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use futures::future::BoxFuture;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wr_engine::{PluginError, PluginLoader, ReconcilePlugin};
use wr_runtime::{
    CallLimits, CustomizeRequest, ReconcileRequest, ReconcileResponse, RelatedSelector,
};
use wr_tests::cluster::*;
use wr_tests::plugins::plugin_bytes;

/// Calls per parent name: (reconcile, customize).
type Counts = HashMap<String, (u64, u64)>;

/// The real component, counting its calls per parent.
struct Counting {
    inner: Arc<dyn ReconcilePlugin>,
    counts: Mutex<Counts>,
}

impl Counting {
    fn bump(&self, parent: &Value, customize: bool) {
        let name = parent["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let mut m = self.counts.lock().unwrap();
        let e = m.entry(name).or_default();
        if customize {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }

    fn counts(&self) -> Counts {
        self.counts.lock().unwrap().clone()
    }
}

impl ReconcilePlugin for Counting {
    fn digest(&self) -> &str {
        self.inner.digest()
    }

    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        self.inner.info()
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        self.bump(&req.parent, false);
        self.inner.reconcile(req, limits)
    }

    fn customize<'a>(
        &'a self,
        req: &'a CustomizeRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<Option<Vec<RelatedSelector>>, PluginError>> {
        self.bump(&req.parent, true);
        self.inner.customize(req, limits)
    }
}

async fn team_config() -> Result<Arc<Counting>> {
    let rt = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig::default())
        .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
    let inner = wr_engine::wasm::WasmLoader::new(rt)
        .load(plugin_bytes("team-config"))
        .await
        .map_err(|e| anyhow::anyhow!("loading team-config: {e}"))?;
    Ok(Arc::new(Counting {
        inner,
        counts: Mutex::default(),
    }))
}

async fn team_cm(env: &Env, name: &str, team: &str, value: &str) -> Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": env.ns("ns1"), "labels": {"team": team}},
        "data": {name: value}
    }))?;
    env.configmaps("ns1")
        .create(&PostParams::default(), &obj)
        .await?;
    Ok(())
}

async fn patch_cm(env: &Env, name: &str, patch: Value) -> Result<()> {
    env.configmaps("ns1")
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Waits until Widget `name` is Ready at its generation with `sources`.
async fn wait_sources(env: &Env, name: &str, sources: &[&str]) -> Result<DynamicObject> {
    let api = env.widgets("ns1");
    let want = json!(sources);
    eventually(&format!("{name} status.sources {want}"), 30, || {
        let api = api.clone();
        let want = want.clone();
        async move {
            let w = api.get(name).await.ok()?;
            let (s, _, g) = ready_of(&w)?;
            let ok = s == "True"
                && g == w.metadata.generation
                && w.data.pointer("/status/sources") == Some(&want);
            ok.then_some(w)
        }
    })
    .await
}

/// Waits until the child `<parent>-team` has `data[key] == value`.
async fn wait_child(env: &Env, parent: &str, key: &str, value: &str) -> Result<()> {
    let api = env.configmaps("ns1");
    let child = format!("{parent}-team");
    eventually(&format!("{child} has {key}={value}"), 30, || {
        let (api, child) = (api.clone(), child.clone());
        async move {
            let cm = api.get(&child).await.ok()?;
            (cm.data.pointer(&format!("/data/{key}")) == Some(&json!(value))).then_some(())
        }
    })
    .await
}

/// Waits until no call has happened for a while (the queue drained) and
/// returns the counts then. Only a quiet point to compare from: nothing is
/// asserted about how long anything took.
async fn settled(p: &Counting) -> Counts {
    let mut last = p.counts();
    let mut quiet = 0;
    while quiet < 6 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let now = p.counts();
        if now == last {
            quiet += 1;
        } else {
            quiet = 0;
            last = now;
        }
    }
    last
}

fn reconciles(c: &Counts, parent: &str) -> u64 {
    c.get(parent).map_or(0, |e| e.0)
}

fn customizes(c: &Counts, parent: &str) -> u64 {
    c.get(parent).map_or(0, |e| e.1)
}

/// Asserts which parents were reconciled between `before` and `after`.
fn assert_reconciled(before: &Counts, after: &Counts, changed: &[&str], unchanged: &[&str]) {
    for p in changed {
        assert!(
            reconciles(after, p) > reconciles(before, p),
            "{p} should have been reconciled: before {before:?}, after {after:?}"
        );
    }
    for p in unchanged {
        assert_eq!(
            reconciles(after, p),
            reconciles(before, p),
            "{p} should not have been reconciled: before {before:?}, after {after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_parent_gets_and_is_woken_by_only_its_own_related_objects() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let plugin = team_config().await?;
    let path = env.plugin_file("teams", plugin.clone())?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "teams"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            // The rule's own selector narrows the shared ConfigMap cache to
            // team ConfigMaps (the children have no team label);
            // `customize` narrows it further per parent.
            "related": [{"name": "team-configs", "apiVersion": "v1", "resource": "configmaps",
                         "selector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}],
            "plugin": {"path": path.display().to_string()},
            "maxConcurrentReconciles": 1,
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    team_cm(&env, "web-1", "web", "1").await?;
    team_cm(&env, "web-2", "web", "1").await?;
    team_cm(&env, "db-1", "db", "1").await?;
    team_cm(&env, "ops-1", "ops", "1").await?;
    env.start_manager();
    env.create_widget("ns1", "a", json!({"team": "web"}))
        .await?;
    env.create_widget("ns1", "b", json!({"team": "db"})).await?;
    env.create_widget("ns1", "c", json!({"team": "web"}))
        .await?;

    // Each call received exactly its own team's ConfigMaps.
    wait_sources(&env, "a", &["web-1", "web-2"]).await?;
    wait_sources(&env, "b", &["db-1"]).await?;
    wait_sources(&env, "c", &["web-1", "web-2"]).await?;
    let before = settled(&plugin).await;
    // customize once per parent, however often it was reconciled.
    for p in ["a", "b", "c"] {
        assert_eq!(customizes(&before, p), 1, "{before:?}");
        assert!(reconciles(&before, p) >= 1, "{before:?}");
    }

    // A db ConfigMap changes: only b is reconciled.
    patch_cm(&env, "db-1", json!({"data": {"db-1": "2"}})).await?;
    wait_child(&env, "b", "db-1", "2").await?;
    let after = settled(&plugin).await;
    assert_reconciled(&before, &after, &["b"], &["a", "c"]);

    // A web ConfigMap changes: a and c, not b.
    let before = after;
    patch_cm(&env, "web-1", json!({"data": {"web-1": "2"}})).await?;
    for p in ["a", "c"] {
        wait_child(&env, p, "web-1", "2").await?;
    }
    let after = settled(&plugin).await;
    assert_reconciled(&before, &after, &["a", "c"], &["b"]);

    // An ops ConfigMap is relabelled into team db: b (its new selector
    // match) gets it, a and c are not woken.
    let before = after;
    patch_cm(
        &env,
        "ops-1",
        json!({"metadata": {"labels": {"team": "db"}}}),
    )
    .await?;
    wait_sources(&env, "b", &["db-1", "ops-1"]).await?;
    let after = settled(&plugin).await;
    assert_reconciled(&before, &after, &["b"], &["a", "c"]);
    // Related changes reuse the cached answer.
    for p in ["a", "b", "c"] {
        assert_eq!(customizes(&after, p), 1, "{after:?}");
    }

    // b switches team (a new generation): customize is asked again, and b
    // gets the web ConfigMaps from then on.
    env.widgets("ns1")
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"team": "web"}})),
        )
        .await?;
    wait_sources(&env, "b", &["web-1", "web-2"]).await?;
    let after = settled(&plugin).await;
    assert_eq!(customizes(&after, "b"), 2, "{after:?}");
    assert_eq!(customizes(&after, "a"), 1, "{after:?}");

    env.stop_manager().await;
    Ok(())
}

/// A `customize` answer naming a rule the WasmController does not declare
/// is invalid output: the parent says so on Ready and nothing is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_for_an_undeclared_rule_is_invalid_output() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let plugin = team_config().await?;
    let path = env.plugin_file("teams", plugin.clone())?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "teams"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "related": [{"name": "other", "apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": path.display().to_string()},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.start_manager();
    env.create_widget("ns1", "a", json!({"team": "web"}))
        .await?;
    let api = env.widgets("ns1");
    let w = eventually("a Ready=False InvalidPluginOutput", 30, || {
        let api = api.clone();
        async move {
            let w = api.get("a").await.ok()?;
            let (s, r, _) = ready_of(&w)?;
            (s == "False" && r == "InvalidPluginOutput").then_some(w)
        }
    })
    .await?;
    let msg = w
        .data
        .pointer("/status/conditions")
        .map(Value::to_string)
        .unwrap_or_default();
    assert!(msg.contains("team-configs"), "{msg}");
    assert!(env.configmaps("ns1").get_opt("a-team").await?.is_none());
    assert_eq!(
        reconciles(&plugin.counts(), "a"),
        0,
        "reconcile is not called"
    );
    env.stop_manager().await;
    Ok(())
}
