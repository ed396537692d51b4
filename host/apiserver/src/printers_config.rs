//! Server-side printing of the access-control and cluster-configuration
//! kinds (`kubectl get roles`, `rolebindings`, `networkpolicies`,
//! `priorityclasses`, `storageclasses`, `ingressclasses`): kube-apiserver
//! v1.37's columns (from its Table responses, compared by `tests/fidelity`)
//! and the cells its printers compute from stored fields.
//! [`crate::printers`] falls back to here.

use serde_json::{Value, json};

use crate::resources::ResourceDef;

fn col(name: &str, ty: &str, format: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

/// Column definitions of the kinds printed here.
pub fn columns(def: &ResourceDef) -> Option<Vec<Value>> {
    let name = col("Name", "string", "name", 0);
    let s = |n: &str| col(n, "string", "", 0);
    let age = || s("Age");
    Some(match (def.group.as_str(), def.kind.as_str()) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
        | ("storage.k8s.io", "CSIStorageCapacity") => {
            vec![name, col("Created At", "date", "", 0)]
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => vec![
            name,
            s("Role"),
            age(),
            col("Users", "string", "", 1),
            col("Groups", "string", "", 1),
            col("ServiceAccounts", "string", "", 1),
        ],
        ("networking.k8s.io", "NetworkPolicy") => vec![name, s("Pod-Selector"), age()],
        ("scheduling.k8s.io", "PriorityClass") => vec![
            name,
            col("Value", "integer", "", 0),
            col("Global-Default", "boolean", "", 0),
            age(),
            s("PreemptionPolicy"),
        ],
        ("storage.k8s.io", "StorageClass") => vec![
            name,
            s("Provisioner"),
            s("ReclaimPolicy"),
            s("VolumeBindingMode"),
            s("AllowVolumeExpansion"),
            age(),
        ],
        ("networking.k8s.io", "IngressClass") => {
            vec![name, s("Controller"), s("Parameters"), age()]
        }
        _ => return None,
    })
}

fn text(o: &Value, ptr: &str) -> String {
    o.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `rbac.SubjectsStrings`: users, groups and `namespace/name` of ServiceAccounts.
fn subjects(o: &Value) -> [String; 3] {
    let mut out: [Vec<String>; 3] = Default::default();
    for s in o
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = text(s, "/name");
        match s.get("kind").and_then(Value::as_str) {
            Some("User") => out[0].push(name),
            Some("Group") => out[1].push(name),
            Some("ServiceAccount") => out[2].push(format!("{}/{name}", text(s, "/namespace"))),
            _ => {}
        }
    }
    out.map(|v| v.join(", "))
}

/// The cells of one object (`name` and `age` already rendered by the caller).
pub fn cells(def: &ResourceDef, o: &Value, name: Value, age: Value) -> Option<Vec<Value>> {
    Some(match (def.group.as_str(), def.kind.as_str()) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
        | ("storage.k8s.io", "CSIStorageCapacity") => {
            vec![name, json!(text(o, "/metadata/creationTimestamp"))]
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            let role = format!("{}/{}", text(o, "/roleRef/kind"), text(o, "/roleRef/name"));
            let [users, groups, sas] = subjects(o);
            vec![
                name,
                json!(role),
                age,
                json!(users),
                json!(groups),
                json!(sas),
            ]
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            let sel = o
                .pointer("/spec/podSelector")
                .and_then(crate::scale::selector_string)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "<none>".into());
            vec![name, json!(sel), age]
        }
        ("scheduling.k8s.io", "PriorityClass") => vec![
            name,
            json!(o.get("value").and_then(Value::as_i64).unwrap_or(0)),
            json!(
                o.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age,
            json!(text(o, "/preemptionPolicy")),
        ],
        ("storage.k8s.io", "StorageClass") => {
            let or = |ptr: &str, d: &str| {
                Some(text(o, ptr))
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| d.into())
            };
            let expand = o
                .get("allowVolumeExpansion")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            vec![
                name,
                json!(text(o, "/provisioner")),
                json!(or("/reclaimPolicy", "Delete")),
                json!(or("/volumeBindingMode", "Immediate")),
                json!(expand.to_string()),
                age,
            ]
        }
        ("networking.k8s.io", "IngressClass") => {
            let params = match o.pointer("/spec/parameters") {
                Some(p) if p.is_object() => {
                    let group = text(p, "/apiGroup");
                    let kind = text(p, "/kind");
                    let kind = if group.is_empty() {
                        kind
                    } else {
                        format!("{kind}.{group}")
                    };
                    format!("{kind}/{}", text(p, "/name"))
                }
                _ => "<none>".into(),
            };
            vec![name, json!(text(o, "/spec/controller")), json!(params), age]
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    #[test]
    fn rolebinding_cells_name_the_role_and_each_kind_of_subject() {
        let def = builtins()
            .into_iter()
            .find(|d| d.kind == "RoleBinding")
            .expect("RoleBinding is built in");
        let rb = json!({"roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "robot", "namespace": "x"},
                {"kind": "User", "name": "bob"}]});
        let c = cells(&def, &rb, json!("rb"), json!("1s")).unwrap_or_default();
        assert_eq!(
            c,
            vec![
                json!("rb"),
                json!("Role/reader"),
                json!("1s"),
                json!("alice, bob"),
                json!("devs"),
                json!("x/robot")
            ]
        );
        assert_eq!(columns(&def).map(|c| c.len()), Some(6));
    }
}
