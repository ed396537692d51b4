//! Per-kind validation of built-in objects: the common rules of
//! kube-apiserver's `pkg/apis/*/validation` for the kinds operators write
//! (workloads and their pod templates, ConfigMaps, Secrets, Services),
//! worded as the real server words them. Runs on the decoded, defaulted
//! object; `old` is the stored object on updates.

use std::collections::HashSet;

use base64::Engine;
use serde_json::{Map, Value};

use super::objectmeta::{self, check_label_map, check_selector, invalid, quote};
use crate::errors::Cause;

/// ConfigMap and Secret data limit (`MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

fn cause(reason: &'static str, field: &str, message: String) -> Cause {
    Cause {
        reason,
        field: field.to_string(),
        message,
    }
}

fn required(field: &str) -> Cause {
    cause("FieldValueRequired", field, "Required value".into())
}

fn forbidden(field: &str, why: &str) -> Cause {
    cause("FieldValueForbidden", field, format!("Forbidden: {why}"))
}

fn invalid_raw(field: &str, shown: &str, msg: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {shown}: {msg}"),
    )
}

fn not_supported(field: &str, v: &str, supported: &[&str]) -> Cause {
    let list = supported
        .iter()
        .map(|s| quote(s))
        .collect::<Vec<_>>()
        .join(", ");
    cause(
        "FieldValueNotSupported",
        field,
        format!("Unsupported value: {}: supported values: {list}", quote(v)),
    )
}

fn s<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// A value as field errors print it: Go's `json.Marshal` (map keys sorted).
pub fn go_json_map(m: Option<&Map<String, Value>>) -> String {
    let Some(m) = m else {
        return "null".into();
    };
    let sorted: std::collections::BTreeMap<&String, &Value> = m.iter().collect();
    serde_json::to_string(&sorted).unwrap_or_default()
}

/// A `LabelSelector` as `json.Marshal` prints it (struct field order,
/// empty fields omitted).
pub fn go_json_selector(sel: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(ml) = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        parts.push(format!("\"matchLabels\":{}", go_json_map(Some(ml))));
    }
    if let Some(list) = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    {
        let items = list
            .iter()
            .map(|e| {
                let mut f = vec![
                    format!("\"key\":{}", quote(s(e, "/key").unwrap_or_default())),
                    format!(
                        "\"operator\":{}",
                        quote(s(e, "/operator").unwrap_or_default())
                    ),
                ];
                if let Some(v) = e
                    .get("values")
                    .and_then(Value::as_array)
                    .filter(|v| !v.is_empty())
                {
                    f.push(format!("\"values\":{}", Value::Array(v.clone())));
                }
                format!("{{{}}}", f.join(","))
            })
            .collect::<Vec<_>>()
            .join(",");
        parts.push(format!("\"matchExpressions\":[{items}]"));
    }
    format!("{{{}}}", parts.join(","))
}

/// Does a `LabelSelector` object select `labels`?
pub fn selector_matches(sel: &Value, labels: Option<&Map<String, Value>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let ml_ok = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|ml| ml.iter().all(|(k, v)| get(k) == v.as_str()));
    let ex_ok = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|list| {
            list.iter().all(|e| {
                let key = s(e, "/key").unwrap_or_default();
                let vals: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match s(e, "/operator") {
                    Some("In") => get(key).is_some_and(|v| vals.contains(&v)),
                    Some("NotIn") => get(key).is_none_or(|v| !vals.contains(&v)),
                    Some("Exists") => get(key).is_some(),
                    Some("DoesNotExist") => get(key).is_none(),
                    _ => false,
                }
            })
        });
    ml_ok && ex_ok
}

/// Per-kind rules; `old` is the stored object on updates.
pub fn check(group: &str, kind: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    match (group, kind) {
        ("", "ConfigMap") => config_map(obj, old),
        ("", "Secret") => secret(obj, old),
        ("", "Service") => service(obj),
        ("", "Pod") => obj
            .get("spec")
            .map(|p| pod_spec(p, "spec", &["Always", "OnFailure", "Never"]))
            .unwrap_or_else(|| vec![required("spec.containers")]),
        ("", "PodTemplate") => template(obj, "template", &["Always", "OnFailure", "Never"]),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("", "ReplicationController") => workload(kind, obj, old),
        ("batch", "Job") => job_spec(obj.get("spec"), "spec"),
        ("batch", "CronJob") => cron_job(obj),
        ("rbac.authorization.k8s.io", "Role") => policy_rules(obj, true),
        ("rbac.authorization.k8s.io", "ClusterRole") => policy_rules(obj, false),
        _ => Vec::new(),
    }
}

fn nonnegative(obj: &Value, ptr: &str, field: &str, out: &mut Vec<Cause>) {
    if let Some(n) = obj.pointer(ptr).and_then(Value::as_i64)
        && n < 0
    {
        out.push(invalid_raw(
            field,
            &n.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

/// Deployments, ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers.
fn workload(kind: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if kind != "DaemonSet" {
        nonnegative(&spec, "/replicas", "spec.replicas", &mut out);
    }
    nonnegative(&spec, "/minReadySeconds", "spec.minReadySeconds", &mut out);
    nonnegative(
        &spec,
        "/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        &mut out,
    );
    let tmpl_labels = spec
        .pointer("/template/metadata/labels")
        .and_then(Value::as_object);
    if kind == "ReplicationController" {
        // A map selector, defaulted from the template labels.
        if let Some(sel) = spec.get("selector").and_then(Value::as_object) {
            out.extend(check_label_map(sel, "spec.selector"));
        }
    } else {
        match spec.get("selector").filter(|v| !v.is_null()) {
            None => {
                out.push(required("spec.selector"));
                // A missing selector selects nothing.
                out.push(invalid_raw(
                    "spec.template.metadata.labels",
                    &go_json_map(tmpl_labels),
                    "`selector` does not match template `labels`",
                ));
            }
            Some(sel) => out.extend(workload_selector(kind, sel, tmpl_labels, old)),
        }
    }
    // The pod template comes right after the selector checks.
    out.extend(template(obj, "spec.template", &["Always"]));
    if kind == "Deployment" {
        out.extend(deployment_strategy(&spec));
        if let Some(p) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
            let min_ready = spec
                .get("minReadySeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if p <= min_ready {
                out.push(invalid_raw(
                    "spec.progressDeadlineSeconds",
                    &p.to_string(),
                    "must be greater than minReadySeconds",
                ));
            }
        }
    }
    out
}

/// A workload's label selector: valid syntax, not empty, matching the pod
/// template's labels, and unchanged on update.
fn workload_selector(
    kind: &str,
    sel: &Value,
    tmpl_labels: Option<&Map<String, Value>>,
    old: Option<&Value>,
) -> Vec<Cause> {
    let mut out = Vec::new();
    let syntax = check_selector(sel, "spec.selector");
    let bad_syntax = !syntax.is_empty();
    out.extend(syntax);
    let empty = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    if empty {
        out.push(invalid_raw(
            "spec.selector",
            &go_json_selector(sel),
            &format!("empty selector is invalid for {}", kind.to_lowercase()),
        ));
    }
    if bad_syntax {
        out.push(invalid_raw(
            "spec.selector",
            &go_json_selector(sel),
            "invalid label selector",
        ));
    } else if !empty && !selector_matches(sel, tmpl_labels) {
        out.push(invalid_raw(
            "spec.template.metadata.labels",
            &go_json_map(tmpl_labels),
            "`selector` does not match template `labels`",
        ));
    }
    if let Some(old_sel) = old.and_then(|o| o.pointer("/spec/selector"))
        && old_sel != sel
    {
        out.push(invalid_raw(
            "spec.selector",
            &go_json_selector(sel),
            "field is immutable",
        ));
    }
    out
}

fn deployment_strategy(spec: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    match s(spec, "/strategy/type") {
        Some("RollingUpdate") | None => {}
        Some("Recreate") => {
            if spec.pointer("/strategy/rollingUpdate").is_some() {
                out.push(forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        Some(other) => {
            // The whole internal strategy struct is printed (Go field names).
            let shown = format!(
                "{{\"Type\":{},\"RollingUpdate\":{}}}",
                quote(other),
                if spec.pointer("/strategy/rollingUpdate").is_some() {
                    "{}"
                } else {
                    "null"
                }
            );
            out.push(cause(
                "FieldValueNotSupported",
                "spec.strategy",
                format!(
                    "Unsupported value: {shown}: supported values: \"Recreate\", \"RollingUpdate\""
                ),
            ));
        }
    }
    out
}

/// `spec.template` of a workload, or `template` of a PodTemplate.
fn template(obj: &Value, path: &str, restart: &[&str]) -> Vec<Cause> {
    let ptr = format!("/{}", path.replace('.', "/"));
    let Some(t) = obj.pointer(&ptr) else {
        return vec![required(path)];
    };
    let mut out = Vec::new();
    if let Some(l) = t.pointer("/metadata/labels").and_then(Value::as_object) {
        out.extend(check_label_map(l, &format!("{path}.metadata.labels")));
    }
    match t.get("spec") {
        Some(spec) => out.extend(pod_spec(spec, &format!("{path}.spec"), restart)),
        None => out.push(required(&format!("{path}.spec.containers"))),
    }
    out
}

fn pod_spec(spec: &Value, path: &str, restart: &[&str]) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    match containers {
        None => out.push(required(&format!("{path}.containers"))),
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                container(c, &format!("{path}.containers[{i}]"), &mut names, &mut out);
            }
        }
    }
    if let Some(cs) = spec.get("initContainers").and_then(Value::as_array) {
        for (i, c) in cs.iter().enumerate() {
            container(
                c,
                &format!("{path}.initContainers[{i}]"),
                &mut names,
                &mut out,
            );
        }
    }
    if let Some(r) = spec.get("restartPolicy").and_then(Value::as_str)
        && !restart.contains(&r)
    {
        out.push(not_supported(&format!("{path}.restartPolicy"), r, restart));
    }
    if let Some(d) = spec.get("dnsPolicy").and_then(Value::as_str)
        && !["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"].contains(&d)
    {
        out.push(not_supported(
            &format!("{path}.dnsPolicy"),
            d,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
    out
}

fn container(c: &Value, path: &str, names: &mut HashSet<String>, out: &mut Vec<Cause>) {
    match c
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        None => out.push(required(&format!("{path}.name"))),
        Some(n) => {
            for m in objectmeta::dns1123_label(n) {
                out.push(invalid(&format!("{path}.name"), n, &m));
            }
            if !names.insert(n.to_string()) {
                out.push(cause(
                    "FieldValueDuplicate",
                    &format!("{path}.name"),
                    format!("Duplicate value: {}", quote(n)),
                ));
            }
        }
    }
    if c.get("image")
        .and_then(Value::as_str)
        .is_none_or(|i| i.trim().is_empty())
    {
        out.push(required(&format!("{path}.image")));
    }
    for (i, p) in c
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.ports[{i}]");
        match p.get("containerPort").and_then(Value::as_i64) {
            None | Some(0) => out.push(required(&format!("{at}.containerPort"))),
            Some(n) if !(1..=65535).contains(&n) => out.push(invalid_raw(
                &format!("{at}.containerPort"),
                &n.to_string(),
                "must be between 1 and 65535, inclusive",
            )),
            _ => {}
        }
        protocol(p, &at, out);
    }
    if let Some(p) = c.get("imagePullPolicy").and_then(Value::as_str)
        && !["Always", "IfNotPresent", "Never"].contains(&p)
    {
        out.push(not_supported(
            &format!("{path}.imagePullPolicy"),
            p,
            &["Always", "IfNotPresent", "Never"],
        ));
    }
}

fn protocol(port: &Value, at: &str, out: &mut Vec<Cause>) {
    if let Some(pr) = port.get("protocol").and_then(Value::as_str)
        && !["SCTP", "TCP", "UDP"].contains(&pr)
    {
        out.push(not_supported(
            &format!("{at}.protocol"),
            pr,
            &["SCTP", "TCP", "UDP"],
        ));
    }
}

fn job_spec(spec: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let Some(spec) = spec else {
        return vec![required(&format!("{path}.template.spec.containers"))];
    };
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        nonnegative(spec, &format!("/{f}"), &format!("{path}.{f}"), &mut out);
    }
    let wrapper = serde_json::json!({"t": spec});
    out.extend(
        template(&wrapper, "t.template", &["Always", "OnFailure", "Never"])
            .into_iter()
            .map(|mut c| {
                c.field = format!("{path}{}", &c.field[1..]);
                c
            }),
    );
    if let Some(r) = s(spec, "/template/spec/restartPolicy")
        && r != "OnFailure"
        && r != "Never"
    {
        out.push(cause(
            "FieldValueRequired",
            &format!("{path}.template.spec.restartPolicy"),
            "Required value: valid values: \"OnFailure\", \"Never\"".into(),
        ));
    }
    out
}

fn cron_job(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    match s(obj, "/spec/schedule") {
        None | Some("") => out.push(required("spec.schedule")),
        Some(sched) => {
            if let Some(msg) = cron_schedule_error(sched) {
                out.push(invalid_raw(
                    "spec.schedule",
                    &objectmeta::quote(sched),
                    &msg,
                ));
            }
        }
    }
    if let Some(p) = s(obj, "/spec/concurrencyPolicy")
        && !["Allow", "Forbid", "Replace"].contains(&p)
    {
        out.push(not_supported(
            "spec.concurrencyPolicy",
            p,
            &["Allow", "Forbid", "Replace"],
        ));
    }
    out.extend(job_spec(
        obj.pointer("/spec/jobTemplate/spec"),
        "spec.jobTemplate.spec",
    ));
    out
}

/// robfig/cron's standard parser as the CronJob validation uses it: a
/// descriptor (`@daily`, `@every 1h`) or exactly five fields, after an
/// optional `TZ=`/`CRON_TZ=` prefix. Only the field count is checked here.
fn cron_schedule_error(sched: &str) -> Option<String> {
    let mut spec = sched.trim();
    if let Some(rest) = spec
        .strip_prefix("TZ=")
        .or_else(|| spec.strip_prefix("CRON_TZ="))
    {
        spec = rest.split_once(' ').map_or("", |(_, r)| r.trim());
    }
    if spec.starts_with('@') {
        return None;
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    (fields.len() != 5).then(|| {
        format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        )
    })
}

/// Roles and ClusterRoles: every rule needs verbs, and a resource rule an
/// API group (`ValidatePolicyRule`); a Role's rules cannot name URLs.
fn policy_rules(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let rules = obj.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let list = |k: &str| rule.get(k).and_then(Value::as_array).map_or(0, Vec::len);
        if list("resources") > 0 && list("apiGroups") == 0 {
            out.push(cause(
                "FieldValueRequired",
                &format!("rules[{i}].apiGroups"),
                "Required value: resource rules must supply at least one api group".into(),
            ));
        }
        if namespaced && list("nonResourceURLs") > 0 {
            out.push(invalid_raw(
                &format!("rules[{i}].nonResourceURLs"),
                &go_json_list(rule.get("nonResourceURLs")),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if list("verbs") == 0 {
            out.push(required(&format!("rules[{i}].verbs")));
        }
    }
    out
}

/// Go's `%v` of a string list: `[a b]`.
fn go_json_list(v: Option<&Value>) -> String {
    let items: Vec<&str> = v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    format!("[{}]", items.join(" "))
}

/// `IsConfigMapKey` (ConfigMap and Secret keys).
fn config_key(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    if key.len() > 253 {
        out.push(objectmeta::max_len_error(253));
    }
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        out.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".into());
    }
    if key == "." {
        out.push("must not be '.'".into());
    } else if key == ".." {
        out.push("must not be '..'".into());
    } else if key.starts_with("..") {
        out.push("must not start with '..'".into());
    }
    out
}

fn keys_and_size(obj: &Value, field: &str, base64: bool, out: &mut Vec<Cause>) -> usize {
    let mut total = 0;
    let Some(map) = obj.get(field).and_then(Value::as_object) else {
        return 0;
    };
    for (k, v) in map {
        for m in config_key(k) {
            out.push(invalid(&format!("{field}[{k}]"), k, &m));
        }
        let text = v.as_str().unwrap_or_default();
        total += if base64 {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_or(text.len(), |b| b.len())
        } else {
            text.len()
        };
    }
    total
}

fn too_long(field: &str) -> Cause {
    cause(
        "FieldValueTooLong",
        field,
        format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
    )
}

fn immutable_data(obj: &Value, old: Option<&Value>, fields: &[&str]) -> Vec<Cause> {
    let mut out = Vec::new();
    let Some(old) = old.filter(|o| o.get("immutable").and_then(Value::as_bool) == Some(true))
    else {
        return out;
    };
    if obj.get("immutable").and_then(Value::as_bool) != Some(true) {
        out.push(forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    for f in fields {
        let empty = |v: Option<&Value>| v.is_none_or(|v| v.as_object().is_some_and(Map::is_empty));
        let (a, b) = (obj.get(*f), old.get(*f));
        if a != b && !(empty(a) && empty(b)) {
            out.push(forbidden(f, "field is immutable when `immutable` is set"));
        }
    }
    out
}

fn config_map(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut total = keys_and_size(obj, "data", false, &mut out);
    total += keys_and_size(obj, "binaryData", true, &mut out);
    if let (Some(d), Some(b)) = (
        obj.get("data").and_then(Value::as_object),
        obj.get("binaryData").and_then(Value::as_object),
    ) {
        for k in d.keys().filter(|k| b.contains_key(*k)) {
            out.push(invalid(
                &format!("data[{k}]"),
                k,
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > MAX_DATA_BYTES {
        // The path "" of the whole object prints as "[]".
        out.push(too_long("[]"));
    }
    out.extend(immutable_data(obj, old, &["data", "binaryData"]));
    out
}

fn secret(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let total = keys_and_size(obj, "data", true, &mut out);
    if total > MAX_DATA_BYTES {
        out.push(too_long("data"));
    }
    let has = |k: &str| obj.pointer("/data").and_then(|d| d.get(k)).is_some();
    let ty = s(obj, "/type").unwrap_or("Opaque");
    match ty {
        "kubernetes.io/service-account-token" => {
            let name = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_empty() {
                out.push(required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => {
            out.push(required("data[.dockercfg]"));
        }
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            out.push(required("data[.dockerconfigjson]"));
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            out.push(required("data[username]"));
            out.push(required("data[password]"));
        }
        "kubernetes.io/ssh-auth" if !has("ssh-privatekey") => {
            out.push(required("data[ssh-privatekey]"));
        }
        "kubernetes.io/tls" => {
            if !has("tls.crt") {
                out.push(required("data[tls.crt]"));
            }
            if !has("tls.key") {
                out.push(required("data[tls.key]"));
            }
        }
        _ => {}
    }
    if let Some(old) = old {
        let old_ty = s(old, "/type").unwrap_or("Opaque");
        if old_ty != ty {
            out.push(invalid("type", ty, "field is immutable"));
        }
    }
    out.extend(immutable_data(obj, old, &["data"]));
    out
}

fn service(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let ty = s(obj, "/spec/type").unwrap_or("ClusterIP");
    let types = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !types.contains(&ty) {
        out.push(not_supported("spec.type", ty, &types));
    }
    let headless = s(obj, "/spec/clusterIP") == Some("None");
    let ports = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ty == "ExternalName" {
        if s(obj, "/spec/externalName").is_none_or(str::is_empty) {
            out.push(required("spec.externalName"));
        }
    } else if ports.is_empty() && !headless {
        out.push(required("spec.ports"));
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        service_port(
            p,
            &format!("spec.ports[{i}]"),
            ty,
            ports.len(),
            &mut names,
            &mut out,
        );
    }
    if let Some(sel) = obj.pointer("/spec/selector").and_then(Value::as_object) {
        out.extend(check_label_map(sel, "spec.selector"));
    }
    if let Some(a) = s(obj, "/spec/sessionAffinity")
        && !["ClientIP", "None"].contains(&a)
    {
        out.push(not_supported(
            "spec.sessionAffinity",
            a,
            &["ClientIP", "None"],
        ));
    }
    out
}

/// One of a Service's `count` ports, `p` at `at`, of a Service of type `ty`;
/// `names` collects the port names seen so far (they must be unique).
fn service_port(
    p: &Value,
    at: &str,
    ty: &str,
    count: usize,
    names: &mut HashSet<String>,
    out: &mut Vec<Cause>,
) {
    match p
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        None if count > 1 => out.push(required(&format!("{at}.name"))),
        None => {}
        Some(n) => {
            for m in objectmeta::dns1123_label(n) {
                out.push(invalid(&format!("{at}.name"), n, &m));
            }
            if !names.insert(n.to_string()) {
                out.push(cause(
                    "FieldValueDuplicate",
                    &format!("{at}.name"),
                    format!("Duplicate value: {}", quote(n)),
                ));
            }
        }
    }
    let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&port) {
        out.push(invalid_raw(
            &format!("{at}.port"),
            &port.to_string(),
            "must be between 1 and 65535, inclusive",
        ));
    }
    protocol(p, at, out);
    if let Some(t) = p.get("targetPort").and_then(Value::as_i64)
        && !(1..=65535).contains(&t)
    {
        out.push(invalid_raw(
            &format!("{at}.targetPort"),
            &t.to_string(),
            "must be between 1 and 65535, inclusive",
        ));
    }
    if ty == "ClusterIP" && p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
        out.push(forbidden(
            &format!("{at}.nodePort"),
            "may not be used when `type` is 'ClusterIP'",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(replicas: i64, image: &str) -> Value {
        json!({"spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}},
                "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": image}]}}}})
    }

    /// As kube-apiserver v1.37.2 answers (tests/fidelity builtins/*).
    #[test]
    fn cron_schedules_and_policy_rules_are_validated() {
        assert_eq!(
            cron_schedule_error("every day").as_deref(),
            Some("expected exactly 5 fields, found 2: [every day]")
        );
        assert_eq!(cron_schedule_error("*/5 * * * *"), None);
        assert_eq!(cron_schedule_error("@daily"), None);
        assert_eq!(cron_schedule_error("CRON_TZ=UTC 0 1 * * *"), None);
        let role = serde_json::json!({"rules": [{"resources": ["pods"]}]});
        let causes = check("rbac.authorization.k8s.io", "Role", &role, None);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["rules[0].apiGroups", "rules[0].verbs"]);
        assert_eq!(
            causes[0].message,
            "Required value: resource rules must supply at least one api group"
        );
    }

    #[test]
    fn deployment_rules() {
        assert!(check("apps", "Deployment", &deploy(1, "nginx"), None).is_empty());
        let c = check("apps", "Deployment", &deploy(-3, ""), None);
        let fields: Vec<_> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["spec.replicas", "spec.template.spec.containers[0].image"]
        );
        let mut moved = deploy(1, "nginx");
        moved["spec"]["selector"]["matchLabels"]["app"] = json!("b");
        moved["spec"]["template"]["metadata"]["labels"]["app"] = json!("b");
        let c = check("apps", "Deployment", &moved, Some(&deploy(1, "nginx")));
        assert_eq!(c.len(), 1);
        assert!(c[0].message.ends_with("field is immutable"));
    }

    #[test]
    fn config_maps_and_secrets() {
        let c = check("", "ConfigMap", &json!({"data": {"bad/key": "x"}}), None);
        assert_eq!(c[0].field, "data[bad/key]");
        let big = json!({"data": {"a": "x".repeat(MAX_DATA_BYTES + 1)}});
        assert_eq!(
            check("", "ConfigMap", &big, None)[0].reason,
            "FieldValueTooLong"
        );
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let new = json!({"immutable": true, "data": {"a": "2"}});
        assert_eq!(check("", "ConfigMap", &new, Some(&old))[0].field, "data");
        let tls = json!({"type": "kubernetes.io/tls", "data": {}});
        let fields: Vec<_> = check("", "Secret", &tls, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, vec!["data[tls.crt]", "data[tls.key]"]);
    }

    #[test]
    fn services_need_ports() {
        let c = check("", "Service", &json!({"spec": {"type": "ClusterIP"}}), None);
        assert_eq!(c[0].field, "spec.ports");
        let c = check(
            "",
            "Service",
            &json!({"spec": {"ports": [{"port": 80}, {"port": 0, "name": "b"}]}}),
            None,
        );
        let fields: Vec<_> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["spec.ports[0].name", "spec.ports[1].port"]);
    }
}
