//! The oracle: what the healthy plugin (`adversarial`, mode `flaky`) must have
//! produced for a parent, computed natively from the parent's spec. It is an
//! independent copy of the plugin's logic on purpose: the harness never asks
//! the host (or the plugin) what the answer should be.

use std::collections::BTreeMap;

use serde_json::Value;

/// Label naming the parent (set by the plugin).
pub const PARENT_LABEL: &str = "chaos.wasm-reconciler.dev/parent";
/// Label naming the plugin version that wrote the child.
pub const VERSION_LABEL: &str = "chaos.wasm-reconciler.dev/version";

/// One desired child ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredChild {
    pub name: String,
    pub data: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// Desired children of a parent object, by name, for plugin `version`.
pub fn desired_children(parent: &Value, version: &str) -> BTreeMap<String, DesiredChild> {
    let name = parent
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let value = parent
        .pointer("/spec/value")
        .and_then(Value::as_str)
        .unwrap_or("");
    let keys = parent
        .pointer("/spec/keys")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for key in keys.iter().filter_map(Value::as_str) {
        let child = format!("{name}-{key}");
        let data = BTreeMap::from([
            ("key".to_string(), key.to_string()),
            ("value".to_string(), value.to_string()),
            ("version".to_string(), version.to_string()),
        ]);
        let labels = BTreeMap::from([
            (PARENT_LABEL.to_string(), name.to_string()),
            (VERSION_LABEL.to_string(), version.to_string()),
        ]);
        out.insert(
            child.clone(),
            DesiredChild {
                name: child,
                data,
                labels,
            },
        );
    }
    out
}

/// The status fields the plugin reports for a parent.
pub fn desired_status(parent: &Value, version: &str) -> (u64, String) {
    (
        desired_children(parent, version).len() as u64,
        version.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_child_per_key_with_value_and_version() {
        let p = json!({"metadata": {"name": "p"}, "spec": {"keys": ["a", "d"], "value": "x"}});
        let d = desired_children(&p, "v2");
        assert_eq!(d.keys().collect::<Vec<_>>(), ["p-a", "p-d"]);
        assert_eq!(d["p-d"].data["value"], "x");
        assert_eq!(d["p-d"].data["version"], "v2");
        assert_eq!(d["p-a"].labels[PARENT_LABEL], "p");
        assert!(desired_children(&json!({"metadata": {"name": "q"}}), "v1").is_empty());
    }
}
