//! Judging a plugin's answer offline exactly as the host does.
//!
//! The verdict itself is the engine's: [`wr_engine::validate::validate_response`]
//! with the declared child kinds and the parent's namespace, and the call
//! limits of [`wr_engine::plan::call_limits`]. What the host learns from
//! discovery (a kind's scope, its plural) comes here from the embedded API
//! server's catalog of built-in kinds plus the CRDs the user passes, so that
//! `render` and `test` need no cluster.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;
use wr_engine::WasmControllerSpec;
use wr_engine::crd::ResourceRef;
use wr_engine::validate::DeclaredKind;
use wr_runtime::{CallLimits, ReconcileResponse};

/// A kind as discovery would describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KindInfo {
    group: String,
    versions: Vec<String>,
    kind: String,
    plural: String,
    namespaced: bool,
}

impl KindInfo {
    fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }
}

/// The rules a response is judged by: an optional WasmController and the
/// kinds known offline (built-in ones and the given CRDs).
#[derive(Debug, Clone)]
pub struct Rules {
    controller: Option<WasmControllerSpec>,
    kinds: Vec<KindInfo>,
}

/// Splits `group/version` (or `v1`) into group and version.
fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// The kind a CustomResourceDefinition object defines, if it is one.
fn crd_kind(doc: &Value) -> Option<KindInfo> {
    if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
        return None;
    }
    let spec = doc.get("spec")?;
    let names = spec.get("names")?;
    Some(KindInfo {
        group: spec.get("group")?.as_str()?.to_string(),
        versions: spec
            .get("versions")?
            .as_array()?
            .iter()
            .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
            .collect(),
        kind: names.get("kind")?.as_str()?.to_string(),
        plural: names.get("plural")?.as_str()?.to_string(),
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
    })
}

impl Rules {
    /// Rules from `--controller` (a WasmController, optionally with CRDs in
    /// the same multi-document file) and `--crd` files.
    pub fn load(controller: Option<&Path>, crds: &[impl AsRef<Path>]) -> anyhow::Result<Rules> {
        let mut kinds: Vec<KindInfo> = wr_apiserver::builtin_kinds()
            .into_iter()
            .map(|k| KindInfo {
                group: k.group,
                versions: k.versions,
                kind: k.kind,
                plural: k.resource,
                namespaced: k.namespaced,
            })
            .collect();
        let mut spec = None;
        if let Some(path) = controller {
            for doc in super::input::documents_of(path)? {
                if let Some(k) = crd_kind(&doc) {
                    kinds.push(k);
                } else if doc.get("kind").and_then(Value::as_str) == Some("WasmController") {
                    if spec.is_some() {
                        bail!("{}: more than one WasmController", path.display());
                    }
                    let s = doc.get("spec").cloned().unwrap_or(Value::Null);
                    let parsed: WasmControllerSpec =
                        serde_json::from_value(s).with_context(|| {
                            format!("{}: invalid WasmController spec", path.display())
                        })?;
                    spec = Some(parsed);
                }
            }
            if spec.is_none() {
                bail!("{}: no WasmController found", path.display());
            }
        }
        for path in crds {
            let path = path.as_ref();
            let before = kinds.len();
            kinds.extend(
                super::input::documents_of(path)?
                    .iter()
                    .filter_map(crd_kind),
            );
            if kinds.len() == before {
                bail!("{}: no CustomResourceDefinition found", path.display());
            }
        }
        Ok(Rules {
            controller: spec,
            kinds,
        })
    }

    /// The WasmController's spec, when one was given.
    pub fn controller(&self) -> Option<&WasmControllerSpec> {
        self.controller.as_ref()
    }

    /// The call limits a controller would use: the WasmController's
    /// `spec.limits`, else the engine's defaults.
    pub fn limits(&self) -> CallLimits {
        match &self.controller {
            Some(spec) => wr_engine::target::call_limits(spec),
            None => CallLimits::default(),
        }
    }

    /// The controller's `spec.plugin.config`, which the host hands to the plugin.
    pub fn config(&self) -> Option<Value> {
        self.controller.as_ref()?.plugin.config.clone()
    }

    /// What discovery would answer for `r`.
    fn resolve(&self, r: &ResourceRef) -> Option<&KindInfo> {
        let (group, version) = split_api_version(&r.api_version);
        self.kinds.iter().find(|k| {
            k.group == group
                && k.versions.iter().any(|v| v == version)
                && match (&r.resource, &r.kind) {
                    (Some(p), _) => &k.plural == p,
                    (None, Some(kind)) => &k.kind == kind,
                    (None, None) => false,
                }
        })
    }

    fn unresolved(field: &str, r: &ResourceRef) -> anyhow::Error {
        let name = r.resource.as_deref().or(r.kind.as_deref()).unwrap_or("?");
        anyhow::anyhow!(
            "{field}: {} {name} is not a built-in kind of the embedded API server; pass its CustomResourceDefinition with --crd (or put it in the --controller file)",
            r.api_version
        )
    }

    /// The child kinds the response is judged against: the controller's
    /// `childResources`, or without a controller every kind the response
    /// uses (so only the kind check is skipped), scoped as discovery would
    /// (namespaced when the kind is unknown).
    pub fn declared(&self, response: &ReconcileResponse) -> anyhow::Result<Vec<DeclaredKind>> {
        let mut out: Vec<DeclaredKind> = Vec::new();
        if let Some(spec) = &self.controller {
            for (i, c) in spec.child_resources.iter().enumerate() {
                let r = c.resource_ref();
                let k = self
                    .resolve(&r)
                    .ok_or_else(|| Self::unresolved(&format!("spec.childResources[{i}]"), &r))?;
                let (_, version) = split_api_version(&r.api_version);
                out.push(DeclaredKind {
                    api_version: k.api_version(version),
                    kind: k.kind.clone(),
                    namespaced: k.namespaced,
                });
            }
            return Ok(out);
        }
        for child in &response.children {
            let field = |f: &str| child.get(f).and_then(Value::as_str).map(str::to_string);
            let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
                continue;
            };
            if out
                .iter()
                .any(|d| d.api_version == api_version && d.kind == kind)
            {
                continue;
            }
            let r = ResourceRef {
                api_version: api_version.clone(),
                resource: None,
                kind: Some(kind.clone()),
            };
            let namespaced = self.resolve(&r).is_none_or(|k| k.namespaced);
            out.push(DeclaredKind {
                api_version,
                kind,
                namespaced,
            });
        }
        Ok(out)
    }

    /// The parent's namespace as the engine passes it to validation: `None`
    /// for a cluster-scoped parent kind (from the controller's
    /// `parentResource`, else from whether the parent has a namespace).
    pub fn parent_namespace(&self, parent: &Value) -> anyhow::Result<Option<String>> {
        let ns = parent
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let Some(spec) = &self.controller else {
            return Ok(ns);
        };
        let r = spec.parent_ref();
        let k = self
            .resolve(r)
            .ok_or_else(|| Self::unresolved("spec.parentResource", r))?;
        let (_, version) = split_api_version(&r.api_version);
        let parent_api = parent.get("apiVersion").and_then(Value::as_str);
        let parent_kind = parent.get("kind").and_then(Value::as_str);
        if parent_api != Some(k.api_version(version).as_str()) || parent_kind != Some(&k.kind) {
            bail!(
                "the parent is {} {}, but the controller's spec.parentResource is {} {}",
                parent_api.unwrap_or("?"),
                parent_kind.unwrap_or("?"),
                k.api_version(version),
                k.kind
            );
        }
        Ok(if k.namespaced {
            if ns.is_none() {
                bail!(
                    "the parent has no metadata.namespace, but {} is namespaced",
                    k.kind
                );
            }
            ns
        } else {
            None
        })
    }

    /// The engine's verdict on `response` for `parent`: `Err(message)` is
    /// what the host writes as `Ready=False, reason InvalidPluginOutput`.
    pub fn judge(
        &self,
        parent: &Value,
        response: &ReconcileResponse,
    ) -> anyhow::Result<Result<(), String>> {
        let declared = self.declared(response)?;
        let ns = self.parent_namespace(parent)?;
        Ok(
            wr_engine::validate::validate_response(response, &declared, ns.as_deref())
                .map(|_| ())
                .map_err(|e| e.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn controller(text: &str) -> Rules {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        Rules::load(Some(f.path()), &[] as &[&Path]).unwrap()
    }

    const WC: &str = "apiVersion: wasm-reconciler.dev/v1alpha1\nkind: WasmController\nmetadata: {name: x}\nspec:\n  parentResource: {apiVersion: example.com/v1, kind: Widget}\n  childResources:\n  - {apiVersion: v1, resource: configmaps}\n  - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole}\n  plugin: {path: p.wasm, config: {a: 1}}\n  limits: {timeoutMillis: 300}\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets}\n  versions: [{name: v1, served: true, storage: true}]\n";

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

    #[test]
    fn controller_kinds_resolve_offline_with_their_scope() {
        let rules = controller(WC);
        let declared = rules.declared(&resp(vec![])).unwrap();
        assert_eq!(declared.len(), 2);
        assert_eq!(
            (declared[0].kind.as_str(), declared[0].namespaced),
            ("ConfigMap", true)
        );
        assert_eq!(
            (declared[1].api_version.as_str(), declared[1].namespaced),
            ("rbac.authorization.k8s.io/v1", false)
        );
        assert_eq!(rules.limits().timeout.as_millis(), 300);
        assert_eq!(rules.config(), Some(json!({"a": 1})));
    }

    #[test]
    fn undeclared_kind_is_judged_with_the_engines_message() {
        let rules = controller(WC);
        let parent = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}});
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        let verdict = rules.judge(&parent, &resp(vec![secret])).unwrap();
        assert!(
            verdict
                .unwrap_err()
                .contains("not a declared child resource"),
            "the engine's wording"
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(rules.judge(&parent, &resp(vec![cm])).unwrap(), Ok(()));
    }

    #[test]
    fn without_a_controller_scope_still_counts() {
        let rules = Rules::load(None, &[] as &[&Path]).unwrap();
        let parent = json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "w", "namespace": "ns"}});
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        let verdict = rules.judge(&parent, &resp(vec![role])).unwrap();
        assert!(verdict.unwrap_err().contains("cluster-scoped child"));
    }

    #[test]
    fn unknown_kinds_and_wrong_parents_are_named() {
        let rules = controller(&WC.replace("resource: configmaps", "resource: gadgets"));
        let err = rules.declared(&resp(vec![])).unwrap_err().to_string();
        assert!(
            err.contains("spec.childResources[0]") && err.contains("--crd"),
            "{err}"
        );
        let rules = controller(WC);
        let parent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w", "namespace": "ns"}});
        let err = rules.parent_namespace(&parent).unwrap_err().to_string();
        assert!(err.contains("spec.parentResource"), "{err}");
    }
}
