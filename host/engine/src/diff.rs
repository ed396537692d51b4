//! "Does the observed child already match the desired one?" — the check that lets
//! the engine skip API writes for converged children.
//!
//! Two signals, both needed:
//! * every field the host would apply is present with the same value in the
//!   observed object (catches hand edits and server-side drift of owned fields);
//! * the observed object carries the hash of the last applied desired object in
//!   [`APPLIED_HASH_ANNOTATION`] (catches fields the plugin *stopped* setting,
//!   which a subset check cannot see, and which server-side apply then removes).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Annotation holding the hash of the desired object last applied by the host.
pub const APPLIED_HASH_ANNOTATION: &str = "wasm-reconciler.dev/applied-hash";

/// A stable hash of a JSON value (object keys sorted), as 32 hex digits.
pub fn stable_hash(v: &Value) -> String {
    let mut h = Sha256::new();
    feed(&mut h, v);
    let digest = h.finalize();
    hex::encode(&digest[..16])
}

fn feed(h: &mut Sha256, v: &Value) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            h.update(b"{");
            for k in keys {
                h.update(serde_json::to_string(k).unwrap_or_default().as_bytes());
                h.update(b":");
                if let Some(x) = m.get(k) {
                    feed(h, x);
                }
                h.update(b",");
            }
            h.update(b"}");
        }
        Value::Array(a) => {
            h.update(b"[");
            for x in a {
                feed(h, x);
                h.update(b",");
            }
            h.update(b"]");
        }
        other => h.update(other.to_string().as_bytes()),
    }
}

/// True when every field of `desired` has the same value in `observed`.
///
/// Objects: every desired key must match (a desired `null` means "absent").
/// Arrays: same length and element-wise match (servers default fields inside list
/// elements, e.g. container `terminationMessagePath`, so elements are compared as
/// subsets too). Scalars: equal; numbers compare by value (`1` == `1.0`).
pub fn is_subset(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => d.iter().all(|(k, dv)| match o.get(k) {
            Some(ov) => is_subset(dv, ov),
            None => dv.is_null(),
        }),
        (Value::Array(d), Value::Array(o)) => {
            d.len() == o.len() && d.iter().zip(o).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// The applied-hash annotation of an object, if present.
pub fn applied_hash(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")?
        .get(APPLIED_HASH_ANNOTATION)?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_ignores_key_order_but_not_values() {
        let a = json!({"a": 1, "b": {"c": [1, 2]}});
        let b: Value = serde_json::from_str(r#"{"b": {"c": [1, 2]}, "a": 1}"#).unwrap();
        assert_eq!(stable_hash(&a), stable_hash(&b));
        assert_ne!(
            stable_hash(&a),
            stable_hash(&json!({"a": 1, "b": {"c": [2, 1]}}))
        );
    }

    #[test]
    fn server_added_fields_do_not_count_as_drift() {
        let desired = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let observed = json!({
            "metadata": {"uid": "u", "resourceVersion": "5"},
            "spec": {"replicas": 2, "strategy": {}, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "terminationMessagePath": "/dev/termination-log"}
            ]}}},
            "status": {"replicas": 0}
        });
        assert!(is_subset(&desired, &observed));
    }

    #[test]
    fn hand_edits_of_owned_fields_are_drift() {
        let desired = json!({"data": {"index.html": "hi"}});
        assert!(!is_subset(
            &desired,
            &json!({"data": {"index.html": "edited"}})
        ));
        assert!(!is_subset(&desired, &json!({"data": {}})));
        assert!(!is_subset(&json!({"a": [1, 2]}), &json!({"a": [1]})));
    }

    #[test]
    fn null_means_absent_and_numbers_compare_by_value() {
        assert!(is_subset(&json!({"a": null}), &json!({})));
        assert!(!is_subset(&json!({"a": null}), &json!({"a": 1})));
        assert!(is_subset(&json!({"n": 1}), &json!({"n": 1.0})));
    }

    #[test]
    fn applied_hash_is_read_from_annotations() {
        let o = json!({"metadata": {"annotations": {APPLIED_HASH_ANNOTATION: "abc"}}});
        assert_eq!(applied_hash(&o), Some("abc"));
        assert_eq!(applied_hash(&json!({})), None);
    }
}
