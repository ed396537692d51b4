//! RFC 6902 JSON patch and RFC 7386 JSON merge patch, delegated to the
//! `json-patch` crate; this module only maps errors to kube-apiserver's codes.

use serde_json::Value;

use super::PatchError;

/// Applies an RFC 6902 JSON patch (`application/json-patch+json`).
///
/// A malformed patch document is a 400; an operation that cannot be applied
/// (failed `test`, missing path) is a 422, as kube-apiserver answers.
pub fn apply_json_patch(current: &Value, patch: &Value) -> Result<Value, PatchError> {
    let mut ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::BadRequest(format!("error decoding patch: {e}")))?;
    let mut doc = current.clone();
    // kube-apiserver's JSON patch (evanphx/json-patch v4) lets `replace` set
    // a key an object does not have yet; RFC 6902 would refuse it. Each such
    // operation becomes an `add`, checked against the document as patched so far.
    for op in &mut ops.0 {
        if let json_patch::PatchOperation::Replace(r) = op
            && let Some((parent, _)) = r.path.split_back()
            && doc.pointer(parent.as_str()).is_some_and(Value::is_object)
            && doc.pointer(r.path.as_str()).is_none()
        {
            *op = json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: r.path.clone(),
                value: r.value.clone(),
            });
        }
        json_patch::patch(&mut doc, std::slice::from_ref(op))
            .map_err(|e| PatchError::Invalid(e.to_string()))?;
    }
    Ok(doc)
}

/// Applies an RFC 7386 JSON merge patch (`application/merge-patch+json`):
/// objects merge recursively, `null` deletes, everything else (lists too)
/// replaces.
pub fn apply_merge_patch(current: &Value, patch: &Value) -> Result<Value, PatchError> {
    let go = match patch {
        Value::Object(_) | Value::Null => None,
        Value::Array(_) => Some("array"),
        Value::String(_) => Some("string"),
        Value::Number(_) => Some("number"),
        Value::Bool(_) => Some("bool"),
    };
    if let Some(go) = go {
        return Err(PatchError::BadRequest(format!(
            "error decoding patch: json: cannot unmarshal {go} into Go value of type map[string]interface {{}}"
        )));
    }
    let mut doc = current.clone();
    json_patch::merge(&mut doc, patch);
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_replace_and_add() {
        let cur = json!({"spec": {"replicas": 1}, "metadata": {"labels": {"a": "1"}}});
        let out = apply_json_patch(
            &cur,
            &json!([
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "add", "path": "/metadata/labels/b", "value": "2"}
            ]),
        )
        .unwrap();
        assert_eq!(out["spec"]["replicas"], 3);
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn json_patch_failing_test_op_is_invalid() {
        let cur = json!({"spec": {"replicas": 1}});
        let err = apply_json_patch(
            &cur,
            &json!([
                {"op": "test", "path": "/spec/replicas", "value": 2},
                {"op": "replace", "path": "/spec/replicas", "value": 5}
            ]),
        )
        .unwrap_err();
        assert_eq!(err.http_status(), 422);
    }

    #[test]
    fn json_patch_replace_of_a_missing_key_adds_it_as_kube_apiserver_does() {
        let out = apply_json_patch(
            &json!({"data": {"a": "1"}}),
            &json!([{"op": "replace", "path": "/data/none", "value": "2"}]),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"a": "1", "none": "2"}));
        // Below a missing parent it still fails.
        let err = apply_json_patch(
            &json!({}),
            &json!([{"op": "replace", "path": "/spec/x", "value": 1}]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)));
    }

    #[test]
    fn json_patch_remove_missing_path_is_invalid() {
        let err =
            apply_json_patch(&json!({}), &json!([{"op": "remove", "path": "/spec"}])).unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)));
    }

    #[test]
    fn malformed_json_patch_is_bad_request() {
        let err = apply_json_patch(&json!({}), &json!({"op": "add"})).unwrap_err();
        assert_eq!(err.http_status(), 400);
    }

    #[test]
    fn merge_patch_null_deletes_and_lists_replace() {
        let cur = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"ports": [1, 2]}});
        let out = apply_merge_patch(
            &cur,
            &json!({"metadata": {"labels": {"a": null}}, "spec": {"ports": [3]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["spec"]["ports"], json!([3]));
    }
}
