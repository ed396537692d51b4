//! Server-side printing of the workload kinds (`kubectl get pods`,
//! `replicasets`, `statefulsets`, `daemonsets`, `jobs`, `cronjobs`, `pvc`,
//! `nodes`): the columns kube-apiserver v1.37 defines for them (taken from
//! its Table responses) and the cells its printers compute, as far as they
//! depend on stored fields (nothing runs here, so most statuses are empty).
//! [`crate::table`] calls in here for kinds it has no columns of its own for.

use serde_json::{Value, json};

use crate::resources::ResourceDef;

fn col(name: &str, ty: &str, format: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

/// Containers, Images, Selector (priority 1) of the workload controllers.
pub(crate) fn pod_template_cols(selector: bool) -> Vec<Value> {
    let mut v = vec![
        col("Containers", "string", "", 1),
        col("Images", "string", "", 1),
    ];
    if selector {
        v.push(col("Selector", "string", "", 1));
    }
    v
}

/// A column as data: (name, type, format, priority).
type Col = (&'static str, &'static str, &'static str, i64);

const NAME: Col = ("Name", "string", "name", 0);
const AGE: Col = ("Age", "string", "", 0);

/// A string column.
const fn str_col(name: &'static str) -> Col {
    (name, "string", "", 0)
}

/// An integer column.
const fn int_col(name: &'static str) -> Col {
    (name, "integer", "", 0)
}

/// A string column only `-o wide` shows (priority 1).
const fn wide_col(name: &'static str) -> Col {
    (name, "string", "", 1)
}

/// Whether a kind's columns end with its pod template's (and the selector).
#[derive(Clone, Copy)]
enum Template {
    None,
    WithoutSelector,
    WithSelector,
}

/// The columns of each kind printed here: (group, kind, columns, template).
const COLUMNS: &[(&str, &str, &[Col], Template)] = &[
    (
        "",
        "Pod",
        &[
            NAME,
            str_col("Ready"),
            str_col("Status"),
            str_col("Restarts"),
            AGE,
            wide_col("IP"),
            wide_col("Node"),
            wide_col("Nominated Node"),
            wide_col("Readiness Gates"),
        ],
        Template::None,
    ),
    (
        "apps",
        "ReplicaSet",
        REPLICA_COLUMNS,
        Template::WithSelector,
    ),
    (
        "",
        "ReplicationController",
        REPLICA_COLUMNS,
        Template::WithSelector,
    ),
    (
        "apps",
        "StatefulSet",
        &[NAME, str_col("Ready"), AGE],
        Template::WithoutSelector,
    ),
    (
        "apps",
        "DaemonSet",
        &[
            NAME,
            int_col("Desired"),
            int_col("Current"),
            int_col("Ready"),
            int_col("Up-to-date"),
            int_col("Available"),
            str_col("Node Selector"),
            AGE,
        ],
        Template::WithSelector,
    ),
    (
        "batch",
        "Job",
        &[
            NAME,
            str_col("Status"),
            str_col("Completions"),
            str_col("Duration"),
            AGE,
        ],
        Template::WithSelector,
    ),
    (
        "batch",
        "CronJob",
        &[
            NAME,
            str_col("Schedule"),
            str_col("Timezone"),
            ("Suspend", "boolean", "", 0),
            int_col("Active"),
            str_col("Last Schedule"),
            AGE,
        ],
        Template::WithSelector,
    ),
    (
        "",
        "PersistentVolumeClaim",
        &[
            NAME,
            str_col("Status"),
            str_col("Volume"),
            str_col("Capacity"),
            str_col("Access Modes"),
            str_col("StorageClass"),
            str_col("VolumeAttributesClass"),
            AGE,
            wide_col("VolumeMode"),
        ],
        Template::None,
    ),
    (
        "",
        "Node",
        &[
            NAME,
            str_col("Status"),
            str_col("Roles"),
            AGE,
            str_col("Version"),
            wide_col("Internal-IP"),
            wide_col("External-IP"),
            wide_col("OS-Image"),
            wide_col("Kernel-Version"),
            wide_col("Container-Runtime"),
        ],
        Template::None,
    ),
];

/// ReplicaSet and ReplicationController.
const REPLICA_COLUMNS: &[Col] = &[
    NAME,
    int_col("Desired"),
    int_col("Current"),
    int_col("Ready"),
    AGE,
];

/// Column definitions, or None for kinds printed elsewhere (or NAME/AGE).
pub fn columns(def: &ResourceDef) -> Option<Vec<Value>> {
    let Some((_, _, cols, template)) = COLUMNS
        .iter()
        .find(|(g, k, _, _)| *g == def.group && *k == def.kind)
    else {
        return crate::printers_config::columns(def);
    };
    let mut v: Vec<Value> = cols
        .iter()
        .map(|&(name, ty, format, priority)| col(name, ty, format, priority))
        .collect();
    match template {
        Template::None => {}
        Template::WithoutSelector => v.extend(pod_template_cols(false)),
        Template::WithSelector => v.extend(pod_template_cols(true)),
    }
    Some(v)
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => "<none>".into(),
    }
}

fn int(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn list<'a>(o: &'a Value, p: &str) -> &'a [Value] {
    o.pointer(p)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Containers, Images (and Selector) cells of a pod template at `template`.
pub(crate) fn template_cells(o: &Value, template: &str, selector: Option<&str>) -> Vec<Value> {
    let cs = list(o, &format!("{template}/spec/containers"));
    let join = |k: &str| {
        cs.iter()
            .map(|c| c.get(k).and_then(Value::as_str).unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut v = vec![json!(join("name")), json!(join("image"))];
    if let Some(p) = selector {
        let sel = o
            .pointer(p)
            .and_then(crate::scale::selector_string)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".into());
        v.push(json!(sel));
    }
    v
}

/// The cells of one object (`name` and `age` already rendered by the caller).
pub fn cells(def: &ResourceDef, o: &Value, name: Value, age: Value) -> Option<Vec<Value>> {
    let v = match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => pod_cells(o, name, age),
        ("apps", "ReplicaSet") | ("", "ReplicationController") => {
            let mut v = vec![
                name,
                json!(int(o, "/spec/replicas")),
                json!(int(o, "/status/replicas")),
                json!(int(o, "/status/readyReplicas")),
                age,
            ];
            v.extend(template_cells(o, "/spec/template", Some("/spec/selector")));
            v
        }
        ("apps", "StatefulSet") => {
            let mut v = vec![
                name,
                json!(format!(
                    "{}/{}",
                    int(o, "/status/readyReplicas"),
                    int(o, "/spec/replicas")
                )),
                age,
            ];
            v.extend(template_cells(o, "/spec/template", None));
            v
        }
        ("apps", "DaemonSet") => {
            let node_selector = o
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(crate::scale::selector_string)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "<none>".into());
            let mut v = vec![
                name,
                json!(int(o, "/status/desiredNumberScheduled")),
                json!(int(o, "/status/currentNumberScheduled")),
                json!(int(o, "/status/numberReady")),
                json!(int(o, "/status/updatedNumberScheduled")),
                json!(int(o, "/status/numberAvailable")),
                json!(node_selector),
                age,
            ];
            v.extend(template_cells(o, "/spec/template", Some("/spec/selector")));
            v
        }
        ("batch", "Job") => job_cells(o, name, age),
        ("batch", "CronJob") => cronjob_cells(o, name, age),
        ("", "PersistentVolumeClaim") => pvc_cells(o, name, age),
        ("", "Node") => node_cells(o, name, age),
        _ => return crate::printers_config::cells(def, o, name, age),
    };
    Some(v)
}

/// A Pod's cells: ready containers, status (or `Terminating`), restarts, IP and node.
fn pod_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let statuses = list(o, "/status/containerStatuses");
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let total = list(o, "/spec/containers").len();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let status = if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating".to_string()
    } else {
        o.pointer("/status/reason")
            .or_else(|| o.pointer("/status/phase"))
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            .to_string()
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts.to_string()),
        age,
        json!(text(o.pointer("/status/podIP"))),
        json!(text(o.pointer("/spec/nodeName"))),
        json!(text(o.pointer("/status/nominatedNodeName"))),
        json!("<none>"),
    ]
}

/// A Job's cells: its status from its conditions, completions, and its template.
fn job_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let condition = |t: &str| {
        list(o, "/status/conditions").iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(t)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    let status = if condition("Complete") {
        "Complete"
    } else if condition("Failed") {
        "Failed"
    } else if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if condition("Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{}/{c}", int(o, "/status/succeeded")),
        None => format!(
            "{}/1 of {}",
            int(o, "/status/succeeded"),
            o.pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(1)
        ),
    };
    let mut v = vec![name, json!(status), json!(completions), json!(""), age];
    v.extend(template_cells(o, "/spec/template", Some("/spec/selector")));
    v
}

/// A CronJob's cells: schedule, time zone, suspension, active Jobs, last schedule, and its Job template.
fn cronjob_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let last = o
        .pointer("/status/lastScheduleTime")
        .and_then(Value::as_str)
        .map(|t| crate::table::age(Some(t)))
        .unwrap_or_else(|| "<none>".into());
    let mut v = vec![
        name,
        json!(text(o.pointer("/spec/schedule"))),
        json!(text(o.pointer("/spec/timeZone"))),
        json!(
            o.pointer("/spec/suspend")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        ),
        json!(list(o, "/status/active").len()),
        json!(last),
        age,
    ];
    v.extend(template_cells(
        o,
        "/spec/jobTemplate/spec/template",
        Some("/spec/jobTemplate/spec/selector"),
    ));
    v
}

/// A PersistentVolumeClaim's cells: phase, volume, capacity, access modes (abbreviated as kubectl does), classes and mode.
fn pvc_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let modes = list(o, "/status/accessModes")
        .iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",");
    let phase = if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating".to_string()
    } else {
        o.pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            .to_string()
    };
    vec![
        name,
        json!(phase),
        json!(
            o.pointer("/spec/volumeName")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
        json!(
            o.pointer("/status/capacity/storage")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
        json!(modes),
        json!(text(o.pointer("/spec/storageClassName"))),
        json!(text(o.pointer("/spec/volumeAttributesClassName"))),
        age,
        json!(
            o.pointer("/spec/volumeMode")
                .and_then(Value::as_str)
                .unwrap_or("Filesystem")
        ),
    ]
}

/// A Node's cells: readiness (and `SchedulingDisabled`), roles, versions and addresses.
fn node_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let ready = list(o, "/status/conditions")
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
    let mut status = match ready.and_then(|c| c.get("status")).and_then(Value::as_str) {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| {
            k.strip_prefix("node-role.kubernetes.io/")
                .map(str::to_string)
        })
        .collect();
    roles.sort();
    let address = |t: &str| {
        list(o, "/status/addresses")
            .iter()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(t))
            .and_then(|a| a.get("address"))
            .and_then(Value::as_str)
            .unwrap_or("<none>")
            .to_string()
    };
    let info = |k: &str| {
        o.pointer(&format!("/status/nodeInfo/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    vec![
        name,
        json!(status),
        json!(if roles.is_empty() {
            "<none>".into()
        } else {
            roles.join(",")
        }),
        age,
        json!(info("kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}
