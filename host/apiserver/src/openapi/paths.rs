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

/// Query parameters of create and update.
const WRITE_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
/// Query parameters of patch.
const PATCH_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
/// Query parameters of list (and watch).
const LIST_QUERY: &[&str] = &[
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
const DELETE_QUERY: &[&str] = &["dryRun", "propagationPolicy"];
const DELETE_COLLECTION_QUERY: &[&str] = &["dryRun"];

/// What every operation of one resource at one version shares.
struct Resource<'a> {
    def: &'a ResourceDef,
    version: &'a str,
    flavor: Flavor,
    /// The collection's path (`.../namespaces/{namespace}/RESOURCE`).
    base: String,
    gvk: Value,
    /// The kind's schema.
    kind_ref: Value,
    /// Media types a patch may use (no strategic merge for custom resources).
    patch_types: Vec<&'static str>,
}

impl<'a> Resource<'a> {
    fn new(def: &'a ResourceDef, version: &'a str, definition: &str, flavor: Flavor) -> Self {
        let prefix = if def.group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{}/{version}", def.group)
        };
        let base = if def.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", def.resource)
        } else {
            format!("{prefix}/{}", def.resource)
        };
        let mut patch_types = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
        ];
        if !def.custom {
            patch_types.push("application/strategic-merge-patch+json");
        }
        patch_types.push("application/apply-patch+yaml");
        Resource {
            def,
            version,
            flavor,
            base,
            gvk: json!({"group": def.group, "version": version, "kind": def.kind}),
            kind_ref: schema_ref(flavor, definition),
            patch_types,
        }
    }

    fn can(&self, verb: &str) -> bool {
        self.def.verbs.contains(&verb)
    }

    /// One operation, rendered. `verb` names it in the operation id, `suffix`
    /// is the subresource's part of that id.
    #[allow(clippy::too_many_arguments)]
    fn op(
        &self,
        action: &'static str,
        verb: &str,
        suffix: &str,
        query: &[&str],
        body: Option<(Vec<&'static str>, Value)>,
        response: &Value,
        gvk: &Value,
    ) -> Value {
        let op = Op {
            action,
            id: op_id(verb, self.def, self.version, self.def.namespaced, suffix),
            gvk: gvk.clone(),
            query,
            body,
            response: response.clone(),
        };
        render(self.flavor, op)
    }

    /// A JSON or YAML body of `schema` (create, replace).
    fn whole_body(schema: &Value) -> Option<(Vec<&'static str>, Value)> {
        Some((JSON_TYPES.to_vec(), schema.clone()))
    }

    /// A patch body.
    fn patch_body(&self) -> Option<(Vec<&'static str>, Value)> {
        Some((self.patch_types.clone(), object()))
    }

    /// The `parameters` of a path: `name` (of an item) and `namespace`.
    fn path_params(&self, with_name: bool) -> Value {
        let mut p = Vec::new();
        if with_name {
            p.push(param(self.flavor, "name", "path", true));
        }
        if self.def.namespaced {
            p.push(param(self.flavor, "namespace", "path", true));
        }
        Value::Array(p)
    }

    /// The collection: list, create, deletecollection.
    fn collection(&self) -> (String, Value) {
        let (kind_ref, gvk) = (&self.kind_ref, &self.gvk);
        let mut m = Map::new();
        m.insert("parameters".into(), self.path_params(false));
        m.insert(
            "get".into(),
            self.op("list", "list", "", LIST_QUERY, None, &object(), gvk),
        );
        if self.can("create") {
            let body = Self::whole_body(kind_ref);
            m.insert(
                "post".into(),
                self.op("post", "create", "", WRITE_QUERY, body, kind_ref, gvk),
            );
        }
        if self.can("deletecollection") {
            m.insert(
                "delete".into(),
                self.op(
                    "deletecollection",
                    "deleteCollection",
                    "",
                    DELETE_COLLECTION_QUERY,
                    None,
                    &object(),
                    gvk,
                ),
            );
        }
        (self.base.clone(), Value::Object(m))
    }

    /// One object: read, replace, patch, delete.
    fn item(&self) -> (String, Value) {
        let (kind_ref, gvk) = (&self.kind_ref, &self.gvk);
        let mut m = Map::new();
        m.insert("parameters".into(), self.path_params(true));
        m.insert(
            "get".into(),
            self.op("get", "read", "", &[], None, kind_ref, gvk),
        );
        if self.can("update") {
            let body = Self::whole_body(kind_ref);
            m.insert(
                "put".into(),
                self.op("put", "replace", "", WRITE_QUERY, body, kind_ref, gvk),
            );
            m.insert(
                "patch".into(),
                self.op(
                    "patch",
                    "patch",
                    "",
                    PATCH_QUERY,
                    self.patch_body(),
                    kind_ref,
                    gvk,
                ),
            );
        }
        if self.can("delete") {
            m.insert(
                "delete".into(),
                self.op("delete", "delete", "", DELETE_QUERY, None, &object(), gvk),
            );
        }
        (format!("{}/{{name}}", self.base), Value::Object(m))
    }

    /// A subresource (`status`, `scale`) of `schema`: read, replace, patch.
    fn subresource(
        &self,
        name: &str,
        suffix: &str,
        schema: &Value,
        gvk: &Value,
    ) -> (String, Value) {
        let mut m = Map::new();
        m.insert("parameters".into(), self.path_params(true));
        m.insert(
            "get".into(),
            self.op("get", "read", suffix, &[], None, schema, gvk),
        );
        let body = Self::whole_body(schema);
        m.insert(
            "put".into(),
            self.op("put", "replace", suffix, WRITE_QUERY, body, schema, gvk),
        );
        m.insert(
            "patch".into(),
            self.op(
                "patch",
                "patch",
                suffix,
                PATCH_QUERY,
                self.patch_body(),
                schema,
                gvk,
            ),
        );
        (format!("{}/{{name}}/{name}", self.base), Value::Object(m))
    }
}

/// The schema of a body or response that is any object.
fn object() -> Value {
    json!({"type": "object"})
}

/// The path items of one resource at one version; `definition` is the
/// name of its kind's schema.
pub fn items(
    def: &ResourceDef,
    version: &str,
    definition: &str,
    flavor: Flavor,
) -> Vec<(String, Value)> {
    let r = Resource::new(def, version, definition, flavor);
    let mut out = vec![r.collection(), r.item()];
    if def.status_subresource {
        out.push(r.subresource("status", "Status", &r.kind_ref, &r.gvk));
    }
    if def.scale.is_some() {
        let scale_gvk = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
        out.push(r.subresource("scale", "Scale", &schema_ref(flavor, SCALE), &scale_gvk));
    }
    out
}
