//! Keeps Secret data out of the record store. A plugin's request can carry
//! Secrets (a related rule selecting `secrets`, a Secret child, a Secret
//! parent) and its response can carry Secret children; the store writes
//! neither's data unredacted.
//!
//! Redaction keeps the object's shape so a replay still runs: every value of
//! `data` becomes the base64 of `redacted` (a plugin that decodes it still
//! decodes), every value of `stringData` becomes `redacted`, and the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of
//! the data) is dropped.

use serde_json::Value;

/// What a redacted `data` value is: base64 of `redacted`.
pub const REDACTED_DATA: &str = "cmVkYWN0ZWQ=";
/// What a redacted `stringData` value is.
pub const REDACTED_STRING: &str = "redacted";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// True for a core `v1` Secret, or an object whose uid is in `uids` (known
/// to be a Secret from the resource it was read as).
pub fn is_secret(obj: &Value, uids: &[String]) -> bool {
    let typed = obj.get("kind").and_then(Value::as_str) == Some("Secret")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1");
    typed
        || obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .is_some_and(|u| uids.iter().any(|s| s == u))
}

/// Redacts every Secret found anywhere in `v` (objects nested in arrays and
/// objects: parent, children, related groups, response children). Returns
/// how many Secrets it found.
pub fn redact(v: &mut Value, uids: &[String]) -> usize {
    if is_secret(v, uids) {
        redact_secret(v);
        return 1;
    }
    match v {
        Value::Array(items) => items.iter_mut().map(|i| redact(i, uids)).sum(),
        Value::Object(map) => map.values_mut().map(|i| redact(i, uids)).sum(),
        _ => 0,
    }
}

/// Counts the Secrets in `v` (for the `Exclude` policy).
pub fn count_secrets(v: &Value, uids: &[String]) -> usize {
    if is_secret(v, uids) {
        return 1;
    }
    match v {
        Value::Array(items) => items.iter().map(|i| count_secrets(i, uids)).sum(),
        Value::Object(map) => map.values().map(|i| count_secrets(i, uids)).sum(),
        _ => 0,
    }
}

fn redact_secret(secret: &mut Value) {
    for (field, placeholder) in [("data", REDACTED_DATA), ("stringData", REDACTED_STRING)] {
        if let Some(Value::Object(m)) = secret.get_mut(field) {
            for value in m.values_mut() {
                *value = Value::String(placeholder.to_string());
            }
        }
    }
    if let Some(Value::Object(a)) = secret.pointer_mut("/metadata/annotations") {
        a.remove(LAST_APPLIED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_anywhere_lose_their_data_and_other_objects_stay() {
        let mut req = json!({
            "parent": {"apiVersion": "x/v1", "kind": "Site", "spec": {"data": {"k": "keep"}}},
            "related": [{"name": "secrets", "objects": [{
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "annotations": {LAST_APPLIED: "{\"data\":{\"password\":\"aHVudGVyMg==\"}}", "a": "b"}},
                "data": {"password": "aHVudGVyMg=="},
                "stringData": {"token": "hunter2"}
            }]}]
        });
        assert_eq!(redact(&mut req, &[]), 1);
        let text = req.to_string();
        assert!(!text.contains("aHVudGVyMg=="), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        let s = &req["related"][0]["objects"][0];
        assert_eq!(s["data"]["password"], REDACTED_DATA);
        assert_eq!(s["stringData"]["token"], REDACTED_STRING);
        assert_eq!(s["metadata"]["annotations"], json!({"a": "b"}));
        // A non-Secret object with a `data` field is left alone.
        assert_eq!(req["parent"]["spec"]["data"]["k"], "keep");
        assert_eq!(count_secrets(&req, &[]), 1);
        // Without apiVersion/kind (a list item), known by uid.
        let mut bare = json!({"metadata": {"uid": "u1"}, "data": {"k": "c2VjcmV0"}});
        assert_eq!(count_secrets(&bare, &[]), 0);
        assert_eq!(redact(&mut bare, &["u1".to_string()]), 1);
        assert_eq!(bare["data"]["k"], REDACTED_DATA);
    }
}
