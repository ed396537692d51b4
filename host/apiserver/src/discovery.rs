//! Discovery documents (`/version`, `/api`, `/apis`, group and
//! group-version resource lists). OpenAPI documents are in [`crate::openapi`].

use std::sync::Arc;

use serde_json::{Value, json};

use crate::resources::{Registry, ResourceDef};
use crate::version::{KUBERNETES_MIN_COMPATIBILITY_MINOR, KUBERNETES_MINOR, KUBERNETES_VERSION};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "emulationMajor": "1",
        "emulationMinor": KUBERNETES_MINOR,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": KUBERNETES_MIN_COMPATIBILITY_MINOR,
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn api_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(json!({})),
    })
}

/// kube-apiserver v1.37's order of the built-in groups in `/apis` (its
/// group priorities); other groups (CRDs) follow in registration order.
const GROUP_ORDER: &[&str] = &[
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "storagemigration.k8s.io",
];

pub fn api_group_list(reg: &Registry) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = reg
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .collect();
    let rank = |g: &str| {
        GROUP_ORDER
            .iter()
            .position(|x| *x == g)
            .unwrap_or(GROUP_ORDER.len())
    };
    // Stable: unlisted groups keep their registration order.
    groups.sort_by_key(|(g, _)| rank(g));
    let groups: Vec<Value> = groups.iter().map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| g == group)?;
    let mut doc = group_doc(&g, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_entries(d: &ResourceDef) -> Vec<Value> {
    // The apiextensions server lists a custom resource's verbs in its own
    // order and with the storage version's hash.
    let verbs: Vec<&str> = if d.custom {
        let order = [
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ];
        order.into_iter().filter(|v| d.verbs.contains(v)).collect()
    } else {
        d.verbs.clone()
    };
    let mut main = json!({
        "name": d.resource,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": verbs,
    });
    if !d.short_names.is_empty() {
        main["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        main["categories"] = json!(d.categories);
    }
    if d.custom
        && let Some(storage) = d.versions.first()
    {
        main["storageVersionHash"] = json!(storage_version_hash(&d.group, storage, &d.kind));
    }
    let mut out = vec![main];
    if d.status_subresource {
        out.push(
            json!({"name": format!("{}/status", d.resource), "singularName": "",
            "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}),
        );
    }
    if d.scale.is_some() {
        out.push(
            json!({"name": format!("{}/scale", d.resource), "singularName": "",
            "namespaced": d.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale",
            "verbs": ["get", "patch", "update"]}),
        );
    }
    for sub in &d.extra_subresources {
        // TokenRequest: created through the ServiceAccount, a kind of its own.
        if d.group.is_empty() && d.resource == "serviceaccounts" && *sub == "token" {
            out.push(json!({"name": "serviceaccounts/token", "singularName": "",
                "namespaced": true, "group": "authentication.k8s.io", "version": "v1",
                "kind": "TokenRequest", "verbs": ["create"]}));
            continue;
        }
        out.push(
            json!({"name": format!("{}/{sub}", d.resource), "singularName": "",
            "namespaced": d.namespaced, "kind": d.kind, "verbs": ["update"]}),
        );
    }
    out
}

/// kube's `StorageVersionHash`: the first 8 bytes of the SHA-256 of
/// `group/version/kind`, base64.
fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let sum = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&sum[..8])
}

/// The resources served at one group version, or None when there are none.
pub(crate) fn served(reg: &Registry, group: &str, version: &str) -> Option<Vec<Arc<ResourceDef>>> {
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| d.group == group && d.serves(version))
        .collect();
    (!defs.is_empty()).then_some(defs)
}

/// `APIResourceList` of one group version, or None when nothing is served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = served(reg, group, version)?;
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources: Vec<Value> = defs.iter().flat_map(|d| resource_entries(d)).collect();
    // kube-apiserver lists built-in resources (and their subresources) by
    // name; the apiextensions server lists a CRD's as main, status, scale.
    if !defs.iter().all(|d| d.custom) {
        resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hash_is_kubes() {
        // kube-apiserver v1.37.2's hash of apps/v1 deployments.
        assert_eq!(
            storage_version_hash("apps", "v1", "Deployment"),
            "8aSe+NMegvE="
        );
    }

    #[test]
    fn apis_lists_groups_in_kube_apiservers_order() {
        let reg = Registry::default();
        crate::auth::endpoints::register(&reg);
        let list = api_group_list(&reg);
        let names: Vec<&str> = list["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["name"].as_str())
            .collect();
        let pos = |n: &str| names.iter().position(|x| *x == n);
        assert!(pos("events.k8s.io") < pos("authentication.k8s.io"));
        assert!(pos("authorization.k8s.io") < pos("autoscaling"));
    }

    #[test]
    fn core_discovery_lists_status_subresources_and_short_names() {
        let reg = Registry::default();
        let v1 = resource_list(&reg, "", "v1").unwrap();
        let names: Vec<&str> = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"configmaps"));
        assert!(names.contains(&"namespaces/status"));
        assert!(resource_list(&reg, "apps", "v2").is_none());
    }
}
