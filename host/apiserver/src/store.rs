//! Object storage: one global, monotonically increasing resourceVersion,
//! every object behind an `Arc` (reads never deep-copy), and a bounded
//! history of committed events that serves watches, consistent paginated
//! lists at an older version, and `410 Gone` once a version fell out of it.
//!
//! Writes are compare-and-swap commits under one short write lock: callers
//! compute the new object outside the lock and commit with an expectation
//! (absent / exact resourceVersion), so the lock is held for a map insert,
//! a history push and a channel send only.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use tokio::sync::broadcast;

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// A committed change.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    /// Storage key of the resource (`group/resource`).
    pub resource: Arc<str>,
    /// `namespace/name` (empty namespace for cluster-scoped objects).
    pub key: String,
    pub kind: EventKind,
    /// The object after the change (for deletes: the last state, at `rv`).
    pub object: Arc<Value>,
    /// The object before the change.
    pub prev: Option<Arc<Value>>,
}

/// What a commit expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Absent,
    /// Whatever is stored (tests and tools).
    #[allow(dead_code)]
    Any,
    Rv(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("already exists")]
    Exists,
    #[error("not found")]
    NotFound,
    #[error("resourceVersion mismatch")]
    Conflict,
}

/// The requested version is older than the retained history.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub struct Gone {
    pub requested: u64,
    pub oldest: u64,
}

/// A watch subscription: retained events after the start version, the live
/// channel (only events after `rv`), and the version the backlog reaches.
pub struct Subscription {
    pub backlog: Vec<Arc<Event>>,
    pub rx: broadcast::Receiver<Arc<Event>>,
    pub rv: u64,
}

/// Object reference inside the store: (resource key, object key).
pub type ObjRef = (Arc<str>, String);

#[derive(Default)]
struct State {
    rv: u64,
    tables: HashMap<Arc<str>, BTreeMap<String, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    /// Highest rv dropped from history: versions below it cannot be served.
    compacted: u64,
    uids: HashMap<String, ObjRef>,
    /// owner uid → dependents (from `metadata.ownerReferences`).
    dependents: HashMap<String, BTreeSet<ObjRef>>,
    /// Objects with a deletionTimestamp (garbage collector work list).
    deleting: BTreeSet<ObjRef>,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    state: RwLock<State>,
    tx: broadcast::Sender<Arc<Event>>,
    history_cap: usize,
    /// Called for every commit, under the write lock (persistence).
    sink: Option<Sink>,
}

/// Receives every committed event, in order.
pub type Sink = Box<dyn Fn(&Event) + Send + Sync>;

/// Object key for a namespace and name.
pub fn obj_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// `namespace/name` → (namespace, name).
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

pub fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

fn owner_uids(obj: &Value) -> impl Iterator<Item = &str> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
}

fn has_deletion_timestamp(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// One page of a list.
/// A commit's precondition against the stored object (`prev`); `delete`:
/// the commit removes the object.
fn check_expect(
    expect: Expect,
    prev: Option<&Arc<Value>>,
    delete: bool,
) -> Result<(), CommitError> {
    match (expect, prev) {
        (Expect::Absent, Some(_)) => Err(CommitError::Exists),
        (Expect::Rv(_) | Expect::Any, None) if delete => Err(CommitError::NotFound),
        (Expect::Rv(_), None) => Err(CommitError::NotFound),
        (Expect::Rv(want), Some(p)) if rv_of(p) != want => Err(CommitError::Conflict),
        _ => Ok(()),
    }
}

impl State {
    /// The state at `rv` of every key of `resource` changed after it (`None`:
    /// absent then), from the history; 410 when the history no longer
    /// reaches back to `rv`.
    fn overlay_at(
        &self,
        resource: &str,
        rv: u64,
    ) -> Result<BTreeMap<&str, Option<&Arc<Value>>>, Gone> {
        let mut overlay = BTreeMap::new();
        if rv >= self.rv {
            return Ok(overlay);
        }
        if rv < self.compacted {
            return Err(Gone {
                requested: rv,
                oldest: self.compacted + 1,
            });
        }
        for e in self.history.iter().rev() {
            if e.rv <= rv {
                break;
            }
            if &*e.resource == resource {
                overlay.insert(e.key.as_str(), e.prev.as_ref());
            }
        }
        Ok(overlay)
    }

    /// Keeps the indices (uid → object, owner uid → dependents, objects
    /// being deleted) right after `oref` changed from `prev` to `object`.
    fn reindex(&mut self, oref: ObjRef, prev: Option<&Value>, kind: EventKind, object: &Value) {
        if let Some(p) = prev {
            if kind == EventKind::Deleted
                && let Some(u) = uid_of(p)
            {
                self.uids.remove(u);
            }
            for o in owner_uids(p) {
                if let Some(set) = self.dependents.get_mut(o) {
                    set.remove(&oref);
                    if set.is_empty() {
                        self.dependents.remove(o);
                    }
                }
            }
        }
        if kind != EventKind::Deleted && has_deletion_timestamp(object) {
            self.deleting.insert(oref.clone());
        } else {
            self.deleting.remove(&oref);
        }
        if kind != EventKind::Deleted {
            if let Some(u) = uid_of(object) {
                self.uids.insert(u.to_string(), oref.clone());
            }
            for o in owner_uids(object) {
                self.dependents
                    .entry(o.to_string())
                    .or_default()
                    .insert(oref.clone());
            }
        }
    }
}

#[derive(Debug)]
pub struct Page {
    /// The version the page is consistent at.
    pub rv: u64,
    pub items: Vec<Arc<Value>>,
    /// Key of the last returned item when more items follow.
    pub more_after: Option<String>,
    /// How many matching items follow this page (`remainingItemCount`).
    pub remaining: u64,
}

impl Store {
    pub fn new(history_cap: usize) -> Self {
        let (tx, _) = broadcast::channel(65_536);
        Store {
            state: RwLock::new(State::default()),
            tx,
            history_cap: history_cap.max(1),
            sink: None,
        }
    }

    /// Install the commit sink (before the store is shared).
    pub fn with_sink(mut self, sink: Sink) -> Self {
        self.sink = Some(sink);
        self
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn current_rv(&self) -> u64 {
        self.read().rv
    }

    /// Oldest version a watch or continued list can still start from.
    pub fn compacted_rv(&self) -> u64 {
        self.read().compacted
    }

    pub fn get(&self, resource: &str, key: &str) -> Option<Arc<Value>> {
        self.read().tables.get(resource)?.get(key).cloned()
    }

    /// Is an object with this uid stored?
    pub fn uid_exists(&self, uid: &str) -> bool {
        self.read().uids.contains_key(uid)
    }

    /// Objects whose ownerReferences name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<ObjRef> {
        self.read()
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Objects being deleted (they carry a deletionTimestamp).
    pub fn deleting(&self) -> Vec<ObjRef> {
        self.read().deleting.iter().cloned().collect()
    }

    /// Owner uids that dependents still name but that no stored object has.
    pub fn dangling_owners(&self) -> Vec<String> {
        let st = self.read();
        st.dependents
            .keys()
            .filter(|u| !st.uids.contains_key(*u))
            .cloned()
            .collect()
    }

    /// Keys of all objects in a namespace, across resources.
    pub fn keys_in_namespace(&self, namespace: &str) -> Vec<ObjRef> {
        let prefix = format!("{namespace}/");
        let st = self.read();
        let mut out = Vec::new();
        for (res, table) in &st.tables {
            for k in table.range(prefix.clone()..).map(|(k, _)| k) {
                if !k.starts_with(&prefix) {
                    break;
                }
                out.push((res.clone(), k.clone()));
            }
        }
        out
    }

    pub fn keys_of(&self, resource: &str) -> Vec<String> {
        self.read()
            .tables
            .get(resource)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Commit a new state for one object (`None` deletes it). Sets
    /// `metadata.resourceVersion`, records history and notifies watchers.
    pub fn commit(
        &self,
        resource: &str,
        key: &str,
        expect: Expect,
        new: Option<Value>,
    ) -> Result<Arc<Value>, CommitError> {
        let mut st = self.write();
        let st = &mut *st;
        let res: Arc<str> = match st.tables.get_key_value(resource) {
            Some((k, _)) => k.clone(),
            None => Arc::from(resource),
        };
        let table = st.tables.entry(res.clone()).or_default();
        let prev = table.get(key).cloned();
        check_expect(expect, prev.as_ref(), new.is_none())?;
        st.rv += 1;
        let rv = st.rv;
        let rv_str = Value::String(rv.to_string());
        let (kind, object) = match new {
            Some(mut obj) => {
                if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("resourceVersion".into(), rv_str);
                }
                let obj = Arc::new(obj);
                table.insert(key.to_string(), obj.clone());
                let kind = if prev.is_some() {
                    EventKind::Modified
                } else {
                    EventKind::Added
                };
                (kind, obj)
            }
            None => {
                table.remove(key);
                let mut last = prev.as_deref().cloned().unwrap_or(Value::Null);
                if let Some(m) = last.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("resourceVersion".into(), rv_str);
                }
                (EventKind::Deleted, Arc::new(last))
            }
        };
        let oref: ObjRef = (res.clone(), key.to_string());
        st.reindex(oref, prev.as_deref(), kind, &object);
        let event = Arc::new(Event {
            rv,
            resource: res,
            key: key.to_string(),
            kind,
            object: object.clone(),
            prev,
        });
        if let Some(sink) = &self.sink {
            sink(&event);
        }
        st.history.push_back(event.clone());
        while st.history.len() > self.history_cap {
            if let Some(old) = st.history.pop_front() {
                st.compacted = old.rv;
            }
        }
        // Sent under the lock so the channel order is the rv order.
        let _ = self.tx.send(event);
        Ok(object)
    }

    /// Drop all history (tests and the forced-410 fault use this).
    pub fn compact_all(&self) {
        let mut st = self.write();
        st.history.clear();
        st.compacted = st.rv;
    }

    /// Subscribe to changes of one resource after `from_rv`: the retained
    /// events after it, then a live receiver (events may overlap; dedupe by rv).
    pub fn subscribe(&self, resource: &str, from_rv: u64) -> Result<Subscription, Gone> {
        let st = self.read();
        if from_rv < st.compacted {
            return Err(Gone {
                requested: from_rv,
                oldest: st.compacted + 1,
            });
        }
        let rx = self.tx.subscribe();
        let start = st.history.partition_point(|e| e.rv <= from_rv);
        let backlog = st
            .history
            .range(start..)
            .filter(|e| &*e.resource == resource)
            .cloned()
            .collect();
        Ok(Subscription {
            backlog,
            rx,
            rv: st.rv,
        })
    }

    /// A page of objects under `prefix` (a namespace `ns/` or empty for all),
    /// after key `after`, consistent at `at_rv` (`None`: now), keeping those
    /// that pass `keep`, at most `limit` (0: no limit).
    pub fn page(
        &self,
        resource: &str,
        prefix: &str,
        after: Option<&str>,
        at_rv: Option<u64>,
        limit: usize,
        keep: &dyn Fn(&Value) -> bool,
    ) -> Result<Page, Gone> {
        let st = self.read();
        let empty = BTreeMap::new();
        let table = st.tables.get(resource).unwrap_or(&empty);
        let rv = at_rv.unwrap_or(st.rv);
        let overlay = st.overlay_at(resource, rv)?;
        let lower = match after {
            Some(a) => std::ops::Bound::Excluded(a.to_string()),
            None => std::ops::Bound::Included(prefix.to_string()),
        };
        let in_range = |k: &str| k.starts_with(prefix) && after.is_none_or(|a| k > a);
        let mut cur = table
            .range::<String, _>((lower, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| !overlay.contains_key(k.as_str()))
            .map(|(k, v)| (k.as_str(), v))
            .peekable();
        let mut ov = overlay
            .iter()
            .filter(|(k, v)| in_range(k) && v.is_some())
            .filter_map(|(k, v)| v.map(|v| (*k, v)))
            .peekable();
        let mut items = Vec::new();
        let mut last_key: Option<&str> = None;
        let mut more_after = None;
        let mut remaining = 0;
        loop {
            let next = match (cur.peek(), ov.peek()) {
                (Some(a), Some(b)) => {
                    if a.0 < b.0 {
                        cur.next()
                    } else {
                        ov.next()
                    }
                }
                (Some(_), None) => cur.next(),
                (None, Some(_)) => ov.next(),
                (None, None) => None,
            };
            let Some((k, v)) = next else { break };
            if !keep(v) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                more_after = last_key.map(str::to_string);
                remaining = 1
                    + cur.by_ref().filter(|(_, v)| keep(v)).count() as u64
                    + ov.by_ref().filter(|(_, v)| keep(v)).count() as u64;
                break;
            }
            items.push(v.clone());
            last_key = Some(k);
        }
        Ok(Page {
            rv,
            items,
            more_after,
            remaining,
        })
    }

    /// Every stored object, for persistence snapshots.
    pub fn dump(&self) -> (u64, Vec<(String, String, Arc<Value>)>) {
        let st = self.read();
        let mut out = Vec::new();
        for (res, table) in &st.tables {
            for (k, v) in table {
                out.push((res.to_string(), k.clone(), v.clone()));
            }
        }
        (st.rv, out)
    }

    /// Load objects as they were persisted (no events, rv restored).
    pub fn restore(&self, rv: u64, objects: Vec<(String, String, Value)>) {
        let mut st = self.write();
        for (res, key, obj) in objects {
            let res: Arc<str> = Arc::from(res.as_str());
            let oref: ObjRef = (res.clone(), key.clone());
            if let Some(u) = uid_of(&obj) {
                st.uids.insert(u.to_string(), oref.clone());
            }
            let owners: Vec<String> = owner_uids(&obj).map(str::to_string).collect();
            for o in owners {
                st.dependents.entry(o).or_default().insert(oref.clone());
            }
            if has_deletion_timestamp(&obj) {
                st.deleting.insert(oref.clone());
            }
            st.tables.entry(res).or_default().insert(key, Arc::new(obj));
        }
        st.rv = st.rv.max(rv);
        st.compacted = st.rv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "d", "uid": format!("u-{name}")}})
    }

    #[test]
    fn versions_increase_and_cas_detects_stale_writes() {
        let s = Store::new(100);
        let a = s
            .commit("/cm", "d/a", Expect::Absent, Some(cm("a")))
            .unwrap();
        assert_eq!(rv_of(&a), 1);
        assert_eq!(
            s.commit("/cm", "d/a", Expect::Absent, Some(cm("a")))
                .unwrap_err(),
            CommitError::Exists
        );
        let b = s
            .commit("/cm", "d/a", Expect::Rv(1), Some(cm("a")))
            .unwrap();
        assert_eq!(rv_of(&b), 2);
        assert_eq!(
            s.commit("/cm", "d/a", Expect::Rv(1), Some(cm("a")))
                .unwrap_err(),
            CommitError::Conflict
        );
    }

    #[test]
    fn page_at_old_version_undoes_later_changes() {
        let s = Store::new(100);
        for n in ["a", "b", "c"] {
            s.commit("/cm", &obj_key("d", n), Expect::Absent, Some(cm(n)))
                .unwrap();
        }
        let first = s.page("/cm", "d/", None, None, 2, &|_| true).unwrap();
        assert_eq!(first.rv, 3);
        assert_eq!(first.more_after.as_deref(), Some("d/b"));
        // Changes after the first page must not show up in the second.
        s.commit("/cm", "d/c", Expect::Any, None).unwrap();
        s.commit("/cm", "d/e", Expect::Absent, Some(cm("e")))
            .unwrap();
        let second = s
            .page(
                "/cm",
                "d/",
                first.more_after.as_deref(),
                Some(first.rv),
                2,
                &|_| true,
            )
            .unwrap();
        let names: Vec<_> = second
            .items
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, vec!["c"]);
        assert!(second.more_after.is_none());
    }

    #[test]
    fn compaction_makes_old_versions_gone() {
        let s = Store::new(2);
        for n in ["a", "b", "c", "d"] {
            s.commit("/cm", &obj_key("d", n), Expect::Absent, Some(cm(n)))
                .unwrap();
        }
        assert!(s.subscribe("/cm", 1).is_err());
        let sub = s.subscribe("/cm", 2).unwrap();
        assert_eq!(
            sub.backlog.iter().map(|e| e.rv).collect::<Vec<_>>(),
            vec![3, 4]
        );
    }

    #[test]
    fn owner_index_follows_owner_references() {
        let s = Store::new(10);
        let mut child = cm("child");
        child["metadata"]["ownerReferences"] = json!([{"uid": "u-parent"}]);
        s.commit("/cm", "d/child", Expect::Absent, Some(child))
            .unwrap();
        assert_eq!(s.dependents_of("u-parent").len(), 1);
        s.commit("/cm", "d/child", Expect::Any, None).unwrap();
        assert!(s.dependents_of("u-parent").is_empty());
        assert!(!s.uid_exists("u-child"));
    }
}
