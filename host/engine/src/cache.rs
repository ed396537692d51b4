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
//! Caches are reference counted: the [`CacheRegistry`] holds weak references and
//! a cache's watch task stops when the last controller holding it is stopped.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use crate::apply::controller_uid;
use crate::queue::ObjectKey;

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
type ObjPair = (Option<Arc<DynamicObject>>, Option<Arc<DynamicObject>>);

#[derive(Default)]
struct Store {
    objects: HashMap<ObjectKey, Arc<DynamicObject>>,
    by_owner: HashMap<String, HashSet<ObjectKey>>,
    by_namespace: HashMap<String, HashSet<ObjectKey>>,
}

impl Store {
    fn insert(&mut self, obj: Arc<DynamicObject>) -> Option<Arc<DynamicObject>> {
        let key = key_of(&obj);
        let old = self.objects.insert(key.clone(), obj.clone());
        if let Some(o) = &old {
            self.unindex(&key, o);
        }
        if let Some(uid) = controller_uid(&obj) {
            self.by_owner
                .entry(uid.to_string())
                .or_default()
                .insert(key.clone());
        }
        if let Some(ns) = &key.namespace {
            self.by_namespace.entry(ns.clone()).or_default().insert(key);
        }
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        let old = self.objects.remove(key)?;
        self.unindex(key, &old);
        Some(old)
    }

    fn unindex(&mut self, key: &ObjectKey, obj: &DynamicObject) {
        if let Some(uid) = controller_uid(obj)
            && let Some(set) = self.by_owner.get_mut(uid)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_owner.remove(uid);
            }
        }
        if let Some(ns) = &key.namespace
            && let Some(set) = self.by_namespace.get_mut(ns)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_namespace.remove(ns);
            }
        }
    }
}

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
    subscribers: RwLock<Vec<(u64, Subscriber)>>,
    next_sub: Mutex<u64>,
    synced_tx: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        if let Ok(mut t) = self.task.lock()
            && let Some(h) = t.take()
        {
            h.abort();
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
            subs.retain(|(id, _)| *id != self.id);
        }
    }
}

impl KindCache {
    fn new(ar: ApiResource) -> Arc<Self> {
        let (synced_tx, _) = watch::channel(false);
        Arc::new(Self {
            ar,
            store: RwLock::new(Store::default()),
            subscribers: RwLock::new(Vec::new()),
            next_sub: Mutex::new(0),
            synced_tx,
            task: Mutex::new(None),
        })
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

    /// Waits until the first full list has been loaded.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced_tx.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// True once the first full list has been loaded.
    pub fn is_synced(&self) -> bool {
        *self.synced_tx.borrow()
    }

    /// One object by key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        self.read().objects.get(key).cloned()
    }

    /// Objects whose controller owner has `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<DynamicObject>> {
        let st = self.read();
        st.by_owner
            .get(uid)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| st.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Objects in a namespace (`None`: every object).
    pub fn in_namespace(&self, ns: Option<&str>) -> Vec<Arc<DynamicObject>> {
        let st = self.read();
        match ns {
            Some(ns) => st
                .by_namespace
                .get(ns)
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| st.objects.get(k).cloned())
                        .collect()
                })
                .unwrap_or_default(),
            None => st.objects.values().cloned().collect(),
        }
    }

    /// Keys of every cached object.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().cloned().collect()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` for every change from now on (from the watch task; keep it cheap
    /// and non-blocking: enqueue keys, nothing more).
    pub fn subscribe(
        self: &Arc<Self>,
        f: impl Fn(&Change<'_>) + Send + Sync + 'static,
    ) -> Subscription {
        let id = {
            let mut n = self.next_sub.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        self.subscribers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, Arc::new(f)));
        Subscription {
            cache: Arc::downgrade(self),
            id,
        }
    }

    fn notify(&self, old: Option<&DynamicObject>, new: Option<&DynamicObject>) {
        let subs: Vec<Subscriber> = self
            .subscribers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        let change = Change { old, new };
        for s in subs {
            s(&change);
        }
    }

    /// Applies one watcher event to the store and notifies subscribers.
    /// `relist` buffers the objects of an in-progress relist.
    fn handle(
        &self,
        ev: Event<DynamicObject>,
        relist: &mut Option<HashMap<ObjectKey, Arc<DynamicObject>>>,
    ) {
        match ev {
            Event::Apply(o) => {
                let new = Arc::new(o);
                let old = self.write().insert(new.clone());
                self.notify(old.as_deref(), Some(&new));
            }
            Event::Delete(o) => {
                let old = self.write().remove(&key_of(&o));
                self.notify(old.as_deref().or(Some(&o)), None);
            }
            Event::Init => *relist = Some(HashMap::new()),
            Event::InitApply(o) => {
                if let Some(buf) = relist.as_mut() {
                    buf.insert(key_of(&o), Arc::new(o));
                }
            }
            Event::InitDone => {
                let buf = relist.take().unwrap_or_default();
                let mut changes: Vec<ObjPair> = Vec::new();
                {
                    let mut st = self.write();
                    let gone: Vec<ObjectKey> = st
                        .objects
                        .keys()
                        .filter(|k| !buf.contains_key(*k))
                        .cloned()
                        .collect();
                    for k in gone {
                        if let Some(old) = st.remove(&k) {
                            changes.push((Some(old), None));
                        }
                    }
                    for (_, obj) in buf {
                        let old = st.insert(obj.clone());
                        let same = old.as_ref().is_some_and(|o| {
                            o.metadata.resource_version == obj.metadata.resource_version
                        });
                        if !same {
                            changes.push((old, Some(obj)));
                        }
                    }
                }
                self.synced_tx.send_replace(true);
                for (old, new) in changes {
                    self.notify(old.as_deref(), new.as_deref());
                }
            }
        }
    }
}

/// Hands out the one [`KindCache`] per resource, starting its watch on first use.
pub struct CacheRegistry {
    client: kube::Client,
    caches: Mutex<HashMap<(String, String, String), Weak<KindCache>>>,
}

impl CacheRegistry {
    /// A registry that watches through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            caches: Mutex::new(HashMap::new()),
        }
    }

    /// The cache for `ar`, shared with every other holder.
    pub fn get(&self, ar: &ApiResource) -> Arc<KindCache> {
        let id = (ar.group.clone(), ar.version.clone(), ar.plural.clone());
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = caches.get(&id).and_then(Weak::upgrade) {
            return c;
        }
        caches.retain(|_, w| w.strong_count() > 0);
        let cache = KindCache::new(ar.clone());
        let weak = Arc::downgrade(&cache);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), ar);
        let kind = ar.kind.clone();
        let handle = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, watcher::Config::default())
                .modify(strip_managed_fields)
                .default_backoff()
                .boxed();
            let mut relist = None;
            while let Some(item) = stream.next().await {
                let Some(cache) = weak.upgrade() else { break };
                match item {
                    Ok(ev) => cache.handle(ev, &mut relist),
                    Err(e) => {
                        tracing::warn!(kind = %kind, error = %e, "watch error; retrying with backoff")
                    }
                }
            }
        });
        *cache.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        caches.insert(id, Arc::downgrade(&cache));
        cache
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
}
