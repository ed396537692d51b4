//! The `paths` of OpenAPI documents: the operations of each served resource
//! (collection, item, `/status`, `/scale`), tagged with the group-version-kind
//! kubectl looks for and listing the query parameters and body media types
//! this server accepts.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;

use super::{V2_REF, V3_REF};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Flavor {
    V2,
    V3,
}

/// The definition name of `autoscaling/v1` Scale.
pub const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

const JSON_TYPES: [&str; 2] = ["application/json", "application/yaml"];

fn op_id(action: &str, def: &ResourceDef, version: &str, namespaced: bool, suffix: &str) -> String {
    let cap = |s: &str| {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    let group = if def.group.is_empty() {
        "Core".to_string()
    } else {
        def.group
            .trim_end_matches(".k8s.io")
            .split('.')
            .map(cap)
            .collect()
    };
    let ns = if namespaced { "Namespaced" } else { "" };
    format!("{action}{group}{}{ns}{}{suffix}", cap(version), def.kind)
}

fn param(flavor: Flavor, name: &str, location: &str, required: bool) -> Value {
    let mut p = json!({"name": name, "in": location, "uniqueItems": true});
    if required {
        p["required"] = json!(true);
    }
    match flavor {
        Flavor::V2 => p["type"] = json!("string"),
        Flavor::V3 => {
            let u = p.as_object_mut().and_then(|m| m.remove("uniqueItems"));
            p["schema"] = json!({"type": "string", "uniqueItems": u.is_some()});
        }
    }
    p
}

fn schema_ref(flavor: Flavor, name: &str) -> Value {
    match flavor {
        Flavor::V2 => json!({"$ref": format!("{V2_REF}{name}")}),
        Flavor::V3 => json!({"$ref": format!("{V3_REF}{name}")}),
    }
}

struct Op<'a> {
    action: &'static str,
    id: String,
    gvk: Value,
    query: &'a [&'a str],
    /// Request body media types and schema (create, update, patch).
    body: Option<(Vec<&'static str>, Value)>,
    response: Value,
}

fn render(flavor: Flavor, op: Op<'_>) -> Value {
    let mut params: Vec<Value> = op
        .query
        .iter()
        .map(|q| param(flavor, q, "query", false))
        .collect();
    let mut out = json!({
        "operationId": op.id,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
    });
    match flavor {
        Flavor::V2 => {
            out["produces"] = json!(JSON_TYPES);
            out["schemes"] = json!(["https"]);
            if let Some((types, schema)) = op.body {
                out["consumes"] = json!(types);
                params.insert(
                    0,
                    json!({"name": "body", "in": "body", "required": true, "schema": schema}),
                );
            } else {
                out["consumes"] = json!(["*/*"]);
            }
            out["responses"] = json!({"200": {"description": "OK", "schema": op.response},
                "401": {"description": "Unauthorized"}});
        }
        Flavor::V3 => {
            if let Some((types, schema)) = op.body {
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| (t.to_string(), json!({"schema": schema})))
                    .collect();
                out["requestBody"] = json!({"content": content, "required": true});
            }
            let content: Map<String, Value> = JSON_TYPES
                .iter()
                .map(|t| (t.to_string(), json!({"schema": op.response})))
                .collect();
            out["responses"] = json!({"200": {"description": "OK", "content": content},
                "401": {"description": "Unauthorized"}});
        }
    }
    out["parameters"] = Value::Array(params);
    out
}

/// The path items of one resource at one version; `definition` is the
/// name of its kind's schema.
pub fn items(
    def: &ResourceDef,
    version: &str,
    definition: &str,
    flavor: Flavor,
) -> Vec<(String, Value)> {
    let prefix = if def.group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{}/{version}", def.group)
    };
    let (base, ns) = if def.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}", def.resource),
            true,
        )
    } else {
        (format!("{prefix}/{}", def.resource), false)
    };
    let gvk = json!({"group": def.group, "version": version, "kind": def.kind});
    let kind_ref = schema_ref(flavor, definition);
    let object = json!({"type": "object"});
    let mut patch_types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if !def.custom {
        patch_types.push("application/strategic-merge-patch+json");
    }
    patch_types.push("application/apply-patch+yaml");
    let write_q: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
    let patch_q: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
    let list_q: &[&str] = &[
        "allowWatchBookmarks",
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    ];
    let can = |v: &'static str| def.verbs.contains(&v);
    let op = |action: &'static str,
              verb: &str,
              suffix: &str,
              query,
              body,
              response: &Value,
              gvk: &Value| Op {
        action,
        id: op_id(verb, def, version, ns, suffix),
        gvk: gvk.clone(),
        query,
        body,
        response: response.clone(),
    };
    let path_params = |with_name: bool| {
        let mut p = Vec::new();
        if with_name {
            p.push(param(flavor, "name", "path", true));
        }
        if ns {
            p.push(param(flavor, "namespace", "path", true));
        }
        Value::Array(p)
    };
    let mut out = Vec::new();

    let mut collection = Map::new();
    collection.insert("parameters".into(), path_params(false));
    collection.insert(
        "get".into(),
        render(flavor, op("list", "list", "", list_q, None, &object, &gvk)),
    );
    if can("create") {
        collection.insert(
            "post".into(),
            render(
                flavor,
                op(
                    "post",
                    "create",
                    "",
                    write_q,
                    Some((JSON_TYPES.to_vec(), kind_ref.clone())),
                    &kind_ref,
                    &gvk,
                ),
            ),
        );
    }
    if can("deletecollection") {
        collection.insert(
            "delete".into(),
            render(
                flavor,
                op(
                    "deletecollection",
                    "deleteCollection",
                    "",
                    &["dryRun"],
                    None,
                    &object,
                    &gvk,
                ),
            ),
        );
    }
    out.push((base.clone(), Value::Object(collection)));

    let mut item = Map::new();
    item.insert("parameters".into(), path_params(true));
    item.insert(
        "get".into(),
        render(flavor, op("get", "read", "", &[], None, &kind_ref, &gvk)),
    );
    if can("update") {
        item.insert(
            "put".into(),
            render(
                flavor,
                op(
                    "put",
                    "replace",
                    "",
                    write_q,
                    Some((JSON_TYPES.to_vec(), kind_ref.clone())),
                    &kind_ref,
                    &gvk,
                ),
            ),
        );
        item.insert(
            "patch".into(),
            render(
                flavor,
                op(
                    "patch",
                    "patch",
                    "",
                    patch_q,
                    Some((patch_types.clone(), object.clone())),
                    &kind_ref,
                    &gvk,
                ),
            ),
        );
    }
    if can("delete") {
        item.insert(
            "delete".into(),
            render(
                flavor,
                op(
                    "delete",
                    "delete",
                    "",
                    &["dryRun", "propagationPolicy"],
                    None,
                    &object,
                    &gvk,
                ),
            ),
        );
    }
    out.push((format!("{base}/{{name}}"), Value::Object(item)));

    let mut subresource = |name: &str, suffix: &str, schema: &Value, gvk: &Value| {
        let mut sub = Map::new();
        sub.insert("parameters".into(), path_params(true));
        sub.insert(
            "get".into(),
            render(flavor, op("get", "read", suffix, &[], None, schema, gvk)),
        );
        sub.insert(
            "put".into(),
            render(
                flavor,
                op(
                    "put",
                    "replace",
                    suffix,
                    write_q,
                    Some((JSON_TYPES.to_vec(), schema.clone())),
                    schema,
                    gvk,
                ),
            ),
        );
        sub.insert(
            "patch".into(),
            render(
                flavor,
                op(
                    "patch",
                    "patch",
                    suffix,
                    patch_q,
                    Some((patch_types.clone(), object.clone())),
                    schema,
                    gvk,
                ),
            ),
        );
        out.push((format!("{base}/{{name}}/{name}"), Value::Object(sub)));
    };
    if def.status_subresource {
        subresource("status", "Status", &kind_ref, &gvk);
    }
    if def.scale.is_some() {
        let scale_gvk = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
        subresource("scale", "Scale", &schema_ref(flavor, SCALE), &scale_gvk);
    }
    out
}
