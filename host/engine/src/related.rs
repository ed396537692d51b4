//! Per-parent related objects (issue 18): a plugin that exports `customize`
//! (contract 0.2.0, world `reconciler-with-customize`) narrows, per parent,
//! the WasmController's related rules to the objects that parent asks for.
//!
//! * **What is watched.** A selector can only narrow a declared rule, so the
//!   host watches exactly the declared related kinds, through the shared
//!   per-kind caches it already has (one informer per kind, shared by every
//!   controller and every parent); `rbac` grants read access to exactly those
//!   kinds. Per-parent selectors are applied in memory: a watch per selector
//!   would multiply connections by parents.
//! * **What a parent gets.** For each rule, the objects the rule selects that
//!   also match one of the parent's selectors for that rule (labels, names,
//!   and for a `Cluster` rule the namespace). A rule the answer does not name
//!   hands that parent nothing (its group stays in the request, empty).
//! * **When `customize` is called.** Once per parent, and again only when
//!   what it may read changes: the parent's uid, `metadata.generation`,
//!   labels, or the plugin (digest). The config is fixed for a running
//!   controller (a spec change restarts it, and the cache with it). Status
//!   writes, resyncs and child or related changes reuse the cached answer.
//! * **Who is re-reconciled.** A related object's change enqueues only the
//!   parents whose cached selection admits the object before or after the
//!   change; a parent without a cached answer yet is enqueued (it has not
//!   been reconciled, so it asks when it is).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::DynamicObject;
use kube::core::{Selector, SelectorExt};
use wr_runtime::{CustomizeRequest, FaultKind, RelatedSelector};

use crate::crd::RelatedScope;
use crate::decide::{Observed, to_json};
use crate::plugin::{PluginError, ReconcilePlugin};
use crate::queue::ObjectKey;
use crate::target::Target;

/// One selector of a `customize` answer, parsed.
#[derive(Debug, Clone)]
pub struct Narrow {
    labels: Selector,
    names: Vec<String>,
    namespace: Option<String>,
}

impl Narrow {
    fn admits(&self, scope: RelatedScope, obj: &DynamicObject) -> bool {
        let empty = BTreeMap::new();
        if !self
            .labels
            .matches(obj.metadata.labels.as_ref().unwrap_or(&empty))
        {
            return false;
        }
        if !self.names.is_empty()
            && !obj
                .metadata
                .name
                .as_ref()
                .is_some_and(|n| self.names.contains(n))
        {
            return false;
        }
        match (scope, &self.namespace) {
            (RelatedScope::Cluster, Some(ns)) => obj.metadata.namespace.as_ref() == Some(ns),
            _ => true,
        }
    }
}

/// What one parent gets of the related rules.
#[derive(Debug, Clone)]
pub enum Selection {
    /// The plugin does not export `customize`: every rule applies as declared.
    All,
    /// Per rule (target order): the parent's selectors; empty: nothing.
    Narrowed(Vec<Vec<Narrow>>),
}

impl Selection {
    /// Parses a `customize` answer against the target's rules. A selector
    /// naming no declared rule, or with a malformed label requirement, is
    /// invalid plugin output (the error names the selector and the field).
    pub fn from_answer(target: &Target, answer: &[RelatedSelector]) -> Result<Self, String> {
        let mut per_rule = vec![Vec::new(); target.related.len()];
        for (i, s) in answer.iter().enumerate() {
            let rules: Vec<usize> = target
                .related
                .iter()
                .enumerate()
                .filter(|(_, r)| r.key == s.name)
                .map(|(j, _)| j)
                .collect();
            if rules.is_empty() {
                let known: Vec<&str> = target.related.iter().map(|r| r.key.as_str()).collect();
                return Err(format!(
                    "customize selector [{i}].name {:?} names no related rule of the \
                     WasmController (declared: {known:?})",
                    s.name
                ));
            }
            let labels = Selector::try_from(label_selector(s)).map_err(|e| {
                format!(
                    "customize selector [{i}] ({:?}).matchExpressions: {e}",
                    s.name
                )
            })?;
            let narrow = Narrow {
                labels,
                names: s.names.clone(),
                namespace: s.namespace.clone(),
            };
            for j in rules {
                per_rule[j].push(narrow.clone());
            }
        }
        Ok(Selection::Narrowed(per_rule))
    }

    /// True when this parent is handed `obj` of rule `rule` (the rule's own
    /// selector is checked by the caller).
    pub fn admits(&self, target: &Target, rule: usize, obj: &DynamicObject) -> bool {
        match self {
            Selection::All => true,
            Selection::Narrowed(per_rule) => {
                let scope = target
                    .related
                    .get(rule)
                    .map_or(RelatedScope::Namespace, |r| r.rule.scope);
                per_rule
                    .get(rule)
                    .is_some_and(|ns| ns.iter().any(|n| n.admits(scope, obj)))
            }
        }
    }

    /// Keeps only the related objects this parent asked for.
    pub fn narrow(&self, target: &Target, observed: &mut Observed) {
        if let Selection::Narrowed(_) = self {
            observed.related.retain(|(i, o)| self.admits(target, *i, o));
        }
    }
}

fn label_selector(s: &RelatedSelector) -> LabelSelector {
    LabelSelector {
        match_labels: (!s.match_labels.is_empty()).then(|| s.match_labels.clone()),
        match_expressions: (!s.match_expressions.is_empty()).then(|| {
            s.match_expressions
                .iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: (!r.values.is_empty()).then(|| r.values.clone()),
                })
                .collect()
        }),
    }
}

/// Calls `customize` for `parent` (no cache: `plan` asks afresh, the
/// running controller through [`Selections::select`]). A failed call fails
/// like a reconcile call; an answer naming no declared rule is invalid output.
pub async fn ask(
    target: &Target,
    parent: &DynamicObject,
    plugin: &dyn ReconcilePlugin,
) -> Result<Selection, PluginError> {
    let req = CustomizeRequest {
        parent: to_json(parent),
        config: target.config.clone(),
    };
    match plugin.customize(&req, &target.limits).await? {
        None => Ok(Selection::All),
        Some(answer) => {
            let s =
                Selection::from_answer(target, &answer).map_err(|message| PluginError::Fault {
                    kind: FaultKind::InvalidOutput,
                    message,
                })?;
            tracing::debug!(
                action = "customize",
                selectors = answer.len(),
                "related objects selected"
            );
            Ok(s)
        }
    }
}

/// What a `customize` answer depends on besides the fixed config.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AskedFor {
    uid: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    digest: String,
}

impl AskedFor {
    fn of(parent: &DynamicObject, digest: &str) -> Self {
        Self {
            uid: parent.metadata.uid.clone(),
            generation: parent.metadata.generation,
            labels: parent.metadata.labels.clone(),
            digest: digest.to_string(),
        }
    }
}

/// The cached `customize` answers of one controller, per parent.
#[derive(Default)]
pub struct Selections {
    map: Mutex<HashMap<ObjectKey, (AskedFor, Arc<Selection>)>>,
}

impl Selections {
    /// The selection of `parent`: the cached answer while what it depends on
    /// is unchanged, else a fresh `customize` call (remembered on success).
    pub async fn select(
        &self,
        target: &Target,
        key: &ObjectKey,
        parent: &DynamicObject,
        plugin: &dyn ReconcilePlugin,
    ) -> Result<Arc<Selection>, PluginError> {
        let asked = AskedFor::of(parent, plugin.digest());
        if let Some((a, s)) = self.lock().get(key)
            && *a == asked
        {
            return Ok(s.clone());
        }
        let selection = Arc::new(ask(target, parent, plugin).await?);
        self.lock().insert(key.clone(), (asked, selection.clone()));
        Ok(selection)
    }

    /// True when a change of `objs` (old and new state) of rule `rule` may
    /// matter to parent `key`: its cached selection admits one of them, or it
    /// has none yet.
    pub fn may_want(
        &self,
        target: &Target,
        key: &ObjectKey,
        rule: usize,
        objs: &[&DynamicObject],
    ) -> bool {
        match self.lock().get(key) {
            None => true,
            Some((_, s)) => objs.iter().any(|o| s.admits(target, rule, o)),
        }
    }

    /// Forgets the answer for a parent that is gone.
    pub fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (AskedFor, Arc<Selection>)>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, ns: &str, team: &str) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"team": team}}}))
        .unwrap()
    }

    fn sel(labels: &[(&str, &str)]) -> RelatedSelector {
        RelatedSelector {
            name: "r".into(),
            match_labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            match_expressions: vec![],
            names: vec![],
            namespace: None,
        }
    }

    fn narrow(s: &RelatedSelector) -> Narrow {
        Narrow {
            labels: Selector::try_from(label_selector(s)).unwrap(),
            names: s.names.clone(),
            namespace: s.namespace.clone(),
        }
    }

    #[test]
    fn labels_names_and_cluster_namespace_narrow() {
        let web = narrow(&sel(&[("team", "web")]));
        assert!(web.admits(RelatedScope::Namespace, &obj("a", "ns", "web")));
        assert!(!web.admits(RelatedScope::Namespace, &obj("a", "ns", "db")));
        let mut named = sel(&[]);
        named.names = vec!["b".into()];
        let named = narrow(&named);
        assert!(named.admits(RelatedScope::Namespace, &obj("b", "ns", "db")));
        assert!(!named.admits(RelatedScope::Namespace, &obj("a", "ns", "db")));
        let mut in_ns = sel(&[]);
        in_ns.namespace = Some("other".into());
        let in_ns = narrow(&in_ns);
        assert!(!in_ns.admits(RelatedScope::Cluster, &obj("a", "ns", "web")));
        assert!(in_ns.admits(RelatedScope::Cluster, &obj("a", "other", "web")));
        // A Namespace rule keeps the parent's namespace (checked before); the
        // selector's namespace is ignored.
        assert!(in_ns.admits(RelatedScope::Namespace, &obj("a", "ns", "web")));
    }

    #[test]
    fn bad_expression_is_an_error_naming_the_selector() {
        let mut s = sel(&[]);
        s.match_expressions = vec![wr_runtime::LabelRequirement {
            key: "team".into(),
            operator: "Near".into(),
            values: vec![],
        }];
        let e = Selector::try_from(label_selector(&s));
        assert!(e.is_err());
    }
}
