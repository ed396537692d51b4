//! Kubernetes Events on parents (core/v1), deduplicated so a resync loop or a
//! plugin that emits the same event on every call does not flood the API server.
//!
//! An event with the same (object uid, type, reason, message) is recorded at most
//! once per [`DEDUP_WINDOW`]. Events are best effort: a failed write is logged and
//! never fails a reconcile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::Instant;

/// How long an identical event is suppressed.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(600);
const MAX_REMEMBERED: usize = 100_000;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Routine.
    Normal,
    /// Needs attention.
    Warning,
}

impl EventKind {
    fn as_str(self) -> &'static str {
        match self {
            EventKind::Normal => "Normal",
            EventKind::Warning => "Warning",
        }
    }
}

/// The object an event is about.
#[derive(Debug, Clone)]
pub struct Regarding {
    /// apiVersion.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (None for cluster-scoped objects; the event then goes to `default`).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// uid.
    pub uid: String,
}

type DedupKey = (String, EventKind, String, String);

/// Records events for one controller.
pub struct EventRecorder {
    client: kube::Client,
    component: String,
    seen: Mutex<HashMap<DedupKey, Instant>>,
}

impl EventRecorder {
    /// `component` is the reporting controller, e.g. `wasm-reconciler/static-site`.
    pub fn new(client: kube::Client, component: String) -> Self {
        Self {
            client,
            component,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// True when this event should be written now (and remembers it).
    pub fn should_emit(&self, uid: &str, kind: EventKind, reason: &str, message: &str) -> bool {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() > MAX_REMEMBERED {
            seen.retain(|_, t| now.duration_since(*t) < DEDUP_WINDOW);
        }
        let key = (
            uid.to_string(),
            kind,
            reason.to_string(),
            message.to_string(),
        );
        match seen.get(&key) {
            Some(t) if now.duration_since(*t) < DEDUP_WINDOW => false,
            _ => {
                seen.insert(key, now);
                true
            }
        }
    }

    /// Forgets everything about an object (it was deleted).
    pub fn forget(&self, uid: &str) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| k.0 != uid);
    }

    /// Records an event in the background unless it is a recent duplicate.
    pub fn record(&self, on: &Regarding, kind: EventKind, reason: &str, message: &str) {
        if !self.should_emit(&on.uid, kind, reason, message) {
            return;
        }
        let ns = on
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let now = k8s_openapi::jiff::Timestamp::now();
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:016x}", on.name, rand::random::<u64>())),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(on.api_version.clone()),
                kind: Some(on.kind.clone()),
                name: Some(on.name.clone()),
                namespace: on.namespace.clone(),
                uid: Some(on.uid.clone()),
                ..ObjectReference::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(kind.as_str().to_string()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            action: Some(reason.to_string()),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.component.clone()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let reason = reason.to_string();
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::debug!(reason = %reason, error = %e, "recording event failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn identical_events_are_suppressed_and_different_ones_are_not() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let r = EventRecorder::new(client, "wasm-reconciler/t".into());
        assert!(r.should_emit("u", EventKind::Normal, "Created", "ConfigMap web"));
        assert!(!r.should_emit("u", EventKind::Normal, "Created", "ConfigMap web"));
        assert!(r.should_emit("u", EventKind::Normal, "Created", "ConfigMap other"));
        assert!(r.should_emit("u2", EventKind::Normal, "Created", "ConfigMap web"));
        r.forget("u");
        assert!(r.should_emit("u", EventKind::Normal, "Created", "ConfigMap web"));
    }
}
