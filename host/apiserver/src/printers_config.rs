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
        ("", "LimitRange") => vec![name, col("Created At", "date", "", 0)],
        ("node.k8s.io", "RuntimeClass") => vec![name, s("Handler"), age()],
        ("storage.k8s.io", "VolumeAttributesClass") => vec![name, s("DriverName"), age()],
        ("networking.k8s.io", "ServiceCIDR") => vec![name, s("CIDRs"), age()],
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => vec![name, col("Webhooks", "integer", "", 0), age()],
        ("storage.k8s.io", "CSINode") => vec![name, col("Drivers", "integer", "", 0), age()],
        ("storage.k8s.io", "VolumeAttachment") => vec![
            name,
            col("Attacher", "string", "name", 0),
            s("PV"),
            s("Node"),
            col("Attached", "boolean", "", 0),
            age(),
        ],
        ("policy", "PodDisruptionBudget") => vec![
            name,
            s("Min Available"),
            s("Max Unavailable"),
            col("Allowed Disruptions", "integer", "", 0),
            age(),
        ],
        ("networking.k8s.io", "Ingress") => vec![
            name,
            s("Class"),
            s("Hosts"),
            s("Address"),
            s("Ports"),
            age(),
        ],
        ("", "PodTemplate") => vec![name, s("Containers"), s("Images"), s("Pod Labels")],
        _ => return None,
    })
}

/// `len(list)` at `ptr`.
fn count(o: &Value, ptr: &str) -> usize {
    o.pointer(ptr).and_then(Value::as_array).map_or(0, Vec::len)
}

/// An IntOrString as printed, or `N/A`.
fn int_or_string(o: &Value, ptr: &str) -> String {
    match o.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

/// `labels.FormatLabels`: `k=v,...` sorted, or `<none>`.
fn format_labels(v: Option<&Value>) -> String {
    let mut pairs: Vec<String> = v
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// An Ingress's cells after the name: class, hosts (at most three, then
/// `+ N more...`; `*` without any), load-balancer addresses, ports.
fn ingress_cells(o: &Value) -> [String; 4] {
    let class = Some(text(o, "/spec/ingressClassName"))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "<none>".into());
    let hosts: Vec<String> = o
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| text(r, "/host"))
        .filter(|h| !h.is_empty())
        .collect();
    let hosts = match hosts.len() {
        0 => "*".to_string(),
        n if n > 3 => format!("{} + {} more...", hosts[..3].join(","), n - 3),
        _ => hosts.join(","),
    };
    let address: Vec<String> = o
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|i| {
            Some(text(i, "/ip"))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| text(i, "/hostname"))
        })
        .filter(|s| !s.is_empty())
        .collect();
    let ports = if count(o, "/spec/tls") > 0 {
        "80, 443"
    } else {
        "80"
    };
    [class, hosts, address.join(","), ports.into()]
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
            role_binding_cells(o, name, age)
        }
        ("networking.k8s.io", "NetworkPolicy") => network_policy_cells(o, name, age),
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
        ("storage.k8s.io", "StorageClass") => storage_class_cells(o, name, age),
        ("networking.k8s.io", "IngressClass") => ingress_class_cells(o, name, age),
        ("", "LimitRange") => vec![name, json!(text(o, "/metadata/creationTimestamp"))],
        ("node.k8s.io", "RuntimeClass") => vec![name, json!(text(o, "/handler")), age],
        ("storage.k8s.io", "VolumeAttributesClass") => {
            vec![name, json!(text(o, "/driverName")), age]
        }
        ("networking.k8s.io", "ServiceCIDR") => service_cidr_cells(o, name, age),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => vec![name, json!(count(o, "/webhooks")), age],
        ("storage.k8s.io", "CSINode") => vec![name, json!(count(o, "/spec/drivers")), age],
        ("storage.k8s.io", "VolumeAttachment") => vec![
            name,
            json!(text(o, "/spec/attacher")),
            json!(text(o, "/spec/source/persistentVolumeName")),
            json!(text(o, "/spec/nodeName")),
            json!(
                o.pointer("/status/attached")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age,
        ],
        ("policy", "PodDisruptionBudget") => vec![
            name,
            json!(int_or_string(o, "/spec/minAvailable")),
            json!(int_or_string(o, "/spec/maxUnavailable")),
            json!(
                o.pointer("/status/disruptionsAllowed")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            ),
            age,
        ],
        ("networking.k8s.io", "Ingress") => {
            let [class, hosts, address, ports] = ingress_cells(o);
            vec![
                name,
                json!(class),
                json!(hosts),
                json!(address),
                json!(ports),
                age,
            ]
        }
        ("", "PodTemplate") => pod_template_cells(o, name),
        _ => return None,
    })
}

/// A StorageClass's cells: provisioner, reclaim policy and binding mode (with their defaults), volume expansion.
fn storage_class_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
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

/// An IngressClass's cells: controller and parameters (`Kind[.group]/name`).
fn ingress_class_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
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

/// A ServiceCIDR's cells: its CIDRs, comma-separated.
fn service_cidr_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let cidrs: Vec<&str> = o
        .pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    vec![name, json!(cidrs.join(",")), age]
}

/// A (Cluster)RoleBinding's cells: the role, then its users, groups and service accounts.
fn role_binding_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
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

/// A NetworkPolicy's cells: its pod selector (`<none>` when empty).
fn network_policy_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let sel = o
        .pointer("/spec/podSelector")
        .and_then(crate::scale::selector_string)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into());
    vec![name, json!(sel), age]
}

/// A PodTemplate's cells: its template's containers and images, then the template's labels.
fn pod_template_cells(o: &Value, name: Value) -> Vec<Value> {
    let mut v = vec![name];
    v.extend(crate::printers::template_cells(o, "/template", None));
    v.push(json!(format_labels(o.pointer("/template/metadata/labels"))));
    v
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
