//! Puts the shard bucket label on parents (issue 19), so that the replica
//! owning a parent's bucket sees it in its narrowed watch
//! ([`crate::cache::narrow`]).
//!
//! Users create parents without the label, and may remove or change it. Per
//! narrowed parent kind, every replica runs one more watch, of the parents a
//! narrowed watch cannot see (`LABEL notin (0,…,63)`: no label or not a
//! bucket number; normally empty or a handful of new parents), and labels
//! those the shard gate admits (their bucket is this replica's) with a merge
//! patch, holding the gate's ticket so a handover waits for the write. A
//! parent whose label is a valid but *wrong* bucket is in the cache of
//! whichever replica owns that wrong bucket, and only that replica can see
//! it: it corrects the label without a ticket — the only write a replica
//! makes to a parent it does not own, one label, after which the parent
//! leaves its cache for its owner's.
//!
//! A parent is unreconciled from its creation (or from the user's label
//! edit) until its owner's next tick ([`TICK`]) labels it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::time::Instant;

use crate::admission::Admission;
use crate::cache::{KindCache, LIST_PAGE_SIZE, key_of};
use crate::queue::ObjectKey;
use crate::shard_bucket::{LABEL, bucket_of_key, label_value, labelled_bucket, outside_selector};

/// Scope of the label writes in [`Admission::enter`].
pub const SCOPE: &str = "shard-labels";
/// Field manager of the label writes.
pub const FIELD_MANAGER: &str = "wasm-reconciler/shard-labels";
/// How often pending parents are looked at (a replica may gain a bucket
/// with unlabelled parents in it at any time).
pub const TICK: Duration = Duration::from_secs(1);
/// How long after a failed write the parent is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Label writes in flight at once per kind.
const CONCURRENT_WRITES: usize = 8;

/// Parents waiting for a label: when last tried (`None`: not yet).
#[derive(Default)]
struct Pending {
    /// Seen by the watch of unlabelled parents.
    unlabelled: HashMap<ObjectKey, Option<Instant>>,
    /// In the narrowed cache with another bucket's label.
    wrong: HashMap<ObjectKey, Option<Instant>>,
}

impl Pending {
    /// The parents to try now, each with whether it needs the gate.
    fn due(&mut self, now: Instant) -> Vec<(ObjectKey, bool)> {
        let mut out = Vec::new();
        for (set, gated) in [(&mut self.unlabelled, true), (&mut self.wrong, false)] {
            for (k, tried) in set.iter_mut() {
                if tried.is_none_or(|t| now.duration_since(t) >= RETRY_AFTER) {
                    *tried = Some(now);
                    out.push((k.clone(), gated));
                }
            }
        }
        out
    }
}

type Shared = Arc<Mutex<Pending>>;

fn lock(p: &Shared) -> std::sync::MutexGuard<'_, Pending> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts labelling the parents of `cache`'s kind; the task ends when the
/// cache is dropped (it is also aborted then).
pub(crate) fn spawn(
    client: kube::Client,
    cache: &Arc<KindCache>,
    admission: Arc<dyn Admission>,
) -> tokio::task::JoinHandle<()> {
    let pending: Shared = Arc::default();
    let p = pending.clone();
    let sub = cache.subscribe(move |ch| {
        let Some(o) = ch.new.or(ch.old) else { return };
        let key = key_of(o);
        let wrong = ch.new.is_some_and(|n| {
            labelled_bucket(n.metadata.labels.as_ref()) != Some(bucket_of_key(&key))
        });
        let mut p = lock(&p);
        if wrong {
            p.wrong.entry(key).or_default();
        } else {
            p.wrong.remove(&key);
        }
    });
    let labeller = Labeller {
        client,
        ar: cache.api_resource().clone(),
        cache: Arc::downgrade(cache),
        admission,
        pending,
    };
    tokio::spawn(async move {
        let _sub = sub;
        labeller.run().await;
    })
}

struct Labeller {
    client: kube::Client,
    ar: ApiResource,
    cache: Weak<KindCache>,
    admission: Arc<dyn Admission>,
    pending: Shared,
}

impl Labeller {
    async fn run(self) {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.ar);
        let config = watcher::Config::default()
            .labels(&outside_selector())
            .page_size(LIST_PAGE_SIZE);
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                item = stream.next() => match item {
                    None => return,
                    Some(Ok(ev)) => self.seen(ev),
                    Some(Err(e)) => {
                        tracing::warn!(kind = %self.ar.kind, error = %e, "watch of unlabelled parents failed; retrying with backoff");
                    }
                },
                _ = tick.tick() => {
                    let Some(cache) = self.cache.upgrade() else { return };
                    // A kind that widened needs no labels (and a child
                    // label on it must not be "corrected").
                    if cache.is_narrowed() {
                        drop(cache);
                        self.label_due().await;
                    }
                }
            }
        }
    }

    fn seen(&self, ev: Event<DynamicObject>) {
        let mut p = lock(&self.pending);
        match ev {
            Event::Apply(o) | Event::InitApply(o) => {
                p.unlabelled.entry(key_of(&o)).or_default();
            }
            Event::Delete(o) => {
                p.unlabelled.remove(&key_of(&o));
            }
            Event::Init | Event::InitDone => {}
        }
    }

    async fn label_due(&self) {
        let due = lock(&self.pending).due(Instant::now());
        futures::stream::iter(due)
            .for_each_concurrent(CONCURRENT_WRITES, |(key, gated)| async move {
                let ticket = match gated {
                    true => match self.admission.enter(SCOPE, &key) {
                        Some(t) => Some(t),
                        None => return,
                    },
                    false => None,
                };
                let done = self.label(&key).await;
                drop(ticket);
                if done {
                    let mut p = lock(&self.pending);
                    p.unlabelled.remove(&key);
                    p.wrong.remove(&key);
                }
            })
            .await;
    }

    /// Writes the bucket label; true when done (or the parent is gone).
    async fn label(&self, key: &ObjectKey) -> bool {
        let bucket = label_value(bucket_of_key(key));
        let api: Api<DynamicObject> = match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.ar),
            None => Api::all_with(self.client.clone(), &self.ar),
        };
        let patch = json!({"metadata": {"labels": {LABEL: bucket}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api.patch(&key.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {
                tracing::debug!(kind = %self.ar.kind, parent = %key, bucket = %bucket, "labelled the parent with its shard bucket");
                true
            }
            Err(kube::Error::Api(e)) if e.code == 404 => true,
            Err(e) => {
                tracing::warn!(kind = %self.ar.kind, parent = %key, error = %e, "labelling the parent with its shard bucket failed; retrying");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pending_parents_are_retried_only_after_the_retry_delay() {
        let mut p = Pending::default();
        let k = ObjectKey::new(Some("ns"), "a");
        p.unlabelled.insert(k.clone(), None);
        p.wrong.insert(ObjectKey::new(Some("ns"), "b"), None);
        let now = Instant::now();
        let first = p.due(now);
        assert_eq!(first.len(), 2);
        assert!(first.contains(&(k.clone(), true)), "unlabelled: gated");
        assert!(p.due(now + Duration::from_secs(1)).is_empty());
        assert_eq!(p.due(now + RETRY_AFTER).len(), 2);
    }
}
