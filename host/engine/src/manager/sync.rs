//! One sync of one WasmController, the manager's work-queue step, as named
//! steps: parse it, hold its cleanup finalizer, read and verify its plugin
//! source, honour a rollback, load the plugin off the loop, then hot-swap or
//! (re)start its controller, and report on the WasmController's status. A
//! step that ends the sync early returns the sync's [`Outcome`] as its `Err`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};

use super::{
    CLEANUP_FINALIZER, FailedStart, Inner, LoadJob, MANAGER_FIELD_MANAGER, Running, claims,
    delivery, fill_plugin_status, has, judged, load_state, lock, now_rfc3339, read_source, refuse,
    report_invalid_spec, report_parent_status, rollback_if_failed, running_plugin, set_cond,
    spawn_load, start_failed, stop, sync_deleted, wc_regarding, write_wc_status,
};
use crate::controller::{self, ControllerSettings};
use crate::crd::{WasmController, WasmControllerStatus};
use crate::diff::stable_hash;
use crate::events::EventKind;
use crate::finalize;
use crate::plugin::ReconcilePlugin;
use crate::plugin_source::{Fetched, SourceError};
use crate::queue::{ObjectKey, Outcome, WorkQueue};
use crate::versions::{Lookup, Role};

/// A step's result: go on with `T`, or end the sync with the outcome.
type Step<T> = Result<T, Outcome>;

/// The plugin a controller runs.
type Plugin = Arc<dyn ReconcilePlugin>;

/// What every step of one sync works with.
struct Ctx<'a> {
    inner: &'a Arc<Inner>,
    queue: &'a Arc<WorkQueue>,
    /// The WasmController's key (its name is the controller's).
    key: &'a ObjectKey,
    api: Api<WasmController>,
}

/// The running controllers, locked.
type RunningGuard<'a> = tokio::sync::MutexGuard<'a, HashMap<String, Running>>;

/// Syncs one WasmController (`None`: it is gone) and says when to look again.
pub(super) async fn sync_controller(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    key: &ObjectKey,
    obj: Option<&DynamicObject>,
) -> Outcome {
    let name = key.name.clone();
    // WARN level for the same reason as the reconcile span (reconcile.rs).
    let span = tracing::warn_span!("controller-sync", controller = %name);
    let _g = span.enter();
    drop(_g);
    let Some(obj) = obj else {
        stop(inner, &name).await;
        return Outcome::Forget;
    };
    match sync_present(inner, queue, key, &name, obj).await {
        Ok(outcome) | Err(outcome) => outcome,
    }
}

/// The steps of a sync of a WasmController that exists.
async fn sync_present(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    key: &ObjectKey,
    name: &str,
    obj: &DynamicObject,
) -> Step<Outcome> {
    let wc = parse(inner, name, obj).await?;
    if wc.metadata.deletion_timestamp.is_some() {
        return Ok(sync_deleted(inner, name, &wc, obj).await);
    }
    ensure_cleanup_finalizer(inner, name, &wc, obj).await?;
    let api: Api<WasmController> = Api::all(inner.client.clone());
    let mut status = wc.status.clone().unwrap_or_default();
    if let Err(e) = wc.spec.validate() {
        stop(inner, name).await;
        report_invalid_spec(&api, &wc, status, &e.to_string()).await;
        return Ok(Outcome::Success { next: None });
    }
    if status.parent.is_none() || status.observed_generation != wc.metadata.generation {
        status.parent = Some(claims::resource_name(&inner.client, wc.spec.parent_ref()).await);
    }
    let wcs = inner.caches.get(&inner.wc_ar);
    if let Some(c) = claims::conflict(&inner.client, &wcs, &wc).await {
        claims::yield_parent(inner, &wc, status, &c).await;
        return Ok(Outcome::Success { next: None });
    }
    let cx = Ctx {
        inner,
        queue,
        key,
        api,
    };
    let fetched = fetch_verified(&cx, &wc, &mut status).await?;
    let digest = fetched.digest.clone();
    let spec_hash = stable_hash(
        &serde_json::to_value(delivery::without_candidate(&wc.spec)).unwrap_or_default(),
    );
    let current = inner
        .running
        .lock()
        .await
        .get(name)
        .map(|r| (r.spec_hash.clone(), r.digest.clone()));
    hold_rolled_back(&cx, &wc, current.as_ref(), &digest, &mut status).await?;
    let needs_plugin = current.as_ref().map(|(_, d)| d != &digest).unwrap_or(true);
    let (plugin, load_ms) = if needs_plugin {
        let reload = current.is_some();
        let (p, ms) = plugin_for(&cx, &wc, &fetched, reload, &mut status).await?;
        (Some(p), ms)
    } else {
        (None, None)
    };
    let loaded_now = plugin.is_some();
    let install = Install {
        wc: &wc,
        current,
        plugin,
        spec_hash,
        digest: &digest,
        load_ms,
    };
    let running = inner.running.lock().await;
    let running = install_plugin(&cx, install, running, &mut status).await?;
    let (ok, failing) = running
        .get(name)
        .map(|r| r.handle.health_counts())
        .unwrap_or((0, 0));
    let report = running.get(name).map(|r| r.handle.status_report());
    drop(running);
    if loaded_now {
        note_loaded(inner, name, &wc, &fetched).await;
    }
    status.parents_ready = ok;
    status.parents_failing = failing;
    report_running(&cx, &wc, report, status).await;
    Ok(Outcome::Success {
        next: Some(inner.opts.plugin_poll),
    })
}

/// The WasmController's status for a running controller: loaded and ready,
/// its parents' health, the rollout's progress and the plugin versions.
async fn report_running(
    cx: &Ctx<'_>,
    wc: &WasmController,
    report: Option<crate::controller::StatusReport>,
    mut status: WasmControllerStatus,
) {
    let generation = wc.metadata.generation;
    set_cond(&mut status, "PluginLoaded", true, "Loaded", "", generation);
    if !claims::report_watch_failure(cx.inner, wc, &mut status) {
        set_cond(&mut status, "Ready", true, "Running", "", generation);
    }
    if let Some(report) = report {
        report_parent_status(cx.inner, wc, &mut status, &report, generation);
    }
    delivery::sync(cx.inner, cx.queue, cx.key, wc, &mut status).await;
    fill_plugin_status(cx.inner, &cx.key.name, &mut status).await;
    write_wc_status(&cx.api, wc, status).await;
}

/// The typed WasmController; one that does not parse stops its controller.
async fn parse(inner: &Inner, name: &str, obj: &DynamicObject) -> Step<WasmController> {
    match serde_json::from_value(serde_json::to_value(obj).unwrap_or_default()) {
        Ok(w) => Ok(w),
        Err(e) => {
            tracing::warn!(controller = %name, error = %e, "WasmController does not parse");
            stop(inner, name).await;
            Err(Outcome::Success { next: None })
        }
    }
}

/// The cleanup finalizer goes on before anything else (by the replica that
/// writes WasmControllers); its write triggers another sync.
async fn ensure_cleanup_finalizer(
    inner: &Inner,
    name: &str,
    wc: &WasmController,
    obj: &DynamicObject,
) -> Step<()> {
    if has(wc, CLEANUP_FINALIZER) || !crate::admission::writes_wasmcontroller() {
        return Ok(());
    }
    let wc_api: Api<DynamicObject> = Api::all_with(inner.client.clone(), &inner.wc_ar);
    if let Err(e) = finalize::add(&wc_api, obj, CLEANUP_FINALIZER, MANAGER_FIELD_MANAGER).await {
        tracing::debug!(controller = %name, error = %e, "adding cleanup finalizer failed; retrying");
        return Err(Outcome::Failure { at_least: None });
    }
    // The finalizer write triggers another sync with the fresh object.
    Err(Outcome::Success { next: None })
}

/// The plugin's bytes from its source, with their signature verified (a
/// refusal keeps the previous version running and says so on the status).
async fn fetch_verified(
    cx: &Ctx<'_>,
    wc: &WasmController,
    status: &mut WasmControllerStatus,
) -> Step<Arc<Fetched>> {
    let (inner, queue, key, api) = (cx.inner, cx.queue, cx.key, &cx.api);
    let name = key.name.as_str();
    let poll_later = Outcome::Success {
        next: Some(inner.opts.plugin_poll),
    };
    let fetched = match read_source(inner, queue, name, &wc.spec.plugin, key).await {
        Ok(f) => f,
        Err(SourceError::NotSynced { .. }) => {
            return Err(Outcome::Failure {
                at_least: Some(Duration::from_secs(1)),
            });
        }
        Err(e) => {
            let message = e.message_at("spec.plugin");
            // Said once per message: the source is read again every poll.
            if said_on_plugin_loaded(wc, &message) {
                tracing::debug!(controller = %name, reason = e.reason(), error = %message, "plugin source still refused");
            } else {
                tracing::warn!(controller = %name, reason = e.reason(), error = %message, "plugin source refused");
            }
            refuse(inner, api, wc, std::mem::take(status), e.reason(), &message).await;
            return Err(poll_later);
        }
    };
    // Signed plugins: refused like a wrong digest (crate::signing).
    if let Err(e) = crate::signing::verify(
        wc.spec.plugin.signature.as_ref(),
        &fetched.digest,
        fetched.signature.as_deref(),
    ) {
        let message = e.message_at(&crate::signing::signature_location(&wc.spec.plugin));
        tracing::warn!(controller = %name, reason = e.reason(), error = %message, "plugin signature refused; previous version keeps running");
        refuse(inner, api, wc, std::mem::take(status), e.reason(), &message).await;
        return Err(poll_later);
    }
    Ok(fetched)
}

/// Automatic rollback: when the serving version failed its judgement, roll
/// back and say so; while the source still holds the version rolled back
/// from, keep the old one and say so.
async fn hold_rolled_back(
    cx: &Ctx<'_>,
    wc: &WasmController,
    current: Option<&(String, String)>,
    digest: &str,
    status: &mut WasmControllerStatus,
) -> Step<()> {
    let (inner, api) = (cx.inner, &cx.api);
    let name = cx.key.name.clone();
    let poll_later = Outcome::Success {
        next: Some(inner.opts.plugin_poll),
    };
    if let Some((_, cur)) = current
        && let Some(msg) = rollback_if_failed(inner, &name, cur).await
    {
        inner.events.record(
            &wc_regarding(wc),
            EventKind::Warning,
            "PluginRolledBack",
            &msg,
        );
        set_cond(
            status,
            "PluginLoaded",
            false,
            "RolledBack",
            &msg,
            wc.metadata.generation,
        );
        fill_plugin_status(inner, &name, status).await;
        write_wc_status(api, wc, std::mem::take(status)).await;
        return Err(poll_later);
    }
    let still_rolled_back = lock(&inner.plugins)
        .entry(name.clone())
        .or_default()
        .versions
        .refuses(digest);
    if still_rolled_back {
        // Still the version we rolled back from: keep the old one and say so.
        fill_plugin_status(inner, &name, status).await;
        write_wc_status(api, wc, std::mem::take(status)).await;
        return Err(poll_later);
    }
    Ok(())
}

/// The loaded plugin for the fetched digest and its load time, or the
/// outcome while it loads (off this loop: other controllers go on meanwhile)
/// or after it failed. `reload`: a version serves already.
async fn plugin_for(
    cx: &Ctx<'_>,
    wc: &WasmController,
    fetched: &Fetched,
    reload: bool,
    status: &mut WasmControllerStatus,
) -> Step<(Plugin, Option<u64>)> {
    let (inner, queue, key, api) = (cx.inner, cx.queue, cx.key, &cx.api);
    let poll_later = Outcome::Success {
        next: Some(inner.opts.plugin_poll),
    };
    let digest = &fetched.digest;
    match load_state(inner, &key.name, Role::Active, digest) {
        // Same broken bytes as last time: nothing to retry until the source changes.
        Lookup::Failed(_) => Err(poll_later),
        Lookup::Refused(msg) => {
            let at = crate::plugin_source::source_location("spec.plugin", &wc.spec.plugin);
            let message = format!("{at}: {digest}: {msg}");
            refuse(
                inner,
                api,
                wc,
                std::mem::take(status),
                "LoadFailed",
                &message,
            )
            .await;
            Err(poll_later)
        }
        Lookup::Ready(p, ms) => Ok((p, ms)),
        // A load of this controller is running (its end syncs again), or
        // was just started off this loop: other controllers go on meanwhile.
        Lookup::Busy => Err(poll_later),
        Lookup::Start => {
            let load = LoadJob {
                role: Role::Active,
                digest: digest.clone(),
                bytes: fetched.bytes.clone(),
                reload,
            };
            spawn_load(inner, queue, key, load);
            Err(poll_later)
        }
    }
}

/// What a sync installs: the controller's spec and plugin, against what runs.
struct Install<'a> {
    wc: &'a WasmController,
    /// The running controller's spec hash and digest, if one runs.
    current: Option<(String, String)>,
    /// A newly loaded plugin (`None`: the serving one stays).
    plugin: Option<Plugin>,
    spec_hash: String,
    digest: &'a str,
    load_ms: Option<u64>,
}

/// Hot-swaps a new plugin into a controller whose spec is unchanged, or
/// (re)starts the controller for a new spec (or a first start).
async fn install_plugin<'g>(
    cx: &Ctx<'_>,
    i: Install<'_>,
    mut running: RunningGuard<'g>,
    status: &mut WasmControllerStatus,
) -> Step<RunningGuard<'g>> {
    let (inner, queue, key) = (cx.inner, cx.queue, cx.key);
    let name = &key.name;
    let same_spec = matches!(&i.current, Some((h, _)) if *h == i.spec_hash);
    match (same_spec, i.plugin.clone()) {
        (true, Some(p)) => {
            let (digest, load_ms) = (i.digest, i.load_ms);
            tracing::info!(controller = %name, digest = %digest, load_ms, action = "hot-reload", "plugin changed; swapped in");
            if let Some(r) = running.get_mut(name) {
                let p = judged(inner, queue, key, &i.wc.spec, p, digest);
                r.handle.swap_plugin(p.clone());
                r.digest = digest.to_string();
                lock(&inner.plugins)
                    .entry(name.clone())
                    .or_default()
                    .versions
                    .activate(digest, p, &now_rfc3339());
            }
            Ok(running)
        }
        (true, None) => Ok(running),
        (false, _) => start_controller(cx, i, running, status).await,
    }
}

/// (Re)starts a controller: stops the old one on a spec change, waits for a
/// rollout's candidate, starts the new one, and records a failed start.
async fn start_controller<'g>(
    cx: &Ctx<'_>,
    i: Install<'_>,
    mut running: RunningGuard<'g>,
    status: &mut WasmControllerStatus,
) -> Step<RunningGuard<'g>> {
    let (inner, queue, key) = (cx.inner, cx.queue, cx.key);
    let name = &key.name;
    let plugin = match (i.plugin, running.get(name)) {
        (Some(p), _) => p,
        (None, Some(r)) => r.handle.ctl.serving_plugin(),
        (None, None) => return Err(Outcome::Failure { at_least: None }),
    };
    if i.current.is_some()
        && let Some(old) = running.remove(name)
    {
        tracing::info!(controller = %name, action = "reconfigure", "spec changed; restarting controller");
        old.handle.stop().await;
    }
    let candidate = match delivery::initial(inner, queue, key, i.wc).await {
        delivery::Initial::Ready(c) => c,
        // A rollout in progress waits for its candidate to load.
        delivery::Initial::Wait => {
            return Err(Outcome::Success {
                next: Some(inner.opts.plugin_poll),
            });
        }
    };
    let settings = ControllerSettings {
        default_resync: inner.opts.default_resync,
        backoff: inner.opts.backoff,
        observer: inner.opts.observer.clone(),
        nudge: Some(nudge(queue, key)),
        admission: inner.opts.admission.clone(),
        recorder: inner.opts.recorder.clone(),
        candidate,
        turns: Some(inner.turns.clone()),
    };
    let started = controller::start(
        &inner.client,
        &inner.caches,
        name,
        &i.wc.spec,
        plugin.clone(),
        &settings,
    )
    .await;
    match started {
        Ok(handle) => {
            tracing::info!(
                controller = %name,
                parent = %handle.parent_resource().plural,
                digest = %i.digest,
                load_ms = i.load_ms,
                action = "start",
                "controller started"
            );
            let run = Running {
                spec_hash: i.spec_hash,
                digest: i.digest.to_string(),
                handle,
            };
            running.insert(name.clone(), run);
            note_started(inner, name);
            Ok(running)
        }
        Err(e) => {
            drop(running);
            let failed = FailedStart {
                name,
                wc: i.wc,
                digest: i.digest.to_string(),
                plugin,
                load_ms: i.load_ms,
            };
            let status = std::mem::take(status);
            let delay = start_failed(inner, &cx.api, failed, status, &e.to_string()).await;
            Err(Outcome::Success { next: Some(delay) })
        }
    }
}

/// A started controller clears the record of failed starts, and has no
/// candidate installed yet.
fn note_started(inner: &Inner, name: &str) {
    let mut st = lock(&inner.plugins);
    let ps = st.entry(name.to_string()).or_default();
    ps.start_failures = 0;
    ps.start_error = None;
    ps.delivery.forget_install();
}

/// How a controller asks for its WasmController to be synced again.
fn nudge(queue: &Arc<WorkQueue>, key: &ObjectKey) -> controller::Nudge {
    let q = Arc::downgrade(queue);
    let k = key.clone();
    Arc::new(move || {
        if let Some(q) = q.upgrade() {
            q.add(k.clone());
        }
    })
}

/// A newly loaded version serves: the lifecycle marks it active, remembers
/// the source's resourceVersion, and an Event says so.
async fn note_loaded(inner: &Arc<Inner>, name: &str, wc: &WasmController, fetched: &Fetched) {
    let digest = &fetched.digest;
    let serving = running_plugin(inner, name).await;
    let mut st = lock(&inner.plugins);
    let ps = st.entry(name.to_string()).or_default();
    if let Some(p) = serving {
        ps.versions.activate(digest, p, &now_rfc3339());
    }
    ps.source_rv = fetched.resource_version.clone();
    drop(st);
    inner.events.record(
        &wc_regarding(wc),
        EventKind::Normal,
        "PluginLoaded",
        &format!("now serving {digest}"),
    );
}

/// Whether the WasmController's `PluginLoaded` condition says `message`
/// already (followed, while a version serves, by "; the previous version
/// keeps running").
fn said_on_plugin_loaded(wc: &WasmController, message: &str) -> bool {
    wc.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "PluginLoaded" && c.status == "False" && c.message.starts_with(message)
        })
    })
}
