//! Progressive delivery in the manager's sync of one WasmController: loads
//! `spec.plugin.candidate` beside the active version, installs it in the
//! running controller with its shadow lane and canary route, moves the
//! rollout on ([`crate::canary::advance`]), applies `rollout` commands, and
//! reports all of it on the WasmController (`status.shadow`,
//! `status.rollout`, the `CandidateLoaded` and `Rollout` conditions, Events).
//!
//! The rollout state this host computes is kept in memory *and* written to
//! the status; the in-memory copy wins while this host leads (its cache may
//! not show its own last write yet), the status is where a restarted host or
//! a new leader picks it up.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{
    Inner, LoadJob, MANAGER_FIELD_MANAGER, load_state, lock, now_rfc3339, read_source_for,
    set_cond, spawn_load, warn_cond, wc_regarding,
};
use crate::canary::{self, Command, Observed, Transition};
use crate::candidate::{self, CanaryTally, Route};
use crate::crd::{
    CandidateSource, ROLLOUT_COMMAND_ANNOTATION, RolloutPhase, RolloutStatus, WasmController,
    WasmControllerSpec, WasmControllerStatus,
};
use crate::events::EventKind;
use crate::plugin::ReconcilePlugin;
use crate::plugin_source::SourceError;
use crate::queue::{ObjectKey, WorkQueue};
use crate::shadow::{LaneSettings, ShadowLane, Volatile};
use crate::versions::{Lookup, Role};

/// Default number of differences kept in `status.shadow`.
pub const DEFAULT_MAX_DIFFERENCES: u32 = 10;
/// Default number of shadow calls at once per controller.
pub const DEFAULT_SHADOW_CALLS: u32 = 2;
/// Parents whose shadow call may wait for a free one (a newer offer for the
/// same parent replaces the waiting one). Bounds the memory a slow candidate
/// can hold to this many requests and active answers.
pub const SHADOW_BACKLOG: usize = 256;

/// What this host has installed of the candidate in the running controller.
#[derive(Default)]
pub(super) struct Installed {
    /// (candidate digest, route key, settings fingerprint) of the installed
    /// candidate: a change of any of them installs it again.
    key: Option<(String, String, u64)>,
    /// The shadow lane and canary tally of `digest` (kept across route changes).
    lane: Option<(String, Option<Arc<ShadowLane>>, Arc<CanaryTally>)>,
    /// The rollout state this host last computed.
    rollout: Option<RolloutStatus>,
    /// The candidate whose first difference was reported with an Event.
    reported_first: Option<String>,
}

impl Installed {
    /// The controller was (re)started: nothing of the candidate is in it.
    pub(super) fn forget_install(&mut self) {
        self.key = None;
    }
}

/// The spec without the candidate and the rollout: what restarts a
/// controller when it changes (a new candidate or rollout step must not).
pub(super) fn without_candidate(spec: &WasmControllerSpec) -> WasmControllerSpec {
    let mut s = spec.clone();
    s.plugin.candidate = None;
    s.rollout = None;
    s
}

/// Brings the running controller's candidate in line with the spec and
/// reports it in `status`.
pub(super) async fn sync(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    wc: &WasmController,
    status: &mut WasmControllerStatus,
) {
    let name = wc_key.name.as_str();
    let Some(cand) = &wc.spec.plugin.candidate else {
        clear(inner, name, status).await;
        return;
    };
    let Ok((plugin, digest)) = candidate_plugin(inner, queue, wc_key, wc, cand, status).await
    else {
        return;
    };
    let running = inner.running.lock().await;
    let Some(r) = running.get(name) else { return };
    let (shadow, tally) = lane_for(inner, queue, wc_key, &digest, cand, status);
    let (route, rollout) = match &wc.spec.rollout {
        None => (Route::Nobody, None),
        Some(policy) => {
            let st = rollout_state(inner, wc, &digest, &r.handle, &tally, status);
            (canary::route(policy, &st), Some(st))
        }
    };
    let key = (
        digest.clone(),
        route_key(rollout.as_ref()),
        settings_fingerprint(cand),
    );
    let installed = lock(&inner.plugins)
        .entry(name.to_string())
        .or_default()
        .delivery
        .key
        .clone();
    if installed.as_ref() != Some(&key) {
        tracing::info!(controller = %name, digest = %digest, route = %key.1, action = "install-candidate", "candidate installed");
        r.handle.set_candidate(Some(Arc::new(candidate::Installed {
            digest: digest.clone(),
            plugin,
            limits: candidate_limits(wc, cand),
            config: cand.config.clone(),
            route,
            shadow: shadow.clone(),
            tally,
        })));
    }
    drop(running);
    {
        let mut st = lock(&inner.plugins);
        let d = &mut st.entry(name.to_string()).or_default().delivery;
        d.key = Some(key);
        d.rollout = rollout.clone();
    }
    report_rollout(wc, status, rollout);
    report_shadow(inner, wc, status, shadow.as_deref(), &digest);
}

/// A fingerprint of the candidate's whole spec (config, limits, volatile
/// fields, …): a candidate whose config changed while its component stayed
/// the same must be installed again, or `promote` would ship the old config.
fn settings_fingerprint(cand: &CandidateSource) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(cand).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// What a controller about to start gets of the candidate.
pub(super) enum Initial {
    /// Start with this candidate installed (or none).
    Ready(Option<Arc<candidate::Installed>>),
    /// A rollout in progress routes parents to a candidate still loading:
    /// starting now would run them on the active version meanwhile.
    Wait,
}

/// The candidate to install at a controller's start, routed as the rollout
/// state (this host's, else the status's) says — no gate is evaluated and no
/// command applied here; the sync after the start does that.
pub(super) async fn initial(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    wc: &WasmController,
) -> Initial {
    let Some(cand) = &wc.spec.plugin.candidate else {
        return Initial::Ready(None);
    };
    let name = wc_key.name.as_str();
    let mut scratch = wc.status.clone().unwrap_or_default();
    let mine = lock(&inner.plugins)
        .get(name)
        .and_then(|ps| ps.delivery.rollout.clone());
    let state = mine.or_else(|| scratch.rollout.clone());
    let (plugin, digest) = match candidate_plugin(inner, queue, wc_key, wc, cand, &mut scratch)
        .await
    {
        Ok(x) => x,
        Err(loading) => {
            let routes = wc.spec.rollout.is_some()
                && state.as_ref().is_some_and(|r| {
                    matches!(
                        r.phase,
                        RolloutPhase::Progressing | RolloutPhase::Paused | RolloutPhase::Promoted
                    )
                });
            return if loading && routes {
                Initial::Wait
            } else {
                Initial::Ready(None)
            };
        }
    };
    let (shadow, tally) = lane_for(inner, queue, wc_key, &digest, cand, &scratch);
    let route = match (&wc.spec.rollout, &state) {
        (Some(p), Some(st)) if st.candidate_digest == digest => canary::route(p, st),
        _ => Route::Nobody,
    };
    Initial::Ready(Some(Arc::new(candidate::Installed {
        digest,
        plugin,
        limits: candidate_limits(wc, cand),
        config: cand.config.clone(),
        route,
        shadow,
        tally,
    })))
}

/// The candidate's limits: its own, else the controller's.
fn candidate_limits(wc: &WasmController, cand: &CandidateSource) -> wr_runtime::CallLimits {
    let mut spec = wc.spec.clone();
    if cand.limits.is_some() {
        spec.limits = cand.limits.clone();
    }
    crate::target::call_limits(&spec)
}

/// The loaded candidate of the spec and its digest, loading it (off this
/// loop) when needed. `Err(true)`: still loading (or its source not read
/// yet); `Err(false)`: it cannot be loaded (said on `CandidateLoaded`).
async fn candidate_plugin(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    wc: &WasmController,
    cand: &CandidateSource,
    status: &mut WasmControllerStatus,
) -> Result<(Arc<dyn ReconcilePlugin>, String), bool> {
    let name = wc_key.name.as_str();
    let generation = wc.metadata.generation;
    let fetched =
        match read_source_for(inner, queue, name, Role::Candidate, &cand.source(), wc_key).await {
            Ok(f) => f,
            Err(SourceError::NotSynced { .. }) => return Err(true),
            Err(e) => {
                let message = format!("candidate: {e}");
                warn_cond(
                    inner,
                    wc,
                    status,
                    "CandidateLoaded",
                    e.reason(),
                    &message,
                    generation,
                );
                return Err(false);
            }
        };
    // The controller's signature policy covers the candidate too: a canary
    // would otherwise run unsigned code on migrated parents.
    if let Err(e) = crate::signing::verify(
        wc.spec.plugin.signature.as_ref(),
        &fetched.digest,
        fetched.signature.as_deref(),
    ) {
        let message = format!("candidate: {e}");
        warn_cond(
            inner,
            wc,
            status,
            "CandidateLoaded",
            e.reason(),
            &message,
            generation,
        );
        return Err(false);
    }
    let digest = fetched.digest.clone();
    {
        let st = lock(&inner.plugins);
        if let Some(c) = st.get(name).and_then(|ps| ps.versions.candidate())
            && c.digest == digest
        {
            let p = c.plugin.clone();
            drop(st);
            set_cond(
                status,
                "CandidateLoaded",
                true,
                "Loaded",
                &format!("candidate {digest}"),
                generation,
            );
            return Ok((p, digest));
        }
    }
    match load_state(inner, name, Role::Candidate, &digest) {
        Lookup::Ready(p, _) => {
            lock(&inner.plugins)
                .entry(name.to_string())
                .or_default()
                .versions
                .set_candidate(&digest, p.clone(), &now_rfc3339());
            tracing::info!(controller = %name, digest = %digest, action = "candidate-loaded", "candidate version loaded");
            inner.events.record(
                &wc_regarding(wc),
                EventKind::Normal,
                "CandidateLoaded",
                &format!("candidate {digest} loaded"),
            );
            set_cond(
                status,
                "CandidateLoaded",
                true,
                "Loaded",
                &format!("candidate {digest}"),
                generation,
            );
            Ok((p, digest))
        }
        Lookup::Start => {
            let job = LoadJob {
                role: Role::Candidate,
                digest,
                bytes: fetched.bytes.clone(),
                reload: false,
            };
            spawn_load(inner, queue, wc_key, job);
            Err(true)
        }
        Lookup::Busy => Err(true),
        // Said again (once per status, see `warn_cond`): the first report
        // may have gone to the scratch status of a controller's start.
        Lookup::Failed(msg) | Lookup::Refused(msg) => {
            let message = format!("candidate {digest}: {msg}");
            warn_cond(
                inner,
                wc,
                status,
                "CandidateLoaded",
                "LoadFailed",
                &message,
                generation,
            );
            Err(false)
        }
    }
}

/// The shadow lane (None when shadow calls are off) and canary tally of
/// candidate `digest`, new when the candidate changed.
fn lane_for(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    digest: &str,
    cand: &CandidateSource,
    status: &WasmControllerStatus,
) -> (Option<Arc<ShadowLane>>, Arc<CanaryTally>) {
    let name = wc_key.name.as_str();
    let mut st = lock(&inner.plugins);
    let d = &mut st.entry(name.to_string()).or_default().delivery;
    if let Some((dg, lane, tally)) = &d.lane
        && dg == digest
        && lane.is_some() == cand.shadow.unwrap_or(true)
    {
        return (lane.clone(), tally.clone());
    }
    let lane = cand.shadow.unwrap_or(true).then(|| {
        let q = Arc::downgrade(queue);
        let k = wc_key.clone();
        let nudge: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(q) = q.upgrade() {
                q.add(k.clone());
            }
        });
        let settings = LaneSettings {
            max_concurrent: cand
                .max_concurrent_shadow_calls
                .unwrap_or(DEFAULT_SHADOW_CALLS)
                .max(1) as usize,
            max_pending: SHADOW_BACKLOG,
            max_differences: cand.max_differences.unwrap_or(DEFAULT_MAX_DIFFERENCES) as usize,
            volatile: cand
                .volatile_fields
                .iter()
                .map(|v| Volatile::parse(v))
                .collect(),
        };
        // A restarted host continues the counts the status shows.
        let from = status
            .shadow
            .as_ref()
            .filter(|s| s.candidate_digest == digest);
        ShadowLane::resume(
            name,
            settings,
            inner.opts.observer.clone(),
            Some(nudge),
            from,
        )
    });
    let tally = Arc::new(CanaryTally::default());
    d.lane = Some((digest.to_string(), lane.clone(), tally.clone()));
    d.key = None;
    (lane, tally)
}

/// A key that changes whenever the set of parents the candidate serves does.
fn route_key(st: Option<&RolloutStatus>) -> String {
    match st {
        None => "shadow".into(),
        Some(s) => format!("{:?}/{}", s.phase, s.step),
    }
}

/// The rollout state after this sync: this host's last state (or the
/// status's, or a fresh start for a new candidate), a pending command
/// applied, the gates evaluated.
fn rollout_state(
    inner: &Arc<Inner>,
    wc: &WasmController,
    digest: &str,
    handle: &crate::controller::ControllerHandle,
    tally: &Arc<CanaryTally>,
    status: &WasmControllerStatus,
) -> RolloutStatus {
    let Some(policy) = &wc.spec.rollout else {
        return RolloutStatus::default();
    };
    let name = wc.metadata.name.as_deref().unwrap_or_default();
    let now = Timestamp::now();
    let (mine, installed) = {
        let st = lock(&inner.plugins);
        let d = st.get(name).map(|ps| &ps.delivery);
        (
            d.and_then(|d| d.rollout.clone()),
            d.and_then(|d| d.key.clone()),
        )
    };
    let mut st = match mine.or_else(|| status.rollout.clone()) {
        Some(s) if s.candidate_digest == digest => s,
        _ => {
            tracing::info!(controller = %name, digest = %digest, action = "rollout-start", "canary rollout started");
            record(
                inner,
                wc,
                EventKind::Normal,
                "RolloutStarted",
                &format!("rollout of {digest} started at step 1"),
            );
            canary::begin(policy, digest, now)
        }
    };
    if let Some(cmd) = pending_command(inner, wc) {
        st = canary::apply_command(policy, &st, cmd, now);
        tracing::info!(controller = %name, command = ?cmd, phase = ?st.phase, action = "rollout-command", "rollout command applied");
        record(
            inner,
            wc,
            EventKind::Normal,
            "RolloutCommand",
            st.message.as_deref().unwrap_or(""),
        );
        if matches!(cmd, Command::Resume) {
            tally.reset();
        }
    }
    // Gates judge what the installed route produced: only when it is this state's.
    if installed.as_ref().map(|k| k.1.as_str()) != Some(route_key(Some(&st)).as_str())
        || installed.as_ref().map(|k| k.0.as_str()) != Some(digest)
    {
        return st;
    }
    let migrated = handle.migrated();
    let (faults, permanent) = tally.counts();
    let seen = Observed {
        migrated: migrated.len() as u32,
        ready: migrated.iter().filter(|(_, h)| *h == Some(true)).count() as u32,
        answered: migrated.iter().filter(|(_, h)| h.is_some()).count() as u32,
        faults,
        permanent,
    };
    let (next, transition) = canary::advance(policy, &st, seen, now);
    match transition {
        None => {}
        Some(Transition::Advanced(step)) => {
            tally.reset();
            let msg = format!("step {} of {} started", step + 1, next.steps);
            tracing::info!(controller = %name, step = step + 1, action = "rollout-step", "rollout step started");
            record(inner, wc, EventKind::Normal, "RolloutStep", &msg);
        }
        Some(Transition::Promoted) => {
            tracing::info!(controller = %name, digest = %digest, action = "rollout-promote", "candidate promoted");
            record(
                inner,
                wc,
                EventKind::Normal,
                "RolloutPromoted",
                next.message.as_deref().unwrap_or(""),
            );
        }
        Some(Transition::RolledBack(why)) => {
            tracing::warn!(controller = %name, digest = %digest, reason = %why, action = "rollout-rollback", "rollout gate failed; rolled back");
            record(
                inner,
                wc,
                EventKind::Warning,
                "RolloutRolledBack",
                next.message.as_deref().unwrap_or(&why),
            );
        }
    }
    next
}

fn record(inner: &Inner, wc: &WasmController, kind: EventKind, reason: &str, message: &str) {
    inner
        .events
        .record(&wc_regarding(wc), kind, reason, message);
}

/// The command in the WasmController's annotation, removed once read (a
/// bad one is removed and logged).
fn pending_command(inner: &Arc<Inner>, wc: &WasmController) -> Option<Command> {
    let raw = wc
        .metadata
        .annotations
        .as_ref()?
        .get(ROLLOUT_COMMAND_ANNOTATION)?
        .clone();
    let name = wc.metadata.name.clone().unwrap_or_default();
    let api: Api<WasmController> = Api::all(inner.client.clone());
    tokio::spawn(async move {
        let pp = PatchParams {
            field_manager: Some(MANAGER_FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let body = json!({"metadata": {"annotations": {ROLLOUT_COMMAND_ANNOTATION: null}}});
        if let Err(e) = api.patch(&name, &pp, &Patch::Merge(&body)).await {
            tracing::warn!(controller = %name, error = %e, "removing the rollout command annotation failed");
        }
    });
    match raw.trim().parse::<Command>() {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(controller = %wc.metadata.name.as_deref().unwrap_or(""), error = %e, "ignoring rollout command");
            None
        }
    }
}

/// `status.rollout` and the `Rollout` condition.
fn report_rollout(
    wc: &WasmController,
    status: &mut WasmControllerStatus,
    st: Option<RolloutStatus>,
) {
    let generation = wc.metadata.generation;
    match &st {
        None => status.conditions.retain(|c| c.type_ != "Rollout"),
        Some(s) => {
            let msg = s.message.clone().unwrap_or_default();
            let (ok, reason) = match s.phase {
                RolloutPhase::Progressing => (true, "Progressing"),
                RolloutPhase::Paused => (true, "Paused"),
                RolloutPhase::Promoted => (true, "Promoted"),
                RolloutPhase::RolledBack => (false, "RolledBack"),
                RolloutPhase::Aborted => (false, "Aborted"),
            };
            set_cond(status, "Rollout", ok, reason, &msg, generation);
        }
    }
    status.rollout = st;
}

/// `status.shadow`, and an Event when the first difference appears.
fn report_shadow(
    inner: &Arc<Inner>,
    wc: &WasmController,
    status: &mut WasmControllerStatus,
    lane: Option<&ShadowLane>,
    digest: &str,
) {
    let Some(lane) = lane else {
        status.shadow = None;
        return;
    };
    let new = lane.status(digest);
    let name = wc.metadata.name.as_deref().unwrap_or_default();
    let shown_before = status
        .shadow
        .as_ref()
        .is_some_and(|s| s.candidate_digest == digest && s.differing + s.failing > 0);
    if new.differing + new.failing > 0 {
        let mut st = lock(&inner.plugins);
        let d = &mut st.entry(name.to_string()).or_default().delivery;
        if d.reported_first.as_deref() != Some(digest) {
            d.reported_first = Some(digest.to_string());
            drop(st);
            if !shown_before {
                let what = new
                    .differences
                    .first()
                    .map(|d| {
                        format!(
                            "{} {} {}",
                            d.parent,
                            d.child.as_deref().unwrap_or("-"),
                            d.field
                        )
                    })
                    .unwrap_or_default();
                tracing::info!(controller = %name, digest = %digest, action = "shadow-difference", "candidate output differs from the active output");
                record(
                    inner,
                    wc,
                    EventKind::Warning,
                    "ShadowDifference",
                    &format!(
                        "candidate {digest} answers differently from the active version, first: {what}"
                    ),
                );
            }
        }
    }
    status.shadow = Some(new);
}

/// The spec names no candidate: uninstall it and clear its status.
async fn clear(inner: &Arc<Inner>, name: &str, status: &mut WasmControllerStatus) {
    let had = {
        let mut st = lock(&inner.plugins);
        let ps = st.entry(name.to_string()).or_default();
        let had = ps.delivery.key.is_some();
        ps.versions.clear_candidate();
        ps.candidate_watch = None;
        ps.delivery = Installed::default();
        had
    };
    if had && let Some(r) = inner.running.lock().await.get(name) {
        r.handle.set_candidate(None);
    }
    status.shadow = None;
    status.rollout = None;
    status
        .conditions
        .retain(|c| c.type_ != "Rollout" && c.type_ != "CandidateLoaded");
}
