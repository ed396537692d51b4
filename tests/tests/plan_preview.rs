//! `plan` (issue 5, "Preview before rollout"): the plan for a known change
//! matches what the rollout then does, exactly.
//!
//! A controller (ConfigMaps in place, Secrets with Recreate, ServiceAccounts
//! with OnDelete) runs version A of a native plugin over 24 Widgets; version B
//! changes some of them in known ways (create, change, delete, recreate a
//! child, a change OnDelete leaves alone, a condition and a status field, a
//! dropped field, nothing). The planner runs B against the converged cluster
//! through its own client (read-only: the API server's request log shows only
//! GET/LIST from it, and no write to parents or children while it runs). Then B is rolled out through the plugin ConfigMap and what the
//! API server's store holds afterwards — uids, resourceVersions, field values,
//! deleted objects, conditions, status — is compared with every per-parent
//! action of the plan.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};
use wr_engine::Target;
use wr_engine::plan::{ConditionView, FieldChange, ParentResult, Plan, PlannedAction, Snapshot};
use wr_runtime::{Condition, ConditionStatus, ReconcileRequest, ReconcileResponse};
use wr_tests::cluster::*;
use wr_tests::reload::*;

const NS: &str = "plan";
const CONTROLLER: &str = "widgets";
const PLAN_AGENT: &str = "plan-preview-test";
const GROUPS: &[&str] = &[
    "keep", "grow", "edit", "shrink", "cond", "drop", "recreate", "leave",
];

fn init_tracing() {
    wr_tests::logs::init();
}

fn child(parent: &str, suffix: &str, data: Value, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": format!("{parent}-{suffix}"), "labels": labels},
           "data": data})
}

/// Version A, or B when `b`: see the module docs; `spec.group` picks B's change.
fn logic(req: &ReconcileRequest, b: bool) -> ReconcileResponse {
    let name = req.parent["metadata"]["name"].as_str().unwrap_or("x");
    let value = req.parent["spec"]["value"].as_str().unwrap_or("");
    let group = if b {
        req.parent["spec"]["group"].as_str().unwrap_or("keep")
    } else {
        "keep"
    };
    let app = json!({"app": name});
    let mut a_data = json!({"value": value, "extra": "x"});
    if let Some(more) = req.parent["spec"].get("more") {
        a_data["more"] = more.clone();
    }
    let mut a_labels = app.clone();
    match group {
        "edit" => {
            a_data["value"] = json!(format!("{value}-edited"));
            a_labels["tier"] = json!("web");
        }
        "drop" => {
            if let Some(m) = a_data.as_object_mut() {
                m.remove("extra");
                m.remove("more");
            }
        }
        _ => {}
    }
    let mut children = vec![child(name, "a", a_data, a_labels)];
    if group != "shrink" {
        children.push(child(name, "b", json!({"value": value}), app.clone()));
    }
    if group == "grow" {
        children.push(child(name, "c", json!({"new": "yes"}), app.clone()));
    }
    // A Secret (Recreate strategy) and a ServiceAccount (OnDelete strategy).
    let secret = if group == "recreate" { "Qg==" } else { "QQ==" };
    children.push(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{name}-s"), "labels": app},
        "data": {"v": secret}}));
    let mut sa_labels = app.clone();
    if group == "leave" {
        sa_labels["v"] = json!("b");
    }
    children.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": format!("{name}-sa"), "labels": sa_labels}}));
    let (status, reason, phase) = match group {
        "cond" => (ConditionStatus::False, "Drifted", "B"),
        _ => (ConditionStatus::True, "InSync", "A"),
    };
    let mut r = response(children);
    r.conditions = vec![Condition {
        type_: "Synced".into(),
        status,
        reason: reason.into(),
        message: if group == "cond" {
            "moved".into()
        } else {
            String::new()
        },
    }];
    r.status = Some(json!({"phase": phase}));
    r
}

fn bytes_of(v: &str) -> Vec<u8> {
    format!("native-plugin:plan-{v}").into_bytes()
}

fn core(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

const CHILD_KINDS: &[(&str, &str)] = &[
    ("ConfigMap", "configmaps"),
    ("Secret", "secrets"),
    ("ServiceAccount", "serviceaccounts"),
];

/// The children (ConfigMaps, Secrets, ServiceAccounts labelled `app`) by
/// name (names are unique across the kinds).
async fn children(env: &Env) -> Result<BTreeMap<String, DynamicObject>> {
    let mut out = BTreeMap::new();
    for (kind, plural) in CHILD_KINDS {
        let api: Api<DynamicObject> =
            Api::namespaced_with(env.client.clone(), &env.ns(NS), &core(kind, plural));
        for o in api.list(&ListParams::default().labels("app")).await?.items {
            out.insert(o.metadata.name.clone().unwrap_or_default(), o);
        }
    }
    Ok(out)
}

async fn parents(env: &Env) -> Result<BTreeMap<String, DynamicObject>> {
    let list = env.widgets(NS).list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|o| (o.metadata.name.clone().unwrap_or_default(), o))
        .collect())
}

fn conditions(p: &DynamicObject) -> BTreeMap<String, ConditionView> {
    p.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Some((
                c.get("type")?.as_str()?.to_string(),
                ConditionView {
                    status: s("status"),
                    reason: s("reason"),
                    message: s("message"),
                },
            ))
        })
        .collect()
}

fn at<'a>(obj: &'a Value, f: &FieldChange) -> Option<&'a Value> {
    obj.pointer(&f.path)
}

/// Sets (or with `None` removes) the field at JSON pointer `path` (objects only).
fn set_pointer(v: &mut Value, path: &str, new: Option<Value>) {
    let segs: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = segs.split_last() else {
        return;
    };
    let mut node = v;
    for s in parents {
        let Some(obj) = node.as_object_mut() else {
            return;
        };
        node = obj.entry(s.clone()).or_insert_with(|| json!({}));
    }
    if let Some(obj) = node.as_object_mut() {
        match new {
            Some(x) => obj.insert(last.clone(), x),
            None => obj.remove(last),
        };
    }
}

async fn plan_with(env: &Env, plugin: Arc<ScriptPlugin>) -> Result<Plan> {
    let mut config = env.config.clone();
    config
        .headers
        .push(("user-agent".parse()?, PLAN_AGENT.parse()?));
    let client = kube::Client::try_from(config)?;
    let wcs: kube::Api<wr_engine::WasmController> = kube::Api::all(client.clone());
    let wc = wcs.get(CONTROLLER).await?;
    let target = Target::resolve(&client, CONTROLLER, &wc.spec).await?;
    let snap = Snapshot::take(&client, &target).await?;
    Ok(wr_engine::plan::plan(&target, &snap, plugin, "2026-11-30T12:00:00Z", None).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_for_a_known_change_matches_what_the_rollout_applies() -> Result<()> {
    init_tracing();
    let mut env = Env::start().await?;
    env.namespace(NS).await?;
    let rolled_out = Arc::new(AtomicBool::new(false));
    let seen_by_b: Arc<Mutex<HashSet<String>>> = Arc::default();
    let a = ScriptPlugin::new("plan-a", |req, _| Ok(logic(req, false)));
    let (flag, seen) = (rolled_out.clone(), seen_by_b.clone());
    let b = ScriptPlugin::new("plan-b", move |req, _| {
        if flag.load(Ordering::SeqCst) {
            let name = req.parent["metadata"]["name"].as_str().unwrap_or("");
            seen.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.to_string());
        }
        Ok(logic(req, true))
    });
    env.loader.register(&bytes_of("a"), a.clone());
    env.loader.register(&bytes_of("b"), b.clone());
    put_raw(&env, NS, "plugin", &bytes_of("a")).await?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": CONTROLLER},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [
                {"apiVersion": "v1", "resource": "configmaps"},
                {"apiVersion": "v1", "resource": "secrets", "updateStrategy": {"method": "Recreate"}},
                {"apiVersion": "v1", "resource": "serviceaccounts", "updateStrategy": {"method": "OnDelete"}}
            ],
            "plugin": {"configMap": {"name": "plugin", "namespace": env.ns(NS)}},
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": 8
        }
    }))
    .await?;
    env.start_manager();
    let n = 24;
    for i in 0..n {
        let group = GROUPS[i % GROUPS.len()];
        env.create_widget(
            NS,
            &format!("w{i:02}"),
            json!({"group": group, "value": i.to_string()}),
        )
        .await?;
    }
    eventually("A converged on every parent", 120, || async {
        let ps = parents(&env).await.ok()?;
        let cs = children(&env).await.ok()?;
        let done = ps.len() == n
            && cs.len() == 4 * n
            && ps.values().all(|p| {
                conditions(p)
                    .get("Synced")
                    .is_some_and(|c| c.reason == "InSync")
                    && ready_of(p)
                        .is_some_and(|(s, _, g)| s == "True" && g == p.metadata.generation)
            });
        done.then_some(())
    })
    .await?;
    // The "drop" parents get `spec.more`: A adds data.more to child a by a
    // later server-side apply, while data.extra was set by the apply that
    // created the child. B drops both: only the host's Apply entry owns them
    // (children are created by server-side apply, not POST, so no Update
    // entry pins them), so both are removed, and the plan must say exactly that.
    let drops: Vec<usize> = (0..n)
        .filter(|i| GROUPS[i % GROUPS.len()] == "drop")
        .collect();
    for i in &drops {
        env.widgets(NS)
            .patch(
                &format!("w{i:02}"),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"more": "m"}})),
            )
            .await?;
    }
    eventually("data.more applied and status caught up", 60, || async {
        let cs = children(&env).await.ok()?;
        let ps = parents(&env).await.ok()?;
        drops
            .iter()
            .all(|i| {
                let p = &ps[&format!("w{i:02}")];
                cs.get(&format!("w{i:02}-a"))
                    .is_some_and(|o| o.data["data"]["more"] == "m")
                    && ready_of(p).is_some_and(|(_, _, g)| g == p.metadata.generation)
            })
            .then_some(())
    })
    .await?;
    let parents_before = parents(&env).await?;
    let children_before = children(&env).await?;

    // The plan: read-only.
    env.server.clear_requests();
    let plan = plan_with(&env, b.clone()).await?;
    let log = env.server.requests();
    let mine: Vec<_> = log
        .iter()
        .filter(|r| r.user_agent.as_deref() == Some(PLAN_AGENT))
        .collect();
    ensure!(!mine.is_empty(), "the plan's requests are not in the log");
    for r in &mine {
        ensure!(
            r.verb == "get" || r.verb == "list",
            "plan made a {} request: {r:?}",
            r.verb
        );
    }
    // The host is converged and idle on parents and children (its Events and
    // WasmController status may still be flushed, so only these are checked).
    let writes: Vec<_> = log
        .iter()
        .filter(|r| r.is_write() && (r.resource == "configmaps" || r.resource == "widgets"))
        .collect();
    ensure!(writes.is_empty(), "writes while planning: {writes:?}");
    ensure!(
        children(&env).await? == children_before,
        "plan changed children"
    );

    // The plan says what B is known to do (checked against the test's own logic).
    ensure!(plan.summary.parents == n, "{:?}", plan.summary);
    for p in &plan.parents {
        let group = parents_before[&p.name].data["spec"]["group"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let acts: BTreeMap<String, PlannedAction> = p
            .children
            .iter()
            .map(|c| {
                (
                    c.name
                        .trim_start_matches(&format!("{}-", p.name))
                        .to_string(),
                    c.action,
                )
            })
            .collect();
        use PlannedAction::*;
        let mut want: Vec<(&str, PlannedAction)> = match group.as_str() {
            "grow" => vec![("a", Unchanged), ("b", Unchanged), ("c", Create)],
            "edit" | "drop" => vec![("a", Change), ("b", Unchanged)],
            "shrink" => vec![("a", Unchanged), ("b", Delete)],
            _ => vec![("a", Unchanged), ("b", Unchanged)],
        };
        want.push((
            "s",
            if group == "recreate" {
                Recreate
            } else {
                Unchanged
            },
        ));
        want.push(("sa", if group == "leave" { Leave } else { Unchanged }));
        let want: BTreeMap<String, PlannedAction> =
            want.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        ensure!(acts == want, "{}: {group}: {acts:?} != {want:?}", p.name);
        let result = if group == "keep" || group == "leave" {
            ParentResult::Unchanged
        } else {
            ParentResult::Changes
        };
        ensure!(p.result == result, "{}: {:?}", p.name, p.result);
        let a_changes = p
            .children
            .first()
            .map(|c| c.changes.clone())
            .unwrap_or_default();
        if group == "drop" {
            ensure!(
                a_changes
                    == vec![
                        FieldChange {
                            path: "/data/extra".into(),
                            old: Some(json!("x")),
                            new: None
                        },
                        FieldChange {
                            path: "/data/more".into(),
                            old: Some(json!("m")),
                            new: None
                        }
                    ],
                "{}: {a_changes:?}",
                p.name
            );
        }
        ensure!(
            p.conditions.is_empty() == (group != "cond"),
            "{}: conditions {:?}",
            p.name,
            p.conditions
        );
    }
    let per_group = n / GROUPS.len();
    let t = &plan.summary.children;
    ensure!(
        (t.create, t.change, t.delete, t.recreate, t.leave)
            == (per_group, 2 * per_group, per_group, per_group, per_group),
        "{t:?}"
    );
    ensure!(
        plan.summary.unchanged == 2 * per_group,
        "{:?}",
        plan.summary
    );

    // Roll B out through the ConfigMap and wait until every parent ran it.
    rolled_out.store(true, Ordering::SeqCst);
    env.server.clear_requests();
    put_raw(&env, NS, "plugin", &bytes_of("b")).await?;
    let planned_writes: HashSet<String> = plan
        .parents
        .iter()
        .flat_map(|p| p.children.iter())
        .filter(|c| !matches!(c.action, PlannedAction::Unchanged | PlannedAction::Leave))
        .map(|c| c.name.clone())
        .collect();
    eventually(
        "B reconciled every parent and its writes landed",
        120,
        || async {
            if seen_by_b.lock().unwrap_or_else(|e| e.into_inner()).len() < n {
                return None;
            }
            let cs = children(&env).await.ok()?;
            let ps = parents(&env).await.ok()?;
            for p in &plan.parents {
                for c in &p.children {
                    let now = cs.get(&c.name);
                    let landed = match c.action {
                        PlannedAction::Create => now.is_some(),
                        PlannedAction::Delete => now.is_none(),
                        PlannedAction::Change => {
                            now.map(|o| &o.metadata.resource_version)
                                != children_before
                                    .get(&c.name)
                                    .map(|o| &o.metadata.resource_version)
                        }
                        PlannedAction::Recreate => now.is_some_and(|o| o.metadata.uid != c.uid),
                        _ => true,
                    };
                    if !landed {
                        return None;
                    }
                }
                if p.status_write
                    && ps.get(&p.name)?.metadata.resource_version
                        == parents_before[&p.name].metadata.resource_version
                {
                    return None;
                }
            }
            Some(())
        },
    )
    .await?;
    let parents_after = parents(&env).await?;
    let children_after = children(&env).await?;

    // Compare the store with the plan, action by action.
    for p in &plan.parents {
        let mut expected_names: HashSet<String> = HashSet::new();
        for c in &p.children {
            let before = children_before.get(&c.name);
            let after = children_after.get(&c.name);
            let uid = |o: Option<&DynamicObject>| o.and_then(|o| o.metadata.uid.clone());
            let rv =
                |o: Option<&DynamicObject>| o.and_then(|o| o.metadata.resource_version.clone());
            match c.action {
                PlannedAction::Create => {
                    ensure!(
                        before.is_none() && after.is_some(),
                        "{}: not created",
                        c.name
                    );
                }
                PlannedAction::Delete => {
                    ensure!(after.is_none(), "{}: not deleted", c.name);
                    ensure!(c.uid == uid(before), "{}: planned uid", c.name);
                }
                PlannedAction::Unchanged => {
                    ensure!(uid(after) == uid(before), "{}: replaced", c.name);
                    ensure!(
                        rv(after) == rv(before),
                        "{}: written although unchanged",
                        c.name
                    );
                }
                PlannedAction::Leave => {
                    ensure!(
                        uid(after) == uid(before) && rv(after) == rv(before),
                        "{}: written although OnDelete",
                        c.name
                    );
                    let a = serde_json::to_value(after.context("after")?)?;
                    ensure!(!c.changes.is_empty(), "{}: leave without a diff", c.name);
                    for f in &c.changes {
                        ensure!(at(&a, f) == f.old.as_ref(), "{}: {f:?}", c.name);
                    }
                }
                PlannedAction::Change | PlannedAction::Recreate => {
                    if c.action == PlannedAction::Change {
                        ensure!(
                            uid(after) == uid(before),
                            "{}: recreated, not changed",
                            c.name
                        );
                        ensure!(rv(after) != rv(before), "{}: not written", c.name);
                    } else {
                        ensure!(
                            after.is_some() && uid(after) != uid(before),
                            "{}: not recreated",
                            c.name
                        );
                        ensure!(c.uid == uid(before), "{}: planned uid", c.name);
                    }
                    let (b, a) = (
                        serde_json::to_value(before.context("before")?)?,
                        serde_json::to_value(after.context("after")?)?,
                    );
                    ensure!(!c.changes.is_empty(), "{}: change without a diff", c.name);
                    for f in &c.changes {
                        ensure!(at(&b, f) == f.old.as_ref(), "{}: old {f:?}", c.name);
                        ensure!(
                            at(&a, f) == f.new.as_ref(),
                            "{}: new {f:?} got {:?}",
                            c.name,
                            at(&a, f)
                        );
                    }
                    // Data and labels are exactly the old ones with the plan's changes.
                    let mut predicted = b.clone();
                    for f in &c.changes {
                        set_pointer(&mut predicted, &f.path, f.new.clone());
                    }
                    for field in ["/data", "/metadata/labels"] {
                        ensure!(
                            predicted.pointer(field) == a.pointer(field),
                            "{}: {field} is {:?}, the plan predicted {:?}",
                            c.name,
                            a.pointer(field),
                            predicted.pointer(field)
                        );
                    }
                }
                other => anyhow::bail!("{}: unexpected action {other:?}", c.name),
            }
            if c.action != PlannedAction::Delete {
                expected_names.insert(c.name.clone());
            }
        }
        let owned_after: HashSet<String> = children_after
            .iter()
            .filter(|(_, o)| o.metadata.labels.as_ref().and_then(|l| l.get("app")) == Some(&p.name))
            .map(|(k, _)| k.clone())
            .collect();
        ensure!(
            owned_after == expected_names,
            "{}: children {owned_after:?}",
            p.name
        );

        // Conditions and status.
        let (before, after) = (&parents_before[&p.name], &parents_after[&p.name]);
        let mut want = conditions(before);
        for c in &p.conditions {
            match &c.new {
                Some(v) => want.insert(c.type_.clone(), v.clone()),
                None => want.remove(&c.type_),
            };
        }
        ensure!(
            conditions(after) == want,
            "{}: conditions {:?}",
            p.name,
            conditions(after)
        );
        if p.status_write {
            for f in &p.status {
                ensure!(
                    after.data.get("status").and_then(|s| s.pointer(&f.path)) == f.new.as_ref(),
                    "{}: status {f:?}",
                    p.name
                );
            }
        } else {
            ensure!(
                after.data.get("status") == before.data.get("status"),
                "{}: status written although the plan said no",
                p.name
            );
        }
    }
    // The rollout's child writes were exactly the planned ones (by name).
    // (Deletes carry no field manager; the only other ConfigMap writer is the
    // test publishing the plugin ConfigMap.)
    let ours = format!("wasm-reconciler/{CONTROLLER}");
    let written: HashSet<String> = ["configmaps", "secrets", "serviceaccounts"]
        .iter()
        .flat_map(|res| env.writes(res, None))
        .filter(|r| r.field_manager.as_deref() == Some(&ours) || r.verb == "delete")
        .filter_map(|r| r.name)
        .collect();
    let created: HashSet<String> = children_after
        .keys()
        .filter(|k| !children_before.contains_key(*k))
        .cloned()
        .collect();
    let written: HashSet<String> = written.union(&created).cloned().collect();
    ensure!(
        written == planned_writes,
        "written {written:?} != planned {planned_writes:?}"
    );
    env.stop_manager().await;
    Ok(())
}
