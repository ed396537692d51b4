//! Field-level explanations for a plan: which fields of a child a write would
//! change, and how a parent's conditions and status would change.
//!
//! The *decision* to write is never taken here — that is
//! [`crate::apply::decide`]. These functions only explain it, walking the
//! desired object with the same rules as [`crate::diff::is_subset`] (so every
//! reason the subset check fails shows up as an entry) and, for fields the host
//! applied before but the plugin no longer sets, the host's own `Apply` entry in
//! `managedFields` (server-side apply removes exactly those).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diff::{APPLIED_HASH_ANNOTATION, is_subset};

/// One field that would change. `path` is a JSON pointer (RFC 6901) into the
/// object; `old`/`new` are absent when the field is absent before/after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// JSON pointer, e.g. `/spec/replicas`, `/data/index.html`.
    pub path: String,
    /// The current value (absent: the field does not exist yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The value after the write (absent: the field is removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// A condition as the plan shows it (times and generations left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionView {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Detail.
    pub message: String,
}

/// One condition type whose status, reason or message would change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionChange {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Now (absent: the condition does not exist yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<ConditionView>,
    /// After the reconcile (absent: the condition is dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<ConditionView>,
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn join(path: &str, segment: &str) -> String {
    format!("{path}/{}", escape(segment))
}

/// Why `desired` (the object the host would apply) is not a subset of
/// `observed`, field by field, plus the fields server-side apply would remove
/// (owned by `field_manager`'s `Apply` entry in `managed`, absent from
/// `desired`). The applied-hash annotation is listed only when nothing else
/// explains the write (a field dropped that the host did not own through apply).
pub fn child_changes(
    desired: &Value,
    observed: &Value,
    managed: &[ManagedFieldsEntry],
    field_manager: &str,
) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk_desired(desired, observed, "", &mut out);
    let ours = |m: &ManagedFieldsEntry| {
        m.manager.as_deref() == Some(field_manager) && m.operation.as_deref() == Some("Apply")
    };
    let others: Vec<&Value> = managed
        .iter()
        .filter(|m| !ours(m))
        .filter_map(|m| m.fields_v1.as_ref().map(|f| &f.0))
        .collect();
    if let Some(fields) = managed
        .iter()
        .find(|m| ours(m))
        .and_then(|m| m.fields_v1.as_ref())
    {
        let mut at = Walk {
            others: &others,
            segments: Vec::new(),
            out: &mut out,
        };
        at.removed(&fields.0, Some(desired), observed);
    }
    let hash_path = format!("/metadata/annotations/{}", escape(APPLIED_HASH_ANNOTATION));
    if out.iter().any(|c| c.path != hash_path) {
        out.retain(|c| c.path != hash_path);
    }
    out
}

fn walk_desired(d: &Value, o: &Value, path: &str, out: &mut Vec<FieldChange>) {
    match (d, o) {
        (Value::Object(dm), Value::Object(om)) => {
            for (k, dv) in dm {
                match om.get(k) {
                    Some(ov) => walk_desired(dv, ov, &join(path, k), out),
                    None if dv.is_null() => {}
                    None => out.push(FieldChange {
                        path: join(path, k),
                        old: None,
                        new: Some(dv.clone()),
                    }),
                }
            }
        }
        (Value::Array(da), Value::Array(oa)) if da.len() == oa.len() => {
            for (i, (dv, ov)) in da.iter().zip(oa).enumerate() {
                walk_desired(dv, ov, &format!("{path}/{i}"), out);
            }
        }
        _ if is_subset(d, o) => {}
        _ => out.push(FieldChange {
            path: path.to_string(),
            old: Some(o.clone()),
            new: (!d.is_null()).then(|| d.clone()),
        }),
    }
}

/// State of a walk over the host's `fieldsV1` set.
struct Walk<'a> {
    /// `fieldsV1` sets of every other manager entry.
    others: &'a [&'a Value],
    /// Field names from the root to the current set.
    segments: Vec<String>,
    out: &'a mut Vec<FieldChange>,
}

impl Walk<'_> {
    /// Every `f:<name>` in `fields` present in `observed`, absent from
    /// `desired` and owned by no other manager is a removal (a field another
    /// entry also owns — e.g. the `Update` entry of the POST that created the
    /// child — only loses the host as an owner and stays). List element keys
    /// (`k:`, `v:`, `i:`) are not followed: lists are compared whole by
    /// [`walk_desired`].
    fn removed(&mut self, fields: &Value, desired: Option<&Value>, observed: &Value) {
        let Some(set) = fields.as_object() else {
            return;
        };
        for (key, sub) in set {
            let Some(name) = key.strip_prefix("f:") else {
                continue;
            };
            let Some(ov) = observed.get(name) else {
                continue;
            };
            self.segments.push(name.to_string());
            match desired.and_then(|d| d.get(name)) {
                None if !self.owned_by_others() => self.out.push(FieldChange {
                    path: self.segments.iter().fold(String::new(), |p, s| join(&p, s)),
                    old: Some(ov.clone()),
                    new: None,
                }),
                None => {}
                Some(dv) if dv.is_object() && ov.is_object() => self.removed(sub, Some(dv), ov),
                Some(_) => {}
            }
            self.segments.pop();
        }
    }

    fn owned_by_others(&self) -> bool {
        self.others.iter().any(|set| {
            let mut node = Some(*set);
            for s in &self.segments {
                node = node.and_then(|n| n.get(format!("f:{s}")));
            }
            node.is_some()
        })
    }
}

/// Differences between two JSON values, recursing into objects only; arrays
/// and scalars are reported whole. Keys in `skip` (top level only) are ignored.
pub fn value_changes(old: &Value, new: &Value, skip: &[&str]) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk_values(Some(old), Some(new), "", skip, &mut out);
    out
}

fn walk_values(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &str,
    skip: &[&str],
    out: &mut Vec<FieldChange>,
) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if path.is_empty() && skip.contains(&k.as_str()) {
                    continue;
                }
                walk_values(a.get(k), b.get(k), &join(path, k), &[], out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(FieldChange {
            path: path.to_string(),
            old: a.cloned(),
            new: b.cloned(),
        }),
    }
}

fn view(c: &Value) -> Option<(String, ConditionView)> {
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let t = c.get("type")?.as_str()?.to_string();
    Some((
        t,
        ConditionView {
            status: s("status"),
            reason: s("reason"),
            message: s("message"),
        },
    ))
}

fn conditions(status: Option<&Value>) -> Vec<(String, ConditionView)> {
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(view).collect())
        .unwrap_or_default()
}

/// Conditions whose status, reason or message differ between two `.status`
/// values (new and changed ones in the new order, then dropped ones).
pub fn condition_changes(old: Option<&Value>, new: Option<&Value>) -> Vec<ConditionChange> {
    let (before, after) = (conditions(old), conditions(new));
    let find = |l: &[(String, ConditionView)], t: &str| {
        l.iter().find(|(x, _)| x == t).map(|(_, v)| v.clone())
    };
    let mut out = Vec::new();
    for (t, v) in &after {
        let was = find(&before, t);
        if was.as_ref() != Some(v) {
            out.push(ConditionChange {
                type_: t.clone(),
                old: was,
                new: Some(v.clone()),
            });
        }
    }
    for (t, v) in &before {
        if find(&after, t).is_none() {
            out.push(ConditionChange {
                type_: t.clone(),
                old: Some(v.clone()),
                new: None,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn ch(path: &str, old: Option<Value>, new: Option<Value>) -> FieldChange {
        FieldChange {
            path: path.into(),
            old,
            new,
        }
    }

    #[test]
    fn changed_added_and_nulled_fields_are_listed_server_defaults_are_not() {
        let desired = json!({"metadata": {"name": "web", "labels": {"a.b/c": "2"}},
            "spec": {"replicas": 3, "gone": null, "template": {"containers": [{"name": "c", "image": "v2"}]}},
            "data": {"new": "x"}});
        let observed = json!({"metadata": {"name": "web", "uid": "u", "labels": {"a.b/c": "1"}},
            "spec": {"replicas": 2, "gone": 1, "strategy": {}, "template": {"containers": [
                {"name": "c", "image": "v1", "terminationMessagePath": "/dev/termination-log"}]}},
            "data": {}});
        let got = child_changes(&desired, &observed, &[], "m");
        assert_eq!(
            got,
            vec![
                ch(
                    "/metadata/labels/a.b~1c",
                    Some(json!("1")),
                    Some(json!("2"))
                ),
                ch("/spec/replicas", Some(json!(2)), Some(json!(3))),
                ch("/spec/gone", Some(json!(1)), None),
                ch(
                    "/spec/template/containers/0/image",
                    Some(json!("v1")),
                    Some(json!("v2"))
                ),
                ch("/data/new", None, Some(json!("x"))),
            ]
        );
        // Every entry is a reason the subset check fails, and there is none without one.
        assert!(!is_subset(&desired, &observed));
        assert!(child_changes(&observed, &observed, &[], "m").is_empty());
    }

    #[test]
    fn lists_of_other_length_are_replaced_whole() {
        let got = child_changes(&json!({"a": [1, 2]}), &json!({"a": [1]}), &[], "m");
        assert_eq!(got, vec![ch("/a", Some(json!([1])), Some(json!([1, 2])))]);
    }

    fn entry(manager: &str, op: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(op.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn fields_the_host_applied_and_no_longer_sets_are_removals() {
        let hash = format!("/metadata/annotations/{}", escape(APPLIED_HASH_ANNOTATION));
        let desired = json!({"metadata": {"annotations": {APPLIED_HASH_ANNOTATION: "new"}},
                             "data": {"keep": "1"}});
        let observed = json!({"metadata": {"annotations": {APPLIED_HASH_ANNOTATION: "old"}},
                              "data": {"keep": "1", "dropped": "2", "theirs": "3"}});
        let fields = json!({"f:data": {"f:keep": {}, "f:dropped": {}},
                            "f:metadata": {"f:annotations": {".": {}}}});
        let ours = entry("wasm-reconciler/c", "Apply", fields.clone());
        let got = child_changes(
            &desired,
            &observed,
            std::slice::from_ref(&ours),
            "wasm-reconciler/c",
        );
        assert_eq!(got, vec![ch("/data/dropped", Some(json!("2")), None)]);
        // Fields set by a create (operation Update) are not removed by apply,
        // alone or co-owned; then only the hash explains the write.
        let created = entry("wasm-reconciler/c", "Update", fields);
        for managed in [vec![created.clone()], vec![ours, created]] {
            let got = child_changes(&desired, &observed, &managed, "wasm-reconciler/c");
            assert_eq!(got, vec![ch(&hash, Some(json!("old")), Some(json!("new")))]);
        }
    }

    #[test]
    fn status_and_condition_changes() {
        let old = json!({"phase": "A", "n": {"x": 1}, "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "T"},
                           {"type": "Gone", "status": "True", "reason": "G", "message": ""}]});
        let new = json!({"phase": "B", "n": {"x": 1}, "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "T2"},
                           {"type": "Up", "status": "False", "reason": "Down", "message": "m"}]});
        assert_eq!(
            value_changes(&old, &new, &["conditions"]),
            vec![
                ch("/observedGeneration", Some(json!(1)), Some(json!(2))),
                ch("/phase", Some(json!("A")), Some(json!("B"))),
            ]
        );
        let c = condition_changes(Some(&old), Some(&new));
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].type_.as_str(), c[0].old.is_none()), ("Up", true));
        assert_eq!(c[0].new.as_ref().map(|v| v.reason.as_str()), Some("Down"));
        assert_eq!((c[1].type_.as_str(), c[1].new.is_none()), ("Gone", true));
    }
}
