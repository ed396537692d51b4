//! The least-privilege rules for a set of WasmControllers, as a pure function
//! so it is unit-tested without a cluster.
//!
//! Each verb set below is exactly what the engine's code issues (see the
//! comment on each); change them together with the engine.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{ApiResource, GroupVersionKind};
use wr_engine::crd::{ResourceRef, WasmControllerSpec};

/// WasmControllers: the manager's list + watch (the standby's readiness probe
/// lists too), the cleanup finalizer (JSON patch). No `get`: nothing reads one
/// by name.
const WASMCONTROLLER: &[&str] = &["list", "watch", "patch"];
/// WasmController status: merge patch on `/status`.
const WASMCONTROLLER_STATUS: &[&str] = &["patch"];
/// Parents: watch + cache, finalizer add/remove (JSON patch with a test op),
/// status merge patch when the kind has no status subresource.
const PARENT: &[&str] = &["get", "list", "watch", "patch"];
/// Decorated objects (decorator mode) without `finalize`: watch + cache
/// only; the host never writes them (status only with `writeStatus`, and a
/// kind without a status subresource then needs `patch`, see PARENT).
const DECORATED: &[&str] = &["get", "list", "watch"];
/// Parent status subresource: merge patch.
const PARENT_STATUS: &[&str] = &["patch"];
/// `<parent>/finalizers`: children carry `blockOwnerDeletion: true`, which the
/// OwnerReferencesPermissionEnforcement admission plugin allows only with
/// `update` on the owner's finalizers subresource.
const PARENT_FINALIZERS: &[&str] = &["update"];
/// Children: watch + cache, get (re-read after a refused create), create
/// (a server-side apply that creates an object is authorized as `create` as
/// well as `patch`), server-side apply (patch), delete (undesired children,
/// `Recreate`).
const CHILD: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];
/// Related objects: read only.
const RELATED: &[&str] = &["get", "list", "watch"];
/// Plugin ConfigMaps: the manager watches the named ConfigMap (field
/// selector) and its chunks (label selector, names not known in advance), so
/// list + watch in the plugin's namespace, not limitable by name. No `get`:
/// the manager reads them only through those watches.
const PLUGIN_CONFIGMAP: &[&str] = &["list", "watch"];
/// The parent's CRD, read by name when a controller starts: its status
/// schema tells whether the API server keeps the host's status fields
/// (`wr_engine::status_schema`).
const PARENT_CRD: &[&str] = &["get"];
/// Events on parents and WasmControllers (core/v1): always new objects
/// (duplicates are suppressed in memory, never patched).
const EVENTS: &[&str] = &["create"];

/// `kubectl`'s order, so the output reads naturally.
const VERB_ORDER: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// A `group/version` + plural, resolved from a [`ResourceRef`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

/// Plurals known from CRDs given alongside the WasmControllers: (group, kind) → plural.
pub type KnownPlurals = BTreeMap<(String, String), String>;

/// Resolves a reference offline: `resource` is used as is; a `kind` is looked
/// up in `known` (CRDs in the input files) and otherwise pluralised the way
/// kube does for every built-in kind (lowercase + `s`/`es`/`ies`).
pub fn resolve(r: &ResourceRef, known: &KnownPlurals) -> anyhow::Result<GroupResource> {
    let (group, version) = match r.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), r.api_version.clone()),
    };
    if version.is_empty() || group.contains('/') || version.contains('/') {
        bail!("invalid apiVersion {:?}", r.api_version);
    }
    let resource = match (&r.resource, &r.kind) {
        (Some(p), _) if !p.is_empty() => p.clone(),
        (_, Some(k)) if !k.is_empty() => match known.get(&(group.clone(), k.clone())) {
            Some(p) => p.clone(),
            None => ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, k)).plural,
        },
        _ => bail!(
            "{}: exactly one of resource or kind must be set",
            r.api_version
        ),
    };
    Ok(GroupResource { group, resource })
}

/// (apiGroup, sorted verbs, resourceNames): resources sharing them merge into one rule.
type RuleKey = (String, Vec<&'static str>, Vec<String>);

/// Grants accumulated per (group, resource, resourceNames).
#[derive(Debug, Default)]
struct Grants(BTreeMap<(String, String, Vec<String>), BTreeSet<&'static str>>);

impl Grants {
    fn add(&mut self, group: &str, resource: &str, names: &[String], verbs: &[&'static str]) {
        self.0
            .entry((group.to_string(), resource.to_string(), names.to_vec()))
            .or_default()
            .extend(verbs.iter().copied());
    }

    fn has(&self, group: &str, resource: &str, verbs: &[&str]) -> bool {
        self.0
            .get(&(group.to_string(), resource.to_string(), Vec::new()))
            .is_some_and(|v| verbs.iter().all(|x| v.contains(x)))
    }

    /// Rules, merging resources of one group that share verbs and names.
    fn rules(self) -> Vec<PolicyRule> {
        let mut merged: BTreeMap<RuleKey, Vec<String>> = BTreeMap::new();
        for ((group, resource, names), verbs) in self.0 {
            let mut verbs: Vec<&'static str> = verbs.into_iter().collect();
            verbs.sort_by_key(|v| VERB_ORDER.iter().position(|o| o == v));
            merged
                .entry((group, verbs, names))
                .or_default()
                .push(resource);
        }
        merged
            .into_iter()
            .map(|((group, verbs, names), resources)| PolicyRule {
                api_groups: Some(vec![group]),
                resources: Some(resources),
                resource_names: (!names.is_empty()).then_some(names),
                verbs: verbs.into_iter().map(String::from).collect(),
                ..PolicyRule::default()
            })
            .collect()
    }
}

/// What a set of WasmControllers needs: cluster-wide rules, and the
/// namespaces whose ConfigMaps must be readable for the plugins.
#[derive(Debug, Clone, PartialEq)]
pub struct Needs {
    /// The ClusterRole's rules.
    pub cluster: Vec<PolicyRule>,
    /// Namespaces of plugin ConfigMaps, when ConfigMaps are not readable
    /// cluster-wide anyway (as children or related objects).
    pub plugin_namespaces: BTreeSet<String>,
}

/// The rules for `specs` (always including the host's own needs:
/// WasmControllers and Events).
pub fn needs(
    specs: &[(String, WasmControllerSpec)],
    known: &KnownPlurals,
) -> anyhow::Result<Needs> {
    let mut g = Grants::default();
    g.add(
        wr_engine::crd::GROUP,
        "wasmcontrollers",
        &[],
        WASMCONTROLLER,
    );
    g.add(
        wr_engine::crd::GROUP,
        "wasmcontrollers/status",
        &[],
        WASMCONTROLLER_STATUS,
    );
    g.add("", "events", &[], EVENTS);
    let mut plugin_namespaces: BTreeSet<String> = BTreeSet::new();
    let mut parent_crds: BTreeSet<String> = BTreeSet::new();
    for (name, spec) in specs {
        let ctx = |what: &str| format!("WasmController {name}: {what}");
        let parent = resolve(spec.parent_ref(), known).with_context(|| ctx("parentResource"))?;
        // Built-in groups have no dot; CRD groups must have one.
        if parent.group.contains('.') {
            parent_crds.insert(format!("{}.{}", parent.resource, parent.group));
        }
        match &spec.decorate {
            // Decorated objects: read; patch only for the finalizer (when the
            // plugin finalizes) and the status only with `writeStatus`.
            Some(d) => {
                let verbs: &[&str] = if spec.finalize { PARENT } else { DECORATED };
                g.add(&parent.group, &parent.resource, &[], verbs);
                if d.write_status {
                    g.add(
                        &parent.group,
                        &format!("{}/status", parent.resource),
                        &[],
                        PARENT_STATUS,
                    );
                }
            }
            None => {
                g.add(&parent.group, &parent.resource, &[], PARENT);
                g.add(
                    &parent.group,
                    &format!("{}/status", parent.resource),
                    &[],
                    PARENT_STATUS,
                );
            }
        }
        if spec.finalize || !spec.child_resources.is_empty() {
            g.add(
                &parent.group,
                &format!("{}/finalizers", parent.resource),
                &[],
                PARENT_FINALIZERS,
            );
        }
        for (i, c) in spec.child_resources.iter().enumerate() {
            let child = resolve(&c.resource_ref(), known)
                .with_context(|| ctx(&format!("childResources[{i}]")))?;
            g.add(&child.group, &child.resource, &[], CHILD);
        }
        for (i, r) in spec.related.iter().enumerate() {
            let rel =
                resolve(&r.resource_ref(), known).with_context(|| ctx(&format!("related[{i}]")))?;
            g.add(&rel.group, &rel.resource, &[], RELATED);
        }
        if let Some(cm) = &spec.plugin.config_map {
            plugin_namespaces.insert(cm.namespace.clone());
        }
        // A candidate version (shadow, canary) is read like the active one.
        if let Some(cm) = spec
            .plugin
            .candidate
            .as_ref()
            .and_then(|c| c.config_map.as_ref())
        {
            plugin_namespaces.insert(cm.namespace.clone());
        }
    }
    if !parent_crds.is_empty() {
        let names: Vec<String> = parent_crds.into_iter().collect();
        g.add(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            &names,
            PARENT_CRD,
        );
    }
    // ConfigMaps readable everywhere already (children or related objects).
    if g.has("", "configmaps", PLUGIN_CONFIGMAP) {
        plugin_namespaces.clear();
    }
    Ok(Needs {
        cluster: g.rules(),
        plugin_namespaces,
    })
}

/// The ClusterRole rules for `specs`, with the plugin ConfigMaps readable
/// cluster-wide (for `--cluster-role-only`, whose rules go into one ClusterRole).
pub fn cluster_rules(
    specs: &[(String, WasmControllerSpec)],
    known: &KnownPlurals,
) -> anyhow::Result<Vec<PolicyRule>> {
    let n = needs(specs, known)?;
    let mut rules = n.cluster;
    if !n.plugin_namespaces.is_empty() {
        rules.push(plugin_configmap_rule());
    }
    Ok(rules)
}

/// Reading plugin ConfigMaps (and their chunks) in one namespace.
pub fn plugin_configmap_rule() -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: PLUGIN_CONFIGMAP.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// The namespaced rules for the leader-election Lease: `create` cannot be
/// limited by name (the name is not known to authorization on create), the
/// rest is limited to the one Lease.
pub fn lease_rules(lease_name: &str) -> Vec<PolicyRule> {
    let group = "coordination.k8s.io".to_string();
    vec![
        PolicyRule {
            api_groups: Some(vec![group.clone()]),
            resources: Some(vec!["leases".into()]),
            verbs: vec!["create".into()],
            ..PolicyRule::default()
        },
        PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(vec!["leases".into()]),
            resource_names: Some(vec![lease_name.to_string()]),
            verbs: vec!["get".into(), "update".into()],
            ..PolicyRule::default()
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> WasmControllerSpec {
        serde_json::from_value(v).unwrap()
    }

    /// (group, resources, names, verbs).
    type Flat = (String, Vec<String>, Vec<String>, Vec<String>);

    /// Rules as tuples for compact assertions.
    fn flat(rules: &[PolicyRule]) -> Vec<Flat> {
        rules
            .iter()
            .map(|r| {
                (
                    r.api_groups.clone().unwrap_or_default().join(","),
                    r.resources.clone().unwrap_or_default(),
                    r.resource_names.clone().unwrap_or_default(),
                    r.verbs.clone(),
                )
            })
            .collect()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn kinds_resolve_to_plurals() {
        let k = KnownPlurals::new();
        let r = |api: &str, kind: &str| {
            resolve(
                &ResourceRef {
                    api_version: api.into(),
                    resource: None,
                    kind: Some(kind.into()),
                },
                &k,
            )
            .unwrap()
        };
        assert_eq!(r("v1", "ConfigMap").resource, "configmaps");
        assert_eq!(r("apps/v1", "Deployment").group, "apps");
        assert_eq!(r("networking.k8s.io/v1", "Ingress").resource, "ingresses");
        assert_eq!(r("v1", "Endpoints").resource, "endpoints");
        assert_eq!(r("example.com/v1", "Policy").resource, "policies");
    }

    #[test]
    fn crd_plurals_win_over_the_heuristic() {
        let mut k = KnownPlurals::new();
        k.insert(("example.com".into(), "Octopus".into()), "octopodes".into());
        let r = ResourceRef {
            api_version: "example.com/v1".into(),
            resource: None,
            kind: Some("Octopus".into()),
        };
        assert_eq!(resolve(&r, &k).unwrap().resource, "octopodes");
    }

    #[test]
    fn no_controllers_grants_only_the_host_itself() {
        let rules = cluster_rules(&[], &KnownPlurals::new()).unwrap();
        let mut got = flat(&rules);
        got.sort();
        let mut want = vec![
            (String::new(), s(&["events"]), vec![], s(&["create"])),
            (
                "wasm-reconciler.dev".into(),
                s(&["wasmcontrollers/status"]),
                vec![],
                s(&["patch"]),
            ),
            (
                "wasm-reconciler.dev".into(),
                s(&["wasmcontrollers"]),
                vec![],
                s(&["list", "watch", "patch"]),
            ),
        ];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn static_site_example() {
        let sp = spec(json!({
            "parentResource": {"apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "resource": "staticsites"},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}
            ],
            "plugin": {"configMap": {"name": "static-site-plugin", "namespace": "wasm-reconciler"}}
        }));
        let specs = [("static-site".to_string(), sp)];
        assert!(
            needs(&specs, &KnownPlurals::new())
                .unwrap()
                .plugin_namespaces
                .is_empty()
        );
        let rules = cluster_rules(&specs, &KnownPlurals::new()).unwrap();
        let f = flat(&rules);
        let child = s(&["get", "list", "watch", "create", "patch", "delete"]);
        assert!(
            f.contains(&(
                String::new(),
                s(&["configmaps", "services"]),
                vec![],
                child.clone()
            )),
            "{f:?}"
        );
        assert!(
            f.contains(&("apps".into(), s(&["deployments"]), vec![], child)),
            "{f:?}"
        );
        let g = "examples.wasm-reconciler.dev".to_string();
        assert!(f.contains(&(
            g.clone(),
            s(&["staticsites"]),
            vec![],
            s(&["get", "list", "watch", "patch"])
        )));
        assert!(f.contains(&(
            g.clone(),
            s(&["staticsites/finalizers"]),
            vec![],
            s(&["update"])
        )));
        // The parent's CRD is readable by name (its status schema), nothing else.
        assert!(
            f.contains(&(
                "apiextensions.k8s.io".into(),
                s(&["customresourcedefinitions"]),
                s(&["staticsites.examples.wasm-reconciler.dev"]),
                s(&["get"])
            )),
            "{f:?}"
        );
        // ConfigMaps are children: no separate rule or Role for the plugin.
        assert!(
            f.iter()
                .filter(|r| r.0 != "apiextensions.k8s.io")
                .all(|r| r.2.is_empty()),
            "{f:?}"
        );
        assert!(
            f.iter()
                .filter(|r| r.1.contains(&"configmaps".to_string()))
                .count()
                == 1
        );
        // Nothing is granted on anything not named.
        assert!(
            f.iter()
                .all(|r| !r.3.contains(&"*".to_string()) && !r.1.contains(&"*".to_string()))
        );
        assert!(f.iter().all(|r| !r.1.contains(&"secrets".to_string())));
    }

    #[test]
    fn plugin_configmaps_are_read_in_their_namespace_and_related_is_read_only() {
        let sp = spec(json!({
            "parentResource": {"apiVersion": "example.com/v1", "kind": "Workspace"},
            "childResources": [],
            "related": [{"apiVersion": "v1", "kind": "Secret", "names": ["tls"]}],
            "plugin": {"configMap": {"name": "ws-plugin", "namespace": "ops"},
                       "candidate": {"configMap": {"name": "ws-next", "namespace": "staging"}}},
            "finalize": true
        }));
        let specs = [("ws".to_string(), sp)];
        let n = needs(&specs, &KnownPlurals::new()).unwrap();
        assert_eq!(
            n.plugin_namespaces,
            BTreeSet::from(["ops".to_string(), "staging".to_string()])
        );
        let f = flat(&n.cluster);
        // Not cluster-wide: the namespaced Role covers them.
        assert!(
            f.iter().all(|r| !r.1.contains(&"configmaps".to_string())),
            "{f:?}"
        );
        // Chunks are found by label: list + watch, not limited by name; no get.
        assert_eq!(
            flat(&[plugin_configmap_rule()]),
            vec![(
                String::new(),
                s(&["configmaps"]),
                vec![],
                s(&["list", "watch"])
            )]
        );
        // A single ClusterRole (--cluster-role-only) has to carry them.
        let only = flat(&cluster_rules(&specs, &KnownPlurals::new()).unwrap());
        assert!(
            only.contains(&(
                String::new(),
                s(&["configmaps"]),
                vec![],
                s(&["list", "watch"])
            )),
            "{only:?}"
        );
        assert!(
            f.contains(&(
                String::new(),
                s(&["secrets"]),
                vec![],
                s(&["get", "list", "watch"])
            )),
            "{f:?}"
        );
        assert!(
            f.contains(&(
                "example.com".into(),
                s(&["workspaces/finalizers"]),
                vec![],
                s(&["update"])
            )),
            "{f:?}"
        );
    }

    #[test]
    fn a_decorator_reads_the_decorated_objects_and_writes_them_only_when_told() {
        let decorator = |finalize: bool, write_status: bool| {
            spec(json!({
                "decorate": {"resource": {"apiVersion": "v1", "resource": "namespaces"},
                             "labelSelector": {"matchLabels": {"team": "a"}},
                             "writeStatus": write_status},
                "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "plugin": {"path": "/p.wasm"},
                "finalize": finalize
            }))
        };
        let rules_of = |s| {
            let rules = cluster_rules(&[("d".into(), s)], &KnownPlurals::new()).unwrap();
            flat(&rules)
                .into_iter()
                .filter(|r| r.1.iter().any(|x| x.starts_with("namespaces")))
                .collect::<Vec<_>>()
        };
        let read_only = rules_of(decorator(false, false));
        assert!(
            read_only.contains(&(
                String::new(),
                s(&["namespaces"]),
                vec![],
                s(&["get", "list", "watch"])
            )),
            "{read_only:?}"
        );
        assert!(
            !read_only
                .iter()
                .any(|r| r.1.contains(&"namespaces/status".to_string())),
            "{read_only:?}"
        );
        let writing = rules_of(decorator(true, true));
        assert!(
            writing.contains(&(
                String::new(),
                s(&["namespaces"]),
                vec![],
                s(&["get", "list", "watch", "patch"])
            )),
            "{writing:?}"
        );
        assert!(
            writing
                .iter()
                .any(|r| r.1.contains(&"namespaces/status".to_string())),
            "{writing:?}"
        );
    }

    #[test]
    fn a_resource_used_twice_gets_the_union_of_verbs() {
        let a = spec(json!({
            "parentResource": {"apiVersion": "v1", "resource": "configmaps"},
            "childResources": [{"apiVersion": "v1", "resource": "secrets"}],
            "plugin": {"path": "/p.wasm"}
        }));
        let b = spec(json!({
            "parentResource": {"apiVersion": "v1", "resource": "namespaces"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": "/p.wasm"}
        }));
        let rules =
            cluster_rules(&[("a".into(), a), ("b".into(), b)], &KnownPlurals::new()).unwrap();
        let cm: Vec<_> = flat(&rules)
            .into_iter()
            .filter(|r| r.1.contains(&"configmaps".to_string()))
            .collect();
        assert_eq!(cm.len(), 1, "{cm:?}");
        assert_eq!(
            cm[0].3,
            s(&["get", "list", "watch", "create", "patch", "delete"])
        );
    }

    #[test]
    fn lease_rules_limit_everything_but_create_to_the_name() {
        let f = flat(&lease_rules("wr"));
        assert_eq!(f[0].3, s(&["create"]));
        assert!(f[0].2.is_empty());
        assert_eq!(f[1].2, s(&["wr"]));
        assert_eq!(f[1].3, s(&["get", "update"]));
    }
}
