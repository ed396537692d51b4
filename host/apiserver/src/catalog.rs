//! The catalog of built-in resources: every resource kube-apiserver serves by
//! default at the Kubernetes version this server reports ([`crate::version`]).
//!
//! Group, version, kind, list kind, plural and scope come from k8s-openapi's
//! `Resource`/`ListableResource` constants of each type (the crate's version
//! feature is the single source of the Kubernetes version); the schema for
//! OpenAPI comes from its `JsonSchema` impl. What k8s-openapi does not carry —
//! short names, categories, subresources, whether the registry strategy
//! maintains `metadata.generation` — is the compact table below, transcribed
//! from the `ShortNames()`/`Categories()`/`StatusREST`/`ScaleREST`/
//! `Generation = 1` code of `k8s.io/kubernetes/pkg/registry` (v1.37.2) and
//! checked against a real kube-apiserver's discovery (`tests/kube`).
//!
//! `authentication.k8s.io` and `authorization.k8s.io` (review endpoints, no
//! storage) are served by the authentication/authorization module, not here.

use std::collections::BTreeMap;

use k8s_openapi::{ClusterResourceScope, ListableResource, NamespaceResourceScope, Resource};
use schemars::JsonSchema;

use crate::resources::{ResourceDef, ScaleDef, SchemaFn};

/// What the table says about a resource beyond k8s-openapi's constants.
#[derive(Debug, Clone, Copy, Default)]
struct Traits {
    /// A `/status` subresource.
    status: bool,
    /// A `/scale` subresource (`autoscaling/v1` Scale over `.spec.replicas`).
    scale: bool,
    /// The registry strategy sets `generation: 1` and bumps it on spec changes.
    generation: bool,
    /// Only `get` and `list` (computed resources such as componentstatuses).
    read_only: bool,
    /// No `deletecollection` (namespaces).
    no_deletecollection: bool,
}

/// Maps k8s-openapi's scope marker types to "namespaced?".
trait ScopeFlag {
    const NAMESPACED: bool;
}

impl ScopeFlag for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl ScopeFlag for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

fn subschema<T: JsonSchema>(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    g.subschema_for::<T>()
}

/// One row of the table: a served resource in one version.
fn row<T>(short: &[&str], categories: &[&str], t: Traits) -> ResourceDef
where
    T: Resource + ListableResource + JsonSchema,
    T::Scope: ScopeFlag,
{
    let schema: SchemaFn = subschema::<T>;
    ResourceDef {
        group: T::GROUP.into(),
        versions: vec![T::VERSION.into()],
        resource: T::URL_PATH_SEGMENT.into(),
        singular: T::KIND.to_lowercase(),
        kind: T::KIND.into(),
        list_kind: T::LIST_KIND.into(),
        namespaced: <T::Scope as ScopeFlag>::NAMESPACED,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: categories.iter().map(|s| s.to_string()).collect(),
        status_subresource: t.status,
        scale: t.scale.then(ScaleDef::builtin),
        has_generation: t.generation,
        custom: false,
        verbs: if t.read_only {
            crate::resources::READ_ONLY_VERBS.to_vec()
        } else {
            crate::resources::ALL_VERBS
                .into_iter()
                .filter(|v| !(t.no_deletecollection && *v == "deletecollection"))
                .collect()
        },
        schemas: BTreeMap::new(),
        type_schemas: BTreeMap::from([(T::VERSION.to_string(), schema)]),
        printer_columns: BTreeMap::new(),
        extra_subresources: Vec::new(),
    }
}

/// `table! { Type [short names] [categories] {traits}; ... }` → one `ResourceDef` per row.
macro_rules! table {
    ($( $ty:ty, [$($short:literal),*], [$($cat:literal),*], {$($flag:ident)*}; )*) => {
        vec![$(
            row::<$ty>(&[$($short),*], &[$($cat),*], Traits { $($flag: true,)* ..Traits::default() }),
        )*]
    };
}

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v1 as autoscaling1,
    autoscaling::v2 as autoscaling2, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as networking,
    node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, resource::v1 as resource,
    scheduling::v1 as scheduling, storage::v1 as storage, storagemigration::v1 as storagemigration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;

/// Every row of the table, groups in kube-apiserver's discovery order
/// (`authentication.k8s.io` and `authorization.k8s.io` come after
/// `events.k8s.io` there); rows of one resource in
/// several versions (HPA) are merged by [`builtins`], preferred version first.
fn rows() -> Vec<ResourceDef> {
    table! {
        core::Pod, ["po"], ["all"], {status generation};
        core::ComponentStatus, ["cs"], [], {read_only};
        core::ConfigMap, ["cm"], [], {};
        core::Endpoints, ["ep"], [], {};
        core::Event, ["ev"], [], {};
        core::LimitRange, ["limits"], [], {};
        core::Namespace, ["ns"], [], {status no_deletecollection};
        core::Node, ["no"], [], {status};
        core::PersistentVolumeClaim, ["pvc"], [], {status};
        core::PersistentVolume, ["pv"], [], {status};
        core::PodTemplate, [], [], {generation};
        core::ReplicationController, ["rc"], ["all"], {status scale generation};
        core::ResourceQuota, ["quota"], [], {status};
        core::Secret, [], [], {};
        core::ServiceAccount, ["sa"], [], {};
        core::Service, ["svc"], ["all"], {status};
        apiregistration::APIService, [], ["api-extensions"], {status};
        apps::ControllerRevision, [], [], {};
        apps::DaemonSet, ["ds"], ["all"], {status generation};
        apps::Deployment, ["deploy"], ["all"], {status scale generation};
        apps::ReplicaSet, ["rs"], ["all"], {status scale generation};
        apps::StatefulSet, ["sts"], ["all"], {status scale generation};
        events::Event, ["ev"], [], {};
        autoscaling2::HorizontalPodAutoscaler, ["hpa"], ["all"], {status generation};
        autoscaling1::HorizontalPodAutoscaler, ["hpa"], ["all"], {status generation};
        batch::CronJob, ["cj"], ["all"], {status generation};
        batch::Job, [], ["all"], {status generation};
        certificates::CertificateSigningRequest, ["csr"], [], {status};
        certificates::ClusterTrustBundle, [], [], {};
        certificates::PodCertificateRequest, [], [], {status};
        networking::IngressClass, [], [], {generation};
        networking::Ingress, ["ing"], [], {status generation};
        networking::IPAddress, ["ip"], [], {};
        networking::NetworkPolicy, ["netpol"], [], {generation};
        networking::ServiceCIDR, [], [], {status};
        policy::PodDisruptionBudget, ["pdb"], [], {status generation};
        rbac::ClusterRoleBinding, [], [], {};
        rbac::ClusterRole, [], [], {};
        rbac::RoleBinding, [], [], {};
        rbac::Role, [], [], {};
        storage::CSIDriver, [], [], {};
        storage::CSINode, [], [], {status};
        storage::CSIStorageCapacity, [], [], {};
        storage::StorageClass, ["sc"], [], {};
        storage::VolumeAttachment, [], [], {status};
        storage::VolumeAttributesClass, ["vac"], [], {};
        admission::MutatingAdmissionPolicy, [], ["api-extensions"], {generation};
        admission::MutatingAdmissionPolicyBinding, [], ["api-extensions"], {generation};
        admission::MutatingWebhookConfiguration, [], ["api-extensions"], {generation};
        admission::ValidatingAdmissionPolicy, [], ["api-extensions"], {status generation};
        admission::ValidatingAdmissionPolicyBinding, [], ["api-extensions"], {generation};
        admission::ValidatingWebhookConfiguration, [], ["api-extensions"], {generation};
        apiextensions::CustomResourceDefinition, ["crd", "crds"], ["api-extensions"], {status generation};
        scheduling::PriorityClass, ["pc"], [], {generation};
        coordination::Lease, [], [], {};
        node::RuntimeClass, [], [], {};
        discovery::EndpointSlice, [], [], {generation};
        resource::DeviceClass, [], [], {generation};
        resource::DeviceTaintRule, [], [], {status generation};
        resource::ResourceClaim, [], [], {status};
        resource::ResourceClaimTemplate, [], [], {};
        resource::ResourceSlice, [], [], {generation};
        flowcontrol::FlowSchema, [], [], {status generation};
        flowcontrol::PriorityLevelConfiguration, [], [], {status generation};
        storagemigration::StorageVersionMigration, [], [], {status};
    }
}

/// The built-in resources, one `ResourceDef` per group + plural.
pub fn builtins() -> Vec<ResourceDef> {
    let mut out: Vec<ResourceDef> = Vec::new();
    for r in rows() {
        match out
            .iter_mut()
            .find(|d| d.group == r.group && d.resource == r.resource)
        {
            Some(d) => {
                d.versions.extend(r.versions);
                d.type_schemas.extend(r.type_schemas);
            }
            None => out.push(r),
        }
    }
    for d in &mut out {
        if d.key() == "/namespaces" {
            d.extra_subresources = vec!["finalize"];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_definition_per_resource_with_preferred_version_first() {
        let all = builtins();
        let hpa: Vec<_> = all
            .iter()
            .filter(|d| d.resource == "horizontalpodautoscalers")
            .collect();
        assert_eq!(hpa.len(), 1);
        assert_eq!(hpa[0].versions, vec!["v2", "v1"]);
        assert_eq!(hpa[0].type_schemas.len(), 2);
        let mut keys: Vec<_> = all.iter().map(ResourceDef::key).collect();
        keys.sort();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "duplicate resources in the catalog");
    }

    #[test]
    fn constants_come_from_k8s_openapi() {
        let all = builtins();
        let find = |k: &str| all.iter().find(|d| d.key() == k).unwrap();
        let pvc = find("/persistentvolumeclaims");
        assert_eq!(
            (pvc.kind.as_str(), pvc.list_kind.as_str()),
            ("PersistentVolumeClaim", "PersistentVolumeClaimList")
        );
        assert!(pvc.namespaced);
        assert!(!find("storage.k8s.io/storageclasses").namespaced);
        assert_eq!(find("networking.k8s.io/ingresses").singular, "ingress");
        assert!(find("apps/statefulsets").scale.is_some());
        assert!(find("batch/jobs").scale.is_none());
    }
}
