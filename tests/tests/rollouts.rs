//! Progressive delivery (issue 17 items 1 and 2) at the wire: the real host
//! (manager in-process) against the embedded API server over loopback.
//!
//! - Shadow: a candidate that changes one field of one child kind produces
//!   exactly that difference per parent on `status.shadow`, an Event, and no
//!   write at all (the API server's request log is the referee).
//! - Canary: steps advance in order and each parent runs the version its step
//!   says; a restarted host continues at the same step; a candidate failing a
//!   gate is rolled back on every migrated parent.
//!
//! Plugins are native test plugins (each "version" a known function), so a
//! child's `data.version` says which version produced it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wr_engine::PluginError;
use wr_engine::crd::{ROLLOUT_COMMAND_ANNOTATION, RolloutPhase, ShadowDifference};
use wr_tests::cluster::*;
use wr_tests::reload::*;

/// (parent, version) of every plugin call.
type CallLog = Arc<Mutex<Vec<(String, &'static str)>>>;

fn init_tracing() {
    wr_tests::logs::init();
}

fn name_of(req: &wr_runtime::ReconcileRequest) -> String {
    req.parent["metadata"]["name"]
        .as_str()
        .unwrap_or("x")
        .to_string()
}

/// Children of the shadow test: a ConfigMap (value, a volatile stamp) and a
/// Secret; `cm_value` decides the ConfigMap's value from the parent's.
fn two_kinds(
    stamp: &'static str,
    cm_value: fn(&str) -> String,
) -> impl Fn(&wr_runtime::ReconcileRequest, u64) -> Result<wr_runtime::ReconcileResponse, PluginError>
+ Send
+ Sync
+ 'static {
    move |req, _| {
        let name = name_of(req);
        let value = req.parent["spec"]["value"]
            .as_str()
            .unwrap_or("")
            .to_string();
        Ok(response(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("{name}-cm"), "labels": {"app": name}},
                   "data": {"value": cm_value(&value), "renderedAt": stamp}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": format!("{name}-s"), "labels": {"app": name}},
                   // `data`, not `stringData`: the server turns stringData into
                   // data, so an active apply of it would differ every time.
                   "data": {"value": "dg=="}}),
        ]))
    }
}

fn shadow_controller(name: &str, active: &str, candidate: &str) -> Value {
    json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [
                {"apiVersion": "v1", "resource": "configmaps"},
                {"apiVersion": "v1", "resource": "secrets"}
            ],
            "plugin": {
                "path": active,
                "candidate": {
                    "path": candidate,
                    "volatileFields": ["ConfigMap:data.renderedAt"],
                    "maxDifferences": 10
                }
            },
            "resyncPeriodSeconds": 3600
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_reports_exactly_the_changed_field_and_writes_nothing() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let active = ScriptPlugin::new("active", two_kinds("t1", |v| v.to_string()));
    let candidate = ScriptPlugin::new("candidate", two_kinds("t2", |v| format!("{v}-new")));
    let a = env.plugin_file("active", active.clone())?;
    let c = env.plugin_file("candidate", candidate.clone())?;
    let wc = shadow_controller(
        "shadowed",
        &a.display().to_string(),
        &c.display().to_string(),
    );
    env.create_controller(wc).await?;
    env.start_manager();
    let parents = ["p1", "p2", "p3"];
    for p in parents {
        env.create_widget("ns1", p, json!({"value": format!("v-{p}")}))
            .await?;
    }
    // Every parent reconciled (by the active version) and shadowed once.
    let st = eventually("a shadow difference per parent", 60, || async {
        let s = controller(&env, "shadowed").await.ok()?.status?.shadow?;
        (s.differing >= 3 && s.differences.len() >= 3).then_some(s)
    })
    .await?;
    assert_eq!((st.identical, st.failing), (0, 0), "{st:?}");
    let ns = env.ns("ns1");
    let mut got = st.differences.clone();
    got.sort_by(|x, y| x.parent.cmp(&y.parent));
    let want: Vec<ShadowDifference> = parents
        .iter()
        .map(|p| ShadowDifference {
            parent: format!("{ns}/{p}"),
            child: Some(format!("ConfigMap {ns}/{p}-cm")),
            field: "data.value".to_string(),
            active: Some(format!("\"v-{p}\"")),
            candidate: Some(format!("\"v-{p}-new\"")),
        })
        .collect();
    // Exactly the changed field: not the volatile stamp, not the Secret.
    assert_eq!(got, want);
    let candidate_bytes = std::fs::read(&c)?;
    assert_eq!(
        st.candidate_digest,
        wr_engine::plugin_source::digest(&candidate_bytes)
    );
    // The children are the active version's. The shadow call is offered
    // the active answer before that answer's children are applied, so the
    // differences can be reported before the children exist (real
    // kube-apiserver, CI dry run, session 9): wait for each.
    for p in parents {
        let name = format!("{p}-cm");
        let cm = eventually("the active version's child", 20, || async {
            env.configmaps("ns1").get_opt(&name).await.ok()?
        })
        .await?;
        assert_eq!(cm.data["data"]["value"], json!(format!("v-{p}")));
        assert_eq!(cm.data["data"]["renderedAt"], json!("t1"));
    }
    // One Event for the first difference.
    let first = eventually("the ShadowDifference event", 20, || async {
        let ev = controller_events(&env, "shadowed").await;
        let n = ev.iter().filter(|e| e.1 == "ShadowDifference").count();
        (n > 0).then_some(n)
    })
    .await?;
    assert_eq!(first, 1);

    // More reconciles with the log cleared: shadow calls go on, and neither
    // they nor anything else write a child.
    env.server.clear_requests();
    let calls_before = candidate.calls();
    let touch = PatchParams {
        field_manager: Some("shadow-test".into()),
        ..PatchParams::default()
    };
    for p in parents {
        env.widgets("ns1")
            .patch(
                p,
                &touch,
                &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
            )
            .await?;
    }
    eventually("three more shadow calls", 30, || async {
        let s = controller(&env, "shadowed").await.ok()?.status?.shadow?;
        (candidate.calls() >= calls_before + 3 && s.differing >= st.differing + 3).then_some(())
    })
    .await?;
    let log = env.server.requests();
    // The log covers this window (on the real cluster it is the audit log):
    // it holds the test's own three patches (the host patches parents too:
    // finalizers, status).
    let patches = log
        .iter()
        .filter(|r| {
            r.resource == "widgets"
                && r.verb == "patch"
                && r.code == 200
                && r.field_manager.as_deref() == Some("shadow-test")
        })
        .count();
    assert_eq!(patches, 3, "the request log missed the widget patches");
    let child_writes: Vec<_> = log
        .into_iter()
        .filter(|r| r.is_write() && (r.resource == "configmaps" || r.resource == "secrets"))
        .collect();
    assert!(
        child_writes.is_empty(),
        "children written: {child_writes:?}"
    );
    // Distinct differences only: the same three, however many calls.
    let again = controller(&env, "shadowed")
        .await?
        .status
        .and_then(|s| s.shadow)
        .map(|s| s.differences.len());
    assert_eq!(again, Some(3));
    let events = controller_events(&env, "shadowed").await;
    assert_eq!(
        events.iter().filter(|e| e.1 == "ShadowDifference").count(),
        1,
        "{events:?}"
    );
    env.stop_manager().await;
    Ok(())
}

/// Version `v`: one ConfigMap `<parent>-a` stamped with the version; calls logged.
fn versioned(v: &'static str, log: &CallLog, fail_in: Option<&'static str>) -> Arc<ScriptPlugin> {
    let log = log.clone();
    ScriptPlugin::new(v, move |req, _| {
        let name = name_of(req);
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.clone(), v));
        let ns = req.parent["metadata"]["namespace"].as_str().unwrap_or("");
        if fail_in.is_some_and(|f| ns.ends_with(f)) {
            return Err(PluginError::Fault {
                kind: wr_runtime::FaultKind::Trap,
                message: format!("{v} traps in {ns}"),
            });
        }
        Ok(response(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-a"), "labels": {"app": name}},
            "data": {"version": v}}),
        ]))
    })
}

/// Version of each parent's child, by `namespace/parent`, in the given namespaces.
async fn versions(env: &Env, namespaces: &[&str]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for ns in namespaces {
        for cm in env
            .configmaps(ns)
            .list(&ListParams::default().labels("app"))
            .await?
            .items
        {
            let app = cm
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .cloned()
                .unwrap_or_default();
            let v = cm.data["data"]["version"]
                .as_str()
                .unwrap_or("")
                .to_string();
            out.insert(format!("{}/{app}", env.ns(ns)), v);
        }
    }
    Ok(out)
}

/// The expected version of every parent: `on_candidate` lists the migrated ones.
fn expect(all: &[(&str, &str)], on_candidate: &[&str]) -> BTreeMap<String, String> {
    all.iter()
        .map(|(ns, p)| {
            let key = format!("{ns}/{p}");
            let v = if on_candidate.contains(&key.as_str()) {
                "v2"
            } else {
                "v1"
            };
            (key, v.to_string())
        })
        .collect()
}

async fn canary_controller(
    env: &Env,
    name: &str,
    v1: &str,
    v2: &str,
    rollout: Value,
) -> Result<()> {
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": v1, "candidate": {"path": v2, "shadow": false}},
            "rollout": rollout,
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": 4
        }
    }))
    .await
}

/// `namespace/name` keys of `l`, namespaces mapped for this test's server.
fn keys(env: &Env, l: &[(&str, &str)]) -> Vec<String> {
    l.iter()
        .map(|(ns, p)| format!("{}/{p}", env.ns(ns)))
        .collect()
}

async fn rollout_of(env: &Env, name: &str) -> Option<wr_engine::crd::RolloutStatus> {
    controller(env, name).await.ok()?.status?.rollout
}

async fn command(env: &Env, name: &str, cmd: &str) -> Result<()> {
    let api: kube::Api<wr_engine::WasmController> = kube::Api::all(env.client.clone());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {ROLLOUT_COMMAND_ANNOTATION: cmd}}})),
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_steps_advance_in_order_survive_a_restart_and_promote() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let c1 = env.ns("c1");
    for ns in ["c1", "c2", "c3"] {
        env.namespace(ns).await?;
    }
    let log = CallLog::default();
    let v1 = env.plugin_file("v1", versioned("v1", &log, None))?;
    let v2 = env.plugin_file("v2", versioned("v2", &log, None))?;
    let rollout = json!({
        "steps": [
            {"namespaces": [c1], "pauseSeconds": 2},
            {"selector": {"matchLabels": {"wave": "two"}}, "pauseSeconds": 3600},
            {"percent": 100}
        ],
        "gates": {"readyPercent": 100, "readyWithinSeconds": 60}
    });
    canary_controller(
        &env,
        "canary",
        &v1.display().to_string(),
        &v2.display().to_string(),
        rollout,
    )
    .await?;
    let parents = [
        ("c1", "w1"),
        ("c1", "w2"),
        ("c2", "w3"),
        ("c2", "w4"),
        ("c3", "w5"),
        ("c3", "w6"),
    ];
    for (ns, p) in parents {
        env.create_widget(ns, p, json!({})).await?;
        if ["w3", "w5"].contains(&p) {
            env.widgets(ns)
                .patch(
                    p,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {"wave": "two"}}})),
                )
                .await?;
        }
    }
    let all: Vec<(&str, &str)> = parents.to_vec();
    let nss = ["c1", "c2", "c3"];
    let all_mapped: Vec<(String, String)> = all
        .iter()
        .map(|(ns, p)| (env.ns(ns), p.to_string()))
        .collect();
    let all_ref: Vec<(&str, &str)> = all_mapped
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    env.start_manager();

    // Step 1: only c1 runs the candidate.
    let step1 = keys(&env, &[("c1", "w1"), ("c1", "w2")]);
    let step1: Vec<&str> = step1.iter().map(String::as_str).collect();
    let mut seen_steps = Vec::new();
    eventually("step 1: c1 on v2, the rest on v1", 60, || async {
        let r = rollout_of(&env, "canary").await?;
        let v = versions(&env, &nss).await.ok()?;
        (r.step == 1 && v == expect(&all_ref, &step1)).then_some(())
    })
    .await?;
    seen_steps.push(1);
    // Step 2: plus the wave=two parents in any namespace.
    let step2 = keys(
        &env,
        &[("c1", "w1"), ("c1", "w2"), ("c2", "w3"), ("c3", "w5")],
    );
    let step2: Vec<&str> = step2.iter().map(String::as_str).collect();
    eventually("step 2: c1 and wave=two on v2", 60, || async {
        let r = rollout_of(&env, "canary").await?;
        let v = versions(&env, &nss).await.ok()?;
        (r.step == 2 && r.phase == RolloutPhase::Progressing && v == expect(&all_ref, &step2))
            .then_some(())
    })
    .await?;
    seen_steps.push(2);
    assert_eq!(seen_steps, vec![1, 2]);
    // The RolloutStep event is posted by a detached task, after the status
    // waited for: wait for step 2's, then check it is the only one.
    let events = eventually("the RolloutStep event of step 2", 20, || async {
        let events = controller_events(&env, "canary").await;
        events
            .iter()
            .any(|e| e.1 == "RolloutStep" && e.2 == "step 2 of 3 started")
            .then_some(events)
    })
    .await?;
    let steps: Vec<&str> = events
        .iter()
        .filter(|e| e.1 == "RolloutStep")
        .map(|e| e.2.as_str())
        .collect();
    assert_eq!(steps, vec!["step 2 of 3 started"], "{events:?}");
    let before = rollout_of(&env, "canary").await;
    // The status counts steps as the Event and the message do.
    assert_eq!(
        before
            .as_ref()
            .map(|r| (r.step, r.steps, r.message.as_deref())),
        Some((2, 3, Some("step 2 started"))),
        "{before:?}"
    );

    // A new host (fresh memory) continues at step 2, with the same parents.
    env.stop_manager().await;
    log.lock().unwrap_or_else(|e| e.into_inner()).clear();
    env.server.clear_requests();
    env.start_manager();
    eventually("the new host reconciled every parent", 60, || async {
        let l = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let names: std::collections::BTreeSet<&str> = l.iter().map(|(p, _)| p.as_str()).collect();
        (names.len() == parents.len()).then_some(())
    })
    .await?;
    let calls = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for (p, v) in &calls {
        let want = if ["w1", "w2", "w3", "w5"].contains(&p.as_str()) {
            "v2"
        } else {
            "v1"
        };
        assert_eq!(*v, want, "{p} after the restart");
    }
    let after = rollout_of(&env, "canary").await;
    assert_eq!(
        after.as_ref().map(|r| (r.step, r.phase)),
        Some((2, RolloutPhase::Progressing))
    );
    assert_eq!(
        after.as_ref().and_then(|r| r.step_started_at.clone()),
        before.and_then(|r| r.step_started_at),
        "the step did not start again"
    );
    assert_eq!(versions(&env, &nss).await?, expect(&all_ref, &step2));

    // Promote by hand (what `wasm-reconciler rollout promote` writes).
    command(&env, "canary", "promote").await?;
    let everyone: Vec<String> = keys(&env, &all);
    let everyone: Vec<&str> = everyone.iter().map(String::as_str).collect();
    eventually("promoted: every parent on v2", 60, || async {
        let r = rollout_of(&env, "canary").await?;
        let v = versions(&env, &nss).await.ok()?;
        (r.phase == RolloutPhase::Promoted && v == expect(&all_ref, &everyone)).then_some(())
    })
    .await?;
    let cond = condition(&env, "canary", "Rollout").await;
    assert_eq!(
        cond.map(|c| (c.0, c.1)),
        Some(("True".into(), "Promoted".into()))
    );
    // The host removes the command by a detached patch, independently of the
    // status that says it was applied: wait for it.
    eventually("the host removes the command once applied", 20, || async {
        let wc = controller(&env, "canary").await.ok()?;
        (!wc.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ROLLOUT_COMMAND_ANNOTATION))
        .then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_failing_a_gate_is_rolled_back_on_every_migrated_parent() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    let (f1, f2) = (env.ns("f1"), env.ns("f2"));
    for ns in ["f1", "f2", "f3"] {
        env.namespace(ns).await?;
    }
    let log = CallLog::default();
    let v1 = env.plugin_file("v1", versioned("v1", &log, None))?;
    // The candidate answers in f1 and traps in f2.
    let v2 = env.plugin_file("v2", versioned("v2", &log, Some("f2")))?;
    let rollout = json!({
        "steps": [
            {"namespaces": [f1], "pauseSeconds": 1},
            {"namespaces": [f2], "pauseSeconds": 3600},
            {"percent": 100}
        ],
        "gates": {"maxFaults": 0}
    });
    canary_controller(
        &env,
        "failing",
        &v1.display().to_string(),
        &v2.display().to_string(),
        rollout,
    )
    .await?;
    let parents = [("f1", "a1"), ("f1", "a2"), ("f2", "b1"), ("f3", "c1")];
    for (ns, p) in parents {
        env.create_widget(ns, p, json!({})).await?;
    }
    let nss = ["f1", "f2", "f3"];
    let mapped: Vec<(String, String)> = parents
        .iter()
        .map(|(ns, p)| (env.ns(ns), p.to_string()))
        .collect();
    let all: Vec<(&str, &str)> = mapped
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let f1_parents = [format!("{f1}/a1"), format!("{f1}/a2")];
    let f1_refs: Vec<&str> = f1_parents.iter().map(String::as_str).collect();
    env.start_manager();
    // Step 1 served f1 from the candidate (proves the rollback has something to undo).
    eventually("step 1: f1 on v2", 60, || async {
        let v = versions(&env, &nss).await.ok()?;
        (v == expect(&all, &f1_refs)).then_some(())
    })
    .await?;
    // Step 2 moves f2 to the candidate, which traps: the gate fails.
    let r = eventually("rolled back", 60, || async {
        let r = rollout_of(&env, "failing").await?;
        (r.phase == RolloutPhase::RolledBack).then_some(r)
    })
    .await?;
    assert_eq!(r.step, 2, "failed in step 2: {r:?}");
    assert!(
        r.message.as_deref().unwrap_or("").contains("faulted"),
        "{r:?}"
    );
    // Every parent back on v1, f1 included.
    eventually("every parent on v1 again", 60, || async {
        let v = versions(&env, &nss).await.ok()?;
        (v == expect(&all, &[])).then_some(())
    })
    .await?;
    let cond = condition(&env, "failing", "Rollout").await;
    let (status, reason, message) = cond.unwrap_or_default();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "RolledBack"));
    assert!(
        message.contains("step 2") && message.contains("faulted"),
        "{message}"
    );
    // The event is posted by a detached task after the status: wait for it.
    let found = eventually("the RolloutRolledBack event", 20, || async {
        controller_events(&env, "failing")
            .await
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "RolloutRolledBack" && e.2.contains("faulted"))
            .then_some(())
    })
    .await;
    let events = controller_events(&env, "failing").await;
    assert!(found.is_ok(), "{events:?}");
    // From now on the candidate serves nobody.
    log.lock().unwrap_or_else(|e| e.into_inner()).clear();
    for (ns, p) in parents {
        env.widgets(ns)
            .patch(
                p,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"again": "yes"}}})),
            )
            .await?;
    }
    eventually("every parent reconciled again", 30, || async {
        let l = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let names: std::collections::BTreeSet<&str> = l.iter().map(|(p, _)| p.as_str()).collect();
        (names.len() == parents.len()).then_some(())
    })
    .await?;
    let calls = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(calls.iter().all(|(_, v)| *v == "v1"), "{calls:?}");
    env.stop_manager().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_fails_to_load_never_runs_and_is_reported() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("g1").await?;
    let g1 = env.ns("g1");
    let log = CallLog::default();
    let v1 = env.plugin_file("v1", versioned("v1", &log, None))?;
    // Bytes no loader accepts: the candidate is refused at load.
    let broken = env.dir.path().join("broken.wasm");
    std::fs::write(&broken, b"not a component")?;
    let rollout = json!({"steps": [{"namespaces": [g1]}], "pauseSeconds": 1});
    canary_controller(
        &env,
        "refused",
        &v1.display().to_string(),
        &broken.display().to_string(),
        rollout,
    )
    .await?;
    env.create_widget("g1", "w1", json!({})).await?;
    env.start_manager();
    let (status, reason, message) = eventually("CandidateLoaded=False", 60, || async {
        condition(&env, "refused", "CandidateLoaded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await?;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "LoadFailed"));
    assert!(message.contains("unknown test plugin"), "{message}");
    let key = format!("{g1}/w1");
    eventually("w1 on v1", 30, || async {
        let v = versions(&env, &["g1"]).await.ok()?;
        (v.get(&key).map(String::as_str) == Some("v1")).then_some(())
    })
    .await?;
    // No rollout starts for a version that did not load, and only v1 ran.
    assert!(rollout_of(&env, "refused").await.is_none());
    let calls = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        !calls.is_empty() && calls.iter().all(|(_, v)| *v == "v1"),
        "{calls:?}"
    );
    env.stop_manager().await;
    Ok(())
}

/// A candidate whose `config` changes while its component stays the same is
/// installed again: the parents it serves are reconciled with the new config
/// (before, the host kept the candidate as first installed, so `promote`
/// shipped the old config), and memoisation hashes the candidate's config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_candidate_config_reaches_the_parents_it_serves() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("k1").await?;
    let k1 = env.ns("k1");
    // Each version writes its `config.tag` into the child.
    let tagged = |v: &'static str| {
        ScriptPlugin::new(v, move |req, _| {
            let name = name_of(req);
            let tag = req
                .config
                .as_ref()
                .and_then(|c| c["tag"].as_str())
                .unwrap_or("none")
                .to_string();
            Ok(response(vec![json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{name}-a"), "labels": {"app": name}},
                "data": {"version": tag}
            })]))
        })
    };
    let a = env.plugin_file("tag-a", tagged("tag-a"))?;
    let b = env.plugin_file("tag-b", tagged("tag-b"))?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "retag"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {
                "path": a.display().to_string(),
                "config": {"tag": "active"},
                "candidate": {"path": b.display().to_string(), "shadow": false,
                              "config": {"tag": "c1"}}
            },
            "rollout": {"steps": [{"namespaces": [k1]}], "pauseSeconds": 3600},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.create_widget("k1", "w1", json!({})).await?;
    env.start_manager();
    let key = format!("{k1}/w1");
    let on = |tag: &'static str| {
        let env = &env;
        let key = key.clone();
        async move {
            let v = versions(env, &["k1"]).await.ok()?;
            (v.get(&key).map(String::as_str) == Some(tag)).then_some(())
        }
    };
    eventually("w1 on the candidate's first config", 60, || on("c1")).await?;
    // The host writes the WasmController's status after it handed the
    // candidate its parents, so the child can show c1 before status.rollout.
    let before = eventually("status.rollout", 20, || rollout_of(&env, "retag")).await?;
    assert_eq!(before.step, 1, "{before:?}");
    let before = Some(before);
    // Only the candidate's config changes; the parent is not touched.
    let api: kube::Api<wr_engine::WasmController> = kube::Api::all(env.client.clone());
    api.patch(
        "retag",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"plugin": {"candidate": {"config": {"tag": "c2"}}}}})),
    )
    .await?;
    eventually("w1 on the candidate's new config", 60, || on("c2")).await?;
    // Still the same rollout: a config change does not restart it.
    let after = rollout_of(&env, "retag").await;
    assert_eq!(
        after.as_ref().map(|r| (r.step, &r.step_started_at)),
        before.as_ref().map(|r| (r.step, &r.step_started_at)),
        "rollout restarted or gone"
    );
    env.stop_manager().await;
    Ok(())
}

/// Removing the candidate (and its rollout) from the spec clears
/// `status.rollout`, `status.shadow` and their conditions, and the parents
/// the candidate served go back to the active version. Before, the host
/// computed the cleared status but wrote it as a merge patch without the
/// fields, which left the stale ones on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_candidate_clears_status_rollout_and_shadow() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("r1").await?;
    let r1 = env.ns("r1");
    let log = CallLog::default();
    let v1 = env.plugin_file("v1", versioned("v1", &log, None))?;
    let v2 = env.plugin_file("v2", versioned("v2", &log, None))?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "ended"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": v1.display().to_string(),
                       "candidate": {"path": v2.display().to_string()}},
            "rollout": {"steps": [{"namespaces": [r1]}], "pauseSeconds": 3600},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.create_widget("r1", "w1", json!({})).await?;
    env.start_manager();
    let key = format!("{r1}/w1");
    eventually(
        "w1 on the candidate, rollout and shadow on the status",
        60,
        || async {
            let st = controller(&env, "ended").await.ok()?.status?;
            let v = versions(&env, &["r1"]).await.ok()?;
            (st.rollout.is_some() && st.shadow.is_some() && v.get(&key)? == "v2").then_some(())
        },
    )
    .await?;
    let api: kube::Api<wr_engine::WasmController> = kube::Api::all(env.client.clone());
    api.patch(
        "ended",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"plugin": {"candidate": null}, "rollout": null}})),
    )
    .await?;
    let st = eventually("status.rollout and status.shadow cleared", 30, || async {
        let st = controller(&env, "ended").await.ok()?.status?;
        (st.rollout.is_none() && st.shadow.is_none()).then_some(st)
    })
    .await?;
    let types: Vec<&str> = st.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert!(
        !types.contains(&"Rollout") && !types.contains(&"CandidateLoaded"),
        "{types:?}"
    );
    eventually("w1 back on the active version", 30, || async {
        let v = versions(&env, &["r1"]).await.ok()?;
        (v.get(&key)? == "v1").then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

/// A candidate whose signature is refused says which ConfigMap
/// (namespace/name) and which field it read: before, the message named only
/// `signature.json`, not where it came from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_candidate_signature_names_its_configmap_and_field() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("s1").await?;
    env.namespace("plugins").await?;
    let log = CallLog::default();
    let v1 = env.plugin_file("v1", versioned("v1", &log, None))?;
    let v2 = env.plugin_file("v2", versioned("v2", &log, None))?;
    let (private, _, public) = wr_engine::signing::generate([5; 32])?;
    let key = wr_engine::signing::parse_private_key(&private)?;
    let sign = |bytes: &[u8]| -> Result<String> {
        let digest = wr_engine::plugin_source::digest(bytes);
        Ok(serde_json::to_string(&wr_engine::signing::sign(
            &key, &digest,
        ))?)
    };
    // The active version is signed properly, beside its file.
    std::fs::write(
        format!("{}.signature.json", v1.display()),
        sign(&std::fs::read(&v1)?)?,
    )?;
    // The candidate's ConfigMap holds a signature over other bytes.
    put_raw(&env, "plugins", "next", &std::fs::read(&v2)?).await?;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.client.clone(), &env.ns("plugins"));
    let signature = json!({wr_engine::signing::SIGNATURE_KEY: sign(b"other bytes")?});
    cms.patch(
        "next",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": signature})),
    )
    .await?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "signed"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {
                "path": v1.display().to_string(),
                "signature": {"trustedKeys": [public]},
                "candidate": {"configMap": {"name": "next", "namespace": env.ns("plugins")}}
            },
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.create_widget("s1", "w1", json!({})).await?;
    env.start_manager();
    let (_, reason, message) = eventually("CandidateLoaded=False", 60, || async {
        condition(&env, "signed", "CandidateLoaded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await?;
    assert_eq!(reason, "SignatureInvalid");
    let cm = format!("ConfigMap {}/next", env.ns("plugins"));
    assert!(
        message.starts_with(&format!(
            "spec.plugin.candidate: {cm}: signature.json signs sha256:"
        )),
        "{message}"
    );
    // Events are written by a detached task after the condition: wait.
    let _ = eventually("the SignatureInvalid event", 20, || async {
        controller_events(&env, "signed")
            .await
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "SignatureInvalid")
            .then_some(())
    })
    .await;
    let events = controller_events(&env, "signed").await;
    assert!(
        events
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "SignatureInvalid" && e.2.contains(&cm)),
        "{events:?}"
    );
    // The signed active version serves meanwhile.
    let key = format!("{}/w1", env.ns("s1"));
    eventually("w1 on the active version", 30, || async {
        let v = versions(&env, &["s1"]).await.ok()?;
        (v.get(&key)? == "v1").then_some(())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}

/// `volatileFields` and `maxDifferences` of a candidate take effect when
/// they change, with the same component: the lane is made again and counts
/// afresh (the earlier counts were judged by other rules). Before, the lane
/// kept the settings it started with until the candidate's digest changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_shadow_setting_takes_effect_without_a_new_digest() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let active = ScriptPlugin::new("active", two_kinds("t1", |v| v.to_string()));
    let candidate = ScriptPlugin::new("candidate", two_kinds("t2", |v| format!("{v}-new")));
    let a = env.plugin_file("active", active)?;
    let c = env.plugin_file("candidate", candidate)?;
    let mut wc = shadow_controller(
        "settings",
        &a.display().to_string(),
        &c.display().to_string(),
    );
    wc["spec"]["plugin"]["candidate"]["maxDifferences"] = json!(1);
    env.create_controller(wc).await?;
    env.start_manager();
    let parents = ["p1", "p2", "p3"];
    for p in parents {
        env.create_widget("ns1", p, json!({"value": format!("v-{p}")}))
            .await?;
    }
    let shadow = || async { controller(&env, "settings").await.ok()?.status?.shadow };
    let st = eventually("three differing calls, one difference kept", 60, || async {
        shadow().await.filter(|s| s.differing >= 3)
    })
    .await?;
    assert_eq!(st.differences.len(), 1, "{st:?}");
    let touch = |round: &'static str| {
        let env = &env;
        async move {
            for p in parents {
                env.widgets("ns1")
                    .patch(
                        p,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"labels": {"round": round}}})),
                    )
                    .await?;
            }
            anyhow::Ok(())
        }
    };
    let set = |candidate: Value| {
        let api: kube::Api<wr_engine::WasmController> = kube::Api::all(env.client.clone());
        async move {
            api.patch(
                "settings",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"plugin": {"candidate": candidate}}})),
            )
            .await?;
            anyhow::Ok(())
        }
    };
    // maxDifferences 1 -> 10: every difference is kept from now on. (The
    // parents are touched so that they are compared again whether or not the
    // new lane reconciles them itself.)
    set(json!({"maxDifferences": 10})).await?;
    touch("two").await?;
    let st = eventually("three differences kept", 60, || async {
        shadow().await.filter(|s| s.differences.len() >= 3)
    })
    .await?;
    assert!(
        st.differences.iter().all(|d| d.field == "data.value"),
        "{st:?}"
    );
    // The whole ConfigMap data volatile: the same answers are now identical,
    // and the counts judged by the old rules are gone.
    set(json!({"volatileFields": ["ConfigMap:data"]})).await?;
    touch("three").await?;
    let st = eventually(
        "three identical calls and nothing differing",
        60,
        || async {
            shadow()
                .await
                .filter(|s| s.identical >= 3 && s.differing == 0)
        },
    )
    .await?;
    assert_eq!(st.failing, 0, "{st:?}");
    assert!(st.differences.is_empty(), "{st:?}");
    env.stop_manager().await;
    Ok(())
}

/// A candidate added to a controller whose parents have all converged is
/// shadowed at once: installing its shadow lane reconciles the parents it
/// owes a comparison. Before, nothing reconciled them until they changed or
/// their resync came (an hour here), so `status.shadow` stayed at zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_added_to_a_converged_fleet_is_shadowed_at_once() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace("ns1").await?;
    let active = ScriptPlugin::new("active", two_kinds("t1", |v| v.to_string()));
    let candidate = ScriptPlugin::new("candidate", two_kinds("t1", |v| format!("{v}-new")));
    let a = env.plugin_file("active", active.clone())?;
    let c = env.plugin_file("candidate", candidate.clone())?;
    let mut wc = shadow_controller("late", &a.display().to_string(), &c.display().to_string());
    let with_candidate = wc["spec"]["plugin"]["candidate"].take();
    wc["spec"]["plugin"]
        .as_object_mut()
        .map(|p| p.remove("candidate"));
    env.create_controller(wc).await?;
    let parents = ["p1", "p2", "p3"];
    for p in parents {
        env.create_widget("ns1", p, json!({"value": format!("v-{p}")}))
            .await?;
    }
    env.start_manager();
    for p in parents {
        eventually(&format!("{p} converged"), 60, || async {
            env.configmaps("ns1").get(&format!("{p}-cm")).await.ok()
        })
        .await?;
    }
    let settled = active.calls();
    eventually("the fleet quiet", 30, || async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let now = active.calls();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        (now >= settled && active.calls() == now).then_some(())
    })
    .await?;
    // The candidate arrives; no parent changes.
    let api: kube::Api<wr_engine::WasmController> = kube::Api::all(env.client.clone());
    api.patch(
        "late",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"plugin": {"candidate": with_candidate}}})),
    )
    .await?;
    let st = eventually("every parent shadowed", 30, || async {
        let s = controller(&env, "late").await.ok()?.status?.shadow?;
        (s.differing >= 3).then_some(s)
    })
    .await?;
    assert_eq!(st.differences.len(), 3, "{st:?}");
    assert!(candidate.calls() >= 3);
    env.stop_manager().await;
    Ok(())
}
