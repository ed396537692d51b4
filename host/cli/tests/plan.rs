//! `wasm-reconciler plan` end to end: the real binary against the embedded API
//! server, after the static-site component (run by the real engine) has
//! converged three StaticSites. The manager is then stopped, so every request
//! the server sees while the binary runs is the plan's own. Outputs are checked
//! against the store's state (uids, field values, conditions), not against
//! output recorded from the code under test.

use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wr_tests::cluster::*;
use wr_tests::plugins::{plugin_path, workspace_root};

const SITES: &[&str] = &["alpha", "beta", "gamma"];

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

fn site_ar() -> ApiResource {
    ar(
        "examples.wasm-reconciler.dev",
        "v1alpha1",
        "StaticSite",
        "staticsites",
    )
}

fn kinds() -> Vec<ApiResource> {
    vec![
        ar("apps", "v1", "Deployment", "deployments"),
        ar("", "v1", "Service", "services"),
        ar("", "v1", "ConfigMap", "configmaps"),
    ]
}

fn example(path: &str) -> Result<Value> {
    let p = workspace_root().join("examples").join(path);
    Ok(serde_yaml::from_str(&std::fs::read_to_string(p)?)?)
}

/// Runs the binary off the async runtime (the API server lives on it).
async fn plan(kubeconfig: &Path, cache: &Path, args: &[String]) -> Result<Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"));
    cmd.arg("plan")
        .arg("--controller=static-site")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg("--now=2026-11-30T12:00:00Z")
        .args(args);
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

fn json_of(out: &Output) -> Result<Value> {
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "stdout is not JSON: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Children of each kind owned (controller reference) by parent `uid`.
async fn owned(env: &Env, uid: &str) -> Result<Vec<(String, DynamicObject)>> {
    let mut out = Vec::new();
    for k in kinds() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(env.client.clone(), &env.ns("default"), &k);
        for o in api.list(&ListParams::default()).await?.items {
            let mine = o
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == uid);
            if mine {
                out.push((k.kind.clone(), o));
            }
        }
    }
    Ok(out)
}

fn conditions(obj: &DynamicObject) -> Vec<(String, Value)> {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or("").to_string(),
                json!({"status": c["status"], "reason": c["reason"],
                       "message": c.get("message").cloned().unwrap_or(json!(""))}),
            )
        })
        .collect()
}

fn parent_plan<'a>(plan: &'a Value, name: &str) -> Result<&'a Value> {
    plan["parents"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .with_context(|| format!("no plan for {name}"))
}

fn child_plan<'a>(p: &'a Value, kind: &str, name: &str) -> Option<&'a Value> {
    p["children"]
        .as_array()?
        .iter()
        .find(|c| c["kind"] == kind && c["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_previews_real_components_against_the_live_state() -> Result<()> {
    let mut env = Env::start_with_wasm().await?;
    install_crd(&env.client, example("static-site/crd.yaml")?).await?;
    let mut wc = example("static-site/controller.yaml")?;
    let static_site = plugin_path("static-site");
    let adversarial = plugin_path("adversarial");
    wc["spec"]["plugin"] = json!({"path": static_site.display().to_string(),
                                  "config": wc["spec"]["plugin"]["config"].clone()});
    env.create_controller(wc).await?;
    env.start_manager();
    let sites: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns("default"), &site_ar());
    for name in SITES {
        let mut s = example("static-site/site.yaml")?;
        s["metadata"]["name"] = json!(name);
        s["metadata"]["namespace"] = json!(env.ns("default"));
        sites
            .create(&PostParams::default(), &serde_json::from_value(s)?)
            .await?;
    }
    eventually("sites converged", 60, || async {
        for name in SITES {
            let s = sites.get(name).await.ok()?;
            let (st, _, g) = ready_of(&s)?;
            if st != "True" || g != s.metadata.generation {
                return None;
            }
            let uid = s.metadata.uid.clone()?;
            if owned(&env, &uid).await.ok()?.len() != 3 {
                return None;
            }
        }
        Some(())
    })
    .await?;
    env.stop_manager().await;
    // With the host stopped, beta's spec changes: only the plan sees it.
    sites
        .patch(
            "beta",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;

    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig)?;
    let cache = dir.path().join("cache");
    env.server.clear_requests();

    // 1. The same component: beta's Deployment would be scaled, the rest is converged.
    let out = plan(
        &kubeconfig,
        &cache,
        &[
            format!("--plugin={}", static_site.display()),
            "-o=json".into(),
        ],
    )
    .await?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = json_of(&out)?;
    ensure!(p["apiVersion"] == "wasm-reconciler.dev/plan/v1", "{p}");
    ensure!(p["summary"]["parents"] == 3, "{}", p["summary"]);
    let beta = sites.get("beta").await?;
    let beta_owned = owned(&env, beta.metadata.uid.as_deref().unwrap_or("")).await?;
    let beta_dep = beta_owned
        .iter()
        .find(|(k, _)| k == "Deployment")
        .map(|(_, o)| o)
        .context("beta deployment")?;
    let bp = parent_plan(&p, "beta")?;
    ensure!(bp["result"] == "changes", "{bp}");
    let dep_plan = child_plan(bp, "Deployment", "beta").context("beta deployment plan")?;
    ensure!(dep_plan["action"] == "change", "{dep_plan}");
    ensure!(
        dep_plan["uid"] == json!(beta_dep.metadata.uid),
        "{dep_plan}"
    );
    ensure!(
        dep_plan["changes"]
            == json!([{"path": "/spec/replicas", "old": beta_dep.data["spec"]["replicas"], "new": 3}]),
        "{dep_plan}"
    );
    ensure!(
        bp["status"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["path"] == "/observedGeneration"
                && f["new"] == json!(beta.metadata.generation)),
        "{bp}"
    );
    for name in ["alpha", "gamma"] {
        let pp = parent_plan(&p, name)?;
        ensure!(pp["result"] == "unchanged", "{pp}");
        let s = sites.get(name).await?;
        let children = owned(&env, s.metadata.uid.as_deref().unwrap_or("")).await?;
        for (kind, o) in &children {
            let c = child_plan(pp, kind, o.metadata.name.as_deref().unwrap_or(""))
                .with_context(|| format!("{name}: no plan for {kind}"))?;
            ensure!(
                c["action"] == "unchanged" && c["uid"] == json!(o.metadata.uid),
                "{c}"
            );
        }
    }
    ensure!(
        (
            p["summary"]["unchanged"].clone(),
            p["summary"]["withChanges"].clone()
        ) == (json!(2), json!(1)),
        "{}",
        p["summary"]
    );

    // 2. A different component (adversarial, mode ok via --config): one
    //    ConfigMap named after the parent, status {"ok": true}, no conditions.
    let args = [
        format!("--plugin={}", adversarial.display()),
        r#"--config={"mode":"ok"}"#.to_string(),
    ];
    let json_out = plan(
        &kubeconfig,
        &cache,
        &[args[0].clone(), args[1].clone(), "-o=json".into()],
    )
    .await?;
    ensure!(
        json_out.status.success(),
        "{}",
        String::from_utf8_lossy(&json_out.stderr)
    );
    let text_out = plan(&kubeconfig, &cache, &args).await?;
    ensure!(
        text_out.status.success(),
        "{}",
        String::from_utf8_lossy(&text_out.stderr)
    );
    let p = json_of(&json_out)?;
    let text = String::from_utf8(text_out.stdout)?;
    let (mut deletes, mut creates) = (0, 0);
    for name in SITES {
        let s = sites.get(name).await?;
        let pp = parent_plan(&p, name)?;
        ensure!(pp["result"] == "changes", "{pp}");
        ensure!(
            text.contains(&format!("\ndefault/{name}: changes")),
            "{text}"
        );
        // Every child the site owns now would be deleted (none is named like the parent's ConfigMap).
        for (kind, o) in owned(&env, s.metadata.uid.as_deref().unwrap_or("")).await? {
            let cname = o.metadata.name.clone().unwrap_or_default();
            let c = child_plan(pp, &kind, &cname).with_context(|| format!("{kind} {cname}"))?;
            let expected = if kind == "ConfigMap" && cname == *name {
                "change"
            } else {
                "delete"
            };
            ensure!(
                c["action"] == expected && c["uid"] == json!(o.metadata.uid),
                "{c}"
            );
            if expected == "delete" {
                deletes += 1;
                ensure!(
                    text.contains(&format!("  - delete {kind} default/{cname}\n")),
                    "{text}"
                );
            }
        }
        // The parent-named ConfigMap does not exist: created.
        let cms = env.configmaps("default");
        ensure!(
            cms.get_opt(name).await?.is_none(),
            "{name} ConfigMap exists"
        );
        let c = child_plan(pp, "ConfigMap", name).context("parent-named ConfigMap")?;
        ensure!(c["action"] == "create", "{c}");
        creates += 1;
        ensure!(
            text.contains(&format!("  + create ConfigMap default/{name}\n")),
            "{text}"
        );
        // Conditions: the plugin sets none, so every current one but Ready is dropped.
        let current = conditions(&s);
        ensure!(!current.is_empty(), "{name} has no conditions");
        for (t, view) in &current {
            let change = pp["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == *t);
            match t.as_str() {
                "Ready" => ensure!(change.is_none(), "{name}: Ready changes {change:?}"),
                _ => {
                    let c = change.with_context(|| format!("{name}: {t} not dropped"))?;
                    ensure!(c["old"] == *view && c.get("new").is_none(), "{c}");
                    ensure!(text.contains(&format!("  condition {t}: ")), "{text}");
                }
            }
        }
        let ok = pp["status"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["path"] == "/ok")
            .context("status ok")?;
        ensure!(ok["new"] == true && ok.get("old").is_none(), "{ok}");
    }
    ensure!(
        p["summary"]["children"]["delete"] == deletes,
        "{}",
        p["summary"]
    );
    ensure!(
        p["summary"]["children"]["create"] == creates,
        "{}",
        p["summary"]
    );
    ensure!(
        text.contains("Summary: 3 parents: 0 unchanged, 3 with changes, 0 errors"),
        "{text}"
    );

    // 3. A candidate that traps on every parent: plan computed, exit 5 (all failed).
    let out = plan(
        &kubeconfig,
        &cache,
        &[
            format!("--plugin={}", adversarial.display()),
            r#"--config={"mode":"panic"}"#.into(),
            "-o=json".into(),
        ],
    )
    .await?;
    ensure!(
        out.status.code() == Some(5),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let p = json_of(&out)?;
    ensure!(p["summary"]["errors"] == 3, "{}", p["summary"]);
    ensure!(
        p["parents"][0]["error"]["class"] == "fault",
        "{}",
        p["parents"][0]
    );

    // 4. --parent narrows the plan; an unknown parent is an error (exit 1).
    let out = plan(
        &kubeconfig,
        &cache,
        &[
            format!("--plugin={}", static_site.display()),
            "--parent=default/beta".into(),
            "-o=json".into(),
        ],
    )
    .await?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = json_of(&out)?;
    ensure!(
        p["parents"].as_array().map(Vec::len) == Some(1) && p["parents"][0]["name"] == "beta",
        "{p}"
    );
    let out = plan(
        &kubeconfig,
        &cache,
        &[
            format!("--plugin={}", static_site.display()),
            "--parent=default/nope".into(),
        ],
    )
    .await?;
    ensure!(out.status.code() == Some(1), "{:?}", out.status);

    // Nothing but GET and LIST reached the API server while plans ran.
    let log = env.server.requests();
    let plan_requests = log
        .iter()
        .filter(|r| r.user_agent.as_deref() == Some("wasm-reconciler-plan"))
        .count();
    ensure!(
        plan_requests > 0,
        "no request carried the plan's User-Agent"
    );
    let other: Vec<_> = log
        .iter()
        .filter(|r| r.verb != "get" && r.verb != "list")
        .collect();
    ensure!(other.is_empty(), "requests other than GET/LIST: {other:?}");
    Ok(())
}
