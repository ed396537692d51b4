//! The `WasmController` custom resource (`wasm-reconciler.dev/v1alpha1`, cluster-scoped).
//!
//! The Rust types are the source of truth: `crds/wasmcontroller.yaml` is generated
//! from them (`wasm-reconciler crds`) and a test fails when the checked-in file is
//! stale. Rules that a schema can express (enums, patterns, "exactly one of") are
//! put into the schema so the API server rejects bad specs at admission; the rest
//! are checked by [`WasmControllerSpec::validate`] and reported as a condition.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::decide::memo::Memoize;

/// API group of every wasm-reconciler resource.
pub const GROUP: &str = "wasm-reconciler.dev";

/// Desired configuration of one controller run by the host.
// The printcolumn attributes repeat `type_ = "string"` by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "wasm-reconciler.dev",
    version = "v1alpha1",
    kind = "WasmController",
    status = "WasmControllerStatus",
    shortname = "wc",
    category = "wasm-reconciler",
    derive = "PartialEq",
    printcolumn(name = "Parent", type_ = "string", json_path = ".status.parent"),
    printcolumn(
        name = "Digest",
        type_ = "string",
        json_path = ".status.pluginDigest",
        priority = "1"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WasmControllerSpec {
    /// The resource whose objects this controller reconciles (exactly one of
    /// `parentResource` and `decorate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_resource: Option<ResourceRef>,
    /// Decorator mode: existing objects to attach children to instead of a
    /// parent kind this controller owns (exactly one of `parentResource` and
    /// `decorate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decorate: Option<Decorate>,
    /// Kinds the plugin may create; the host watches them and deletes undesired ones.
    #[serde(default)]
    pub child_resources: Vec<ChildResource>,
    /// Where the plugin component comes from.
    pub plugin: PluginSource,
    /// Put a finalizer on parents and call the plugin with `finalizing: true` on delete.
    #[serde(default)]
    pub finalize: bool,
    /// Extra objects handed to the plugin in `related`.
    #[serde(default)]
    pub related: Vec<RelatedResource>,
    /// Period of the full resync of every parent (jittered by ±10 %). Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub resync_period_seconds: Option<u32>,
    /// Parents reconciled at the same time by this controller. Default 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_concurrent_reconciles: Option<u32>,
    /// Per-call sandbox limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// How the plugin's `status` is written: `Merge` (default) into the
    /// parent's status, or `Replace` it (the plugin owns the whole status
    /// except the host's `conditions` and `observedGeneration`).
    #[serde(default)]
    pub status_mode: StatusMode,
    /// What happens when a desired child's name is taken by an object with
    /// no controller: `Never` (default) reports a conflict, `Orphans` adopts
    /// it (see [`Adoption`]).
    #[serde(default)]
    pub adoption: Adoption,
    /// Canary rollout of `spec.plugin.candidate` (see [`RolloutPolicy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutPolicy>,
}

/// Adoption of orphans (issue 18): opt-in, so that by default the host never
/// takes over an object it did not create.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Adoption {
    /// A desired child whose name is taken by an object without a controller
    /// owner is reported as a `ChildConflict` and left alone.
    #[default]
    Never,
    /// Such an object is adopted: the host adds its controller owner
    /// reference by a forced server-side apply of the desired child — if the
    /// parent has a `spec.selector` (a label selector, as Metacontroller
    /// parents do), only when the orphan's labels match it. Metacontroller
    /// leftovers (its last-applied annotation, fields of manager
    /// `metacontroller`) are taken over and removed in the same step.
    Orphans,
}

/// How the plugin's `status` object reaches the parent's `.status`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StatusMode {
    /// JSON merge patch: fields the plugin stops setting stay.
    #[default]
    Merge,
    /// The plugin's status is the whole status (besides the host's
    /// `conditions` and `observedGeneration`): fields it stops setting are
    /// removed, as Metacontroller does.
    Replace,
}

// --- Decorator mode (issue #18 item 3) ---

/// Decorator mode: the controller attaches children to existing objects of
/// `resource` that match the selectors. The host never writes their spec; it
/// puts its finalizer on them only when `spec.finalize` is set, writes their
/// status only when `writeStatus` is set, and deletes the children of an
/// object that stops matching.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decorate {
    /// The decorated resource.
    pub resource: ResourceRef,
    /// Objects whose labels match; all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Objects whose annotations match; all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<AnnotationSelector>,
    /// Write the host's conditions and the plugin's status into the decorated
    /// object's `.status`. Default false: the status belongs to its owner.
    #[serde(default)]
    pub write_status: bool,
}

/// A label selector applied to annotations.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnnotationSelector {
    /// Annotations that must be present with exactly these values.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub match_annotations: std::collections::BTreeMap<String, String>,
    /// Requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`) on annotations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions:
        Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement>,
}

impl AnnotationSelector {
    /// The same rules as a [`LabelSelector`] (to be matched against annotations).
    pub fn as_label_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: Some(self.match_annotations.clone()),
            match_expressions: Some(self.match_expressions.clone()),
        }
    }
}

/// An absent resource reference (what [`WasmControllerSpec::parent_ref`]
/// returns for a spec that sets neither field, which `validate` rejects).
static NO_RESOURCE: ResourceRef = ResourceRef {
    api_version: String::new(),
    resource: None,
    kind: None,
};

impl WasmControllerSpec {
    /// The resource whose objects are reconciled: `parentResource`, or the
    /// decorated resource.
    pub fn parent_ref(&self) -> &ResourceRef {
        match (&self.parent_resource, &self.decorate) {
            (Some(p), _) => p,
            (None, Some(d)) => &d.resource,
            (None, None) => &NO_RESOURCE,
        }
    }

    /// `spec.parentResource` or `spec.decorate.resource`, for errors.
    pub fn parent_field(&self) -> &'static str {
        if self.decorate.is_some() && self.parent_resource.is_none() {
            "spec.decorate.resource"
        } else {
            "spec.parentResource"
        }
    }
}

fn check_decorate(s: &WasmControllerSpec) -> Result<(), SpecError> {
    match (&s.parent_resource, &s.decorate) {
        (Some(_), Some(_)) => Err(err(
            "spec.decorate",
            "parentResource and decorate are mutually exclusive: set exactly one",
        )),
        (None, None) => Err(err(
            "spec.parentResource",
            "exactly one of parentResource or decorate must be set",
        )),
        (_, Some(d)) => {
            for (field, sel) in [
                ("spec.decorate.labelSelector", d.label_selector.clone()),
                (
                    "spec.decorate.annotationSelector",
                    d.annotation_selector
                        .as_ref()
                        .map(AnnotationSelector::as_label_selector),
                ),
            ] {
                if let Some(sel) = sel {
                    kube::core::Selector::try_from(sel)
                        .map_err(|e| err(field, &format!("not a valid selector: {e}")))?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

// --- end of decorator mode ---

/// A resource named by apiVersion plus either its plural `resource` or its `kind`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.resource) != has(self.kind)", "message": "exactly one of resource or kind must be set"}
]))]
pub struct ResourceRef {
    /// `group/version`, or `v1` for the core group.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// Plural resource name, e.g. `configmaps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Kind, e.g. `ConfigMap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A child kind and how existing children of it are updated.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.resource) != has(self.kind)", "message": "exactly one of resource or kind must be set"}
]))]
pub struct ChildResource {
    /// `group/version`, or `v1` for the core group.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// Plural resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// How a child that differs from the desired state is brought in line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
}

impl ChildResource {
    /// The resource reference part of this child declaration.
    pub fn resource_ref(&self) -> ResourceRef {
        ResourceRef {
            api_version: self.api_version.clone(),
            resource: self.resource.clone(),
            kind: self.kind.clone(),
        }
    }

    /// The effective update method (InPlace when unset).
    pub fn method(&self) -> UpdateMethod {
        self.update_strategy
            .as_ref()
            .map(|s| s.method)
            .unwrap_or_default()
    }
}

/// Update strategy of one child kind (Metacontroller semantics).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// InPlace (default), Recreate, OnDelete, RollingInPlace or RollingRecreate.
    #[serde(default)]
    pub method: UpdateMethod,
    /// Rolling methods: when a child counts as updated and available. Without
    /// checks a child counts as available once it matches the desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_checks: Option<StatusChecks>,
    /// Rolling methods: how many children of this kind may be updating (or
    /// failing the status checks) at once. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_unavailable: Option<u32>,
    /// Rolling methods: how long one updated child may fail the status checks
    /// before the rollout is reported `Stalled` on the parent. Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub progress_deadline_seconds: Option<u32>,
}

/// How an existing child is brought to the desired state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpdateMethod {
    /// Server-side apply the desired fields onto the existing object.
    #[default]
    InPlace,
    /// Delete the existing object and create it again from the desired state.
    Recreate,
    /// Never update existing children; only create missing ones.
    OnDelete,
    /// Like InPlace, `maxUnavailable` children at a time, each waiting until the
    /// updated ones pass the `statusChecks`.
    RollingInPlace,
    /// Like Recreate, `maxUnavailable` children at a time, each waiting until
    /// the recreated ones pass the `statusChecks`.
    RollingRecreate,
}

impl UpdateMethod {
    /// True for the rolling methods.
    pub fn is_rolling(self) -> bool {
        matches!(self, Self::RollingInPlace | Self::RollingRecreate)
    }
}

// --- Rolling update status checks (issue #18 item 2) ---

/// What a child of a rolling kind must show to count as available. Every
/// listed check must pass.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusChecks {
    /// Conditions in the child's `status.conditions`, e.g. `Ready=True`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionCheck>,
    /// Field equalities, e.g. `status.observedGeneration == metadata.generation`
    /// (use it with RollingInPlace: a `Ready` condition may still be the one
    /// from before the update).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldCheck>,
}

/// One condition a child must have.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionCheck {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1))]
    pub type_: String,
    /// Wanted status. Default `True`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Wanted reason, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One field of a child that must equal another field or a value.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// No CEL rule for "exactly one of equalsPath or value": `value` is free-form
// JSON (x-kubernetes-preserve-unknown-fields), which kube-apiserver's CEL
// compiler cannot address (`undefined field 'value'`), so the CRD would be
// refused. `WasmControllerSpec::validate` checks it instead.
pub struct FieldCheck {
    /// Dotted path in the child, e.g. `status.observedGeneration`.
    #[schemars(length(min = 1))]
    pub path: String,
    /// Dotted path of the field it must equal, e.g. `metadata.generation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals_path: Option<String>,
    /// Or the value it must equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json_opt")]
    pub value: Option<serde_json::Value>,
}

fn any_json_opt(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    any_json(g)
}

/// Checks an update strategy's rules the schema cannot express; `field` is
/// the strategy's path, e.g. `spec.childResources[0].updateStrategy`.
fn check_strategy(field: &str, s: &UpdateStrategy) -> Result<(), SpecError> {
    if !s.method.is_rolling() {
        for (set, name) in [
            (s.status_checks.is_some(), "statusChecks"),
            (s.max_unavailable.is_some(), "maxUnavailable"),
            (
                s.progress_deadline_seconds.is_some(),
                "progressDeadlineSeconds",
            ),
        ] {
            if set {
                return Err(err(
                    &format!("{field}.{name}"),
                    "only used by the RollingInPlace and RollingRecreate methods",
                ));
            }
        }
    }
    if s.max_unavailable == Some(0) {
        return Err(err(
            &format!("{field}.maxUnavailable"),
            "must be at least 1",
        ));
    }
    if s.progress_deadline_seconds == Some(0) {
        return Err(err(
            &format!("{field}.progressDeadlineSeconds"),
            "must be at least 1",
        ));
    }
    let checks = s.status_checks.as_ref();
    for (i, c) in checks.map_or(&[][..], |c| &c.conditions).iter().enumerate() {
        if c.type_.is_empty() {
            return Err(err(
                &format!("{field}.statusChecks.conditions[{i}].type"),
                "must not be empty",
            ));
        }
    }
    for (i, f) in checks.map_or(&[][..], |c| &c.fields).iter().enumerate() {
        let at = format!("{field}.statusChecks.fields[{i}]");
        if f.path.is_empty() {
            return Err(err(&format!("{at}.path"), "must not be empty"));
        }
        if f.equals_path.is_some() == f.value.is_some() {
            return Err(err(&at, "exactly one of equalsPath or value must be set"));
        }
    }
    Ok(())
}

// --- end of rolling update status checks ---

/// Where a plugin version's component comes from and the `config` it is
/// called with: the fields `spec.plugin` and `spec.plugin.candidate` share
/// (flattened into both, so the YAML keeps them at the same level as the
/// rest; [`PluginSource`] and [`CandidateSource`] dereference to it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentSource {
    /// A key in a ConfigMap's `binaryData` holding the component bytes (or a
    /// chunk manifest), published by `wasm-reconciler publish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A local file path (for `wasm-reconciler dev` and tests; never in a shared cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Optional pin: lowercase hex sha256 of the component; a mismatch refuses to load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(sha256:)?[0-9a-f]{64}$"))]
    pub sha256: Option<String>,
    /// Settings handed to the plugin as `config` (any JSON). A candidate
    /// without its own gets the active version's `spec.plugin.config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub config: Option<serde_json::Value>,
}

/// Where the plugin component comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.configMap) != has(self.path)", "message": "exactly one of configMap or path must be set"}
]))]
pub struct PluginSource {
    /// `configMap` or `path`, `sha256`, `config`.
    #[serde(flatten)]
    pub component: ComponentSource,
    /// Automatic rollback of a new version that faults too often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackPolicy>,
    /// Signed plugins: load a component only with an ed25519 signature over
    /// its digest (`publish --sign`) by one of `trustedKeys`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignaturePolicy>,
    /// Skip the plugin call (and every write) when a parent's inputs equal
    /// those of the last call that found it converged: `Auto` (default) for
    /// plugins that declare they do not read `now` (contract 0.2.0),
    /// `Always` also for 0.1.0 plugins, `Never`. See docs/memoisation.md.
    #[serde(default, skip_serializing_if = "Memoize::is_auto")]
    pub memoize: Memoize,
    /// A candidate version run beside this one: in the shadow of every
    /// reconcile, and for the parents a `spec.rollout` moved to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateSource>,
}

/// Signed plugins (`crate::signing`): a component is loaded only with an
/// ed25519 signature over its digest (`publish --sign`) by one of these
/// keys; unsigned or wrongly signed versions are refused like a wrong
/// digest (`PluginLoaded=False`, a Warning event, the previous version
/// keeps running).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignaturePolicy {
    /// Trusted ed25519 public keys: base64 of the 32 raw bytes (what
    /// `wasm-reconciler keygen` prints) or SPKI PEM (`openssl pkey -pubout`).
    #[schemars(length(min = 1))]
    pub trusted_keys: Vec<String>,
}

/// Judges a newly loaded plugin version by its first reconciles: when more than
/// `maxFaultPercent` of its first `reconciles` calls end in a fault (trap,
/// timeout, fuel, memory) or a permanent error, the previous version is restored.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackPolicy {
    /// How many plugin calls of the new version are judged. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub reconciles: Option<u32>,
    /// Largest acceptable share of failed calls, in percent. Default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub max_fault_percent: Option<u32>,
}

impl RollbackPolicy {
    /// Calls judged (default 20).
    pub fn window(&self) -> u32 {
        self.reconciles.unwrap_or(20).max(1)
    }

    /// Threshold in percent (default 50).
    pub fn threshold(&self) -> u32 {
        self.max_fault_percent.unwrap_or(50).min(100)
    }
}

/// A ConfigMap key holding a component.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// ConfigMap name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// ConfigMap namespace.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Key in `binaryData`. Default `plugin.wasm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A rule selecting extra objects handed to the plugin.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.resource) != has(self.kind)", "message": "exactly one of resource or kind must be set"},
    {"rule": "!(has(self.selector) && has(self.names))", "message": "selector and names are mutually exclusive"}
]))]
pub struct RelatedResource {
    /// Key of this rule's objects in the request (plugin contract 0.2.0
    /// groups `related` by it) and in `customize` selectors. Default: the
    /// plural resource name, e.g. `secrets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub name: Option<String>,
    /// `group/version`, or `v1` for the core group.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// Plural resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Label selector; all objects when neither selector nor names is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Exact object names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// `Namespace` (default): objects in the parent's namespace; `Cluster`: anywhere.
    #[serde(default)]
    pub scope: RelatedScope,
}

impl RelatedResource {
    /// The resource reference part of this rule.
    pub fn resource_ref(&self) -> ResourceRef {
        ResourceRef {
            api_version: self.api_version.clone(),
            resource: self.resource.clone(),
            kind: self.kind.clone(),
        }
    }

    /// The key of this rule's objects in the request: `name`, or the plural
    /// of the resolved resource. Unnamed rules of one resource share a key
    /// (and so a group).
    pub fn key(&self, plural: &str) -> String {
        self.name.clone().unwrap_or_else(|| plural.to_string())
    }
}

/// Where related objects are looked for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RelatedScope {
    /// The parent's namespace.
    #[default]
    Namespace,
    /// All namespaces (and cluster-scoped objects).
    Cluster,
}

/// Per-call sandbox limits.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Wall-clock budget of one call in milliseconds. Default 2000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub timeout_millis: Option<u32>,
    /// Linear memory cap in MiB. Default 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub memory_mib: Option<u32>,
    /// Optional fuel (instruction) budget per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub fuel: Option<u64>,
}

/// Observed state of a WasmController, written by the host.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmControllerStatus {
    /// Generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `PluginLoaded` and `Ready`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The parent resource (or decorated resource) as `plural.group`, e.g.
    /// `apps.my-app.example.com` (`plural` in the core group): `kubectl get
    /// wasmcontrollers` shows it, so two controllers in one group differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// `sha256:<hex>` of the plugin currently serving this controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_digest: Option<String>,
    /// When the serving plugin was loaded (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_loaded_at: Option<String>,
    /// resourceVersion of the plugin ConfigMap the serving plugin was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_source_resource_version: Option<String>,
    /// The plugin contract world and version the serving plugin implements,
    /// found from the component's type at load, e.g.
    /// `wasm-reconciler:plugin/reconciler@0.2.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_contract: Option<String>,
    /// Parents whose last reconcile succeeded.
    #[serde(default)]
    pub parents_ready: u32,
    /// Parents whose last reconcile failed.
    #[serde(default)]
    pub parents_failing: u32,
    /// How the candidate's shadow calls compare with the active version's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowStatus>,
    /// Where the canary rollout of the candidate stands (the host resumes
    /// from here after a restart or a leader change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}

// ---- Candidate versions: shadow runs and canary rollouts (issue 17) ----
// One block so that the fields of progressive delivery stay together; the
// behaviour lives in `crate::shadow` and `crate::canary`.

/// A candidate plugin version: the same source forms as the active one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.configMap) != has(self.path)", "message": "exactly one of configMap or path must be set"}
]))]
pub struct CandidateSource {
    /// `configMap` or `path`, `sha256`, `config` (default: the active
    /// version's `spec.plugin.config`).
    #[serde(flatten)]
    pub component: ComponentSource,
    /// Sandbox limits of the candidate's calls; default: `spec.limits`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Call the candidate in the shadow of every reconcile of a parent the
    /// active version serves, and compare. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<bool>,
    /// Output fields that may differ between versions without counting as a
    /// difference (e.g. a timestamp): dotted paths, matched as prefixes —
    /// `data.renderedAt` in a child, `status.observedAt`, or
    /// `ConfigMap:data.renderedAt` for one child kind only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile_fields: Vec<String>,
    /// How many differences `status.shadow.differences` keeps. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub max_differences: Option<u32>,
    /// Shadow calls that may run at once; more wait in a bounded backlog
    /// (256 parents, a newer offer replacing a parent's older one) and are
    /// dropped (counted) only beyond it. Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub max_concurrent_shadow_calls: Option<u32>,
}

impl CandidateSource {
    /// The candidate as a plugin source (for reading and pinning).
    pub fn source(&self) -> PluginSource {
        PluginSource {
            component: self.component.clone(),
            rollback: None,
            candidate: None,
            // The signature policy is the controller's (`spec.plugin.signature`),
            // checked for the candidate like for the active version.
            signature: None,
            memoize: Default::default(),
        }
    }
}

// The shared fields read as the source's own (`spec.plugin.path`), as they
// are in the YAML: callers need not know they are one struct.
impl std::ops::Deref for PluginSource {
    type Target = ComponentSource;
    fn deref(&self) -> &ComponentSource {
        &self.component
    }
}

impl std::ops::DerefMut for PluginSource {
    fn deref_mut(&mut self) -> &mut ComponentSource {
        &mut self.component
    }
}

impl std::ops::Deref for CandidateSource {
    type Target = ComponentSource;
    fn deref(&self) -> &ComponentSource {
        &self.component
    }
}

impl std::ops::DerefMut for CandidateSource {
    fn deref_mut(&mut self) -> &mut ComponentSource {
        &mut self.component
    }
}

/// Moves parents from the active version to `spec.plugin.candidate` in
/// steps. Each step's parents are added to the earlier steps' (a parent never
/// moves back while the rollout progresses); health gates decide whether the
/// next step may start, and a failed gate moves every parent back.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicy {
    /// The steps, in order; passing the last one promotes the candidate.
    #[schemars(length(min = 1, max = 100))]
    pub steps: Vec<RolloutStep>,
    /// Wait after a step starts before the next may start. Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_seconds: Option<u32>,
    /// Health gates every step must pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<RolloutGates>,
}

/// One rollout step: exactly one of `percent`, `namespaces`, `selector`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.percent) ? 1 : 0) + (has(self.namespaces) ? 1 : 0) + (has(self.selector) ? 1 : 0) == 1", "message": "exactly one of percent, namespaces or selector must be set"}
]))]
pub struct RolloutStep {
    /// Parents whose stable hash of `namespace/name` falls below this
    /// percentage (the same parents at every host, and nested: 10 % ⊂ 50 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub percent: Option<u32>,
    /// Parents in these namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Parents whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// This step's pause, instead of the policy's `pauseSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_seconds: Option<u32>,
}

/// Health gates of a rollout, evaluated by the host at every step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutGates {
    /// Share of migrated parents whose last reconcile succeeded, in percent,
    /// required `readyWithinSeconds` after a step starts. Default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub ready_percent: Option<u32>,
    /// Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_within_seconds: Option<u32>,
    /// Candidate calls ending in a sandbox fault tolerated per step. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_faults: Option<u32>,
    /// Candidate calls ending in a permanent error tolerated per step. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_permanent_errors: Option<u32>,
}

/// Observed shadow comparison (counts since the candidate was loaded).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShadowStatus {
    /// The candidate compared.
    pub candidate_digest: String,
    /// Shadow calls whose output equals the active output.
    pub identical: u64,
    /// Shadow calls whose output differs.
    pub differing: u64,
    /// Shadow calls that failed (fault or error) where the active call answered.
    pub failing: u64,
    /// Shadow calls not made because the shadow lane and its backlog were full.
    #[serde(default)]
    pub dropped: u64,
    /// The first differences found (distinct by parent, child and field).
    #[serde(default)]
    pub differences: Vec<ShadowDifference>,
}

/// One field where the candidate's output differs from the active output.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShadowDifference {
    /// `namespace/name` of the parent.
    pub parent: String,
    /// The child, `Kind namespace/name`; absent for status, conditions,
    /// events and whole-call failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
    /// Dotted path of the field (`data.value`, `status.phase`,
    /// `conditions[Ready]`, `events`, or `(absent)` for a missing child).
    pub field: String,
    /// The active version's value (JSON, cut to 200 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<String>,
    /// The candidate's value (JSON, cut to 200 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
}

/// Where a canary rollout stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutPhase {
    /// Steps advance when their pause is over and the gates pass.
    #[default]
    Progressing,
    /// Held at the current step (`rollout pause`); gates still apply.
    Paused,
    /// Every parent runs the candidate.
    Promoted,
    /// A gate failed: every parent runs the active version again.
    RolledBack,
    /// Stopped by hand (`rollout abort`): every parent runs the active version.
    Aborted,
}

/// Rollout state, kept in the cluster so that any host resumes it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The candidate this rollout moves parents to.
    pub candidate_digest: String,
    /// Progressing, Paused, Promoted, RolledBack or Aborted.
    pub phase: RolloutPhase,
    /// The current step, 1-based: step `step` of `steps`, the number the
    /// message, the `RolloutStep` Event and `rollout status` name.
    pub step: u32,
    /// Number of steps of the policy.
    pub steps: u32,
    /// When the current step started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_started_at: Option<String>,
    /// Parents on the candidate now.
    #[serde(default)]
    pub migrated: u32,
    /// Of those, parents whose last reconcile succeeded.
    #[serde(default)]
    pub migrated_ready: u32,
    /// Candidate faults counted in this step (by this host).
    #[serde(default)]
    pub faults: u32,
    /// Candidate permanent errors counted in this step (by this host).
    #[serde(default)]
    pub permanent_errors: u32,
    /// Why the rollout is where it is (the failed gate, who promoted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Annotation through which `wasm-reconciler rollout` asks the host to
/// `promote`, `abort`, `pause` or `resume`; the host applies and removes it.
pub const ROLLOUT_COMMAND_ANNOTATION: &str = "wasm-reconciler.dev/rollout-command";

// ---- end of candidate versions ----

/// Schema of a free-form JSON value (structural-schema friendly).
fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Rules the schema cannot express; the error names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// JSON path of the offending field, e.g. `spec.childResources[1].kind`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl WasmControllerSpec {
    /// Checks the rules the API server cannot check (or that an API server without
    /// CEL support skipped). The first violation is returned.
    pub fn validate(&self) -> Result<(), SpecError> {
        check_decorate(self)?;
        let parent = self.parent_ref();
        check_ref(
            self.parent_field(),
            &parent.api_version,
            &parent.resource,
            &parent.kind,
        )?;
        for (i, c) in self.child_resources.iter().enumerate() {
            check_ref(
                &format!("spec.childResources[{i}]"),
                &c.api_version,
                &c.resource,
                &c.kind,
            )?;
            if let Some(u) = &c.update_strategy {
                check_strategy(&format!("spec.childResources[{i}].updateStrategy"), u)?;
            }
        }
        for (i, r) in self.related.iter().enumerate() {
            let field = format!("spec.related[{i}]");
            check_ref(&field, &r.api_version, &r.resource, &r.kind)?;
            if r.selector.is_some() && r.names.is_some() {
                return Err(err(&field, "selector and names are mutually exclusive"));
            }
            if let Some(name) = &r.name {
                if name.is_empty() {
                    return Err(err(&format!("{field}.name"), "must not be empty"));
                }
                if self.related[..i]
                    .iter()
                    .any(|o| o.name.as_ref() == Some(name))
                {
                    return Err(err(
                        &format!("{field}.name"),
                        &format!("{name:?} names an earlier rule too; names must be unique"),
                    ));
                }
            }
        }
        match (&self.plugin.config_map, &self.plugin.path) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(err(
                    "spec.plugin",
                    "exactly one of configMap or path must be set",
                ));
            }
            _ => {}
        }
        if let Some(pin) = &self.plugin.sha256 {
            let hex = pin.strip_prefix("sha256:").unwrap_or(pin);
            if hex.len() != 64
                || !hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                return Err(err("spec.plugin.sha256", "must be 64 lowercase hex digits"));
            }
        }
        if self.max_concurrent_reconciles == Some(0) {
            return Err(err("spec.maxConcurrentReconciles", "must be at least 1"));
        }
        if self.resync_period_seconds == Some(0) {
            return Err(err("spec.resyncPeriodSeconds", "must be at least 1"));
        }
        self.validate_candidate()
    }

    /// The rules of `spec.plugin.candidate` and `spec.rollout`.
    fn validate_candidate(&self) -> Result<(), SpecError> {
        if let Some(c) = &self.plugin.candidate
            && c.config_map.is_some() == c.path.is_some()
        {
            return Err(err(
                "spec.plugin.candidate",
                "exactly one of configMap or path must be set",
            ));
        }
        let Some(r) = &self.rollout else {
            return Ok(());
        };
        if self.plugin.candidate.is_none() {
            return Err(err(
                "spec.rollout",
                "needs spec.plugin.candidate: the version to roll out",
            ));
        }
        if r.steps.is_empty() {
            return Err(err("spec.rollout.steps", "must name at least one step"));
        }
        for (i, s) in r.steps.iter().enumerate() {
            let set = [
                s.percent.is_some(),
                s.namespaces.is_some(),
                s.selector.is_some(),
            ];
            if set.iter().filter(|b| **b).count() != 1 {
                return Err(err(
                    &format!("spec.rollout.steps[{i}]"),
                    "exactly one of percent, namespaces or selector must be set",
                ));
            }
            if s.percent.is_some_and(|p| p > 100) {
                return Err(err(
                    &format!("spec.rollout.steps[{i}].percent"),
                    "must be at most 100",
                ));
            }
        }
        Ok(())
    }
}

fn err(field: &str, message: &str) -> SpecError {
    SpecError {
        field: field.to_string(),
        message: message.to_string(),
    }
}

fn check_ref(
    field: &str,
    api_version: &str,
    resource: &Option<String>,
    kind: &Option<String>,
) -> Result<(), SpecError> {
    if api_version.is_empty() || api_version.split('/').count() > 2 {
        return Err(err(
            &format!("{field}.apiVersion"),
            "must be group/version or v1",
        ));
    }
    match (resource, kind) {
        (Some(r), None) if !r.is_empty() => Ok(()),
        (None, Some(k)) if !k.is_empty() => Ok(()),
        _ => Err(err(field, "exactly one of resource or kind must be set")),
    }
}

/// The CRD as YAML, exactly as checked in under `crds/`.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    serde_yaml::to_string(&WasmController::crd())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> WasmControllerSpec {
        serde_json::from_value(serde_json::json!({
            "parentResource": {"apiVersion": "example.com/v1", "kind": "StaticSite"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": "/tmp/p.wasm"}
        }))
        .unwrap()
    }

    #[test]
    fn checked_in_crd_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../crds/wasmcontroller.yaml"
        );
        if std::env::var_os("WR_UPDATE_CRDS").is_some() {
            std::fs::write(path, crd_yaml().unwrap()).unwrap();
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            on_disk,
            crd_yaml().unwrap(),
            "crds/wasmcontroller.yaml is stale: run `wasm-reconciler crds > crds/wasmcontroller.yaml` or `WR_UPDATE_CRDS=1 cargo test -p wr-engine crd`"
        );
    }

    #[test]
    fn crd_is_cluster_scoped_with_status_and_cel_rules() {
        use kube::CustomResourceExt;
        let crd = WasmController::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        let text = serde_json::to_string(&crd).unwrap();
        assert!(text.contains("x-kubernetes-validations"));
        assert!(text.contains("has(self.resource) != has(self.kind)"));
        assert!(
            crd.spec.versions[0]
                .subresources
                .as_ref()
                .unwrap()
                .status
                .is_some()
        );
    }

    #[test]
    fn valid_spec_passes_and_defaults_apply() {
        let s = spec();
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.child_resources[0].method(), UpdateMethod::InPlace);
        assert!(!s.finalize);
    }

    #[test]
    fn both_resource_and_kind_is_rejected_naming_the_field() {
        let mut s = spec();
        s.child_resources[0].kind = Some("ConfigMap".into());
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "spec.childResources[0]");
    }

    #[test]
    fn related_names_key_the_rules_and_must_be_unique() {
        let mut s = spec();
        let rule: RelatedResource =
            serde_json::from_value(serde_json::json!({"apiVersion": "v1", "resource": "secrets"}))
                .unwrap();
        assert_eq!(rule.key("secrets"), "secrets");
        let named = RelatedResource {
            name: Some("tls".into()),
            ..rule.clone()
        };
        assert_eq!(named.key("secrets"), "tls");
        s.related = vec![rule.clone(), named.clone(), rule];
        assert_eq!(s.validate(), Ok(()));
        s.related.push(named);
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "spec.related[3].name");
        assert!(e.message.contains("\"tls\""), "{}", e.message);
    }

    /// The source fields `spec.plugin` and its candidate share are one
    /// struct, flattened: the YAML keeps them beside the others, and the
    /// schema lists them there (no `component` level).
    #[test]
    fn plugin_and_candidate_keep_their_source_fields_at_one_level() {
        let yaml = serde_json::json!({
            "configMap": {"name": "p", "namespace": "ns"},
            "sha256": "a".repeat(64),
            "config": {"k": 1},
            "candidate": {
                "path": "/next.wasm",
                "config": {"k": 2},
                "volatileFields": ["status.at"],
                "shadow": false
            }
        });
        let p: PluginSource = serde_json::from_value(yaml.clone()).unwrap();
        assert_eq!(p.config_map.as_ref().map(|c| c.name.as_str()), Some("p"));
        let c = p.candidate.as_ref().unwrap();
        assert_eq!(c.path.as_deref(), Some("/next.wasm"));
        assert_eq!(c.source().config, Some(serde_json::json!({"k": 2})));
        assert_eq!(serde_json::to_value(&p).unwrap(), yaml);
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(WasmController::crd()).unwrap();
        let plugin = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["plugin"];
        for props in [
            &plugin["properties"],
            &plugin["properties"]["candidate"]["properties"],
        ] {
            for k in ["configMap", "path", "sha256", "config"] {
                assert!(props.get(k).is_some(), "{k} missing: {props}");
            }
            assert!(props.get("component").is_none(), "{props}");
        }
    }

    #[test]
    fn plugin_needs_exactly_one_source() {
        let mut s = spec();
        s.plugin.path = None;
        assert_eq!(s.validate().unwrap_err().field, "spec.plugin");
    }

    #[test]
    fn bad_pin_is_rejected() {
        let mut s = spec();
        s.plugin.sha256 = Some("ABC".into());
        assert_eq!(s.validate().unwrap_err().field, "spec.plugin.sha256");
        s.plugin.sha256 = Some("a".repeat(64));
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn rolling_settings_are_checked_naming_the_field() {
        let mut s = spec();
        let strategy = |v: serde_json::Value| serde_json::from_value::<UpdateStrategy>(v).unwrap();
        s.child_resources[0].update_strategy = Some(strategy(serde_json::json!({
            "method": "RollingInPlace", "maxUnavailable": 2, "progressDeadlineSeconds": 30,
            "statusChecks": {"conditions": [{"type": "Ready"}],
                             "fields": [{"path": "status.observedGeneration", "equalsPath": "metadata.generation"}]}
        })));
        assert_eq!(s.validate(), Ok(()));
        assert!(s.child_resources[0].method().is_rolling());
        for (v, field) in [
            (
                serde_json::json!({"method": "InPlace", "maxUnavailable": 2}),
                "spec.childResources[0].updateStrategy.maxUnavailable",
            ),
            (
                serde_json::json!({"method": "RollingRecreate", "progressDeadlineSeconds": 0}),
                "spec.childResources[0].updateStrategy.progressDeadlineSeconds",
            ),
            (
                serde_json::json!({"method": "RollingRecreate",
                    "statusChecks": {"fields": [{"path": "status.x", "value": 1, "equalsPath": "spec.x"}]}}),
                "spec.childResources[0].updateStrategy.statusChecks.fields[0]",
            ),
        ] {
            s.child_resources[0].update_strategy = Some(strategy(v));
            assert_eq!(s.validate().unwrap_err().field, field);
        }
    }

    #[test]
    fn decorate_and_parent_resource_are_mutually_exclusive_naming_the_field() {
        let mut s = spec();
        let d: Decorate = serde_json::from_value(serde_json::json!({
            "resource": {"apiVersion": "v1", "resource": "namespaces"},
            "labelSelector": {"matchLabels": {"team": "a"}},
            "annotationSelector": {"matchAnnotations": {"decorate": "yes"}}
        }))
        .unwrap();
        s.decorate = Some(d.clone());
        assert_eq!(s.validate().unwrap_err().field, "spec.decorate");
        s.parent_resource = None;
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.parent_ref(), &d.resource);
        s.decorate = None;
        assert_eq!(s.validate().unwrap_err().field, "spec.parentResource");
        let mut bad = d.clone();
        bad.resource.kind = Some("Namespace".into());
        s.decorate = Some(bad);
        assert_eq!(s.validate().unwrap_err().field, "spec.decorate.resource");
        let mut bad = d;
        bad.label_selector = serde_json::from_value(serde_json::json!(
            {"matchExpressions": [{"key": "a", "operator": "Sideways"}]}
        ))
        .unwrap();
        s.decorate = Some(bad);
        assert_eq!(
            s.validate().unwrap_err().field,
            "spec.decorate.labelSelector"
        );
    }

    #[test]
    fn unknown_update_method_does_not_deserialize() {
        let r: Result<UpdateStrategy, _> =
            serde_json::from_value(serde_json::json!({"method": "Sideways"}));
        assert!(r.is_err());
    }
}
