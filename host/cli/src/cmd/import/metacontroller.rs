//! CompositeController (`metacontroller.k8s.io/v1alpha1`) → WasmController,
//! field by field, as a pure function so every rule is unit-tested.
//!
//! What maps: parent and child resources, update methods (Metacontroller's
//! default is `OnDelete`, ours `InPlace`, so the method is always written),
//! `resyncPeriodSeconds`, the finalize hook (`finalize: true`), the sync
//! hook's timeout (`limits.timeoutMillis`) and hook version, and the hook's
//! status replacing the parent's (`statusMode: Replace`). The hook itself
//! becomes a plugin built with the SDKs' Metacontroller wrapper, which reads
//! `spec.plugin.config.metacontroller` (hook version, child types for the
//! request's `children` map, the `controller` object the hook is sent).
//! Everything else is reported as [`Unmappable`] with the reason.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use wr_engine::crd::{
    Adoption, ChildResource, ComponentSource, ConfigMapSource, Limits, PluginSource, ResourceRef,
    StatusChecks, StatusMode, UpdateMethod, UpdateStrategy, WasmController, WasmControllerSpec,
};

use super::go_duration;
use super::kinds::Kinds;

/// API version of Metacontroller's controller kinds.
pub const API_VERSION: &str = "metacontroller.k8s.io/v1alpha1";

/// Largest `limits.timeoutMillis` the WasmController schema accepts.
const MAX_TIMEOUT_MILLIS: u32 = 300_000;

/// Where the converted controller loads its plugin from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginPlacement {
    /// ConfigMap `<controller name>-hook` in this namespace (`publish --apply` writes it).
    ConfigMapIn(String),
    /// A local file (for `wasm-reconciler dev`).
    Path(String),
}

/// A setting of the CompositeController that the WasmController does not reproduce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmappable {
    /// JSON path in the CompositeController, e.g. `spec.hooks.customize`.
    pub field: String,
    /// Why, and what the WasmController does instead.
    pub reason: String,
}

/// One converted controller.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The WasmController.
    pub controller: WasmController,
    /// What did not carry over.
    pub unmappable: Vec<Unmappable>,
}

/// Converts one document. A DecoratorController, or any other kind, is an
/// error naming it.
pub fn convert(
    doc: &Value,
    kinds: &Kinds,
    placement: &PluginPlacement,
) -> anyhow::Result<Imported> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match (api_version, kind) {
        (API_VERSION, "CompositeController") => {}
        (API_VERSION, "DecoratorController") => bail!(
            "DecoratorController {name:?} is not imported: write it by hand as a WasmController \
             with spec.decorate (resource, labelSelector, annotationSelector; \
             docs/migrating-from-metacontroller.md#decoratorcontroller); only \
             CompositeController can be imported"
        ),
        _ => bail!(
            "{kind:?} ({api_version}) {name:?} is not a Metacontroller CompositeController \
             (apiVersion {API_VERSION})"
        ),
    }
    if name.is_empty() {
        bail!("CompositeController: metadata.name is missing");
    }
    Converter::new(name, kinds)
        .run(doc, placement)
        .with_context(|| format!("CompositeController {name:?}"))
}

struct Converter<'a> {
    name: &'a str,
    kinds: &'a Kinds,
    unmappable: Vec<Unmappable>,
}

impl<'a> Converter<'a> {
    fn new(name: &'a str, kinds: &'a Kinds) -> Self {
        Self {
            name,
            kinds,
            unmappable: Vec::new(),
        }
    }

    fn skip(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.unmappable.push(Unmappable {
            field: field.into(),
            reason: reason.into(),
        });
    }

    /// Reports the keys of `rest` (the fields no rule consumed).
    fn leftovers(&mut self, path: &str, rest: Map<String, Value>) {
        for key in rest.keys() {
            self.skip(
                format!("{path}.{key}"),
                "unknown to this importer: not converted",
            );
        }
    }

    fn run(mut self, doc: &Value, placement: &PluginPlacement) -> anyhow::Result<Imported> {
        let mut spec = object(doc.get("spec"), "spec")?;
        let parent = self.parent(take(&mut spec, "parentResource"))?;
        let (children, child_types) = self.children(take(&mut spec, "childResources"))?;
        let resync = self.resync(take(&mut spec, "resyncPeriodSeconds"))?;
        self.generate_selector(take(&mut spec, "generateSelector"));
        let hooks = self.hooks(take(&mut spec, "hooks"))?;
        // Connection settings of webhooks: nothing to connect to any more.
        let _ = take(&mut spec, "endpointConfigs");
        self.leftovers("spec", spec);

        let mut controller_for_hook = doc.clone();
        if let Some(m) = controller_for_hook.as_object_mut() {
            m.remove("status");
            m.insert("metadata".into(), json!({ "name": self.name }));
        }
        let config = json!({
            "metacontroller": {
                "hookVersion": hooks.version,
                "childTypes": child_types,
                "controller": controller_for_hook,
            }
        });
        let plugin = match placement {
            PluginPlacement::ConfigMapIn(namespace) => PluginSource {
                component: ComponentSource {
                    config_map: Some(ConfigMapSource {
                        name: format!("{}-hook", self.name),
                        namespace: namespace.clone(),
                        key: None,
                    }),
                    config: Some(config),
                    ..ComponentSource::default()
                },
                rollback: None,
                signature: None,
                memoize: Default::default(),
                candidate: None,
            },
            PluginPlacement::Path(path) => PluginSource {
                component: ComponentSource {
                    path: Some(path.clone()),
                    config: Some(config),
                    ..ComponentSource::default()
                },
                rollback: None,
                signature: None,
                memoize: Default::default(),
                candidate: None,
            },
        };
        let spec = WasmControllerSpec {
            parent_resource: Some(parent),
            decorate: None,
            child_resources: children,
            plugin,
            finalize: hooks.finalize,
            related: Vec::new(),
            resync_period_seconds: resync,
            max_concurrent_reconciles: None,
            limits: hooks.timeout_millis.map(|ms| Limits {
                timeout_millis: Some(ms),
                memory_mib: None,
                fuel: None,
            }),
            // Metacontroller replaces the parent's status with the hook's.
            status_mode: StatusMode::Replace,
            // Metacontroller adopts orphans that match the parent's selector;
            // adoption also removes its leftovers from the children.
            adoption: Adoption::Orphans,
            rollout: None,
        };
        spec.validate()
            .context("the converted WasmController is invalid")?;
        Ok(Imported {
            controller: WasmController::new(self.name, spec),
            unmappable: self.unmappable,
        })
    }

    fn parent(&mut self, rule: Option<Value>) -> anyhow::Result<ResourceRef> {
        let mut rule = object(rule.as_ref(), "spec.parentResource")?;
        let (api_version, resource) = resource_rule(&mut rule, "spec.parentResource")?;
        if take(&mut rule, "labelSelector").is_some() {
            self.skip(
                "spec.parentResource.labelSelector",
                "the host reconciles every object of the parent resource; narrowing parents by \
                 label is not supported",
            );
        }
        if take(&mut rule, "revisionHistory").is_some() {
            self.skip(
                "spec.parentResource.revisionHistory",
                "rolling updates compare each child with the plugin's desired child, not with \
                 a parent revision: nothing to map",
            );
        }
        if take(&mut rule, "ignoreStatusChanges") == Some(Value::Bool(true)) {
            self.skip(
                "spec.parentResource.ignoreStatusChanges",
                "the host's own status writes never trigger a reconcile, but a status change by \
                 another writer does (the host restores the status it computed)",
            );
        }
        self.leftovers("spec.parentResource", rule);
        Ok(ResourceRef {
            api_version,
            resource: Some(resource),
            kind: None,
        })
    }

    /// The child declarations and the `Kind.apiVersion` keys of the kinds
    /// known offline (the wrapper gives each an entry in `children`, empty or not).
    fn children(
        &mut self,
        rules: Option<Value>,
    ) -> anyhow::Result<(Vec<ChildResource>, Vec<String>)> {
        let rules = match rules {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a,
            Some(_) => bail!("spec.childResources: must be a list"),
        };
        let mut children = Vec::new();
        let mut types = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let path = format!("spec.childResources[{i}]");
            let mut rule = object(Some(rule), &path)?;
            let (api_version, resource) = resource_rule(&mut rule, &path)?;
            let strategy = self.update_strategy(take(&mut rule, "updateStrategy"), &path)?;
            self.leftovers(&path, rule);
            match self.kinds.kind_of(&api_version, &resource) {
                Some(kind) => types.push(format!("{kind}.{api_version}")),
                None => self.skip(
                    format!("{path}.resource"),
                    format!(
                        "the kind of {resource} ({api_version}) is not known offline (pass its \
                         CRD with -f): the hook's `children` has no entry for it until a child \
                         of it exists"
                    ),
                ),
            }
            children.push(ChildResource {
                api_version,
                resource: Some(resource),
                kind: None,
                update_strategy: Some(strategy),
            });
        }
        Ok((children, types))
    }

    fn update_strategy(
        &mut self,
        strategy: Option<Value>,
        path: &str,
    ) -> anyhow::Result<UpdateStrategy> {
        let path = format!("{path}.updateStrategy");
        let mut strategy = match strategy {
            None | Some(Value::Null) => Map::new(),
            Some(v) => object(Some(&v), &path)?,
        };
        let method = match take(&mut strategy, "method") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(_) => bail!("{path}.method: must be a string"),
        };
        let checks = take(&mut strategy, "statusChecks");
        self.leftovers(&path, strategy);
        let method = match method.as_str() {
            // Metacontroller's default: existing children are never updated.
            "" | "OnDelete" => UpdateMethod::OnDelete,
            "Recreate" => UpdateMethod::Recreate,
            "InPlace" => UpdateMethod::InPlace,
            "RollingRecreate" => UpdateMethod::RollingRecreate,
            "RollingInPlace" => UpdateMethod::RollingInPlace,
            other => bail!(
                "{path}.method: unknown method {other:?} (OnDelete, Recreate, InPlace, \
                 RollingRecreate or RollingInPlace)"
            ),
        };
        let status_checks = match checks {
            Some(c) if !is_empty(&c) && method.is_rolling() => {
                // Metacontroller's `statusChecks.conditions` has our shape.
                let checks: StatusChecks =
                    serde_json::from_value(c).with_context(|| format!("{path}.statusChecks"))?;
                Some(checks)
            }
            Some(c) if !is_empty(&c) => {
                self.skip(
                    format!("{path}.statusChecks"),
                    "status checks only gate the rolling methods",
                );
                None
            }
            _ => None,
        };
        Ok(UpdateStrategy {
            method,
            status_checks,
            ..UpdateStrategy::default()
        })
    }

    fn resync(&mut self, value: Option<Value>) -> anyhow::Result<Option<u32>> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64() {
                Some(s) if s >= 1 => Ok(Some(u32::try_from(s).unwrap_or(u32::MAX))),
                Some(_) => {
                    self.skip(
                        "spec.resyncPeriodSeconds",
                        "0 turns Metacontroller's periodic resync off; the host always resyncs \
                         (default every 600 s), which for a pure hook only repeats the same answer",
                    );
                    Ok(None)
                }
                None => bail!("spec.resyncPeriodSeconds: must be an integer, found {v}"),
            },
        }
    }

    fn generate_selector(&mut self, value: Option<Value>) {
        if value != Some(Value::Bool(true)) {
            self.skip(
                "spec.generateSelector",
                "not true: Metacontroller claims every object matching the parent's \
                 spec.selector; the host (adoption: Orphans) adopts an orphan only at a name the \
                 plugin asks for, when its labels match spec.selector, and otherwise tracks \
                 children by controller owner reference",
            );
        }
    }

    fn hooks(&mut self, hooks: Option<Value>) -> anyhow::Result<Hooks> {
        let mut hooks = object(hooks.as_ref(), "spec.hooks")?;
        let Some(sync) = take(&mut hooks, "sync").filter(|v| !v.is_null()) else {
            bail!("spec.hooks.sync: missing (there is no hook to migrate)");
        };
        let (version, timeout) = self.hook(&sync, "spec.hooks.sync")?;
        let mut finalize = false;
        if let Some(fin) = take(&mut hooks, "finalize").filter(|v| !v.is_null()) {
            finalize = true;
            let (fin_version, _) = self.hook(&fin, "spec.hooks.finalize")?;
            if fin_version != version {
                self.skip(
                    "spec.hooks.finalize.version",
                    format!(
                        "{fin_version} differs from the sync hook's {version}: the wrapper keys \
                         children by {version} for both"
                    ),
                );
            }
        }
        if take(&mut hooks, "customize").is_some_and(|v| !v.is_null()) {
            self.skip(
                "spec.hooks.customize",
                "a webhook is not called: declare the related kinds as spec.related rules and \
                 export `customize` from the plugin (contract 0.2.0), which narrows them per \
                 parent by label selector or names",
            );
        }
        for per_child in ["preUpdateChild", "postUpdateChild"] {
            if take(&mut hooks, per_child).is_some_and(|v| !v.is_null()) {
                self.skip(
                    format!("spec.hooks.{per_child}"),
                    "per-child update hooks are not supported: the rolling methods gate each \
                     child on its statusChecks instead",
                );
            }
        }
        self.leftovers("spec.hooks", hooks);
        let timeout_millis = match timeout {
            None => None,
            Some(d) => {
                let ms = u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
                if ms > MAX_TIMEOUT_MILLIS {
                    self.skip(
                        "spec.hooks.sync.webhook.timeout",
                        format!(
                            "{ms} ms is above the largest plugin call budget \
                             ({MAX_TIMEOUT_MILLIS} ms), which is used instead"
                        ),
                    );
                }
                Some(ms.clamp(1, MAX_TIMEOUT_MILLIS))
            }
        };
        Ok(Hooks {
            version,
            finalize,
            timeout_millis,
        })
    }

    /// A hook's version (`v1` by default) and webhook timeout. Connection
    /// settings (url, service, TLS, auth, etag) have nothing left to connect to.
    fn hook(&mut self, hook: &Value, path: &str) -> anyhow::Result<(String, Option<Duration>)> {
        let mut hook = object(Some(hook), path)?;
        let version = match take(&mut hook, "version") {
            None | Some(Value::Null) => "v1".to_string(),
            Some(Value::String(v)) if v == "v1" || v == "v2" => v,
            Some(v) => bail!("{path}.version: must be v1 or v2, found {v}"),
        };
        let timeout = match take(&mut hook, "webhook") {
            None | Some(Value::Null) => None,
            Some(webhook) => match webhook.get("timeout") {
                None | Some(Value::Null) => None,
                Some(Value::String(t)) => Some(go_duration::parse(t).with_context(|| {
                    format!("{path}.webhook.timeout: {t:?} is not a Go duration like 10s")
                })?),
                Some(other) => bail!("{path}.webhook.timeout: must be a string, found {other}"),
            },
        };
        self.leftovers(path, hook);
        Ok((version, timeout))
    }
}

struct Hooks {
    version: String,
    finalize: bool,
    timeout_millis: Option<u32>,
}

fn take(map: &mut Map<String, Value>, key: &str) -> Option<Value> {
    map.remove(key)
}

fn object(value: Option<&Value>, path: &str) -> anyhow::Result<Map<String, Value>> {
    match value {
        Some(Value::Object(m)) => Ok(m.clone()),
        None | Some(Value::Null) => bail!("{path}: missing"),
        Some(other) => bail!("{path}: must be an object, found {other}"),
    }
}

/// `apiVersion` and `resource` of a Metacontroller resource rule.
fn resource_rule(rule: &mut Map<String, Value>, path: &str) -> anyhow::Result<(String, String)> {
    let mut field = |key: &str| match take(rule, key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(other) => bail!("{path}.{key}: must be a non-empty string, found {other}"),
        None => bail!("{path}.{key}: missing"),
    };
    let api_version = field("apiVersion")?;
    let resource = field("resource")?;
    Ok((api_version, resource))
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().all(is_empty),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The YAML printed for one imported controller: the unmappable settings as
/// a comment, then the WasmController.
pub fn render(imported: &Imported) -> anyhow::Result<String> {
    let name = imported.controller.metadata.name.as_deref().unwrap_or("");
    let mut out = format!(
        "# WasmController imported from CompositeController {name:?} by\n\
         # `wasm-reconciler import metacontroller`.\n"
    );
    if imported.unmappable.is_empty() {
        out.push_str("# Every setting was mapped.\n");
    } else {
        out.push_str("# Not mapped (what this WasmController does instead):\n");
        for u in &imported.unmappable {
            out.push_str(&format!("#   {}: {}\n", u.field, u.reason));
        }
    }
    if let Some(cm) = &imported.controller.spec.plugin.config_map {
        out.push_str(&format!(
            "# Next: build the hook with the SDK's Metacontroller wrapper and publish it:\n\
             #   wasm-reconciler publish --plugin HOOK.wasm --name {} --namespace {} --apply\n",
            cm.name, cm.namespace
        ));
    }
    let body = serde_yaml::to_string(&imported.controller).context("rendering YAML")?;
    out.push_str(&body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(spec: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": "CompositeController",
               "metadata": {"name": "demo"}, "spec": spec})
    }

    fn minimal() -> Value {
        json!({
            "parentResource": {"apiVersion": "ex.com/v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "generateSelector": true,
            "hooks": {"sync": {"webhook": {"url": "http://x/sync"}}}
        })
    }

    fn run(spec: Value) -> anyhow::Result<Imported> {
        convert(
            &cc(spec),
            &Kinds::builtins(),
            &PluginPlacement::ConfigMapIn("ops".into()),
        )
    }

    fn fields(i: &Imported) -> Vec<&str> {
        i.unmappable.iter().map(|u| u.field.as_str()).collect()
    }

    #[test]
    fn no_update_strategy_means_on_delete_as_in_metacontroller() {
        let i = run(minimal()).unwrap();
        assert_eq!(
            i.controller.spec.child_resources[0].method(),
            UpdateMethod::OnDelete
        );
        assert!(fields(&i).is_empty(), "{:?}", i.unmappable);
        assert_eq!(i.controller.spec.status_mode, StatusMode::Replace);
        assert_eq!(i.controller.spec.adoption, Adoption::Orphans);
    }

    #[test]
    fn rolling_methods_and_their_status_checks_carry_over() {
        for method in ["RollingInPlace", "RollingRecreate"] {
            let mut spec = minimal();
            spec["childResources"][0]["updateStrategy"] = json!({"method": method,
                "statusChecks": {"conditions": [{"type": "Ready", "status": "True"}]}});
            let i = run(spec).unwrap();
            let s = i.controller.spec.child_resources[0]
                .update_strategy
                .clone()
                .unwrap();
            assert_eq!(serde_json::to_value(s.method).unwrap(), json!(method));
            let checks = s.status_checks.expect("status checks");
            assert_eq!(checks.conditions[0].type_, "Ready");
            assert_eq!(checks.conditions[0].status.as_deref(), Some("True"));
            assert!(fields(&i).is_empty(), "{:?}", i.unmappable);
        }
    }

    #[test]
    fn decorator_is_refused_by_kind() {
        let doc = json!({"apiVersion": API_VERSION, "kind": "DecoratorController",
                         "metadata": {"name": "svc-per-pod"}, "spec": {}});
        let e = convert(&doc, &Kinds::builtins(), &PluginPlacement::Path("p".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("DecoratorController \"svc-per-pod\" is not imported")
                && e.contains("spec.decorate"),
            "{e}"
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut spec = minimal();
        spec["childResources"][0]["updateStrategy"] = json!({"method": "Sideways"});
        let e = format!("{:#}", run(spec).unwrap_err());
        assert!(
            e.contains("spec.childResources[0].updateStrategy.method"),
            "{e}"
        );
        let mut spec = minimal();
        spec["hooks"]["sync"]["webhook"]["timeout"] = json!("ten");
        let e = format!("{:#}", run(spec).unwrap_err());
        assert!(e.contains("spec.hooks.sync.webhook.timeout"), "{e}");
        let mut spec = minimal();
        spec["hooks"] = json!({});
        let e = format!("{:#}", run(spec).unwrap_err());
        assert!(e.contains("spec.hooks.sync: missing"), "{e}");
    }

    #[test]
    fn unknown_fields_are_reported_not_dropped() {
        let mut spec = minimal();
        spec["futureField"] = json!(1);
        let i = run(spec).unwrap();
        assert!(fields(&i).contains(&"spec.futureField"));
    }

    #[test]
    fn long_timeouts_are_capped() {
        let mut spec = minimal();
        spec["hooks"]["sync"]["webhook"]["timeout"] = json!("10m");
        let i = run(spec).unwrap();
        assert_eq!(
            i.controller.spec.limits.unwrap().timeout_millis,
            Some(MAX_TIMEOUT_MILLIS)
        );
    }
}
