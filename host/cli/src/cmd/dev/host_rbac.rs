//! `dev --authorization rbac`: the host runs as ServiceAccount
//! `wasm-reconciler/wasm-reconciler`, bound to exactly the RBAC that
//! `wasm-reconciler rbac` prints for the installed WasmControllers, so a
//! plugin whose children need more than that fails in `dev` with the 403 a
//! real cluster would give. `kubectl create token wasm-reconciler -n
//! wasm-reconciler` gives the same identity to try by hand.

use anyhow::Context;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use super::seed::{self, FIELD_MANAGER, PluginFile};

pub const NAMESPACE: &str = "wasm-reconciler";
pub const SERVICE_ACCOUNT: &str = "wasm-reconciler";

/// dev lives longer than kube's default hour; the token is the dev
/// cluster's own and dies with its ServiceAccount.
const TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// Applies the namespace, the ServiceAccount and the generated RBAC; returns
/// a token of the ServiceAccount.
pub async fn install(
    client: &kube::Client,
    server: &wr_apiserver::RunningServer,
    plugins: &[PluginFile],
) -> anyhow::Result<String> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.patch(
        NAMESPACE,
        &pp,
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
    )
    .await
    .with_context(|| format!("applying namespace {NAMESPACE}"))?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    sas.patch(
        SERVICE_ACCOUNT,
        &pp,
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}})),
    )
    .await
    .with_context(|| format!("applying ServiceAccount {NAMESPACE}/{SERVICE_ACCOUNT}"))?;

    let docs = crate::cmd::rbac::documents(&seed::manifests(plugins)?, NAMESPACE, SERVICE_ACCOUNT)?;
    for d in &docs {
        apply_rbac(client, &pp, d).await?;
    }
    let token = server
        .service_account_token(NAMESPACE, SERVICE_ACCOUNT, TOKEN_SECONDS)
        .map_err(|e| anyhow::anyhow!("minting the host's token: {e}"))?;
    tracing::info!(
        service_account = SERVICE_ACCOUNT,
        namespace = NAMESPACE,
        objects = docs.len(),
        "host runs under the RBAC `wasm-reconciler rbac` generates"
    );
    Ok(token)
}

async fn apply_rbac(client: &kube::Client, pp: &PatchParams, d: &Value) -> anyhow::Result<()> {
    let kind = d.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = d
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .context("generated RBAC object without a name")?;
    let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    let api: Api<DynamicObject> = match d.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.patch(name, pp, &Patch::Apply(d))
        .await
        .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}
