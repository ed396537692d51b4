//! The table of list/map hints for the built-in kinds this server stores,
//! transcribed from the `+listType`/`+listMapKey`/`+mapType` markers of the
//! Kubernetes API types (k8s.io/api, v1.33). Only what changes merging is
//! listed: everything else is a granular map or an atomic list.

use super::schema::Node;

/// Fills `root` with the hints of `group`/`kind` (ObjectMeta is added by the caller).
pub(crate) fn describe(root: &mut Node, group: &str, kind: &str) {
    match (group, kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            root.atomic_map("spec.selector");
            pod_template(root.at_mut("spec.template"));
            conditions(root);
        }
        ("batch", "Job") => {
            root.atomic_map("spec.selector");
            pod_template(root.at_mut("spec.template"));
            conditions(root);
        }
        ("batch", "CronJob") => {
            root.atomic_map("spec.jobTemplate.spec.selector");
            pod_template(root.at_mut("spec.jobTemplate.spec.template"));
        }
        ("", "Pod") => {
            pod_spec(root.at_mut("spec"));
            conditions(root);
        }
        ("", "Service") => {
            root.keyed("spec.ports", &["port", "protocol"]);
            root.atomic_map("spec.selector");
            conditions(root);
        }
        ("", "ConfigMap" | "Secret") => {
            root.map("data");
            root.map("binaryData");
            root.map("stringData");
        }
        // `+structType=atomic` (RoleRef) and LabelSelector's `+structType=atomic`.
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            root.atomic_map("roleRef");
        }
        ("policy", "PodDisruptionBudget") => {
            root.atomic_map("spec.selector");
            conditions(root);
        }
        ("", "Namespace") | ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            conditions(root);
        }
        _ => {}
    }
}

/// `status.conditions`: `+listType=map +listMapKey=type`.
fn conditions(root: &mut Node) {
    root.keyed("status.conditions", &["type"]);
}

/// PodTemplateSpec: ObjectMeta + PodSpec.
fn pod_template(template: &mut Node) {
    super::schema::object_meta(template.at_mut("metadata"));
    pod_spec(template.at_mut("spec"));
}

fn pod_spec(spec: &mut Node) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        spec.keyed(list, &["name"]);
        container(spec.at_mut(&format!("{list}[]")));
    }
    spec.keyed("volumes", &["name"]);
    spec.keyed("imagePullSecrets", &["name"]);
    spec.keyed("hostAliases", &["ip"]);
    spec.keyed(
        "topologySpreadConstraints",
        &["topologyKey", "whenUnsatisfiable"],
    );
    spec.keyed("resourceClaims", &["name"]);
    spec.keyed("schedulingGates", &["name"]);
    spec.atomic_map("nodeSelector");
    spec.map("overhead");
}

fn container(c: &mut Node) {
    c.keyed("ports", &["containerPort", "protocol"]);
    c.keyed("env", &["name"]);
    c.keyed("volumeMounts", &["mountPath"]);
    c.keyed("volumeDevices", &["devicePath"]);
    c.keyed("resizePolicy", &["resourceName"]);
    c.map("resources.limits");
    c.map("resources.requests");
    c.keyed("resources.claims", &["name"]);
}

#[cfg(test)]
mod tests {
    use super::super::schema::{ListType, Schema};

    #[test]
    fn deployment_containers_are_keyed_by_name_and_ports_by_port_and_protocol() {
        let s = Schema::for_builtin("apps", "Deployment");
        let podspec = s.root.child("spec").child("template").child("spec");
        assert!(
            matches!(&podspec.child("containers").list, ListType::Map { keys, .. } if keys == &["name"])
        );
        let ports = &podspec.child("containers").item().child("ports").list;
        assert!(matches!(ports, ListType::Map { keys, defaults }
            if keys == &["containerPort", "protocol"] && defaults.contains_key("protocol")));
        assert!(s.root.child("spec").child("selector").atomic_map);
        let tmeta = s.root.child("spec").child("template").child("metadata");
        assert!(!tmeta.child("labels").is_field("app"));
    }

    #[test]
    fn unlisted_kinds_fall_back_to_granular_maps_and_atomic_lists() {
        let s = Schema::for_builtin("coordination.k8s.io", "Lease");
        assert_eq!(s.root.child("spec").child("x").list, ListType::Atomic);
        assert_eq!(
            s.root.child("metadata").child("finalizers").list,
            ListType::Set
        );
    }
}
