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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
