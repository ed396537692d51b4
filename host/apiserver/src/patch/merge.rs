//! Schema-aware merge of an apply configuration into a live object, and
//! removal of field sets, after structured-merge-diff's `typed.Merge` and
//! `RemoveItems`.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement};
use super::schema::Node;
use super::walk::item_elements;

/// Merges `config` over `live`: the config wins at leaves, maps merge key by
/// key, keyed lists merge item by item (config order first, see
/// [`merge_lists`]), atomic lists and maps are replaced.
pub(crate) fn merge(live: &Value, config: &Value, node: &Node) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(r))
            if !(node.atomic_map || (l.is_empty() && r.is_empty())) =>
        {
            let mut out = Map::new();
            for (k, lv) in l {
                let v = match r.get(k) {
                    Some(rv) => merge(lv, rv, node.child(k)),
                    None => lv.clone(),
                };
                out.insert(k.clone(), v);
            }
            for (k, rv) in r {
                if !l.contains_key(k) {
                    out.insert(k.clone(), rv.clone());
                }
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(r)) if !(l.is_empty() && r.is_empty()) => {
            match (item_elements(node, l), item_elements(node, r)) {
                (Some(lp), Some(rp)) => Value::Array(merge_lists(l, &lp, r, &rp, node)),
                _ => config.clone(),
            }
        }
        _ => config.clone(),
    }
}

/// The item order of structured-merge-diff's list merge: walk both lists,
/// keeping live-only items where they are and putting shared items in the
/// config's order, with config-only items after the item preceding them in
/// the config.
fn merge_lists(
    l: &[Value],
    lpes: &[PathElement],
    r: &[Value],
    rpes: &[PathElement],
    node: &Node,
) -> Vec<Value> {
    let lmap: BTreeMap<&PathElement, &Value> = lpes.iter().zip(l).collect();
    let rmap: BTreeMap<&PathElement, &Value> = rpes.iter().zip(r).collect();
    let mut shared = rpes.iter().filter(|pe| lmap.contains_key(pe));
    let mut next_shared = shared.next();
    let mut merged_r: HashSet<&PathElement> = HashSet::new();
    let mut out = Vec::with_capacity(l.len().max(r.len()));
    let merge_item = |pe: &PathElement| -> Value {
        match (lmap.get(pe), rmap.get(pe)) {
            (Some(lv), Some(rv)) => merge(lv, rv, node.item()),
            (Some(v), None) | (None, Some(v)) => (*v).clone(),
            (None, None) => Value::Null,
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            let pe = &lpes[li];
            if *pe == rpes[ri] {
                merged_r.insert(pe);
                out.push(merge_item(pe));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if rmap.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            let pe = &lpes[li];
            if !rmap.contains_key(pe) {
                out.push(l[li].clone());
                li += 1;
                continue;
            } else if merged_r.contains(pe) {
                li += 1;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri];
            merged_r.insert(pe);
            out.push(merge_item(pe));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// Removes every member of `set` (and everything below it) from `v`.
/// Returns `None` when a map or list lost all its entries this way, so the
/// caller drops it rather than keeping an empty shell, as a typed object's
/// round trip through Go structs would.
pub(crate) fn remove(v: &Value, set: &FieldSet, node: &Node) -> Option<Value> {
    match v {
        Value::Object(m) if !node.atomic_map && !m.is_empty() => {
            let mut out = Map::new();
            for (k, c) in m {
                let pe = PathElement::Field(k.clone());
                match set.child(&pe) {
                    Some(sub) if sub.is_member() => {}
                    Some(sub) => {
                        if let Some(kept) = remove(c, sub, node.child(k)) {
                            out.insert(k.clone(), kept);
                        }
                    }
                    None => {
                        out.insert(k.clone(), c.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) if !items.is_empty() => {
            let Some(pes) = item_elements(node, items) else {
                return Some(v.clone());
            };
            let mut out = Vec::new();
            for (item, pe) in items.iter().zip(&pes) {
                match set.child(pe) {
                    Some(sub) if sub.is_member() => {}
                    Some(sub) => {
                        if let Some(kept) = remove(item, sub, node.item()) {
                            out.push(kept);
                        }
                    }
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => Some(v.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::Schema;
    use super::super::walk::field_set;
    use super::*;
    use serde_json::json;

    #[test]
    fn keyed_list_items_merge_by_key_and_keep_live_only_items() {
        let node = Schema::for_builtin("apps", "Deployment").root;
        let live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1", "imagePullPolicy": "Always"},
            {"name": "sidecar", "image": "envoy"}
        ]}}}});
        let cfg = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:2"}
        ]}}}});
        let out = merge(&live, &cfg, &node);
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([
                {"name": "web", "image": "nginx:2", "imagePullPolicy": "Always"},
                {"name": "sidecar", "image": "envoy"}
            ])
        );
    }

    #[test]
    fn atomic_lists_and_maps_are_replaced() {
        let node = Schema::for_builtin("apps", "Deployment").root;
        let live = json!({"spec": {"selector": {"matchLabels": {"a": "1"}},
            "template": {"spec": {"containers": [{"name": "c", "args": ["a", "b"]}]}}}});
        let cfg = json!({"spec": {"selector": {"matchLabels": {"b": "2"}},
            "template": {"spec": {"containers": [{"name": "c", "args": ["z"]}]}}}});
        let out = merge(&live, &cfg, &node);
        assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"][0]["args"],
            json!(["z"])
        );
    }

    #[test]
    fn set_lists_union() {
        let node = Schema::unknown().root;
        let out = merge(
            &json!({"metadata": {"finalizers": ["a", "b"]}}),
            &json!({"metadata": {"finalizers": ["c", "a"]}}),
            &node,
        );
        let got: HashSet<String> = out["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        let want: HashSet<String> = ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn remove_drops_members_and_emptied_parents() {
        let node = Schema::unknown().root;
        let v = json!({"metadata": {"labels": {"a": "1"}, "name": "x"}, "spec": {"x": 1, "y": 2}});
        let set = field_set(
            &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}),
            &node,
        );
        let out = remove(&v, &set, &node).unwrap();
        assert_eq!(out, json!({"metadata": {"name": "x"}, "spec": {"y": 2}}));
    }
}
