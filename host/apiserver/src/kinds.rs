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

/// Next Service address; 10.96.0.1 belongs to `default/kubernetes`.
static NEXT_CLUSTER_IP: AtomicU32 = AtomicU32::new(2);
/// Next node port (the range is 30000-32767).
static NEXT_NODE_PORT: AtomicU32 = AtomicU32::new(0);

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

const DS_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The defaulter of each kind that has one: (group, kind, defaulter).
type Defaulter = fn(&mut Value);
const DEFAULTERS: &[(&str, &str, Defaulter)] = &[
    ("", "Secret", default_secret),
    ("", "Namespace", default_namespace),
    ("", "Service", default_service),
    ("", "Pod", default_pod),
    ("", "PodTemplate", default_pod_template),
    ("", "ReplicationController", default_replication_controller),
    ("apps", "Deployment", default_deployment),
    ("apps", "ReplicaSet", default_replicaset),
    ("apps", "StatefulSet", default_statefulset),
    ("apps", "DaemonSet", default_daemonset),
    ("batch", "Job", default_job),
    ("batch", "CronJob", default_cronjob),
    ("", "PersistentVolumeClaim", default_pvc),
    ("networking.k8s.io", "NetworkPolicy", default_network_policy),
    ("autoscaling", "HorizontalPodAutoscaler", default_hpa),
    ("", "LimitRange", default_limit_range),
    ("", "Endpoints", default_endpoints),
];

/// Defaults applied on create and update (as API defaulting does on decode).
pub fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    if let Some((_, _, defaulter)) = DEFAULTERS
        .iter()
        .find(|(g, k, _)| *g == def.group && *k == def.kind)
    {
        defaulter(obj);
    }
}

fn default_secret(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        // An empty type defaults too (protobuf clients send "").
        if m.get("type").and_then(Value::as_str) == Some("") {
            m.remove("type");
        }
        default(m, "type", json!("Opaque"));
    }
    fold_string_data(obj);
}

fn default_namespace(obj: &mut Value) {
    // The namespace registry strategy owns this label: always the name.
    let name = crate::meta::name(obj).unwrap_or_default().to_string();
    let m = crate::meta::meta_mut(obj);
    let labels = m.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(l) = labels.as_object_mut() {
        l.insert(NAMESPACE_NAME_LABEL.into(), json!(name));
    }
}

fn default_pod(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        default_pod_spec(spec);
        default(spec, "enableServiceLinks", json!(true));
    }
}

fn default_pod_template(obj: &mut Value) {
    default_template(obj.get_mut("template"));
}

fn default_replication_controller(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "replicas", json!(1));
        // The selector and labels default to the template's labels.
        if let Some(labels) = spec
            .get("template")
            .and_then(|t| t.pointer("/metadata/labels"))
            .cloned()
        {
            default(spec, "selector", labels);
        }
    }
    default_template(obj.pointer_mut("/spec/template"));
}

fn default_replicaset(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "replicas", json!(1));
    }
    default_template(obj.pointer_mut("/spec/template"));
}

fn default_job(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default_job_spec(spec);
    }
    default_template(obj.pointer_mut("/spec/template"));
}

fn default_cronjob(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "concurrencyPolicy", json!("Allow"));
        default(spec, "suspend", json!(false));
        default(spec, "successfulJobsHistoryLimit", json!(3));
        default(spec, "failedJobsHistoryLimit", json!(1));
    }
    default_template(obj.pointer_mut("/spec/jobTemplate/spec/template"));
}

fn default_pvc(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "volumeMode", json!("Filesystem"));
    }
}

fn default_network_policy(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let mut types = vec![json!("Ingress")];
        if egress {
            types.push(json!("Egress"));
        }
        default_empty_list(spec, "policyTypes", Value::Array(types));
    }
}

/// `autoscaling/v2` only (v1 has no `metrics`).
fn default_hpa(obj: &mut Value) {
    if obj["apiVersion"] != "autoscaling/v2" {
        return;
    }
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "minReplicas", json!(1));
        default_empty_list(
            spec,
            "metrics",
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
}

fn default_limit_range(obj: &mut Value) {
    let limits = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut);
    for item in limits.into_iter().flatten() {
        default_limit_range_item(item);
    }
}

fn default_endpoints(obj: &mut Value) {
    let subsets = obj.get_mut("subsets").and_then(Value::as_array_mut);
    for subset in subsets.into_iter().flatten() {
        let ports = subset.get_mut("ports").and_then(Value::as_array_mut);
        for p in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
            default(p, "protocol", json!("TCP"));
        }
    }
}

/// Sets `key` when it is absent, null or an empty list (Go: `len(x) == 0`).
fn default_empty_list(map: &mut serde_json::Map<String, Value>, key: &str, v: Value) {
    if map
        .get(key)
        .is_none_or(|x| x.is_null() || x.as_array().is_some_and(Vec::is_empty))
    {
        map.insert(key.into(), v);
    }
}

/// `SetDefaults_LimitRangeItem`: for containers, the default limit comes
/// from max, the default request from the default limit, else from min.
fn default_limit_range_item(item: &mut Value) {
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let Some(m) = item.as_object_mut() else {
        return;
    };
    let get = |m: &serde_json::Map<String, Value>, k: &str| {
        m.get(k)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let mut default_limit = get(m, "default");
    for (k, v) in get(m, "max") {
        default_limit.entry(k).or_insert(v);
    }
    let mut default_request = get(m, "defaultRequest");
    for (k, v) in default_limit.iter().chain(get(m, "min").iter()) {
        default_request.entry(k.clone()).or_insert(v.clone());
    }
    for (k, v) in [
        ("default", default_limit),
        ("defaultRequest", default_request),
    ] {
        if !v.is_empty() {
            m.insert(k.into(), Value::Object(v));
        }
    }
}

/// The label every namespace carries (set by the server, not changeable).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `stringData` is write-only: its entries are folded into `data` (base64),
/// overriding keys of the same name, and it is never stored.
fn fold_string_data(obj: &mut Value) {
    use base64::Engine;
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let Some(Value::Object(sd)) = m.remove("stringData") else {
        return;
    };
    if sd.is_empty() {
        return;
    }
    let data = m.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Some(d) = data.as_object_mut() {
        for (k, v) in sd {
            let text = v.as_str().unwrap_or_default();
            d.insert(
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

fn default_job_spec(spec: &mut serde_json::Map<String, Value>) {
    let has = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    if !has("completions") && !has("parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    default(spec, "backoffLimit", json!(6));
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    default(spec, "manualSelector", json!(false));
}

/// Defaults of a pod template (`spec.template` of the workload kinds).
fn default_template(t: Option<&mut Value>) {
    if let Some(spec) = t
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        default_pod_spec(spec);
    }
}

/// `SetDefaults_PodSpec` and `SetDefaults_Container` (core/v1).
fn default_pod_spec(pod: &mut serde_json::Map<String, Value>) {
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
            default_container(c);
        }
    }
}

fn default_container(c: &mut serde_json::Map<String, Value>) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let last = image.rsplit('/').next().unwrap_or("");
    let policy = if image.contains('@') || (last.contains(':') && !last.ends_with(":latest")) {
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
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            default(p, "timeoutSeconds", json!(1));
            default(p, "periodSeconds", json!(10));
            default(p, "successThreshold", json!(1));
            default(p, "failureThreshold", json!(3));
            if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
                default(h, "path", json!("/"));
                default(h, "scheme", json!("HTTP"));
            }
        }
    }
    if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
        for e in env.iter_mut() {
            if let Some(f) = e
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                default(f, "apiVersion", json!("v1"));
            }
        }
    }
}

/// Namespaces kube-apiserver never lets go (the NamespaceLifecycle plugin).
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Refuse deletes the real server refuses before anything else happens.
pub fn check_delete(def: &ResourceDef, name: &str) -> Result<(), ApiError> {
    if def.group.is_empty() && def.kind == "Namespace" && IMMORTAL_NAMESPACES.contains(&name) {
        let mut e = ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        ));
        e.name = Some(name.to_string());
        e.kind = Some("namespaces".into());
        return Err(e);
    }
    Ok(())
}

/// What an update keeps from the stored object although the body omits it
/// (allocated Service IPs and node ports, as the Service REST does).
pub fn prepare_update(def: &ResourceDef, old: &Value, new: &mut Value) {
    if !(def.group.is_empty() && def.kind == "Service") {
        return;
    }
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "internalTrafficPolicy",
    ] {
        if spec
            .get(k)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
            && let Some(v) = old.pointer(&format!("/spec/{k}"))
        {
            spec.insert(k.into(), v.clone());
        }
    }
    let old_ports = old
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            if p.get("nodePort").is_some_and(|v| !v.is_null()) {
                continue;
            }
            let same = old_ports
                .iter()
                .find(|o| o.get("port") == p.get("port") && o.get("protocol") == p.get("protocol"));
            if let Some(np) = same.and_then(|o| o.get("nodePort")) {
                p.insert("nodePort".into(), np.clone());
            }
        }
    }
}

/// Objects kube-apiserver creates at start beyond the system namespaces:
/// `default/kubernetes`, the Service of the API server itself, which holds
/// the first address of the service range.
pub fn bootstrap_objects() -> Vec<(&'static str, String, Value)> {
    vec![(
        "/services",
        "default/kubernetes".into(),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": crate::meta::now_rfc3339(),
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "clusterIP": "10.96.0.1",
                "clusterIPs": ["10.96.0.1"],
                "internalTrafficPolicy": "Cluster",
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
            "status": {"loadBalancer": {}},
        }),
    )]
}

/// A new Namespace: the namespace controller's finalizer is always there
/// (as the real registry strategy does), so contents are cleaned up first;
/// it starts `Active`.
fn prepare_namespace(obj: &mut Value) {
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

/// A new Service: its cluster IP (and IP family fields, also for a headless
/// one, as kube-apiserver's IP allocation does) and node ports.
fn prepare_service(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
        if !external && spec.get("clusterIP").and_then(Value::as_str) == Some("None") {
            default(spec, "clusterIPs", json!(["None"]));
            default(spec, "ipFamilies", json!(["IPv4"]));
            default(spec, "ipFamilyPolicy", json!("SingleStack"));
        }
        if !external && spec.get("clusterIP").is_none_or(|v| v.as_str() == Some("")) {
            let n = NEXT_CLUSTER_IP.fetch_add(1, Ordering::Relaxed);
            let ip = format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff);
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
            default(spec, "ipFamilies", json!(["IPv4"]));
            default(spec, "ipFamilyPolicy", json!("SingleStack"));
        }
        allocate_node_ports(spec);
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("status".into(), json!({"loadBalancer": {}}));
    }
}

/// What a create does beyond metadata (status resets, allocated fields).
pub fn prepare_create(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    if def.group.is_empty() && def.kind == "Pod" {
        // The Priority admission plugin (after managedFields are recorded).
        if let Some(spec) = obj_mut(obj, "spec") {
            default(spec, "priority", json!(0));
            default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    }
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Namespace") => prepare_namespace(obj),
        ("", "Service") => prepare_service(obj),
        ("apps", "Deployment") => {
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({}));
            }
        }
        ("batch", "Job") => generate_job_selector(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            prepare_crd(obj)?;
            let mut f = crate::meta::finalizers(obj);
            if !f.iter().any(|x| x == CRD_CLEANUP_FINALIZER) {
                f.push(CRD_CLEANUP_FINALIZER.to_string());
                crate::meta::set_finalizers(obj, &f);
            }
        }
        _ => {
            // The registry resets status to its zero value, which Go writes
            // (`status: {}` for built-ins); custom resources lose it.
            let zero = def
                .versions
                .first()
                .and_then(|v| crate::validation::zero_object(def, v))
                .and_then(|z| z.get("status").cloned());
            if def.status_subresource
                && let Some(m) = obj.as_object_mut()
            {
                match zero {
                    Some(z) => m.insert("status".into(), z),
                    None => m.remove("status"),
                };
            }
        }
    }
    Ok(())
}

fn allocate_node_ports(spec: &mut serde_json::Map<String, Value>) {
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("");
    if ty != "NodePort" && ty != "LoadBalancer" {
        return;
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            if p.get("nodePort").and_then(Value::as_u64).unwrap_or(0) == 0 {
                let n = NEXT_NODE_PORT.fetch_add(1, Ordering::Relaxed) % 2768;
                p.insert("nodePort".into(), json!(30000 + n));
            }
        }
    }
}

/// A Job without `manualSelector: true` selects its pods by its own uid
/// (the Job strategy's `generateSelector`); the uid is assigned here so the
/// labels and `metadata.uid` agree.
fn generate_job_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("manualSelector".into(), json!(false));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let name = crate::meta::name(obj).unwrap_or_default().to_string();
    crate::meta::meta_mut(obj).insert("uid".into(), json!(uid));
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
        if let Some(t) = spec.get_mut("template") {
            let m = crate::meta::meta_mut(t);
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", &uid),
                    ("batch.kubernetes.io/job-name", &name),
                    ("controller-uid", &uid),
                    ("job-name", &name),
                ] {
                    l.insert(k.into(), json!(v));
                }
            }
        }
    }
    // A Job without labels takes its pod template's (the Job strategy).
    let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
    let m = crate::meta::meta_mut(obj);
    if m.get("labels")
        .and_then(Value::as_object)
        .is_none_or(serde_json::Map::is_empty)
        && let Some(l) = template_labels
    {
        m.insert("labels".into(), l);
    }
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
    let causes = crate::validation::crd::check(obj);
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            causes,
        ));
    }
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

/// A Service's defaults (type, session affinity, traffic policies, ports' protocol and target port).
fn default_service(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
        default(spec, "type", json!("ClusterIP"));
        if !external {
            default(spec, "sessionAffinity", json!("None"));
            default(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        let ty = spec
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if ty == "NodePort" || ty == "LoadBalancer" {
            default(spec, "externalTrafficPolicy", json!("Cluster"));
        }
        if ty == "LoadBalancer" {
            default(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
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

/// A Deployment's defaults (replicas, strategy, history, progress deadline, its pod template).
fn default_deployment(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "replicas", json!(1));
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "progressDeadlineSeconds", json!(600));
        default(spec, "strategy", json!({}));
        if let Some(st) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
            default(st, "type", json!("RollingUpdate"));
            if st.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                default(st, "rollingUpdate", json!({}));
                if let Some(ru) = st.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                    default(ru, "maxUnavailable", json!("25%"));
                    default(ru, "maxSurge", json!("25%"));
                }
            }
        }
    }
    default_template(obj.pointer_mut("/spec/template"));
}

/// A StatefulSet's defaults (replicas, pod management, update strategy, retention, its pod template).
fn default_statefulset(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "replicas", json!(1));
        default(spec, "podManagementPolicy", json!("OrderedReady"));
        default(spec, "revisionHistoryLimit", json!(10));
        default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "partition": 0}}),
        );
        default(
            spec,
            "persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
        );
    }
    default_template(obj.pointer_mut("/spec/template"));
}

/// A DaemonSet's defaults (update strategy, history, template generation, its pod template).
fn default_daemonset(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        default(spec, "revisionHistoryLimit", json!(10));
        default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
        );
    }
    default_template(obj.pointer_mut("/spec/template"));
    // apps/v1 carries the internal TemplateGeneration (1 on create)
    // as this annotation; it is kept as it is on updates here.
    let m = crate::meta::meta_mut(obj);
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if let Some(a) = ann.as_object_mut()
        && !a.contains_key(DS_TEMPLATE_GENERATION)
    {
        a.insert(DS_TEMPLATE_GENERATION.into(), json!("1"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    fn def(kind: &str) -> ResourceDef {
        builtins().into_iter().find(|d| d.kind == kind).unwrap()
    }

    /// Defaults as kube-apiserver v1.37.2 stores them (tests/fidelity,
    /// builtins/defaults/*).
    #[test]
    fn networkpolicy_hpa_limitrange_and_endpoints_defaults() {
        let mut np = json!({"apiVersion": "networking.k8s.io/v1", "spec": {"podSelector": {}}});
        apply_defaults(&def("NetworkPolicy"), &mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
        let mut np = json!({"apiVersion": "networking.k8s.io/v1",
            "spec": {"podSelector": {}, "egress": [{}]}});
        apply_defaults(&def("NetworkPolicy"), &mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));

        let mut hpa = json!({"apiVersion": "autoscaling/v2", "spec": {"maxReplicas": 3}});
        apply_defaults(&def("HorizontalPodAutoscaler"), &mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );

        let mut lr =
            json!({"spec": {"limits": [{"type": "Container", "default": {"cpu": "100m"}}]}});
        apply_defaults(&def("LimitRange"), &mut lr);
        assert_eq!(
            lr["spec"]["limits"][0]["defaultRequest"],
            json!({"cpu": "100m"})
        );

        let mut ep = json!({"subsets": [{"ports": [{"port": 80}]}]});
        apply_defaults(&def("Endpoints"), &mut ep);
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn crd_gets_established_and_cleanup_finalizer() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
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
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
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
