//! What one running controller holds while it runs: its resolved [`Target`],
//! the caches it reads, its queue, the plugin serving it, and the per-parent
//! memory a reconcile consults (held permanent failures, health, the status
//! it last wrote). The reconcile path (`crate::reconcile`) reads and updates
//! it; [`super`] starts and stops it. Kept apart from both so neither imports
//! the other in a cycle.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kube::api::DynamicObject;
use rand::Rng;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::cache::KindCache;
use crate::decide::{Hold, Source};
use crate::events::EventRecorder;
use crate::observe::EngineObserver;
use crate::plugin::ReconcilePlugin;
use crate::queue::{ObjectKey, WorkQueue};
use crate::status::StatusMemory;
use crate::target::Target;

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
    /// Reconciles that skipped the plugin call and every write because the
    /// inputs equalled the last quiet pass's (rule 13, `crate::decide::memo`).
    pub memoised: AtomicU64,
    /// Parents with a recorded memo entry now (a gauge): those whose next
    /// reconcile skips the plugin if nothing changed (`crate::memo`).
    pub memo_entries: AtomicU64,
}

/// A callback that makes the manager sync one WasmController.
pub type Nudge = Arc<dyn Fn() + Send + Sync>;

/// Everything a reconcile of this controller needs.
pub(crate) struct Controller {
    /// The resolved WasmController (shared with `plan`).
    pub target: Target,
    pub client: kube::Client,
    pub parent_cache: Arc<KindCache>,
    /// One cache per child kind, in the target's order.
    pub child_caches: Vec<Arc<KindCache>>,
    /// One cache per related rule, in the target's order.
    pub related_caches: Vec<Arc<KindCache>>,
    pub plugin: RwLock<Arc<Epoch>>,
    /// Resolves once the serving epoch has no holder left (see [`Epoch::new`]).
    pub epoch_gone: Mutex<Option<oneshot::Receiver<()>>>,
    pub resync: Duration,
    pub queue: WorkQueue,
    pub events: EventRecorder,
    pub permanent: Mutex<HashMap<ObjectKey, PermanentFailure>>,
    pub health: Mutex<HashMap<ObjectKey, bool>>,
    /// Per parent: the status this host last wrote or found right, and its
    /// restore streak; see [`super::status_drifted`].
    pub status_seen: StatusMemory,
    pub stats: Arc<ControllerStats>,
    pub observer: Option<Arc<dyn EngineObserver>>,
    /// Parents whose status the API server refused (422), with its message;
    /// reported on the WasmController by the manager.
    pub status_rejections: Mutex<BTreeMap<ObjectKey, String>>,
    /// Asks the manager to sync this controller's WasmController soon (to
    /// report something new on it).
    pub nudge: Option<Nudge>,
    /// Per parent: its cached `customize` answer ([`crate::related`]).
    pub selections: crate::related::Selections,
    /// Records each plugin call (`crate::record`); `None`: not recording.
    pub recorder: Option<Arc<crate::record::Recorder>>,
    /// Per parent: the inputs of the last quiet plugin call (rule 13).
    pub memo: crate::memo::MemoTable,
    /// Per parent: child writes the child caches have not shown yet.
    pub own_writes: crate::own_writes::OwnWrites,
    /// The candidate version and the parents it serves (shadow, canary).
    pub candidate: RwLock<Option<Arc<crate::candidate::Installed>>>,
}

impl Source for Controller {
    fn owned_by(&self, kind: usize, uid: &str) -> Vec<Arc<DynamicObject>> {
        self.child_caches
            .get(kind)
            .map(|c| c.owned_by(uid))
            .unwrap_or_default()
    }

    fn related_in(&self, rule: usize, ns: Option<&str>) -> Vec<Arc<DynamicObject>> {
        self.related_caches
            .get(rule)
            .map(|c| c.in_namespace(ns))
            .unwrap_or_default()
    }

    fn child(&self, kind: usize, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        self.child_caches.get(kind)?.get(key)
    }
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

    /// The installed candidate, if any (read once per pass).
    pub fn candidate(&self) -> Option<Arc<crate::candidate::Installed>> {
        self.candidate
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The serving plugin itself (not its epoch wrapper).
    pub fn serving_plugin(&self) -> Arc<dyn ReconcilePlugin> {
        self.plugin
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .plugin
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

    /// The permanent failure held for `key` at this uid and generation, with
    /// how long the hold still lasts.
    pub fn hold(&self, key: &ObjectKey, uid: &str, generation: Option<i64>) -> Option<Hold> {
        let map = self.permanent.lock().unwrap_or_else(|e| e.into_inner());
        let pf = map.get(key)?;
        if pf.uid != uid || pf.generation != generation {
            return None;
        }
        let elapsed = pf.at.elapsed();
        (elapsed < self.resync).then(|| Hold {
            reason: pf.reason.clone(),
            message: pf.message.clone(),
            wait: self.resync - elapsed,
        })
    }

    /// Remembers a permanent failure for `key` at this uid and generation.
    pub fn remember_permanent(
        &self,
        key: &ObjectKey,
        uid: &str,
        generation: Option<i64>,
        reason: &str,
        message: &str,
    ) {
        self.permanent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                key.clone(),
                PermanentFailure {
                    uid: uid.to_string(),
                    generation,
                    at: Instant::now(),
                    reason: reason.to_string(),
                    message: message.to_string(),
                },
            );
    }

    /// Forgets the permanent failure of `key`.
    pub fn forget_permanent(&self, key: &ObjectKey) {
        self.permanent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Counts a plugin call.
    pub fn count_call(&self) {
        self.stats.plugin_calls.fetch_add(1, Ordering::Relaxed);
    }
}

/// One installed plugin version. Passes clone the `Arc` for their duration;
/// when the last one lets go, the epoch drops its sender and the receiver from
/// [`Epoch::new`] resolves — how a swap knows no pass runs the old version
/// any more, without polling.
pub struct Epoch {
    plugin: Arc<dyn ReconcilePlugin>,
    /// Dropped with the epoch: that is the signal.
    _gone: oneshot::Sender<()>,
}

impl Epoch {
    /// A new epoch for `plugin`, and the receiver that resolves once it is dropped.
    pub fn new(plugin: Arc<dyn ReconcilePlugin>) -> (Arc<Epoch>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (Arc::new(Epoch { plugin, _gone: tx }), rx)
    }
}

impl ReconcilePlugin for Epoch {
    fn digest(&self) -> &str {
        self.plugin.digest()
    }

    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        self.plugin.info()
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a wr_runtime::ReconcileRequest,
        limits: &'a wr_runtime::CallLimits,
    ) -> futures::future::BoxFuture<
        'a,
        Result<wr_runtime::ReconcileResponse, crate::plugin::PluginError>,
    > {
        self.plugin.reconcile(req, limits)
    }

    fn reconcile_text<'a>(
        &'a self,
        req: &'a wr_runtime::ReconcileRequest,
        text: wr_runtime::RequestText,
        limits: &'a wr_runtime::CallLimits,
    ) -> futures::future::BoxFuture<
        'a,
        Result<wr_runtime::ReconcileResponse, crate::plugin::PluginError>,
    > {
        self.plugin.reconcile_text(req, text, limits)
    }

    fn customize<'a>(
        &'a self,
        req: &'a wr_runtime::CustomizeRequest,
        limits: &'a wr_runtime::CallLimits,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<Vec<wr_runtime::RelatedSelector>>, crate::plugin::PluginError>,
    > {
        self.plugin.customize(req, limits)
    }
}
