//! The checks, grouped by area. Each area runs the same requests on one
//! server and records what it saw; `main` runs every area on both servers
//! side by side and compares the records.

pub mod apply;
pub mod authz;
pub mod builtins;
pub mod crd;
pub mod crud;
pub mod discovery;
pub mod kubectl;
pub mod lifecycle;
pub mod namespaces;
pub mod protobuf;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::run::Run;
use crate::target::Req;

/// What every area may use besides its server.
pub struct Ctx {
    /// Built-in resources as the real server's discovery lists them.
    pub plan: Arc<discovery::Plan>,
    pub kubectl: PathBuf,
    /// Report directory (kubectl outputs go below it).
    pub out: PathBuf,
}

/// Areas in the order they run.
pub const AREAS: &[&str] = &[
    "version",
    "discovery",
    "served",
    "table",
    "openapi",
    "crud",
    "pagination",
    "watch",
    "apply",
    "lifecycle",
    "builtins",
    "namespaces",
    "crd",
    "protobuf",
    "authz",
    "kubectl",
];

pub async fn run(area: &str, r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    match area {
        "version" => discovery::version(r).await,
        "discovery" => discovery::discovery(r, ctx).await,
        "served" => discovery::served(r, ctx).await,
        "table" => discovery::table(r, ctx).await,
        "openapi" => discovery::openapi(r, ctx).await,
        "crud" => crud::crud(r).await,
        "pagination" => crud::pagination(r).await,
        "watch" => watch::watch(r).await,
        "apply" => apply::apply(r).await,
        "lifecycle" => lifecycle::lifecycle(r).await,
        "builtins" => builtins::builtins(r).await,
        "namespaces" => namespaces::namespaces(r).await,
        "crd" => crd::crd_area(r).await,
        "protobuf" => protobuf::protobuf(r).await,
        "authz" => authz::authz(r, ctx).await,
        "kubectl" => kubectl::kubectl(r, ctx).await,
        other => anyhow::bail!("unknown area {other}"),
    }
}

/// Deletes the namespaces and CRDs this run created (best effort).
pub async fn cleanup(r: &Run) {
    if let Ok(resp) = r.send(Req::get("/api/v1/namespaces")).await {
        for n in names(&resp.json()) {
            if n.contains(&r.token) {
                let _ = r
                    .send(Req::with_body(
                        "DELETE",
                        format!("/api/v1/namespaces/{n}"),
                        &json!({}),
                    ))
                    .await;
            }
        }
    }
    for coll in [
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    ] {
        if let Ok(resp) = r.send(Req::get(coll)).await {
            for n in names(&resp.json()) {
                if n.contains(&r.token) {
                    let _ = r
                        .send(Req::with_body("DELETE", format!("{coll}/{n}"), &json!({})))
                        .await;
                }
            }
        }
    }
}

/// Names of the items of a list.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A list reduced to what a paging client sees: kind, list metadata, item names.
pub fn list_view(code: u16, list: &Value) -> Value {
    json!({
        "code": code,
        "kind": list["kind"],
        "apiVersion": list["apiVersion"],
        "metadata": list["metadata"],
        "items": names(list),
    })
}

pub fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

pub const MERGE: &str = "application/merge-patch+json";
pub const JSON_PATCH: &str = "application/json-patch+json";
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";
pub const APPLY: &str = "application/apply-patch+yaml";

/// A PATCH request.
pub fn patch<'a>(path: String, ct: &'a str, body: &Value) -> Req<'a> {
    Req::with_body("PATCH", path, body).content_type(ct)
}
