//! Host-side mirror of the WIT contract, one shape for every contract
//! version the host supports (`wit/reconciler.wit` is 0.1.0,
//! `wit/0.2.0/reconciler.wit` is 0.2.0): the shape of the newest version.
//! `bindings` maps it onto each version's generated types, so the engine
//! never sees which version a plugin was built against.
//!
//! Objects cross the component boundary as JSON text; on the host side they are
//! parsed `serde_json::Value`s so the engine and `render` never re-parse them,
//! and a request's objects are serialised once into a [`RequestText`] (what the
//! wire carries, and what the engine's memo hashes).
//! These types are serde-serialisable because `render` prints them and tests
//! compare them with fixture files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{CallError, FaultKind};

/// Everything a plugin may know when it is called (WIT `reconcile-request`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileRequest {
    /// The parent object.
    pub parent: Value,
    /// Observed children controlled by the parent.
    #[serde(default)]
    pub children: Vec<Value>,
    /// Objects selected by the controller's `related` rules, one group per
    /// rule key in declared order. A 0.1.0 plugin gets them as one flat list
    /// (the groups concatenated in this order).
    #[serde(default)]
    pub related: Vec<RelatedObjects>,
    /// The parent is being deleted and our finalizer is still on it.
    #[serde(default)]
    pub finalizing: bool,
    /// Per-controller plugin settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// RFC 3339 UTC timestamp: the plugin's only notion of time.
    pub now: String,
}

impl ReconcileRequest {
    /// All related objects, group after group: what a 0.1.0 plugin receives.
    pub fn related_flat(&self) -> impl Iterator<Item = &Value> {
        self.related.iter().flat_map(|group| group.objects.iter())
    }
}

/// A reconcile request as it crosses the component boundary: every object
/// already its JSON text (compact `serde_json` output, exactly what the
/// plugin reads), the rest as in [`ReconcileRequest`].
///
/// Why a type of its own: the engine needs the request's bytes twice per
/// reconcile — for the memo's inputs hash and for the plugin call — and
/// serialising the objects for each was together ~27 % of the host's
/// instructions on an update (`docs/benchmarks.md`, sessions 8 and 9). Made once with
/// [`RequestText::new`], hashed by reference, then moved into the call
/// ([`crate::Plugin::reconcile_text`]) without another copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestText {
    /// The parent object.
    pub parent: String,
    /// Observed children.
    pub children: Vec<String>,
    /// Related objects, one group per rule key as in [`ReconcileRequest::related`].
    pub related: Vec<RelatedText>,
    /// The parent is being deleted and our finalizer is still on it.
    pub finalizing: bool,
    /// Per-controller plugin settings.
    pub config: Option<String>,
    /// RFC 3339 UTC timestamp.
    pub now: String,
}

/// The objects of one related group as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedText {
    /// The rule's key.
    pub name: String,
    /// The selected objects.
    pub objects: Vec<String>,
}

impl RequestText {
    /// Serialises every object of `req` once.
    pub fn new(req: &ReconcileRequest) -> Result<Self, CallError> {
        Ok(RequestText {
            parent: json_text(&req.parent)?,
            children: req
                .children
                .iter()
                .map(json_text)
                .collect::<Result<_, _>>()?,
            related: req
                .related
                .iter()
                .map(|group| {
                    Ok(RelatedText {
                        name: group.name.clone(),
                        objects: group
                            .objects
                            .iter()
                            .map(json_text)
                            .collect::<Result<_, _>>()?,
                    })
                })
                .collect::<Result<_, CallError>>()?,
            finalizing: req.finalizing,
            config: req.config.as_ref().map(json_text).transpose()?,
            now: req.now.clone(),
        })
    }

    /// Replaces `config` (a canary candidate is called with its own).
    pub fn set_config(&mut self, config: Option<&Value>) -> Result<(), CallError> {
        self.config = config.map(json_text).transpose()?;
        Ok(())
    }
}

/// The JSON text of one object of a request, as the plugin receives it.
pub(crate) fn json_text(v: &Value) -> Result<String, CallError> {
    serde_json::to_string(v).map_err(|e| {
        CallError::fault(
            FaultKind::Internal,
            format!("cannot serialise request: {e}"),
        )
    })
}

impl RelatedObjects {
    /// The group keyed `name` in `groups`, created (empty, at the end) when
    /// there is none yet: rules that share a key share a group, and a rule
    /// that selected nothing still has one.
    pub fn group<'a>(groups: &'a mut Vec<RelatedObjects>, name: &str) -> &'a mut Vec<Value> {
        let index = match groups.iter().position(|g| g.name == name) {
            Some(index) => index,
            None => {
                groups.push(RelatedObjects {
                    name: name.to_string(),
                    objects: Vec::new(),
                });
                groups.len() - 1
            }
        };
        &mut groups[index].objects
    }
}

/// The objects one related rule selected (WIT 0.2.0 `related-objects`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelatedObjects {
    /// The rule's key: its `name`, or its plural resource name when unnamed.
    pub name: String,
    /// The selected objects.
    #[serde(default)]
    pub objects: Vec<Value>,
}

/// What `customize` is given (WIT 0.2.0 `customize-request`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeRequest {
    /// The parent object.
    pub parent: Value,
    /// Per-controller plugin settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

/// One requirement of a label selector, spelled as Kubernetes'
/// `matchExpressions` item so the engine can hand it to a list call as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelRequirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// What one parent asks of one related rule (WIT 0.2.0 `related-selector`);
/// the answer of `customize`. Serialises like a Kubernetes label selector
/// plus `name`, `names` and `namespace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedSelector {
    /// Key of the WasmController related rule this narrows.
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelRequirement>,
    /// Exact names; empty: any name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// For a rule of scope `Cluster`: only this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Kubernetes condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A condition reported by the plugin (WIT `condition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// Kubernetes event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event the plugin asks the host to record (WIT `event`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub type_: EventType,
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// What the plugin wants the world to look like (WIT `reconcile-response`).
///
/// Only syntactic checks happened here (each child and `status` parsed as JSON).
/// Semantic validation (kinds, namespaces, names, duplicates) is the engine's job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileResponse {
    pub children: Vec<Value>,
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<u32>,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub finalized: bool,
}
