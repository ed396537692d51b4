//! Bringing one child to its desired state: the pure decision ([`plan`]) and the
//! API calls that carry it out.
//!
//! * New children are created with POST, not server-side apply: a POST fails with
//!   409 AlreadyExists when an object of that name exists that our (possibly
//!   stale) cache did not show, so the host never silently takes over somebody
//!   else's object. Existing children it controls are updated with server-side
//!   apply under the controller's field manager (`force`, since the host owns the
//!   fields the plugin sets and must restore them after a hand edit).
//! * No API write happens when the observed child already matches ([`crate::diff`]).
//! * Deletes carry a uid precondition so a same-named successor is never deleted.

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::{Value, json};

use crate::crd::UpdateMethod;
use crate::diff::{APPLIED_HASH_ANNOTATION, is_subset, stable_hash};

/// The controller owner reference the host puts on every child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// Parent apiVersion.
    pub api_version: String,
    /// Parent kind.
    pub kind: String,
    /// Parent name.
    pub name: String,
    /// Parent uid.
    pub uid: String,
}

impl OwnerRef {
    fn to_json(&self) -> Value {
        json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }
}

/// The object the host applies: the plugin's object plus the controller owner
/// reference and the applied-hash annotation.
pub fn desired_object(plugin_object: &Value, owner: &OwnerRef) -> Value {
    let hash = stable_hash(plugin_object);
    let mut v = plugin_object.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        let ann = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = ann.as_object_mut() {
            a.insert(APPLIED_HASH_ANNOTATION.into(), Value::String(hash));
        }
        meta.insert("ownerReferences".into(), json!([owner.to_json()]));
    }
    v
}

/// The uid of an object's controller owner, if any.
pub fn controller_uid(obj: &DynamicObject) -> Option<&str> {
    obj.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

/// What to do with one desired child.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildAction {
    /// Not there yet: create it.
    Create,
    /// Ours and different: server-side apply.
    Apply,
    /// Ours and already as desired (or OnDelete): no write.
    Unchanged,
    /// Ours, different, Recreate strategy: delete (uid precondition); the next pass creates it.
    Recreate {
        /// uid of the observed child, for the precondition.
        uid: String,
    },
    /// Being deleted: wait for it to go away.
    Wait,
    /// Exists and is not controlled by this parent: never taken over.
    Collision(String),
}

/// Decides what to do with one child. `desired` is [`desired_object`]'s output.
pub fn plan(
    desired: &Value,
    observed: Option<&DynamicObject>,
    parent_uid: &str,
    method: UpdateMethod,
) -> ChildAction {
    let Some(obs) = observed else {
        return ChildAction::Create;
    };
    if obs.metadata.deletion_timestamp.is_some() {
        return ChildAction::Wait;
    }
    match controller_uid(obs) {
        Some(u) if u == parent_uid => {}
        Some(_) => return ChildAction::Collision("it is controlled by another owner".into()),
        None => return ChildAction::Collision("it exists and has no controller owner".into()),
    }
    let observed_json = match serde_json::to_value(obs) {
        Ok(v) => v,
        Err(_) => return ChildAction::Apply,
    };
    if is_subset(desired, &observed_json) {
        return ChildAction::Unchanged;
    }
    match method {
        UpdateMethod::InPlace => ChildAction::Apply,
        UpdateMethod::OnDelete => ChildAction::Unchanged,
        UpdateMethod::Recreate => ChildAction::Recreate {
            uid: obs.metadata.uid.clone().unwrap_or_default(),
        },
    }
}

/// Creates a child (POST). 409 AlreadyExists tells the caller to look again.
pub async fn create(
    api: &Api<DynamicObject>,
    desired: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let obj: DynamicObject =
        serde_json::from_value(desired.clone()).map_err(kube::Error::SerdeError)?;
    let pp = PostParams {
        dry_run: false,
        field_manager: Some(field_manager.to_string()),
    };
    api.create(&pp, &obj).await
}

/// Server-side applies a child under the controller's field manager.
pub async fn apply(
    api: &Api<DynamicObject>,
    name: &str,
    desired: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let pp = PatchParams::apply(field_manager).force();
    api.patch(name, &pp, &Patch::Apply(desired)).await
}

/// Deletes a child, only if it is still the object with `uid`.
pub async fn delete(api: &Api<DynamicObject>, name: &str, uid: &str) -> Result<(), kube::Error> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    api.delete(name, &dp).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerRef {
        OwnerRef {
            api_version: "example.com/v1".into(),
            kind: "Site".into(),
            name: "s".into(),
            uid: "p-uid".into(),
        }
    }

    fn plugin_cm(data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "web", "namespace": "ns", "labels": {"a": "b"}},
               "data": {"k": data}})
    }

    fn observed_from(desired: &Value, owner_uid: Option<&str>) -> DynamicObject {
        let mut v = desired.clone();
        v["metadata"]["uid"] = json!("c-uid");
        v["metadata"]["resourceVersion"] = json!("7");
        v["metadata"]["managedFields"] = json!([{"manager": "x"}]);
        match owner_uid {
            Some(u) => v["metadata"]["ownerReferences"][0]["uid"] = json!(u),
            None => {
                v["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("ownerReferences");
            }
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn desired_object_carries_controller_ref_and_hash() {
        let d = desired_object(&plugin_cm("1"), &owner());
        let r = &d["metadata"]["ownerReferences"][0];
        assert_eq!(r["controller"], true);
        assert_eq!(r["blockOwnerDeletion"], true);
        assert_eq!(r["uid"], "p-uid");
        assert_eq!(
            d["metadata"]["annotations"][APPLIED_HASH_ANNOTATION],
            json!(stable_hash(&plugin_cm("1")))
        );
        assert_eq!(d["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn missing_child_is_created_and_matching_child_left_alone() {
        let d = desired_object(&plugin_cm("1"), &owner());
        assert_eq!(
            plan(&d, None, "p-uid", UpdateMethod::InPlace),
            ChildAction::Create
        );
        let obs = observed_from(&d, Some("p-uid"));
        assert_eq!(
            plan(&d, Some(&obs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Unchanged
        );
    }

    #[test]
    fn changed_child_follows_the_update_method() {
        let old = desired_object(&plugin_cm("1"), &owner());
        let obs = observed_from(&old, Some("p-uid"));
        let new = desired_object(&plugin_cm("2"), &owner());
        assert_eq!(
            plan(&new, Some(&obs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Apply
        );
        assert_eq!(
            plan(&new, Some(&obs), "p-uid", UpdateMethod::OnDelete),
            ChildAction::Unchanged
        );
        assert_eq!(
            plan(&new, Some(&obs), "p-uid", UpdateMethod::Recreate),
            ChildAction::Recreate {
                uid: "c-uid".into()
            }
        );
    }

    #[test]
    fn field_dropped_by_plugin_is_detected_through_the_hash() {
        let mut with_extra = plugin_cm("1");
        with_extra["data"]["extra"] = json!("x");
        let obs = observed_from(&desired_object(&with_extra, &owner()), Some("p-uid"));
        let d = desired_object(&plugin_cm("1"), &owner());
        assert_eq!(
            plan(&d, Some(&obs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Apply
        );
    }

    #[test]
    fn other_owners_objects_are_never_taken_over() {
        let d = desired_object(&plugin_cm("1"), &owner());
        let theirs = observed_from(&d, Some("other-uid"));
        assert!(matches!(
            plan(&d, Some(&theirs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Collision(_)
        ));
        let orphan = observed_from(&d, None);
        assert!(matches!(
            plan(&d, Some(&orphan), "p-uid", UpdateMethod::InPlace),
            ChildAction::Collision(_)
        ));
    }
}
