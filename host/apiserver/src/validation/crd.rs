//! Rules for CustomResourceDefinitions themselves (apiextensions'
//! `ValidateCustomResourceDefinition`, the common part): the group must be a
//! DNS subdomain with a dot, protected groups (`*.k8s.io`,
//! `*.kubernetes.io`) need the approval annotation, and every version's
//! schema must be structural (a `type` at the root and on every specified
//! field, `object` at the root).

use serde_json::Value;

use super::objectmeta::{dns1123_subdomain, invalid};
use crate::errors::Cause;

const APPROVAL: &str = "api-approved.kubernetes.io";

fn required(field: String, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field,
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
    }
}

fn is_protected(group: &str) -> bool {
    group == "k8s.io"
        || group == "kubernetes.io"
        || group.ends_with(".k8s.io")
        || group.ends_with(".kubernetes.io")
}

/// The causes of a 422 for a CRD object (empty when valid).
pub fn check(crd: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let group = crd.pointer("/spec/group").and_then(Value::as_str);
    match group {
        None | Some("") => out.push(required("spec.group".into(), "")),
        Some(g) => {
            let errs = dns1123_subdomain(g);
            if !errs.is_empty() {
                out.push(invalid("spec.group", g, &errs.join(",")));
            } else if !g.contains('.') {
                out.push(invalid(
                    "spec.group",
                    g,
                    "should be a domain with at least one dot",
                ));
            } else if is_protected(g)
                && crd
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(APPROVAL))
                    .is_none()
            {
                out.push(required(
                    format!("metadata.annotations[{APPROVAL}]"),
                    &format!(
                        "protected groups must have approval annotation \"{APPROVAL}\", see https://github.com/kubernetes/enhancements/pull/1111"
                    ),
                ));
            }
        }
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    // Identical schemas in every version are validated once, under the
    // internal version's `spec.validation` (as the real server reports them).
    let schemas: Vec<Option<&Value>> = versions
        .iter()
        .map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    let shared = schemas
        .first()
        .copied()
        .flatten()
        .filter(|first| schemas.iter().all(|s| s.is_some_and(|s| s == *first)));
    if let Some(s) = shared {
        structural(s, "spec.validation.openAPIV3Schema", true, &mut out);
        return out;
    }
    for (i, s) in schemas.iter().enumerate() {
        let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
        match s {
            None => out.push(required(at, "")),
            Some(s) => structural(s, &at, true, &mut out),
        }
    }
    out
}

/// `ValidateStructural`: every specified position has a `type` unless it is
/// int-or-string or preserves unknown fields; the root is an object.
fn structural(s: &Value, path: &str, root: bool, out: &mut Vec<Cause>) {
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    if root {
        if ty.is_empty() {
            out.push(required(
                format!("{path}.type"),
                "must not be empty at the root",
            ));
        } else if ty != "object" {
            out.push(invalid(
                &format!("{path}.type"),
                ty,
                "must be object at the root",
            ));
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            let at = format!("{path}.properties[{k}]");
            typed_position(
                sub,
                &at,
                "must not be empty for specified object fields",
                out,
            );
            structural(sub, &at, false, out);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        let at = format!("{path}.items");
        typed_position(
            items,
            &at,
            "must not be empty for specified array items",
            out,
        );
        structural(items, &at, false, out);
    }
    if let Some(add) = s.get("additionalProperties").filter(|a| a.is_object()) {
        let at = format!("{path}.additionalProperties");
        typed_position(
            add,
            &at,
            "must not be empty for specified object fields",
            out,
        );
        structural(add, &at, false, out);
    }
}

fn typed_position(s: &Value, path: &str, why: &str, out: &mut Vec<Cause>) {
    let flag = |k: &str| s.get(k).and_then(Value::as_bool) == Some(true);
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    if ty.is_empty()
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        out.push(required(format!("{path}.type"), why));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(group: &str, schema: Value) -> Value {
        json!({"metadata": {"name": format!("xs.{group}")}, "spec": {"group": group,
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn group_needs_a_dot_and_approval_when_protected() {
        let ok = json!({"type": "object"});
        assert!(check(&crd("example.com", ok.clone())).is_empty());
        let c = check(&crd("apps", ok.clone()));
        assert_eq!(c[0].field, "spec.group");
        assert!(
            c[0].message
                .ends_with("should be a domain with at least one dot")
        );
        let c = check(&crd("networking.k8s.io", ok));
        assert_eq!(
            c[0].field,
            "metadata.annotations[api-approved.kubernetes.io]"
        );
    }

    #[test]
    fn schemas_must_be_structural() {
        let c = check(&crd("example.com", json!({"properties": {"spec": {}}})));
        let fields: Vec<_> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "spec.validation.openAPIV3Schema.type",
                "spec.validation.openAPIV3Schema.properties[spec].type"
            ]
        );
    }
}
