//! Host-side mirror of the WIT contract (`wit/reconciler.wit`).
//!
//! Objects cross the component boundary as JSON text; on the host side they are
//! parsed `serde_json::Value`s so the engine and `render` never re-parse them.
//! These types are serde-serialisable because `render` prints them and tests
//! compare them with fixture files.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything a plugin may know when it is called (WIT `reconcile-request`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileRequest {
    /// The parent object.
    pub parent: Value,
    /// Observed children controlled by the parent.
    #[serde(default)]
    pub children: Vec<Value>,
    /// Objects selected by the controller's `related` rules.
    #[serde(default)]
    pub related: Vec<Value>,
    /// The parent is being deleted and our finalizer is still on it.
    #[serde(default)]
    pub finalizing: bool,
    /// Per-controller plugin settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// RFC 3339 UTC timestamp: the plugin's only notion of time.
    pub now: String,
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
