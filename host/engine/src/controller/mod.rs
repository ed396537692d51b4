//! One running controller (one per WasmController): its resolved resources,
//! shared caches, trigger subscriptions, work queue and workers.

pub(crate) mod state;

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use tokio::task::JoinHandle;

use crate::cache::{CacheRegistry, Change, Subscription, Use, key_of};
use crate::crd::{RelatedScope, WasmControllerSpec};
use crate::events::EventRecorder;
use crate::observe::EngineObserver;
use crate::plugin::ReconcilePlugin;
use crate::queue::{Backoff, ObjectKey, WorkQueue};
use crate::status_schema::SchemaCheck;
use crate::target::Target;

pub use crate::target::{DEFAULT_CONCURRENCY, StartError};
pub(crate) use state::Controller;
pub use state::{ControllerStats, Epoch, Nudge};

/// Default full resync period.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(600);
/// Delay between the last old-version pass finishing and the second pass over
/// all parents after a plugin swap (time for the watch to deliver its writes).
pub const SWAP_SETTLE: Duration = Duration::from_millis(500);

/// What the parents' status writes tell about the WasmController's setup.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReport {
    /// The parent CRD's schema as read at start.
    pub schema: SchemaCheck,
    /// Parents whose status the API server refuses: how many, and the first
    /// (by key) with the server's message.
    pub rejected: Option<(usize, ObjectKey, String)>,
}

/// Settings that do not come from the WasmController.
#[derive(Clone)]
pub struct ControllerSettings {
    /// Default resync period when the spec has none.
    pub default_resync: Duration,
    /// Backoff of failed reconciles.
    pub backoff: Backoff,
    /// Metrics/probe seam ([`crate::observe`]).
    pub observer: Option<Arc<dyn EngineObserver>>,
    /// Makes the manager sync this controller's WasmController.
    pub nudge: Option<Nudge>,
    /// Which parents this process reconciles (sharding); `None`: all.
    pub admission: Option<Arc<dyn crate::admission::Admission>>,
    /// Records each plugin call ([`crate::record`]).
    pub recorder: Option<Arc<crate::record::Recorder>>,
    /// The candidate installed from the first reconcile on (a rollout in
    /// progress must not run its migrated parents on the active version).
    pub candidate: Option<Arc<crate::candidate::Installed>>,
    /// The host-wide budget of concurrent reconciles, served round-robin
    /// among controllers ([`crate::turns`]); `None`: only this controller's
    /// `maxConcurrentReconciles` limits it.
    pub turns: Option<Arc<crate::turns::Turns>>,
}

/// A started controller; stop it with [`ControllerHandle::stop`].
pub struct ControllerHandle {
    pub(crate) ctl: Arc<Controller>,
    subs: Vec<Subscription>,
    tasks: Vec<JoinHandle<()>>,
}

impl ControllerHandle {
    /// Counters of this controller.
    pub fn stats(&self) -> Arc<ControllerStats> {
        self.ctl.stats.clone()
    }

    /// Swaps the plugin without restarting anything (hot reload): reconciles
    /// in flight finish on the old version (each pass takes the plugin once),
    /// every parent is re-enqueued for the new one.
    ///
    /// Once the last pass on the old version has finished (its [`Epoch`] has no
    /// holder left) every parent is enqueued once more, [`SWAP_SETTLE`] later: a
    /// pass that started on the new version while an old-version status write
    /// was in flight may have read the parent from a cache that had not seen
    /// that write. (The echo of that write now also triggers through
    /// [`status_drifted`] when it differs from what the new pass found right;
    /// the second pass stays as a cheap safety net.)
    pub fn swap_plugin(&self, plugin: Arc<dyn ReconcilePlugin>) {
        let (epoch, gone) = Epoch::new(plugin);
        let old = std::mem::replace(
            &mut *self.ctl.plugin.write().unwrap_or_else(|e| e.into_inner()),
            epoch,
        );
        let old_gone = self
            .ctl
            .epoch_gone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(gone);
        drop(old);
        for k in self.ctl.parent_cache.keys() {
            // A held permanent error was the old version's answer: the new
            // one is called (the hold would otherwise last until the resync).
            self.ctl.forget_permanent(&k);
            self.ctl.queue.add(k);
        }
        let weak = Arc::downgrade(&self.ctl);
        tokio::spawn(async move {
            // Resolves when the last pass holding the old epoch drops it.
            if let Some(gone) = old_gone {
                let _ = gone.await;
            }
            tokio::time::sleep(SWAP_SETTLE).await;
            if let Some(c) = weak.upgrade() {
                for k in c.parent_cache.keys() {
                    c.queue.add(k);
                }
            }
        });
    }

    /// Installs (or removes) the candidate version and re-enqueues every
    /// parent whose version changes with it (all of them when the route or
    /// the candidate changed: cheap, and level-triggered).
    pub fn set_candidate(&self, c: Option<Arc<crate::candidate::Installed>>) {
        let old = std::mem::replace(
            &mut *self
                .ctl
                .candidate
                .write()
                .unwrap_or_else(|e| e.into_inner()),
            c.clone(),
        );
        let moved = |p: &DynamicObject| {
            let was = old.as_ref().is_some_and(|o| o.route.serves_object(p));
            let now = c.as_ref().is_some_and(|n| n.route.serves_object(p));
            // Served before and after, by a candidate whose component or
            // config changed: its answer may differ too.
            let changed = old.as_ref().map(|o| (&o.digest, &o.config))
                != c.as_ref().map(|n| (&n.digest, &n.config));
            was != now || (was && now && changed)
        };
        // A new shadow lane (a new candidate, or new shadow settings) has
        // compared nobody yet: the parents the active version serves are
        // reconciled once so that it sees them now, not at their next
        // change or resync (a fleet converged before the candidate loaded
        // would otherwise show no shadow counts for a resync period).
        let new_lane = c.as_ref().and_then(|n| n.shadow.clone()).filter(|lane| {
            !old.as_ref()
                .and_then(|o| o.shadow.as_ref())
                .is_some_and(|o| Arc::ptr_eq(o, lane))
        });
        let owed = |k: &ObjectKey, p: &DynamicObject| {
            new_lane.as_ref().is_some_and(|lane| {
                !c.as_ref().is_some_and(|n| n.route.serves_object(p)) && lane.owes(&k.to_string())
            })
        };
        for k in self.ctl.parent_cache.keys() {
            let Some(p) = self.ctl.parent_cache.get(&k) else {
                continue;
            };
            if moved(&p) {
                // A permanent error held for this parent came from the version
                // it leaves (e.g. a candidate rolled back): the version it
                // moves to has not answered it yet.
                self.ctl.forget_permanent(&k);
                self.ctl.queue.add(k);
            } else if owed(&k, &p) {
                self.ctl.queue.add(k);
            }
        }
    }

    /// The installed candidate.
    pub fn candidate(&self) -> Option<Arc<crate::candidate::Installed>> {
        self.ctl.candidate()
    }

    /// Keys of the parents the installed candidate serves, with whether each
    /// one's last reconcile succeeded.
    pub fn migrated(&self) -> Vec<(ObjectKey, Option<bool>)> {
        let Some(c) = self.ctl.candidate() else {
            return Vec::new();
        };
        let health = self.ctl.health.lock().unwrap_or_else(|e| e.into_inner());
        self.ctl
            .parent_cache
            .keys()
            .into_iter()
            .filter(|k| {
                self.ctl
                    .parent_cache
                    .get(k)
                    .is_some_and(|p| c.route.serves_object(&p))
            })
            .map(|k| {
                // Health counts only once the candidate answered for it.
                let h = health.get(&k).copied().filter(|_| c.tally.has_served(&k));
                (k, h)
            })
            .collect()
    }

    /// Parents whose last reconcile succeeded / failed.
    pub fn health_counts(&self) -> (u32, u32) {
        let h = self.ctl.health.lock().unwrap_or_else(|e| e.into_inner());
        let ok = h.values().filter(|v| **v).count() as u32;
        (ok, h.len() as u32 - ok)
    }

    /// The parent resource this controller reconciles.
    pub fn parent_resource(&self) -> &ApiResource {
        &self.ctl.target.parent.ar
    }

    /// The parent status schema check and the refused status writes.
    pub fn status_report(&self) -> StatusReport {
        let rejected = {
            let m = self
                .ctl
                .status_rejections
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            m.iter()
                .next()
                .map(|(k, msg)| (m.len(), k.clone(), msg.clone()))
        };
        StatusReport {
            schema: self.ctl.target.status_schema.clone(),
            rejected,
        }
    }

    /// Stops triggers and workers; in-flight reconciles finish first.
    pub async fn stop(self) {
        drop(self.subs);
        self.ctl.queue.close();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Resolves the spec's resources and starts the controller.
pub(crate) async fn start(
    client: &kube::Client,
    caches: &CacheRegistry,
    name: &str,
    spec: &WasmControllerSpec,
    plugin: Arc<dyn ReconcilePlugin>,
    settings: &ControllerSettings,
) -> Result<ControllerHandle, StartError> {
    let mut target = Target::resolve(client, name, spec).await?;
    target.shard_labels = caches.is_narrowing();
    // Decorated parents are the user's objects, selected by their labels:
    // they are watched whole and never labelled with a bucket.
    let parent_use = match target.decorate {
        Some(_) => Use::Other,
        None => Use::Parent,
    };
    let (epoch, gone) = Epoch::new(plugin);
    let stats = Arc::<ControllerStats>::default();
    let ctl = Arc::new(Controller {
        client: client.clone(),
        parent_cache: caches.get_for(&target.parent.ar, parent_use),
        child_caches: target
            .children
            .iter()
            .map(|c| caches.get_for(&c.resolved.ar, Use::Child))
            .collect(),
        related_caches: target
            .related
            .iter()
            .map(|r| caches.get(&r.resolved.ar))
            .collect(),
        plugin: RwLock::new(epoch),
        epoch_gone: Mutex::new(Some(gone)),
        resync: target.resync.unwrap_or(settings.default_resync),
        queue: WorkQueue::new(settings.backoff),
        events: EventRecorder::new(client.clone(), target.field_manager.clone()),
        permanent: Mutex::default(),
        health: Mutex::default(),
        status_seen: crate::status::StatusMemory::default(),
        stats: stats.clone(),
        observer: settings.observer.clone(),
        status_rejections: Mutex::default(),
        nudge: settings.nudge.clone(),
        selections: Default::default(),
        recorder: settings.recorder.clone(),
        memo: crate::memo::MemoTable::new(spec.plugin.memoize, stats),
        own_writes: Default::default(),
        candidate: RwLock::new(settings.candidate.clone()),
        target,
    });
    let subs = subscribe(&ctl);
    let mut tasks = vec![tokio::spawn(enqueue_when_synced(ctl.clone()))];
    for _ in 0..ctl.target.concurrency {
        tasks.push(tokio::spawn(work(
            ctl.clone(),
            settings.admission.clone(),
            settings.turns.clone(),
        )));
    }
    if let Some(obs) = ctl.observer.clone() {
        tasks.push(tokio::spawn(sample(ctl.clone(), obs)));
    }
    Ok(ControllerHandle { ctl, subs, tasks })
}

/// Enqueues every parent once all caches have completed their first list.
async fn enqueue_when_synced(c: Arc<Controller>) {
    c.parent_cache.wait_synced().await;
    for cache in c.child_caches.iter().chain(&c.related_caches) {
        cache.wait_synced().await;
    }
    for key in c.parent_cache.keys() {
        c.queue.add(key);
    }
}

/// One worker: reconciles keys from the queue until it closes.
async fn work(
    c: Arc<Controller>,
    admission: Option<Arc<dyn crate::admission::Admission>>,
    turns: Option<Arc<crate::turns::Turns>>,
) {
    // Workers wait for the first trigger; triggers only arrive after
    // [`enqueue_when_synced`] has seen every cache complete its first list, or
    // from watch events (which only flow once a cache is listing).
    while let Some(key) = c.queue.next().await {
        if !caches_synced(&c) {
            c.queue.done(
                &key,
                crate::queue::Outcome::Success {
                    next: Some(Duration::from_millis(100)),
                },
            );
            continue;
        }
        // Fairness: wait for this controller's turn in the host-wide budget
        // (round-robin among controllers), before admission so that a shard
        // handover never waits for a turn.
        let turn = match &turns {
            Some(t) => Some(t.acquire(&c.target.name).await),
            None => None,
        };
        // Sharding: a parent of another replica is dropped here, before any
        // read or write; the ticket is held until the reconcile has finished.
        let ticket = match &admission {
            Some(a) => match a.enter(&c.target.name, &key) {
                Some(t) => Some(t),
                None => {
                    c.queue.done(&key, crate::queue::Outcome::Forget);
                    continue;
                }
            },
            None => None,
        };
        let started = std::time::Instant::now();
        let report = crate::reconcile::reconcile(&c, &key).await;
        crate::observe::finished(
            c.observer.as_deref(),
            &c.target.name,
            &report,
            started.elapsed(),
        );
        c.queue.done(&key, report.outcome);
        drop(ticket);
        drop(turn);
    }
}

/// The one field of a parent the finalizer sampler reads first.
#[derive(serde::Deserialize)]
struct DeletionOnly {
    metadata: DeletionMeta,
}

#[derive(serde::Deserialize)]
struct DeletionMeta {
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

/// Reports queue depth/age and overdue finalizers about once a second until
/// the queue closes (gauges, so sampling is enough).
async fn sample(c: Arc<Controller>, obs: Arc<dyn EngineObserver>) {
    const EVERY: Duration = Duration::from_secs(1);
    let mut tick = 0u32;
    while !c.queue.is_closed() {
        let (depth, oldest) = c.queue.depth_and_oldest();
        obs.queue(&c.target.name, depth, oldest);
        if tick.is_multiple_of(10) {
            let threshold = obs.finalizer_threshold();
            // Only parents being deleted are decoded whole: for the rest one
            // metadata field is read (decoding every parent every 10 s was a
            // steady background cost at 10,000 parents).
            let overdue = c
                .parent_cache
                .keys()
                .iter()
                .filter(|k| {
                    c.parent_cache
                        .get_as::<DeletionOnly>(k)
                        .is_some_and(|d| d.metadata.deletion_timestamp.is_some())
                })
                .filter_map(|k| c.parent_cache.get(k))
                .filter(|p| crate::observe::finalizer_overdue(p, &c.target.finalizer, threshold))
                .count();
            obs.finalizers_pending(&c.target.name, overdue);
        }
        tick = tick.wrapping_add(1);
        tokio::time::sleep(EVERY).await;
    }
}

fn caches_synced(c: &Controller) -> bool {
    c.parent_cache.is_synced()
        && c.child_caches.iter().all(|k| k.is_synced())
        && c.related_caches.iter().all(|r| r.is_synced())
}

/// True when a parent change can matter to a reconcile regardless of its status
/// (status-only changes are judged by [`status_drifted`]).
pub(crate) fn parent_change_matters(ch: &Change<'_>) -> bool {
    match (ch.old, ch.new) {
        (Some(o), Some(n)) => {
            let (a, b) = (&o.metadata, &n.metadata);
            a.generation != b.generation
                || a.generation.is_none()
                || a.labels != b.labels
                || a.annotations != b.annotations
                || a.finalizers != b.finalizers
                || a.deletion_timestamp != b.deletion_timestamp
                || a.uid != b.uid
        }
        _ => true,
    }
}

/// True when a change altered the parent's `.status` to something other than
/// what this host last wrote or found right for it: someone else rewrote the
/// status (or the host judged an older, cached status right), and a level-
/// triggered host must converge it back. The echo of the host's own write
/// matches the remembered fingerprint and does not trigger (no hot loop); a
/// change that leaves the status alone never triggers here (a resync of
/// converged parents writes nothing, so nothing comes back).
pub(crate) fn status_drifted(c: &Controller, ch: &Change<'_>) -> bool {
    let (Some(o), Some(n)) = (ch.old, ch.new) else {
        return false;
    };
    let now = n.data.get("status");
    if o.data.get("status") == now {
        return false;
    }
    c.status_seen.matches(&key_of(n), now) != Some(true)
}

/// True for the echo of a status-only write that awaits one more pass
/// (rule 13.4, [`crate::memo::MemoTable::await_echo`]): the pass that calls
/// the plugin on the status as written, and records the memo if it is quiet.
fn own_status_echo(c: &Controller, ch: &Change<'_>) -> bool {
    let (Some(o), Some(n)) = (ch.old, ch.new) else {
        return false;
    };
    o.data.get("status") != n.data.get("status") && c.memo.echo_arrived(&key_of(n))
}

fn subscribe(ctl: &Arc<Controller>) -> Vec<Subscription> {
    let mut subs = Vec::new();
    if let Some(obs) = ctl.observer.clone() {
        let name = ctl.target.name.clone();
        subs.push(ctl.parent_cache.subscribe(move |ch| {
            if let (Some(old), Some(new)) = (ch.old, ch.new)
                && let Some(d) = crate::observe::not_ready_duration(old, new)
            {
                obs.parent_became_ready(&name, d);
            }
        }));
    }
    let weak = Arc::downgrade(ctl);
    subs.push(ctl.parent_cache.subscribe(move |ch| {
        let Some(c) = weak.upgrade() else { return };
        // First: an awaited echo is taken whatever else triggers the pass.
        let echo = own_status_echo(&c, ch);
        if !echo && !parent_change_matters(ch) && !status_drifted(&c, ch) {
            return;
        }
        // Decorator mode: an object that neither was nor is selected has
        // nothing of this controller's (attachments left from an earlier
        // selection are found by the first pass after start and by their
        // own watch events).
        if c.target.decorate.is_some()
            && ![ch.old, ch.new]
                .into_iter()
                .flatten()
                .any(|o| c.target.selects(o))
        {
            return;
        }
        if let Some(o) = ch.new.or(ch.old) {
            c.queue.add(key_of(o));
        }
    }));
    for cache in &ctl.child_caches {
        let weak = Arc::downgrade(ctl);
        // Children map to their controller owner: an update that kept the
        // owner needs no decoded old state.
        subs.push(cache.subscribe_owners(move |ch| {
            let Some(c) = weak.upgrade() else { return };
            for o in [ch.old, ch.new].into_iter().flatten() {
                if let Some(key) = owner_key(&c, o) {
                    c.queue.add(key);
                }
            }
        }));
    }
    for (i, cache) in ctl.related_caches.iter().enumerate() {
        let weak = Arc::downgrade(ctl);
        subs.push(cache.subscribe(move |ch| {
            let Some(c) = weak.upgrade() else { return };
            let rule = &c.target.related[i];
            let hit = [ch.old, ch.new]
                .into_iter()
                .flatten()
                .any(|o| rule.matches(o));
            if !hit {
                return;
            }
            let ns = ch.new.or(ch.old).and_then(|o| o.metadata.namespace.clone());
            let parents = match (rule.rule.scope, &ns, c.target.parent.namespaced) {
                // Keys only: the cache would otherwise decode every parent.
                (RelatedScope::Namespace, Some(ns), true) => {
                    c.parent_cache.keys_in_namespace(Some(ns))
                }
                (RelatedScope::Namespace, _, true) => Vec::new(),
                _ => c.parent_cache.keys_in_namespace(None),
            };
            // Only the parents whose `customize` selection takes the object
            // (crate::related); every parent in scope without one.
            let objs: Vec<&DynamicObject> = [ch.old, ch.new].into_iter().flatten().collect();
            for key in parents {
                if c.selections.may_want(&c.target, &key, i, &objs) {
                    c.queue.add(key);
                }
            }
        }));
    }
    subs
}

/// The parent key a child maps to through its controller owner reference.
fn owner_key(c: &Controller, child: &DynamicObject) -> Option<ObjectKey> {
    let r = child
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))?;
    if r.kind != c.target.parent.ar.kind || group_of(&r.api_version) != c.target.parent.ar.group {
        return None;
    }
    let ns = if c.target.parent.namespaced {
        child.metadata.namespace.clone()
    } else {
        None
    };
    Some(ObjectKey {
        namespace: ns,
        name: r.name.clone(),
    })
}

fn group_of(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((g, _)) => g,
        None => "",
    }
}
