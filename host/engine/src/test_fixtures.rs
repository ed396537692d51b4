//! Fixtures shared by the unit tests of the decision core (`decide/tests.rs`)
//! and the planner (`plan/tests.rs`): one controller with ConfigMap children
//! of a `Site` parent, and the objects around it.

use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};
use wr_runtime::{CallLimits, ReconcileResponse};

use crate::apply::{self, OwnerRef};
use crate::crd::UpdateMethod;
use crate::finalize;
use crate::resolve::Resolved;
use crate::status_schema::SchemaCheck;
use crate::target::{Target, TargetChild};
use crate::validate::DeclaredKind;

/// A namespaced resource with a status subresource.
pub fn resolved(api_version: &str, kind: &str, plural: &str) -> Resolved {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Resolved {
        ar: ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        },
        namespaced: true,
        status_subresource: true,
    }
}

/// Controller `c`: `Site` parents (example.com/v1), ConfigMap children
/// updated with `method`, one parent at a time.
pub fn target(method: UpdateMethod, finalize: bool) -> Target {
    Target {
        name: "c".into(),
        field_manager: "wasm-reconciler/c".into(),
        finalizer: finalize::finalizer_name("c"),
        finalize,
        parent: resolved("example.com/v1", "Site", "sites"),
        declared: vec![DeclaredKind {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespaced: true,
        }],
        children: vec![TargetChild {
            resolved: resolved("v1", "ConfigMap", "configmaps"),
            method,
            rolling: Default::default(),
        }],
        related: vec![],
        config: Some(json!({"k": 1})),
        limits: CallLimits::default(),
        concurrency: 1,
        resync: None,
        status_schema: SchemaCheck::BuiltIn,
        status_mode: crate::status::StatusMode::Merge,
        adoption: crate::crd::Adoption::Never,
        decorate: None,
        shard_labels: false,
    }
}

/// A ConfigMap as a plugin returns it.
pub fn cm(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}})
}

/// A child as the host leaves it after applying `plugin_obj` for `owner_uid`.
pub fn existing(plugin_obj: &Value, owner_uid: &str, uid: &str) -> DynamicObject {
    let owner = OwnerRef {
        api_version: "example.com/v1".into(),
        kind: "Site".into(),
        name: "s".into(),
        uid: owner_uid.into(),
    };
    let mut v = apply::desired_object(plugin_obj, &owner);
    v["metadata"]["uid"] = json!(uid);
    serde_json::from_value(v).unwrap()
}

/// A plugin answer with just these children.
pub fn answer(children: Vec<Value>) -> ReconcileResponse {
    ReconcileResponse {
        children,
        conditions: vec![],
        status: None,
        requeue_after_seconds: None,
        events: vec![],
        finalized: false,
    }
}
