//! The controller manager: watches `WasmController` objects and starts,
//! reconfigures and stops one controller per object while the process runs.
//!
//! The manager is itself a level-triggered controller over WasmControllers (same
//! shared cache and work queue as the parents' controllers). It puts its own
//! finalizer ([`CLEANUP_FINALIZER`]) on every WasmController so that deleting
//! one can first remove that controller's finalizer from all of its parents —
//! otherwise parents would be stuck terminating forever (a known Metacontroller
//! bug). It re-reads each controller's plugin source every
//! [`ManagerOptions::plugin_poll`] and hot-swaps the plugin when its digest changes.
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
use crate::controller::{self, ControllerHandle, ControllerSettings, ControllerStats};
use crate::crd::{WasmController, WasmControllerSpec, WasmControllerStatus};
use crate::diff::stable_hash;
use crate::errors::{ApiErrorClass, classify};
use crate::finalize;
use crate::plugin::{PluginLoader, ReconcilePlugin};
use crate::plugin_source;
use crate::queue::{Backoff, ObjectKey, Outcome, WorkQueue};
use crate::resolve::resolve;

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
    /// How often each controller's plugin source is re-read for hot reload.
    pub plugin_poll: Duration,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            default_resync: controller::DEFAULT_RESYNC,
            backoff: Backoff::default(),
            plugin_poll: Duration::from_secs(5),
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
    wc_ar: ApiResource,
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

    /// Number of live shared caches (one watch each).
    pub fn live_caches(&self) -> usize {
        self.inner.caches.live()
    }
}

impl Manager {
    /// A manager that talks to the cluster through `client` and loads plugins with `loader`.
    pub fn new(client: kube::Client, loader: Arc<dyn PluginLoader>, opts: ManagerOptions) -> Self {
        let wc_ar = ApiResource::erase::<WasmController>(&());
        Self {
            inner: Arc::new(Inner {
                caches: Arc::new(CacheRegistry::new(client.clone())),
                client,
                loader,
                opts,
                running: tokio::sync::Mutex::new(HashMap::new()),
                wc_ar,
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
        let _sub = cache.subscribe(move |ch| {
            if !controller::parent_change_matters(ch) {
                return;
            }
            if let Some(o) = ch.new.or(ch.old) {
                q.add(crate::cache::key_of(o));
            }
        });
        let worker = {
            let inner = inner.clone();
            let queue = queue.clone();
            let cache = cache.clone();
            tokio::spawn(async move {
                cache.wait_synced().await;
                for k in cache.keys() {
                    queue.add(k);
                }
                while let Some(key) = queue.next().await {
                    let wc = cache.get(&key);
                    let outcome = sync_controller(&inner, &key, wc.as_deref()).await;
                    queue.done(&key, outcome);
                }
            })
        };
        shutdown.await;
        queue.close();
        let _ = worker.await;
        let running: Vec<Running> = inner.running.lock().await.drain().map(|(_, r)| r).collect();
        for r in running {
            r.handle.stop().await;
        }
        Ok(())
    }
}

async fn sync_controller(
    inner: &Arc<Inner>,
    key: &ObjectKey,
    obj: Option<&DynamicObject>,
) -> Outcome {
    let name = key.name.clone();
    let span = tracing::info_span!("controller-sync", controller = %name);
    let _g = span.enter();
    drop(_g);
    let Some(obj) = obj else {
        stop(inner, &name).await;
        return Outcome::Forget;
    };
    let wc: WasmController =
        match serde_json::from_value(serde_json::to_value(obj).unwrap_or_default()) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(controller = %name, error = %e, "WasmController does not parse");
                stop(inner, &name).await;
                return Outcome::Success { next: None };
            }
        };
    let api: Api<WasmController> = Api::all(inner.client.clone());
    let generation = wc.metadata.generation;

    if wc.metadata.deletion_timestamp.is_some() {
        stop(inner, &name).await;
        if !has(&wc, CLEANUP_FINALIZER) {
            return Outcome::Forget;
        }
        return match release_parents(inner, &name, &wc.spec).await {
            Ok(()) => {
                let dyn_obj = obj.clone();
                let wc_api: Api<DynamicObject> = Api::all_with(inner.client.clone(), &inner.wc_ar);
                match finalize::remove(&wc_api, &dyn_obj, CLEANUP_FINALIZER, MANAGER_FIELD_MANAGER)
                    .await
                {
                    Ok(()) => Outcome::Forget,
                    Err(e) => {
                        tracing::warn!(controller = %name, error = %e, "removing cleanup finalizer failed");
                        Outcome::Failure { at_least: None }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(controller = %name, error = %e, "releasing parents failed; retrying");
                Outcome::Failure { at_least: None }
            }
        };
    }
    if !has(&wc, CLEANUP_FINALIZER) {
        let wc_api: Api<DynamicObject> = Api::all_with(inner.client.clone(), &inner.wc_ar);
        if let Err(e) = finalize::add(&wc_api, obj, CLEANUP_FINALIZER, MANAGER_FIELD_MANAGER).await
        {
            tracing::debug!(controller = %name, error = %e, "adding cleanup finalizer failed; retrying");
            return Outcome::Failure { at_least: None };
        }
        // The finalizer write triggers another sync with the fresh object.
        return Outcome::Success { next: None };
    }

    let mut status = wc.status.clone().unwrap_or_default();
    if let Err(e) = wc.spec.validate() {
        stop(inner, &name).await;
        set_cond(
            &mut status,
            "PluginLoaded",
            false,
            "InvalidSpec",
            &e.to_string(),
            generation,
        );
        set_cond(
            &mut status,
            "Ready",
            false,
            "InvalidSpec",
            &e.to_string(),
            generation,
        );
        write_wc_status(&api, &wc, status).await;
        return Outcome::Success { next: None };
    }

    let (bytes, digest) = match plugin_source::fetch(&inner.client, &wc.spec.plugin).await {
        Ok(x) => x,
        Err(e) => {
            set_cond(
                &mut status,
                "PluginLoaded",
                false,
                "SourceUnavailable",
                &e.to_string(),
                generation,
            );
            write_wc_status(&api, &wc, status).await;
            return Outcome::Failure {
                at_least: Some(inner.opts.plugin_poll),
            };
        }
    };
    let spec_hash = stable_hash(&serde_json::to_value(&wc.spec).unwrap_or_default());
    let mut running = inner.running.lock().await;
    let current = running
        .get(&name)
        .map(|r| (r.spec_hash.clone(), r.digest.clone()));
    let needs_plugin = current.as_ref().map(|(_, d)| d != &digest).unwrap_or(true);
    let plugin: Option<Arc<dyn ReconcilePlugin>> = if needs_plugin {
        match inner.loader.load(bytes).await {
            Ok(p) => Some(p),
            Err(msg) => {
                drop(running);
                tracing::warn!(controller = %name, error = %msg, "plugin failed to load");
                set_cond(
                    &mut status,
                    "PluginLoaded",
                    false,
                    "LoadFailed",
                    &msg,
                    generation,
                );
                write_wc_status(&api, &wc, status).await;
                return Outcome::Failure {
                    at_least: Some(inner.opts.plugin_poll),
                };
            }
        }
    } else {
        None
    };
    match (current, plugin) {
        (Some((h, _)), Some(p)) if h == spec_hash => {
            tracing::info!(controller = %name, digest = %digest, action = "hot-reload", "plugin changed; swapping");
            if let Some(r) = running.get_mut(&name) {
                r.handle.swap_plugin(p);
                r.digest = digest.clone();
            }
        }
        (Some((h, _)), None) if h == spec_hash => {}
        (cur, p) => {
            let plugin = match (p, running.get(&name)) {
                (Some(p), _) => p,
                (None, Some(r)) => r.handle.ctl.plugin(),
                (None, None) => {
                    return Outcome::Failure { at_least: None };
                }
            };
            if cur.is_some()
                && let Some(old) = running.remove(&name)
            {
                tracing::info!(controller = %name, action = "reconfigure", "spec changed; restarting controller");
                old.handle.stop().await;
            }
            let settings = ControllerSettings {
                default_resync: inner.opts.default_resync,
                backoff: inner.opts.backoff,
            };
            match controller::start(
                &inner.client,
                &inner.caches,
                &name,
                &wc.spec,
                plugin,
                &settings,
            )
            .await
            {
                Ok(handle) => {
                    tracing::info!(controller = %name, digest = %digest, action = "start", "controller started");
                    running.insert(
                        name.clone(),
                        Running {
                            spec_hash,
                            digest: digest.clone(),
                            handle,
                        },
                    );
                }
                Err(e) => {
                    drop(running);
                    tracing::warn!(controller = %name, error = %e, "controller cannot start yet");
                    set_cond(&mut status, "PluginLoaded", true, "Loaded", "", generation);
                    status.plugin_digest = Some(digest);
                    set_cond(
                        &mut status,
                        "Ready",
                        false,
                        "ResourceNotFound",
                        &e.to_string(),
                        generation,
                    );
                    write_wc_status(&api, &wc, status).await;
                    return Outcome::Failure {
                        at_least: Some(Duration::from_secs(1)),
                    };
                }
            }
        }
    }
    let (ok, failing) = running
        .get(&name)
        .map(|r| r.handle.health_counts())
        .unwrap_or((0, 0));
    drop(running);
    status.plugin_digest = Some(digest);
    status.parents_ready = ok;
    status.parents_failing = failing;
    set_cond(&mut status, "PluginLoaded", true, "Loaded", "", generation);
    set_cond(&mut status, "Ready", true, "Running", "", generation);
    write_wc_status(&api, &wc, status).await;
    Outcome::Success {
        next: Some(inner.opts.plugin_poll),
    }
}

fn has(wc: &WasmController, f: &str) -> bool {
    wc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|l| l.iter().any(|x| x == f))
}

async fn stop(inner: &Inner, name: &str) {
    let r = inner.running.lock().await.remove(name);
    if let Some(r) = r {
        tracing::info!(controller = %name, action = "stop", "stopping controller");
        r.handle.stop().await;
    }
}

/// Removes the controller's finalizer from every parent (fresh list, not cache).
async fn release_parents(
    inner: &Inner,
    name: &str,
    spec: &WasmControllerSpec,
) -> Result<(), kube::Error> {
    let parent = match resolve(&inner.client, &spec.parent_resource).await {
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
        tracing::info!(controller = %name, parent = p.metadata.name.as_deref().unwrap_or(""), action = "release-parent", "removing finalizer of deleted controller");
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
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    );
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
    if wc.status.as_ref() == Some(&status) {
        return;
    }
    let name = wc.metadata.name.clone().unwrap_or_default();
    let pp = PatchParams {
        field_manager: Some(MANAGER_FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    if let Err(e) = api
        .patch_status(&name, &pp, &Patch::Merge(json!({"status": status})))
        .await
    {
        tracing::debug!(controller = %name, error = %e, "writing WasmController status failed");
    }
}
