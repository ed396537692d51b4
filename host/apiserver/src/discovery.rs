//! Discovery documents (`/version`, `/api`, `/apis`, group and
//! group-version resource lists) and the minimal OpenAPI v3 documents kubectl
//! needs: its validation checks each PATCH operation for a `fieldValidation`
//! parameter (`x-kubernetes-group-version-kind` tags the operation), and
//! client-side apply looks schemas up in `components.schemas`.

use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::resources::{Registry, ResourceDef};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-wasm-reconciler",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn api_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(json!({})),
    })
}

pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_doc(&g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| g == group)?;
    let mut doc = group_doc(&g, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entries(d: &ResourceDef) -> Vec<Value> {
    let mut main = json!({
        "name": d.resource,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": VERBS,
    });
    if !d.short_names.is_empty() {
        main["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        main["categories"] = json!(d.categories);
    }
    let mut out = vec![main];
    if d.status_subresource {
        out.push(
            json!({"name": format!("{}/status", d.resource), "singularName": "",
            "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}),
        );
    }
    for sub in &d.extra_subresources {
        out.push(
            json!({"name": format!("{}/{sub}", d.resource), "singularName": "",
            "namespaced": d.namespaced, "kind": d.kind, "verbs": ["update"]}),
        );
    }
    out
}

/// The resources served at one group version, or None when there are none.
fn served(reg: &Registry, group: &str, version: &str) -> Option<Vec<Arc<ResourceDef>>> {
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| d.group == group && d.serves(version))
        .collect();
    (!defs.is_empty()).then_some(defs)
}

/// `APIResourceList` of one group version, or None when nothing is served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = served(reg, group, version)?;
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = defs.iter().flat_map(|d| resource_entries(d)).collect();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// The OpenAPI v3 document of one group version.
pub fn openapi_gv(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = served(reg, group, version)?;
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for d in defs {
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", d.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "responses": {"200": {"description": "OK"}}
            })
        };
        let base = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.resource)
        } else {
            format!("{prefix}/{}", d.resource)
        };
        paths.insert(base.clone(), json!({"get": op("list"), "post": op("post")}));
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
        if d.status_subresource {
            paths.insert(
                format!("{base}/{{name}}/status"),
                json!({"get": op("get"), "put": op("put"), "patch": op("patch")}),
            );
        }
        if d.custom {
            // CRD schemas let kubectl explain/apply see the structure.
            let mut schema = d.schemas.get(version).cloned().unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            let sname = format!(
                "{}.{}.{}",
                d.group.split('.').rev().collect::<Vec<_>>().join("."),
                version,
                d.kind
            );
            schemas.insert(sname, schema);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// Content hash used in `serverRelativeURL` (kubectl caches documents by it).
pub fn hash(doc: &Value) -> String {
    let bytes = serde_json::to_vec(doc).unwrap_or_default();
    hex::encode(&Sha256::digest(&bytes)[..16]).to_uppercase()
}

/// `/openapi/v3`: every group version with its document hash.
pub fn openapi_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, versions) in reg.groups() {
        for v in versions {
            let Some(doc) = openapi_gv(reg, &g, &v) else {
                continue;
            };
            let p = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            let url = format!("/openapi/v3/{p}?hash={}", hash(&doc));
            paths.insert(p, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_discovery_lists_status_subresources_and_short_names() {
        let reg = Registry::default();
        let v1 = resource_list(&reg, "", "v1").unwrap();
        let names: Vec<&str> = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"configmaps"));
        assert!(names.contains(&"namespaces/status"));
        assert!(resource_list(&reg, "apps", "v2").is_none());
    }

    #[test]
    fn openapi_patch_operations_accept_field_validation() {
        let reg = Registry::default();
        let doc = openapi_gv(&reg, "apps", "v1").unwrap();
        let p = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            p["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["name"] == "fieldValidation")
        );
        let root = openapi_root(&reg);
        assert!(
            root["paths"]["apis/apps/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/apis/apps/v1?hash=")
        );
    }
}
