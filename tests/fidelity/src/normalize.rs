//! Normalisation of what a server returned, so that two servers can be
//! compared: values that legitimately differ between any two clusters (uids,
//! resourceVersions, timestamps, generated names, ages, allocated IPs and
//! ports, the run's random token) become placeholders; everything else —
//! codes, reasons, messages, defaults, field sets, order — is kept.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
        .expect("time regex")
});
static UID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").expect("uid regex")
});
/// A kubectl/table age: `5s`, `2m3s`, `4h`, `<unknown>`, `<invalid>`.
static AGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d+[smhdy])(\d+[smh])?$|^<unknown>$|^<invalid>$").expect("age regex")
});
static IPV4: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$").expect("ip regex"));

/// The stored resourceVersion a precondition error quotes.
static RECORD_RV: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"in record \(\d+\)").expect("record rv regex"));

/// Replaces per-run and per-cluster values in free text (messages, kubectl output).
pub fn text(s: &str, token: &str) -> String {
    let s = s.replace(token, "RUN");
    let s = RECORD_RV.replace_all(&s, "in record (<rv>)");
    let s = UID.replace_all(&s, "<uid>");
    TIME.replace_all(&s, "<time>").into_owned()
}

/// Normalises a JSON body in place. `token` is the run's random suffix.
pub fn json(v: &mut Value, token: &str) {
    walk(v, token, None);
}

fn walk(v: &mut Value, token: &str, key: Option<&str>) {
    match v {
        Value::Object(m) => {
            object(m, token);
            let cells = key == Some("rows");
            for (k, child) in m.iter_mut() {
                if cells
                    && k == "cells"
                    && let Value::Array(a) = child
                {
                    for c in a.iter_mut() {
                        if let Value::String(s) = c
                            && AGE.is_match(s)
                        {
                            *c = Value::String("<age>".into());
                        }
                    }
                }
                walk(child, token, Some(k));
            }
        }
        Value::Array(a) => {
            for child in a.iter_mut() {
                // Objects inside `rows` arrays see key "rows" so their cells are aged.
                walk(child, token, key);
            }
        }
        Value::String(s) => {
            let n = text(s, token);
            if n != *s {
                *s = n;
            }
        }
        _ => {}
    }
}

/// kube-apiserver orders managedFields by operation, then time in seconds
/// (none first), then manager: entries written in the same test step land in
/// the same second or not by chance, so timed entries are compared ordered
/// by manager (as if in one second); an entry without a time still sorts first.
fn order_managed_fields(m: &mut Map<String, Value>) {
    if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
        let key = |e: &Value| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (
                s("operation"),
                e.get("time").is_some(),
                s("manager"),
                s("apiVersion"),
                s("subresource"),
            )
        };
        entries.sort_by_key(key);
    }
}

/// Per-object rules, applied before the object's children are walked.
fn object(m: &mut Map<String, Value>, token: &str) {
    order_managed_fields(m);
    for (k, placeholder) in [
        ("uid", "<uid>"),
        ("resourceVersion", "<rv>"),
        ("continue", "<continue>"),
        ("selfLink", "<selfLink>"),
    ] {
        if let Some(Value::String(s)) = m.get_mut(k)
            && !s.is_empty()
        {
            *s = placeholder.into();
        }
    }
    // Generated names: keep the prefix, drop the random suffix.
    if let (Some(Value::String(g)), Some(Value::String(n))) = (m.get("generateName"), m.get("name"))
        && n.starts_with(g.as_str())
        && n.len() > g.len()
    {
        let g = g.clone();
        m.insert("name".into(), Value::String(format!("{g}<gen>")));
    }
    // Allocated addresses and ports differ by the cluster's configured ranges.
    for k in ["clusterIP", "podIP", "hostIP"] {
        if let Some(Value::String(s)) = m.get_mut(k)
            && IPV4.is_match(s)
        {
            *s = "<ip>".into();
        }
    }
    for k in ["clusterIPs"] {
        if let Some(Value::Array(a)) = m.get_mut(k) {
            for x in a.iter_mut() {
                if x.as_str().is_some_and(|s| IPV4.is_match(s)) {
                    *x = Value::String("<ip>".into());
                }
            }
        }
    }
    if let Some(p) = m.get_mut("nodePort")
        && p.is_number()
    {
        *p = Value::String("<nodePort>".into());
    }
    let _ = token; // strings (names, messages) are handled by text() in walk()
}

/// Sorts an array of strings (verbs, shortNames) so order does not count.
pub fn sorted_strings(v: &Value) -> Value {
    let mut s: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    s.sort();
    Value::from(s)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn placeholders_for_cluster_specific_values() {
        let mut v = json!({
            "metadata": {"name": "x-abcde", "generateName": "x-", "uid": "0f0e5a9e-7d0c-4f8e-9a4e-0123456789ab",
                         "resourceVersion": "42", "creationTimestamp": "2026-12-01T10:00:00Z",
                         "namespace": "fid-r1234-crud",
                         "managedFields": [{"manager": "m", "time": "2026-12-01T10:00:00Z"}]},
            "spec": {"clusterIP": "10.0.0.12", "ports": [{"nodePort": 31234, "port": 80}]},
            "message": "Precondition failed: UID in precondition: 0f0e5a9e-7d0c-4f8e-9a4e-0123456789ab",
            "rows": [{"cells": ["a", "5m3s", "3"]}]
        });
        super::json(&mut v, "r1234");
        assert_eq!(
            v,
            json!({
                "metadata": {"name": "x-<gen>", "generateName": "x-", "uid": "<uid>",
                             "resourceVersion": "<rv>", "creationTimestamp": "<time>",
                             "namespace": "fid-RUN-crud",
                             "managedFields": [{"manager": "m", "time": "<time>"}]},
                "spec": {"clusterIP": "<ip>", "ports": [{"nodePort": "<nodePort>", "port": 80}]},
                "message": "Precondition failed: UID in precondition: <uid>",
                "rows": [{"cells": ["a", "<age>", "3"]}]
            })
        );
    }

    #[test]
    fn empty_values_stay_empty() {
        let mut v = json!({"metadata": {"resourceVersion": "", "continue": ""}});
        let before = v.clone();
        super::json(&mut v, "r1");
        assert_eq!(v, before);
    }
}
