//! Acceptance (issue 6): `/readyz` stays 503 until the caches sync (here: the
//! WasmController CRD is installed only after `run` started, so the manager's
//! cache cannot list), the metric families exist and move with the work, and
//! SIGTERM stops the process with exit 0.

use crate::run_common::*;
use anyhow::{Result, ensure};

const SUCCESS: &str =
    r#"wasm_reconciler_reconciles_total{controller="static-site",result="success"}"#;

#[test]
fn readyz_waits_for_cache_sync_and_metrics_exist_and_move() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (_api, kc) = apiserver(dir.path())?;
    let (mut run, url) = run(&kc, "run-m", &["--leader-elect=false"])?;

    ensure!(
        get(&url, "/healthz")?.0 == 200,
        "/healthz must answer at once"
    );
    // The manager cannot list WasmControllers yet: not ready, whatever the wait.
    let (code, why) = get(&url, "/readyz")?;
    ensure!(code == 503, "/readyz before sync answered {code}: {why}");
    ensure!(why.contains("caches not synced"), "{why}");

    install_example(&kc, dir.path(), true)?;
    eventually("/readyz to turn 200 after the CRD appeared", 90, || {
        get(&url, "/readyz").ok().filter(|(c, _)| *c == 200)
    })?;
    eventually("the example parent Ready", 120, || {
        (web_ready(&kc).as_deref() == Some("True")).then_some(())
    })?;
    let first = eventually("a successful reconcile counted", 30, || {
        sample(&url, SUCCESS).filter(|v| *v >= 1.0)
    })?;

    let (_, text) = get(&url, "/metrics")?;
    for series in [
        r#"wasm_reconciler_reconcile_duration_seconds_count{controller="static-site",result="success"}"#,
        r#"wasm_reconciler_plugin_call_duration_seconds_count{controller="static-site"}"#,
        r#"wasm_reconciler_queue_depth{controller="static-site"}"#,
        r#"wasm_reconciler_queue_oldest_item_age_seconds{controller="static-site"}"#,
        r#"wasm_reconciler_api_requests_total{verb="patch",code="200"}"#,
        r#"wasm_reconciler_api_requests_total{verb="list",code="200"}"#,
        r#"wasm_reconciler_parent_not_ready_duration_seconds_count{controller="static-site"}"#,
        r#"wasm_reconciler_parents_finalizer_pending{controller="static-site"} 0"#,
        r#"wasm_reconciler_plugin_loads_total{controller="static-site",kind="load",result="success"} 1"#,
        r#"wasm_reconciler_plugin_active_info{controller="static-site",digest="sha256:"#,
        "wasm_reconciler_leader 1",
    ] {
        ensure!(text.contains(series), "missing {series} in\n{text}");
    }
    ensure!(get(&url, "/livez")?.0 == 200, "/livez with an idle queue");

    // The series move with the work.
    let patches = r#"wasm_reconciler_api_requests_total{verb="patch",code="200"}"#;
    let patches_before = sample(&url, patches).unwrap_or(0.0);
    set_replicas(&kc, 5)?;
    eventually("the Deployment to follow the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("5")).then_some(())
    })?;
    eventually("reconciles_total to grow", 30, || {
        sample(&url, SUCCESS).filter(|v| *v > first)
    })?;
    eventually("api_requests_total to grow", 30, || {
        sample(&url, patches).filter(|v| *v > patches_before)
    })?;

    run.signal("TERM")?;
    ensure!(run.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
    Ok(())
}
