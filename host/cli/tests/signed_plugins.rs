//! Signed plugins (issue 17 item 4) at the wire: keys from the real
//! `wasm-reconciler keygen`, ConfigMaps from the real `publish --apply
//! [--sign KEY]`, loaded by the engine's manager from the embedded API
//! server. A WasmController that trusts one key refuses an unsigned
//! component and one signed by another key (`PluginLoaded=False` naming
//! `spec.plugin.signature`, a Warning Event, nothing reconciled), and loads
//! the component once it is signed by the trusted key.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use wr_tests::cluster::*;
use wr_tests::reload::{active_digest, condition, controller_events};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-reconciler");

fn run(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(BIN).args(args).output()?;
    if !out.status.success() {
        bail!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// `keygen --out DIR/NAME`: (private key path, public key PEM).
fn keygen(dir: &Path, name: &str) -> Result<(PathBuf, String)> {
    let key = dir.join(name);
    let out = run(&["keygen", "--out", &key.display().to_string()])?;
    let public = std::fs::read_to_string(dir.join(format!("{name}.pub")))?;
    assert!(out.contains("trustedKeys"), "{out}");
    Ok((key, public))
}

fn publish(env: &Env, kubeconfig: &Path, plugin: &Path, sign: Option<&Path>) -> Result<()> {
    let ns = env.ns("plugins");
    let mut args = vec![
        "publish".to_string(),
        "--name".into(),
        "site-plugin".into(),
        "--namespace".into(),
        ns,
        "--apply".into(),
        "--plugin".into(),
        plugin.display().to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
    ];
    if let Some(k) = sign {
        args.extend(["--sign".into(), k.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)?;
    Ok(())
}

fn example(path: &str) -> Result<Value> {
    let p = wr_tests::plugins::workspace_root()
        .join("examples")
        .join(path);
    Ok(serde_yaml::from_str(&std::fs::read_to_string(p)?)?)
}

/// Waits for `PluginLoaded=False` with `reason` and a Warning Event of it.
async fn refused(env: &Env, reason: &str, words: &str) -> Result<()> {
    eventually(&format!("PluginLoaded=False {reason}"), 30, || async {
        let (s, r, m) = condition(env, "site", "PluginLoaded").await?;
        (s == "False" && r == reason && m.contains(words)).then_some(())
    })
    .await?;
    eventually(&format!("a Warning event {reason}"), 30, || async {
        controller_events(env, "site")
            .await
            .into_iter()
            .any(|(t, r, m)| t == "Warning" && r == reason && m.contains(words))
            .then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_component_signed_by_a_trusted_key_is_loaded() -> Result<()> {
    let mut env = Env::start_with_wasm().await?;
    env.namespace("plugins").await?;
    let kubeconfig = env.dir.path().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig)?;
    let (trusted, trusted_pub) = keygen(env.dir.path(), "trusted")?;
    let (other, _) = keygen(env.dir.path(), "other")?;
    let plugin = wr_tests::plugins::plugin_path("static-site");
    let digest = wr_engine::plugin_source::digest(&std::fs::read(&plugin)?);

    install_crd(&env.client, example("static-site/crd.yaml")?).await?;
    let mut wc = example("static-site/controller.yaml")?;
    wc["metadata"]["name"] = json!("site");
    wc["spec"]["plugin"]["configMap"] =
        json!({"name": "site-plugin", "namespace": env.ns("plugins")});
    wc["spec"]["plugin"]["signature"] = json!({"trustedKeys": [trusted_pub]});
    publish(&env, &kubeconfig, &plugin, None)?;
    env.create_controller(wc).await?;
    env.start_manager();
    let sites: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns("default"),
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "examples.wasm-reconciler.dev",
                "v1alpha1",
                "StaticSite",
            ),
            "staticsites",
        ),
    );
    let mut site: DynamicObject = serde_json::from_value(example("static-site/site.yaml")?)?;
    site.metadata.namespace = Some(env.ns("default"));
    sites.create(&PostParams::default(), &site).await?;

    // Unsigned: refused, nothing runs.
    refused(&env, "Unsigned", "spec.plugin.signature").await?;
    let (s, r, _) = condition(&env, "site", "Ready").await.unwrap_or_default();
    assert_eq!((s.as_str(), r.as_str()), ("False", "PluginNotLoaded"));
    assert_eq!(active_digest(&env, "site").await, None);

    // Signed by a key the controller does not trust: refused.
    publish(&env, &kubeconfig, &plugin, Some(&other))?;
    refused(
        &env,
        "SignatureInvalid",
        "spec.plugin.signature.trustedKeys",
    )
    .await?;
    assert_eq!(active_digest(&env, "site").await, None);
    assert!(
        sites.get("web").await?.data["status"].is_null(),
        "a parent was reconciled by a refused component"
    );

    // Signed by the trusted key: loaded, and the parent is reconciled.
    publish(&env, &kubeconfig, &plugin, Some(&trusted))?;
    eventually("the signed component is active", 60, || async {
        let (s, _, _) = condition(&env, "site", "PluginLoaded").await?;
        (s == "True" && active_digest(&env, "site").await.as_deref() == Some(&digest)).then_some(())
    })
    .await?;
    eventually("the parent is reconciled", 30, || async {
        let s = sites.get("web").await.ok()?;
        ready_of(&s).map(|_| ())
    })
    .await?;
    env.stop_manager().await;
    Ok(())
}
