//! The controller a plan is for: its resources resolved through discovery
//! (as the engine resolves them when it starts a controller), its config and
//! its per-call limits.

use kube::api::DynamicObject;
use kube::core::{Selector, SelectorExt};
use serde_json::Value;
use wr_runtime::CallLimits;

use super::PlanError;
use crate::controller::{DEFAULT_CONCURRENCY, StartError};
use crate::crd::{RelatedResource, UpdateMethod, WasmControllerSpec};
use crate::finalize;
use crate::resolve::{Resolved, resolve};
use crate::validate::DeclaredKind;

/// A declared child kind.
pub struct TargetChild {
    /// The resolved resource.
    pub resolved: Resolved,
    /// Its update strategy.
    pub method: UpdateMethod,
}

/// A related rule.
pub struct TargetRelated {
    /// The rule from the spec.
    pub rule: RelatedResource,
    /// Key of its objects in the request (`RelatedResource::key`).
    pub key: String,
    /// Its parsed label selector.
    pub selector: Option<Selector>,
    /// The resolved resource.
    pub resolved: Resolved,
}

/// A controller as the planner needs it: resolved resources, config, limits.
pub struct PlanTarget {
    /// WasmController name.
    pub name: String,
    /// The host's field manager for this controller.
    pub field_manager: String,
    /// The host's finalizer for this controller.
    pub finalizer: String,
    /// `spec.finalize`.
    pub finalize: bool,
    /// Parent resource.
    pub parent: Resolved,
    /// Child kinds, in declared order.
    pub children: Vec<TargetChild>,
    /// Child kinds as [`validate_response`] wants them.
    pub declared: Vec<DeclaredKind>,
    /// Related rules, in declared order.
    pub related: Vec<TargetRelated>,
    /// Plugin config passed in every request.
    pub config: Option<Value>,
    /// Per-call limits.
    pub limits: CallLimits,
    /// How many parents are planned at once (`maxConcurrentReconciles`).
    pub concurrency: usize,
    /// The parent CRD's schema, so a planned status is compared with what
    /// the API server would store of it (`None`: not known, compared as is).
    pub status_schema: Option<crate::status_schema::StatusSchema>,
}

/// The per-call limits a controller runs its plugin with (`spec.limits`, with
/// the engine's defaults: 2 s, 64 MiB, no fuel, 4 MiB response).
pub fn call_limits(spec: &WasmControllerSpec) -> CallLimits {
    let l = spec.limits.as_ref();
    CallLimits {
        timeout: std::time::Duration::from_millis(u64::from(
            l.and_then(|l| l.timeout_millis).unwrap_or(2000),
        )),
        max_memory_bytes: l.and_then(|l| l.memory_mib).unwrap_or(64) as usize * 1024 * 1024,
        fuel: l.and_then(|l| l.fuel),
        max_response_bytes: 4 * 1024 * 1024,
    }
}

/// True when `obj` is selected by a related rule (names win over a selector;
/// neither selects everything in scope) — the rule the engine's related
/// caches apply.
pub fn related_matches(
    rule: &RelatedResource,
    selector: Option<&Selector>,
    obj: &DynamicObject,
) -> bool {
    if let Some(names) = &rule.names {
        return obj
            .metadata
            .name
            .as_ref()
            .is_some_and(|n| names.contains(n));
    }
    match selector {
        Some(sel) => {
            let empty = std::collections::BTreeMap::new();
            sel.matches(obj.metadata.labels.as_ref().unwrap_or(&empty))
        }
        None => true,
    }
}

impl PlanTarget {
    /// Resolves the resources of WasmController `name` through discovery.
    pub async fn resolve(
        client: &kube::Client,
        name: &str,
        spec: &WasmControllerSpec,
    ) -> Result<Self, PlanError> {
        let at = |field: String| move |source| StartError { field, source };
        let parent = resolve(client, &spec.parent_resource)
            .await
            .map_err(at("spec.parentResource".into()))?;
        let mut children = Vec::new();
        let mut declared = Vec::new();
        for (i, c) in spec.child_resources.iter().enumerate() {
            let r = resolve(client, &c.resource_ref())
                .await
                .map_err(at(format!("spec.childResources[{i}]")))?;
            declared.push(DeclaredKind {
                api_version: r.ar.api_version.clone(),
                kind: r.ar.kind.clone(),
                namespaced: r.namespaced,
            });
            children.push(TargetChild {
                resolved: r,
                method: c.method(),
            });
        }
        let mut related = Vec::new();
        for (i, rule) in spec.related.iter().enumerate() {
            let r = resolve(client, &rule.resource_ref())
                .await
                .map_err(at(format!("spec.related[{i}]")))?;
            related.push(TargetRelated {
                key: rule.key(&r.ar.plural),
                rule: rule.clone(),
                selector: rule
                    .selector
                    .clone()
                    .and_then(|s| Selector::try_from(s).ok()),
                resolved: r,
            });
        }
        let status_schema = crate::status_schema::read(client, &parent.ar)
            .await
            .schema()
            .cloned();
        Ok(PlanTarget {
            status_schema,
            name: name.to_string(),
            field_manager: format!("wasm-reconciler/{name}"),
            finalizer: finalize::finalizer_name(name),
            finalize: spec.finalize,
            parent,
            children,
            declared,
            related,
            config: spec.plugin.config.clone(),
            limits: call_limits(spec),
            concurrency: spec
                .max_concurrent_reconciles
                .unwrap_or(DEFAULT_CONCURRENCY)
                .max(1) as usize,
        })
    }
}
