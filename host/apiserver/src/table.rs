//! Server-side printing (`application/json;as=Table;g=meta.k8s.io;v=v1`),
//! which `kubectl get` asks for: the columns a real cluster prints for the
//! built-in kinds, `additionalPrinterColumns` (or NAME/AGE) for CRDs.

use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// Does the Accept header ask for a Table?
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// kube's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        let y = d / 365;
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{}y", d / 365)
    }
}

pub(crate) fn age(ts: Option<&str>) -> String {
    match ts.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
        Some(t) => {
            human_duration((chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds())
        }
        None => "<unknown>".into(),
    }
}

fn col(name: &str, ty: &str, format: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

fn s(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(x)) => json!(x),
        Some(Value::Null) | None => json!("<none>"),
        Some(other) => json!(other.to_string()),
    }
}

fn count(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_object).map_or(0, |m| m.len() as i64)
}

/// Evaluate a simple JSONPath (`.spec.replicas`, `.status.conditions[0].type`,
/// `.status.conditions[?(@.type=="Ready")].status`).
fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = p.trim_start_matches('.');
    while !rest.is_empty() {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let (field, tail) = rest.split_at(end);
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        rest = tail;
        if let Some(t) = rest.strip_prefix('[') {
            let close = t.find(']')?;
            let idx = &t[..close];
            rest = &t[close + 1..];
            if let Some(filter) = idx.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = filter.split_once("==")?;
                let want = v.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|e| e.get(k.trim()).and_then(Value::as_str) == Some(want))?;
            } else {
                cur = cur.as_array()?.get(idx.parse::<usize>().ok()?)?;
            }
        }
        rest = rest.trim_start_matches('.');
    }
    Some(cur)
}

/// Column definitions and the cells of one object.
fn columns(def: &ResourceDef, version: &str) -> Vec<Value> {
    let name = col("Name", "string", "name", 0);
    let age = col("Age", "string", "", 0);
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "ConfigMap") => vec![name, col("Data", "string", "", 0), age],
        ("", "Secret") => vec![
            name,
            col("Type", "string", "", 0),
            col("Data", "string", "", 0),
            age,
        ],
        ("", "Namespace") => vec![name, col("Status", "string", "", 0), age],
        ("", "Service") => vec![
            name,
            col("Type", "string", "", 0),
            col("Cluster-IP", "string", "", 0),
            col("External-IP", "string", "", 0),
            col("Port(s)", "string", "", 0),
            age,
            col("Selector", "string", "", 1),
        ],
        ("apps", "Deployment") => {
            let mut v = vec![
                name,
                col("Ready", "string", "", 0),
                col("Up-to-date", "string", "", 0),
                col("Available", "string", "", 0),
                age,
            ];
            // `-o wide`: Containers, Images, Selector.
            v.extend(crate::printers::pod_template_cols(true));
            v
        }
        ("coordination.k8s.io", "Lease") => vec![name, col("Holder", "string", "", 0), age],
        ("apiextensions.k8s.io", _) => vec![name, col("Created At", "date", "", 0)],
        ("", "Event") => vec![
            col("Last Seen", "string", "", 0),
            col("Type", "string", "", 0),
            col("Reason", "string", "", 0),
            col("Object", "string", "", 0),
            col("Message", "string", "", 0),
        ],
        _ if def.custom => {
            let mut cols = vec![name];
            match def.printer_columns.get(version) {
                Some(pc) => {
                    for c in pc {
                        cols.push(json!({
                            "name": c.get("name").cloned().unwrap_or(json!("")),
                            "type": c.get("type").cloned().unwrap_or(json!("string")),
                            "format": c.get("format").cloned().unwrap_or(json!("")),
                            "description": c.get("description").cloned().unwrap_or(json!("")),
                            "priority": c.get("priority").cloned().unwrap_or(json!(0)),
                        }));
                    }
                }
                None => cols.push(age),
            }
            cols
        }
        _ => crate::printers::columns(def).unwrap_or_else(|| vec![name, age]),
    }
}

/// The cells of one row: the kinds with columns here, a custom resource's
/// `additionalPrinterColumns`, else the workload printers (or NAME, AGE).
fn cells(def: &ResourceDef, version: &str, o: &Value) -> Vec<Value> {
    let name = s(o.pointer("/metadata/name"));
    let created = o
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str);
    let a = json!(age(created));
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "ConfigMap") => vec![
            name,
            json!(count(o.get("data")) + count(o.get("binaryData"))),
            a,
        ],
        ("", "Secret") => vec![name, s(o.get("type")), json!(count(o.get("data"))), a],
        ("", "Namespace") => vec![name, s(o.pointer("/status/phase")), a],
        ("", "Service") => service_cells(o, name, a),
        ("apps", "Deployment") => deployment_cells(o, name, a),
        ("coordination.k8s.io", "Lease") => {
            vec![name, s(o.pointer("/spec/holderIdentity")), a]
        }
        ("apiextensions.k8s.io", _) => vec![name, s(o.pointer("/metadata/creationTimestamp"))],
        ("", "Event") => event_cells(o, created),
        _ if def.custom => {
            let mut out = vec![name];
            match def.printer_columns.get(version) {
                Some(pc) => out.extend(pc.iter().map(|c| printer_column_cell(o, c))),
                None => out.push(a),
            }
            out
        }
        _ => {
            crate::printers::cells(def, o, name.clone(), a.clone()).unwrap_or_else(|| vec![name, a])
        }
    }
}

/// `PORT(S)` of a Service: `port[:nodePort]/protocol`, comma-separated.
fn service_ports(o: &Value) -> String {
    o.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let port = p.get("port").map(|v| v.to_string()).unwrap_or_default();
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort") {
                        Some(np) => format!("{port}:{np}/{proto}"),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into())
}

fn service_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let selector = o
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into());
    vec![
        name,
        s(o.pointer("/spec/type")),
        s(o.pointer("/spec/clusterIP")),
        json!("<none>"),
        json!(service_ports(o)),
        age,
        json!(selector),
    ]
}

fn deployment_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let n = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let mut v = vec![
        name,
        json!(format!(
            "{}/{}",
            n("/status/readyReplicas"),
            n("/spec/replicas")
        )),
        json!(n("/status/updatedReplicas")),
        json!(n("/status/availableReplicas")),
        age,
    ];
    v.extend(crate::printers::template_cells(
        o,
        "/spec/template",
        Some("/spec/selector"),
    ));
    v
}

/// LAST SEEN, TYPE, REASON, OBJECT, MESSAGE (`created` is the fallback time).
fn event_cells(o: &Value, created: Option<&str>) -> Vec<Value> {
    let last = o
        .get("lastTimestamp")
        .and_then(Value::as_str)
        .or_else(|| o.get("eventTime").and_then(Value::as_str))
        .or(created);
    let io = o.get("involvedObject");
    let object = format!(
        "{}/{}",
        io.and_then(|i| i.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_lowercase(),
        io.and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    vec![
        json!(age(last)),
        s(o.get("type")),
        s(o.get("reason")),
        json!(object),
        s(o.get("message")),
    ]
}

/// One `additionalPrinterColumns` cell: the value at its `jsonPath`, shown
/// as its `type` says (a date as an age).
fn printer_column_cell(o: &Value, c: &Value) -> Value {
    let path = c.get("jsonPath").and_then(Value::as_str).unwrap_or("");
    let ty = c.get("type").and_then(Value::as_str).unwrap_or("string");
    match (ty, json_path(o, path)) {
        (_, None) => Value::Null,
        ("date", Some(Value::String(t))) => json!(age(Some(t))),
        ("integer" | "number" | "boolean", Some(v)) => v.clone(),
        (_, Some(Value::String(x))) => json!(x),
        (_, Some(other)) => json!(other.to_string()),
    }
}

fn partial_meta(o: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A Table of `items`. `include_object`: `None`, `Metadata` (default) or `Object`.
pub fn table(
    def: &ResourceDef,
    version: &str,
    items: &[&Value],
    list_meta: Value,
    include_object: &str,
    with_columns: bool,
) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(def, version, o)});
            match include_object {
                "None" => {}
                "Object" => row["object"] = (*o).clone(),
                _ => row["object"] = partial_meta(o),
            }
            row
        })
        .collect();
    let cols = if with_columns {
        Value::Array(columns(def, version))
    } else {
        Value::Array(Vec::new())
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": cols,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(9 * 3600), "9h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
    }

    #[test]
    fn json_path_filters() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(
            json_path(&o, ".status.conditions[0].type"),
            Some(&json!("A"))
        );
        assert_eq!(json_path(&o, ".spec.x"), None);
    }

    #[test]
    fn configmap_rows_count_data_keys() {
        let def = crate::resources::builtins()
            .into_iter()
            .find(|d| d.kind == "ConfigMap")
            .unwrap();
        let o = json!({"metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"}, "data": {"a": "1", "b": "2"}});
        let t = table(&def, "v1", &[&o], json!({}), "Metadata", true);
        assert_eq!(t["rows"][0]["cells"][0], "c");
        assert_eq!(t["rows"][0]["cells"][1], 2);
        assert_eq!(t["columnDefinitions"][1]["name"], "Data");
    }
}
