//! CRD `openAPIV3Schema` pruning, defaulting and validation, as far as
//! controllers and kubectl exercise it: `default`, types, required, enum,
//! bounds, lengths, item counts, `nullable`, `x-kubernetes-int-or-string`,
//! `x-kubernetes-preserve-unknown-fields`, `additionalProperties`. Unknown
//! fields are pruned and their paths returned, so that `fieldValidation`
//! decides between silence, a warning and a 400. Hand-written: the structural-schema rules of
//! Kubernetes (pruning, int-or-string, preserve-unknown) are not what generic
//! JSON-schema crates implement.

use serde_json::{Map, Value};

use crate::errors::Cause;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

fn invalid(path: &str, v: &Value, msg: String) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: path.to_string(),
        message: format!("Invalid value: {}: {msg}", show(v)),
    }
}

/// A value of the wrong type: the value shown is its type's name.
fn type_invalid(path: &str, got: &str, msg: String) -> Cause {
    Cause {
        reason: "FieldValueTypeInvalid",
        field: path.to_string(),
        message: format!("Invalid value: \"{got}\": {msg}"),
    }
}

/// Prune unknown fields and apply `default:` values in place, the way
/// kube-apiserver decodes a custom resource: a `null` where the schema is not
/// `nullable` is dropped (or replaced by the default), unknown fields are
/// removed unless `x-kubernetes-preserve-unknown-fields` keeps them.
/// Returns the paths of the removed unknown fields (for `fieldValidation`).
pub fn prune_and_default(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    let Some(root) = obj.as_object_mut() else {
        return unknown;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    let preserve = preserves(schema);
    let keys: Vec<String> = root.keys().cloned().collect();
    for k in keys {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            // metadata is decoded as ObjectMeta by the server itself.
            continue;
        }
        match props.and_then(|p| p.get(&k)) {
            Some(sub) => {
                if let Some(v) = root.get_mut(&k) {
                    prune(v, sub, &k, &mut unknown, true);
                }
            }
            None if preserve => {}
            None => {
                root.remove(&k);
                unknown.push(k);
            }
        }
    }
    drop_nulls_and_default(root, schema);
    unknown
}

/// Non-nullable nulls go (or take the default); absent fields with a
/// default get it.
fn drop_nulls_and_default(map: &mut Map<String, Value>, schema: &Value) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, sub) in props {
        let nullable = sub.get("nullable").and_then(Value::as_bool) == Some(true);
        let is_null = map.get(k).is_some_and(Value::is_null);
        if is_null && !nullable {
            map.remove(k);
        }
        if !map.contains_key(k)
            && let Some(d) = sub.get("default")
        {
            let mut d = d.clone();
            // A default is itself defaulted below it (as the real defaulter does).
            let mut ignored = Vec::new();
            prune(&mut d, sub, k, &mut ignored, true);
            map.insert(k.clone(), d);
        }
    }
}

/// Apply `default:` values only (kube-apiserver defaults stored custom
/// resources again when it reads them, so a default added to a CRD later
/// shows on old objects). Unknown fields are left alone.
pub fn default_only(obj: &mut Value, schema: &Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let mut ignored = Vec::new();
    for (k, sub) in props {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(v) = root.get_mut(k) {
            prune(v, sub, k, &mut ignored, false);
        }
    }
    drop_nulls_and_default(root, schema);
}

/// Whether a schema declares any `default` (reads then need defaulting).
pub fn has_defaults(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("default") || m.values().any(has_defaults),
        Value::Array(a) => a.iter().any(has_defaults),
        _ => false,
    }
}

fn prune(v: &mut Value, schema: &Value, path: &str, unknown: &mut Vec<String>, remove: bool) {
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        return;
    }
    match v {
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item, item_schema, &format!("{path}[{i}]"), unknown, remove);
                }
            }
        }
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let preserve = preserves(schema);
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let sub_path = join(path, &k);
                if let Some(sub) = props.and_then(|p| p.get(&k)) {
                    if let Some(child) = map.get_mut(&k) {
                        prune(child, sub, &sub_path, unknown, remove);
                    }
                } else if let Some(add) = additional.filter(|a| a.is_object()) {
                    if let Some(child) = map.get_mut(&k) {
                        prune(child, add, &sub_path, unknown, remove);
                    }
                } else if preserve || !remove || additional.and_then(Value::as_bool) == Some(true) {
                    // kept as is
                } else {
                    map.remove(&k);
                    unknown.push(sub_path);
                }
            }
            drop_nulls_and_default(map, schema);
        }
        _ => {}
    }
}

/// Validate a pruned, defaulted custom resource against `schema`.
/// Returns the causes of a 422 (empty when valid).
pub fn validate(obj: &Value, schema: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(root) = obj.as_object() else {
        return causes;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    for (k, v) in root {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(sub) = props.and_then(|p| p.get(k)) {
            walk(v, sub, k, &mut causes);
        }
    }
    required(root, schema, "", &mut causes);
    causes
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn required(obj: &Map<String, Value>, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !obj.contains_key(r) {
            causes.push(Cause {
                reason: "FieldValueRequired",
                field: join(path, r),
                message: "Required value".into(),
            });
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Validates `v` against `schema` at `path`, recursing into items and
/// properties: type first (a value of the wrong type gets no further causes),
/// then enum, then the bounds of its kind.
fn walk(v: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() && schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if !type_matches(v, schema, path, causes) {
        return;
    }
    check_enum(v, schema, path, causes);
    match v {
        Value::Number(n) => check_number(v, n.as_f64().unwrap_or(0.0), schema, path, causes),
        Value::String(s) => check_string(v, s, schema, path, causes),
        Value::Array(items) => walk_array(items, schema, path, causes),
        Value::Object(map) => walk_object(map, schema, path, causes),
        _ => {}
    }
}

/// The type check, `x-kubernetes-int-or-string` included. `false` when the
/// walk stops here: the type is wrong, or the value is an int-or-string
/// (nothing else of its schema applies).
fn type_matches(v: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) -> bool {
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if int_or_string {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            let got = type_name(v);
            causes.push(type_invalid(
                path,
                got,
                format!("{path} in body must be of type int-or-string: \"{got}\""),
            ));
        }
        return false;
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let got = type_name(v);
        let ok = got == t || (t == "number" && got == "integer");
        if !ok {
            causes.push(type_invalid(
                path,
                got,
                format!("{path} in body must be of type {t}: \"{got}\""),
            ));
            return false;
        }
    }
    true
}

fn check_enum(v: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        let supported = e.iter().map(show).collect::<Vec<_>>().join(", ");
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.to_string(),
            message: format!(
                "Unsupported value: {}: supported values: {supported}",
                show(v)
            ),
        });
    }
}

/// `minimum` and `maximum` of a number `x` (the value `v`).
fn check_number(v: &Value, x: f64, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && x < min
    {
        causes.push(invalid(
            path,
            v,
            format!("{path} in body should be greater than or equal to {min}"),
        ));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && x > max
    {
        causes.push(invalid(
            path,
            v,
            format!("{path} in body should be less than or equal to {max}"),
        ));
    }
}

/// `minLength` and `maxLength` of a string `s` (the value `v`), in characters.
fn check_string(v: &Value, s: &str, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let len = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        causes.push(invalid(
            path,
            v,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        causes.push(Cause {
            reason: "FieldValueTooLong",
            field: path.to_string(),
            message: format!("Too long: may not be more than {max} bytes"),
        });
    }
}

/// `minItems` and `maxItems`, then each item against `items`.
fn walk_array(items: &[Value], schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let n = items.len() as u64;
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        causes.push(invalid(
            path,
            &Value::Null,
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!("Too many: {n}: must have at most {max} items"),
        });
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            walk(item, item_schema, &format!("{path}[{i}]"), causes);
        }
    }
}

/// Each field against its property (or `additionalProperties`), then `required`.
fn walk_object(map: &Map<String, Value>, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, child) in map {
        let sub_path = join(path, k);
        if let Some(sub) = props.and_then(|p| p.get(k)) {
            walk(child, sub, &sub_path, causes);
        } else if let Some(add) = additional {
            walk(child, add, &sub_path, causes);
        }
    }
    required(map, schema, path, causes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "port": {"x-kubernetes-int-or-string": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}})
    }

    #[test]
    fn prunes_unknown_fields_but_keeps_preserved_ones() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"size": 2, "junk": 1, "free": {"any": {"thing": 1}}, "labels": {"a": "b"}},
            "extra": true});
        let unknown = prune_and_default(&mut o, &schema());
        assert_eq!(unknown, vec!["spec.junk", "extra"]);
        assert!(validate(&o, &schema()).is_empty());
        assert!(o.get("extra").is_none());
        assert!(o["spec"].get("junk").is_none());
        assert_eq!(o["spec"]["free"]["any"]["thing"], 1);
        assert_eq!(o["spec"]["labels"]["a"], "b");
    }

    #[test]
    fn defaults_fill_absent_and_null_fields() {
        let mut o = json!({"spec": {"size": 1}});
        prune_and_default(&mut o, &schema());
        assert_eq!(o["spec"]["mode"], "a");
        let mut o = json!({"spec": {"size": 1, "mode": null, "tags": null}});
        prune_and_default(&mut o, &schema());
        assert_eq!(o["spec"]["mode"], "a");
        assert!(o["spec"].get("tags").is_none());
    }

    #[test]
    fn reports_the_offending_field_with_the_type_name() {
        let o = json!({"spec": {"size": "big", "mode": "c", "tags": [1]}});
        let causes = validate(&o, &schema());
        let fields: Vec<_> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["spec.size", "spec.mode", "spec.tags[0]"]);
        assert_eq!(
            causes[0].message,
            "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
        );
    }

    #[test]
    fn required_and_minimum() {
        let o = json!({"spec": {"mode": "a", "port": "http"}});
        let causes = validate(&o, &schema());
        assert_eq!(causes[0].field, "spec.size");
        assert_eq!(causes[0].reason, "FieldValueRequired");
        let o = json!({"spec": {"size": 0}});
        assert_eq!(validate(&o, &schema()).len(), 1);
    }
}
