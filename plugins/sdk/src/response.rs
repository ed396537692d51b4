//! The response and its parts, with small builders.

use serde_json::Value;

/// Condition status, spelled as Kubernetes does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A condition on the parent. The host adds `observedGeneration` and
/// `lastTransitionTime`; the host owns `Ready` (do not report it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// `type_`=True.
    pub fn is_true(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Condition::new(type_, ConditionStatus::True, reason, message)
    }

    /// `type_`=False.
    pub fn is_false(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Condition::new(type_, ConditionStatus::False, reason, message)
    }

    /// `type_`=Unknown.
    pub fn unknown(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Condition::new(type_, ConditionStatus::Unknown, reason, message)
    }
}

/// Whether an event is routine or needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event recorded on the parent (deduplicated by the host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

impl Event {
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }

    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Event {
            type_: EventType::Warning,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// What the plugin wants: the complete desired set of children (an observed
/// child missing from it is deleted), conditions, a status patch, events.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    pub children: Vec<Value>,
    pub conditions: Vec<Condition>,
    pub status: Option<Value>,
    pub requeue_after_seconds: Option<u32>,
    pub events: Vec<Event>,
    pub finalized: bool,
}

impl Response {
    pub fn new() -> Self {
        Response::default()
    }

    /// Adds a desired child (a JSON object with apiVersion, kind, metadata.name).
    pub fn child(mut self, child: Value) -> Self {
        self.children.push(child);
        self
    }

    pub fn condition(mut self, condition: Condition) -> Self {
        self.conditions.push(condition);
        self
    }

    /// Sets the JSON object merged into the parent's `.status`.
    pub fn status(mut self, status: Value) -> Self {
        self.status = Some(status);
        self
    }

    pub fn requeue_after(mut self, seconds: u32) -> Self {
        self.requeue_after_seconds = Some(seconds);
        self
    }

    pub fn event(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    /// Teardown complete (only read when the request was `finalizing`).
    pub fn finalized(mut self, done: bool) -> Self {
        self.finalized = done;
        self
    }
}
