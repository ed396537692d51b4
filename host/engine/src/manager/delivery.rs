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
    CandidateSource, ROLLOUT_COMMAND_ANNOTATION, RolloutPhase, RolloutPolicy, RolloutStatus,
    ShadowStatus, WasmController, WasmControllerSpec, WasmControllerStatus,
};
use crate::events::EventKind;
use crate::plugin::ReconcilePlugin;
use crate::plugin_source::{Fetched, SourceError};
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
    /// The shadow lane and canary tally of the candidate (kept across route
    /// changes).
    lane: Option<Lane>,
    /// The rollout state this host last computed.
    rollout: Option<RolloutStatus>,
    /// The candidate whose first difference was reported with an Event.
    reported_first: Option<String>,
}

/// The shadow lane and canary tally of one candidate, and what they were
/// made for.
struct Lane {
    key: LaneKey,
    shadow: Option<Arc<ShadowLane>>,
    tally: Arc<CanaryTally>,
}

/// What a shadow lane is made for: a change of any of it makes a new lane.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LaneKey {
    digest: String,
    /// Shadow calls on (`shadow`, default true).
    shadow: bool,
    /// How outputs are compared and reported: `volatileFields`, `maxDifferences`.
    comparison: (Vec<String>, Option<u32>),
    /// `maxConcurrentShadowCalls`.
    concurrency: Option<u32>,
}

impl LaneKey {
    fn of(digest: &str, cand: &CandidateSource) -> Self {
        Self {
            digest: digest.to_string(),
            shadow: cand.shadow.unwrap_or(true),
            comparison: (cand.volatile_fields.clone(), cand.max_differences),
            concurrency: cand.max_concurrent_shadow_calls,
        }
    }
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
    let fetched = fetch_candidate(inner, queue, wc_key, wc, cand, status).await?;
    let digest = fetched.digest.clone();
    if let Some(p) = already_loaded(inner, &wc_key.name, &digest) {
        candidate_loaded(wc, status, &digest);
        return Ok((p, digest));
    }
    load_candidate(inner, queue, wc_key, wc, &fetched, status)
}

/// The candidate's bytes from its source, with the controller's signature
/// policy checked (a canary would otherwise run unsigned code on migrated
/// parents). A refusal is said on `CandidateLoaded` (`Err(false)`);
/// `Err(true)`: the source is not read yet.
async fn fetch_candidate(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    wc: &WasmController,
    cand: &CandidateSource,
    status: &mut WasmControllerStatus,
) -> Result<Arc<Fetched>, bool> {
    let name = wc_key.name.as_str();
    let source = cand.source();
    // `message` names its field (spec.plugin.candidate…).
    let refused = |status: &mut WasmControllerStatus, reason: &str, message: &str| {
        let generation = wc.metadata.generation;
        warn_cond(
            inner,
            wc,
            status,
            "CandidateLoaded",
            reason,
            message,
            generation,
        );
        false
    };
    let fetched = match read_source_for(inner, queue, name, Role::Candidate, &source, wc_key).await
    {
        Ok(f) => f,
        Err(SourceError::NotSynced { .. }) => return Err(true),
        Err(e) => {
            let message = e.message_at("spec.plugin.candidate");
            return Err(refused(status, e.reason(), &message));
        }
    };
    let verified = crate::signing::verify(
        wc.spec.plugin.signature.as_ref(),
        &fetched.digest,
        fetched.signature.as_deref(),
    );
    if let Err(e) = verified {
        let at = crate::signing::signature_location(&source);
        let message = format!("spec.plugin.candidate: {}", e.message_at(&at));
        return Err(refused(status, e.reason(), &message));
    }
    Ok(fetched)
}

/// The candidate of `digest` when the controller's versions hold it loaded.
fn already_loaded(inner: &Inner, name: &str, digest: &str) -> Option<Arc<dyn ReconcilePlugin>> {
    let st = lock(&inner.plugins);
    let c = st.get(name).and_then(|ps| ps.versions.candidate())?;
    (c.digest == digest).then(|| c.plugin.clone())
}

/// `CandidateLoaded=True` for `digest`.
fn candidate_loaded(wc: &WasmController, status: &mut WasmControllerStatus, digest: &str) {
    let message = format!("candidate {digest}");
    set_cond(
        status,
        "CandidateLoaded",
        true,
        "Loaded",
        &message,
        wc.metadata.generation,
    );
}

/// Loads the fetched candidate off this loop (`Err(true)` meanwhile), or
/// takes the finished load: the candidate version, an Event and the
/// condition; a failed load is said on `CandidateLoaded` (`Err(false)`).
fn load_candidate(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    wc: &WasmController,
    fetched: &Fetched,
    status: &mut WasmControllerStatus,
) -> Result<(Arc<dyn ReconcilePlugin>, String), bool> {
    let name = wc_key.name.as_str();
    let digest = fetched.digest.clone();
    match load_state(inner, name, Role::Candidate, &digest) {
        Lookup::Ready(p, _) => {
            lock(&inner.plugins)
                .entry(name.to_string())
                .or_default()
                .versions
                .set_candidate(&digest, p.clone(), &now_rfc3339());
            tracing::info!(controller = %name, digest = %digest, action = "candidate-loaded", "candidate version loaded");
            let message = format!("candidate {digest} loaded");
            record(inner, wc, EventKind::Normal, "CandidateLoaded", &message);
            candidate_loaded(wc, status, &digest);
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
            let at = match &wc.spec.plugin.candidate {
                Some(c) => {
                    crate::plugin_source::source_location("spec.plugin.candidate", &c.source())
                }
                None => "spec.plugin.candidate".to_string(),
            };
            let message = format!("{at}: candidate {digest}: {msg}");
            let generation = wc.metadata.generation;
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
/// candidate `digest`: kept while the candidate and its shadow settings stay
/// the same, a new lane when a setting changed (the gates' tally stays with
/// the digest).
fn lane_for(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    digest: &str,
    cand: &CandidateSource,
    status: &WasmControllerStatus,
) -> (Option<Arc<ShadowLane>>, Arc<CanaryTally>) {
    let name = wc_key.name.as_str();
    let wanted = LaneKey::of(digest, cand);
    let mut st = lock(&inner.plugins);
    let d = &mut st.entry(name.to_string()).or_default().delivery;
    if let Some(l) = d.lane.as_ref().filter(|l| l.key == wanted) {
        return (l.shadow.clone(), l.tally.clone());
    }
    let same_digest = d.lane.as_ref().filter(|l| l.key.digest == digest);
    let tally = same_digest.map_or_else(Arc::default, |l| l.tally.clone());
    // The counts so far, when the comparison rules are the same: this host's
    // lane's (a new concurrency only), else what the status shows (a
    // restarted host). New volatile fields or a new maxDifferences count
    // afresh: earlier counts and differences were judged by other rules.
    let from = match same_digest {
        Some(l) if l.key.comparison == wanted.comparison => {
            l.shadow.as_ref().map(|lane| lane.status(digest))
        }
        Some(_) => None,
        None => status
            .shadow
            .clone()
            .filter(|s| s.candidate_digest == digest),
    };
    let shadow = wanted
        .shadow
        .then(|| new_lane(inner, queue, wc_key, cand, from.as_ref()));
    d.lane = Some(Lane {
        key: wanted,
        shadow: shadow.clone(),
        tally: tally.clone(),
    });
    d.key = None;
    (shadow, tally)
}

/// A shadow lane for `cand`'s settings, continuing the counts of `from`.
fn new_lane(
    inner: &Arc<Inner>,
    queue: &Arc<WorkQueue>,
    wc_key: &ObjectKey,
    cand: &CandidateSource,
    from: Option<&ShadowStatus>,
) -> Arc<ShadowLane> {
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
    let name = wc_key.name.as_str();
    ShadowLane::resume(
        name,
        settings,
        inner.opts.observer.clone(),
        Some(nudge),
        from,
    )
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
    let known = mine.or_else(|| status.rollout.clone());
    let mut st = current_rollout(inner, wc, policy, digest, known, now);
    if let Some(cmd) = pending_command(inner, wc) {
        st = apply_command(inner, wc, policy, &st, cmd, tally, now);
    }
    // Gates judge what the installed route produced: only when it is this state's.
    let judged = installed
        .as_ref()
        .is_some_and(|k| k.0 == digest && k.1 == route_key(Some(&st)));
    if !judged {
        return st;
    }
    let (next, transition) = canary::advance(policy, &st, observed(handle, tally), now);
    if let Some(t) = transition {
        announce(inner, wc, digest, &next, t, tally);
    }
    next
}

/// The rollout of `digest` as last known (`known`: this host's, else the
/// status's), or a new one at step 1 (with a `RolloutStarted` Event) when
/// that was another candidate's or none.
fn current_rollout(
    inner: &Arc<Inner>,
    wc: &WasmController,
    policy: &RolloutPolicy,
    digest: &str,
    known: Option<RolloutStatus>,
    now: Timestamp,
) -> RolloutStatus {
    if let Some(s) = known.filter(|s| s.candidate_digest == digest) {
        return s;
    }
    let name = wc.metadata.name.as_deref().unwrap_or_default();
    tracing::info!(controller = %name, digest = %digest, action = "rollout-start", "canary rollout started");
    let message = format!("rollout of {digest} started at step 1");
    record(inner, wc, EventKind::Normal, "RolloutStarted", &message);
    canary::begin(policy, digest, now)
}

/// `cmd` applied to the rollout, with a `RolloutCommand` Event; `resume`
/// counts the gates' faults afresh.
fn apply_command(
    inner: &Arc<Inner>,
    wc: &WasmController,
    policy: &RolloutPolicy,
    st: &RolloutStatus,
    cmd: Command,
    tally: &CanaryTally,
    now: Timestamp,
) -> RolloutStatus {
    let name = wc.metadata.name.as_deref().unwrap_or_default();
    if canary::phase_after(cmd, st.phase).is_none() {
        tracing::info!(controller = %name, command = ?cmd, phase = ?st.phase, action = "rollout-command", "rollout command changes nothing in this phase");
        return st.clone();
    }
    let st = canary::apply_command(policy, st, cmd, now);
    tracing::info!(controller = %name, command = ?cmd, phase = ?st.phase, action = "rollout-command", "rollout command applied");
    let message = st.message.as_deref().unwrap_or("");
    record(inner, wc, EventKind::Normal, "RolloutCommand", message);
    if matches!(cmd, Command::Resume) {
        tally.reset();
    }
    st
}

/// What the gates judge: the migrated parents, how many are Ready and
/// answered for, and the candidate's faults and permanent errors this step.
fn observed(handle: &crate::controller::ControllerHandle, tally: &CanaryTally) -> Observed {
    let migrated = handle.migrated();
    let (faults, permanent) = tally.counts();
    Observed {
        migrated: migrated.len() as u32,
        ready: migrated.iter().filter(|(_, h)| *h == Some(true)).count() as u32,
        answered: migrated.iter().filter(|(_, h)| h.is_some()).count() as u32,
        faults,
        permanent,
    }
}

/// Logs a rollout transition and says it with an Event (a new step counts
/// the gates' faults afresh).
fn announce(
    inner: &Arc<Inner>,
    wc: &WasmController,
    digest: &str,
    next: &RolloutStatus,
    transition: Transition,
    tally: &CanaryTally,
) {
    let name = wc.metadata.name.as_deref().unwrap_or_default();
    match transition {
        Transition::Advanced(step) => {
            tally.reset();
            let msg = format!("step {step} of {} started", next.steps);
            tracing::info!(controller = %name, step, action = "rollout-step", "rollout step started");
            record(inner, wc, EventKind::Normal, "RolloutStep", &msg);
        }
        Transition::Promoted => {
            tracing::info!(controller = %name, digest = %digest, action = "rollout-promote", "candidate promoted");
            let msg = next.message.as_deref().unwrap_or("");
            record(inner, wc, EventKind::Normal, "RolloutPromoted", msg);
        }
        Transition::RolledBack(why) => {
            tracing::warn!(controller = %name, digest = %digest, reason = %why, action = "rollout-rollback", "rollout gate failed; rolled back");
            let msg = next.message.as_deref().unwrap_or(&why);
            record(inner, wc, EventKind::Warning, "RolloutRolledBack", msg);
        }
    }
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
