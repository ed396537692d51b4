//! RBAC evaluation over the stored Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings, with kube-apiserver's semantics
//! (`plugin/pkg/auth/authorizer/rbac`): the rules of every ClusterRoleBinding
//! whose subjects include the user, then of every RoleBinding in the
//! request's namespace; verbs, apiGroups and resources match exactly or by
//! `*`, a subresource as `resource/subresource` or `*/subresource`,
//! resourceNames only a request that names an object, nonResourceURLs
//! exactly, by `*` or by a trailing-`*` prefix. The first allowing rule wins
//! and names its binding in the reason; bindings to missing roles become the
//! `RBAC: ...` evaluation errors of a denial.

use serde_json::Value;

use crate::store::Store;

use super::UserInfo;

pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What is asked: kube's `authorizer.Attributes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub resource_request: bool,
    pub namespace: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The URL path (non-resource requests).
    pub path: String,
}

/// One `PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Rule {
    pub fn from_json(v: &Value) -> Rule {
        Rule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// kube's `RuleAllows`.
    pub fn allows(&self, a: &Attributes) -> bool {
        let has = |list: &[String], x: &str| list.iter().any(|s| s == "*" || s == x);
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| a.path.starts_with(prefix))
            });
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty()
                    && r.strip_prefix("*/") == Some(a.subresource.as_str()))
        });
        let name_ok = self.resource_names.is_empty()
            || (!a.name.is_empty() && self.resource_names.contains(&a.name));
        has(&self.api_groups, &a.api_group) && resource_ok && name_ok
    }
}

/// A rule with the binding it came from (for the allow reason).
#[derive(Debug, Clone)]
pub struct Granted {
    pub rule: Rule,
    pub source: String,
}

/// The rules in effect for `user` in `namespace` ("" = cluster scope only),
/// in kube's visiting order, and the evaluation errors met on the way.
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> (Vec<Granted>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let all = |resource: &str, prefix: &str| -> Vec<std::sync::Arc<Value>> {
        store
            .page(
                &format!("{GROUP}/{resource}"),
                prefix,
                None,
                None,
                0,
                &|_| true,
            )
            .map(|p| p.items)
            .unwrap_or_default()
    };
    let mut visit = |binding: &Value, binding_ns: &str| {
        let Some(subject) = binding
            .get("subjects")
            .and_then(Value::as_array)
            .and_then(|subs| subs.iter().find(|s| applies_to(user, s, binding_ns)))
        else {
            return;
        };
        match bound_rules(store, binding, binding_ns, subject) {
            Ok(granted) => out.extend(granted),
            Err(e) => errors.push(e),
        }
    };
    for b in all("clusterrolebindings", "") {
        visit(&b, "");
    }
    if !namespace.is_empty() {
        for b in all("rolebindings", &format!("{namespace}/")) {
            visit(&b, namespace);
        }
    }
    (out, errors)
}

/// The rules a binding (that applies to `subject`) grants, each named by
/// its source as kube's RBAC authoriser describes it; `Err`: the role it
/// refers to is not there.
fn bound_rules(
    store: &Store,
    binding: &Value,
    binding_ns: &str,
    subject: &Value,
) -> Result<Vec<Granted>, String> {
    let field = |p: &str| binding.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (name, role_kind, role_name) = (
        field("/metadata/name"),
        field("/roleRef/kind"),
        field("/roleRef/name"),
    );
    let source = if binding_ns.is_empty() {
        format!(
            "ClusterRoleBinding {:?} of {role_kind} {role_name:?} to {}",
            name,
            describe_subject(subject, "")
        )
    } else {
        let qualified = format!("{name}/{binding_ns}");
        format!(
            "RoleBinding {qualified:?} of {role_kind} {role_name:?} to {}",
            describe_subject(subject, binding_ns)
        )
    };
    let role = match role_kind {
        "ClusterRole" => store.get(&format!("{GROUP}/clusterroles"), &format!("/{role_name}")),
        "Role" if !binding_ns.is_empty() => store.get(
            &format!("{GROUP}/roles"),
            &format!("{binding_ns}/{role_name}"),
        ),
        _ => None,
    };
    let Some(role) = role else {
        let what = if role_kind == "Role" {
            "role"
        } else {
            "clusterrole"
        };
        return Err(format!("{what}.{GROUP} {role_name:?} not found"));
    };
    Ok(role
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| Granted {
            rule: Rule::from_json(r),
            source: source.clone(),
        })
        .collect())
}

/// kube's `appliesToUser`: a ServiceAccount subject without a namespace
/// means the binding's namespace.
fn applies_to(user: &UserInfo, subject: &Value, binding_ns: &str) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "User" => user.name == field("name"),
        "Group" => user.groups.iter().any(|g| g == field("name")),
        "ServiceAccount" => {
            let ns = match field("namespace") {
                "" => binding_ns,
                n => n,
            };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{}", field("name"))
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "ServiceAccount" => {
            let ns = match field("namespace") {
                "" => binding_ns,
                n => n,
            };
            let qualified = format!("{}/{ns}", field("name"));
            format!("ServiceAccount {qualified:?}")
        }
        k => format!("{k} {:?}", field("name")),
    }
}

/// RBAC's decision: allowed with the binding that allows it, or not with the
/// evaluation errors (kube: `RBAC: [err, ...]`, empty when there were none).
pub fn authorize(store: &Store, user: &UserInfo, a: &Attributes) -> (bool, String) {
    let (rules, errors) = rules_for(store, user, &a.namespace);
    if let Some(g) = rules.iter().find(|g| g.rule.allows(a)) {
        return (true, format!("RBAC: allowed by {}", g.source));
    }
    // Errors come wrapped by the authorizer chain with the authorizer's name
    // (`rbac: RBAC: ...`), as kube-apiserver v1.37.2 answers.
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("rbac: RBAC: {}", errors[0]),
        _ => format!("rbac: RBAC: [{}]", errors.join(", ")),
    };
    (false, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(verb: &str, group: &str, res: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            namespace: ns.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            resource: res.into(),
            subresource: sub.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    fn resources_match_exactly_by_star_or_by_star_slash_subresource() {
        let r =
            rule(json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}));
        assert!(r.allows(&attrs("get", "apps", "deployments", "", "a", "d")));
        assert!(!r.allows(&attrs("get", "apps", "deployments", "status", "a", "d")));
        assert!(!r.allows(&attrs("list", "apps", "deployments", "", "a", "")));
        assert!(!r.allows(&attrs("get", "", "deployments", "", "a", "d")));
        let sub = rule(json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}));
        assert!(sub.allows(&attrs("patch", "x.io", "things", "status", "a", "t")));
        assert!(!sub.allows(&attrs("patch", "x.io", "things", "", "a", "t")));
        // kube does not expand `resource/*`.
        let res_star = rule(json!({"apiGroups": [""], "resources": ["pods/*"], "verbs": ["get"]}));
        assert!(!res_star.allows(&attrs("get", "", "pods", "log", "a", "p")));
        let exact = rule(json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}));
        assert!(exact.allows(&attrs("get", "", "pods", "log", "a", "p")));
    }

    #[test]
    fn resource_names_limit_only_requests_that_name_an_object() {
        let r = rule(
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": ["l"], "verbs": ["get", "list"]}),
        );
        assert!(r.allows(&attrs(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "ns",
            "l"
        )));
        assert!(!r.allows(&attrs(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "ns",
            "m"
        )));
        assert!(!r.allows(&attrs(
            "list",
            "coordination.k8s.io",
            "leases",
            "",
            "ns",
            ""
        )));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix_star() {
        let r = rule(json!({"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]}));
        let p = |path: &str, verb: &str| Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        };
        assert!(r.allows(&p("/apis/apps/v1", "get")));
        assert!(r.allows(&p("/version", "get")));
        assert!(!r.allows(&p("/version/x", "get")));
        assert!(!r.allows(&p("/apis", "get")));
        assert!(!r.allows(&p("/version", "post")));
        // A resource rule never allows a path.
        let res = rule(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}));
        assert!(!res.allows(&p("/version", "get")));
    }

    fn sa(ns: &str, name: &str) -> UserInfo {
        UserInfo::service_account(ns, name, "uid", "")
    }

    fn put(store: &Store, resource: &str, ns: &str, obj: Value) {
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        store
            .commit(
                &format!("{GROUP}/{resource}"),
                &format!("{ns}/{name}"),
                crate::store::Expect::Absent,
                Some(obj),
            )
            .unwrap();
    }

    #[test]
    fn bindings_scope_rules_and_name_their_source() {
        let store = Store::new(100);
        put(
            &store,
            "clusterroles",
            "",
            json!({"metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        );
        put(
            &store,
            "rolebindings",
            "team",
            json!({"metadata": {"name": "rb", "namespace": "team"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}),
        );
        put(
            &store,
            "clusterrolebindings",
            "",
            json!({"metadata": {"name": "all-sas"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "missing"},
                "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team"}]}),
        );
        let bot = sa("team", "bot");
        let (ok, why) = authorize(
            &store,
            &bot,
            &attrs("list", "", "configmaps", "", "team", ""),
        );
        assert!(ok);
        assert_eq!(
            why,
            "RBAC: allowed by RoleBinding \"rb/team\" of ClusterRole \"reader\" to ServiceAccount \"bot/team\""
        );
        // Another namespace, cluster scope: the RoleBinding does not reach.
        let (ok, why) = authorize(
            &store,
            &bot,
            &attrs("list", "", "configmaps", "", "other", ""),
        );
        assert!(!ok);
        assert_eq!(
            why,
            "rbac: RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found"
        );
        assert!(!authorize(&store, &bot, &attrs("list", "", "configmaps", "", "", "")).0);
        // The same SA name in another namespace is another user.
        assert!(
            !authorize(
                &store,
                &sa("other", "bot"),
                &attrs("list", "", "configmaps", "", "team", "")
            )
            .0
        );
    }
}
