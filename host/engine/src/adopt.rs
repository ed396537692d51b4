//! Adoption of orphans and removal of Metacontroller leftovers (issue 18).
//!
//! * **Adoption** is opt-in (`spec.adoption: Orphans`): an object at a
//!   desired child's name that has no controller owner is adopted instead of
//!   reported as a `ChildConflict`, if the parent has no `spec.selector`, or
//!   the orphan's labels match it (Metacontroller claims children that way).
//!   An object with another controller is never taken.
//! * **Leftovers.** A child Metacontroller made carries the annotation
//!   [`METACONTROLLER_ANNOTATION`] and `managedFields` entries of manager
//!   [`METACONTROLLER_MANAGER`] (operation `Update`). A forced server-side
//!   apply alone takes over only the fields it sets: the other fields stay
//!   owned by `metacontroller`, so the annotation (and any field the plugin
//!   no longer sets) would stay forever. So the host first moves the
//!   `metacontroller` entries' field sets into its own `Apply` entry (a JSON
//!   patch of `metadata.managedFields` guarded by the resourceVersion — what
//!   client-go's `csaupgrade` does for `kubectl`'s client-side apply), then
//!   force-applies the desired child once: every field it now owns and does
//!   not set, the annotation included, is removed by that apply, and
//!   `metacontroller` no longer appears in `managedFields`.
//!   This runs for an adopted orphan and for a child this parent already
//!   controls (Metacontroller sets the same controller reference to the same
//!   parent, so a migrated child is usually already "ours").

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{Selector, SelectorExt};
use serde_json::{Map, Value, json};

use crate::crd::Adoption;

/// The client-side-apply annotation Metacontroller puts on its children.
pub const METACONTROLLER_ANNOTATION: &str = "metacontroller.k8s.io/last-applied-configuration";
/// The field manager Metacontroller writes children as.
pub const METACONTROLLER_MANAGER: &str = "metacontroller";

/// Whether orphans at a desired child's name are adopted for one parent.
#[derive(Debug, Clone)]
pub struct AdoptPolicy {
    /// `spec.adoption: Orphans`.
    pub orphans: bool,
    /// The parent's `spec.selector`: `None` when it has none; `Err` when it
    /// is not a label selector (then nothing is adopted, and the conflict
    /// says why).
    pub selector: Option<Result<Selector, String>>,
}

impl AdoptPolicy {
    /// The policy of `adoption` for `parent`.
    pub fn of(adoption: Adoption, parent: &DynamicObject) -> Self {
        let selector = parent.data.pointer("/spec/selector").map(|v| {
            serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>(
                v.clone(),
            )
            .map_err(|e| e.to_string())
            .and_then(|s| Selector::try_from(s).map_err(|e| e.to_string()))
            .map_err(|e| format!("the parent's spec.selector is not a label selector ({e})"))
        });
        Self {
            orphans: adoption == Adoption::Orphans,
            selector,
        }
    }

    /// `Ok` when the orphan `obj` may be adopted, else why not (the message
    /// of the conflict).
    pub fn admits(&self, obj: &DynamicObject) -> Result<(), String> {
        if !self.orphans {
            return Err("it exists and has no controller owner".into());
        }
        match &self.selector {
            None => Ok(()),
            Some(Err(why)) => Err(format!("it has no controller owner and {why}")),
            Some(Ok(sel)) => {
                let empty = std::collections::BTreeMap::new();
                if sel.matches(obj.metadata.labels.as_ref().unwrap_or(&empty)) {
                    Ok(())
                } else {
                    Err(
                        "it has no controller owner and its labels do not match the parent's \
                         spec.selector"
                            .into(),
                    )
                }
            }
        }
    }
}

/// Whether `obj` still carries what Metacontroller left on it (the cache
/// strips `managedFields`, so the annotation is what a decision sees).
pub fn has_leftovers(obj: &DynamicObject) -> bool {
    obj.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(METACONTROLLER_ANNOTATION))
        || obj
            .metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| m.iter().any(is_metacontroller))
}

fn is_metacontroller(
    e: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
) -> bool {
    e.manager.as_deref() == Some(METACONTROLLER_MANAGER) && e.subresource.is_none()
}

/// Deep union of two `fieldsV1` tries.
fn union(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => union(a, b),
            (Some(_), _) => {}
            (None, _) => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The JSON patch that moves the `metacontroller` entries of `obj`'s
/// `managedFields` (and the leftover annotation) into `field_manager`'s
/// `Apply` entry, guarded by `obj`'s resourceVersion; `None` when there is
/// nothing to move.
pub fn transfer_patch(obj: &Value, field_manager: &str) -> Option<Value> {
    let meta = obj.get("metadata")?;
    let entries: Vec<Value> = meta
        .get("managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mc = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(METACONTROLLER_MANAGER)
            && e.get("subresource").is_none()
    };
    let has_annotation = meta
        .pointer("/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(METACONTROLLER_ANNOTATION));
    if !has_annotation && !entries.iter().any(is_mc) {
        return None;
    }
    let mut moved = Map::new();
    let mut api_version = obj.get("apiVersion").cloned().unwrap_or(Value::Null);
    for e in entries.iter().filter(|e| is_mc(e)) {
        if let Some(f) = e.get("fieldsV1").and_then(Value::as_object) {
            union(&mut moved, f);
        }
        if let Some(v) = e.get("apiVersion") {
            api_version = v.clone();
        }
    }
    if has_annotation {
        let path = json!({"f:metadata": {"f:annotations": {format!("f:{METACONTROLLER_ANNOTATION}"): {}}}});
        if let Some(p) = path.as_object() {
            union(&mut moved, p);
        }
    }
    let is_ours = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(field_manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource").is_none()
    };
    let mut out: Vec<Value> = entries.iter().filter(|e| !is_mc(e)).cloned().collect();
    match out.iter_mut().find(|e| is_ours(e)) {
        Some(ours) => {
            let mut fields = ours
                .get("fieldsV1")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            union(&mut fields, &moved);
            ours["fieldsV1"] = Value::Object(fields);
        }
        None => out.push(json!({
            "manager": field_manager,
            "operation": "Apply",
            "apiVersion": api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": moved,
        })),
    }
    let rv = meta.get("resourceVersion").cloned().unwrap_or(Value::Null);
    Some(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/metadata/managedFields", "value": out},
    ]))
}

/// Adopts (or takes over) the child `name`: moves Metacontroller's field
/// ownership to `field_manager` if it left any, then force-applies `desired`
/// (which carries the controller owner reference). Two requests at most:
/// the managedFields patch (resourceVersion precondition: a 409 means the
/// object changed and the next pass decides again) and the apply.
pub async fn take_over(
    api: &Api<DynamicObject>,
    name: &str,
    desired: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let fresh = api.get(name).await?;
    let fresh_json = serde_json::to_value(&fresh).map_err(kube::Error::SerdeError)?;
    if let Some(patch) = transfer_patch(&fresh_json, field_manager) {
        tracing::info!(action = "take-over-fields", child = %name, "moving metacontroller's field ownership to the host");
        let p: json_patch::Patch =
            serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
        let pp = PatchParams {
            field_manager: Some(field_manager.to_string()),
            ..PatchParams::default()
        };
        api.patch(name, &pp, &Patch::<()>::Json(p)).await?;
    }
    let pp = PatchParams::apply(field_manager).force();
    api.patch(name, &pp, &Patch::Apply(desired)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(labels: Value, ann: bool) -> DynamicObject {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "labels": labels}});
        if ann {
            v["metadata"]["annotations"] = json!({METACONTROLLER_ANNOTATION: "{}"});
        }
        serde_json::from_value(v).unwrap()
    }

    fn parent(spec: Value) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Site",
            "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
        .unwrap()
    }

    #[test]
    fn never_refuses_and_orphans_follow_the_parent_selector() {
        let orphan = cm(json!({"app": "web"}), false);
        let p = parent(json!({}));
        assert!(
            AdoptPolicy::of(Adoption::Never, &p)
                .admits(&orphan)
                .is_err()
        );
        assert!(
            AdoptPolicy::of(Adoption::Orphans, &p)
                .admits(&orphan)
                .is_ok()
        );
        let sel = parent(json!({"selector": {"matchLabels": {"app": "web"}}}));
        assert!(
            AdoptPolicy::of(Adoption::Orphans, &sel)
                .admits(&orphan)
                .is_ok()
        );
        let other = parent(json!({"selector": {"matchLabels": {"app": "db"}}}));
        let why = AdoptPolicy::of(Adoption::Orphans, &other)
            .admits(&orphan)
            .unwrap_err();
        assert!(why.contains("spec.selector"), "{why}");
        let bad = parent(json!({"selector": "app=web"}));
        let why = AdoptPolicy::of(Adoption::Orphans, &bad)
            .admits(&orphan)
            .unwrap_err();
        assert!(why.contains("not a label selector"), "{why}");
    }

    #[test]
    fn leftovers_are_seen_by_the_annotation() {
        assert!(has_leftovers(&cm(json!({}), true)));
        assert!(!has_leftovers(&cm(json!({}), false)));
    }

    #[test]
    fn transfer_moves_metacontroller_fields_into_the_apply_entry() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "c", "resourceVersion": "7",
        "annotations": {METACONTROLLER_ANNOTATION: "{}"},
        "managedFields": [
            {"manager": "metacontroller", "operation": "Update", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:old": {}},
             "f:metadata": {"f:annotations": {"f:metacontroller.k8s.io/last-applied-configuration": {}}}}},
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:hand": {}}}}
        ]}});
        let patch = transfer_patch(&obj, "wasm-reconciler/c").unwrap();
        assert_eq!(
            patch[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"})
        );
        let entries = patch[1]["value"].as_array().unwrap();
        let managers: Vec<&str> = entries
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["kubectl-edit", "wasm-reconciler/c"]);
        assert_eq!(entries[1]["operation"], "Apply");
        assert_eq!(entries[1]["fieldsV1"]["f:data"], json!({"f:old": {}}));
        assert!(
            entries[1]["fieldsV1"]["f:metadata"]["f:annotations"]
                .get("f:metacontroller.k8s.io/last-applied-configuration")
                .is_some()
        );
    }

    #[test]
    fn transfer_merges_into_an_existing_apply_entry_and_is_none_without_leftovers() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "c", "resourceVersion": "7",
        "managedFields": [
            {"manager": "wasm-reconciler/c", "operation": "Apply", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:new": {}}}},
            {"manager": "metacontroller", "operation": "Update", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:old": {}}}}
        ]}});
        let patch = transfer_patch(&obj, "wasm-reconciler/c").unwrap();
        let entries = patch[1]["value"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0]["fieldsV1"]["f:data"],
            json!({"f:new": {}, "f:old": {}})
        );
        let clean = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c",
            "managedFields": [entries[0].clone()]}});
        assert_eq!(transfer_patch(&clean, "wasm-reconciler/c"), None);
    }
}
