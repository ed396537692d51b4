//! `wasm-reconciler publish --apply [--prune]` (the real binary) against the
//! embedded API server, with the engine's manager loading what it wrote:
//! an 18 MiB component round-trips through `publish` and loads, a second
//! version replaces it, and `--prune` removes the first version's chunks.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::json;
use wr_engine::chunked;
use wr_tests::cluster::{Env, eventually};
use wr_tests::reload::{
    active_digest, condition, configmap_controller, inflate_component, inflate_compressible,
};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-reconciler");

/// Runs `publish --apply` for `component`; returns stdout.
async fn publish(dir: &Path, kubeconfig: &Path, component: &[u8], prune: bool) -> Result<String> {
    let file = dir.join(format!("p-{}.wasm", component.len()));
    std::fs::write(&file, component)?;
    let mut cmd = std::process::Command::new(BIN);
    // zstd level 3 rather than the default 10: the same format, faster in a
    // debug build.
    cmd.args(["publish", "--name", "big", "--namespace", "ns1", "--apply"])
        .args(["--zstd-level", "3"])
        .arg("--plugin")
        .arg(&file)
        .arg("--kubeconfig")
        .arg(kubeconfig);
    if prune {
        cmd.arg("--prune");
    }
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    if !out.status.success() {
        bail!(
            "publish failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Names of the ConfigMaps labelled as belonging to plugin `big`.
async fn plugin_configmaps(env: &Env) -> Result<BTreeSet<String>> {
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), "ns1");
    Ok(api
        .list(&ListParams::default().labels(&format!("{}=big", chunked::PLUGIN_LABEL)))
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect())
}

/// Chunk names listed by the manifest now stored in ConfigMap `big`.
async fn manifest_chunks(env: &Env) -> Result<(chunked::Manifest, BTreeSet<String>)> {
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), "ns1");
    let cm = api.get("big").await?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(chunked::MANIFEST_KEY))
        .context("no manifest in ConfigMap big")?;
    let m = chunked::parse_manifest(text)?;
    let names = m.chunks.iter().map(|c| c.config_map.clone()).collect();
    Ok((m, names))
}

async fn wait_active(env: &Env, digest: &str) -> Result<()> {
    eventually(&format!("{digest} active"), 120, || async {
        let (s, _, _) = condition(env, "big", "PluginLoaded").await?;
        (s == "True" && active_digest(env, "big").await.as_deref() == Some(digest)).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_apply_round_trips_18_mib_and_prune_removes_old_chunk_sets() -> Result<()> {
    let mut env = Env::start_with_wasm().await?;
    env.namespace("ns1").await?;
    let kubeconfig = env.dir.path().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig)?;
    let real = wr_tests::plugins::plugin_bytes("static-site");

    // v1: 18 MiB, mostly incompressible: ~21 chunks.
    let v1 = inflate_component(&real, 18 << 20);
    let out = publish(env.dir.path(), &kubeconfig, &v1, false).await?;
    let d1 = wr_engine::plugin_source::digest(&v1);
    assert!(out.contains(&d1), "{out}");
    let (m1, chunks1) = manifest_chunks(&env).await?;
    assert_eq!(m1.size, v1.len() as u64);
    assert_eq!(m1.sha256, d1.trim_start_matches("sha256:"));
    assert!(chunks1.len() >= 20, "{} chunks", chunks1.len());
    configmap_controller(&env, "big", "ns1", "big", json!({})).await?;
    env.start_manager();
    wait_active(&env, &d1).await?;

    // v2 (compressible, zstd + chunked) with --prune: v1's chunks go away.
    let v2 = inflate_compressible(&real, 4 << 20);
    let out = publish(env.dir.path(), &kubeconfig, &v2, true).await?;
    let d2 = wr_engine::plugin_source::digest(&v2);
    assert!(out.contains(&d2), "{out}");
    let (m2, chunks2) = manifest_chunks(&env).await?;
    assert_eq!(m2.encoding, chunked::Encoding::Zstd);
    assert!(chunks2.is_disjoint(&chunks1));
    assert!(
        out.contains(&format!("pruned {} chunk ConfigMap(s)", chunks1.len())),
        "{out}"
    );
    let mut want = chunks2.clone();
    want.insert("big".to_string());
    assert_eq!(plugin_configmaps(&env).await?, want);
    wait_active(&env, &d2).await?;

    // Without --prune (the default) old chunk sets stay.
    let v3 = inflate_component(&real, 3 << 20);
    publish(env.dir.path(), &kubeconfig, &v3, false).await?;
    let (_, chunks3) = manifest_chunks(&env).await?;
    let left = plugin_configmaps(&env).await?;
    assert!(chunks2.is_subset(&left) && chunks3.is_subset(&left));
    wait_active(&env, &wr_engine::plugin_source::digest(&v3)).await?;
    env.stop_manager().await;
    Ok(())
}

/// `publish` compiles the component first: bytes the host would refuse are
/// never written, with the host's reason (exit 5). A namespace that does not
/// exist is named in one line (no API `Status` dump), and
/// `--create-namespace` creates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_refuses_unloadable_components_and_names_a_missing_namespace() -> Result<()> {
    if wr_tests::target::skip_on_real("creates and inspects namespaces of fixed names") {
        return Ok(());
    }
    let env = Env::start().await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig)?;
    let run = |plugin: &Path, extra: &[&str]| {
        std::process::Command::new(BIN)
            .args(["publish", "--name", "p", "--apply"])
            .arg("--plugin")
            .arg(plugin)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(extra)
            .output()
    };
    // A core module, not a component: refused before any API call.
    let bogus = dir.path().join("core.wasm");
    std::fs::write(&bogus, b"\0asm\x01\0\0\0")?;
    let out = run(&bogus, &["--namespace", "default"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.code() == Some(5), "{stderr}");
    anyhow::ensure!(
        stderr.contains("refusing to publish")
            && stderr.contains("not a valid WebAssembly component"),
        "{stderr}"
    );

    let plugin = wr_tests::plugins::plugin_path("static-site");
    let out = run(&plugin, &["--namespace", "nowhere"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.code() == Some(1), "{stderr}");
    anyhow::ensure!(
        stderr.contains("namespace \"nowhere\" does not exist")
            && stderr.contains("--create-namespace"),
        "{stderr}"
    );
    anyhow::ensure!(
        !stderr.contains("ErrorResponse") && !stderr.contains("Status"),
        "{stderr}"
    );

    let out = run(&plugin, &["--namespace", "nowhere", "--create-namespace"])?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), "nowhere");
    api.get("p").await.context("the published ConfigMap")?;
    Ok(())
}
