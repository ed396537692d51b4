//! Version, discovery, served built-in kinds, table columns and OpenAPI.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::Ctx;
use crate::normalize::sorted_strings;
use crate::run::Run;
use crate::target::{AGGREGATED, Req, TABLE, Target};

/// One resource of a built-in group version.
#[derive(Debug, Clone)]
pub struct Resource {
    pub group: String,
    pub version: String,
    /// Plural, or `plural/subresource`.
    pub name: String,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

impl Resource {
    /// `api/v1` or `apis/GROUP/VERSION`.
    pub fn gv_path(&self) -> String {
        gv_path(&self.group, &self.version)
    }
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Built-in group versions and their resources, from the real server.
#[derive(Debug, Default)]
pub struct Plan {
    /// (group, version) in the real server's order.
    pub gvs: Vec<(String, String)>,
    pub resources: Vec<Resource>,
}

/// A group served by kube-apiserver itself rather than by a CRD: CRD groups
/// must contain a dot and `*.k8s.io` needs an approval annotation.
pub fn builtin_group(g: &str) -> bool {
    !g.contains('.') || g.ends_with(".k8s.io")
}

/// Reads the real server's discovery: every version of every built-in group.
pub async fn plan(real: &Target) -> anyhow::Result<Plan> {
    let mut plan = Plan::default();
    let mut gvs = vec![(String::new(), "v1".to_string())];
    let apis = real.send(Req::get("/apis")).await?.json();
    for g in apis["groups"].as_array().into_iter().flatten() {
        let name = g["name"].as_str().unwrap_or_default();
        if !builtin_group(name) {
            continue;
        }
        for v in g["versions"].as_array().into_iter().flatten() {
            gvs.push((
                name.to_string(),
                v["version"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    for (g, v) in &gvs {
        let list = real
            .send(Req::get(format!("/{}", gv_path(g, v))))
            .await?
            .json();
        for r in list["resources"].as_array().into_iter().flatten() {
            plan.resources.push(Resource {
                group: g.clone(),
                version: v.clone(),
                name: r["name"].as_str().unwrap_or_default().to_string(),
                kind: r["kind"].as_str().unwrap_or_default().to_string(),
                namespaced: r["namespaced"].as_bool().unwrap_or(false),
                verbs: r["verbs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect(),
            });
        }
    }
    plan.gvs = gvs;
    Ok(plan)
}

pub async fn version(r: &Run) -> anyhow::Result<()> {
    let v = r.send(Req::get("/version")).await?;
    let j = v.json();
    r.record(
        "version/version",
        json!({"code": v.code, "major": j["major"], "minor": j["minor"], "gitVersion": j["gitVersion"]}),
    );
    r.record(
        "version/fields",
        json!(j.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())),
    );
    for p in ["/healthz", "/livez", "/readyz"] {
        let resp = r.send(Req::get(p)).await?;
        r.record(
            &format!("version{p}"),
            json!({"code": resp.code, "body": String::from_utf8_lossy(&resp.body)}),
        );
    }
    Ok(())
}

pub async fn discovery(r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    let api = r.send(Req::get("/api")).await?;
    let j = api.json();
    r.record(
        "discovery/api",
        json!({"code": api.code, "kind": j["kind"], "versions": j["versions"]}),
    );
    let apis = r.send(Req::get("/apis")).await?.json();
    let groups: Vec<Value> = apis["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| builtin_group(g["name"].as_str().unwrap_or_default()))
        .cloned()
        .collect();
    let mut sorted: Vec<Value> = groups.clone();
    sorted.sort_by_key(|g| g["name"].as_str().unwrap_or_default().to_string());
    r.record("discovery/apis-groups", json!(sorted));
    r.record(
        "discovery/apis-group-order",
        json!(groups.iter().map(|g| g["name"].clone()).collect::<Vec<_>>()),
    );
    for accept_path in ["/api", "/apis"] {
        let agg = r.send(Req::get(accept_path).accept(AGGREGATED)).await?;
        let j = agg.json();
        r.record(
            &format!("discovery/aggregated{accept_path}"),
            json!({
                "code": agg.code,
                "contentType": agg.content_type,
                "kind": j["kind"],
                "groups": j["items"].as_array().map(|a| a.iter()
                    .map(|g| g["metadata"]["name"].clone())
                    .filter(|n| builtin_group(n.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()),
            }),
        );
    }
    for (g, v) in &ctx.plan.gvs {
        let path = gv_path(g, v);
        let resp = r.send(Req::get(format!("/{path}"))).await?;
        let j = resp.json();
        r.record(
            &format!("discovery/{path}"),
            json!({"code": resp.code, "kind": j["kind"], "groupVersion": j["groupVersion"]}),
        );
        for res in j["resources"].as_array().into_iter().flatten() {
            let name = res["name"].as_str().unwrap_or_default();
            r.record(
                &format!("discovery/{path}/{name}"),
                json!({
                    "singularName": res["singularName"],
                    "namespaced": res["namespaced"],
                    "kind": res["kind"],
                    "group": res["group"],
                    "version": res["version"],
                    "verbs": sorted_strings(&res["verbs"]),
                    "shortNames": sorted_strings(&res["shortNames"]),
                    "categories": sorted_strings(&res["categories"]),
                }),
            );
        }
    }
    Ok(())
}

/// The collection path of a resource (namespaced ones in `ns`).
fn collection(res: &Resource, ns: &str) -> String {
    if res.namespaced {
        format!("/{}/namespaces/{ns}/{}", res.gv_path(), res.name)
    } else {
        format!("/{}/{}", res.gv_path(), res.name)
    }
}

/// Every built-in resource answers a list (or, without `list`, its error).
pub async fn served(r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    let ns = r.namespace("served").await?;
    for res in ctx.plan.resources.iter().filter(|x| !x.name.contains('/')) {
        let resp = r.send(Req::get(collection(res, &ns))).await?;
        let j = resp.json();
        let v = if res.verbs.iter().any(|v| v == "list") {
            json!({"code": resp.code, "kind": j["kind"], "apiVersion": j["apiVersion"]})
        } else {
            json!({"code": resp.code, "reason": j["reason"]})
        };
        r.record(&format!("served/{}/{}", res.gv_path(), res.name), v);
    }
    Ok(())
}

/// Server-side table columns (what `kubectl get` prints) per listable resource.
pub async fn table(r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    let ns = r.namespace("table").await?;
    for res in ctx
        .plan
        .resources
        .iter()
        .filter(|x| !x.name.contains('/') && x.verbs.iter().any(|v| v == "list"))
    {
        let resp = r.send(Req::get(collection(res, &ns)).accept(TABLE)).await?;
        let j = resp.json();
        let cols: Vec<Value> = j["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"name": c["name"], "type": c["type"], "format": c["format"], "priority": c["priority"]}))
            .collect();
        r.record(
            &format!("table/{}/{}", res.gv_path(), res.name),
            json!({"code": resp.code, "kind": j["kind"], "columns": cols}),
        );
    }
    Ok(())
}

/// Top-level shape of a schema: property → type or referenced schema, and `required`.
fn shape(schema: &Value) -> Value {
    let props: Map<String, Value> = schema["properties"]
        .as_object()
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let r = v["$ref"]
                        .as_str()
                        .or_else(|| v["allOf"][0]["$ref"].as_str())
                        .map(|s| s.rsplit('/').next().unwrap_or(s).to_string());
                    let t = r.map(Value::from).unwrap_or_else(|| v["type"].clone());
                    (k.clone(), t)
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"properties": props, "required": sorted_strings(&schema["required"])})
}

/// The schema with `x-kubernetes-group-version-kind` = (g, v, k).
fn schema_for<'a>(schemas: &'a Value, g: &str, v: &str, k: &str) -> Option<&'a Value> {
    schemas.as_object()?.values().find(|s| {
        s["x-kubernetes-group-version-kind"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["group"] == g && x["version"] == v && x["kind"] == k)
    })
}

pub async fn openapi(r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    let kinds: BTreeSet<(String, String, String)> = ctx
        .plan
        .resources
        .iter()
        .filter(|x| !x.name.contains('/'))
        .map(|x| (x.group.clone(), x.version.clone(), x.kind.clone()))
        .collect();
    let v2 = r.send(Req::get("/openapi/v2")).await?;
    r.record(
        "openapi/v2",
        json!({"code": v2.code, "contentType": v2.content_type}),
    );
    let v2 = v2.json();
    for (g, v, k) in &kinds {
        let s = schema_for(&v2["definitions"], g, v, k).map(shape);
        r.record(&format!("openapi/v2/{}/{k}", gv_path(g, v)), json!(s));
    }
    let index = r.send(Req::get("/openapi/v3")).await?;
    let ij = index.json();
    let paths: Vec<String> = ij["paths"]
        .as_object()
        .map(|p| {
            p.keys()
                .filter(|k| {
                    k.starts_with("api/")
                        || k.strip_prefix("apis/")
                            .is_some_and(|g| builtin_group(g.split('/').next().unwrap_or_default()))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut sorted = paths.clone();
    sorted.sort();
    r.record("openapi/v3", json!({"code": index.code, "paths": sorted}));
    for (g, v) in &ctx.plan.gvs {
        let path = gv_path(g, v);
        let doc = r.send(Req::get(format!("/openapi/v3/{path}"))).await?;
        let j = doc.json();
        r.record(&format!("openapi/v3/{path}"), json!({"code": doc.code}));
        for (_, _, k) in kinds.iter().filter(|(kg, kv, _)| kg == g && kv == v) {
            let s = schema_for(&j["components"]["schemas"], g, v, k).map(shape);
            r.record(&format!("openapi/v3/{path}/{k}"), json!(s));
        }
    }
    Ok(())
}
