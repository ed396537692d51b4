//! "Does the observed child already match the desired one?" — the check that lets
//! the engine skip API writes for converged children.
//!
//! Two signals, both needed:
//! * every field the host would apply is present with the same value in the
//!   observed object (catches hand edits and server-side drift of owned fields);
//! * the observed object carries the hash of the last applied desired object in
//!   [`APPLIED_HASH_ANNOTATION`] (catches fields the plugin *stopped* setting,
//!   which a subset check cannot see, and which server-side apply then removes).

use kube::api::DynamicObject;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{BufWriter, Write};

/// Annotation holding the hash of the desired object last applied by the host.
pub const APPLIED_HASH_ANNOTATION: &str = "wasm-reconciler.dev/applied-hash";

/// A stable hash of a JSON value (object keys sorted), as 32 hex digits.
pub fn stable_hash(v: &Value) -> String {
    let mut h = Sha256::new();
    {
        let mut w = hash_buffer(&mut h);
        feed(&mut w, v);
        // Flushing into a hasher cannot fail.
        let _ = w.flush();
    }
    let digest = h.finalize();
    hex::encode(&digest[..16])
}

/// `io::Write` into the hasher: JSON text of keys and scalars goes straight
/// into SHA-256 without a `String` per key (the bytes are those
/// `serde_json::to_string` would give, so hashes of existing children stay
/// the same).
pub(crate) struct HashWriter<'a>(pub(crate) &'a mut Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A buffer in front of the hasher. JSON text arrives in many tiny pieces
/// (a quote, a key, a colon); SHA-256's `update` has a fixed cost per call,
/// so the pieces are collected and hashed in blocks of a few KiB. The bytes
/// hashed are the same; the caller flushes before finalising.
pub(crate) fn hash_buffer(h: &mut Sha256) -> BufWriter<HashWriter<'_>> {
    BufWriter::with_capacity(8 * 1024, HashWriter(h))
}

fn feed<W: Write>(w: &mut W, v: &Value) {
    // Writing into a buffer in front of a hasher cannot fail.
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let _ = w.write_all(b"{");
            for (k, x) in entries {
                let _ = serde_json::to_writer(&mut *w, k);
                let _ = w.write_all(b":");
                feed(w, x);
                let _ = w.write_all(b",");
            }
            let _ = w.write_all(b"}");
        }
        Value::Array(a) => {
            let _ = w.write_all(b"[");
            for x in a {
                feed(w, x);
                let _ = w.write_all(b",");
            }
            let _ = w.write_all(b"]");
        }
        other => {
            let _ = serde_json::to_writer(&mut *w, other);
        }
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

/// [`is_subset`] of `desired` against `observed` as JSON, without turning the
/// whole observed object into a `Value` tree first: top-level fields are
/// compared in place (`apiVersion`/`kind` against the type, everything but
/// `metadata` against the object's data); only the metadata is converted.
/// Same answer as `is_subset(desired, &serde_json::to_value(observed)?)`.
pub fn is_subset_of(desired: &Value, observed: &DynamicObject) -> bool {
    let Value::Object(d) = desired else {
        return serde_json::to_value(observed).is_ok_and(|o| is_subset(desired, &o));
    };
    let types = observed.types.as_ref();
    d.iter().all(|(k, dv)| {
        let scalar = |s: Option<&String>| match s {
            Some(s) => dv.as_str() == Some(s.as_str()),
            None => dv.is_null(),
        };
        match k.as_str() {
            "apiVersion" => scalar(types.map(|t| &t.api_version)),
            "kind" => scalar(types.map(|t| &t.kind)),
            "metadata" => serde_json::to_value(&observed.metadata).is_ok_and(|m| is_subset(dv, &m)),
            _ => match observed.data.get(k) {
                Some(ov) => is_subset(dv, ov),
                None => dv.is_null(),
            },
        }
    })
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
    fn subset_of_an_object_agrees_with_the_subset_of_its_json() {
        let observed: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"},
                         "annotations": {APPLIED_HASH_ANNOTATION: "h1"}, "uid": "u"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "terminationMessagePath": "/dev/x"}]}}},
            "status": {"availableReplicas": 2}
        }))
        .unwrap();
        let cases = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "annotations": {APPLIED_HASH_ANNOTATION: "h1"}},
                   "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3}}),
            json!({"apiVersion": "apps/v2"}),
            json!({"kind": "StatefulSet"}),
            json!({"kind": 1}),
            json!({"metadata": {"annotations": {APPLIED_HASH_ANNOTATION: "h2"}}}),
            json!({"metadata": {"labels": {"app": "web", "tier": null}}}),
            json!({"data": null}),
            json!({"data": {"k": "v"}}),
            json!({"status": {"availableReplicas": 2.0}}),
            json!([1]),
            json!({}),
        ];
        let whole = serde_json::to_value(&observed).unwrap();
        for d in &cases {
            assert_eq!(is_subset_of(d, &observed), is_subset(d, &whole), "{d}");
        }
        let untyped = DynamicObject {
            types: None,
            ..observed.clone()
        };
        let whole = serde_json::to_value(&untyped).unwrap();
        for d in &cases {
            assert_eq!(
                is_subset_of(d, &untyped),
                is_subset(d, &whole),
                "untyped {d}"
            );
        }
    }

    /// The hash as first written (a `String` per key and scalar): the
    /// reference the allocation-free version must match byte for byte.
    fn reference_hash(v: &Value) -> String {
        fn feed(h: &mut Sha256, v: &Value) {
            match v {
                Value::Object(m) => {
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    h.update(b"{");
                    for k in keys {
                        h.update(serde_json::to_string(k).unwrap().as_bytes());
                        h.update(b":");
                        feed(h, &m[k]);
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
        let mut h = Sha256::new();
        feed(&mut h, v);
        hex::encode(&h.finalize()[..16])
    }

    #[test]
    fn hash_bytes_are_those_of_the_first_version() {
        // The hash is stored on every applied child: a change in how it is
        // computed would re-apply every child after an upgrade.
        for v in [
            json!({"b": [1, "x\"y\n", null, true, 1.5, -3], "a": {"z": {}, "é": "ü\u{1}"}}),
            json!("plain"),
            json!(null),
            json!([{"k": 1e300}, {}]),
            // Larger than the hash buffer: the buffer is flushed mid-value.
            json!({"big": "é\"".repeat(9000), "list": (0..3000).collect::<Vec<_>>()}),
        ] {
            assert_eq!(stable_hash(&v), reference_hash(&v), "{v}");
        }
    }

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
