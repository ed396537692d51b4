//! OpenAPI documents for every served kind: `/openapi/v2` (Swagger 2.0) and
//! `/openapi/v3` (the root index) with one document per group version.
//!
//! kubectl relies on them: `explain` reads the v3 document of a group version
//! and finds a kind by its `x-kubernetes-group-version-kind`; validation looks
//! for a `fieldValidation` parameter on the kind's PATCH operation (and falls
//! back to v2 schemas when the group version is not served); client-side
//! apply builds strategic merge patches from the `x-kubernetes-patch-*`
//! hints when the PATCH operation accepts `strategic-merge-patch+json`.
//!
//! Built-in schemas come from k8s-openapi's `JsonSchema` impls (the same
//! definition names as kube-apiserver's), completed with the group-version-kind
//! tags and the patch hints k8s-openapi does not carry (`patch_hints.txt`,
//! generated from the k8s.io/api struct tags by `tools/patch_hints.py`). CRD
//! schemas are their `openAPIV3Schema` with `apiVersion`, `kind` and
//! `metadata` added, as kube-apiserver publishes them.

mod paths;
mod v2;
mod v2_proto;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::errors::ApiError;
use crate::resources::{Registry, ResourceDef};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub use v2::v2;

/// Reference prefixes: definitions are built with v2 references and
/// rewritten for v3.
const V2_REF: &str = "#/definitions/";
const V3_REF: &str = "#/components/schemas/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Schemas of the built-in kinds and everything they reference, generated
/// once (the catalog is fixed at compile time).
struct Builtins {
    definitions: Map<String, Value>,
    /// (group, version, kind) → definition name.
    kinds: BTreeMap<(String, String, String), String>,
}

fn builtins() -> &'static Builtins {
    static BUILTINS: OnceLock<Builtins> = OnceLock::new();
    BUILTINS.get_or_init(|| {
        let mut generator = schemars::generate::SchemaSettings::draft07()
            .with(|s| {
                s.meta_schema = None;
                // Keep `$ref` siblings (descriptions): v2 allows them, and
                // the v3 rendering wraps them in `allOf` as kube-apiserver does.
                s.transforms.clear();
            })
            .into_generator();
        let mut kinds = BTreeMap::new();
        for def in crate::catalog::builtins() {
            for (version, schema) in &def.type_schemas {
                let r = schema(&mut generator);
                if let Some(name) = r
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|s| s.strip_prefix(V2_REF))
                {
                    kinds.insert(
                        (def.group.clone(), version.clone(), def.kind.clone()),
                        name.to_string(),
                    );
                }
            }
        }
        // Scale is not a stored kind but the body of every `/scale` subresource.
        generator.subschema_for::<k8s_openapi::api::autoscaling::v1::Scale>();
        kinds.insert(
            ("autoscaling".into(), "v1".into(), "Scale".into()),
            paths::SCALE.to_string(),
        );
        let mut definitions = generator.take_definitions(false);
        for ((group, version, kind), name) in &kinds {
            if let Some(d) = definitions.get_mut(name).and_then(Value::as_object_mut) {
                d.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": group, "kind": kind, "version": version}]),
                );
                unrequire_top_level(d);
            }
        }
        for (name, required) in REQUIRED_AS_PUBLISHED {
            if let Some(d) = definitions.get_mut(*name).and_then(Value::as_object_mut) {
                if required.is_empty() {
                    d.remove("required");
                } else {
                    d.insert("required".into(), json!(required));
                }
            }
        }
        add_patch_hints(&mut definitions);
        Builtins { definitions, kinds }
    })
}

/// k8s-openapi marks every non-`Option` Rust field required, including the
/// `metadata` of top-level kinds, which kube-apiserver's schemas leave
/// optional (its `required: [spec]` lists agree with k8s-openapi's).
fn unrequire_top_level(d: &mut Map<String, Value>) {
    let Some(req) = d.get_mut("required").and_then(Value::as_array_mut) else {
        return;
    };
    req.retain(|f| f.as_str() != Some("metadata"));
    if req.is_empty() {
        d.remove("required");
    }
}

/// Where k8s-openapi's `required` differs from what kube-apiserver v1.37.2
/// publishes (found by comparing both `/openapi/v2` documents): the real
/// server's lists.
const REQUIRED_AS_PUBLISHED: &[(&str, &[&str])] = &[
    ("io.k8s.api.core.v1.ConfigMapEnvSource", &[]),
    ("io.k8s.api.core.v1.ConfigMapKeySelector", &["key"]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &[]),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", &[]),
    ("io.k8s.api.core.v1.Event", &["metadata", "involvedObject"]),
    ("io.k8s.api.core.v1.LocalObjectReference", &[]),
    ("io.k8s.api.core.v1.SecretEnvSource", &[]),
    ("io.k8s.api.core.v1.SecretKeySelector", &["key"]),
    ("io.k8s.api.core.v1.SecretProjection", &[]),
    ("io.k8s.api.events.v1.Event", &["eventTime"]),
];

fn add_patch_hints(definitions: &mut Map<String, Value>) {
    for line in include_str!("patch_hints.txt").lines() {
        if line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(def), Some(field), Some(strategy)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Some(prop) = definitions
            .get_mut(def)
            .and_then(|d| d.pointer_mut(&format!("/properties/{field}")))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        prop.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if let Some(key) = parts.next() {
            prop.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
}

/// Definition name of a CRD version, as kube-apiserver names it
/// (`example.com`, `v1`, `Widget` → `com.example.v1.Widget`).
fn crd_definition_name(def: &ResourceDef, version: &str) -> String {
    let group: Vec<&str> = def.group.split('.').rev().collect();
    format!("{}.{version}.{}", group.join("."), def.kind)
}

/// The published schema of a CRD version (v2 references).
fn crd_schema(def: &ResourceDef, version: &str) -> Value {
    let mut schema =
        def.schemas.get(version).cloned().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
    if let Some(m) = schema.as_object_mut() {
        let props = m
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(props) = props {
            props.insert("apiVersion".into(), json!({"type": "string",
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
            props.insert("kind".into(), json!({"type": "string",
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
            props.insert("metadata".into(), json!({"$ref": format!("{V2_REF}{OBJECT_META}"),
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": def.group, "kind": def.kind, "version": version}]),
        );
    }
    schema
}

/// The definition name of `def` at `version`, registering CRD schemas in `extra`.
fn definition_of(
    def: &ResourceDef,
    version: &str,
    extra: &mut Map<String, Value>,
) -> Option<String> {
    if def.custom {
        let name = crd_definition_name(def, version);
        extra.insert(name.clone(), crd_schema(def, version));
        return Some(name);
    }
    builtins()
        .kinds
        .get(&(def.group.clone(), version.to_string(), def.kind.clone()))
        .cloned()
}

/// Every definition name reachable from `roots` through `$ref`s.
fn closure<'v>(roots: &[String], lookup: &dyn Fn(&str) -> Option<&'v Value>) -> BTreeSet<String> {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str)
                    && let Some(n) = r.strip_prefix(V2_REF)
                {
                    out.push(n.to_string());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = roots.to_vec();
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(s) = lookup(&n) {
            refs(s, &mut todo);
        }
    }
    seen
}

/// Rebuild a schema bottom-up: `f` sees each (sub)schema object after its
/// subschemas were rebuilt. Values that are data, not schemas (`default`,
/// `example`, `enum`, extensions), are left alone.
fn map_schemas(v: &Value, f: &dyn Fn(Map<String, Value>) -> Map<String, Value>) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, x) in m {
        let x = match k.as_str() {
            "properties" | "patternProperties" | "definitions" => match x {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(n, s)| (n.clone(), map_schemas(s, f)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" | "allOf" | "anyOf" | "oneOf" => match x {
                Value::Array(a) => Value::Array(a.iter().map(|s| map_schemas(s, f)).collect()),
                Value::Object(_) => map_schemas(x, f),
                other => other.clone(),
            },
            _ => x.clone(),
        };
        out.insert(k.clone(), x);
    }
    Value::Object(f(out))
}

/// A schema with v2 references rendered for v3: references point into
/// `components/schemas`, and a reference with siblings (a description, a
/// default) is wrapped in `allOf`, as kube-apiserver's v3 documents do.
fn to_v3(v: &Value) -> Value {
    map_schemas(v, &|mut m| {
        if let Some(r) = m.remove("$ref") {
            let r = json!(r.as_str().unwrap_or("").replacen(V2_REF, V3_REF, 1));
            if m.is_empty() {
                m.insert("$ref".into(), r);
            } else {
                m.insert("allOf".into(), json!([{"$ref": r}]));
            }
        }
        m
    })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The OpenAPI v3 document of one group version.
pub fn v3_gv(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = crate::discovery::served(reg, group, version)?;
    let mut extra = Map::new();
    let mut roots = Vec::new();
    let mut paths = Map::new();
    for d in &defs {
        let Some(name) = definition_of(d, version, &mut extra) else {
            continue;
        };
        for (p, item) in paths::items(d, version, &name, paths::Flavor::V3) {
            paths.insert(p, item);
        }
        roots.push(name);
        if d.scale.is_some() {
            roots.push(paths::SCALE.to_string());
        }
    }
    let b = builtins();
    let lookup = |n: &str| extra.get(n).or_else(|| b.definitions.get(n));
    let mut schemas = Map::new();
    for n in closure(&roots, &lookup) {
        if let Some(s) = lookup(&n) {
            schemas.insert(n, to_v3(s));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::version::KUBERNETES_VERSION},
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
pub fn v3_root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, versions) in reg.groups() {
        for v in versions {
            let Some(doc) = v3_gv(reg, &g, &v) else {
                continue;
            };
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={}", hash(&doc));
            paths.insert(p, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// Every served (resource, version) pair with its definition name, and the
/// CRD definitions they need, for the v2 document.
/// A served resource, one of its versions and its definition name.
type Served = (Arc<ResourceDef>, String, String);

fn all_kinds(reg: &Registry) -> (Vec<Served>, Map<String, Value>) {
    let mut extra = Map::new();
    let mut out = Vec::new();
    for d in reg.all() {
        for v in &d.versions {
            if let Some(name) = definition_of(&d, v, &mut extra) {
                out.push((d.clone(), v.clone(), name));
            }
        }
    }
    (out, extra)
}

/// The media type of protobuf OpenAPI v2 (what client-go asks for).
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// What kube-apiserver answers it with (Go's `mime` cannot parse the `@`).
const V2_PROTOBUF_RESPONSE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn json_ok(doc: &Value) -> Response {
    crate::handlers::json_response(StatusCode::OK, doc)
}

/// Serve `/openapi/v2`, `/openapi/v3` and `/openapi/v3/{group-version}`;
/// None for any other path.
pub fn route(reg: &Registry, path: &str, headers: &HeaderMap) -> Option<Response> {
    let p = path.trim_end_matches('/');
    if p == "/openapi/v2" {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let types: Vec<&str> = accept
            .split(',')
            .filter_map(|t| t.split(';').next().map(str::trim))
            .collect();
        if types.contains(&V2_PROTOBUF) {
            let mut r = (StatusCode::OK, v2_proto::encode(&v2(reg))).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(V2_PROTOBUF_RESPONSE),
            );
            return Some(r);
        }
        if accept.is_empty()
            || types
                .iter()
                .any(|t| matches!(*t, "application/json" | "*/*" | "application/*"))
        {
            return Some(json_ok(&v2(reg)));
        }
        return Some(
            ApiError::new(
                406,
                "NotAcceptable",
                format!(
                    "only the following media types are accepted: application/json, {V2_PROTOBUF}"
                ),
            )
            .into_response(),
        );
    }
    if p == "/openapi/v3" {
        return Some(json_ok(&v3_root(reg)));
    }
    let rest = p.strip_prefix("/openapi/v3/")?;
    let segs: Vec<&str> = rest.split('/').collect();
    let doc = match segs.as_slice() {
        ["api", v] => v3_gv(reg, "", v),
        ["apis", g, v] => v3_gv(reg, g, v),
        _ => None,
    };
    Some(match doc {
        Some(d) => json_ok(&d),
        None => ApiError::no_route().into_response(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_kind_has_a_tagged_schema() {
        let b = builtins();
        for d in crate::catalog::builtins() {
            for v in &d.versions {
                let name = b
                    .kinds
                    .get(&(d.group.clone(), v.clone(), d.kind.clone()))
                    .unwrap_or_else(|| panic!("no schema for {} {v}", d.key()));
                let gvk = &b.definitions[name]["x-kubernetes-group-version-kind"][0];
                assert_eq!(gvk["kind"], json!(d.kind));
            }
        }
    }

    #[test]
    fn patch_hints_reach_pod_spec_and_object_meta() {
        let b = builtins();
        let containers = &b.definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let owners = &b.definitions[OBJECT_META]["properties"]["ownerReferences"];
        assert_eq!(owners["x-kubernetes-patch-merge-key"], "uid");
    }

    #[test]
    fn v3_wraps_described_refs_in_all_of() {
        let v = to_v3(
            &json!({"properties": {"metadata": {"$ref": "#/definitions/X", "description": "d"},
            "plain": {"$ref": "#/definitions/Y"}}}),
        );
        assert_eq!(
            v["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/X"
        );
        assert_eq!(v["properties"]["metadata"]["description"], "d");
        assert_eq!(v["properties"]["plain"]["$ref"], "#/components/schemas/Y");
    }

    #[test]
    fn group_version_document_holds_the_closure_of_its_kinds() {
        let reg = Registry::default();
        let doc = v3_gv(&reg, "apps", "v1").unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
        assert!(schemas.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert!(schemas.contains_key(OBJECT_META));
        assert!(!schemas.contains_key("io.k8s.api.batch.v1.Job"));
        let p = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            p["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["name"] == "fieldValidation")
        );
        let root = v3_root(&reg);
        assert!(
            root["paths"]["apis/apps/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/apis/apps/v1?hash=")
        );
    }
}
