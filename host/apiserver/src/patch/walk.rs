//! Schema-aware walks over objects, after structured-merge-diff's `typed`
//! package: the field set of a value (`ToFieldSet`) and the difference
//! between two values (`Compare`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement, canonical_key, path_string};
use super::schema::{ListType, Node};

/// The path element of a list item (`listItemToPathElement`).
pub(crate) fn item_element(list: &Node, item: &Value, index: usize) -> Result<PathElement, String> {
    match &list.list {
        ListType::Atomic => Ok(PathElement::Index(index)),
        ListType::Set => Ok(PathElement::Value(item.to_string())),
        ListType::Map { keys, defaults } => {
            let obj = item.as_object().ok_or_else(|| {
                "associative list with keys may not have non-map elements".to_owned()
            })?;
            let mut key = Map::new();
            for k in keys {
                match obj.get(k).or_else(|| defaults.get(k)) {
                    Some(v) => {
                        key.insert(k.clone(), v.clone());
                    }
                    None => {
                        return Err(format!(
                            "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                            Value::String(k.clone())
                        ));
                    }
                }
            }
            Ok(PathElement::Key(canonical_key(&key)))
        }
    }
}

/// Path elements of every item of a granular list, or `None` when the list
/// must be treated as atomic (atomic type, an item without its keys, or a
/// duplicate key — live data may hold those; apply configs are checked by
/// [`validate`] first).
pub(crate) fn item_elements(list: &Node, items: &[Value]) -> Option<Vec<PathElement>> {
    if list.list == ListType::Atomic {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let pe = item_element(list, item, i).ok()?;
        if !seen.insert(pe.clone()) {
            return None;
        }
        out.push(pe);
    }
    Some(out)
}

/// Rejects an apply configuration whose keyed lists have items without
/// their keys or with duplicate keys, with structured-merge-diff's wording.
pub(crate) fn validate(v: &Value, node: &Node, path: &mut Vec<PathElement>) -> Result<(), String> {
    match v {
        Value::Object(m) if !node.atomic_map => {
            for (k, c) in m {
                path.push(PathElement::Field(k.clone()));
                validate(c, node.child(k), path)?;
                path.pop();
            }
        }
        Value::Array(items) if node.list != ListType::Atomic => {
            let mut seen = std::collections::HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_element(node, item, i)
                    .map_err(|e| format!("{}: element {i}: {e}", path_string(path)))?;
                if !seen.insert(pe.clone()) {
                    let mut shown = String::new();
                    shown.push_str(&path_string(std::slice::from_ref(&pe)));
                    return Err(format!(
                        "{}: duplicate entries for key {shown}",
                        path_string(path)
                    ));
                }
                path.push(pe);
                validate(item, node.item(), path)?;
                path.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// The set of fields a value sets (`ToFieldSet`): leaves, atomic lists and
/// maps, list items (members with children), map entries that are not
/// struct fields, and null or empty-map fields.
pub(crate) fn field_set(v: &Value, node: &Node) -> FieldSet {
    let mut set = FieldSet::default();
    let mut path = Vec::new();
    walk_set(v, node, &mut path, &mut set);
    set
}

fn walk_set(v: &Value, node: &Node, path: &mut Vec<PathElement>, set: &mut FieldSet) {
    match v {
        Value::Object(m) => {
            if node.atomic_map {
                set.insert(path);
                return;
            }
            for (k, c) in m {
                path.push(PathElement::Field(k.clone()));
                walk_set(c, node.child(k), path, set);
                let empty_map = c.as_object().is_some_and(Map::is_empty);
                if c.is_null() || empty_map || !node.is_field(k) {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Value::Array(items) => match item_elements(node, items) {
            None => set.insert(path),
            Some(pes) => {
                for (item, pe) in items.iter().zip(pes) {
                    path.push(pe);
                    walk_set(item, node.item(), path, set);
                    set.insert(path);
                    path.pop();
                }
            }
        },
        _ => set.insert(path),
    }
}

/// What changed between two values (`typed.Comparison`).
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) removed: FieldSet,
    pub(crate) modified: FieldSet,
}

impl Comparison {
    /// Fields whose value was set or changed: what a write takes ownership of.
    pub(crate) fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Compares `old` and `new` (`TypedValue.Compare`).
pub(crate) fn compare(old: &Value, new: &Value, node: &Node) -> Comparison {
    let mut cmp = Comparison::default();
    let mut path = Vec::new();
    walk_cmp(Some(old), Some(new), node, &mut path, &mut cmp);
    cmp
}

fn leaf(l: Option<&Value>, r: Option<&Value>, path: &[PathElement], cmp: &mut Comparison) {
    match (l, r) {
        (None, Some(_)) => cmp.added.insert(path),
        (Some(_), None) => cmp.removed.insert(path),
        (Some(a), Some(b)) if a != b => cmp.modified.insert(path),
        _ => {}
    }
}

fn walk_cmp(
    l: Option<&Value>,
    r: Option<&Value>,
    node: &Node,
    path: &mut Vec<PathElement>,
    cmp: &mut Comparison,
) {
    // A `null` before a map or granular list is an existing, empty node (Go's
    // zero object writes non-omitempty pointers, slices and maps as null):
    // structured-merge-diff records the items added below it, not the node.
    let empty_map = Value::Object(Map::new());
    let empty_list = Value::Array(Vec::new());
    let l = match (l, r) {
        (Some(Value::Null), Some(Value::Object(_))) if !node.atomic_map => Some(&empty_map),
        (Some(Value::Null), Some(Value::Array(_))) => Some(&empty_list),
        _ => l,
    };
    let shape = r.or(l);
    let descended = match shape {
        Some(Value::Object(_)) => {
            let lm = l.and_then(Value::as_object);
            let rm = r.and_then(Value::as_object);
            let mismatched = (l.is_some() && lm.is_none()) || (r.is_some() && rm.is_none());
            let both_empty = lm.is_none_or(Map::is_empty) && rm.is_none_or(Map::is_empty);
            if node.atomic_map || mismatched || both_empty {
                false
            } else {
                let mut keys: Vec<&String> = lm.map(|m| m.keys().collect()).unwrap_or_default();
                if let Some(rm) = rm {
                    keys.extend(
                        rm.keys()
                            .filter(|k| !lm.is_some_and(|m| m.contains_key(*k))),
                    );
                }
                for k in keys {
                    path.push(PathElement::Field(k.clone()));
                    walk_cmp(
                        lm.and_then(|m| m.get(k)),
                        rm.and_then(|m| m.get(k)),
                        node.child(k),
                        path,
                        cmp,
                    );
                    path.pop();
                }
                true
            }
        }
        Some(Value::Array(_)) => compare_lists(l, r, node, path, cmp),
        _ => false,
    };
    if !descended {
        leaf(l, r, path, cmp);
    } else if l.is_none() {
        cmp.added.insert(path);
    } else if r.is_none() {
        cmp.removed.insert(path);
    }
}

/// Compares granular lists item by item; returns false when they are to be
/// compared as one leaf.
fn compare_lists(
    l: Option<&Value>,
    r: Option<&Value>,
    node: &Node,
    path: &mut Vec<PathElement>,
    cmp: &mut Comparison,
) -> bool {
    let la = l.and_then(Value::as_array);
    let ra = r.and_then(Value::as_array);
    if (l.is_some() && la.is_none()) || (r.is_some() && ra.is_none()) {
        return false;
    }
    let empty: &[Value] = &[];
    let la = la.map_or(empty, Vec::as_slice);
    let ra = ra.map_or(empty, Vec::as_slice);
    if la.is_empty() && ra.is_empty() {
        return false;
    }
    let (Some(lpes), Some(rpes)) = (item_elements(node, la), item_elements(node, ra)) else {
        return false;
    };
    let lmap: BTreeMap<&PathElement, &Value> = lpes.iter().zip(la).collect();
    let rmap: BTreeMap<&PathElement, &Value> = rpes.iter().zip(ra).collect();
    let mut order: Vec<&PathElement> = lpes.iter().collect();
    order.extend(rpes.iter().filter(|pe| !lmap.contains_key(pe)));
    for pe in order {
        path.push(pe.clone());
        walk_cmp(
            lmap.get(pe).copied(),
            rmap.get(pe).copied(),
            node.item(),
            path,
            cmp,
        );
        path.pop();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::schema::Schema;
    use super::*;
    use serde_json::json;

    #[test]
    fn field_set_of_an_apply_config_matches_kubectl_server_side_output() {
        // The managedFields entry `kubectl apply --server-side` leaves on a
        // Deployment (as shown by `kubectl get -o yaml --show-managed-fields`).
        let cfg = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx",
                        "ports": [{"containerPort": 80}]}]}
                }
            }
        });
        let s = field_set(&cfg, &Schema::for_builtin("apps", "Deployment").root);
        let v1 = s.to_fields_v1();
        assert_eq!(v1["f:metadata"]["f:labels"], json!({"f:app": {}}));
        assert_eq!(v1["f:spec"]["f:selector"], json!({}));
        assert_eq!(v1["f:spec"]["f:replicas"], json!({}));
        assert_eq!(
            v1["f:spec"]["f:template"]["f:spec"]["f:containers"],
            json!({"k:{\"name\":\"web\"}": {
                ".": {}, "f:image": {}, "f:name": {},
                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
            }})
        );
    }

    #[test]
    fn compare_reports_added_containers_with_their_own_member() {
        let node = Schema::unknown().root;
        let old = json!({"metadata": {"name": "x"}});
        let new = json!({"metadata": {"name": "x", "labels": {"a": "1"}}});
        let c = compare(&old, &new, &node);
        assert_eq!(
            c.added.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        );
        assert!(c.modified.is_empty() && c.removed.is_empty());
    }

    #[test]
    fn compare_keyed_list_items_by_key_not_position() {
        let node = Schema::for_builtin("", "Service").root;
        let old = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
        let new = json!({"spec": {"ports": [{"port": 443, "name": "https"}, {"port": 80, "name": "web"}]}});
        let c = compare(&old, &new, &node);
        assert_eq!(
            path_string(&c.modified.paths()[0]),
            ".spec.ports[port=80,protocol=\"TCP\"].name"
        );
        assert_eq!(c.modified.paths().len(), 1);
        assert!(c.added.is_empty() && c.removed.is_empty());
    }

    #[test]
    fn validate_rejects_items_missing_their_key() {
        let node = Schema::for_builtin("apps", "Deployment").root;
        let cfg = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let err = validate(&cfg, &node, &mut Vec::new()).unwrap_err();
        assert_eq!(
            err,
            ".spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
        );
    }
}
