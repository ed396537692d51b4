//! The parent's status is level-triggered too: when someone else rewrites it (or
//! the host judged a stale cached status right), the host converges it back to
//! what it computes — without hot-looping on the echo of its own writes and
//! without writing converged parents on resync or on no-op triggers. Writes are
//! counted from the API server's request log, not from the host.

use std::sync::Arc;

use anyhow::Result;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use wr_apiserver::RequestRecord;
use wr_engine::PluginError;
use wr_runtime::{Condition, ConditionStatus};
use wr_tests::cluster::*;

const FM: &str = "wasm-reconciler/widgets";

fn init_tracing() {
    wr_tests::logs::init();
}

/// The standard ConfigMap children plus a plugin condition and a plugin status
/// field, so every part of the status the host writes can be tampered with.
fn plugin_with_status() -> Arc<ScriptPlugin> {
    ScriptPlugin::new("widgets", |req, _| {
        let mut r = configmap_children(req);
        r.conditions.push(Condition {
            type_: "Available".into(),
            status: ConditionStatus::True,
            reason: "ChildrenApplied".into(),
            message: "all children applied".into(),
        });
        r.status = Some(json!({"phase": "Up", "children": r.children.len()}));
        Ok(r)
    })
}

/// A Widget controller owning ConfigMaps with the given resync period.
async fn controller(env: &Env, p: Arc<ScriptPlugin>, resync_seconds: u32) -> Result<()> {
    let path = env.plugin_file("widgets", p)?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": "widgets"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": path.display().to_string()},
            "resyncPeriodSeconds": resync_seconds
        }
    }))
    .await
}

async fn wait_ready(env: &Env, name: &str) -> Result<DynamicObject> {
    let api = env.widgets("ns1");
    eventually("parent Ready=True for its generation", 20, || {
        let api = api.clone();
        let name = name.to_string();
        async move {
            let w = api.get(&name).await.ok()?;
            let (s, r, g) = ready_of(&w)?;
            (s == "True" && r == "Reconciled" && g == w.metadata.generation).then_some(w)
        }
    })
    .await
}

/// Successful status writes by the host (any parent).
fn host_status_writes(env: &Env) -> Vec<RequestRecord> {
    env.writes("widgets", Some(FM))
        .into_iter()
        .filter(|r| r.subresource.as_deref() == Some("status") && r.code < 300)
        .collect()
}

/// The status with `lastTransitionTime` removed from the conditions (it moves
/// legitimately when a tampered condition flips back).
fn comparable(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(cs) = s.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in cs {
            if let Some(m) = c.as_object_mut() {
                m.remove("lastTransitionTime");
            }
        }
    }
    s
}

/// Overwrites the status through the status subresource, as another client would.
async fn tamper(env: &Env, name: &str, status_patch: Value) -> Result<()> {
    env.widgets("ns1")
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status_patch })),
        )
        .await?;
    Ok(())
}

/// Touches an annotation `n` times (no-op triggers) and waits until the plugin
/// has seen at least one of them.
async fn touch(env: &Env, p: &ScriptPlugin, name: &str, n: usize) -> Result<()> {
    let before = p.calls();
    for i in 0..n {
        env.widgets("ns1")
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"touch": i.to_string()}}})),
            )
            .await?;
    }
    eventually("plugin saw the touches", 10, || async {
        (p.calls() > before).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_overwritten_by_another_client_is_restored() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let p = plugin_with_status();
    controller(&env, p.clone(), 3600).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "x", "children": ["a", "b"]}))
        .await?;
    let w = wait_ready(&env, "w1").await?;
    let converged = comparable(&w.data["status"]);
    assert_eq!(converged["phase"], "Up");
    assert_eq!(converged["observedGeneration"], 1);
    assert_eq!(converged["conditions"].as_array().map(Vec::len), Some(2));

    let tampering = [
        (
            "Ready=False",
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Hacked",
                                   "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}),
        ),
        ("conditions deleted", json!({"conditions": null})),
        (
            "observedGeneration changed",
            json!({"observedGeneration": 7}),
        ),
        ("plugin status field changed", json!({"phase": "Down"})),
        ("plugin status field removed", json!({"children": null})),
    ];
    for (what, patch) in tampering {
        env.server.clear_requests();
        let calls_before = p.calls();
        let before = env.widgets("ns1").get("w1").await?;
        tamper(&env, "w1", patch).await?;
        let api = env.widgets("ns1");
        let restored = eventually(&format!("status restored after: {what}"), 20, || async {
            let w = api.get("w1").await.ok()?;
            (comparable(&w.data["status"]) == converged).then_some(w)
        })
        .await?;
        assert!(
            p.calls() > calls_before,
            "{what}: the status change triggered a reconcile"
        );
        // Ready flipped back only if it had been flipped: its transition time is
        // then new; otherwise it is kept.
        let ready_ltt = |s: &Value| {
            s["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .map(|c| c["lastTransitionTime"].clone())
        };
        if what == "observedGeneration changed" || what.starts_with("plugin status") {
            assert_eq!(
                ready_ltt(&restored.data["status"]),
                ready_ltt(&before.data["status"]),
                "{what}: lastTransitionTime kept when Ready did not change"
            );
        }

        // No hot loop on the echo of the restoring write: no-op triggers
        // afterwards reconcile without writing, so exactly one write restored it.
        touch(&env, &p, "w1", 10).await?;
        let writes = host_status_writes(&env);
        assert_eq!(
            writes.len(),
            1,
            "{what}: one status write restores the status, none after: {writes:?}"
        );
        assert!(
            env.writes("configmaps", None).is_empty(),
            "{what}: children untouched"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converged_parents_see_no_status_writes_on_resync_or_no_op_triggers() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let p = plugin_with_status();
    // Resync every second: the test waits for two full resync rounds.
    controller(&env, p.clone(), 1).await?;
    env.start_manager();
    const PARENTS: usize = 10;
    for i in 0..PARENTS {
        env.create_widget("ns1", &format!("w{i}"), json!({"value": "x"}))
            .await?;
    }
    for i in 0..PARENTS {
        wait_ready(&env, &format!("w{i}")).await?;
    }
    // The creation events are written in the background: let them land (one
    // aggregated event per parent; the WasmController's own events go to
    // `default`), then start counting.
    eventually("one creation event per parent", 10, || async {
        let n = env
            .writes("events", None)
            .iter()
            .filter(|r| r.code < 300 && r.namespace.as_deref() == Some("ns1"))
            .count();
        (n >= PARENTS).then_some(())
    })
    .await?;
    // One resync round first, so that reconciles still in flight from the
    // convergence (which may read a lagging cache) are over before counting.
    let warm = p.calls();
    eventually("a first resync round", 30, || async {
        (p.calls() >= warm + PARENTS as u64).then_some(())
    })
    .await?;
    env.server.clear_requests();
    let before = p.calls();
    eventually("two resync rounds over every parent", 30, || async {
        (p.calls() >= before + 2 * PARENTS as u64).then_some(())
    })
    .await?;
    touch(&env, &p, "w1", 20).await?;
    let parent_writes: Vec<_> = env.writes("widgets", Some(FM));
    assert!(
        parent_writes.is_empty(),
        "no parent writes while converged: {parent_writes:?}"
    );
    let child_writes = env.writes("configmaps", None);
    assert!(child_writes.is_empty(), "no child writes: {child_writes:?}");
    let events = env.writes("events", None);
    if !events.is_empty() {
        let api: kube::Api<k8s_openapi::api::core::v1::Event> =
            kube::Api::namespaced(env.client.clone(), "ns1");
        let all: Vec<_> = api
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .map(|e| (e.involved_object.name, e.reason, e.message, e.event_time))
            .collect();
        panic!("no events while converged: {events:?}; all events: {all:#?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_error_status_is_restored_without_calling_the_plugin() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let p = ScriptPlugin::new("widgets", |_, _| {
        Err(PluginError::Permanent {
            reason: "InvalidValue".into(),
            message: "value must not be bad".into(),
        })
    });
    controller(&env, p.clone(), 3600).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "bad"}))
        .await?;
    let api = env.widgets("ns1");
    let failed = || async {
        let w = api.get("w1").await.ok()?;
        let (s, r, g) = ready_of(&w)?;
        (s == "False" && r == "InvalidValue" && g == Some(1)).then_some(())
    };
    eventually("Ready=False InvalidValue", 10, failed).await?;
    let calls = p.calls();
    env.server.clear_requests();
    tamper(
        &env,
        "w1",
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Fine",
                               "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}),
    )
    .await?;
    eventually("Ready=False restored", 10, failed).await?;
    assert_eq!(
        p.calls(),
        calls,
        "the permanent failure of this generation is remembered: no new plugin call"
    );
    assert_eq!(host_status_writes(&env).len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_changed_while_the_host_was_down_is_restored() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let p = plugin_with_status();
    controller(&env, p.clone(), 3600).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "x"}))
        .await?;
    let w = wait_ready(&env, "w1").await?;
    let converged = comparable(&w.data["status"]);
    env.stop_manager().await;
    tamper(
        &env,
        "w1",
        json!({"phase": "Down", "observedGeneration": 0}),
    )
    .await?;
    env.server.clear_requests();
    env.start_manager();
    let api = env.widgets("ns1");
    eventually("status restored after restart", 20, || async {
        let w = api.get("w1").await.ok()?;
        (comparable(&w.data["status"]) == converged).then_some(())
    })
    .await?;
    touch(&env, &p, "w1", 5).await?;
    assert_eq!(host_status_writes(&env).len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_field_the_plugin_removes_is_removed_once() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    // Reports `legacy` until the spec says otherwise, then removes it (null).
    let p = ScriptPlugin::new("widgets", |req, _| {
        let mut r = configmap_children(req);
        r.status = Some(if req.parent["spec"]["value"] == "new" {
            json!({"phase": "Up", "legacy": null})
        } else {
            json!({"phase": "Up", "legacy": "yes"})
        });
        Ok(r)
    });
    controller(&env, p.clone(), 3600).await?;
    env.start_manager();
    env.create_widget("ns1", "w1", json!({"value": "old"}))
        .await?;
    let w = wait_ready(&env, "w1").await?;
    assert_eq!(w.data["status"]["legacy"], "yes");
    env.server.clear_requests();
    env.widgets("ns1")
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "new"}})),
        )
        .await?;
    let w = wait_ready(&env, "w1").await?;
    assert!(
        w.data["status"].get("legacy").is_none(),
        "removed: {}",
        w.data["status"]
    );
    assert_eq!(w.data["status"]["phase"], "Up");
    // Later passes find the status right: no write after the one that removed it.
    touch(&env, &p, "w1", 10).await?;
    let writes = host_status_writes(&env);
    assert_eq!(writes.len(), 1, "{writes:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_fighting_over_a_status_do_not_hot_loop() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    // Two controllers on the same parent kind that disagree about the status:
    // each restores its own version when the other overwrites it. One kind
    // has one owning controller (the second would be `ParentConflict`), so
    // the second writer is a decorator that writes the status.
    let mut plugins = Vec::new();
    for name in ["left", "right"] {
        let widgets = json!({"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"});
        let parent = if name == "left" {
            json!({"parentResource": widgets})
        } else {
            json!({"decorate": {"resource": widgets, "writeStatus": true}})
        };
        let p = ScriptPlugin::new(name, move |_, _| {
            let mut r = response(vec![]);
            r.status = Some(json!({"owner": name}));
            Ok(r)
        });
        let path = env.plugin_file(name, p.clone())?;
        let mut wc = json!({
            "apiVersion": "wasm-reconciler.dev/v1alpha1",
            "kind": "WasmController",
            "metadata": {"name": name},
            "spec": {
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "plugin": {"path": path.display().to_string()},
                "resyncPeriodSeconds": 3600
            }
        });
        for (k, v) in parent.as_object().into_iter().flatten() {
            wc["spec"][k] = v.clone();
        }
        env.create_controller(wc).await?;
        plugins.push(p);
    }
    env.start_manager();
    env.create_widget("ns1", "w1", json!({})).await?;
    let status_writes = |env: &Env| {
        env.writes("widgets", None)
            .into_iter()
            .filter(|r| r.subresource.as_deref() == Some("status") && r.code < 300)
            .count()
    };
    // The fight starts: both have written (and restored) at least twice.
    eventually("both controllers wrote their status twice", 20, || async {
        let by = |fm: &str| {
            env.writes("widgets", Some(fm))
                .into_iter()
                .filter(|r| r.subresource.as_deref() == Some("status") && r.code < 300)
                .count()
        };
        (by("wasm-reconciler/left") >= 2 && by("wasm-reconciler/right") >= 2).then_some(())
    })
    .await?;
    let (writes0, calls0) = (status_writes(&env), plugins[0].calls() + plugins[1].calls());
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let writes = status_writes(&env) - writes0;
    let calls = plugins[0].calls() + plugins[1].calls() - calls0;
    // Restores back off (50 ms doubling per writer): about 7 each in 3 s. A
    // ping-pong at full speed makes hundreds.
    assert!(writes <= 40, "status writes in 3 s of fighting: {writes}");
    assert!(calls <= 150, "plugin calls in 3 s of fighting: {calls}");
    Ok(())
}
