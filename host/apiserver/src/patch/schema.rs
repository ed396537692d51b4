//! Structural hints for merging: which lists are atomic, sets or maps keyed
//! by some fields, and which maps are atomic. This is the small part of the
//! OpenAPI schema that server-side apply and strategic merge patch need; a
//! full typed schema (as structured-merge-diff carries) is not worth hand
//! writing for the handful of kinds this server stores.

use std::collections::BTreeMap;

use serde_json::Value;

/// How a JSON list merges (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum ListType {
    /// Replaced as a whole; one owner. The default for lists without a hint.
    #[default]
    Atomic,
    /// A set of scalars; each value owned separately.
    Set,
    /// A map keyed by these item fields; each item owned separately.
    /// `defaults` fill a missing key field (e.g. `protocol: TCP`).
    Map {
        keys: Vec<String>,
        defaults: BTreeMap<String, Value>,
    },
}

/// The schema of one position in an object.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    /// Named (struct) fields.
    pub(crate) fields: BTreeMap<String, Node>,
    /// Schema of list items, or of map values when `map_like`.
    pub(crate) elem: Option<Box<Node>>,
    /// Merge semantics when the value here is a list.
    pub(crate) list: ListType,
    /// `x-kubernetes-map-type: atomic`: the map is replaced as a whole.
    pub(crate) atomic_map: bool,
    /// Keys other than `fields` are map entries (`additionalProperties`),
    /// not struct fields; this changes how ownership is recorded.
    pub(crate) map_like: bool,
}

static UNKNOWN: Node = Node {
    fields: BTreeMap::new(),
    elem: None,
    list: ListType::Atomic,
    atomic_map: false,
    map_like: false,
};

impl Node {
    /// The schema of field or map entry `key`.
    pub(crate) fn child(&self, key: &str) -> &Node {
        match self.fields.get(key) {
            Some(n) => n,
            None => self.elem.as_deref().unwrap_or(&UNKNOWN),
        }
    }

    /// The schema of list items.
    pub(crate) fn item(&self) -> &Node {
        self.elem.as_deref().unwrap_or(&UNKNOWN)
    }

    /// Whether `key` is a struct field (as opposed to a map entry).
    pub(crate) fn is_field(&self, key: &str) -> bool {
        !self.map_like || self.fields.contains_key(key)
    }

    /// The node at a dotted path, creating it; `[]` descends into items or
    /// map values (`spec.template.spec.containers[].ports`).
    pub(crate) fn at_mut(&mut self, path: &str) -> &mut Node {
        let mut node = self;
        for seg in path.split('.').filter(|s| !s.is_empty()) {
            let (name, items) = match seg.strip_suffix("[]") {
                Some(n) => (n, true),
                None => (seg, false),
            };
            if !name.is_empty() {
                node = node.fields.entry(name.to_owned()).or_default();
            }
            if items {
                node = node.elem.get_or_insert_with(Box::default);
            }
        }
        node
    }

    pub(crate) fn keyed(&mut self, path: &str, keys: &[&str]) {
        let mut defaults = BTreeMap::new();
        if keys.contains(&"protocol") {
            defaults.insert("protocol".to_owned(), Value::String("TCP".to_owned()));
        }
        self.at_mut(path).list = ListType::Map {
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            defaults,
        };
    }

    pub(crate) fn set(&mut self, path: &str) {
        self.at_mut(path).list = ListType::Set;
    }

    pub(crate) fn map(&mut self, path: &str) {
        self.at_mut(path).map_like = true;
    }

    pub(crate) fn atomic_map(&mut self, path: &str) {
        let n = self.at_mut(path);
        n.map_like = true;
        n.atomic_map = true;
    }
}

/// Merge hints for one kind: list types and map types by position.
///
/// Positions without a hint behave like structured-merge-diff's "deduced"
/// schema: maps merge key by key, lists are atomic.
#[derive(Debug, Clone)]
pub struct Schema {
    pub(crate) root: Node,
    /// The resource has a `/status` subresource, so writes to the main
    /// resource ignore `status` (kube-apiserver's reset fields).
    pub(crate) status_subresource: bool,
}

impl Schema {
    /// Hints for a built-in kind (`group` is `""` for core, `"apps"`, ...).
    /// Kinds not in the table get [`Schema::unknown`].
    pub fn for_builtin(group: &str, kind: &str) -> Schema {
        let mut root = Node::default();
        super::builtin::describe(&mut root, group, kind);
        object_meta(root.at_mut("metadata"));
        Schema::new(root)
    }

    fn new(root: Node) -> Schema {
        Schema {
            root,
            status_subresource: false,
        }
    }

    /// Declares that the resource has a `/status` subresource: server-side
    /// apply to the main resource then ignores `status` in the configuration
    /// (neither set nor owned), as kube-apiserver's reset fields do.
    pub fn with_status_subresource(mut self, enabled: bool) -> Schema {
        self.status_subresource = enabled;
        self
    }

    /// Hints from a CRD version's `openAPIV3Schema`
    /// (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
    /// `x-kubernetes-map-type`, `properties`, `additionalProperties`, `items`).
    /// `metadata` always gets the ObjectMeta hints, as for CRDs the apiserver
    /// uses the built-in ObjectMeta schema whatever the CRD says.
    pub fn from_openapi_v3(schema: &Value) -> Schema {
        let mut root = node_from_openapi(schema);
        let meta = root.at_mut("metadata");
        *meta = Node::default();
        object_meta(meta);
        Schema::new(root)
    }

    /// No hints: lists atomic, maps granular (ObjectMeta still has its hints).
    pub fn unknown() -> Schema {
        let mut root = Node::default();
        object_meta(root.at_mut("metadata"));
        Schema::new(root)
    }
}

/// ObjectMeta: labels/annotations are maps, ownerReferences keyed by uid,
/// finalizers a set, managedFields atomic.
pub(crate) fn object_meta(meta: &mut Node) {
    meta.map("labels");
    meta.map("annotations");
    meta.keyed("ownerReferences", &["uid"]);
    meta.set("finalizers");
}

fn node_from_openapi(s: &Value) -> Node {
    let mut node = Node::default();
    let Some(obj) = s.as_object() else {
        return node;
    };
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            node.fields.insert(name.clone(), node_from_openapi(sub));
        }
    }
    match obj.get("additionalProperties") {
        Some(Value::Object(sub)) => {
            node.map_like = true;
            node.elem = Some(Box::new(node_from_openapi(&Value::Object(sub.clone()))));
        }
        Some(Value::Bool(true)) => node.map_like = true,
        _ => {}
    }
    if obj.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
        node.atomic_map = true;
    }
    if let Some(items) = obj.get("items") {
        let item = node_from_openapi(items);
        node.list = match obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => {
                let keys: Vec<String> = obj
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|ks| {
                        ks.iter()
                            .filter_map(|k| k.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let defaults = keys
                    .iter()
                    .filter_map(|k| {
                        let d = items.get("properties")?.get(k)?.get("default")?;
                        Some((k.clone(), d.clone()))
                    })
                    .collect();
                if keys.is_empty() {
                    ListType::Atomic
                } else {
                    ListType::Map { keys, defaults }
                }
            }
            _ => ListType::Atomic,
        };
        node.elem = Some(Box::new(item));
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openapi_list_and_map_types_are_read() {
        let s = Schema::from_openapi_v3(&json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
                    "extra": {"type": "object", "additionalProperties": {"type": "string"}}
                }}
            }
        }));
        let spec = s.root.child("spec");
        assert!(
            matches!(&spec.child("items").list, ListType::Map { keys, .. } if keys == &["name"])
        );
        assert_eq!(spec.child("tags").list, ListType::Set);
        assert_eq!(spec.child("args").list, ListType::Atomic);
        assert!(spec.child("selector").atomic_map);
        assert!(!spec.child("extra").is_field("anything"));
        assert_eq!(
            s.root.child("metadata").child("finalizers").list,
            ListType::Set
        );
    }

    #[test]
    fn unknown_positions_are_granular_maps_and_atomic_lists() {
        let s = Schema::unknown();
        let n = s.root.child("spec").child("whatever");
        assert_eq!(n.list, ListType::Atomic);
        assert!(!n.atomic_map);
    }
}
