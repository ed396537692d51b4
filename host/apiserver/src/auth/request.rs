//! kube-apiserver's `RequestInfoFactory`: the authorisation attributes of a
//! request from its method, path and query alone (before routing, so an
//! unknown resource is authorised like a known one). `/api/v1/...` and
//! `/apis/GROUP/VERSION/...` with a resource are resource requests; every
//! other path (discovery, `/version`, `/openapi/...`) is a non-resource one
//! whose verb is the lower-cased method.

use std::collections::HashMap;

use super::Attributes;

/// The attributes of one request.
pub fn attributes(method: &str, path: &str, query: &HashMap<String, String>) -> Attributes {
    let non_resource = || Attributes {
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    if parts.len() < 3 {
        return non_resource();
    }
    let (group, mut rest) = match parts[0] {
        "api" => ("", &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
        _ => return non_resource(),
    };
    let version = rest[0];
    rest = &rest[1..];
    let mut verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    // Deprecated `/watch/` paths.
    if rest.first() == Some(&"watch") {
        verb = "watch".into();
        rest = &rest[1..];
    }
    let mut namespace = "";
    if rest.first() == Some(&"namespaces")
        && let Some(ns) = rest.get(1)
    {
        namespace = ns;
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    let resource = rest.first().copied().unwrap_or("").to_string();
    let mut name = rest.get(1).copied().unwrap_or("").to_string();
    let subresource = rest.get(2).copied().unwrap_or("").to_string();
    let watch_param = matches!(
        query.get("watch").map(String::as_str),
        Some("true" | "1" | "True" | "TRUE" | "t" | "T")
    );
    if name.is_empty() && verb == "get" {
        verb = if watch_param { "watch" } else { "list" }.into();
    }
    if name.is_empty() && verb == "delete" {
        verb = "deletecollection".into();
    }
    // A list or watch of one object by field selector is about that name.
    if (verb == "list" || verb == "watch")
        && let Some(sel) = query.get("fieldSelector")
    {
        let reqs: Vec<&str> = sel.split(',').filter(|s| !s.is_empty()).collect();
        for r in &reqs {
            let exact = r
                .strip_prefix("metadata.name==")
                .or_else(|| r.strip_prefix("metadata.name="));
            if let Some(n) = exact {
                name = n.to_string();
            }
        }
    }
    Attributes {
        verb,
        resource_request: true,
        namespace: namespace.to_string(),
        api_group: group.to_string(),
        api_version: version.to_string(),
        resource,
        subresource,
        name,
        path: path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn short(a: &Attributes) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}",
            a.verb, a.resource_request, a.namespace, a.api_group, a.resource, a.subresource, a.name
        )
    }

    #[test]
    fn requests_map_to_kubes_attributes() {
        let none = q(&[]);
        let cases = [
            ("GET", "/api", &none, "get|false|||||"),
            ("GET", "/apis/apps/v1", &none, "get|false|||||"),
            (
                "GET",
                "/api/v1/namespaces/x/pods",
                &none,
                "list|true|x||pods||",
            ),
            (
                "GET",
                "/api/v1/pods",
                &q(&[("watch", "true")]),
                "watch|true|||pods||",
            ),
            (
                "GET",
                "/apis/apps/v1/namespaces/x/deployments/web",
                &none,
                "get|true|x|apps|deployments||web",
            ),
            (
                "PATCH",
                "/apis/x.io/v1/namespaces/x/things/t/status",
                &none,
                "patch|true|x|x.io|things|status|t",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/x/configmaps",
                &none,
                "deletecollection|true|x||configmaps||",
            ),
            (
                "POST",
                "/api/v1/namespaces/x/serviceaccounts/sa/token",
                &none,
                "create|true|x||serviceaccounts|token|sa",
            ),
            // A namespace is its own namespace, also for its subresources.
            (
                "GET",
                "/api/v1/namespaces/x",
                &none,
                "get|true|x||namespaces||x",
            ),
            (
                "PUT",
                "/api/v1/namespaces/x/finalize",
                &none,
                "update|true|x||namespaces|finalize|x",
            ),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                &none,
                "create|true||authorization.k8s.io|selfsubjectaccessreviews||",
            ),
            (
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/d/leases",
                &q(&[("fieldSelector", "metadata.name=l"), ("watch", "1")]),
                "watch|true|d|coordination.k8s.io|leases||l",
            ),
        ];
        for (m, p, query, want) in cases {
            assert_eq!(short(&attributes(m, p, query)), want, "{m} {p}");
        }
    }
}
