//! Adding and removing the controller's finalizer on a parent.
//!
//! Both are JSON patches guarded by a `test` operation, so they are safe against
//! a stale cache and concurrent writers: adding tests the `resourceVersion` we
//! saw (so it cannot land on an object whose deletion started after we looked,
//! and the API server refuses new finalizers on deleting objects anyway);
//! removing tests the exact finalizer list we saw and removes only ours.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// Finalizer name a controller puts on its parents.
pub fn finalizer_name(controller: &str) -> String {
    format!("{}/{controller}", crate::crd::GROUP)
}

/// True when `obj` carries finalizer `f`.
pub fn has_finalizer(obj: &DynamicObject, f: &str) -> bool {
    obj.metadata
        .finalizers
        .as_ref()
        .is_some_and(|l| l.iter().any(|x| x == f))
}

/// The JSON patch that adds `f` (precondition: the resourceVersion we saw).
pub fn add_patch(obj: &DynamicObject, f: &str) -> Value {
    let rv = obj.metadata.resource_version.clone().unwrap_or_default();
    let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv})];
    match &obj.metadata.finalizers {
        Some(l) if !l.is_empty() => {
            ops.push(json!({"op": "add", "path": "/metadata/finalizers/-", "value": f}))
        }
        _ => ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [f]})),
    }
    Value::Array(ops)
}

/// The JSON patch that removes `f` (precondition: the finalizer list we saw).
pub fn remove_patch(obj: &DynamicObject, f: &str) -> Value {
    let current = obj.metadata.finalizers.clone().unwrap_or_default();
    let rest: Vec<&String> = current.iter().filter(|x| *x != f).collect();
    json!([
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {"op": "replace", "path": "/metadata/finalizers", "value": rest},
    ])
}

async fn json_patch(
    api: &Api<DynamicObject>,
    name: &str,
    patch: Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let p: json_patch::Patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    let pp = PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..PatchParams::default()
    };
    api.patch(name, &pp, &Patch::<()>::Json(p)).await
}

/// Adds finalizer `f` to `obj`; returns the updated object.
pub async fn add(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    f: &str,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    json_patch(api, &name, add_patch(obj, f), field_manager).await
}

/// Removes finalizer `f` from `obj`.
pub async fn remove(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    f: &str,
    field_manager: &str,
) -> Result<(), kube::Error> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    json_patch(api, &name, remove_patch(obj, f), field_manager)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(finalizers: Option<Vec<&str>>) -> DynamicObject {
        let mut v = json!({"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "p", "resourceVersion": "42"}});
        if let Some(f) = finalizers {
            v["metadata"]["finalizers"] = json!(f);
        }
        serde_json::from_value(v).unwrap()
    }

    fn apply(o: &DynamicObject, patch: Value) -> Result<Value, json_patch::PatchError> {
        let mut doc = serde_json::to_value(o).unwrap();
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut doc, &p).map(|_| doc)
    }

    #[test]
    fn add_creates_or_extends_the_list() {
        let f = finalizer_name("c");
        assert_eq!(f, "wasm-reconciler.dev/c");
        let d = apply(&obj(None), add_patch(&obj(None), &f)).unwrap();
        assert_eq!(d["metadata"]["finalizers"], json!([f]));
        let o = obj(Some(vec!["other"]));
        let d = apply(&o, add_patch(&o, &f)).unwrap();
        assert_eq!(d["metadata"]["finalizers"], json!(["other", f]));
    }

    #[test]
    fn add_fails_on_a_newer_object() {
        let seen = obj(None);
        let mut newer = obj(None);
        newer.metadata.resource_version = Some("43".into());
        assert!(apply(&newer, add_patch(&seen, "f")).is_err());
    }

    #[test]
    fn remove_keeps_other_finalizers_and_fails_if_list_changed() {
        let o = obj(Some(vec!["a", "mine", "b"]));
        let d = apply(&o, remove_patch(&o, "mine")).unwrap();
        assert_eq!(d["metadata"]["finalizers"], json!(["a", "b"]));
        let changed = obj(Some(vec!["a", "mine"]));
        assert!(apply(&changed, remove_patch(&o, "mine")).is_err());
        assert!(has_finalizer(&o, "mine"));
        assert!(!has_finalizer(&o, "zzz"));
    }
}
