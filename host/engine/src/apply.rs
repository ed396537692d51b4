//! Bringing one child to its desired state: the pure decision ([`decide`]) and the
//! API calls that carry it out.
//!
//! [`decide`] is the ONE place that judges "does this child need a write, and
//! which kind": the reconcile path (`reconcile.rs`, `apply_child`) acts on it and
//! `wasm-reconciler plan` ([`crate::plan`]) reports it, so a preview cannot
//! disagree with what a rollout then does.
//!
//! * New children are created with server-side apply **without** `force`, under
//!   the controller's field manager, so the manager's managedFields entry is an
//!   `Apply` entry from the first write: when the plugin later stops setting a
//!   field, the next apply removes it. (A POST would record an `Update` entry
//!   owning every field, and those fields could then never be removed by apply —
//!   the stale-field bug `plan_preview`'s "drop" group shows.) Not forcing keeps
//!   the old POST's safety: an object of that name that our (possibly stale)
//!   cache did not show and whose fields differ answers 409 Conflict, and one
//!   with another controller owner answers 422 (only one controller reference is
//!   allowed), so the host never takes over somebody else's object; the caller
//!   looks again and reports the collision. The one case a create-by-apply
//!   cannot refuse is an object with no controller whose fields already equal
//!   ours exactly, appearing inside the cache's staleness window: it is adopted,
//!   which leaves it exactly as the host would have created it.
//!   Existing children it controls are updated with server-side apply under the
//!   same field manager (`force`, since the host owns the fields the plugin sets
//!   and must restore them after a hand edit).
//! * No API write happens when the observed child already matches ([`crate::diff`]).
//! * Deletes carry a uid precondition so a same-named successor is never deleted.

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use serde_json::{Value, json};

use crate::adopt::AdoptPolicy;
use crate::crd::UpdateMethod;
use crate::diff::{APPLIED_HASH_ANNOTATION, is_subset_of, stable_hash};

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
    /// Ours and already as desired: no write.
    Unchanged,
    /// Ours and different, but the OnDelete strategy leaves existing children
    /// alone: no write (it is created anew with the desired content only after
    /// someone deletes it).
    Left,
    /// Ours, different, Recreate strategy: delete (uid precondition); the next pass creates it.
    Recreate {
        /// uid of the observed child, for the precondition.
        uid: String,
    },
    /// Being deleted: wait for it to go away.
    Wait,
    /// Ours and different, but a rolling update holds it back until the
    /// children updated before it pass their status checks (why, for plans
    /// and logs). Set by [`crate::decide::rolling::gate`], never by [`decide`].
    Queued(String),
    /// Exists and is not controlled by this parent: never taken over.
    Collision(String),
    /// Exists with no controller owner and `spec.adoption: Orphans` admits
    /// it: adopted by a forced apply ([`crate::adopt`]).
    Adopt,
    /// Ours, but Metacontroller's leftovers are on it: its fields are taken
    /// over and the leftovers removed ([`crate::adopt`]).
    TakeOver,
}

/// Decides what to do with one child. `desired` is [`desired_object`]'s output;
/// `observed` is whatever object of that kind and name the host sees (any owner).
/// Orphans are never adopted ([`decide_adopting`] with the controller's policy).
pub fn decide(
    desired: &Value,
    observed: Option<&DynamicObject>,
    parent_uid: &str,
    method: UpdateMethod,
) -> ChildAction {
    decide_adopting(desired, observed, parent_uid, method, None)
}

/// [`decide`] under an adoption policy: an orphan the policy admits is
/// adopted, and a child of this parent with Metacontroller's leftovers is
/// taken over ([`crate::adopt`]).
pub fn decide_adopting(
    desired: &Value,
    observed: Option<&DynamicObject>,
    parent_uid: &str,
    method: UpdateMethod,
    adopt: Option<&AdoptPolicy>,
) -> ChildAction {
    let Some(obs) = observed else {
        return ChildAction::Create;
    };
    if obs.metadata.deletion_timestamp.is_some() {
        return ChildAction::Wait;
    }
    match controller_uid(obs) {
        Some(u) if u == parent_uid => {
            if crate::adopt::has_leftovers(obs) {
                return ChildAction::TakeOver;
            }
        }
        Some(_) => return ChildAction::Collision("it is controlled by another owner".into()),
        None => {
            return match adopt.map(|p| p.admits(obs)) {
                Some(Ok(())) => ChildAction::Adopt,
                Some(Err(why)) => ChildAction::Collision(why),
                None => ChildAction::Collision("it exists and has no controller owner".into()),
            };
        }
    }
    // Compared in place: turning the whole observed child into a `Value`
    // tree per reconcile was a measurable share of the host's CPU.
    if is_subset_of(desired, obs) {
        return ChildAction::Unchanged;
    }
    match method {
        UpdateMethod::InPlace | UpdateMethod::RollingInPlace => ChildAction::Apply,
        UpdateMethod::OnDelete => ChildAction::Left,
        UpdateMethod::Recreate | UpdateMethod::RollingRecreate => ChildAction::Recreate {
            uid: obs.metadata.uid.clone().unwrap_or_default(),
        },
    }
}

/// How logs, events and conditions name a child: `"<Kind> <namespace>/<name>"`
/// (`"<Kind> <name>"` when cluster-scoped), so children of a cluster-scoped
/// parent spread over namespaces can be told apart.
pub fn child_label(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// The message of a [`ChildAction::Collision`] on the parent's `Ready` condition
/// and in the Warning event; `label` is from [`child_label`].
pub fn collision_message(label: &str, why: &str) -> String {
    format!("{label} not applied: {why}")
}

/// The result of [`create`].
#[derive(Debug)]
pub struct Created {
    /// The object as the server returned it.
    pub object: DynamicObject,
    /// The server created it (201). False when an identical object was already
    /// there (our own create whose echo the cache had not shown yet): no event.
    pub created: bool,
}

/// Creates a child by server-side apply without `force` (see the module doc).
/// 409 (fields owned by someone else) or 422 (another controller owner) tell the
/// caller to look again.
///
/// Sent through [`kube::Client::send`] rather than `Api::patch` because only the
/// response code tells a real creation (201) from an apply that found our own
/// object already there (200) — `Api::patch` drops it, and without it a pass
/// reading a lagging cache would report a second "created" event.
pub async fn create(
    api: &Api<DynamicObject>,
    name: &str,
    desired: &Value,
    field_manager: &str,
) -> Result<Created, kube::Error> {
    use http_body_util::BodyExt;
    let pp = PatchParams::apply(field_manager);
    let req = kube::core::Request::new(api.resource_url())
        .patch(name, &pp, &Patch::Apply(desired))
        .map_err(kube::Error::BuildRequest)?;
    let res = api
        .clone()
        .into_client()
        .send(req.map(kube::client::Body::from))
        .await?;
    let code = res.status();
    let bytes = res.into_body().collect().await?.to_bytes();
    if code.is_client_error() || code.is_server_error() {
        let status = serde_json::from_slice::<kube::core::Status>(&bytes).unwrap_or_else(|_| {
            kube::core::Status::failure(
                &String::from_utf8_lossy(&bytes),
                "Failed to parse error data",
            )
            .with_code(code.as_u16())
        });
        return Err(kube::Error::Api(status.boxed()));
    }
    let object = serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?;
    Ok(Created {
        object,
        created: code == http::StatusCode::CREATED,
    })
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
            decide(&d, None, "p-uid", UpdateMethod::InPlace),
            ChildAction::Create
        );
        let obs = observed_from(&d, Some("p-uid"));
        assert_eq!(
            decide(&d, Some(&obs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Unchanged
        );
    }

    #[test]
    fn changed_child_follows_the_update_method() {
        let old = desired_object(&plugin_cm("1"), &owner());
        let obs = observed_from(&old, Some("p-uid"));
        let new = desired_object(&plugin_cm("2"), &owner());
        assert_eq!(
            decide(&new, Some(&obs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Apply
        );
        assert_eq!(
            decide(&new, Some(&obs), "p-uid", UpdateMethod::OnDelete),
            ChildAction::Left
        );
        assert_eq!(
            decide(&new, Some(&obs), "p-uid", UpdateMethod::Recreate),
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
            decide(&d, Some(&obs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Apply
        );
    }

    #[test]
    fn unchanged_children_stay_unchanged_under_every_method_and_deleting_ones_are_awaited() {
        let d = desired_object(&plugin_cm("1"), &owner());
        let obs = observed_from(&d, Some("p-uid"));
        for m in [
            UpdateMethod::InPlace,
            UpdateMethod::OnDelete,
            UpdateMethod::Recreate,
        ] {
            assert_eq!(decide(&d, Some(&obs), "p-uid", m), ChildAction::Unchanged);
        }
        let mut going = obs.clone();
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(
            decide(&d, Some(&going), "p-uid", UpdateMethod::InPlace),
            ChildAction::Wait
        );
    }

    #[test]
    fn other_owners_objects_are_never_taken_over() {
        let d = desired_object(&plugin_cm("1"), &owner());
        let theirs = observed_from(&d, Some("other-uid"));
        assert!(matches!(
            decide(&d, Some(&theirs), "p-uid", UpdateMethod::InPlace),
            ChildAction::Collision(_)
        ));
        let orphan = observed_from(&d, None);
        assert!(matches!(
            decide(&d, Some(&orphan), "p-uid", UpdateMethod::InPlace),
            ChildAction::Collision(_)
        ));
    }
}
