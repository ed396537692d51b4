//! Small helpers over Kubernetes objects held as `serde_json::Value`.

use serde_json::{Map, Value, json};

/// Read access to the common fields of a Kubernetes object.
pub trait Meta {
    /// `apiVersion`, if present.
    fn api_version(&self) -> Option<&str>;
    /// `kind`, if present.
    fn kind(&self) -> Option<&str>;
    /// `metadata.name`, if present.
    fn name(&self) -> Option<&str>;
    /// `metadata.namespace`, if present.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.generation`, if present.
    fn generation(&self) -> Option<i64>;
    /// `metadata.labels[key]`, if present.
    fn label(&self, key: &str) -> Option<&str>;
    /// `metadata.annotations[key]`, if present.
    fn annotation(&self, key: &str) -> Option<&str>;
}

impl Meta for Value {
    fn api_version(&self) -> Option<&str> {
        self.get("apiVersion")?.as_str()
    }
    fn kind(&self) -> Option<&str> {
        self.get("kind")?.as_str()
    }
    // `get` chains rather than `Value::pointer`, which allocates two
    // `String`s per path segment to unescape it.
    fn name(&self) -> Option<&str> {
        self.get("metadata")?.get("name")?.as_str()
    }
    fn namespace(&self) -> Option<&str> {
        self.get("metadata")?.get("namespace")?.as_str()
    }
    fn generation(&self) -> Option<i64> {
        self.get("metadata")?.get("generation")?.as_i64()
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.get("metadata")?.get("labels")?.get(key)?.as_str()
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.get("metadata")?.get("annotations")?.get(key)?.as_str()
    }
}

/// A new object with `apiVersion`, `kind` and `metadata` (`name`, and
/// `namespace` when given). Add the rest with `obj["spec"] = json!(...)`.
pub fn object(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        metadata.insert("namespace".into(), json!(ns));
    }
    json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata })
}

/// Sets `metadata.labels[key] = value`, creating maps as needed.
pub fn label(obj: &mut Value, key: &str, value: &str) {
    set_meta_map(obj, "labels", key, value);
}

/// Sets `metadata.annotations[key] = value`, creating maps as needed.
pub fn annotate(obj: &mut Value, key: &str, value: &str) {
    set_meta_map(obj, "annotations", key, value);
}

fn set_meta_map(obj: &mut Value, map: &str, key: &str, value: &str) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let metadata = root.entry("metadata").or_insert_with(|| json!({}));
    if !metadata.is_object() {
        *metadata = json!({});
    }
    if let Some(meta) = metadata.as_object_mut() {
        let entries = meta.entry(map).or_insert_with(|| json!({}));
        if !entries.is_object() {
            *entries = json!({});
        }
        if let Some(entries) = entries.as_object_mut() {
            entries.insert(key.to_string(), json!(value));
        }
    }
}

/// Finds the object of `kind` named `name` in `objects` (e.g. observed children).
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o.kind() == Some(kind) && o.name() == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_reads_objects() {
        let mut cm = object("v1", "ConfigMap", Some("ns"), "c");
        label(&mut cm, "app", "web");
        annotate(&mut cm, "a", "b");
        assert_eq!(cm.kind(), Some("ConfigMap"));
        assert_eq!(cm.namespace(), Some("ns"));
        assert_eq!(cm.label("app"), Some("web"));
        assert_eq!(cm.annotation("a"), Some("b"));
        assert_eq!(
            serde_json::to_string(&cm).unwrap(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","labels":{"app":"web"},"annotations":{"a":"b"}}}"#
        );
        let all = vec![cm.clone(), object("v1", "Service", None, "c")];
        assert_eq!(
            find(&all, "Service", "c").and_then(Meta::kind),
            Some("Service")
        );
        assert!(find(&all, "Secret", "c").is_none());
    }
}
