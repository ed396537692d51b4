//! `wasm-reconciler rollout` against a host (in-process manager) and the
//! embedded API server: the binary asks for `pause` and `resume`, the host
//! applies them, and `status` prints the progress the host wrote. With
//! `WR_TEST_CLUSTER=real` the same against a real kube-apiserver (the binary
//! gets the shared cluster's admin kubeconfig).

use std::path::Path;
use std::process::Command;

use anyhow::Result;
use serde_json::json;
use wr_engine::crd::RolloutPhase;
use wr_tests::cluster::*;
use wr_tests::reload::controller;

fn cli(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("rollout")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("cannot run wasm-reconciler");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn run_cli(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let k = kubeconfig.to_path_buf();
    let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        cli(&k, &refs)
    })
    .await
    .expect("cli task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_status_drive_a_running_rollout() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("r1").await?;
    let v1 = env.plugin_file(
        "v1",
        ScriptPlugin::new("v1", |r, _| Ok(configmap_children(r))),
    )?;
    let v2 = env.plugin_file(
        "v2",
        ScriptPlugin::new("v2", |r, _| Ok(configmap_children(r))),
    )?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "cli"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": v1.display().to_string(),
                       "candidate": {"path": v2.display().to_string()}},
            "rollout": {"steps": [{"percent": 50}, {"percent": 100}], "pauseSeconds": 3600},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.create_widget("r1", "w1", json!({})).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig)?;
    env.start_manager();
    // Started, and its progress settled: a migrated parent's reconcile moves
    // `status.rollout` on after the first report (migrated, then ready), and
    // `rollout pause` takes any change of it after its command as the host's
    // answer. Step 1 (50 %) migrates w1 if its bucket is below 50.
    let migrated = u32::from(wr_engine::canary::bucket(Some(&env.ns("r1")), "w1") < 50);
    eventually("the rollout started, its parents reported", 60, || async {
        let r = controller(&env, "cli").await.ok()?.status?.rollout?;
        (r.migrated == migrated && r.migrated_ready == migrated).then_some(())
    })
    .await?;

    let (ok, out, err) = run_cli(&kubeconfig, &["pause", "--controller", "cli"]).await;
    assert!(ok, "pause failed: {out}\n{err}");
    assert!(out.contains("rollout     Paused, step 1 of 2"), "{out}");
    let phase = controller(&env, "cli")
        .await?
        .status
        .and_then(|s| s.rollout)
        .map(|r| r.phase);
    assert_eq!(phase, Some(RolloutPhase::Paused));
    // Pausing what is paused changes nothing: refused before any write,
    // naming the controller, the phase and its field.
    let (ok, out, err) = run_cli(&kubeconfig, &["pause", "--controller", "cli"]).await;
    assert!(!ok, "a second pause succeeded: {out}");
    assert!(
        err.contains("WasmController cli is Paused (status.rollout.phase): pause changes nothing"),
        "{err}"
    );

    let (ok, out, err) = run_cli(&kubeconfig, &["resume", "--controller", "cli"]).await;
    assert!(ok, "resume failed: {out}\n{err}");
    assert!(
        out.contains("rollout     Progressing, step 1 of 2"),
        "{out}"
    );

    let (ok, out, _) = run_cli(&kubeconfig, &["status", "--controller", "cli"]).await;
    assert!(ok);
    assert!(out.contains("controller  cli"), "{out}");
    assert!(out.contains("shadow      "), "{out}");
    let (ok, out, _) = run_cli(
        &kubeconfig,
        &["status", "--controller", "cli", "-o", "json"],
    )
    .await;
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(v["rollout"]["phase"], json!("Progressing"));

    // A controller that does not exist: one clear line naming it (not
    // kube's debug dump of the Status), exit code 1.
    let (ok, _, err) = run_cli(&kubeconfig, &["promote", "--controller", "missing"]).await;
    assert!(!ok);
    assert!(
        err.contains("WasmController \"missing\" not found"),
        "{err}"
    );
    assert!(!err.contains("Status {"), "debug dump in the error: {err}");
    env.stop_manager().await;
    Ok(())
}

/// A newcomer who runs `rollout status` beside `dev` without `--kubeconfig`
/// (no `$KUBECONFIG`, no `~/.kube/config`, not in a pod) is told which flag
/// to pass, not only kube's list of places it looked.
#[test]
fn without_a_kubeconfig_the_error_says_to_pass_one() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .args(["rollout", "status", "--controller", "static-site"])
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("cannot run wasm-reconciler");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "succeeded without a cluster: {stderr}"
    );
    assert!(
        stderr.contains("pass --kubeconfig FILE") && stderr.contains("dev.kubeconfig"),
        "the error does not say what to pass:\n{stderr}"
    );
}

/// "Break the candidate and watch the rollback": a candidate that answers a
/// permanent error fails the gate, and the parent it broke goes back to the
/// active version *and is reconciled by it* — not held with the candidate's
/// error until its spec changes or the resync period (an hour here) passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_broken_by_a_rolled_back_candidate_is_ready_again() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("rb").await?;
    let v1 = env.plugin_file(
        "rb-v1",
        ScriptPlugin::new("rb-v1", |r, _| Ok(configmap_children(r))),
    )?;
    let v2 = env.plugin_file(
        "rb-v2",
        ScriptPlugin::new("rb-v2", |_, _| {
            Err(wr_engine::plugin::PluginError::Permanent {
                reason: "InvalidConfig".into(),
                message: "the candidate refuses everything".into(),
            })
        }),
    )?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "rb"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": v1.display().to_string(),
                       "candidate": {"path": v2.display().to_string(), "shadow": false}},
            "rollout": {"steps": [{"percent": 100}], "pauseSeconds": 3600},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.create_widget("rb", "w1", json!({})).await?;
    env.start_manager();
    eventually("the gate rolled the candidate back", 60, || async {
        let r = controller(&env, "rb").await.ok()?.status?.rollout?;
        (r.phase == RolloutPhase::RolledBack).then_some(())
    })
    .await?;
    let api = env.widgets("rb");
    let ready = eventually("w1 Ready again on the active version", 30, || async {
        let w = api.get("w1").await.ok()?;
        ready_of(&w).filter(|(status, _, _)| status == "True")
    })
    .await;
    let last = api.get("w1").await.ok().and_then(|w| ready_of(&w));
    env.stop_manager().await;
    assert!(ready.is_ok(), "w1 is still not Ready: {last:?}");
    Ok(())
}

/// A hot reload that fixes what made the plugin answer a permanent error:
/// the new version reconciles the parent at once ("swaps atomically and
/// re-reconciles every parent"), rather than the old version's error being
/// held until the resync period (an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_reload_reconciles_a_parent_held_by_a_permanent_error() -> Result<()> {
    let mut env = Env::start().await?;
    env.namespace("hr").await?;
    let broken = env.plugin_file(
        "hr-broken",
        ScriptPlugin::new("hr-broken", |_, _| {
            Err(wr_engine::plugin::PluginError::Permanent {
                reason: "InvalidConfig".into(),
                message: "this version refuses everything".into(),
            })
        }),
    )?;
    let fixed = env.plugin_file(
        "hr-fixed",
        ScriptPlugin::new("hr-fixed", |r, _| Ok(configmap_children(r))),
    )?;
    env.create_controller(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "hr"},
        "spec": {
            "parentResource": {"apiVersion": format!("{TEST_GROUP}/v1"), "resource": "widgets"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": broken.display().to_string()},
            "resyncPeriodSeconds": 3600
        }
    }))
    .await?;
    env.create_widget("hr", "w1", json!({})).await?;
    env.start_manager();
    let api = env.widgets("hr");
    eventually("w1 refused by the broken version", 60, || async {
        let w = api.get("w1").await.ok()?;
        ready_of(&w).filter(|(status, reason, _)| status == "False" && reason == "InvalidConfig")
    })
    .await?;
    // The host writes the WasmController's status after it started the
    // controller, so the parent's refusal can be there before the broken
    // version's digest: wait for that digest, or the wait below for a
    // different one could be met by it.
    let broken_digest = wr_engine::plugin_source::digest(&std::fs::read(&broken)?);
    eventually("the broken version reported", 30, || async {
        let d = controller(&env, "hr").await.ok()?.status?.plugin_digest;
        (d.as_deref() == Some(broken_digest.as_str())).then_some(())
    })
    .await?;
    let before = Some(broken_digest);
    // The fixed build lands at the same path: the host hot-reloads it.
    std::fs::copy(&fixed, &broken)?;
    eventually("the fixed version active", 60, || async {
        let d = controller(&env, "hr").await.ok()?.status?.plugin_digest;
        (d.is_some() && d != before).then_some(())
    })
    .await?;
    let ready = eventually("w1 Ready on the fixed version", 30, || async {
        let w = api.get("w1").await.ok()?;
        ready_of(&w).filter(|(status, _, _)| status == "True")
    })
    .await;
    let last = api.get("w1").await.ok().and_then(|w| ready_of(&w));
    env.stop_manager().await;
    assert!(ready.is_ok(), "w1 is still not Ready: {last:?}");
    Ok(())
}
