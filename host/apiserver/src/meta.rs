//! Small helpers over `metadata` of JSON objects, and the name rules
//! kube-apiserver enforces.

use rand::Rng;
use serde_json::{Map, Value};

use crate::errors::Cause;

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata` as a mutable map, created when missing.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("made an object above")
    };
    let m = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    match m {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

pub fn str_field<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)?.get(field)?.as_str()
}

pub fn name(obj: &Value) -> Option<&str> {
    str_field(obj, "name").filter(|s| !s.is_empty())
}

pub fn uid(obj: &Value) -> Option<&str> {
    str_field(obj, "uid")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, f: &[String]) {
    let m = meta_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), Value::from(f.to_vec()));
    }
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

/// Does anything still hold this object back from removal? Metadata
/// finalizers, and for namespaces also `spec.finalizers`.
pub fn blocks_deletion(obj: &Value) -> bool {
    !finalizers(obj).is_empty()
        || (obj.get("kind").and_then(Value::as_str) == Some("Namespace")
            && obj
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()))
}

pub fn generation(obj: &Value) -> i64 {
    meta(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `name` + 5 random characters from kube's alphabet (no vowels, no look-alikes).
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    let max = 63 - 5;
    let p = if prefix.len() > max {
        &prefix[..max]
    } else {
        prefix
    };
    format!("{p}{suffix}")
}

/// RFC 1123 subdomain (most object names).
pub fn check_subdomain(name: &str) -> Option<Cause> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    (!ok).then(|| Cause {
        reason: "FieldValueInvalid",
        field: "metadata.name".into(),
        message: format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ),
    })
}

/// RFC 1123 label (namespaces, services).
pub fn check_label(name: &str) -> Option<Cause> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    (!ok).then(|| Cause {
        reason: "FieldValueInvalid",
        field: "metadata.name".into(),
        message: format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ),
    })
}

/// `metadata.ownerReferences`: at most one reference may be the controller,
/// as kube-apiserver's `ValidateOwnerReferences` enforces. Controllers rely on
/// this: a server-side apply that would add a second controller reference to
/// somebody else's object is refused (422) instead of silently co-owning it.
pub fn check_owner_references(obj: &Value) -> Vec<Cause> {
    let Some(refs) = meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let controllers: Vec<String> = refs
        .iter()
        .filter(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            format!(
                "{{{} {} {}}}",
                r.get("kind").and_then(Value::as_str).unwrap_or_default(),
                r.get("name").and_then(Value::as_str).unwrap_or_default(),
                r.get("uid").and_then(Value::as_str).unwrap_or_default()
            )
        })
        .collect();
    if controllers.len() <= 1 {
        return Vec::new();
    }
    vec![Cause {
        reason: "FieldValueInvalid",
        field: "metadata.ownerReferences".into(),
        message: format!(
            "Invalid value: []v1.OwnerReference{{...}}: Only one reference can have Controller set to true. Found \"true\" in references for {}",
            controllers.join(" and ")
        ),
    }]
}

/// Label keys and values (`metadata.labels`).
pub fn check_labels(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let Some(labels) = meta(obj).and_then(|m| m.get("labels")) else {
        return out;
    };
    let Some(labels) = labels.as_object() else {
        if !labels.is_null() {
            out.push(Cause {
                reason: "FieldValueInvalid",
                field: "metadata.labels".into(),
                message: "Invalid value: must be a map of strings".into(),
            });
        }
        return out;
    };
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    for (k, v) in labels {
        let key_name = k.rsplit_once('/').map_or(k.as_str(), |(_, n)| n);
        if !name_ok(key_name) {
            out.push(Cause {
                reason: "FieldValueInvalid",
                field: "metadata.labels".into(),
                message: format!("Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
            });
        }
        match v.as_str() {
            Some(s) if s.is_empty() || name_ok(s) => {}
            _ => out.push(Cause {
                reason: "FieldValueInvalid",
                field: "metadata.labels".into(),
                message: format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn name_rules() {
        assert!(check_subdomain("a.b-c").is_none());
        assert!(check_subdomain("Bad").is_some());
        assert!(check_label("a.b").is_some());
        assert!(check_label("ok-1").is_none());
    }

    #[test]
    fn generated_names_keep_prefix() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-"));
        assert_eq!(n.len(), 9);
    }

    #[test]
    fn only_one_controller_owner_reference() {
        let one = json!({"metadata": {"ownerReferences": [
            {"kind": "A", "name": "a", "uid": "1", "controller": true},
            {"kind": "B", "name": "b", "uid": "2"}]}});
        assert!(check_owner_references(&one).is_empty());
        let two = json!({"metadata": {"ownerReferences": [
            {"kind": "A", "name": "a", "uid": "1", "controller": true},
            {"kind": "B", "name": "b", "uid": "2", "controller": true}]}});
        let causes = check_owner_references(&two);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "metadata.ownerReferences");
        assert!(
            causes[0].message.contains("{A a 1} and {B b 2}"),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn label_values_are_checked() {
        let o = json!({"metadata": {"labels": {"a": "ok", "b": "not ok"}}});
        assert_eq!(check_labels(&o).len(), 1);
    }
}
