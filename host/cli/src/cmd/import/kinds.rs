//! Offline mapping from a resource (`apiVersion` + plural) to its kind, which
//! Metacontroller's rules name by plural while its hooks key children by
//! `Kind.apiVersion`. Built-in kinds come from k8s-openapi's types; custom
//! kinds from CustomResourceDefinitions given alongside the CompositeController.

use std::collections::BTreeMap;

use k8s_openapi::Resource;
use serde_json::Value;

/// `(apiVersion, plural)` → kind.
#[derive(Debug, Clone, Default)]
pub struct Kinds(BTreeMap<(String, String), String>);

macro_rules! builtin_kinds {
    ($($t:ty),* $(,)?) => {
        [$((<$t as Resource>::API_VERSION, <$t as Resource>::URL_PATH_SEGMENT, <$t as Resource>::KIND)),*]
    };
}

impl Kinds {
    /// The built-in kinds a controller commonly creates or reads.
    pub fn builtins() -> Self {
        use k8s_openapi::api::{
            apps::v1 as apps, autoscaling::v2 as autoscaling, batch::v1 as batch, core::v1 as core,
            networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
        };
        let table = builtin_kinds![
            core::ConfigMap,
            core::Endpoints,
            core::LimitRange,
            core::Namespace,
            core::PersistentVolume,
            core::PersistentVolumeClaim,
            core::Pod,
            core::ReplicationController,
            core::ResourceQuota,
            core::Secret,
            core::Service,
            core::ServiceAccount,
            apps::DaemonSet,
            apps::Deployment,
            apps::ReplicaSet,
            apps::StatefulSet,
            autoscaling::HorizontalPodAutoscaler,
            batch::CronJob,
            batch::Job,
            networking::Ingress,
            networking::NetworkPolicy,
            policy::PodDisruptionBudget,
            rbac::ClusterRole,
            rbac::ClusterRoleBinding,
            rbac::Role,
            rbac::RoleBinding,
        ];
        let mut kinds = Kinds::default();
        for (api_version, plural, kind) in table {
            kinds.insert(api_version, plural, kind);
        }
        kinds
    }

    fn insert(&mut self, api_version: &str, plural: &str, kind: &str) {
        self.0.insert(
            (api_version.to_string(), plural.to_string()),
            kind.to_string(),
        );
    }

    /// Adds every served version of a CustomResourceDefinition document;
    /// other documents are ignored. Returns whether it was a CRD.
    pub fn add_crd(&mut self, doc: &Value) -> bool {
        if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return false;
        }
        let spec = |p: &str| doc.pointer(p).and_then(Value::as_str);
        let (Some(group), Some(plural), Some(kind)) = (
            spec("/spec/group"),
            spec("/spec/names/plural"),
            spec("/spec/names/kind"),
        ) else {
            return false;
        };
        let versions = doc
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| v.get("name").and_then(Value::as_str))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for version in versions {
            self.insert(&format!("{group}/{version}"), plural, kind);
        }
        true
    }

    /// The kind served as `plural` in `api_version`, when known.
    pub fn kind_of(&self, api_version: &str, plural: &str) -> Option<&str> {
        self.0
            .get(&(api_version.to_string(), plural.to_string()))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtins_map_plurals_to_kinds_per_group_version() {
        let k = Kinds::builtins();
        assert_eq!(k.kind_of("v1", "pods"), Some("Pod"));
        assert_eq!(
            k.kind_of("v1", "persistentvolumeclaims"),
            Some("PersistentVolumeClaim")
        );
        assert_eq!(k.kind_of("apps/v1", "statefulsets"), Some("StatefulSet"));
        assert_eq!(k.kind_of("v1", "statefulsets"), None);
    }

    #[test]
    fn crds_add_every_version() {
        let mut k = Kinds::builtins();
        let crd = json!({"kind": "CustomResourceDefinition", "spec": {
            "group": "ctl.example.com", "names": {"plural": "catsets", "kind": "CatSet"},
            "versions": [{"name": "v1"}, {"name": "v2"}]}});
        assert!(k.add_crd(&crd));
        assert_eq!(k.kind_of("ctl.example.com/v2", "catsets"), Some("CatSet"));
        assert!(!k.add_crd(&json!({"kind": "ConfigMap"})));
    }
}
