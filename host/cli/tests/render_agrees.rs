//! `render` judges plugin output as the live host does: on every case of the
//! shared invalid-output fixtures (`tests/fixtures/invalid-output`) the
//! adversarial plugin's `echo` mode returns a Probe's `spec.response`; the
//! real binary (`render --controller`) and the real engine over the embedded
//! API server must agree — same class (exit 5 / `Ready=False` with reason
//! `InvalidPluginOutput`) and the same message. The `valid` case must pass
//! both. Each case's `expected.yaml` also holds the hand-written message, so
//! a message that changes in both places at once is caught too.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;
use wr_tests::cluster::*;
use wr_tests::plugins::{plugin_path, workspace_root};

fn fixtures() -> PathBuf {
    workspace_root().join("tests/fixtures/invalid-output")
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

struct Case {
    name: String,
    parent: Value,
    /// `Some(message)` for an invalid-output case.
    message: Option<String>,
}

fn cases() -> Vec<Case> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("parent.yaml").exists())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let expected = yaml_docs(&dir.join("expected.yaml")).remove(0);
            Case {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                parent: yaml_docs(&dir.join("parent.yaml")).remove(0),
                message: expected
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        })
        .collect()
}

/// `render --controller` on one case: (exit code, stderr).
fn render(case: &str, cache: &Path) -> (Option<i32>, String) {
    let dir = fixtures().join(case);
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("render")
        .arg(format!("--plugin={}", plugin_path("adversarial").display()))
        .arg(format!("--parent={}", dir.join("parent.yaml").display()))
        .arg(format!(
            "--controller={}",
            fixtures().join("controller.yaml").display()
        ))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg("--now=2026-01-15T12:00:00Z")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn probe_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("fixtures.wasm-reconciler.dev", "v1", "Probe"),
        "probes",
    )
}

/// The `Ready` condition (status, reason, message) of a Probe.
fn ready(obj: &DynamicObject) -> Option<(String, String, String)> {
    let conds = obj.data.pointer("/status/conditions")?.as_array()?;
    let c = conds
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some((s("status"), s("reason"), s("message")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_and_the_host_agree_on_invalid_output() -> Result<()> {
    if wr_tests::target::skip_on_real(
        "the fixtures' messages name the namespace `default`, which the shared real cluster maps",
    ) {
        return Ok(());
    }
    let cases = cases();
    ensure!(cases.len() >= 8, "expected the invalid-output fixtures");
    // The binary first (it needs no cluster).
    let cache = tempfile::tempdir()?;
    let rendered: Vec<(Option<i32>, String)> = cases
        .iter()
        .map(|c| render(&c.name, cache.path()))
        .collect();

    let mut env = Env::start_with_wasm().await?;
    let docs = yaml_docs(&fixtures().join("controller.yaml"));
    install_crd(&env.client, docs[1].clone()).await?;
    let mut wc = docs[0].clone();
    wc["spec"]["plugin"]["path"] = plugin_path("adversarial").display().to_string().into();
    env.create_controller(wc).await?;
    env.start_manager();
    let probes: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &probe_ar());
    for case in &cases {
        let obj: DynamicObject = serde_json::from_value(case.parent.clone())?;
        probes.create(&PostParams::default(), &obj).await?;
    }

    for (case, (code, stderr)) in cases.iter().zip(&rendered) {
        let name = &case.name;
        let (status, reason, message) = eventually(&format!("{name}: Ready"), 30, || async {
            let o = probes.get(name).await.ok()?;
            ready(&o).filter(|(s, _, _)| s != "Unknown")
        })
        .await?;
        match &case.message {
            Some(expected) => {
                ensure!(
                    (status.as_str(), reason.as_str()) == ("False", "InvalidPluginOutput"),
                    "{name}: the host says Ready={status} {reason}: {message}"
                );
                ensure!(
                    &message == expected,
                    "{name}: host message {message:?}, fixture {expected:?}"
                );
                ensure!(*code == Some(5), "{name}: render exited {code:?}: {stderr}");
                ensure!(
                    stderr.contains(&format!("InvalidPluginOutput: {message}")),
                    "{name}: render's error {stderr:?} lacks the host's message {message:?}"
                );
            }
            None => {
                ensure!(
                    status == "True",
                    "{name}: the host says Ready={status} {reason}: {message}"
                );
                ensure!(*code == Some(0), "{name}: render exited {code:?}: {stderr}");
            }
        }
    }
    env.stop_manager().await;
    Ok(())
}

/// `render` without `--controller` still applies every rule but the kind
/// check; `--stats` reports the call; a plugin's log lines are shown at the
/// default log level.
#[test]
fn render_without_controller_stats_and_logs() -> Result<()> {
    let cache = tempfile::tempdir()?;
    let dir = fixtures().join("ready-condition");
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("render")
        .arg(format!("--plugin={}", plugin_path("adversarial").display()))
        .arg(format!("--parent={}", dir.join("parent.yaml").display()))
        .arg(format!("--cache-dir={}", cache.path().display()))
        .output()
        .context("render")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No --controller: no config either, so mode "ok" — a valid ConfigMap.
    ensure!(out.status.success(), "{stderr}");

    let config = cache.path().join("echo.json");
    std::fs::write(&config, r#"{"mode":"echo"}"#)?;
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("render")
        .arg(format!("--plugin={}", plugin_path("adversarial").display()))
        .arg(format!("--parent={}", dir.join("parent.yaml").display()))
        .arg(format!("--config={}", config.display()))
        .arg(format!("--cache-dir={}", cache.path().display()))
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(5), "{stderr}");
    ensure!(
        stderr.contains("type Ready is owned by the host"),
        "{stderr}"
    );

    let spam = cache.path().join("spam.json");
    std::fs::write(&spam, r#"{"mode":"log-spam"}"#)?;
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .arg("render")
        .arg(format!("--plugin={}", plugin_path("adversarial").display()))
        .arg(format!("--parent={}", dir.join("parent.yaml").display()))
        .arg(format!("--config={}", spam.display()))
        .arg(format!("--cache-dir={}", cache.path().display()))
        .arg("--stats")
        .env_remove("RUST_LOG")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "{stderr}");
    ensure!(
        stderr.contains("xxxxxxxxxx"),
        "plugin log lines not shown: {stderr:.300}"
    );
    let stats = stderr
        .lines()
        .find(|l| l.starts_with("stats: "))
        .context("no stats line")?;
    ensure!(
        stats.contains(" ms, memory ") && stats.contains("MiB"),
        "{stats}"
    );
    // The host's default limits, not render's own.
    let limits = wr_runtime::CallLimits::default();
    ensure!(
        stats.contains(&format!("timeout {} ms", limits.timeout.as_millis())),
        "{stats}"
    );
    Ok(())
}
