//! Strategic merge patch (`application/strategic-merge-patch+json`), after
//! apimachinery's `strategicpatch`: what `kubectl apply` (client-side),
//! `edit`, `label`, `annotate` and `scale` send for built-in kinds. Merge keys
//! and list strategies come from the [`Schema`]: keyed lists merge by their
//! first key (the `patchMergeKey`), sets merge by value, other lists are
//! replaced. No Rust crate implements this.

use serde_json::{Map, Value};

use super::PatchError;
use super::schema::{ListType, Node, Schema};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch: maps merge recursively, `null` deletes,
/// keyed lists merge item by item, and the directives `$patch`
/// (`replace`/`delete`/`merge`), `$retainKeys`,
/// `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` are
/// honoured.
pub fn apply_strategic_merge_patch(
    current: &Value,
    patch: &Value,
    schema: &Schema,
) -> Result<Value, PatchError> {
    let (Some(cur), Some(p)) = (current.as_object(), patch.as_object()) else {
        return Err(PatchError::BadRequest(
            "strategic merge patch must be a JSON object".to_owned(),
        ));
    };
    merge_map(cur.clone(), p, &schema.root).map(Value::Object)
}

fn bad(msg: impl Into<String>) -> PatchError {
    PatchError::BadRequest(msg.into())
}

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    node: &Node,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(d) = patch.get(PATCH) {
        match d.as_str() {
            Some("replace") => return Ok(clean_map(patch, node)),
            Some("delete") => return Ok(Map::new()),
            Some("merge") => {}
            _ => {
                return Err(bad(format!(
                    "unknown patch type: {d} in map: {}",
                    Value::Object(patch.clone())
                )));
            }
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let keys: Vec<&str> = retain
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect())
            .ok_or_else(|| bad("$retainKeys must be a list of strings"))?;
        for k in patch
            .keys()
            .filter(|k| !k.starts_with('$') && !patch[*k].is_null())
        {
            if !keys.contains(&k.as_str()) {
                return Err(PatchError::Invalid(format!(
                    "the patch has field {k} which is not in $retainKeys"
                )));
            }
        }
        original.retain(|k, _| keys.contains(&k.as_str()));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM) {
            let drop = v
                .as_array()
                .ok_or_else(|| bad(format!("{k} must be a list")))?;
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|i| !drop.contains(i));
            }
        }
    }
    for (k, v) in patch {
        if k.starts_with('$') {
            continue;
        }
        let child = node.child(k);
        if v.is_null() {
            original.remove(k);
            continue;
        }
        let merged = match (original.remove(k), v) {
            (None, Value::Object(p)) if p.get(PATCH).and_then(Value::as_str) == Some("delete") => {
                continue;
            }
            (Some(Value::Object(o)), Value::Object(p)) => Value::Object(merge_map(o, p, child)?),
            (Some(Value::Array(o)), Value::Array(p)) => Value::Array(merge_list(o, p, child)?),
            _ => clean(v, child),
        };
        original.insert(k.clone(), merged);
    }
    for (k, order) in patch {
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            let order = order
                .as_array()
                .ok_or_else(|| bad(format!("{k} must be a list")))?;
            if let Some(Value::Array(items)) = original.get_mut(field) {
                reorder(items, order, node.child(field));
            }
        }
    }
    Ok(original)
}

/// The merge key of a list that merges item by item, or `None` when the
/// list is replaced; `Some(None)` for lists of scalars merged by value.
fn merge_key(node: &Node) -> Option<Option<&str>> {
    match &node.list {
        ListType::Atomic => None,
        ListType::Set => Some(None),
        ListType::Map { keys, .. } => Some(keys.first().map(String::as_str)),
    }
}

fn merge_list(
    mut original: Vec<Value>,
    patch: &[Value],
    node: &Node,
) -> Result<Vec<Value>, PatchError> {
    let Some(key) = merge_key(node) else {
        return Ok(clean_list(patch, node));
    };
    let Some(key) = key else {
        for v in patch {
            if !original.contains(v) {
                original.push(v.clone());
            }
        }
        return Ok(original);
    };
    let mut rest = Vec::new();
    for item in patch {
        match item.get(PATCH).and_then(Value::as_str) {
            Some("replace") => {
                return Ok(patch
                    .iter()
                    .filter(|i| i.get(PATCH).is_none())
                    .map(|i| clean(i, node.item()))
                    .collect());
            }
            Some("delete") => {
                let id = item.get(key).ok_or_else(|| {
                    bad(format!("delete directive without merge key {key}: {item}"))
                })?;
                original.retain(|o| o.get(key) != Some(id));
            }
            Some(other) => {
                return Err(bad(format!(
                    "unknown patch type {other} in list item {item}"
                )));
            }
            None => rest.push(item),
        }
    }
    for item in rest {
        let Some(p) = item.as_object() else {
            return Err(bad(format!(
                "list item {item} is not a map; merge key {key} expected"
            )));
        };
        let id = p.get(key).ok_or_else(|| {
            bad(format!(
                "map: {item} does not contain declared merge key: {key}"
            ))
        })?;
        match original.iter_mut().find(|o| o.get(key) == Some(id)) {
            Some(slot) => {
                let base = slot.as_object().cloned().unwrap_or_default();
                *slot = Value::Object(merge_map(base, p, node.item())?);
            }
            None => original.push(clean(item, node.item())),
        }
    }
    Ok(original)
}

/// Puts the items named in `$setElementOrder` in that order, leaving items
/// the patch does not mention (server-only items) in their slots.
fn reorder(items: &mut [Value], order: &[Value], node: &Node) {
    let key = merge_key(node).flatten();
    let id = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let wanted: Vec<Value> = order.iter().map(&id).collect();
    let rank = |v: &Value| wanted.iter().position(|w| *w == id(v));
    let slots: Vec<usize> = (0..items.len())
        .filter(|i| rank(&items[*i]).is_some())
        .collect();
    let mut listed: Vec<Value> = slots.iter().map(|i| items[*i].clone()).collect();
    listed.sort_by_key(|v| rank(v));
    for (slot, v) in slots.into_iter().zip(listed) {
        items[slot] = v;
    }
}

/// A patch value taken as is (nothing to merge with), minus directives.
fn clean(v: &Value, node: &Node) -> Value {
    match v {
        Value::Object(m) => Value::Object(clean_map(m, node)),
        Value::Array(a) => Value::Array(clean_list(a, node)),
        other => other.clone(),
    }
}

fn clean_map(m: &Map<String, Value>, node: &Node) -> Map<String, Value> {
    m.iter()
        .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
        .map(|(k, v)| (k.clone(), clean(v, node.child(k))))
        .collect()
}

fn clean_list(a: &[Value], node: &Node) -> Vec<Value> {
    a.iter()
        .filter(|i| i.get(PATCH).is_none())
        .map(|i| clean(i, node.item()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy() -> Schema {
        Schema::for_builtin("apps", "Deployment")
    }

    fn containers(v: &Value) -> &Value {
        &v["spec"]["template"]["spec"]["containers"]
    }

    #[test]
    fn containers_merge_by_name() {
        let cur = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "envoy"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:2"}, {"name": "new", "image": "busybox"}]}}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(
            containers(&out),
            &json!([
                {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "envoy"},
                {"name": "new", "image": "busybox"}
            ])
        );
    }

    #[test]
    fn patch_delete_directive_removes_the_keyed_item() {
        let cur = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx"}, {"name": "side", "image": "envoy"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "side", "$patch": "delete"}]}}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(
            containers(&out),
            &json!([{"name": "web", "image": "nginx"}])
        );
    }

    #[test]
    fn patch_replace_directive_replaces_map_and_list() {
        let cur = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}});
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}},
            "spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "z"}]}}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
        assert_eq!(containers(&out), &json!([{"name": "z"}]));
    }

    #[test]
    fn null_deletes_and_atomic_lists_replace() {
        let cur = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["x", "y"]}]}}}});
        let patch = json!({"metadata": {"labels": {"a": null}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["z"]}]}}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(containers(&out)[0]["args"], json!(["z"]));
    }

    #[test]
    fn retain_keys_clears_unlisted_fields() {
        // kubectl apply switching a Deployment from RollingUpdate to Recreate.
        let cur = json!({"spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%"}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list() {
        let cur = json!({"metadata": {"finalizers": ["a", "b"]}});
        let out = apply_strategic_merge_patch(
            &cur,
            &json!({"metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}}),
            &deploy(),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
    }

    #[test]
    fn set_element_order_orders_patched_items() {
        let cur = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a"}, {"name": "b"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "x"}]}}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(
            containers(&out),
            &json!([{"name": "b"}, {"name": "a", "image": "x"}])
        );
    }

    #[test]
    fn deleting_an_absent_map_adds_nothing() {
        let cur = json!({"spec": {"replicas": 1}});
        let patch = json!({"spec": {"strategy": {"$patch": "delete"}}});
        let out = apply_strategic_merge_patch(&cur, &patch, &deploy()).unwrap();
        assert_eq!(out, cur);
    }

    #[test]
    fn item_without_merge_key_is_rejected() {
        let cur = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        assert!(apply_strategic_merge_patch(&cur, &patch, &deploy()).is_err());
    }
}
