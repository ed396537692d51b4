//! Validation of a plugin's response before anything is applied.
//!
//! The whole response is rejected on the first violation (reason
//! `InvalidPluginOutput`): applying half of a response that is known to be wrong
//! would leave the cluster in a state no plugin asked for.

use serde_json::{Map, Value};
use wr_runtime::{Condition, ReconcileResponse};

/// A child kind the controller declares, as the validator needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredKind {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// One validated desired child.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredChild {
    /// Index into the declared kinds.
    pub kind_index: usize,
    /// Namespace the child lives in (filled in from the parent when omitted).
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
    /// The object as the plugin wants it, with `metadata.namespace` filled in.
    pub object: Value,
}

/// Why a response was rejected; the message says which child/field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidOutput(pub String);

/// Metadata fields only the API server or the host may set.
const FORBIDDEN_METADATA: &[&str] = &[
    "ownerReferences",
    "managedFields",
    "resourceVersion",
    "uid",
    "generateName",
    "deletionTimestamp",
    "creationTimestamp",
    "selfLink",
];

/// Validates the children, conditions and status of a response.
///
/// `parent_namespace` is `None` for a cluster-scoped parent.
pub fn validate_response(
    resp: &ReconcileResponse,
    declared: &[DeclaredKind],
    parent_namespace: Option<&str>,
) -> Result<Vec<DesiredChild>, InvalidOutput> {
    let mut out: Vec<DesiredChild> = Vec::with_capacity(resp.children.len());
    for (i, child) in resp.children.iter().enumerate() {
        let c = validate_child(i, child, declared, parent_namespace)?;
        if out
            .iter()
            .any(|o| o.kind_index == c.kind_index && o.namespace == c.namespace && o.name == c.name)
        {
            return Err(InvalidOutput(format!(
                "children[{i}]: duplicate child {}/{} {:?}",
                declared[c.kind_index].kind, c.name, c.namespace
            )));
        }
        out.push(c);
    }
    for (i, c) in resp.conditions.iter().enumerate() {
        validate_condition(i, c)?;
    }
    if let Some(status) = &resp.status
        && !status.is_object()
    {
        return Err(InvalidOutput("status: must be a JSON object".into()));
    }
    Ok(out)
}

fn validate_child(
    i: usize,
    child: &Value,
    declared: &[DeclaredKind],
    parent_ns: Option<&str>,
) -> Result<DesiredChild, InvalidOutput> {
    let bad = |m: String| InvalidOutput(format!("children[{i}]: {m}"));
    let obj = child
        .as_object()
        .ok_or_else(|| bad("must be a JSON object".into()))?;
    let api_version =
        str_field(obj, "apiVersion").ok_or_else(|| bad("apiVersion missing".into()))?;
    let kind = str_field(obj, "kind").ok_or_else(|| bad("kind missing".into()))?;
    let kind_index = declared
        .iter()
        .position(|d| d.api_version == api_version && d.kind == kind)
        .ok_or_else(|| {
            bad(format!(
                "{api_version} {kind} is not a declared child resource"
            ))
        })?;
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("metadata missing".into()))?;
    for f in FORBIDDEN_METADATA {
        if meta.contains_key(*f) {
            return Err(bad(format!("metadata.{f} must not be set by a plugin")));
        }
    }
    let name = str_field(meta, "name").ok_or_else(|| bad("metadata.name missing".into()))?;
    if !is_dns_subdomain(name) {
        return Err(bad(format!(
            "metadata.name {name:?} is not a valid DNS subdomain name"
        )));
    }
    let given_ns = match meta.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(bad("metadata.namespace must be a string".into())),
    };
    let namespace =
        child_namespace(declared[kind_index].namespaced, parent_ns, given_ns).map_err(bad)?;
    let mut object = child.clone();
    if let (Some(ns), Some(m)) = (
        &namespace,
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        m.insert("namespace".into(), Value::String(ns.clone()));
    }
    Ok(DesiredChild {
        kind_index,
        namespace,
        name: name.to_string(),
        object,
    })
}

/// The namespace a child lands in: a namespaced kind's is its parent's (it
/// may repeat it), or, under a cluster-scoped parent, the one it names; a
/// cluster-scoped kind has none and cannot be owned by a namespaced parent.
fn child_namespace(
    namespaced: bool,
    parent_ns: Option<&str>,
    given_ns: Option<&str>,
) -> Result<Option<String>, String> {
    if !namespaced {
        if given_ns.is_some() {
            return Err("metadata.namespace set on a cluster-scoped kind".into());
        }
        if parent_ns.is_some() {
            return Err("a namespaced parent cannot own a cluster-scoped child".into());
        }
        return Ok(None);
    }
    match (parent_ns, given_ns) {
        (Some(p), None) => Ok(Some(p.to_string())),
        (Some(p), Some(g)) if p == g => Ok(Some(p.to_string())),
        (Some(p), Some(g)) => Err(format!(
            "metadata.namespace {g:?} differs from the parent's namespace {p:?}"
        )),
        (None, Some(g)) if is_dns_label(g) => Ok(Some(g.to_string())),
        (None, _) => {
            Err("metadata.namespace must name a valid namespace for a cluster-scoped parent".into())
        }
    }
}

fn validate_condition(i: usize, c: &Condition) -> Result<(), InvalidOutput> {
    let bad = |m: String| InvalidOutput(format!("conditions[{i}]: {m}"));
    if c.type_ == "Ready" {
        return Err(bad("type Ready is owned by the host".into()));
    }
    if !is_camel_word(&c.type_) {
        return Err(bad(format!("type {:?} must be CamelCase", c.type_)));
    }
    if !is_camel_word(&c.reason) {
        return Err(bad(format!("reason {:?} must be CamelCase", c.reason)));
    }
    Ok(())
}

fn str_field<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// RFC 1123 subdomain: what Kubernetes requires of most object names.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label_part)
}

/// RFC 1123 label (namespaces, Services).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_label_part(s)
}

fn is_dns_label_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The pattern Kubernetes enforces on condition types/reasons (without a prefix).
fn is_camel_word(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 316
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':' | b'.' | b'/' | b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared() -> Vec<DeclaredKind> {
        vec![
            DeclaredKind {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespaced: true,
            },
            DeclaredKind {
                api_version: "rbac.authorization.k8s.io/v1".into(),
                kind: "ClusterRole".into(),
                namespaced: false,
            },
        ]
    }

    fn resp(children: Vec<Value>) -> ReconcileResponse {
        ReconcileResponse {
            children,
            conditions: vec![],
            status: None,
            requeue_after_seconds: None,
            events: vec![],
            finalized: false,
        }
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})
    }

    fn reject(children: Vec<Value>) -> String {
        validate_response(&resp(children), &declared(), Some("ns1"))
            .unwrap_err()
            .0
    }

    #[test]
    fn valid_child_gets_parent_namespace() {
        let out = validate_response(&resp(vec![cm("web")]), &declared(), Some("ns1")).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].namespace.as_deref(), Some("ns1"));
        assert_eq!(out[0].object["metadata"]["namespace"], "ns1");
        assert_eq!(out[0].object["data"]["a"], "b");
    }

    #[test]
    fn undeclared_kind_is_rejected() {
        let m = reject(vec![
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
        ]);
        assert!(m.contains("not a declared child"), "{m}");
    }

    #[test]
    fn other_namespace_is_rejected() {
        let mut c = cm("web");
        c["metadata"]["namespace"] = json!("kube-system");
        assert!(reject(vec![c]).contains("differs from the parent"));
    }

    #[test]
    fn bad_names_are_rejected() {
        for name in ["Web", "web_1", "-web", "", "a..b"] {
            let m = reject(vec![cm(name)]);
            assert!(m.contains("metadata.name"), "{name}: {m}");
        }
        let long = "a".repeat(254);
        assert!(reject(vec![cm(&long)]).contains("metadata.name"));
    }

    #[test]
    fn generate_name_is_rejected() {
        let c =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "web-"}});
        assert!(reject(vec![c]).contains("generateName"));
    }

    #[test]
    fn host_owned_metadata_is_rejected() {
        for f in ["ownerReferences", "managedFields", "resourceVersion", "uid"] {
            let mut c = cm("web");
            c["metadata"][f] = json!("x");
            assert!(reject(vec![c]).contains(f), "{f}");
        }
    }

    #[test]
    fn duplicates_are_rejected() {
        assert!(reject(vec![cm("web"), cm("other"), cm("web")]).contains("duplicate"));
    }

    #[test]
    fn cluster_scoped_child_of_namespaced_parent_is_rejected() {
        let c = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        assert!(reject(vec![c.clone()]).contains("cluster-scoped child"));
        assert!(validate_response(&resp(vec![c]), &declared(), None).is_ok());
    }

    #[test]
    fn ready_condition_and_non_object_status_are_rejected() {
        let mut r = resp(vec![]);
        r.conditions.push(Condition {
            type_: "Ready".into(),
            status: wr_runtime::ConditionStatus::True,
            reason: "Fine".into(),
            message: String::new(),
        });
        assert!(validate_response(&r, &declared(), Some("ns1")).is_err());
        let mut r = resp(vec![]);
        r.status = Some(json!([1]));
        assert!(validate_response(&r, &declared(), Some("ns1")).is_err());
    }
}
