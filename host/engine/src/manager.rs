//! The controller manager: watches `WasmController` objects and starts,
//! reconfigures and stops one controller per object while the process runs.
//!
//! The manager is itself a level-triggered controller over WasmControllers (same
//! shared cache and work queue as the parents' controllers). It puts its own
//! finalizer ([`CLEANUP_FINALIZER`]) on every WasmController so that deleting
//! one can first remove that controller's finalizer from all of its parents —
//! otherwise parents would be stuck terminating forever (a known Metacontroller
//! bug). Plugin ConfigMaps are watched ([`crate::plugin_watch`]): a change
//! re-syncs the controller, which verifies, compiles (off the reconcile path)
//! and atomically swaps the new version in, then re-enqueues every parent. A
//! version that fails to load is refused and the previous one keeps serving.
//!
//! Names: field manager `wasm-reconciler/<controller>`, finalizer on parents
//! `wasm-reconciler.dev/<controller>`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::cache::CacheRegistry;
use crate::controller::{self, ControllerHandle, ControllerStats};
use crate::crd::{WasmController, WasmControllerSpec, WasmControllerStatus};
use crate::errors::{ApiErrorClass, classify};
use crate::events::{EventKind, EventRecorder, Regarding};
use crate::finalize;
use crate::plugin::{PluginLoader, ReconcilePlugin};
use crate::plugin_source::{self, Fetched, SourceError};
use crate::plugin_watch::SourceWatch;
use crate::queue::{Backoff, ObjectKey, Outcome, WorkQueue};
use crate::resolve::resolve;
use crate::rollout::{Judge, Judged, Verdict};
use crate::status_schema::SchemaCheck;
use crate::versions::{Lookup, Role, Versions};

mod claims;
mod delivery;
mod sync;

/// Finalizer the manager puts on WasmControllers.
pub const CLEANUP_FINALIZER: &str = "wasm-reconciler.dev/cleanup";
/// Field manager of the manager's own writes.
pub const MANAGER_FIELD_MANAGER: &str = "wasm-reconciler";

/// Manager settings.
#[derive(Clone)]
pub struct ManagerOptions {
    /// Resync period for controllers whose spec sets none.
    pub default_resync: Duration,
    /// Backoff of failed reconciles (parents and WasmControllers).
    pub backoff: Backoff,
    /// How often each controller is re-synced without a trigger (status
    /// counters; re-reading a `path` source). ConfigMap sources are watched,
    /// so their changes do not wait for this.
    pub plugin_poll: Duration,
    /// Told about reconciles, plugin calls, queues and cache sync (metrics
    /// and probes; see [`crate::observe`]). `None`: nothing is recorded.
    pub observer: Option<Arc<dyn crate::observe::EngineObserver>>,
    /// Plugin loads (compiles) that may run at once, across controllers
    /// ([`crate::loads`]); at least 2, so a large component never holds the
    /// last slot.
    pub parallel_loads: usize,
    /// Which parents (and WasmControllers, for the manager's own writes) this
    /// process works on ([`crate::admission`]); `None`: all of them.
    pub admission: Option<Arc<dyn crate::admission::Admission>>,
    /// Records every plugin call to a store ([`crate::record`], `--record`).
    pub recorder: Option<Arc<crate::record::Recorder>>,
    /// Reconciles that may run at once across all controllers, handed out
    /// round-robin among controllers ([`crate::turns`]); each controller is
    /// still capped by its `maxConcurrentReconciles`.
    pub reconcile_slots: usize,
    /// Sharded `run` with narrowed caches (issue 19): parent and child
    /// caches watch only the shard buckets given to
    /// [`ManagerHandle::narrow_to`], children are labelled with their
    /// parent's bucket, and parents without a bucket label are labelled when
    /// `admission` admits them. Needs `admission`; ignored without it.
    pub shard_buckets: bool,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            default_resync: controller::DEFAULT_RESYNC,
            backoff: Backoff::default(),
            plugin_poll: Duration::from_secs(5),
            observer: None,
            parallel_loads: crate::loads::default_parallel_loads(),
            admission: None,
            recorder: None,
            reconcile_slots: crate::turns::DEFAULT_RECONCILE_SLOTS,
            shard_buckets: false,
        }
    }
}

/// Why the manager stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The WasmController CRD is not installed.
    #[error("the WasmController CRD is not installed: {0}")]
    CrdMissing(#[source] crate::resolve::ResolveError),
}

struct Running {
    spec_hash: String,
    digest: String,
    handle: ControllerHandle,
}

struct Inner {
    client: kube::Client,
    loader: Arc<dyn PluginLoader>,
    opts: ManagerOptions,
    caches: Arc<CacheRegistry>,
    running: tokio::sync::Mutex<HashMap<String, Running>>,
    plugins: std::sync::Mutex<HashMap<String, PluginState>>,
    load_slots: crate::loads::LoadSlots,
    events: EventRecorder,
    wc_ar: ApiResource,
    turns: Arc<crate::turns::Turns>,
}

/// Prepares a client configuration for the engine: kube's built-in retry of
/// 429/503/504 (up to 15 attempts, minutes of backoff inside one request) is
/// switched off, because the engine classifies those errors itself (per-key
/// backoff, Retry-After floor) and must not block a worker inside a request.
pub fn engine_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

/// Runs one controller per WasmController.
///
/// Build `client` from [`engine_config`] so that API errors reach the engine's
/// own retry policy.
pub struct Manager {
    inner: Arc<Inner>,
}

/// Read access to a running manager (tests, metrics).
#[derive(Clone)]
pub struct ManagerHandle {
    inner: Arc<Inner>,
}

impl ManagerHandle {
    /// Counters of a running controller.
    pub async fn stats(&self, controller: &str) -> Option<Arc<ControllerStats>> {
        self.inner
            .running
            .lock()
            .await
            .get(controller)
            .map(|r| r.handle.stats())
    }

    /// Names of running controllers.
    pub async fn running(&self) -> Vec<String> {
        self.inner.running.lock().await.keys().cloned().collect()
    }

    /// Enqueues the parents of every running controller that `pick` selects
    /// (a sharded replica's gained parents) and returns how many it enqueued
    /// (a parent of two controllers counts twice).
    pub async fn requeue_matching(&self, pick: impl Fn(&ObjectKey) -> bool) -> usize {
        let mut n = 0;
        for r in self.inner.running.lock().await.values() {
            for k in r.handle.ctl.parent_cache.keys() {
                if pick(&k) {
                    r.handle.ctl.queue.add(k);
                    n += 1;
                }
            }
        }
        n
    }

    /// Keys of the parents of every running controller, per controller.
    pub async fn parent_keys(&self) -> Vec<(String, Vec<ObjectKey>)> {
        self.inner
            .running
            .lock()
            .await
            .iter()
            .map(|(n, r)| (n.clone(), r.handle.ctl.parent_cache.keys()))
            .collect()
    }

    /// Number of live shared caches (one watch each).
    pub fn live_caches(&self) -> usize {
        self.inner.caches.live()
    }

    /// Narrows the parent and child caches to `buckets` and resolves once
    /// they hold exactly those ([`CacheRegistry::narrow_to`]); nothing
    /// without [`ManagerOptions::shard_buckets`].
    pub async fn narrow_to(&self, buckets: &[u32]) {
        self.inner.caches.narrow_to(buckets).await;
    }

    /// Objects held per cached kind.
    pub fn cache_sizes(&self) -> Vec<(String, usize)> {
        self.inner.caches.sizes()
    }
}

impl Manager {
    /// A manager that talks to the cluster through `client` and loads plugins with `loader`.
    pub fn new(client: kube::Client, loader: Arc<dyn PluginLoader>, opts: ManagerOptions) -> Self {
        let wc_ar = ApiResource::erase::<WasmController>(&());
        Self {
            inner: Arc::new(Inner {
                caches: Arc::new(match (&opts.admission, opts.shard_buckets) {
                    (Some(a), true) => CacheRegistry::narrowed(client.clone(), a.clone()),
                    _ => CacheRegistry::new(client.clone()),
                }),
                events: EventRecorder::new(client.clone(), MANAGER_FIELD_MANAGER.into()),
                plugins: std::sync::Mutex::new(HashMap::new()),
                load_slots: crate::loads::LoadSlots::new(opts.parallel_loads),
                client,
                loader,
                running: tokio::sync::Mutex::new(HashMap::new()),
                wc_ar,
                turns: crate::turns::Turns::new(opts.reconcile_slots),
                opts,
            }),
        }
    }

    /// A handle for observing the manager while it runs.
    pub fn handle(&self) -> ManagerHandle {
        ManagerHandle {
            inner: self.inner.clone(),
        }
    }

    /// Runs until `shutdown` completes, then stops every controller (in-flight
    /// reconciles finish first).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), EngineError> {
        let inner = self.inner;
        let cache = inner.caches.get(&inner.wc_ar);
        let queue = Arc::new(WorkQueue::new(inner.opts.backoff));
        let q = queue.clone();
        let wcs = Arc::downgrade(&cache);
        let _sub = cache.subscribe(move |ch| {
            if !controller::parent_change_matters(ch) {
                return;
            }
            if let Some(o) = ch.new.or(ch.old) {
                q.add(crate::cache::key_of(o));
            }
            // Another WasmController may own (or lose) this one's parent.
            if let Some(wcs) = wcs.upgrade() {
                for o in ch.old.into_iter().chain(ch.new) {
                    claims::peers_of(&wcs, o).into_iter().for_each(|k| q.add(k));
                }
            }
        });
        let worker = {
            let inner = inner.clone();
            let queue = queue.clone();
            let cache = cache.clone();
            tokio::spawn(async move {
                cache.wait_synced().await;
                if let Some(obs) = &inner.opts.observer {
                    obs.caches_synced();
                }
                for k in cache.keys() {
                    queue.add(k);
                }
                while let Some(key) = queue.next().await {
                    let wc = cache.get(&key);
                    // Every replica runs every controller; only the
                    // WasmController's owner writes it (crate::admission).
                    let ticket = inner
                        .opts
                        .admission
                        .as_ref()
                        .map(|a| a.enter(crate::admission::MANAGER_SCOPE, &key));
                    let writes = !matches!(ticket, Some(None));
                    let outcome = crate::admission::with_wasmcontroller_writes(
                        writes,
                        sync::sync_controller(&inner, &queue, &key, wc.as_deref()),
                    )
                    .await;
                    drop(ticket);
                    queue.done(&key, outcome);
                }
            })
        };
        shutdown.await;
        queue.close();
        let _ = worker.await;
        let running: Vec<(String, Running)> = inner.running.lock().await.drain().collect();
        for (name, r) in running {
            r.handle.stop().await;
            if let Some(obs) = &inner.opts.observer {
                obs.controller_removed(&name);
            }
        }
        Ok(())
    }
}

/// A WasmController being deleted: stop its controller, release its parents'
/// finalizers, then its own cleanup finalizer.
async fn sync_deleted(
    inner: &Arc<Inner>,
    name: &str,
    wc: &WasmController,
    obj: &DynamicObject,
) -> Outcome {
    stop(inner, name).await;
    if !has(wc, CLEANUP_FINALIZER) {
        return Outcome::Forget;
    }
    if !crate::admission::writes_wasmcontroller() {
        // Another replica's to release; look again in case it goes away.
        return Outcome::Success {
            next: Some(inner.opts.plugin_poll),
        };
    }
    if let Err(e) = release_parents(inner, name, &wc.spec).await {
        tracing::warn!(controller = %name, error = %e, "releasing parents failed; retrying");
        return Outcome::Failure { at_least: None };
    }
    let wc_api: Api<DynamicObject> = Api::all_with(inner.client.clone(), &inner.wc_ar);
    match finalize::remove(&wc_api, obj, CLEANUP_FINALIZER, MANAGER_FIELD_MANAGER).await {
        Ok(()) => Outcome::Forget,
        Err(e) => {
            tracing::warn!(controller = %name, error = %e, "removing cleanup finalizer failed");
            Outcome::Failure { at_least: None }
        }
    }
}

/// Says on the WasmController that its spec is invalid.
async fn report_invalid_spec(
    api: &Api<WasmController>,
    wc: &WasmController,
    mut status: WasmControllerStatus,
    message: &str,
) {
    let generation = wc.metadata.generation;
    for cond in ["PluginLoaded", "Ready"] {
        set_cond(&mut status, cond, false, "InvalidSpec", message, generation);
    }
    write_wc_status(api, wc, status).await;
}

/// A controller that could not start, with the version it was to run.
struct FailedStart<'a> {
    name: &'a str,
    wc: &'a WasmController,
    digest: String,
    plugin: Arc<dyn ReconcilePlugin>,
    load_ms: Option<u64>,
}

/// Records a failed start (keeping the loaded version so a retry does not
/// load it again), says it once, and returns when to try again.
async fn start_failed(
    inner: &Arc<Inner>,
    api: &Api<WasmController>,
    f: FailedStart<'_>,
    mut status: WasmControllerStatus,
    message: &str,
) -> Duration {
    let (name, wc, generation) = (f.name, f.wc, f.wc.metadata.generation);
    let (news, delay) = {
        let mut st = lock(&inner.plugins);
        let ps = st.entry(name.to_string()).or_default();
        // Keep the loaded version: a retry must not load it again.
        ps.versions
            .keep_loaded(Role::Active, &f.digest, f.plugin, f.load_ms);
        ps.start_failures = ps.start_failures.saturating_add(1);
        let news = ps.start_error.as_deref() != Some(message);
        ps.start_error = Some(message.to_string());
        (news, start_retry_delay(ps.start_failures))
    };
    let retry_s = delay.as_secs();
    if news {
        tracing::warn!(controller = %name, error = %message, retry_s, "controller cannot start; retrying with backoff");
        inner.events.record(
            &wc_regarding(wc),
            EventKind::Warning,
            "CannotStart",
            message,
        );
    } else {
        tracing::debug!(controller = %name, error = %message, retry_s, "controller still cannot start");
    }
    set_cond(&mut status, "PluginLoaded", true, "Loaded", "", generation);
    status.plugin_digest = Some(f.digest);
    set_cond(
        &mut status,
        "Ready",
        false,
        "ResourceNotFound",
        message,
        generation,
    );
    write_wc_status(api, wc, status).await;
    delay
}

/// First delay before retrying a controller that could not start (a child or
/// parent kind the cluster does not serve yet); doubles per failure.
pub const START_RETRY_BASE: Duration = Duration::from_secs(1);
/// Longest delay between start attempts: a CRD installed later is picked up
/// within this long (or at once when the WasmController changes).
pub const START_RETRY_CAP: Duration = Duration::from_secs(60);

/// Delay after the `failures`-th consecutive failed start (1-based).
fn start_retry_delay(failures: u32) -> Duration {
    crate::backoff::Backoff {
        base: START_RETRY_BASE,
        cap: START_RETRY_CAP,
    }
    .delay(failures)
}

/// Puts the parents' status health on the WasmController:
/// `ParentStatusSchema` (does the parent CRD keep the host's status fields?)
/// and `ParentStatusAccepted` (does the API server store the status the host
/// writes?), each with a Warning event when it turns False.
fn report_parent_status(
    inner: &Arc<Inner>,
    wc: &WasmController,
    status: &mut WasmControllerStatus,
    report: &controller::StatusReport,
    generation: Option<i64>,
) {
    match &report.schema {
        SchemaCheck::Read(schema) => {
            let pruned = schema.pruned_host_fields();
            if pruned.is_empty() {
                set_cond(
                    status,
                    "ParentStatusSchema",
                    true,
                    "Compatible",
                    "",
                    generation,
                );
            } else {
                let message = format!(
                    "CRD {} prunes {}: parents never show the host's Ready condition or observedGeneration; \
                     declare them in the status schema (or set x-kubernetes-preserve-unknown-fields on status)",
                    schema.crd,
                    pruned.join(", ")
                );
                warn_cond(
                    inner,
                    wc,
                    status,
                    "ParentStatusSchema",
                    "StatusFieldsPruned",
                    &message,
                    generation,
                );
            }
        }
        SchemaCheck::Unreadable(why) => set_cond_to(
            status,
            "ParentStatusSchema",
            "Unknown",
            "SchemaUnreadable",
            why,
            generation,
        ),
        SchemaCheck::BuiltIn => {
            status
                .conditions
                .retain(|c| c.type_ != "ParentStatusSchema");
        }
    }
    match &report.rejected {
        None => set_cond(
            status,
            "ParentStatusAccepted",
            true,
            "Accepted",
            "",
            generation,
        ),
        Some((n, key, msg)) => {
            let message =
                format!("the API server rejected the status of {n} parent(s), e.g. {key}: {msg}");
            warn_cond(
                inner,
                wc,
                status,
                "ParentStatusAccepted",
                "StatusRejected",
                &message,
                generation,
            );
        }
    }
}

/// Sets condition `type_` False with a Warning event on the WasmController,
/// the event only when the condition did not already say so.
fn warn_cond(
    inner: &Arc<Inner>,
    wc: &WasmController,
    status: &mut WasmControllerStatus,
    type_: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let said = status
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "False" && c.message == message);
    if !said {
        tracing::warn!(
            controller = wc.metadata.name.as_deref().unwrap_or(""),
            condition = type_,
            reason,
            message,
            "parent status problem"
        );
        inner
            .events
            .record(&wc_regarding(wc), EventKind::Warning, reason, message);
    }
    set_cond(status, type_, false, reason, message, generation);
}

/// Looks up (and, for [`Lookup::Start`], claims) the load of `digest`.
fn load_state(
    inner: &Inner,
    name: &str,
    role: Role,
    digest: &str,
) -> Lookup<Arc<dyn ReconcilePlugin>> {
    lock(&inner.plugins)
        .entry(name.to_string())
        .or_default()
        .versions
        .lookup(role, digest)
}

/// The plugin the running controller `name` serves (its epoch's plugin).
async fn running_plugin(inner: &Inner, name: &str) -> Option<Arc<dyn ReconcilePlugin>> {
    inner
        .running
        .lock()
        .await
        .get(name)
        .map(|r| r.handle.ctl.serving_plugin())
}

/// One load to run: which role, which version, its bytes.
struct LoadJob {
    role: Role,
    digest: String,
    bytes: Vec<u8>,
    reload: bool,
}

/// Loads a version off the manager's sync loop, within the load slots
/// ([`crate::loads`]), so one controller's long compile never holds up
/// another controller's start or hot reload. Its end stores the result and
/// syncs the controller again.
fn spawn_load(inner: &Arc<Inner>, queue: &Arc<WorkQueue>, wc_key: &ObjectKey, job: LoadJob) {
    let inner = inner.clone();
    let queue = Arc::downgrade(queue);
    let key = wc_key.clone();
    tokio::spawn(async move {
        let LoadJob {
            role,
            digest,
            bytes,
            reload,
        } = job;
        let name = key.name.clone();
        let size = bytes.len();
        let slot = inner.load_slots.acquire(size).await;
        let started = std::time::Instant::now();
        let result = inner.loader.load(bytes).await;
        let load_ms = started.elapsed().as_millis() as u64;
        drop(slot);
        if let Some(obs) = &inner.opts.observer {
            obs.plugin_loaded(&name, reload, result.is_ok());
        }
        match &result {
            Ok(_) => {
                tracing::debug!(controller = %name, digest = %digest, ?role, size, load_ms, "plugin compiled")
            }
            Err(msg) => {
                tracing::warn!(controller = %name, digest = %digest, ?role, error = %msg, "plugin failed to load; previous version keeps running")
            }
        }
        {
            let mut st = lock(&inner.plugins);
            // The controller was deleted (or its state reset) meanwhile.
            let Some(ps) = st.get_mut(&name) else { return };
            if !ps
                .versions
                .load_finished(role, &digest, result, Some(load_ms))
            {
                return;
            }
        }
        if let Some(q) = queue.upgrade() {
            q.add(key);
        }
    });
}

/// Per-controller state of the plugin-loading path.
#[derive(Default)]
struct PluginState {
    /// Watch of the plugin ConfigMap (None for a path source).
    watch: Option<Arc<SourceWatch>>,
    /// Watch of the candidate's ConfigMap (None for a path source or no candidate).
    candidate_watch: Option<Arc<SourceWatch>>,
    /// Active, previous, candidate, loading, failed and rolled-back versions.
    versions: Versions<Arc<dyn ReconcilePlugin>>,
    /// What the running controller has installed of the candidate.
    delivery: delivery::Installed,
    /// resourceVersion of the ConfigMap the serving version came from.
    source_rv: Option<String>,
    /// Consecutive failed starts (backoff) and the last error (said once).
    start_failures: u32,
    start_error: Option<String>,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_rfc3339() -> String {
    crate::reconcile::whole_seconds(k8s_openapi::jiff::Timestamp::now())
}

/// Reads the plugin source: through the controller's ConfigMap watch (started
/// here on first use, restarted when the reference changes), or from a path.
async fn read_source(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    name: &str,
    src: &crate::crd::PluginSource,
    wc_key: &ObjectKey,
) -> Result<Arc<Fetched>, SourceError> {
    read_source_for(inner, queue, name, Role::Active, src, wc_key).await
}

/// [`read_source`] for either role (each has its own ConfigMap watch).
async fn read_source_for(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    name: &str,
    role: Role,
    src: &crate::crd::PluginSource,
    wc_key: &ObjectKey,
) -> Result<Arc<Fetched>, SourceError> {
    fn slot(ps: &mut PluginState, role: Role) -> &mut Option<Arc<SourceWatch>> {
        match role {
            Role::Active => &mut ps.watch,
            Role::Candidate => &mut ps.candidate_watch,
        }
    }
    let Some(cm) = &src.config_map else {
        *slot(
            lock(&inner.plugins).entry(name.to_string()).or_default(),
            role,
        ) = None;
        return match &src.path {
            Some(path) => plugin_source::fetch_path(path, src.sha256.as_deref())
                .await
                .map(Arc::new),
            None => Err(SourceError::NoSource),
        };
    };
    let watch = {
        let mut st = lock(&inner.plugins);
        let ps = st.entry(name.to_string()).or_default();
        match slot(ps, role) {
            Some(w) if w.source() == cm => w.clone(),
            _ => {
                let q = Arc::downgrade(queue);
                let k = wc_key.clone();
                let w = Arc::new(SourceWatch::start(
                    &inner.client,
                    cm,
                    Arc::new(move || {
                        if let Some(q) = q.upgrade() {
                            q.add(k.clone());
                        }
                    }),
                ));
                tracing::debug!(controller = %name, namespace = %cm.namespace, configmap = %cm.name, "watching plugin ConfigMap");
                *slot(ps, role) = Some(w.clone());
                w
            }
        }
    };
    watch.read(src.sha256.as_deref()).await
}

/// Wraps a new version in a judge when the spec asks for automatic rollback
/// and there is a previous version to go back to.
fn judged(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    spec: &WasmControllerSpec,
    p: Arc<dyn ReconcilePlugin>,
    digest: &str,
) -> Arc<dyn ReconcilePlugin> {
    let mut st = lock(&inner.plugins);
    let ps = st.entry(wc_key.name.clone()).or_default();
    let Some(policy) = &spec.plugin.rollback else {
        ps.versions.set_judge(None);
        return p;
    };
    let q = Arc::downgrade(queue);
    let k = wc_key.clone();
    let judge = Judge::new(
        policy,
        Box::new(move || {
            if let Some(q) = q.upgrade() {
                q.add(k.clone());
            }
        }),
    );
    ps.versions
        .set_judge(Some((digest.to_string(), judge.clone())));
    Judged::new(p, judge)
}

/// Swaps the previous version back in when the serving one failed its
/// judgement; returns the message to report.
async fn rollback_if_failed(inner: &Arc<Inner>, name: &str, serving: &str) -> Option<String> {
    let (judge, back) = {
        let mut st = lock(&inner.plugins);
        let ps = st.get_mut(name)?;
        let j = ps.versions.judge_of(serving)?;
        if j.verdict() != Verdict::Failed {
            return None;
        }
        (j, ps.versions.roll_back(&now_rfc3339())?)
    };
    let (faults, calls) = judge.counts();
    let (back_to, previous) = (back.digest, back.plugin);
    let msg = format!(
        "{serving} failed {faults} of its first {calls} reconciles (limit {}%); rolled back to {back_to}",
        judge.threshold_percent()
    );
    let mut running = inner.running.lock().await;
    let r = running.get_mut(name)?;
    r.handle.swap_plugin(previous);
    r.digest = back_to;
    drop(running);
    tracing::warn!(controller = %name, digest = %serving, faults, calls, action = "rollback", "plugin version faulted too often; rolled back");
    Some(msg)
}

/// Digest, contract, load time and source resourceVersion of the serving version.
async fn fill_plugin_status(inner: &Arc<Inner>, name: &str, status: &mut WasmControllerStatus) {
    let (digest, contract) = match inner.running.lock().await.get(name) {
        Some(r) => (
            Some(r.digest.clone()),
            r.handle
                .ctl
                .serving_plugin()
                .info()
                .map(|i| i.qualified_world()),
        ),
        None => (None, None),
    };
    if let (Some(obs), Some(d)) = (&inner.opts.observer, &digest) {
        obs.active_digest(name, Some(d));
    }
    if digest.is_some() {
        status.plugin_digest = digest;
    }
    if contract.is_some() {
        status.plugin_contract = contract;
    }
    let st = lock(&inner.plugins);
    if let Some(ps) = st.get(name) {
        if let Some(a) = ps.versions.active() {
            status.plugin_loaded_at = Some(a.loaded_at.clone());
        }
        if ps.source_rv.is_some() {
            status.plugin_source_resource_version = ps.source_rv.clone();
        }
    }
}

/// Reports a refused version: `PluginLoaded=False` with the reason, a Warning
/// event, and — when no version was ever loaded — `Ready=False` saying the
/// controller reconciles nothing. The serving version (if any) is untouched
/// and still reported as active.
async fn refuse(
    inner: &Arc<Inner>,
    api: &Api<WasmController>,
    wc: &WasmController,
    mut status: WasmControllerStatus,
    reason: &str,
    message: &str,
) {
    let name = wc.metadata.name.clone().unwrap_or_default();
    let generation = wc.metadata.generation;
    let serving = inner.running.lock().await.contains_key(&name);
    let message = if serving {
        format!("{message}; the previous version keeps running")
    } else {
        message.to_string()
    };
    inner
        .events
        .record(&wc_regarding(wc), EventKind::Warning, reason, &message);
    set_cond(
        &mut status,
        "PluginLoaded",
        false,
        reason,
        &message,
        generation,
    );
    if !serving {
        set_cond(
            &mut status,
            "Ready",
            false,
            "PluginNotLoaded",
            "no plugin version has loaded yet; no parent is reconciled",
            generation,
        );
    }
    fill_plugin_status(inner, &name, &mut status).await;
    write_wc_status(api, wc, status).await;
}

fn wc_regarding(wc: &WasmController) -> Regarding {
    Regarding {
        api_version: format!("{}/v1alpha1", crate::crd::GROUP),
        kind: "WasmController".into(),
        namespace: None,
        name: wc.metadata.name.clone().unwrap_or_default(),
        uid: wc.metadata.uid.clone().unwrap_or_default(),
    }
}

fn has(wc: &WasmController, f: &str) -> bool {
    wc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|l| l.iter().any(|x| x == f))
}

async fn stop(inner: &Inner, name: &str) {
    lock(&inner.plugins).remove(name);
    let r = inner.running.lock().await.remove(name);
    if let Some(r) = r {
        tracing::info!(controller = %name, action = "stop", "stopping controller");
        r.handle.stop().await;
        if let Some(obs) = &inner.opts.observer {
            obs.controller_removed(name);
        }
    }
}

/// Removes the controller's finalizer from every parent (fresh list, not cache).
async fn release_parents(
    inner: &Inner,
    name: &str,
    spec: &WasmControllerSpec,
) -> Result<(), kube::Error> {
    let parent = match resolve(&inner.client, spec.parent_ref()).await {
        Ok(p) => p,
        // No such resource: no parent can carry our finalizer.
        Err(crate::resolve::ResolveError::NotFound { .. }) => return Ok(()),
        Err(crate::resolve::ResolveError::InvalidApiVersion(_)) => return Ok(()),
        Err(crate::resolve::ResolveError::Discovery { source, .. }) => return Err(source),
    };
    let f = finalize::finalizer_name(name);
    let all: Api<DynamicObject> = Api::all_with(inner.client.clone(), &parent.ar);
    let list = all.list(&ListParams::default()).await?;
    for p in list.items {
        if !finalize::has_finalizer(&p, &f) {
            continue;
        }
        let api = match (&p.metadata.namespace, parent.namespaced) {
            (Some(ns), true) => Api::namespaced_with(inner.client.clone(), ns, &parent.ar),
            _ => all.clone(),
        };
        tracing::info!(controller = %name, namespace = p.metadata.namespace.as_deref().unwrap_or(""), parent = p.metadata.name.as_deref().unwrap_or(""), action = "release-parent", "removing finalizer of deleted controller");
        match finalize::remove(&api, &p, &f, MANAGER_FIELD_MANAGER).await {
            Ok(()) => {}
            Err(e) if classify(&e) == ApiErrorClass::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn set_cond(
    status: &mut WasmControllerStatus,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let value = if ok { "True" } else { "False" };
    set_cond_to(status, type_, value, reason, message, generation);
}

fn set_cond_to(
    status: &mut WasmControllerStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time({
        let t = k8s_openapi::jiff::Timestamp::now();
        k8s_openapi::jiff::Timestamp::from_second(t.as_second()).unwrap_or(t)
    });
    status.observed_generation = generation;
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = now;
            }
            c.status = value.into();
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = generation;
        }
        None => status.conditions.push(Condition {
            type_: type_.into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: generation,
            last_transition_time: now,
        }),
    }
}

async fn write_wc_status(
    api: &Api<WasmController>,
    wc: &WasmController,
    status: WasmControllerStatus,
) {
    if wc.status.as_ref() == Some(&status) || !crate::admission::writes_wasmcontroller() {
        return;
    }
    let name = wc.metadata.name.clone().unwrap_or_default();
    let pp = PatchParams {
        field_manager: Some(MANAGER_FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    // A field the new status drops (`shadow` and `rollout` once the candidate
    // is removed from the spec) must go as an explicit null: a merge patch
    // of the new status alone would leave it on the server.
    let old = wc
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok());
    let new = serde_json::to_value(&status).unwrap_or_default();
    let body = json!({"status": crate::status::merge_patch(old.as_ref(), &new)});
    if let Err(e) = api.patch_status(&name, &pp, &Patch::Merge(body)).await {
        tracing::debug!(controller = %name, error = %e, "writing WasmController status failed");
    }
}
