//! One running controller (one per WasmController): its resolved resources,
//! shared caches, trigger subscriptions, work queue and workers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::core::Selector;
use rand::Rng;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use wr_runtime::CallLimits;

use crate::cache::{CacheRegistry, Change, KindCache, Subscription, key_of};
use crate::crd::{RelatedResource, RelatedScope, UpdateMethod, WasmControllerSpec};
use crate::events::EventRecorder;
use crate::observe::EngineObserver;
use crate::plugin::ReconcilePlugin;
use crate::queue::{Backoff, ObjectKey, WorkQueue};
use crate::resolve::{ResolveError, Resolved, resolve};
use crate::status_schema::SchemaCheck;
use crate::validate::DeclaredKind;

/// Default full resync period.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(600);
/// Delay between the last old-version pass finishing and the second pass over
/// all parents after a plugin swap (time for the watch to deliver its writes).
pub const SWAP_SETTLE: Duration = Duration::from_millis(500);
/// Default concurrency per controller.
pub const DEFAULT_CONCURRENCY: u32 = 4;

/// A declared child kind with its cache.
pub(crate) struct ChildKind {
    pub resolved: Resolved,
    pub method: UpdateMethod,
    pub cache: Arc<KindCache>,
}

/// A related rule with its cache.
pub(crate) struct RelatedKind {
    pub rule: RelatedResource,
    /// Key of its objects in the request (`RelatedResource::key`).
    pub key: String,
    pub selector: Option<Selector>,
    pub cache: Arc<KindCache>,
}

impl RelatedKind {
    pub fn matches(&self, obj: &DynamicObject) -> bool {
        crate::plan::related_matches(&self.rule, self.selector.as_ref(), obj)
    }
}

/// Remembered permanent failure: no new plugin call until the parent's
/// generation changes or the resync period passes. Reason and message are kept
/// so a pass that skips the plugin can still restore the `Ready=False` status.
pub(crate) struct PermanentFailure {
    pub uid: String,
    pub generation: Option<i64>,
    pub at: Instant,
    pub reason: String,
    pub message: String,
}

/// Per-controller counters, readable by tests and the manager.
#[derive(Debug, Default)]
pub struct ControllerStats {
    /// Plugin calls made.
    pub plugin_calls: AtomicU64,
    /// Reconciles run.
    pub reconciles: AtomicU64,
}

/// Everything a reconcile of this controller needs.
pub(crate) struct Controller {
    pub name: String,
    pub client: kube::Client,
    pub field_manager: String,
    pub finalizer: String,
    pub finalize: bool,
    pub parent: Resolved,
    pub parent_cache: Arc<KindCache>,
    pub children: Vec<ChildKind>,
    pub declared: Vec<DeclaredKind>,
    pub related: Vec<RelatedKind>,
    pub plugin: RwLock<Arc<Epoch>>,
    pub config: Option<Value>,
    pub limits: CallLimits,
    pub resync: Duration,
    pub queue: WorkQueue,
    pub events: EventRecorder,
    pub permanent: Mutex<HashMap<ObjectKey, PermanentFailure>>,
    pub health: Mutex<HashMap<ObjectKey, bool>>,
    /// Per parent: the status this host last wrote or found right, and its
    /// restore streak; see [`status_drifted`].
    pub status_seen: crate::status::StatusMemory,
    pub stats: Arc<ControllerStats>,
    pub observer: Option<Arc<dyn EngineObserver>>,
    /// The parent CRD's status schema, read at start ([`crate::status_schema`]).
    pub status_schema: SchemaCheck,
    /// Parents whose status the API server refused (422), with its message;
    /// reported on the WasmController by the manager.
    pub status_rejections: Mutex<BTreeMap<ObjectKey, String>>,
    /// Asks the manager to sync this controller's WasmController soon (to
    /// report something new on it).
    pub nudge: Option<Nudge>,
}

/// A callback that makes the manager sync one WasmController.
pub type Nudge = Arc<dyn Fn() + Send + Sync>;

/// What the parents' status writes tell about the WasmController's setup.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReport {
    /// The parent CRD's schema as read at start.
    pub schema: SchemaCheck,
    /// Parents whose status the API server refuses: how many, and the first
    /// (by key) with the server's message.
    pub rejected: Option<(usize, ObjectKey, String)>,
}

impl Controller {
    /// Records that the API server refused the status of `key`; nudges the
    /// manager when this is news.
    pub fn status_rejected(&self, key: &ObjectKey, message: &str) {
        let news = {
            let mut m = self
                .status_rejections
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            m.insert(key.clone(), message.to_string()).as_deref() != Some(message)
        };
        if news && let Some(n) = &self.nudge {
            n();
        }
    }

    /// Records that a status of `key` was stored (or the parent is gone).
    pub fn status_accepted(&self, key: &ObjectKey) {
        let was = self
            .status_rejections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .is_some();
        if was && let Some(n) = &self.nudge {
            n();
        }
    }

    pub fn plugin(&self) -> Arc<dyn ReconcilePlugin> {
        self.plugin
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The serving plugin itself (not its epoch wrapper).
    pub fn serving_plugin(&self) -> Arc<dyn ReconcilePlugin> {
        self.plugin
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Resync delay with ±10 % jitter so parents do not resync in lockstep.
    pub fn jittered_resync(&self) -> Duration {
        let f: f64 = rand::rng().random_range(0.9..1.1);
        self.resync.mul_f64(f)
    }

    /// Remembers the status this host wrote (or judged right) for `key`, so the
    /// watch echo of that status does not trigger another reconcile.
    pub fn remember_status(&self, key: &ObjectKey, status: Option<&Value>) {
        self.status_seen.remember(key, status);
    }

    /// Forgets the remembered status of `key` (parent gone).
    pub fn forget_status(&self, key: &ObjectKey) {
        self.status_seen.forget(key);
    }

    pub fn set_health(&self, key: &ObjectKey, ok: Option<bool>) {
        let mut h = self.health.lock().unwrap_or_else(|e| e.into_inner());
        match ok {
            Some(v) => {
                h.insert(key.clone(), v);
            }
            None => {
                h.remove(key);
            }
        }
    }
}

/// One installed plugin version. Passes clone the `Arc` for their duration, so
/// its strong count tells how many passes still run on this version.
pub struct Epoch(Arc<dyn ReconcilePlugin>);

impl ReconcilePlugin for Epoch {
    fn digest(&self) -> &str {
        self.0.digest()
    }

    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        self.0.info()
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a wr_runtime::ReconcileRequest,
        limits: &'a CallLimits,
    ) -> futures::future::BoxFuture<
        'a,
        Result<wr_runtime::ReconcileResponse, crate::plugin::PluginError>,
    > {
        self.0.reconcile(req, limits)
    }
}

/// Which field of the spec a start failure is about.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {source}")]
pub struct StartError {
    /// e.g. `spec.childResources[0]`.
    pub field: String,
    /// What went wrong.
    #[source]
    pub source: ResolveError,
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
        let old = std::mem::replace(
            &mut *self.ctl.plugin.write().unwrap_or_else(|e| e.into_inner()),
            Arc::new(Epoch(plugin)),
        );
        for k in self.ctl.parent_cache.keys() {
            self.ctl.queue.add(k);
        }
        let weak = Arc::downgrade(&self.ctl);
        tokio::spawn(async move {
            while Arc::strong_count(&old) > 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            drop(old);
            tokio::time::sleep(SWAP_SETTLE).await;
            if let Some(c) = weak.upgrade() {
                for k in c.parent_cache.keys() {
                    c.queue.add(k);
                }
            }
        });
    }

    /// Parents whose last reconcile succeeded / failed.
    pub fn health_counts(&self) -> (u32, u32) {
        let h = self.ctl.health.lock().unwrap_or_else(|e| e.into_inner());
        let ok = h.values().filter(|v| **v).count() as u32;
        (ok, h.len() as u32 - ok)
    }

    /// The parent resource this controller reconciles.
    pub fn parent_resource(&self) -> &ApiResource {
        &self.ctl.parent.ar
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
            schema: self.ctl.status_schema.clone(),
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
    let parent = resolve(client, &spec.parent_resource)
        .await
        .map_err(|source| StartError {
            field: "spec.parentResource".into(),
            source,
        })?;
    let mut children = Vec::new();
    let mut declared = Vec::new();
    for (i, c) in spec.child_resources.iter().enumerate() {
        let r = resolve(client, &c.resource_ref())
            .await
            .map_err(|source| StartError {
                field: format!("spec.childResources[{i}]"),
                source,
            })?;
        declared.push(DeclaredKind {
            api_version: r.ar.api_version.clone(),
            kind: r.ar.kind.clone(),
            namespaced: r.namespaced,
        });
        children.push(ChildKind {
            cache: caches.get(&r.ar),
            resolved: r,
            method: c.method(),
        });
    }
    let mut related = Vec::new();
    for (i, rule) in spec.related.iter().enumerate() {
        let r = resolve(client, &rule.resource_ref())
            .await
            .map_err(|source| StartError {
                field: format!("spec.related[{i}]"),
                source,
            })?;
        let selector = rule
            .selector
            .clone()
            .and_then(|s| Selector::try_from(s).ok());
        related.push(RelatedKind {
            rule: rule.clone(),
            key: rule.key(&r.ar.plural),
            selector,
            cache: caches.get(&r.ar),
        });
    }
    let status_schema = crate::status_schema::read(client, &parent.ar).await;
    if let SchemaCheck::Unreadable(why) = &status_schema {
        tracing::debug!(controller = %name, reason = %why, "parent status schema not checked");
    }
    let call_limits = crate::plan::call_limits(spec);
    let field_manager = format!("wasm-reconciler/{name}");
    let ctl = Arc::new(Controller {
        name: name.to_string(),
        client: client.clone(),
        finalizer: crate::finalize::finalizer_name(name),
        finalize: spec.finalize,
        parent_cache: caches.get(&parent.ar),
        parent,
        children,
        declared,
        related,
        plugin: RwLock::new(Arc::new(Epoch(plugin))),
        config: spec.plugin.config.clone(),
        limits: call_limits,
        resync: spec
            .resync_period_seconds
            .map(|s| Duration::from_secs(u64::from(s)))
            .unwrap_or(settings.default_resync),
        queue: WorkQueue::new(settings.backoff),
        events: EventRecorder::new(client.clone(), field_manager.clone()),
        field_manager,
        permanent: Mutex::new(HashMap::new()),
        health: Mutex::new(HashMap::new()),
        status_seen: crate::status::StatusMemory::default(),
        stats: Arc::new(ControllerStats::default()),
        observer: settings.observer.clone(),
        status_schema,
        status_rejections: Mutex::new(BTreeMap::new()),
        nudge: settings.nudge.clone(),
    });
    let subs = subscribe(&ctl);
    let mut tasks = Vec::new();
    let concurrency = spec
        .max_concurrent_reconciles
        .unwrap_or(DEFAULT_CONCURRENCY)
        .max(1);
    let c = ctl.clone();
    tasks.push(tokio::spawn(async move {
        c.parent_cache.wait_synced().await;
        for k in &c.children {
            k.cache.wait_synced().await;
        }
        for r in &c.related {
            r.cache.wait_synced().await;
        }
        for key in c.parent_cache.keys() {
            c.queue.add(key);
        }
    }));
    for _ in 0..concurrency {
        let c = ctl.clone();
        tasks.push(tokio::spawn(async move {
            // Workers wait for the first trigger; triggers only arrive after the
            // sync task above has seen every cache complete its first list, or
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
                let outcome = crate::observe::observed(
                    c.observer.as_deref(),
                    &c.name,
                    crate::reconcile::reconcile(&c, &key),
                )
                .await;
                c.queue.done(&key, outcome);
            }
        }));
    }
    if let Some(obs) = ctl.observer.clone() {
        tasks.push(tokio::spawn(sample(ctl.clone(), obs)));
    }
    Ok(ControllerHandle { ctl, subs, tasks })
}

/// Reports queue depth/age and overdue finalizers about once a second until
/// the queue closes (gauges, so sampling is enough).
async fn sample(c: Arc<Controller>, obs: Arc<dyn EngineObserver>) {
    const EVERY: Duration = Duration::from_secs(1);
    let mut tick = 0u32;
    while !c.queue.is_closed() {
        let (depth, oldest) = c.queue.depth_and_oldest();
        obs.queue(&c.name, depth, oldest);
        if tick.is_multiple_of(10) {
            let threshold = obs.finalizer_threshold();
            let overdue = c
                .parent_cache
                .keys()
                .iter()
                .filter_map(|k| c.parent_cache.get(k))
                .filter(|p| crate::observe::finalizer_overdue(p, &c.finalizer, threshold))
                .count();
            obs.finalizers_pending(&c.name, overdue);
        }
        tick = tick.wrapping_add(1);
        tokio::time::sleep(EVERY).await;
    }
}

fn caches_synced(c: &Controller) -> bool {
    c.parent_cache.is_synced()
        && c.children.iter().all(|k| k.cache.is_synced())
        && c.related.iter().all(|r| r.cache.is_synced())
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

fn subscribe(ctl: &Arc<Controller>) -> Vec<Subscription> {
    let mut subs = Vec::new();
    if let Some(obs) = ctl.observer.clone() {
        let name = ctl.name.clone();
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
        if !parent_change_matters(ch) && !status_drifted(&c, ch) {
            return;
        }
        if let Some(o) = ch.new.or(ch.old) {
            c.queue.add(key_of(o));
        }
    }));
    for kind in &ctl.children {
        let weak = Arc::downgrade(ctl);
        subs.push(kind.cache.subscribe(move |ch| {
            let Some(c) = weak.upgrade() else { return };
            for o in [ch.old, ch.new].into_iter().flatten() {
                if let Some(key) = owner_key(&c, o) {
                    c.queue.add(key);
                }
            }
        }));
    }
    for (i, _) in ctl.related.iter().enumerate() {
        let weak = Arc::downgrade(ctl);
        subs.push(ctl.related[i].cache.subscribe(move |ch| {
            let Some(c) = weak.upgrade() else { return };
            let rule = &c.related[i];
            let hit = [ch.old, ch.new]
                .into_iter()
                .flatten()
                .any(|o| rule.matches(o));
            if !hit {
                return;
            }
            let ns = ch.new.or(ch.old).and_then(|o| o.metadata.namespace.clone());
            let parents = match (rule.rule.scope, &ns, c.parent.namespaced) {
                // Keys only: the cache would otherwise decode every parent.
                (RelatedScope::Namespace, Some(ns), true) => {
                    c.parent_cache.keys_in_namespace(Some(ns))
                }
                (RelatedScope::Namespace, _, true) => Vec::new(),
                _ => c.parent_cache.keys_in_namespace(None),
            };
            for key in parents {
                c.queue.add(key);
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
    if r.kind != c.parent.ar.kind || group_of(&r.api_version) != c.parent.ar.group {
        return None;
    }
    let ns = if c.parent.namespaced {
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

/// Counts a plugin call.
pub(crate) fn count_call(c: &Controller) {
    c.stats.plugin_calls.fetch_add(1, Ordering::Relaxed);
}
