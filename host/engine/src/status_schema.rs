//! What the API server keeps of a parent's status.
//!
//! A CRD's structural schema prunes every field it does not declare (unless
//! `x-kubernetes-preserve-unknown-fields` or `additionalProperties` keeps it).
//! Many existing CRDs declare a status without `conditions` or
//! `observedGeneration`, so the host's `Ready` condition would vanish without
//! a word and every pass would write a status the server never stores. This
//! module reads the parent CRD's schema once per controller start and
//!
//! - names the host-owned status fields the schema prunes
//!   ([`StatusSchema::pruned_host_fields`]), reported on the WasmController
//!   (condition `ParentStatusSchema` and a Warning event);
//! - computes what the server would store of a status
//!   ([`StatusSchema::stored`]), so the reconcile path and `plan` compare
//!   against that and do not write (or report a write of) what would be
//!   dropped anyway.
//!
//! Pruning is hand-written: no Rust crate implements Kubernetes' structural
//! pruning (`k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning`).
//! It follows the same rules for what matters to a status: `properties`
//! recurse, `additionalProperties` (a schema or `true`) keeps map entries,
//! `x-kubernetes-preserve-unknown-fields: true` keeps undeclared fields,
//! `items` recurse into arrays, `x-kubernetes-embedded-resource` keeps
//! `apiVersion`, `kind` and `metadata`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource};
use serde_json::{Map, Value, json};

use crate::errors::{ApiErrorClass, classify};

/// The status schema of one parent kind (the CRD's served version).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSchema {
    /// Name of the CRD, e.g. `widgets.example.com`.
    pub crd: String,
    /// Its `openAPIV3Schema` for the parent's version.
    root: Value,
}

/// The result of looking at a parent kind's schema at controller start.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaCheck {
    /// A built-in kind: not checked.
    BuiltIn,
    /// The CRD's schema (which may prune host fields).
    Read(StatusSchema),
    /// The CRD could not be read (e.g. 403 without the `get` the RBAC grants).
    Unreadable(String),
}

impl SchemaCheck {
    /// The schema when it was read.
    pub fn schema(&self) -> Option<&StatusSchema> {
        match self {
            SchemaCheck::Read(s) => Some(s),
            _ => None,
        }
    }
}

impl StatusSchema {
    /// A schema from a CRD's `openAPIV3Schema` (tests, `plan`).
    pub fn new(crd: &str, root: Value) -> Self {
        Self {
            crd: crd.to_string(),
            root,
        }
    }

    /// What the server would store when sent `status`: `None` when the schema
    /// drops the whole status.
    pub fn stored(&self, status: &Value) -> Option<Value> {
        let obj = json!({ "status": status });
        match prune(&self.root, &obj) {
            Value::Object(mut m) => m.remove("status"),
            _ => None,
        }
    }

    /// The host-owned status fields the schema prunes, as paths
    /// (`status.conditions`, `status.conditions[].observedGeneration`, …);
    /// empty when the host's status survives whole.
    pub fn pruned_host_fields(&self) -> Vec<String> {
        let probe = json!({
            "observedGeneration": 1,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Reconciled", "message": "m",
                "lastTransitionTime": "2000-01-01T00:00:00Z", "observedGeneration": 1
            }]
        });
        match self.stored(&probe) {
            None => vec!["status".to_string()],
            Some(kept) => {
                let mut out = Vec::new();
                missing(&probe, &kept, "status", &mut out);
                out.sort();
                out
            }
        }
    }
}

/// Paths present in `sent` and absent from `kept`.
fn missing(sent: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, v) in s {
                let p = format!("{path}.{key}");
                match k.get(key) {
                    Some(kv) => missing(v, kv, &p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            if let (Some(s0), Some(k0)) = (s.first(), k.first()) {
                missing(s0, k0, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

/// `value` as the server would store it under `schema` (structural pruning).
pub fn prune(schema: &Value, value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let keep_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let embedded = flag(schema, "x-kubernetes-embedded-resource");
            let mut out = Map::new();
            for (k, v) in m {
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    out.insert(k.clone(), prune(s, v));
                } else if let Some(s @ Value::Object(_)) = additional {
                    out.insert(k.clone(), prune(s, v));
                } else if additional == Some(&Value::Bool(true))
                    || keep_unknown
                    || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                {
                    out.insert(k.clone(), v.clone());
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => match schema.get("items") {
            Some(s @ Value::Object(_)) => Value::Array(items.iter().map(|i| prune(s, i)).collect()),
            _ => value.clone(),
        },
        _ => value.clone(),
    }
}

/// Reads the status schema of the parent kind `ar` from its CRD. Built-in
/// kinds (group without a dot) are not checked.
pub async fn read(client: &kube::Client, ar: &ApiResource) -> SchemaCheck {
    if !ar.group.contains('.') {
        return SchemaCheck::BuiltIn;
    }
    let name = format!("{}.{}", ar.plural, ar.group);
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = match api.get(&name).await {
        Ok(c) => c,
        Err(e) => {
            let why = match classify(&e) {
                ApiErrorClass::NotFound => format!("CRD {name} not found"),
                _ => format!("reading CRD {name}: {e}"),
            };
            return SchemaCheck::Unreadable(why);
        }
    };
    let schema = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == ar.version)
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok());
    match schema {
        Some(root) => SchemaCheck::Read(StatusSchema::new(&name, root)),
        None => SchemaCheck::Unreadable(format!(
            "CRD {name} has no schema for version {}",
            ar.version
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd_root(status: Value) -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": status
        }})
    }

    #[test]
    fn a_status_that_preserves_unknown_fields_keeps_everything() {
        let s = StatusSchema::new(
            "w.x.dev",
            crd_root(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
        );
        assert!(s.pruned_host_fields().is_empty());
        let v = json!({"phase": "Up", "conditions": [{"type": "Ready"}]});
        assert_eq!(s.stored(&v), Some(v));
    }

    #[test]
    fn a_status_with_only_its_own_fields_prunes_the_host_fields() {
        let s = StatusSchema::new(
            "w.x.dev",
            crd_root(json!({"type": "object", "properties": {"phase": {"type": "string"}}})),
        );
        assert_eq!(
            s.pruned_host_fields(),
            ["status.conditions", "status.observedGeneration"]
        );
        let v = json!({"phase": "Up", "observedGeneration": 2, "conditions": []});
        assert_eq!(s.stored(&v), Some(json!({"phase": "Up"})));
    }

    #[test]
    fn condition_fields_missing_from_the_item_schema_are_named() {
        let s = StatusSchema::new(
            "w.x.dev",
            crd_root(json!({"type": "object", "properties": {
                "observedGeneration": {"type": "integer"},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"},
                    "reason": {"type": "string"}, "message": {"type": "string"},
                    "lastTransitionTime": {"type": "string"}
                }}}
            }})),
        );
        assert_eq!(
            s.pruned_host_fields(),
            ["status.conditions[].observedGeneration"]
        );
    }

    #[test]
    fn no_status_in_the_schema_drops_the_whole_status() {
        let s = StatusSchema::new(
            "w.x.dev",
            json!({"type": "object", "properties": {"spec": {"type": "object"}}}),
        );
        assert_eq!(s.pruned_host_fields(), ["status"]);
        assert_eq!(s.stored(&json!({"phase": "Up"})), None);
    }

    #[test]
    fn maps_and_embedded_resources_keep_their_entries() {
        let schema = json!({"type": "object", "properties": {
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "any": {"type": "object", "additionalProperties": true},
            "ref": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "properties": {"spec": {"type": "object"}}}
        }});
        let v = json!({
            "counts": {"a": 1}, "any": {"b": {"c": 1}},
            "ref": {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": {}, "junk": 1},
            "gone": true
        });
        let mut want = v.clone();
        want["ref"].as_object_mut().unwrap().remove("junk");
        want.as_object_mut().unwrap().remove("gone");
        assert_eq!(prune(&schema, &v), want);
    }
}
