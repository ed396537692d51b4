//! The compact object store behind a [`KindCache`](super::KindCache).
//!
//! Each object is kept as its compact JSON text (`managedFields` already
//! stripped) in one shared byte slice, plus the one field the indexes need,
//! extracted once: the controller owner uid. Keys are shared (`Arc`) between
//! the object map and the indexes, and an owner uid is shared between its
//! objects and the index entry, so an object costs its JSON bytes plus a few
//! dozen bytes of bookkeeping.
//!
//! Why bytes and not decoded objects: a `DynamicObject` is a `serde_json::Value`
//! tree (with `preserve_order`, an `IndexMap` per JSON object and a heap
//! allocation per key and string) that takes several times its JSON size; at
//! 10,000 parents × 3 children that tree cache was most of the host's memory.
//! Readers decode on read instead ([`Entry::decode`]); a reconcile decodes its
//! parent and its few children, which costs microseconds next to a plugin call.
//! Byte slices are reference counted, so readers copy a pointer under the lock
//! and decode after releasing it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::api::DynamicObject;

use crate::apply::controller_uid;
use crate::queue::ObjectKey;

/// One cached object: its JSON text and its controller owner uid.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    json: Arc<[u8]>,
    owner: Option<Arc<str>>,
}

impl Entry {
    /// Encodes `obj` (callers strip `managedFields` first).
    pub(crate) fn encode(obj: &DynamicObject) -> Result<Self, serde_json::Error> {
        Ok(Self {
            json: serde_json::to_vec(obj)?.into(),
            owner: controller_uid(obj).map(Arc::from),
        })
    }

    /// The object, decoded from the stored JSON.
    pub(crate) fn decode(&self) -> Result<DynamicObject, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// Only the fields of `T` decoded from the stored JSON (serde skips the
    /// rest without building it): for readers that need one field of many
    /// objects.
    pub(crate) fn decode_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// The controller owner's uid, if any.
    pub(crate) fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// True when both hold the same JSON text (same resourceVersion and content).
    pub(crate) fn same_as(&self, other: &Entry) -> bool {
        Arc::ptr_eq(&self.json, &other.json) || self.json == other.json
    }

    /// Size of the stored JSON text.
    pub(crate) fn json_len(&self) -> usize {
        self.json.len()
    }
}

/// Objects by key, plus an index by controller owner uid and one by namespace,
/// always updated together.
#[derive(Default)]
pub(crate) struct Store {
    objects: HashMap<Arc<ObjectKey>, Entry>,
    by_owner: HashMap<Arc<str>, HashSet<Arc<ObjectKey>>>,
    by_namespace: HashMap<Box<str>, HashSet<Arc<ObjectKey>>>,
    json_bytes: usize,
}

impl Store {
    /// The stored key equal to `key`, if any (to share it instead of copying).
    pub(crate) fn shared_key(&self, key: &ObjectKey) -> Option<Arc<ObjectKey>> {
        self.objects.get_key_value(key).map(|(k, _)| k.clone())
    }

    /// Inserts or replaces; returns the previous entry.
    pub(crate) fn insert(&mut self, key: ObjectKey, entry: Entry) -> Option<Entry> {
        let key = self.shared_key(&key).unwrap_or_else(|| Arc::new(key));
        self.insert_shared(key, entry)
    }

    /// [`Store::insert`] with a key that may already be shared.
    pub(crate) fn insert_shared(&mut self, key: Arc<ObjectKey>, mut entry: Entry) -> Option<Entry> {
        let old = self.objects.remove(&*key);
        if let Some(o) = &old {
            self.unindex(&key, o);
        }
        self.index(&key, &mut entry);
        self.objects.insert(key, entry);
        old
    }

    /// Removes; returns the removed entry.
    pub(crate) fn remove(&mut self, key: &ObjectKey) -> Option<Entry> {
        let (k, old) = self.objects.remove_entry(key)?;
        self.unindex(&k, &old);
        Some(old)
    }

    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Entry> {
        self.objects.get(key)
    }

    /// Entries whose controller owner has `uid`.
    pub(crate) fn owned_by(&self, uid: &str) -> Vec<Entry> {
        self.collect(self.by_owner.get(uid))
    }

    /// Entries in a namespace (`None`: every entry).
    pub(crate) fn in_namespace(&self, ns: Option<&str>) -> Vec<Entry> {
        match ns {
            Some(ns) => self.collect(self.by_namespace.get(ns)),
            None => self.objects.values().cloned().collect(),
        }
    }

    /// Keys in a namespace (`None`: every key).
    pub(crate) fn keys_in_namespace(&self, ns: Option<&str>) -> Vec<ObjectKey> {
        match ns {
            Some(ns) => self
                .by_namespace
                .get(ns)
                .map(|keys| keys.iter().map(|k| (**k).clone()).collect())
                .unwrap_or_default(),
            None => self.objects.keys().map(|k| (**k).clone()).collect(),
        }
    }

    /// Every key, shared.
    pub(crate) fn shared_keys(&self) -> impl Iterator<Item = &Arc<ObjectKey>> {
        self.objects.keys()
    }

    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    /// Total size of the stored JSON text.
    pub(crate) fn json_bytes(&self) -> usize {
        self.json_bytes
    }

    fn collect(&self, keys: Option<&HashSet<Arc<ObjectKey>>>) -> Vec<Entry> {
        keys.map(|keys| {
            keys.iter()
                .filter_map(|k| self.objects.get(&**k).cloned())
                .collect()
        })
        .unwrap_or_default()
    }

    fn index(&mut self, key: &Arc<ObjectKey>, entry: &mut Entry) {
        self.json_bytes += entry.json_len();
        if let Some(uid) = entry.owner.take() {
            // One copy of each owner uid: the index key, shared by its objects.
            let uid = match self.by_owner.get_key_value(&*uid) {
                Some((shared, _)) => shared.clone(),
                None => uid,
            };
            self.by_owner
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
            entry.owner = Some(uid);
        }
        if let Some(ns) = &key.namespace {
            match self.by_namespace.get_mut(ns.as_str()) {
                Some(set) => {
                    set.insert(key.clone());
                }
                None => {
                    self.by_namespace
                        .insert(ns.as_str().into(), HashSet::from([key.clone()]));
                }
            }
        }
    }

    fn unindex(&mut self, key: &ObjectKey, entry: &Entry) {
        self.json_bytes -= entry.json_len();
        if let Some(uid) = &entry.owner
            && let Some(set) = self.by_owner.get_mut(&**uid)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_owner.remove(&**uid);
            }
        }
        if let Some(ns) = &key.namespace
            && let Some(set) = self.by_namespace.get_mut(ns.as_str())
        {
            set.remove(key);
            if set.is_empty() {
                self.by_namespace.remove(ns.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str, rv: &str, owner: Option<&str>) -> DynamicObject {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv,
                         "labels": {"app": "web"}},
            "data": {"z": "last", "a": "first"}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([
                {"apiVersion": "x/v1", "kind": "P", "name": "other", "uid": "not-controller"},
                {"apiVersion": "x/v1", "kind": "P", "name": "p", "uid": o, "controller": true}]);
        }
        serde_json::from_value(v).unwrap()
    }

    fn put(st: &mut Store, o: &DynamicObject) -> Option<Entry> {
        st.insert(crate::cache::key_of(o), Entry::encode(o).unwrap())
    }

    fn names(entries: Vec<Entry>) -> Vec<String> {
        let mut v: Vec<String> = entries
            .iter()
            .map(|e| e.decode().unwrap().metadata.name.unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn decoding_returns_the_stored_object() {
        let o = obj("ns", "a", "7", Some("u1"));
        let e = Entry::encode(&o).unwrap();
        let back = e.decode().unwrap();
        assert_eq!(back, o);
        // Key order inside objects survives (plugins may see it).
        let keys: Vec<&String> = back.data["data"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a"]);
        assert_eq!(e.json_len(), serde_json::to_vec(&o).unwrap().len());
    }

    #[test]
    fn indexes_follow_insert_update_and_delete() {
        let mut st = Store::default();
        assert!(put(&mut st, &obj("ns", "a", "1", Some("u1"))).is_none());
        put(&mut st, &obj("ns", "b", "1", Some("u1")));
        put(&mut st, &obj("other", "c", "1", None));
        assert_eq!(names(st.owned_by("u1")), ["a", "b"]);
        assert_eq!(names(st.in_namespace(Some("ns"))), ["a", "b"]);
        assert_eq!(names(st.in_namespace(None)), ["a", "b", "c"]);
        assert!(
            st.owned_by("not-controller").is_empty(),
            "only the controller owner is indexed"
        );

        // Update: `a` changes owner and namespace index stays right.
        let old = put(&mut st, &obj("ns", "a", "2", Some("u2"))).unwrap();
        assert_eq!(
            old.decode().unwrap().metadata.resource_version.as_deref(),
            Some("1")
        );
        assert_eq!(names(st.owned_by("u1")), ["b"]);
        assert_eq!(names(st.owned_by("u2")), ["a"]);
        assert_eq!(st.len(), 3);

        // Delete: empty index entries go away.
        let gone = st.remove(&ObjectKey::new(Some("ns"), "b")).unwrap();
        assert_eq!(gone.decode().unwrap().metadata.name.as_deref(), Some("b"));
        assert!(st.owned_by("u1").is_empty());
        assert!(!st.by_owner.contains_key("u1"));
        st.remove(&ObjectKey::new(Some("other"), "c"));
        assert!(!st.by_namespace.contains_key("other"));
        assert!(st.remove(&ObjectKey::new(Some("other"), "c")).is_none());
        assert_eq!(
            st.keys_in_namespace(Some("ns")),
            [ObjectKey::new(Some("ns"), "a")]
        );
        assert_eq!(st.len(), 1);
    }

    #[test]
    fn byte_count_follows_the_stored_text() {
        let mut st = Store::default();
        let (a, b) = (obj("ns", "a", "1", None), obj("ns", "b", "1", Some("u")));
        put(&mut st, &a);
        put(&mut st, &b);
        let size = |o: &DynamicObject| serde_json::to_vec(o).unwrap().len();
        assert_eq!(st.json_bytes(), size(&a) + size(&b));
        let a2 = obj("ns", "a", "12345", None);
        put(&mut st, &a2);
        assert_eq!(st.json_bytes(), size(&a2) + size(&b));
        st.remove(&ObjectKey::new(Some("ns"), "b"));
        assert_eq!(st.json_bytes(), size(&a2));
    }

    #[test]
    fn keys_and_owner_uids_are_shared_not_copied() {
        let mut st = Store::default();
        put(&mut st, &obj("ns", "a", "1", Some("u1")));
        put(&mut st, &obj("ns", "b", "1", Some("u1")));
        put(&mut st, &obj("ns", "a", "2", Some("u1")));
        let (uid, _) = st.by_owner.get_key_value("u1").unwrap();
        for e in st.objects.values() {
            assert!(Arc::ptr_eq(uid, e.owner.as_ref().unwrap()));
        }
        let key = st.shared_key(&ObjectKey::new(Some("ns"), "a")).unwrap();
        // The map, the owner index and the namespace index hold one key.
        assert_eq!(Arc::strong_count(&key), 4);
    }

    #[test]
    fn same_as_compares_content() {
        let a1 = Entry::encode(&obj("ns", "a", "1", None)).unwrap();
        let a1b = Entry::encode(&obj("ns", "a", "1", None)).unwrap();
        let a2 = Entry::encode(&obj("ns", "a", "2", None)).unwrap();
        assert!(a1.same_as(&a1b));
        assert!(!a1.same_as(&a2));
    }
}
