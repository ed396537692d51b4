//! Record, replay and explain (issue 17 item 3) at the wire: the engine's
//! manager runs the static-site component against the embedded API server
//! with a record store, then the real `wasm-reconciler replay` and `explain`
//! binaries read the store offline.
//!
//! - Replaying the recorded component reproduces every recorded outcome byte
//!   for byte; a variant whose output differs for one parent (the
//!   `ScaledToZero` message rewritten in the component's data segment, same
//!   length, so the binary stays valid) is reported for exactly that parent.
//! - `explain` lists a parent's history, and the writes it names are the
//!   writes the API server saw.
//! - A Secret the plugin is given (a related rule) is redacted in the store:
//!   its data appears nowhere in the directory.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use wr_engine::record::{RecordOptions, Recorder, SecretPolicy, store};
use wr_tests::cluster::*;

const BIN: &str = env!("CARGO_BIN_EXE_wasm-reconciler");
/// The message the variant rewrites (same length).
const ORIGINAL: &[u8] = b"0 replicas requested";
const VARIANT: &[u8] = b"0 replicas REQUESTED";

fn example(path: &str) -> Result<Value> {
    let p = wr_tests::plugins::workspace_root()
        .join("examples")
        .join(path);
    Ok(serde_yaml::from_str(&std::fs::read_to_string(p)?)?)
}

fn sites(env: &Env) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("examples.wasm-reconciler.dev", "v1alpha1", "StaticSite"),
        "staticsites",
    );
    Api::namespaced_with(env.client.clone(), &env.ns("default"), &ar)
}

/// Starts the manager with a record store in `dir` and the example
/// static-site controller (plugin from a file, `related` merged into the spec).
async fn start(env: &mut Env, dir: &Path, related: Value) -> Result<()> {
    env.opts.recorder = Some(Arc::new(Recorder::start(RecordOptions {
        dir: dir.to_path_buf(),
        max_records: 10_000,
        max_bytes: 1 << 30,
        secrets: SecretPolicy::Redact,
    })?));
    install_crd(&env.client, example("static-site/crd.yaml")?).await?;
    let mut wc = example("static-site/controller.yaml")?;
    let path = wr_tests::plugins::plugin_path("static-site");
    wc["spec"]["plugin"] = json!({"path": path.display().to_string(), "config": wc["spec"]["plugin"]["config"].clone()});
    wc["spec"]["related"] = related;
    env.create_controller(wc).await?;
    env.start_manager();
    Ok(())
}

async fn create_site(env: &Env, name: &str, replicas: i64) -> Result<()> {
    let mut site: DynamicObject = serde_json::from_value(example("static-site/site.yaml")?)?;
    site.metadata.name = Some(name.into());
    site.metadata.namespace = Some(env.ns("default"));
    site.data["spec"]["replicas"] = json!(replicas);
    sites(env).create(&PostParams::default(), &site).await?;
    Ok(())
}

/// Reason of the parent's `Available` condition.
async fn available_reason(env: &Env, name: &str) -> Option<String> {
    let s = sites(env).get(name).await.ok()?;
    let c = s.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    c["reason"].as_str().map(str::to_string)
}

/// Waits until the store holds a record of `parent` whose outcome contains `text`.
async fn recorded(dir: &Path, parent: &str, text: &str) -> Result<()> {
    eventually(
        &format!("a record of {parent} with {text:?}"),
        30,
        || async {
            let recs = store::read_records(dir).ok()?;
            recs.iter()
                .filter(|(_, r)| r.parent.key() == parent)
                .any(|(_, r)| {
                    store::read_blob(dir, &r.outcome)
                        .is_ok_and(|b| String::from_utf8_lossy(&b).contains(text))
                })
                .then_some(())
        },
    )
    .await
}

fn cli(args: &[&str]) -> Result<Value> {
    let out = std::process::Command::new(BIN).args(args).output()?;
    if !out.status.success() {
        bail!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| String::from_utf8_lossy(&out.stdout).to_string())
}

fn replay(dir: &Path, plugin: &Path) -> Result<Value> {
    cli(&[
        "replay",
        "--records",
        &dir.display().to_string(),
        "--plugin",
        &plugin.display().to_string(),
        "-o",
        "json",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_reproduces_the_recorded_outputs_and_reports_exactly_the_changed_parents()
-> Result<()> {
    let mut env = Env::start_with_wasm().await?;
    let store_dir = env.dir.path().join("records");
    start(&mut env, &store_dir, json!([])).await?;
    for (name, replicas) in [("one", 1), ("two", 2), ("zero", 0)] {
        create_site(&env, name, replicas).await?;
    }
    let ns = env.ns("default");
    // Converged far enough: zero's Deployment was observed (ScaledToZero),
    // the others are waiting for replicas (no simulator here).
    eventually("zero ScaledToZero", 30, || async {
        (available_reason(&env, "zero").await.as_deref() == Some("ScaledToZero")).then_some(())
    })
    .await?;
    recorded(&store_dir, &format!("{ns}/zero"), "0 replicas requested").await?;
    for p in ["one", "two"] {
        recorded(&store_dir, &format!("{ns}/{p}"), "ReplicasUnavailable").await?;
    }
    env.stop_manager().await;
    // The writer thread may still hold the last passes' calls.
    let recorder = env.opts.recorder.clone().context("recorder")?;
    ensure!(
        recorder.flush(Duration::from_secs(30)),
        "record store not flushed"
    );
    let records = store::read_records(&store_dir)?.len();

    // The recorded component: every outcome reproduced byte for byte.
    let plugin = wr_tests::plugins::plugin_path("static-site");
    let same = replay(&store_dir, &plugin)?;
    assert_eq!(same["records"], json!(records), "{same:#}");
    assert_eq!(same["changedRecords"], json!(0), "{same:#}");
    assert_eq!(
        same["parents"].as_array().map(Vec::len),
        Some(3),
        "{same:#}"
    );

    // The variant: exactly `zero` changes, in exactly that message.
    let mut bytes = std::fs::read(&plugin)?;
    let at: Vec<usize> = bytes
        .windows(ORIGINAL.len())
        .enumerate()
        .filter(|(_, w)| *w == ORIGINAL)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "the message occurs once in the component");
    bytes[at[0]..at[0] + VARIANT.len()].copy_from_slice(VARIANT);
    let variant = env.dir.path().join("variant.wasm");
    std::fs::write(&variant, &bytes)?;
    let changed = replay(&store_dir, &variant)?;
    let parents: Vec<&Value> = changed["parents"]
        .as_array()
        .context("parents")?
        .iter()
        .filter(|p| !p["changed"].as_array().is_some_and(Vec::is_empty))
        .collect();
    let names: Vec<&str> = parents
        .iter()
        .filter_map(|p| p["parent"].as_str())
        .collect();
    assert_eq!(names, vec![format!("{ns}/zero")], "{changed:#}");
    assert_eq!(changed["changedParents"], json!(1));
    for rec in parents[0]["changed"].as_array().context("changed")? {
        assert_eq!(
            rec["changes"],
            json!([{"path": "/response/conditions/Available/message",
                    "old": "0 replicas requested", "new": "0 replicas REQUESTED"}]),
            "{changed:#}"
        );
    }

    // explain: zero's history; its writes are the ones the API server saw.
    let steps = cli(&[
        "explain",
        "--records",
        &store_dir.display().to_string(),
        &format!("{ns}/zero"),
        "-o",
        "json",
    ])?;
    let steps = steps.as_array().context("steps")?;
    assert_eq!(steps[0]["trigger"], "first record");
    assert!(steps.len() >= 2, "{steps:#?}");
    assert!(
        steps[1..]
            .iter()
            .any(|s| s["outputChanges"].to_string().contains("ScaledToZero")),
        "{steps:#?}"
    );
    let resource = |kind: &str| format!("{}s", kind.to_lowercase());
    let explained: BTreeSet<(String, String, String)> = steps
        .iter()
        .flat_map(|s| s["writes"].as_array().cloned().unwrap_or_default())
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap_or_default().to_string();
            (write_class(&s("verb")), resource(&s("kind")), s("name"))
        })
        .collect();
    assert!(!explained.is_empty(), "{steps:#?}");
    let fm = "wasm-reconciler/static-site";
    let seen: BTreeSet<(String, String, String)> = ["deployments", "services", "configmaps"]
        .iter()
        .flat_map(|r| env.writes(r, None))
        .filter(|w| w.namespace.as_deref() == Some(ns.as_str()))
        .filter(|w| w.name.as_deref().is_some_and(|n| n.starts_with("zero")))
        .filter(|w| w.field_manager.as_deref() == Some(fm) || w.verb == "delete")
        .map(|w| {
            (
                write_class(&w.verb),
                w.resource.clone(),
                w.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(explained, seen);
    Ok(())
}

/// A write's class as both sides can tell it: the host creates and updates
/// by server-side apply (a PATCH), and a create decided on a cache that had
/// not yet seen the child is the same idempotent apply answered 200, so
/// "create" and "apply" are one class; deletes are the other.
fn write_class(verb: &str) -> String {
    match verb {
        "create" | "apply" | "patch" => "apply".to_string(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_given_to_the_plugin_is_redacted_in_the_store() -> Result<()> {
    let mut env = Env::start_with_wasm().await?;
    let store_dir = env.dir.path().join("records");
    let ns = env.ns("default");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(env.client.clone(), &ns);
    // "hunter2-secret-value", base64 on the wire.
    let secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": ns},
        "data": {"password": "aHVudGVyMi1zZWNyZXQtdmFsdWU="}
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    start(
        &mut env,
        &store_dir,
        json!([{"apiVersion": "v1", "resource": "secrets", "names": ["db"]}]),
    )
    .await?;
    create_site(&env, "web", 1).await?;
    recorded(&store_dir, &format!("{ns}/web"), "ReplicasUnavailable").await?;
    env.stop_manager().await;
    let recorder = env.opts.recorder.clone().context("recorder")?;
    ensure!(
        recorder.flush(Duration::from_secs(30)),
        "record store not flushed"
    );

    // Every record file, and every blob decompressed.
    let mut files = Vec::new();
    for e in std::fs::read_dir(store_dir.join("records"))? {
        files.push(std::fs::read(e?.path())?);
    }
    for id in store::blob_ids(&store_dir)? {
        files.push(store::read_blob(&store_dir, &id)?);
    }
    assert!(files.len() >= 3, "{} files", files.len());
    let recs = store::read_records(&store_dir)?;
    assert!(!recs.is_empty());
    for needle in ["aHVudGVyMi1zZWNyZXQtdmFsdWU=", "hunter2-secret-value"] {
        assert!(
            !files
                .iter()
                .any(|f| String::from_utf8_lossy(f).contains(needle)),
            "{needle} written to the store"
        );
    }
    // The request kept the Secret's shape, data replaced.
    for (_, r) in &recs {
        assert_eq!(r.redacted_secrets, 1, "{r:?}");
        let req: Value = serde_json::from_slice(&store::read_blob(&store_dir, &r.request)?)?;
        let s = &req["related"][0]["objects"][0];
        assert_eq!(s["metadata"]["name"], "db");
        assert_eq!(
            s["data"]["password"],
            wr_engine::record::redact::REDACTED_DATA
        );
    }
    // Redacted records still replay to the same outcome.
    let plugin = wr_tests::plugins::plugin_path("static-site");
    let same = replay(&store_dir, &plugin)?;
    assert_eq!(same["changedRecords"], json!(0), "{same:#}");
    Ok(())
}
