//! Kubernetes Events on parents (core/v1), deduplicated so a resync loop or a
//! plugin that emits the same event on every call does not flood the API server.
//!
//! An event with the same (object uid, type, reason, message) is recorded at most
//! once per [`DEDUP_WINDOW`]. Events are best effort: a failed write is logged and
//! never fails a reconcile.
//!
//! Child changes are aggregated: while a reconcile of a parent runs
//! ([`EventRecorder::begin_batch`] … [`EventRecorder::end_batch`]), the
//! `ChildCreated` / `ChildUpdated` / `ChildDeleted` events recorded for it are
//! collected and written as one Normal event listing them ("created ConfigMap a,
//! Service b; deleted ConfigMap c"). One event per child was about 40 % of all
//! API requests while parents converged (docs/benchmarks.md).

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

/// Reasons of the per-child Normal events that are aggregated per reconcile, in
/// the order their sections appear in the aggregated message, with their verb.
const CHILD_REASONS: [(&str, &str); 3] = [
    ("ChildCreated", "created"),
    ("ChildUpdated", "updated"),
    ("ChildDeleted", "deleted"),
];
/// Reason of an aggregated event that mixes several kinds of child change.
pub const CHILDREN_CHANGED: &str = "ChildrenChanged";
/// Longest aggregated message; the list is cut with "and N more" beyond it.
const MAX_MESSAGE: usize = 1000;

/// Child changes collected during one reconcile of one parent.
struct Batch {
    on: Option<Regarding>,
    items: Vec<(&'static str, String)>,
}

/// Records events for one controller.
pub struct EventRecorder {
    client: kube::Client,
    component: String,
    seen: Mutex<HashMap<DedupKey, Instant>>,
    /// Open batches by parent uid (a parent is never reconciled twice at once).
    batches: Mutex<HashMap<String, Batch>>,
}

impl EventRecorder {
    /// `component` is the reporting controller, e.g. `wasm-reconciler/static-site`.
    pub fn new(client: kube::Client, component: String) -> Self {
        Self {
            client,
            component,
            seen: Mutex::new(HashMap::new()),
            batches: Mutex::new(HashMap::new()),
        }
    }

    /// Starts collecting child-change events for the parent with `uid`.
    pub fn begin_batch(&self, uid: &str) {
        self.batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                uid.to_string(),
                Batch {
                    on: None,
                    items: Vec::new(),
                },
            );
    }

    /// Stops collecting for `uid` and records one event for what was collected
    /// (nothing when no child changed).
    pub fn end_batch(&self, uid: &str) {
        let batch = self
            .batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        let Some(Batch {
            on: Some(on),
            items,
        }) = batch
        else {
            return;
        };
        if let Some((reason, message)) = aggregate(&items) {
            self.record(&on, EventKind::Normal, reason, &message);
        }
    }

    /// Adds a child-change event to an open batch; false when there is none.
    fn collect(&self, on: &Regarding, kind: EventKind, reason: &str, message: &str) -> bool {
        if kind != EventKind::Normal {
            return false;
        }
        let Some(&(reason, _)) = CHILD_REASONS.iter().find(|(r, _)| *r == reason) else {
            return false;
        };
        let mut batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        let Some(b) = batches.get_mut(&on.uid) else {
            return false;
        };
        b.on.get_or_insert_with(|| on.clone());
        b.items.push((reason, message.to_string()));
        true
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

    /// Records an event in the background unless it is a recent duplicate
    /// (child changes go to the parent's open batch, if any).
    pub fn record(&self, on: &Regarding, kind: EventKind, reason: &str, message: &str) {
        if self.collect(on, kind, reason, message) {
            return;
        }
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

/// One (reason, message) for a reconcile's child changes: the single reason when
/// all changes are of one kind, else [`CHILDREN_CHANGED`]; the message lists the
/// children per verb ("created ConfigMap a, ConfigMap b; deleted Service c").
fn aggregate(items: &[(&'static str, String)]) -> Option<(&'static str, String)> {
    let mut sections = Vec::new();
    let mut reasons = Vec::new();
    let mut listed = 0usize;
    let mut length = 0usize;
    for (reason, verb) in CHILD_REASONS {
        let mut names = Vec::new();
        // Sorted: the same set of changes gives the same message (dedup), in
        // whatever order the children were visited.
        let mut of_reason: Vec<&str> = items
            .iter()
            .filter(|(r, _)| *r == reason)
            .map(|(_, m)| m.strip_prefix(verb).map(str::trim_start).unwrap_or(m))
            .collect();
        of_reason.sort_unstable();
        for name in of_reason {
            length += name.len() + 2;
            if length > MAX_MESSAGE {
                break;
            }
            listed += 1;
            names.push(name);
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
        if !names.is_empty() {
            sections.push(format!("{verb} {}", names.join(", ")));
        }
    }
    let reason = match reasons.as_slice() {
        [] => return None,
        [one] => *one,
        _ => CHILDREN_CHANGED,
    };
    let mut message = sections.join("; ");
    if listed < items.len() {
        message.push_str(&format!(" and {} more", items.len() - listed));
    }
    Some((reason, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(uid: &str) -> Regarding {
        Regarding {
            api_version: "v1".into(),
            kind: "Widget".into(),
            namespace: Some("ns".into()),
            name: "w".into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn child_changes_aggregate_into_one_message() {
        let items = vec![
            ("ChildCreated", "created Deployment web".to_string()),
            ("ChildCreated", "created Service web".to_string()),
            ("ChildDeleted", "deleted ConfigMap old".to_string()),
            ("ChildUpdated", "updated ConfigMap web".to_string()),
            ("ChildDeleted", "deleted ConfigMap b-old".to_string()),
        ];
        assert_eq!(
            aggregate(&items),
            Some((
                CHILDREN_CHANGED,
                "created Deployment web, Service web; updated ConfigMap web; deleted ConfigMap b-old, ConfigMap old"
                    .to_string()
            ))
        );
        assert_eq!(
            aggregate(&items[..2]),
            Some((
                "ChildCreated",
                "created Deployment web, Service web".to_string()
            ))
        );
        assert_eq!(aggregate(&[]), None);
    }

    #[test]
    fn long_lists_are_cut() {
        let items: Vec<_> = (0..500)
            .map(|i| ("ChildCreated", format!("created ConfigMap child-{i}")))
            .collect();
        let (_, m) = aggregate(&items).unwrap();
        assert!(m.len() < MAX_MESSAGE + 40, "{}", m.len());
        assert!(m.ends_with("more"), "{m}");
    }

    #[tokio::test]
    async fn child_events_are_collected_only_while_a_batch_is_open() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let r = EventRecorder::new(client, "wasm-reconciler/t".into());
        r.begin_batch("u");
        assert!(r.collect(&on("u"), EventKind::Normal, "ChildCreated", "created A a"));
        assert!(!r.collect(&on("u"), EventKind::Warning, "ChildConflict", "x"));
        assert!(!r.collect(&on("u"), EventKind::Normal, "Custom", "x"));
        assert!(!r.collect(&on("other"), EventKind::Normal, "ChildCreated", "x"));
        r.end_batch("u");
        assert!(!r.collect(&on("u"), EventKind::Normal, "ChildCreated", "created A a"));
        // The aggregated event went through dedup: the same message again is suppressed.
        assert!(!r.should_emit("u", EventKind::Normal, "ChildCreated", "created A a"));
    }

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
