//! Shared caches: ONE watch and store per resource kind across all controllers.
//!
//! Watching is kube-runtime's `watcher` (relist on 410, backoff on errors); the
//! store is ours rather than kube-runtime's `reflector::Store` because the engine
//! needs, updated atomically with the objects themselves, an index from a
//! controller owner uid to the owned objects (children → parent) and an index by
//! namespace (related objects, parents a related object affects), plus change
//! notifications that include deletions discovered during a relist — the
//! reflector's store offers neither indexes nor those notifications.
//!
//! Memory: the store keeps each object as compact JSON text, not as a decoded
//! tree, and decodes on read (the `store` submodule says why and what it
//! costs). The public API still hands out `Arc<DynamicObject>`: each call
//! decodes a fresh copy, so prefer [`KindCache::keys_in_namespace`] over
//! [`KindCache::in_namespace`] when only keys are needed. The initial list is
//! read in pages of [`LIST_PAGE_SIZE`] (the API server does not support
//! streaming lists) and a relist buffers encoded objects — only those that
//! changed — so no decoded copy of a whole list is ever held.
//!
//! A sharded `run` narrows parent and child caches to its shard buckets
//! ([`CacheRegistry::narrowed`], [`narrow`]): their watch carries a label
//! selector, and a new selector restarts it with a fresh list, applied like
//! a relist (objects of lost buckets leave as deletions).
//!
//! Caches are reference counted: the [`CacheRegistry`] holds weak references and
//! a cache's watch task stops when the last controller holding it is stopped.

pub mod narrow;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use crate::admission::Admission;
use crate::apply::controller_uid;
use crate::queue::ObjectKey;
pub use narrow::Use;
use store::{Entry, Store};

/// Objects per page of a (re)list. kube-runtime's default too, stated here
/// because it bounds the transient memory of a list: one page is decoded at a
/// time.
pub const LIST_PAGE_SIZE: u32 = 500;

/// Drops `metadata.managedFields` before an object is cached: the engine never
/// reads them (drift is judged on the desired fields and the applied-hash
/// annotation), and for server-side-applied children they are often as large as
/// the rest of the object — the same trim controller-runtime and kube-rs users
/// apply to their caches. Plugins see observed children without them too.
pub fn strip_managed_fields(obj: &mut DynamicObject) {
    obj.metadata.managed_fields = None;
}

/// A change seen by a cache: `old` and/or `new` state of one object.
pub struct Change<'a> {
    /// The object before the change (None when added).
    pub old: Option<&'a DynamicObject>,
    /// The object after the change (None when deleted).
    pub new: Option<&'a DynamicObject>,
}

type Subscriber = Arc<dyn Fn(&Change<'_>) + Send + Sync>;

/// What a subscriber needs of the previous state of an updated object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OldState {
    /// Always the previous state (decoded from the cache).
    Always,
    /// Only when the controller owner changed: subscribers that map objects
    /// to their owner learn nothing new from an old state with the same
    /// owner, and skipping it saves a decode per child event.
    WhenOwnerChanges,
}

/// Objects of an in-progress relist: per key, the new entry, or `None` when it
/// is identical to the cached one (an unchanged relist holds keys, not objects).
type Relist = HashMap<Arc<ObjectKey>, Option<Entry>>;

/// The key of an object.
pub fn key_of(obj: &DynamicObject) -> ObjectKey {
    ObjectKey {
        namespace: obj.metadata.namespace.clone(),
        name: obj.metadata.name.clone().unwrap_or_default(),
    }
}

/// One kind's watch + store + indexes, shared by every controller that needs it.
pub struct KindCache {
    ar: ApiResource,
    store: RwLock<Store>,
    subscribers: RwLock<Vec<(u64, Subscriber, OldState)>>,
    next_sub: Mutex<u64>,
    synced_tx: watch::Sender<bool>,
    /// The label selector the watch should use (`None`: every object); see
    /// [`narrow`].
    want: watch::Sender<Option<String>>,
    /// The selector of the last completed (re)list, once there was one.
    listed: watch::Sender<Option<Option<String>>>,
    task: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The watch's last error, while it fails ([`KindCache::watch_failed`]).
    failing: Mutex<Option<WatchFailure>>,
}

/// Why a kind's watch fails, kept while it does so the WasmController can
/// say it (a 403 is a missing RBAC rule, not a transient error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchFailure {
    /// `list` or `watch`.
    pub verb: &'static str,
    /// HTTP status from the API server (0: no answer).
    pub code: u16,
    /// The API server's message, or the client error.
    pub message: String,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        if let Ok(mut t) = self.task.lock() {
            for h in t.drain(..) {
                h.abort();
            }
        }
    }
}

/// Unsubscribes when dropped.
pub struct Subscription {
    cache: Weak<KindCache>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(c) = self.cache.upgrade()
            && let Ok(mut subs) = c.subscribers.write()
        {
            subs.retain(|(id, _, _)| *id != self.id);
        }
    }
}

impl KindCache {
    #[cfg(test)]
    fn new(ar: ApiResource) -> Arc<Self> {
        Self::with_selector(ar, None)
    }

    fn with_selector(ar: ApiResource, selector: Option<String>) -> Arc<Self> {
        let (synced_tx, _) = watch::channel(false);
        Arc::new(Self {
            ar,
            store: RwLock::new(Store::default()),
            subscribers: RwLock::new(Vec::new()),
            next_sub: Mutex::new(0),
            synced_tx,
            want: watch::channel(selector).0,
            listed: watch::channel(None).0,
            task: Mutex::new(Vec::new()),
            failing: Mutex::new(None),
        })
    }

    /// True when this cache's watch is narrowed by a label selector (it
    /// holds only some of the kind's objects).
    pub fn is_narrowed(&self) -> bool {
        self.want.borrow().is_some()
    }

    /// Resolves once the watch has completed a list with the selector it
    /// wants now (after [`CacheRegistry::narrow_to`]: the gained buckets
    /// are in the cache and the lost ones gone).
    pub async fn wait_listed_as_wanted(&self) {
        let mut rx = self.listed.subscribe();
        let _ = rx
            .wait_for(|l| l.as_ref() == Some(&*self.want.borrow()))
            .await;
    }

    /// Why the watch fails, while it does.
    pub fn failing(&self) -> Option<WatchFailure> {
        self.failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records a watch error; logged (structured, without the whole Status)
    /// only when it differs from the last one, so a watch retried every
    /// second or so does not repeat itself.
    fn watch_failed(&self, e: &watcher::Error) {
        let (verb, err) = match e {
            watcher::Error::InitialListFailed(e) => ("list", Some(e)),
            watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
                ("watch", Some(e))
            }
            _ => ("watch", None),
        };
        let (code, message) = match (err, e) {
            (Some(kube::Error::Api(s)), _) => (s.code, s.message.clone()),
            (Some(e), _) => (0, e.to_string()),
            (None, watcher::Error::WatchError(s)) => (s.code, s.message.clone()),
            (None, e) => (0, e.to_string()),
        };
        let f = WatchFailure {
            verb,
            code,
            message,
        };
        let mut last = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_ref() != Some(&f) {
            tracing::warn!(kind = %self.ar.kind, group = %self.ar.group, verb, code, error = %f.message, "watch failing; retrying with backoff");
        } else {
            tracing::debug!(kind = %self.ar.kind, verb, code, "watch still failing");
        }
        *last = Some(f);
    }

    /// The watch works (again).
    fn watch_ok(&self) {
        let mut last = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        if last.take().is_some() {
            tracing::info!(kind = %self.ar.kind, group = %self.ar.group, "watch recovered");
        }
    }

    /// The resource this cache watches.
    pub fn api_resource(&self) -> &ApiResource {
        &self.ar
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Store> {
        self.store.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Store> {
        self.store.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Decodes a stored entry. The text was encoded from a `DynamicObject` by
    /// this module, so failure means a bug; it is logged and the object
    /// treated as absent rather than crashing the host.
    fn decode(&self, entry: &Entry) -> Option<DynamicObject> {
        match entry.decode() {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::error!(kind = %self.ar.kind, error = %e, "cached object does not decode; skipped");
                None
            }
        }
    }

    fn decode_all(&self, entries: Vec<Entry>) -> Vec<Arc<DynamicObject>> {
        entries
            .iter()
            .filter_map(|e| self.decode(e).map(Arc::new))
            .collect()
    }

    /// Waits until the first full list has been loaded.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced_tx.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// True once the first full list has been loaded.
    pub fn is_synced(&self) -> bool {
        *self.synced_tx.borrow()
    }

    /// One object by key (decoded on each call).
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        let entry = self.read().get(key).cloned()?;
        self.decode(&entry).map(Arc::new)
    }

    /// Only the fields of `T` of one object (e.g. one metadata field of every
    /// parent, without decoding their specs and statuses). `None` when absent
    /// or when the stored object does not have that shape.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, key: &ObjectKey) -> Option<T> {
        let entry = self.read().get(key).cloned()?;
        entry.decode_as().ok()
    }

    /// Objects whose controller owner has `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<DynamicObject>> {
        let entries = self.read().owned_by(uid);
        self.decode_all(entries)
    }

    /// Objects in a namespace (`None`: every object), decoded on each call.
    pub fn in_namespace(&self, ns: Option<&str>) -> Vec<Arc<DynamicObject>> {
        let entries = self.read().in_namespace(ns);
        self.decode_all(entries)
    }

    /// Keys of the objects in a namespace (`None`: every object), without
    /// decoding anything.
    pub fn keys_in_namespace(&self, ns: Option<&str>) -> Vec<ObjectKey> {
        self.read().keys_in_namespace(ns)
    }

    /// Keys of every cached object.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.keys_in_namespace(None)
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of JSON text held for the cached objects (without `managedFields`).
    pub fn json_bytes(&self) -> usize {
        self.read().json_bytes()
    }

    /// Calls `f` for every change from now on (from the watch task; keep it cheap
    /// and non-blocking: enqueue keys, nothing more).
    pub fn subscribe(
        self: &Arc<Self>,
        f: impl Fn(&Change<'_>) + Send + Sync + 'static,
    ) -> Subscription {
        self.subscribe_with(f, OldState::Always)
    }

    /// Like [`KindCache::subscribe`] for subscribers that only map objects to
    /// their controller owner: on an update that kept the controller owner,
    /// `old` is `None` (it would map to the same owner), so the previous
    /// state need not be decoded. Deletions and owner changes still carry it.
    pub fn subscribe_owners(
        self: &Arc<Self>,
        f: impl Fn(&Change<'_>) + Send + Sync + 'static,
    ) -> Subscription {
        self.subscribe_with(f, OldState::WhenOwnerChanges)
    }

    fn subscribe_with(
        self: &Arc<Self>,
        f: impl Fn(&Change<'_>) + Send + Sync + 'static,
        old: OldState,
    ) -> Subscription {
        let id = {
            let mut n = self.next_sub.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        self.subscribers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, Arc::new(f), old));
        Subscription {
            cache: Arc::downgrade(self),
            id,
        }
    }

    fn subscribers(&self) -> Vec<(Subscriber, OldState)> {
        self.subscribers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, s, old)| (s.clone(), *old))
            .collect()
    }

    fn notify(
        subs: &[(Subscriber, OldState)],
        old: Option<&DynamicObject>,
        new: Option<&DynamicObject>,
    ) {
        let change = Change { old, new };
        for (s, _) in subs {
            s(&change);
        }
    }

    /// Encodes an object from the watch; an object that cannot be encoded
    /// (never seen: it was just decoded from JSON) is logged and skipped.
    fn encode(&self, obj: &DynamicObject) -> Option<Entry> {
        match Entry::encode(obj) {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::error!(kind = %self.ar.kind, error = %e, "watched object does not encode; skipped");
                None
            }
        }
    }

    /// Applies one watcher event to the store and notifies subscribers.
    /// `relist` buffers the objects of an in-progress relist. Old states are
    /// decoded only when someone subscribed.
    fn handle(&self, ev: Event<DynamicObject>, relist: &mut Option<Relist>) {
        match ev {
            Event::Apply(o) => self.applied(&o),
            Event::Delete(o) => {
                let old = self.write().remove(&key_of(&o));
                let subs = self.subscribers();
                if !subs.is_empty() {
                    let old = old.and_then(|e| self.decode(&e));
                    Self::notify(&subs, Some(old.as_ref().unwrap_or(&o)), None);
                }
            }
            Event::Init => *relist = Some(Relist::new()),
            Event::InitApply(o) => {
                let Some(buf) = relist.as_mut() else { return };
                let Some(entry) = self.encode(&o) else { return };
                let key = key_of(&o);
                // The store does not change during a relist (this task is its
                // only writer), so "unchanged" can be decided now.
                let st = self.read();
                let (key, entry) = match st.shared_key(&key) {
                    Some(k) if st.get(&k).is_some_and(|e| e.same_as(&entry)) => (k, None),
                    Some(k) => (k, Some(entry)),
                    None => (Arc::new(key), Some(entry)),
                };
                drop(st);
                buf.insert(key, entry);
            }
            Event::InitDone => self.relisted(relist.take().unwrap_or_default()),
        }
    }

    /// An object added or changed: stored, and the subscribers told (with
    /// the old state decoded only for those that want it).
    fn applied(&self, o: &DynamicObject) {
        let Some(entry) = self.encode(o) else { return };
        let old = self.write().insert(key_of(o), entry);
        let subs = self.subscribers();
        if subs.is_empty() {
            return;
        }
        let same_owner = old.as_ref().is_some_and(|e| e.owner() == controller_uid(o));
        let skip = |want: OldState| same_owner && want == OldState::WhenOwnerChanges;
        let decoded = match subs.iter().all(|(_, want)| skip(*want)) {
            true => None,
            false => old.and_then(|e| self.decode(&e)),
        };
        for (s, want) in &subs {
            let old = if skip(*want) { None } else { decoded.as_ref() };
            s(&Change { old, new: Some(o) });
        }
    }

    /// A relist finished: the store becomes the listed objects (the ones not
    /// listed are removed), it counts as synced, and the subscribers hear of
    /// every difference.
    fn relisted(&self, buf: Relist) {
        let mut changes: Vec<(Option<Entry>, Option<Entry>)> = Vec::new();
        {
            let mut st = self.write();
            let gone: Vec<Arc<ObjectKey>> = st
                .shared_keys()
                .filter(|k| !buf.contains_key(&***k))
                .cloned()
                .collect();
            for k in gone {
                if let Some(old) = st.remove(&k) {
                    changes.push((Some(old), None));
                }
            }
            for (k, entry) in buf {
                if let Some(new) = entry {
                    let old = st.insert_shared(k, new.clone());
                    changes.push((old, Some(new)));
                }
            }
        }
        self.synced_tx.send_replace(true);
        let subs = self.subscribers();
        if subs.is_empty() {
            return;
        }
        // One object decoded at a time: never the whole list at once.
        for (old, new) in changes {
            let old = old.and_then(|e| self.decode(&e));
            let new = new.and_then(|e| self.decode(&e));
            Self::notify(&subs, old.as_ref(), new.as_ref());
        }
    }
}

/// Hands out the one [`KindCache`] per resource, starting its watch on first use.
pub struct CacheRegistry {
    client: kube::Client,
    caches: Mutex<HashMap<(String, String, String), Weak<KindCache>>>,
    /// Set in a sharded `run` that narrows its caches ([`narrow`]).
    narrowing: Option<Mutex<narrow::Narrowing>>,
}

impl CacheRegistry {
    /// A registry that watches through `client`, every object of each kind.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            caches: Mutex::new(HashMap::new()),
            narrowing: None,
        }
    }

    /// A registry whose parent and child caches watch only the shard
    /// buckets given to [`CacheRegistry::narrow_to`] (none until then), and
    /// that labels the parents without a valid bucket label when `admission`
    /// admits them ([`crate::shard_label`]).
    pub fn narrowed(client: kube::Client, admission: Arc<dyn Admission>) -> Self {
        Self {
            narrowing: Some(Mutex::new(narrow::Narrowing::new(admission))),
            ..Self::new(client)
        }
    }

    /// True when parent and child caches are narrowed to shard buckets.
    pub fn is_narrowing(&self) -> bool {
        self.narrowing.is_some()
    }

    /// The cache for `ar`, shared with every other holder.
    pub fn get(&self, ar: &ApiResource) -> Arc<KindCache> {
        self.get_for(ar, Use::Other)
    }

    /// The cache for `ar` used as `role`: with narrowing on, a kind used
    /// only as parents or only as children is narrowed to the buckets.
    pub fn get_for(&self, ar: &ApiResource, role: Use) -> Arc<KindCache> {
        let id = (ar.group.clone(), ar.version.clone(), ar.plural.clone());
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        let (want, labeller) = match &self.narrowing {
            Some(n) => {
                let mut n = n.lock().unwrap_or_else(|e| e.into_inner());
                (n.register(&id, role), n.labeller(role))
            }
            None => (None, None),
        };
        if let Some(c) = caches.get(&id).and_then(Weak::upgrade) {
            // A kind that stops qualifying (a second use) widens for good.
            c.want.send_if_modified(|w| {
                let widen = w.is_some() && want.is_none();
                if widen {
                    *w = None;
                }
                widen
            });
            return c;
        }
        caches.retain(|_, w| w.strong_count() > 0);
        let cache = KindCache::with_selector(ar.clone(), want);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), ar);
        let mut tasks = vec![tokio::spawn(watch_kind(
            api,
            Arc::downgrade(&cache),
            cache.want.subscribe(),
        ))];
        if let Some(admission) = labeller {
            tasks.push(crate::shard_label::spawn(
                self.client.clone(),
                &cache,
                admission,
            ));
        }
        *cache.task.lock().unwrap_or_else(|e| e.into_inner()) = tasks;
        caches.insert(id, Arc::downgrade(&cache));
        cache
    }

    /// Narrows every narrowed cache to `buckets` and resolves once each has
    /// listed them: what was gained is cached, what was lost has left.
    /// Nothing to do without narrowing.
    pub async fn narrow_to(&self, buckets: &[u32]) {
        let Some(n) = &self.narrowing else { return };
        let selector = crate::shard_bucket::selector(buckets);
        let narrowed: Vec<Arc<KindCache>> = {
            let caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
            n.lock().unwrap_or_else(|e| e.into_inner()).selector = selector.clone();
            caches
                .values()
                .filter_map(Weak::upgrade)
                .filter(|c| c.is_narrowed())
                .collect()
        };
        for c in &narrowed {
            c.want.send_if_modified(|w| match w {
                Some(s) if *s != selector => {
                    *s = selector.clone();
                    true
                }
                _ => false,
            });
        }
        for c in narrowed {
            c.wait_listed_as_wanted().await;
        }
    }

    /// Objects held per live cache, by kind (a gauge: what a replica caches).
    pub fn sizes(&self) -> Vec<(String, usize)> {
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(Weak::upgrade)
            .map(|c| (c.ar.kind.clone(), c.len()))
            .collect()
    }

    /// Why the watch of `plural` in `group` fails, if one is live and failing.
    pub fn failing(&self, group: &str, plural: &str) -> Option<WatchFailure> {
        let caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        caches
            .iter()
            .filter(|((g, _, p), _)| g == group && p == plural)
            .find_map(|(_, w)| w.upgrade()?.failing())
    }

    /// Number of live caches (each one is one watch).
    pub fn live(&self) -> usize {
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

/// One kind's watch: kube-runtime's watcher with the selector the cache
/// wants, restarted (a fresh list, applied as a relist) whenever that
/// selector changes. Ends when the cache is dropped.
async fn watch_kind(
    api: Api<DynamicObject>,
    weak: Weak<KindCache>,
    mut want: watch::Receiver<Option<String>>,
) {
    let kind = api.resource_url().to_string();
    loop {
        let selector = want.borrow_and_update().clone();
        let mut config = watcher::Config::default().page_size(LIST_PAGE_SIZE);
        if let Some(s) = &selector {
            config = config.labels(s);
        }
        let mut stream = watcher::watcher(api.clone(), config)
            .modify(strip_managed_fields)
            .default_backoff()
            .boxed();
        let mut relist = None;
        loop {
            tokio::select! {
                item = stream.next() => {
                    let Some(item) = item else { return };
                    let Some(cache) = weak.upgrade() else { return };
                    match item {
                        Ok(ev) => {
                            cache.watch_ok();
                            let done = matches!(ev, Event::InitDone);
                            cache.handle(ev, &mut relist);
                            if done {
                                cache.listed.send_replace(Some(selector.clone()));
                            }
                        }
                        Err(e) => cache.watch_failed(&e),
                    }
                }
                changed = want.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if *want.borrow() != selector {
                        tracing::info!(kind = %kind, selector = want.borrow().as_deref().unwrap_or(""), "watch selector changed; listing anew");
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn ar() -> ApiResource {
        ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        }
    }

    fn cm(name: &str, rv: &str, owner: Option<&str>) -> DynamicObject {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "x/v1", "kind": "P", "name": "p", "uid": o, "controller": true}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn managed_fields_are_stripped_and_the_rest_kept() {
        let mut o = cm("a", "1", Some("u1"));
        o.metadata.managed_fields = Some(vec![Default::default()]);
        o.data = json!({"data": {"k": "v"}});
        strip_managed_fields(&mut o);
        assert!(o.metadata.managed_fields.is_none());
        assert_eq!(o.metadata.resource_version.as_deref(), Some("1"));
        assert_eq!(controller_uid(&o), Some("u1"));
        assert_eq!(o.data["data"]["k"], "v");
    }

    #[test]
    fn owner_index_follows_updates_and_deletes() {
        let c = KindCache::new(ar());
        let mut relist = None;
        c.handle(Event::Apply(cm("a", "1", Some("u1"))), &mut relist);
        c.handle(Event::Apply(cm("b", "2", Some("u1"))), &mut relist);
        assert_eq!(c.owned_by("u1").len(), 2);
        c.handle(Event::Apply(cm("a", "3", Some("u2"))), &mut relist);
        assert_eq!(c.owned_by("u1").len(), 1);
        assert_eq!(c.owned_by("u2").len(), 1);
        c.handle(Event::Delete(cm("b", "4", Some("u1"))), &mut relist);
        assert!(c.owned_by("u1").is_empty());
        assert_eq!(c.in_namespace(Some("ns")).len(), 1);
    }

    #[test]
    fn relist_notifies_deletions_and_changes_only() {
        let c = KindCache::new(ar());
        let seen = Arc::new(AtomicUsize::new(0));
        let deleted = Arc::new(AtomicUsize::new(0));
        let (s2, d2) = (seen.clone(), deleted.clone());
        let _sub = c.subscribe(move |ch| {
            s2.fetch_add(1, Ordering::SeqCst);
            if ch.new.is_none() {
                d2.fetch_add(1, Ordering::SeqCst);
            }
        });
        let mut relist = None;
        for ev in [
            Event::Init,
            Event::InitApply(cm("a", "1", None)),
            Event::InitApply(cm("b", "1", None)),
            Event::InitDone,
        ] {
            c.handle(ev, &mut relist);
        }
        assert!(c.is_synced());
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        for ev in [
            Event::Init,
            Event::InitApply(cm("a", "1", None)),
            Event::InitDone,
        ] {
            c.handle(ev, &mut relist);
        }
        assert_eq!(c.len(), 1);
        assert_eq!(
            seen.load(Ordering::SeqCst),
            3,
            "unchanged `a` is not re-notified"
        );
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn dropped_subscription_stops_notifications() {
        let c = KindCache::new(ar());
        let seen = Arc::new(AtomicUsize::new(0));
        let s2 = seen.clone();
        let sub = c.subscribe(move |_| {
            s2.fetch_add(1, Ordering::SeqCst);
        });
        let mut relist = None;
        c.handle(Event::Apply(cm("a", "1", None)), &mut relist);
        drop(sub);
        c.handle(Event::Apply(cm("a", "2", None)), &mut relist);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    /// (old resourceVersion, new resourceVersion) of each change seen.
    type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

    /// Records every change as (old resourceVersion, new resourceVersion).
    fn recorder(c: &Arc<KindCache>) -> (Subscription, Seen) {
        let seen: Seen = Arc::default();
        let s2 = seen.clone();
        let rv = |o: Option<&DynamicObject>| o.and_then(|o| o.metadata.resource_version.clone());
        let sub = c.subscribe(move |ch| s2.lock().unwrap().push((rv(ch.old), rv(ch.new))));
        (sub, seen)
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn get_decodes_the_object_that_was_stored() {
        let c = KindCache::new(ar());
        let mut o = cm("a", "1", Some("u1"));
        o.data = json!({"data": {"z": "1", "a": "2"}, "binaryData": {"b": "AAEC"}});
        o.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        let mut with_mf = o.clone();
        with_mf.metadata.managed_fields = Some(vec![Default::default()]);
        strip_managed_fields(&mut with_mf);
        c.handle(Event::Apply(with_mf), &mut None);
        let key = ObjectKey::new(Some("ns"), "a");
        assert_eq!(*c.get(&key).unwrap(), o);
        assert_eq!(*c.owned_by("u1")[0], o);
        assert_eq!(*c.in_namespace(Some("ns"))[0], o);
        assert_eq!(c.keys(), std::slice::from_ref(&key));
        assert_eq!(c.keys_in_namespace(Some("ns")), [key]);
        assert!(c.keys_in_namespace(Some("other")).is_empty());
        assert_eq!(c.json_bytes(), serde_json::to_vec(&o).unwrap().len());
    }

    #[test]
    fn updates_and_deletes_notify_the_previous_state() {
        let c = KindCache::new(ar());
        let (_sub, seen) = recorder(&c);
        let mut relist = None;
        c.handle(Event::Apply(cm("a", "1", None)), &mut relist);
        c.handle(Event::Apply(cm("a", "2", None)), &mut relist);
        // The delete event carries the last state the server had; the old state
        // reported is the cached one.
        c.handle(Event::Delete(cm("a", "3", None)), &mut relist);
        // A delete of something never cached still notifies, with the event's object.
        c.handle(Event::Delete(cm("x", "9", None)), &mut relist);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (None, some("1")),
                (some("1"), some("2")),
                (some("2"), None),
                (some("9"), None)
            ]
        );
        assert!(c.is_empty());
        assert_eq!(c.json_bytes(), 0);
    }

    #[test]
    fn relist_applies_changes_and_deletions_atomically_at_the_end() {
        let c = KindCache::new(ar());
        let mut relist = None;
        for ev in [
            Event::Init,
            Event::InitApply(cm("keep", "1", Some("u1"))),
            Event::InitApply(cm("change", "1", Some("u1"))),
            Event::InitApply(cm("gone", "1", Some("u1"))),
            Event::InitDone,
        ] {
            c.handle(ev, &mut relist);
        }
        let (_sub, seen) = recorder(&c);
        c.handle(Event::Init, &mut relist);
        c.handle(Event::InitApply(cm("keep", "1", Some("u1"))), &mut relist);
        c.handle(Event::InitApply(cm("change", "5", Some("u2"))), &mut relist);
        c.handle(Event::InitApply(cm("new", "5", None)), &mut relist);
        // Until the relist is complete, readers see the previous state.
        assert_eq!(c.owned_by("u1").len(), 3);
        assert!(c.get(&ObjectKey::new(Some("ns"), "new")).is_none());
        assert!(seen.lock().unwrap().is_empty());
        c.handle(Event::InitDone, &mut relist);

        let mut got = seen.lock().unwrap().clone();
        got.sort();
        assert_eq!(
            got,
            [(None, some("5")), (some("1"), None), (some("1"), some("5"))]
        );
        let mut keys = c.keys();
        keys.sort();
        assert_eq!(
            keys,
            [
                ObjectKey::new(Some("ns"), "change"),
                ObjectKey::new(Some("ns"), "keep"),
                ObjectKey::new(Some("ns"), "new")
            ]
        );
        assert_eq!(c.owned_by("u1").len(), 1);
        assert_eq!(c.owned_by("u2").len(), 1);
        assert_eq!(
            c.get(&ObjectKey::new(Some("ns"), "change"))
                .unwrap()
                .metadata
                .resource_version
                .as_deref(),
            Some("5")
        );
    }

    #[test]
    fn get_as_decodes_only_the_fields_asked_for() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct Meta {
            name: String,
            #[serde(rename = "resourceVersion")]
            resource_version: String,
        }
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct Partial {
            metadata: Meta,
        }
        let c = KindCache::new(ar());
        c.handle(Event::Apply(cm("a", "7", Some("u1"))), &mut None);
        let got: Partial = c.get_as(&ObjectKey::new(Some("ns"), "a")).unwrap();
        assert_eq!(got.metadata.name, "a");
        assert_eq!(got.metadata.resource_version, "7");
        assert!(
            c.get_as::<Partial>(&ObjectKey::new(Some("ns"), "b"))
                .is_none()
        );
    }

    #[test]
    fn owner_subscribers_get_the_old_state_only_when_the_owner_changed() {
        let c = KindCache::new(ar());
        let (_all, all) = recorder(&c);
        let seen: Seen = Arc::default();
        let s2 = seen.clone();
        let rv = |o: Option<&DynamicObject>| o.and_then(|o| o.metadata.resource_version.clone());
        let _owners =
            c.subscribe_owners(move |ch| s2.lock().unwrap().push((rv(ch.old), rv(ch.new))));
        let mut relist = None;
        c.handle(Event::Apply(cm("a", "1", Some("u1"))), &mut relist);
        c.handle(Event::Apply(cm("a", "2", Some("u1"))), &mut relist);
        c.handle(Event::Apply(cm("a", "3", Some("u2"))), &mut relist);
        c.handle(Event::Apply(cm("a", "4", None)), &mut relist);
        c.handle(Event::Delete(cm("a", "5", None)), &mut relist);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (None, some("1")),
                (None, some("2")),
                (some("2"), some("3")),
                (some("3"), some("4")),
                (some("4"), None)
            ]
        );
        // Plain subscribers still see every previous state.
        assert_eq!(all.lock().unwrap()[1], (some("1"), some("2")));
    }

    #[test]
    fn an_unchanged_relist_buffers_keys_only() {
        let c = KindCache::new(ar());
        let mut relist = None;
        c.handle(Event::Apply(cm("a", "1", None)), &mut relist);
        c.handle(Event::Init, &mut relist);
        c.handle(Event::InitApply(cm("a", "1", None)), &mut relist);
        c.handle(Event::InitApply(cm("b", "1", None)), &mut relist);
        let buf = relist.as_ref().unwrap();
        assert!(buf[&ObjectKey::new(Some("ns"), "a")].is_none());
        assert!(buf[&ObjectKey::new(Some("ns"), "b")].is_some());
    }
}
