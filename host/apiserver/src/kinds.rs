//! Per-kind behaviour at write time: the defaults and status resets
//! kube-apiserver's registry strategies apply (Namespace, Service, Secret,
//! Deployment, CustomResourceDefinition). Nothing *runs* for these kinds;
//! only what the API server itself does on a write is emulated.

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use crate::errors::{ApiError, Cause};
use crate::resources::{ResourceDef, def_from_crd};

/// Finalizer kube-apiserver puts on every CRD so its objects are cleaned up.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

static NEXT_CLUSTER_IP: AtomicU32 = AtomicU32::new(1);

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut serde_json::Map<String, Value>> {
    let root = v.as_object_mut()?;
    let e = root.entry(key).or_insert_with(|| json!({}));
    if !e.is_object() {
        *e = json!({});
    }
    e.as_object_mut()
}

fn default(map: &mut serde_json::Map<String, Value>, key: &str, v: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), v);
    }
}

/// Defaults applied on create and update (as API defaulting does on decode).
pub fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Secret") => {
            if let Some(m) = obj.as_object_mut() {
                // An empty type defaults too (protobuf clients send "").
                if m.get("type").and_then(Value::as_str) == Some("") {
                    m.remove("type");
                }
                default(m, "type", json!("Opaque"));
            }
        }
        ("", "Service") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "type", json!("ClusterIP"));
                default(spec, "sessionAffinity", json!("None"));
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        default(p, "protocol", json!("TCP"));
                        if let Some(port) = p.get("port").cloned() {
                            default(p, "targetPort", port);
                        }
                    }
                }
            }
        }
        ("apps", "Deployment") => default_deployment(obj),
        _ => {}
    }
}

fn default_deployment(obj: &mut Value) {
    let Some(spec) = obj_mut(obj, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    default(
        spec,
        "strategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
    );
    let Some(pod) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    default(pod, "restartPolicy", json!("Always"));
    default(pod, "terminationGracePeriodSeconds", json!(30));
    default(pod, "dnsPolicy", json!("ClusterFirst"));
    default(pod, "securityContext", json!({}));
    default(pod, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        let Some(cs) = pod.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            let last = image.rsplit('/').next().unwrap_or("");
            let policy =
                if image.contains('@') || (last.contains(':') && !last.ends_with(":latest")) {
                    "IfNotPresent"
                } else {
                    "Always"
                };
            default(c, "imagePullPolicy", json!(policy));
            default(c, "terminationMessagePath", json!("/dev/termination-log"));
            default(c, "terminationMessagePolicy", json!("File"));
            default(c, "resources", json!({}));
            if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                }
            }
        }
    }
}

/// What a create does beyond metadata (status resets, allocated fields).
pub fn prepare_create(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Namespace") => {
            // The namespace controller's finalizer is always there (as the
            // real registry strategy does), so contents are cleaned up first.
            if let Some(spec) = obj_mut(obj, "spec") {
                let mut f: Vec<Value> = spec
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !f.iter().any(|x| x == "kubernetes") {
                    f.push(json!("kubernetes"));
                }
                spec.insert("finalizers".into(), Value::Array(f));
            }
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"phase": "Active"}));
            }
        }
        ("", "Service") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
                if !external && spec.get("clusterIP").is_none_or(|v| v.as_str() == Some("")) {
                    let n = NEXT_CLUSTER_IP.fetch_add(1, Ordering::Relaxed);
                    let ip = format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff);
                    spec.insert("clusterIP".into(), json!(ip));
                    spec.insert("clusterIPs".into(), json!([ip]));
                    default(spec, "ipFamilies", json!(["IPv4"]));
                    default(spec, "ipFamilyPolicy", json!("SingleStack"));
                    default(spec, "internalTrafficPolicy", json!("Cluster"));
                }
            }
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"loadBalancer": {}}));
            }
        }
        ("apps", "Deployment") => {
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({}));
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            prepare_crd(obj)?;
            let mut f = crate::meta::finalizers(obj);
            if !f.iter().any(|x| x == CRD_CLEANUP_FINALIZER) {
                f.push(CRD_CLEANUP_FINALIZER.to_string());
                crate::meta::set_finalizers(obj, &f);
            }
        }
        _ => {
            if def.status_subresource
                && let Some(m) = obj.as_object_mut()
            {
                m.remove("status");
            }
        }
    }
    Ok(())
}

fn crd_invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message,
        }],
    )
}

/// Validate a CRD and fill its status the way the apiextensions controllers
/// do at once (`NamesAccepted`, `Established`): there is no delay here.
pub fn prepare_crd(obj: &mut Value) -> Result<ResourceDef, ApiError> {
    let name = crate::meta::name(obj).unwrap_or_default().to_string();
    let def = def_from_crd(obj).map_err(|m| {
        let (field, msg) = m.split_once(": ").unwrap_or(("spec", m.as_str()));
        crd_invalid(&name, field, msg.to_string())
    })?;
    let expected = format!("{}.{}", def.resource, def.group);
    if name != expected {
        return Err(crd_invalid(
            &name,
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "conversion", json!({"strategy": "None"}));
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            default(names, "singular", json!(def.singular));
            default(names, "listKind", json!(def.list_kind));
        }
    }
    let storage = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let now = crate::meta::now_rfc3339();
    if let Some(m) = obj.as_object_mut() {
        m.insert(
            "status".into(),
            json!({
                "acceptedNames": names,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": now}
                ],
                "storedVersions": [storage]
            }),
        );
    }
    Ok(def)
}

/// CRD status while its objects are being removed.
pub fn mark_crd_terminating(obj: &mut Value) {
    let now = crate::meta::now_rfc3339();
    if let Some(conds) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        conds.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
        conds.push(
            json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress", "lastTransitionTime": now}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    fn def(kind: &str) -> ResourceDef {
        builtins().into_iter().find(|d| d.kind == kind).unwrap()
    }

    #[test]
    fn crd_gets_established_and_cleanup_finalizer() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        let d = prepare_crd(&mut crd).unwrap();
        assert_eq!(d.kind, "Widget");
        let crd_def = builtins()
            .into_iter()
            .find(|d| d.kind == "CustomResourceDefinition")
            .unwrap();
        prepare_create(&crd_def, &mut crd).unwrap();
        assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        assert_eq!(crd["status"]["storedVersions"][0], "v1");
        assert_eq!(crd["metadata"]["finalizers"][0], CRD_CLEANUP_FINALIZER);
    }

    #[test]
    fn crd_name_must_match_plural_and_group() {
        let mut crd = json!({"metadata": {"name": "wrong"}, "spec": {
            "group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        let e = prepare_crd(&mut crd).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.causes[0].field, "metadata.name");
    }

    #[test]
    fn namespace_and_service_defaults() {
        let mut ns = json!({"metadata": {"name": "a"}});
        prepare_create(&def("Namespace"), &mut ns).unwrap();
        assert_eq!(ns["spec"]["finalizers"][0], "kubernetes");
        assert_eq!(ns["status"]["phase"], "Active");
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        apply_defaults(&def("Service"), &mut svc);
        prepare_create(&def("Service"), &mut svc).unwrap();
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert!(
            svc["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .starts_with("10.96.")
        );
    }

    #[test]
    fn deployment_image_pull_policy_follows_tag() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "nginx:1.25"}, {"name": "b", "image": "nginx"}]}}}});
        apply_defaults(&def("Deployment"), &mut d);
        let cs = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(cs[1]["imagePullPolicy"], "Always");
        assert_eq!(d["spec"]["replicas"], 1);
    }
}
