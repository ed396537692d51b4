//! The resource registry: built-in kinds and the resources that
//! CustomResourceDefinitions register at run time. Everything that needs to
//! know "what is `widgets` in `example.com/v1`" (routing, discovery, storage
//! keys, validation) asks this registry.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

/// Registers the schema of a k8s-openapi type in a generator and returns
/// its `$ref` (the definition name is the type's OpenAPI name).
pub type SchemaFn = fn(&mut schemars::SchemaGenerator) -> schemars::Schema;

/// Every verb of a stored resource, in discovery order.
pub const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Verbs of computed, read-only resources.
pub const READ_ONLY_VERBS: [&str; 2] = ["get", "list"];

/// Where a `/scale` subresource reads and writes (JSON paths as in a CRD's
/// `subresources.scale`: `.spec.replicas`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleDef {
    pub spec_replicas: String,
    pub status_replicas: String,
    /// Path of the selector; built-ins point at their `spec.selector`
    /// (a LabelSelector or a map), CRDs at a string field.
    pub label_selector: Option<String>,
}

impl ScaleDef {
    /// Deployments, ReplicaSets, StatefulSets, ReplicationControllers.
    pub fn builtin() -> ScaleDef {
        ScaleDef {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".spec.selector".into()),
        }
    }
}

/// One resource type (a group + plural), served in one or more versions.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: String,
    /// Served versions, preferred (storage) version first.
    pub versions: Vec<String>,
    pub resource: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// A `/scale` subresource, and where its numbers live.
    pub scale: Option<ScaleDef>,
    /// `metadata.generation` is maintained (bumped on spec changes).
    pub has_generation: bool,
    /// Registered by a CRD (affects delete responses, schema handling, tables).
    pub custom: bool,
    /// Verbs served (discovery lists them; others get 405).
    pub verbs: Vec<&'static str>,
    /// `openAPIV3Schema` per version (CRDs only).
    pub schemas: BTreeMap<String, Value>,
    /// The k8s-openapi type of each version (built-ins only), for OpenAPI.
    pub type_schemas: BTreeMap<String, SchemaFn>,
    /// `additionalPrinterColumns` per version (CRDs only).
    pub printer_columns: BTreeMap<String, Vec<Value>>,
    /// Extra subresources listed in discovery (`namespaces/finalize`).
    pub extra_subresources: Vec<&'static str>,
}

impl ResourceDef {
    /// Storage key of this resource: `"{group}/{resource}"`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.resource)
    }

    pub fn group_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    pub fn qualified(&self) -> crate::errors::Qualified<'_> {
        crate::errors::Qualified {
            group: &self.group,
            resource: &self.resource,
        }
    }

    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }
}

/// The built-in kinds this server stores (no controllers run for them):
/// see [`crate::catalog`].
pub fn builtins() -> Vec<ResourceDef> {
    crate::catalog::builtins()
}

/// Thread-safe registry; CRD writes mutate it, requests read it.
#[derive(Debug)]
pub struct Registry {
    inner: RwLock<Vec<Arc<ResourceDef>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            inner: RwLock::new(builtins().into_iter().map(Arc::new).collect()),
        }
    }
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceDef>>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<ResourceDef>>> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolve `group/version/resource` (a served version only).
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .iter()
            .find(|d| d.group == group && d.resource == resource && d.serves(version))
            .cloned()
    }

    /// Resolve a storage key (`group/resource`), any version.
    pub fn by_key(&self, key: &str) -> Option<Arc<ResourceDef>> {
        self.read().iter().find(|d| d.key() == key).cloned()
    }

    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.read().clone()
    }

    /// Add or replace the resource a CRD defines.
    pub fn upsert(&self, def: ResourceDef) {
        let mut all = self.write();
        let key = def.key();
        all.retain(|d| d.key() != key);
        all.push(Arc::new(def));
    }

    pub fn remove(&self, key: &str) {
        self.write().retain(|d| d.key() != key || !d.custom);
    }

    /// Groups in discovery order (core first, then by first registration).
    /// Each with its versions, preferred first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.read().iter() {
            let entry = match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some(e) => e,
                None => {
                    out.push((d.group.clone(), Vec::new()));
                    let last = out.len() - 1;
                    &mut out[last]
                }
            };
            for v in &d.versions {
                if !entry.1.contains(v) {
                    entry.1.push(v.clone());
                }
            }
        }
        for (_, versions) in out.iter_mut() {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse::<u32>().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, major, minor)
}

/// What a CRD's `spec.versions` define for the resource.
struct CrdVersions {
    /// Served version names, in the CRD's order.
    served: Vec<String>,
    schemas: BTreeMap<String, Value>,
    printer_columns: BTreeMap<String, Vec<Value>>,
    /// Some version has a status subresource.
    status: bool,
    scale: Option<ScaleDef>,
}

/// Reads a CRD's `spec.versions`: served versions, schemas, printer columns
/// and subresources; exactly one must be the storage version.
fn crd_versions(versions: &[Value]) -> Result<CrdVersions, String> {
    let mut out = CrdVersions {
        served: Vec::new(),
        schemas: BTreeMap::new(),
        printer_columns: BTreeMap::new(),
        status: false,
        scale: None,
    };
    let mut storage = None;
    for (i, v) in versions.iter().enumerate() {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("spec.versions[{i}].name: Required value"))?;
        if v.get("served").and_then(Value::as_bool).unwrap_or(false) {
            out.served.push(name.to_string());
        }
        if v.get("storage").and_then(Value::as_bool).unwrap_or(false) {
            if storage.is_some() {
                return Err("spec.versions: Invalid value: must have exactly one version marked as storage version".into());
            }
            storage = Some(name.to_string());
        }
        if let Some(s) = v.pointer("/schema/openAPIV3Schema") {
            out.schemas.insert(name.to_string(), s.clone());
        }
        if let Some(c) = v.get("additionalPrinterColumns").and_then(Value::as_array) {
            out.printer_columns.insert(name.to_string(), c.clone());
        }
        if v.pointer("/subresources/status").is_some() {
            out.status = true;
        }
        if let Some(sc) = v.pointer("/subresources/scale") {
            let path = |k: &str| sc.get(k).and_then(Value::as_str).map(str::to_string);
            let required = |k: &str| {
                path(k).ok_or_else(|| {
                    format!("spec.versions[{i}].subresources.scale.{k}: Required value")
                })
            };
            out.scale = Some(ScaleDef {
                spec_replicas: required("specReplicasPath")?,
                status_replicas: required("statusReplicasPath")?,
                label_selector: path("labelSelectorPath"),
            });
        }
    }
    if storage.is_none() {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    Ok(out)
}

/// `spec.names` of a CRD, with kube-apiserver's defaults filled in.
struct CrdNames {
    plural: String,
    kind: String,
    singular: String,
    list_kind: String,
    short_names: Vec<String>,
    categories: Vec<String>,
}

fn crd_names(spec: &Value) -> Result<CrdNames, String> {
    let names = spec.get("names").ok_or("spec.names: Required value")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural: Required value")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind: Required value")?;
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names
        .get("listKind")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{kind}List"));
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(CrdNames {
        plural: plural.to_string(),
        kind: kind.to_string(),
        singular,
        list_kind,
        short_names: strs(names.get("shortNames")),
        categories: strs(names.get("categories")),
    })
}

/// `spec.scope`: whether the CRD's objects are namespaced.
fn crd_namespaced(spec: &Value) -> Result<bool, String> {
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .ok_or("spec.scope: Required value")?;
    match scope {
        "Namespaced" => Ok(true),
        "Cluster" => Ok(false),
        other => Err(format!(
            "spec.scope: Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""
        )),
    }
}

/// Build the resource a CRD object defines. Errors name the offending field.
pub fn def_from_crd(crd: &Value) -> Result<ResourceDef, String> {
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group: Required value")?;
    let names = crd_names(spec)?;
    let namespaced = crd_namespaced(spec)?;
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or("spec.versions: Invalid value: null: must have exactly one version marked as storage version")?;
    let CrdVersions {
        mut served,
        schemas,
        printer_columns,
        status,
        scale,
    } = crd_versions(versions)?;
    // Preferred first: sort served versions by Kubernetes version priority.
    served.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    Ok(ResourceDef {
        group: group.to_string(),
        versions: served,
        resource: names.plural,
        singular: names.singular,
        kind: names.kind,
        list_kind: names.list_kind,
        namespaced,
        short_names: names.short_names,
        categories: names.categories,
        status_subresource: status,
        scale,
        has_generation: true,
        custom: true,
        verbs: ALL_VERBS.to_vec(),
        schemas,
        type_schemas: BTreeMap::new(),
        printer_columns,
        extra_subresources: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_defines_resource_with_preferred_version_first() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                {"name": "v1alpha1", "served": false, "storage": false}]}});
        let d = def_from_crd(&crd).unwrap();
        assert_eq!(d.versions, vec!["v1", "v1beta1"]);
        assert!(d.status_subresource);
        assert_eq!(d.short_names, vec!["wd"]);
        assert_eq!(d.singular, "widget");
        assert_eq!(d.key(), "example.com/widgets");
    }

    #[test]
    fn crd_without_storage_version_is_rejected() {
        let crd = json!({"spec": {"group": "g", "scope": "Cluster",
            "names": {"plural": "xs", "kind": "X"},
            "versions": [{"name": "v1", "served": true, "storage": false}]}});
        assert!(def_from_crd(&crd).unwrap_err().contains("storage version"));
    }

    #[test]
    fn registry_resolves_by_kind_and_version() {
        let r = Registry::default();
        assert_eq!(r.by_key("apps/deployments").unwrap().kind, "Deployment");
        assert!(r.lookup("apps", "v1beta1", "deployments").is_none());
        assert!(r.lookup("", "v1", "configmaps").is_some());
    }
}
