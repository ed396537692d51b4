//! `/openapi/v2`: one Swagger 2.0 document for everything served.

use serde_json::{Map, Value, json};

use super::paths::{self, Flavor};
use super::{builtins, closure, map_schemas};
use crate::resources::Registry;

/// Schema keywords Swagger 2.0 allows (gnostic, which kubectl parses the
/// document with, rejects any other key); extensions (`x-`) are kept.
const SWAGGER_SCHEMA_KEYS: [&str; 28] = [
    "$ref",
    "additionalProperties",
    "allOf",
    "default",
    "description",
    "discriminator",
    "enum",
    "example",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "externalDocs",
    "format",
    "items",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "pattern",
    "properties",
    "readOnly",
    "required",
    "title",
    "type",
];

/// A v3-style (CRD) schema reduced to what Swagger 2.0 can say, as
/// kube-apiserver publishes CRDs in v2 (`nullable`, `anyOf`, `oneOf`, `not`
/// dropped).
fn to_v2(v: &Value) -> Value {
    map_schemas(v, &|mut m| {
        m.retain(|k, _| k.starts_with("x-") || SWAGGER_SCHEMA_KEYS.contains(&k.as_str()));
        m
    })
}

/// The whole v2 document.
pub fn v2(reg: &Registry) -> Value {
    let (kinds, extra) = super::all_kinds(reg);
    let b = builtins();
    let mut paths = Map::new();
    for (d, version, name) in &kinds {
        for (p, item) in paths::items(d, version, name, Flavor::V2) {
            paths.insert(p, item);
        }
    }
    let mut definitions = b.definitions.clone();
    // CRDs reference built-in definitions (ObjectMeta) only.
    let roots: Vec<String> = extra.keys().cloned().collect();
    let lookup = |n: &str| extra.get(n).or_else(|| b.definitions.get(n));
    for n in closure(&roots, &lookup) {
        if let Some(s) = extra.get(&n) {
            definitions.insert(n, to_v2(s));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::version::KUBERNETES_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_schemas_lose_keywords_swagger_does_not_have() {
        let s = to_v2(
            &json!({"type": "object", "properties": {"a": {"type": "string",
            "nullable": true, "x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
        );
        assert_eq!(
            s,
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-int-or-string": true}}})
        );
    }

    #[test]
    fn document_tags_kinds_and_patch_media_types() {
        let reg = Registry::default();
        let doc = v2(&reg);
        assert_eq!(
            doc["definitions"]["io.k8s.api.batch.v1.Job"]["x-kubernetes-group-version-kind"][0]["kind"],
            "Job"
        );
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert!(
            patch["consumes"]
                .as_array()
                .unwrap()
                .contains(&json!("application/strategic-merge-patch+json"))
        );
        let meta = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"]["properties"]["metadata"];
        assert_eq!(
            meta["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
    }
}
