//! Cluster setup: namespaces, CRDs, the plugin ConfigMap (published with the
//! real `wasm-reconciler publish --apply`) and the two WasmControllers.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};

use crate::procs::SYSTEM_NS;

/// API group of the chaos parent kinds.
pub const GROUP: &str = "chaos.wasm-reconciler.dev";
/// Namespace of the healthy controller's parents and children.
pub const NS: &str = "chaos";
/// Namespace of the hostile controller's parents.
pub const HOSTILE_NS: &str = "chaos-hostile";
/// The healthy WasmController (also the suffix of its finalizer).
pub const HEALTHY: &str = "chaos";
/// The hostile WasmController.
pub const HOSTILE: &str = "hostile";
/// ConfigMap holding the healthy controller's plugin.
pub const PLUGIN_CM: &str = "chaos-plugin";
/// Kind of the healthy controller's parents.
pub const PARENT_KIND: &str = "ChaosParent";

/// ApiResource of a parent kind of this suite.
pub fn parent_ar(kind: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// ApiResource of ConfigMaps.
pub fn configmap_ar() -> ApiResource {
    wr_tests::cluster::configmap_ar()
}

fn parent_crd(kind: &str) -> Value {
    let plural = format!("{}s", kind.to_lowercase());
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

async fn namespace(client: &Client, ns: &str) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let obj = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {ns}")),
    }
}

/// Namespaces and CRDs.
pub async fn install_kinds(client: &Client) -> Result<()> {
    for ns in [NS, HOSTILE_NS, SYSTEM_NS] {
        namespace(client, ns).await?;
    }
    let wc = serde_json::to_value(wr_engine::WasmController::crd())?;
    wr_tests::cluster::install_crd(client, wc).await?;
    wr_tests::cluster::install_crd(client, parent_crd(PARENT_KIND)).await?;
    wr_tests::cluster::install_crd(client, parent_crd("HostileParent")).await?;
    Ok(())
}

/// `wasm-reconciler publish --apply` of `plugin` into the plugin ConfigMap,
/// retried (faults may be on): true once it succeeded.
pub async fn publish(bin: &Path, kubeconfig: &Path, plugin: &Path, attempts: u32) -> Result<bool> {
    for attempt in 1..=attempts {
        let out = tokio::process::Command::new(bin)
            .args(["--log-level", "warn", "publish", "--plugin"])
            .arg(plugin)
            .args([
                "--name",
                PLUGIN_CM,
                "--namespace",
                SYSTEM_NS,
                "--apply",
                "--kubeconfig",
            ])
            .arg(kubeconfig)
            .output()
            .await
            .context("running wasm-reconciler publish")?;
        if out.status.success() {
            return Ok(true);
        }
        tracing::warn!(
            attempt,
            stderr = %String::from_utf8_lossy(&out.stderr).trim(),
            "publish failed; retrying"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(false)
}

/// The healthy controller (plugin from the ConfigMap, finalizer on) and, with
/// `hostile_plugin`, the hostile one (plugin from the file).
pub async fn install_controllers(
    client: &Client,
    fail_percent: u64,
    hostile_plugin: Option<&Path>,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<wr_engine::WasmController>(&()),
    );
    let healthy = json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": HEALTHY},
        "spec": {
            "parentResource": {"apiVersion": format!("{GROUP}/v1"), "resource": "chaosparents"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {
                "configMap": {"name": PLUGIN_CM, "namespace": SYSTEM_NS},
                "config": {"mode": "flaky", "failPercent": fail_percent}
            },
            "finalize": true,
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": 4,
            "limits": {"timeoutMillis": 2000, "memoryMib": 64}
        }
    });
    let mut objs = vec![healthy];
    if let Some(p) = hostile_plugin {
        objs.push(json!({
            "apiVersion": "wasm-reconciler.dev/v1alpha1",
            "kind": "WasmController",
            "metadata": {"name": HOSTILE},
            "spec": {
                "parentResource": {"apiVersion": format!("{GROUP}/v1"), "resource": "hostileparents"},
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "plugin": {"path": p.display().to_string(), "config": {"mode": "hostile", "bytes": 4194304}},
                "finalize": false,
                "resyncPeriodSeconds": 3600,
                "maxConcurrentReconciles": 2,
                "limits": {"timeoutMillis": 300, "memoryMib": 32}
            }
        }));
    }
    for o in objs {
        let obj: DynamicObject = serde_json::from_value(o)?;
        api.create(&PostParams::default(), &obj)
            .await
            .context("creating a WasmController")?;
    }
    Ok(())
}

/// "Version 2" of the plugin: the bytes of version 1 with the version marker
/// rewritten in place (`…:v1` → `…:v2`, same length). Fails unless the marker
/// occurs exactly once.
pub fn version_two(v1: &[u8]) -> Result<Vec<u8>> {
    let marker = b"wr-chaos-plugin-version:v1";
    let hits: Vec<usize> = v1
        .windows(marker.len())
        .enumerate()
        .filter(|(_, w)| *w == marker)
        .map(|(i, _)| i)
        .collect();
    let [at] = hits.as_slice() else {
        bail!(
            "the plugin has {} copies of its version marker, want 1 (rebuild plugins/adversarial)",
            hits.len()
        );
    };
    let mut v2 = v1.to_vec();
    v2[at + marker.len() - 1] = b'2';
    Ok(v2)
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_two_rewrites_the_one_marker() {
        let v1 = b"xx wr-chaos-plugin-version:v1 yy".to_vec();
        let v2 = super::version_two(&v1).unwrap();
        assert_eq!(v2, b"xx wr-chaos-plugin-version:v2 yy");
        assert!(super::version_two(b"none").is_err());
    }
}
