//! A WasmController resolved for reconciling: its parent, child and related
//! resources resolved through discovery, its update strategies, config, call
//! limits and the parent's status schema. One [`Target`] serves the running
//! controller ([`crate::controller`]) and the preview ([`crate::plan`]), so
//! both decide with the same settings ([`crate::decide`]).

use std::time::Duration;

use kube::api::DynamicObject;
use kube::core::{Selector, SelectorExt};
use serde_json::Value;
use wr_runtime::CallLimits;

use crate::crd::{RelatedResource, UpdateMethod, WasmControllerSpec};
use crate::finalize;
use crate::resolve::{ResolveError, Resolved, resolve};
use crate::status_schema::{SchemaCheck, StatusSchema};
use crate::validate::DeclaredKind;

/// Default concurrency per controller (`maxConcurrentReconciles`).
pub const DEFAULT_CONCURRENCY: u32 = 4;

/// Which field of the spec a resolve failure is about.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {source}")]
pub struct StartError {
    /// e.g. `spec.childResources[0]`.
    pub field: String,
    /// What went wrong.
    #[source]
    pub source: ResolveError,
}

/// A declared child kind.
pub struct TargetChild {
    /// The resolved resource.
    pub resolved: Resolved,
    /// Its update strategy.
    pub method: UpdateMethod,
    /// The rolling settings (used by the rolling methods only).
    pub rolling: crate::decide::rolling::Rolling,
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

impl TargetRelated {
    /// True when `obj` is selected by this rule ([`related_matches`]).
    pub fn matches(&self, obj: &DynamicObject) -> bool {
        related_matches(&self.rule, self.selector.as_ref(), obj)
    }
}

/// A controller as the decision core needs it: resolved resources, config, limits.
pub struct Target {
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
    /// Child kinds as [`crate::validate::validate_response`] wants them.
    pub declared: Vec<DeclaredKind>,
    /// Related rules, in declared order.
    pub related: Vec<TargetRelated>,
    /// Plugin config passed in every request.
    pub config: Option<Value>,
    /// Per-call limits.
    pub limits: CallLimits,
    /// How many parents are reconciled (or planned) at once (`maxConcurrentReconciles`).
    pub concurrency: usize,
    /// `spec.resyncPeriodSeconds` (`None`: the host's default).
    pub resync: Option<Duration>,
    /// The parent CRD's status schema, so a status is compared with what the
    /// API server would store of it.
    pub status_schema: SchemaCheck,
    /// `spec.statusMode`: merge the plugin's status into the stored one, or
    /// replace it (the host's conditions and observedGeneration kept).
    pub status_mode: crate::status::StatusMode,
    /// `spec.adoption`: whether orphans at a desired child's name are adopted.
    pub adoption: crate::crd::Adoption,
    /// `spec.decorate`: the parents are existing objects selected by label
    /// and annotation (decorator mode); `None` for an owned parent kind.
    pub decorate: Option<Decoration>,
    /// Children get their parent's shard bucket label
    /// ([`crate::shard_bucket`]): a sharded `run` whose caches watch only
    /// their buckets. Set by the controller after [`Target::resolve`].
    pub shard_labels: bool,
}

/// Decorator mode as the decision core needs it.
pub struct Decoration {
    /// Parsed `labelSelector`.
    pub labels: Option<Selector>,
    /// Parsed `annotationSelector` (matched against annotations).
    pub annotations: Option<Selector>,
    /// `writeStatus`.
    pub write_status: bool,
}

impl Decoration {
    /// From the spec (selectors are checked by `WasmControllerSpec::validate`).
    pub fn from_spec(d: &crate::crd::Decorate) -> Self {
        Self {
            labels: d
                .label_selector
                .clone()
                .and_then(|s| Selector::try_from(s).ok()),
            annotations: d
                .annotation_selector
                .as_ref()
                .and_then(|s| Selector::try_from(s.as_label_selector()).ok()),
            write_status: d.write_status,
        }
    }
}

impl Target {
    /// True when `obj` is one of this controller's parents: always for an
    /// owned parent kind; in decorator mode, when the selectors match.
    pub fn selects(&self, obj: &DynamicObject) -> bool {
        let Some(d) = &self.decorate else {
            return true;
        };
        let empty = std::collections::BTreeMap::new();
        let labels = obj.metadata.labels.as_ref().unwrap_or(&empty);
        let annotations = obj.metadata.annotations.as_ref().unwrap_or(&empty);
        d.labels.as_ref().is_none_or(|s| s.matches(labels))
            && d.annotations
                .as_ref()
                .is_none_or(|s| s.matches(annotations))
    }

    /// True when the host may write `obj`'s status: always for an owned
    /// parent kind; in decorator mode only with `writeStatus` and while it
    /// is selected.
    pub fn writes_status(&self, obj: &DynamicObject) -> bool {
        match &self.decorate {
            None => true,
            Some(d) => d.write_status && self.selects(obj),
        }
    }

    /// The parent CRD's status schema when it was read.
    pub fn schema(&self) -> Option<&StatusSchema> {
        self.status_schema.schema()
    }

    /// The namespace children of `parent` must live in (`None`: any, for a
    /// cluster-scoped parent).
    pub fn child_namespace<'a>(&self, parent: &'a DynamicObject) -> Option<&'a str> {
        parent
            .metadata
            .namespace
            .as_deref()
            .filter(|_| self.parent.namespaced)
    }
}

/// The per-call limits a controller runs its plugin with: `spec.limits` over
/// [`CallLimits::default`] (the one default shared by controllers, `plan` and
/// `render`).
pub fn call_limits(spec: &WasmControllerSpec) -> CallLimits {
    let d = CallLimits::default();
    let l = spec.limits.as_ref();
    CallLimits {
        timeout: l
            .and_then(|l| l.timeout_millis)
            .map_or(d.timeout, |ms| Duration::from_millis(u64::from(ms))),
        max_memory_bytes: l
            .and_then(|l| l.memory_mib)
            .map_or(d.max_memory_bytes, |m| m as usize * 1024 * 1024),
        fuel: l.and_then(|l| l.fuel).or(d.fuel),
        max_response_bytes: d.max_response_bytes,
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

impl Target {
    /// Resolves the resources of WasmController `name` through discovery.
    pub async fn resolve(
        client: &kube::Client,
        name: &str,
        spec: &WasmControllerSpec,
    ) -> Result<Self, StartError> {
        let at = |field: String| move |source| StartError { field, source };
        let parent = resolve(client, spec.parent_ref())
            .await
            .map_err(at(spec.parent_field().into()))?;
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
                rolling: crate::decide::rolling::Rolling::from_strategy(c.update_strategy.as_ref()),
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
        let status_schema = crate::status_schema::read(client, &parent.ar).await;
        if let SchemaCheck::Unreadable(why) = &status_schema {
            tracing::debug!(controller = %name, reason = %why, "parent status schema not checked");
        }
        Ok(Target {
            decorate: spec.decorate.as_ref().map(Decoration::from_spec),
            status_schema,
            status_mode: spec.status_mode,
            adoption: spec.adoption,
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
            resync: spec
                .resync_period_seconds
                .map(|s| Duration::from_secs(u64::from(s))),
            shard_labels: false,
        })
    }
}
