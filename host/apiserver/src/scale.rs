//! The `/scale` subresource: an `autoscaling/v1` Scale view of an object's
//! replica count, which `kubectl scale` and autoscalers read and write.
//! Built-ins (Deployments, ReplicaSets, StatefulSets,
//! ReplicationControllers) keep it in `.spec.replicas`; CRDs name the paths
//! in `subresources.scale`. A write changes only the replica count, as the
//! main resource would (generation, resourceVersion, managedFields).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::app::App;
use crate::errors::{ApiError, Cause};
use crate::ops::{Target, write_existing};
use crate::patching::PatchKind;
use crate::resources::ScaleDef;
use crate::store::obj_key;

/// `.spec.replicas` → `/spec/replicas`.
fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .replace('.', "/")
        .split('/')
        .fold(String::new(), |acc, seg| format!("{acc}/{seg}"))
}

/// A selector in its string form (`metav1.LabelSelector` as kubectl and
/// the HPA controller parse it), from a LabelSelector, a plain label map
/// (ReplicationController) or a string (CRDs).
pub(crate) fn selector_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) if m.contains_key("matchLabels") || m.contains_key("matchExpressions") => {
            let mut reqs: Vec<(String, String)> = Vec::new();
            if let Some(labels) = m.get("matchLabels").and_then(Value::as_object) {
                for (k, v) in labels {
                    reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
                }
            }
            for e in m
                .get("matchExpressions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                let mut values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                values.sort_unstable();
                let r = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                    "In" => format!("{key} in ({})", values.join(",")),
                    "NotIn" => format!("{key} notin ({})", values.join(",")),
                    "Exists" => key.to_string(),
                    "DoesNotExist" => format!("!{key}"),
                    _ => continue,
                };
                reqs.push((key.to_string(), r));
            }
            reqs.sort();
            Some(
                reqs.into_iter()
                    .map(|(_, r)| r)
                    .collect::<Vec<_>>()
                    .join(","),
            )
        }
        Value::Object(m) => {
            let mut pairs: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            pairs.sort();
            Some(pairs.join(","))
        }
        _ => None,
    }
}

/// The Scale view of `obj`.
pub fn scale_of(sd: &ScaleDef, obj: &Value) -> Value {
    let int = |path: &str| {
        obj.pointer(&pointer(path))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let mut m = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    let mut status = json!({"replicas": int(&sd.status_replicas)});
    if let Some(sel) = sd
        .label_selector
        .as_deref()
        .and_then(|p| obj.pointer(&pointer(p)))
        .and_then(selector_string)
        .filter(|s| !s.is_empty())
    {
        status["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": m,
        "spec": {"replicas": int(&sd.spec_replicas)},
        "status": status,
    })
}

fn scale_def<'a>(t: &Target<'a>) -> Result<&'a ScaleDef, ApiError> {
    t.def.scale.as_ref().ok_or_else(ApiError::no_route)
}

fn current(app: &App, t: &Target<'_>, name: &str) -> Result<Arc<Value>, ApiError> {
    let ns = if t.def.namespaced { t.namespace } else { "" };
    app.store
        .get(&t.def.key(), &obj_key(ns, name))
        .ok_or_else(|| ApiError::not_found(t.def.qualified(), name))
}

/// GET `/scale`.
pub fn get(app: &App, t: &Target<'_>, name: &str) -> Result<Value, ApiError> {
    Ok(scale_of(scale_def(t)?, &*current(app, t, name)?))
}

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "autoscaling",
        "Scale",
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message,
        }],
    )
}

/// Write `scale.spec.replicas` (PUT, or the result of a PATCH) into the object.
fn write(app: &App, t: &Target<'_>, name: &str, scale: &Value) -> Result<Value, ApiError> {
    let sd = scale_def(t)?;
    if scale
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != "Scale")
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the body ({}) does not match the kind of the resource (Scale)",
            scale["kind"].as_str().unwrap_or("")
        )));
    }
    if let Some(n) = scale.pointer("/metadata/name").and_then(Value::as_str)
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_i64()
            .filter(|r| i32::try_from(*r).is_ok())
            .ok_or_else(|| {
                invalid(
                    name,
                    "spec.replicas",
                    format!("Invalid value: {v}: must be an integer"),
                )
            })?,
    };
    if replicas < 0 {
        return Err(invalid(
            name,
            "spec.replicas",
            format!("Invalid value: {replicas}: must be greater than or equal to 0"),
        ));
    }
    let precondition = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    loop {
        let old = current(app, t, name)?;
        let mut new = (*old).clone();
        if let Some(m) = new.as_object_mut() {
            m.insert("apiVersion".into(), json!(t.def.group_version(t.version)));
        }
        set_path(&mut new, &sd.spec_replicas, json!(replicas));
        if let Some(rv) = precondition {
            crate::meta::meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
        }
        match write_existing(app, t, name, &old, new, precondition.is_some(), false) {
            // A concurrent write between read and commit: read again
            // (no resourceVersion was asked for).
            Err(e) if e.code == 409 && e.message == "retry" => continue,
            Err(e) => return Err(e),
            Ok(obj) => return Ok(scale_of(sd, &obj)),
        }
    }
}

fn set_path(obj: &mut Value, path: &str, v: Value) {
    let mut node = obj;
    let segs: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for (i, seg) in segs.iter().enumerate() {
        if !node.is_object() {
            *node = json!({});
        }
        let Some(m) = node.as_object_mut() else {
            return;
        };
        if i + 1 == segs.len() {
            m.insert((*seg).to_string(), v);
            return;
        }
        node = m.entry(*seg).or_insert_with(|| json!({}));
    }
}

/// PUT `/scale`.
pub fn update(app: &App, t: &Target<'_>, name: &str, scale: &Value) -> Result<Value, ApiError> {
    write(app, t, name, scale)
}

/// PATCH `/scale`: the patch applies to the Scale object. A Scale has no
/// lists, so strategic merge and apply patches merge like JSON merge patches.
pub fn patch(
    app: &App,
    t: &Target<'_>,
    name: &str,
    kind: PatchKind,
    body: &Value,
) -> Result<Value, ApiError> {
    let mut scale = get(app, t, name)?;
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(body.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut scale, &ops)
                .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
        }
        PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
            json_patch::merge(&mut scale, body);
        }
    }
    write(app, t, name, &scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_render_like_label_selector_strings() {
        let s = json!({"matchLabels": {"app": "web", "tier": "fe"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]},
                                 {"key": "x", "operator": "DoesNotExist"}]});
        assert_eq!(
            selector_string(&s).unwrap(),
            "app=web,env in (dev,prod),tier=fe,!x"
        );
        assert_eq!(
            selector_string(&json!({"b": "2", "a": "1"})).unwrap(),
            "a=1,b=2"
        );
    }

    #[test]
    fn scale_reads_replicas_and_selector_from_paths() {
        let d = json!({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2}});
        let s = scale_of(&ScaleDef::builtin(), &d);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=web"}));
        assert_eq!(s["metadata"]["resourceVersion"], "7");
        let mut o = json!({});
        set_path(&mut o, ".spec.size", json!(4));
        assert_eq!(o, json!({"spec": {"size": 4}}));
        assert_eq!(pointer(".status.replicas"), "/status/replicas");
    }
}
