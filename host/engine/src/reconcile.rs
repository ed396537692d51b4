//! Executes one reconcile of one parent: reads the parent from the cache, asks
//! the decision core ([`crate::decide`]) what to do, and carries it out
//! against the API server — finalizer first, then the plugin call, then
//! children (apply, recreate, delete), status, events and the next run —
//! returning a typed [`ReconcileReport`].
//!
//! What is decided lives in `decide`; this module only knows how to write it
//! and what the API server's answers mean (conflicts re-read, 429 waits,
//! 422 on status is reported, not retried).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tracing::Instrument;
use wr_runtime::FaultKind;

use crate::apply::{self, ChildAction};
use crate::controller::state::Controller;
use crate::decide::memo::{self, MemoCheck};
use crate::decide::{
    self, Answer, ChildStep, Decision, DeleteStep, Failed, FailureClass, FinalizerChange, Problem,
    Requeue, Then,
};
use crate::decide::{Source, converge};
use crate::errors::{ApiErrorClass, classify, is_precondition_failure};
use crate::events::{EventKind, Regarding};
use crate::finalize;
use crate::observe::{ReconcileReport, ReconcileResult};
use crate::own_writes::Left;
use crate::plugin::PluginError;
use crate::queue::{ObjectKey, Outcome};
use crate::status::{StatusUpdate, merge_patch};

/// How many times one reconcile re-reads the parent after a conflict.
const CONFLICT_RETRIES: usize = 3;

/// Why a pass did not finish.
#[derive(Debug)]
enum Fail {
    /// Read the parent fresh from the API server and run again.
    Conflict,
    /// Back off (at least this long).
    Backoff(Option<Duration>),
    /// The API server refused the parent's status (422): reported (log, Event
    /// on the parent, condition on the WasmController); retrying the same
    /// status cannot help, so the next run is the resync or a parent change.
    StatusRejected,
}

fn api_fail(e: &kube::Error) -> Fail {
    match classify(e) {
        ApiErrorClass::Conflict => Fail::Conflict,
        ApiErrorClass::TooManyRequests(d) => Fail::Backoff(Some(d)),
        _ => Fail::Backoff(None),
    }
}

/// Runs one reconcile of `key` and says when to run it next and how it counts.
pub(crate) async fn reconcile(ctl: &Arc<Controller>, key: &ObjectKey) -> ReconcileReport {
    ctl.stats
        .reconciles
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(cached) = ctl.parent_cache.get(key) else {
        forget(ctl, key);
        return report(Outcome::Forget, None);
    };
    let reconcile_id = uuid::Uuid::new_v4().simple().to_string();
    // A WARN-level span: enabled at the default `warn` filter, so the
    // warnings a reconcile logs (plugin errors, apply failures, collisions)
    // carry the controller and the object's identity. An info span would be
    // filtered out with them and leave those warnings anonymous.
    let span = tracing::warn_span!(
        "reconcile",
        controller = %ctl.target.name,
        namespace = key.namespace.as_deref().unwrap_or(""),
        name = %key.name,
        generation = cached.metadata.generation.unwrap_or(0),
        reconcile_id = %&reconcile_id[..12],
    );
    // One aggregated child-change event per reconcile (see crate::events).
    let uid = cached.metadata.uid.clone().unwrap_or_default();
    ctl.events.begin_batch(&uid);
    // The cache decoded a fresh copy for this call: take it, do not clone it.
    let parent = Arc::unwrap_or_clone(cached);
    let report = passes(ctl, key, parent).instrument(span).await;
    ctl.events.end_batch(&uid);
    report
}

/// The report of a reconcile: the plugin's verdict (a fault or a permanent
/// error) outranks how the writes went; otherwise a failure is transient.
fn report(outcome: Outcome, verdict: Option<ReconcileResult>) -> ReconcileReport {
    let result = match (verdict, outcome) {
        (Some(r @ (ReconcileResult::PluginFault | ReconcileResult::PermanentError)), _) => r,
        (Some(ReconcileResult::Conflict), Outcome::Failure { .. }) => ReconcileResult::Conflict,
        (_, Outcome::Failure { .. }) => ReconcileResult::TransientError,
        (_, Outcome::Success { .. } | Outcome::Forget) => ReconcileResult::Success,
    };
    ReconcileReport { outcome, result }
}

/// `result` unless the plugin's verdict (a fault or a permanent error) outranks it.
fn noted(verdict: Option<ReconcileResult>, result: ReconcileResult) -> Option<ReconcileResult> {
    match verdict {
        Some(r @ (ReconcileResult::PluginFault | ReconcileResult::PermanentError)) => Some(r),
        _ => Some(result),
    }
}

/// Runs passes until one finishes, reading the parent fresh after a conflict.
async fn passes(
    ctl: &Arc<Controller>,
    key: &ObjectKey,
    mut parent: DynamicObject,
) -> ReconcileReport {
    let mut verdict = None;
    for attempt in 0..=CONFLICT_RETRIES {
        match pass(ctl, key, parent, &mut verdict).await {
            Ok(next) => return report(Outcome::Success { next }, verdict),
            Err(Fail::Backoff(at_least)) => return report(Outcome::Failure { at_least }, verdict),
            Err(Fail::StatusRejected) => {
                ctl.set_health(key, Some(false));
                let next = Some(ctl.jittered_resync());
                let counted = noted(verdict, ReconcileResult::PermanentError);
                return report(Outcome::Success { next }, counted);
            }
            Err(Fail::Conflict) if attempt < CONFLICT_RETRIES => {
                tracing::debug!(action = "refetch", "conflict; reading the parent fresh");
                match parent_api(ctl, key).get_opt(&key.name).await {
                    Ok(Some(p)) => parent = p,
                    Ok(None) => {
                        forget(ctl, key);
                        return report(Outcome::Forget, verdict);
                    }
                    Err(e) => {
                        let at_least = retry_floor(&e);
                        return report(Outcome::Failure { at_least }, verdict);
                    }
                }
            }
            Err(Fail::Conflict) => {
                let outcome = Outcome::Failure { at_least: None };
                return report(outcome, noted(verdict, ReconcileResult::Conflict));
            }
        }
    }
    report(Outcome::Failure { at_least: None }, verdict)
}

fn retry_floor(e: &kube::Error) -> Option<Duration> {
    match classify(e) {
        ApiErrorClass::TooManyRequests(d) => Some(d),
        _ => None,
    }
}

fn forget(ctl: &Controller, key: &ObjectKey) {
    ctl.forget_permanent(key);
    ctl.set_health(key, None);
    ctl.forget_status(key);
    ctl.status_accepted(key);
    ctl.selections.forget(key);
    ctl.memo.forget_parent(key);
    ctl.own_writes.forget(key);
}

fn parent_api(ctl: &Controller, key: &ObjectKey) -> Api<DynamicObject> {
    let parent = &ctl.target.parent;
    match (&key.namespace, parent.namespaced) {
        (Some(ns), true) => Api::namespaced_with(ctl.client.clone(), ns, &parent.ar),
        _ => Api::all_with(ctl.client.clone(), &parent.ar),
    }
}

fn child_api(ctl: &Controller, kind: usize, ns: Option<&str>) -> Api<DynamicObject> {
    let r = &ctl.target.children[kind].resolved;
    match ns {
        Some(ns) if r.namespaced => Api::namespaced_with(ctl.client.clone(), ns, &r.ar),
        _ => Api::all_with(ctl.client.clone(), &r.ar),
    }
}

fn regarding(ctl: &Controller, p: &DynamicObject) -> Regarding {
    Regarding {
        api_version: ctl.target.parent.ar.api_version.clone(),
        kind: ctl.target.parent.ar.kind.clone(),
        namespace: p.metadata.namespace.clone(),
        name: p.metadata.name.clone().unwrap_or_default(),
        uid: p.metadata.uid.clone().unwrap_or_default(),
    }
}

fn now_rfc3339() -> String {
    whole_seconds(k8s_openapi::jiff::Timestamp::now())
}

/// `t` as RFC 3339 in UTC, cut to the whole second: the `now` of a request and
/// the `lastTransitionTime` the host writes (`metav1.Time` has no fraction).
/// Truncated, never rounded: a plugin must not be told a time that has not
/// come yet (rounding could put it up to half a second ahead).
pub(crate) fn whole_seconds(t: k8s_openapi::jiff::Timestamp) -> String {
    k8s_openapi::jiff::Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// A problem a write met (or a collision); reported on Ready, maybe retried.
struct ChildProblem {
    problem: Problem,
    retry: Option<Fail>,
}

/// How long the child writes of `key`'s last pass may still take to show in
/// the child caches ([`crate::own_writes`]); `None`: all shown.
fn unshown_writes(ctl: &Controller, key: &ObjectKey) -> Option<Duration> {
    ctl.own_writes.unshown(key, |kind, child| {
        let c = ctl.child(kind, child)?;
        let m = &c.metadata;
        Some((m.uid.clone()?, m.resource_version.clone()?))
    })
}

/// Records what a child write left on the server for `on`'s next pass.
fn wrote(ctl: &Controller, on: &Regarding, kind: usize, child: ObjectKey, left: Left) {
    let parent = ObjectKey {
        namespace: on.namespace.clone(),
        name: on.name.clone(),
    };
    ctl.own_writes.wrote(&parent, kind, child, left);
}

/// The key of a child step.
fn step_key(step: &ChildStep) -> ObjectKey {
    ObjectKey {
        namespace: step.namespace.clone(),
        name: step.name.clone(),
    }
}

/// Records the resourceVersion a child write left, if the server returned one.
fn wrote_version(ctl: &Controller, on: &Regarding, step: &ChildStep, stored: &DynamicObject) {
    if let Some(rv) = &stored.metadata.resource_version {
        wrote(
            ctl,
            on,
            step.kind,
            step_key(step),
            Left::Version(rv.clone()),
        );
    }
}

/// One pass: admission, plugin call, decision, execution.
async fn pass(
    ctl: &Arc<Controller>,
    key: &ObjectKey,
    parent: DynamicObject,
    verdict: &mut Option<ReconcileResult>,
) -> Result<Option<Duration>, Fail> {
    if let Some(wait) = unshown_writes(ctl, key) {
        tracing::debug!(
            action = "wait-cache",
            "the child caches have not shown this host's last writes; their watch events queue the parent again"
        );
        return Ok(Some(wait));
    }
    let api = parent_api(ctl, key);
    let Some((parent, then)) = admit(ctl, key, &api, parent).await? else {
        return Ok(None);
    };
    if let Then::Hold { status, wait } = then {
        return hold(ctl, key, &api, &parent, status, wait).await;
    }
    let mut observed = decide::observe(&ctl.target, parent, ctl.as_ref());
    let now = now_rfc3339();
    let mut memo = MemoCheck::Off;
    let decision = if ctl.target.selects(&observed.parent) {
        let plugin = ctl.plugin();
        // The version that serves this parent: a canary rollout may have
        // moved it to the candidate. Memoisation, records and the call all
        // use this one snapshot.
        let installed = ctl.candidate();
        let candidate = installed
            .clone()
            .filter(|c| c.route.serves_object(&observed.parent));
        let (digest, info) = match &candidate {
            Some(c) => (c.digest.clone(), c.plugin.info()),
            None => (plugin.digest().to_string(), plugin.info()),
        };
        let started = std::time::Instant::now();
        // Per-parent related objects: the plugin's `customize` answer (cached)
        // narrows the related rules; a failed or invalid answer fails this pass
        // like a failed reconcile call would.
        let selection = ctl
            .selections
            .select(&ctl.target, key, &observed.parent, plugin.as_ref())
            .await;
        drop(plugin);
        let (req, result, took) = match selection {
            Ok(selection) => {
                selection.narrow(&ctl.target, &mut observed);
                let req = decide::request(&ctl.target, &observed, &now);
                // Each object serialised once, as the serving version sees
                // it (a candidate with a config of its own is asked with
                // that config): hashed for the memo here, then handed to
                // the plugin as its wire request.
                let candidate_config = candidate.as_ref().and_then(|c| c.config.as_ref());
                match served_text(&req, candidate_config) {
                    Ok(text) => {
                        // Rule 13: the inputs (the narrowed request, `now`
                        // aside) equal those of the last quiet pass: nothing to do.
                        let (last, requeue_after) = ctl.memo.last(key).unzip();
                        memo = memo::check(
                            ctl.memo.memoisable(info.as_ref()),
                            || memo::inputs_hash(&digest, &text),
                            last,
                        );
                        if memo == MemoCheck::Skip && !shadow_owes(ctl, key, &observed.parent) {
                            return Ok(memoised(ctl, key, requeue_after.flatten()));
                        }
                        ctl.count_call();
                        let (result, took) =
                            call_plugin(ctl, key, installed, candidate, &req, text).await;
                        (Some(req), result, took)
                    }
                    // Not reached for JSON values; a failed call if it were.
                    Err(e) => (Some(req), Err(crate::wasm::map_error(e)), started.elapsed()),
                }
            }
            Err(e) => (None, Err(e), started.elapsed()),
        };
        let decision = decide::decide(&ctl.target, &observed, ctl.as_ref(), &result, &now);
        // A pass whose `customize` failed made no reconcile call: nothing to record.
        if let (Some(rec), Some(req)) = (&ctl.recorder, &req) {
            let x =
                crate::record::exchange(&ctl.target, &observed, req, &result, &decision, &digest);
            rec.record(x);
        }
        report_call(ctl, took, &result, &decision);
        decision
    } else {
        // Decorator mode, not selected (any more): its attachments go, and
        // the plugin is not called.
        let detached = Ok(decide::detached());
        decide::decide(&ctl.target, &observed, ctl.as_ref(), &detached, &now)
    };
    let parent = observed.parent;
    execute(ctl, key, &api, &parent, decision, memo, verdict).await
}

/// A parent held after a permanent error for this generation: no plugin
/// call, but the status still says what this host decided (someone may have
/// overwritten it since); looked at again when the hold ends.
async fn hold(
    ctl: &Arc<Controller>,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    status: StatusUpdate,
    wait: Duration,
) -> Result<Option<Duration>, Fail> {
    tracing::debug!(
        action = "skip",
        "permanent error for this generation; waiting"
    );
    write_status(ctl, key, api, parent, status).await?;
    ctl.memo.forget(key);
    Ok(Some(wait))
}

/// Executes a decision: a failure's status and verdict, or an answer's
/// writes (a decorator's unselected parent gets no resync: its own changes
/// or its attachments' bring it back).
async fn execute(
    ctl: &Arc<Controller>,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    decision: Decision,
    memo: MemoCheck,
    verdict: &mut Option<ReconcileResult>,
) -> Result<Option<Duration>, Fail> {
    match decision {
        Decision::Failed(f) => {
            ctl.memo.forget(key);
            *verdict = Some(f.result);
            execute_failure(ctl, key, api, parent, f).await
        }
        Decision::Answered(a) if !ctl.target.selects(parent) => {
            execute_answer(ctl, key, api, parent, &a, memo)
                .await
                .map(|_| None)
        }
        Decision::Answered(a) => execute_answer(ctl, key, api, parent, &a, memo).await,
    }
}

/// Rule 13: the inputs equal those of the last call that found this parent
/// converged, so the plugin would answer the same and nothing needs a write.
/// Counted, healthy, looked at again when that call asked to be.
fn memoised(
    ctl: &Controller,
    key: &ObjectKey,
    requeue_after: Option<Duration>,
) -> Option<Duration> {
    tracing::debug!(
        action = "memoised",
        "inputs unchanged since a converged pass; plugin not called"
    );
    ctl.stats
        .memoised
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Some(obs) = ctl.observer.as_deref() {
        obs.reconcile_memoised(&ctl.target.name);
    }
    ctl.set_health(key, Some(true));
    next_run(ctl, requeue_after.map_or(Requeue::Resync, Requeue::Within))
}

/// A shadowing candidate has not compared this parent yet: a pass that could
/// be memoised calls the active version anyway, so the candidate sees every
/// parent at least once (else a converged fleet would never be shadowed).
fn shadow_owes(ctl: &Controller, key: &ObjectKey, parent: &DynamicObject) -> bool {
    ctl.candidate()
        // A parent the candidate serves (canary) is not shadowed.
        .filter(|c| !c.route.serves_object(parent))
        .and_then(|c| c.shadow.clone())
        .is_some_and(|lane| lane.owes(&key.to_string()))
}

/// `req` as JSON text for the version that serves the parent: with
/// `candidate_config` when a candidate with a config of its own serves it
/// (what [`crate::candidate::Installed::request`] gives it).
fn served_text(
    req: &wr_runtime::ReconcileRequest,
    candidate_config: Option<&serde_json::Value>,
) -> Result<wr_runtime::RequestText, wr_runtime::CallError> {
    let mut text = wr_runtime::RequestText::new(req)?;
    if let Some(config) = candidate_config {
        text.set_config(Some(config))?;
    }
    Ok(text)
}

/// Calls the version that serves this parent: the `candidate` when a canary
/// rollout moved it there ([`crate::canary`]), else the active one — and
/// then, off this path, the `installed` candidate in its shadow
/// ([`crate::shadow`]). `text` is [`served_text`] of `req` for that version.
async fn call_plugin(
    ctl: &Controller,
    key: &ObjectKey,
    installed: Option<Arc<crate::candidate::Installed>>,
    candidate: Option<Arc<crate::candidate::Installed>>,
    req: &wr_runtime::ReconcileRequest,
    text: wr_runtime::RequestText,
) -> (Result<wr_runtime::ReconcileResponse, PluginError>, Duration) {
    if let Some(c) = candidate {
        let req = c.request(req);
        let started = std::time::Instant::now();
        let result = c.plugin.reconcile_text(&req, text, &c.limits).await;
        let took = started.elapsed();
        c.tally.record(&result);
        c.tally.served(key);
        return (result, took);
    }
    let plugin = ctl.plugin();
    let started = std::time::Instant::now();
    let result = plugin.reconcile_text(req, text, &ctl.target.limits).await;
    let took = started.elapsed();
    drop(plugin);
    if let (Some(c), Ok(answer)) = (&installed, &result)
        && let Some(lane) = &c.shadow
    {
        lane.offer(c, key.to_string(), req, answer);
    }
    (result, took)
}

/// Carries out [`decide::admit`]: the finalizer change, then either stop
/// (`None`), or the parent to go on with and what next.
async fn admit(
    ctl: &Controller,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: DynamicObject,
) -> Result<Option<(DynamicObject, Then)>, Fail> {
    let t = &ctl.target;
    let hold = match parent.metadata.deletion_timestamp {
        Some(_) => None,
        None => ctl.hold(
            key,
            parent.metadata.uid.as_deref().unwrap_or_default(),
            parent.metadata.generation,
        ),
    };
    let admission = decide::admit(t, &parent, hold.as_ref());
    let stop = matches!(admission.then, Then::Stop(_));
    let parent = match admission.finalizer {
        Some(FinalizerChange::Add) => {
            tracing::info!(
                action = "add-finalizer",
                "adding finalizer before any child exists"
            );
            finalize::add(api, &parent, &t.finalizer, &t.field_manager)
                .await
                .map_err(|e| precondition_or(&e))?
        }
        Some(FinalizerChange::Remove) => {
            tracing::info!(
                action = "remove-finalizer",
                "finalize disabled; releasing parent"
            );
            finalize::remove(api, &parent, &t.finalizer, &t.field_manager)
                .await
                .map_err(|e| precondition_or(&e))?;
            // Released while deleting: done. Otherwise read it again.
            return if stop { Ok(None) } else { Err(Fail::Conflict) };
        }
        None => parent,
    };
    Ok((!stop).then_some((parent, admission.then)))
}

/// Tells the observer about the plugin call, with the sandbox fault if any
/// (output the host rejects counts as invalid output).
fn report_call(
    ctl: &Controller,
    took: Duration,
    result: &Result<wr_runtime::ReconcileResponse, PluginError>,
    decision: &Decision,
) {
    let Some(obs) = ctl.observer.as_deref() else {
        return;
    };
    let fault = match (result, decision) {
        (Err(e), _) => crate::observe::fault_kind(e),
        (Ok(_), Decision::Failed(f)) if f.failure.class == FailureClass::InvalidOutput => {
            Some(FaultKind::InvalidOutput)
        }
        _ => None,
    };
    obs.plugin_call(&ctl.target.name, took, fault);
}

/// The plugin failed or its output was rejected: nothing is applied;
/// `Ready=False`, a Warning event, and resync (permanent) or backoff.
async fn execute_failure(
    ctl: &Controller,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    f: Failed,
) -> Result<Option<Duration>, Fail> {
    let (reason, message) = (&f.failure.reason, &f.failure.message);
    if f.failure.class == FailureClass::InvalidOutput {
        tracing::warn!(action = "reject-output", error = %message, "invalid plugin output; nothing applied");
    } else {
        let permanent = f.remember;
        tracing::warn!(action = "plugin-error", permanent, reason = %reason, "plugin call failed");
    }
    ctl.events.record(
        &regarding(ctl, parent),
        f.event.kind,
        &f.event.reason,
        &f.event.message,
    );
    if f.remember {
        let uid = parent.metadata.uid.as_deref().unwrap_or_default();
        ctl.remember_permanent(key, uid, parent.metadata.generation, reason, message);
    }
    write_status(ctl, key, api, parent, f.status).await?;
    ctl.set_health(key, Some(false));
    match f.requeue {
        Requeue::Backoff => Err(Fail::Backoff(None)),
        _ => Ok(Some(ctl.jittered_resync())),
    }
}

/// The plugin answered: apply, recreate and delete children, then settle
/// status, events, finalizer and the next run.
async fn execute_answer(
    ctl: &Controller,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    a: &Answer,
    memo: MemoCheck,
) -> Result<Option<Duration>, Fail> {
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let on = regarding(ctl, parent);
    let mut problems: Vec<ChildProblem> = Vec::new();
    let adopt = crate::adopt::AdoptPolicy::of(ctl.target.adoption, parent);
    if let Some(problem) = a.stalled() {
        tracing::warn!(action = "rollout-stalled", reason = %problem.message, "rolling update stopped");
    }
    let mut echoes = 0;
    for step in &a.children {
        match apply_child(ctl, step, &uid, &on, &adopt).await {
            Ok(changed) => echoes += usize::from(changed),
            Err(p) => problems.push(p),
        }
    }
    for d in &a.deletes {
        match delete_child(ctl, d, &on).await {
            Ok(changed) => echoes += usize::from(changed),
            Err(p) => problems.push(p),
        }
    }
    // A child the API server rejects is the plugin's fault, like invalid
    // output: say so on the parent (deduplicated like every event).
    for p in problems
        .iter()
        .filter(|p| p.problem.reason == "ChildInvalid")
    {
        let (reason, message) = (p.problem.reason, &p.problem.message);
        ctl.events.record(&on, EventKind::Warning, reason, message);
    }
    let mut seen: Vec<Problem> = problems.iter().map(|p| p.problem.clone()).collect();
    seen.extend(a.stalled());
    let settle = a.settle(&seen);
    let mut status_unchanged = true;
    if let Some(update) = settle.status {
        ctl.memo.forget(key);
        let generation = (uid.as_str(), parent.metadata.generation);
        let defer = converge::defer_status(a, seen.is_empty(), echoes)
            && ctl.memo.may_defer(key, generation);
        if defer {
            tracing::debug!(
                action = "defer-status",
                "children changed; the status is written by the pass their watch events trigger"
            );
        } else {
            // Rule 13.4: the echo of a status-only write queues the pass
            // that may record the memo (marked before the write is sent).
            let echo = memo::awaits_echo(memo, a, problems.is_empty()) && ctl.memo.await_echo(key);
            let written = write_status(ctl, key, api, parent, update).await;
            if echo && !matches!(written, Ok(true)) {
                ctl.memo.echo_cancelled(key);
            }
            status_unchanged = !written?;
        }
    }
    match memo {
        MemoCheck::Call(inputs) if problems.is_empty() && memo::quiet(a, status_unchanged) => {
            ctl.memo.record(key, inputs, a.requeue_after);
        }
        _ => ctl.memo.forget(key),
    }
    for ev in &a.events {
        ctl.events.record(&on, ev.kind, &ev.reason, &ev.message);
    }
    ctl.forget_permanent(key);
    ctl.set_health(key, Some(settle.healthy));
    if settle.remove_finalizer {
        tracing::info!(
            action = "remove-finalizer",
            "plugin finalized; removing finalizer"
        );
        let t = &ctl.target;
        finalize::remove(api, parent, &t.finalizer, &t.field_manager)
            .await
            .map_err(|e| precondition_or(&e))?;
        ctl.events.forget(&uid);
        return Ok(None);
    }
    if let Some(retry) = problems.into_iter().find_map(|p| p.retry) {
        return Err(retry);
    }
    Ok(next_run(ctl, settle.requeue))
}

/// When to look at a parent again after a successful pass.
fn next_run(ctl: &Controller, requeue: Requeue) -> Option<Duration> {
    match requeue {
        Requeue::Never => None,
        Requeue::Within(d) => Some(d.min(ctl.jittered_resync())),
        Requeue::Resync | Requeue::Backoff => Some(ctl.jittered_resync()),
    }
}

fn precondition_or(e: &kube::Error) -> Fail {
    if is_precondition_failure(e) {
        Fail::Conflict
    } else {
        api_fail(e)
    }
}

/// Deletes an owned child that is no longer desired (uid precondition).
async fn delete_child(
    ctl: &Controller,
    d: &DeleteStep,
    on: &Regarding,
) -> Result<bool, ChildProblem> {
    let label = &d.label;
    tracing::info!(action = "delete-child", child = %label, "deleting child that is no longer desired");
    let api = child_api(ctl, d.kind, d.namespace.as_deref());
    match apply::delete(&api, &d.name, &d.uid).await {
        Ok(()) => {
            let child = ObjectKey {
                namespace: d.namespace.clone(),
                name: d.name.clone(),
            };
            wrote(ctl, on, d.kind, child, Left::Gone(d.uid.clone()));
            ctl.events.record(
                on,
                EventKind::Normal,
                "ChildDeleted",
                &format!("deleted {label}"),
            );
            Ok(true)
        }
        Err(e) => match classify(&e) {
            ApiErrorClass::NotFound => Ok(false),
            // A failed uid precondition usually means the child was replaced
            // by someone else's object — but a 409 can also come back for a
            // delete that was never applied (found by the chaos suite: the
            // child then stayed until the next resync). Retry with a fresh
            // read: a replaced child is no longer ours and is left alone.
            ApiErrorClass::Conflict => Err(ChildProblem {
                problem: Problem {
                    reason: "DeleteConflict",
                    message: format!("deleting {label}: {e}"),
                },
                retry: Some(api_fail(&e)),
            }),
            _ => Err(ChildProblem {
                problem: Problem {
                    reason: "DeleteFailed",
                    message: format!("deleting {label}: {e}"),
                },
                retry: Some(api_fail(&e)),
            }),
        },
    }
}

/// Carries out one child's decided action. A create that finds the name taken
/// (the cache lagged) looks at the object there and decides again, once.
async fn apply_child(
    ctl: &Controller,
    step: &ChildStep,
    parent_uid: &str,
    on: &Regarding,
    adopt: &crate::adopt::AdoptPolicy,
) -> Result<bool, ChildProblem> {
    let api = child_api(ctl, step.kind, step.namespace.as_deref());
    let method = ctl.target.children[step.kind].method;
    let label = &step.label;
    let mut action = step.action.clone();
    // Two rounds at most: a create that finds an existing object looks at it once.
    for _ in 0..2 {
        match &action {
            ChildAction::Unchanged
            | ChildAction::Left
            | ChildAction::Wait
            | ChildAction::Queued(_) => return Ok(false),
            ChildAction::Collision(why) => {
                let message = apply::collision_message(label, why);
                tracing::warn!(action = "collision", child = %label, "child name taken by another owner");
                ctl.events
                    .record(on, EventKind::Warning, "ChildConflict", &message);
                return Err(ChildProblem {
                    problem: Problem {
                        reason: "ChildConflict",
                        message,
                    },
                    retry: None,
                });
            }
            ChildAction::Create => match create_child(ctl, &api, step, on).await? {
                Created::Done(created) => return Ok(created),
                Created::Taken(fresh) => {
                    action = apply::decide_adopting(
                        &step.object,
                        Some(&fresh),
                        parent_uid,
                        method,
                        Some(adopt),
                    );
                }
            },
            ChildAction::Adopt | ChildAction::TakeOver => {
                return adopt_child(ctl, &api, step, on, &action)
                    .await
                    .map(|()| true);
            }
            ChildAction::Apply => return update_child(ctl, &api, step, on).await,
            ChildAction::Recreate { uid } => return recreate_child(&api, step, uid, ctl, on).await,
        }
    }
    Ok(false)
}

/// What a create found.
enum Created {
    /// Done; true when the server created it or the cache has not shown it
    /// yet (either way its watch event will follow).
    Done(bool),
    /// The name is taken by this object: decide again.
    Taken(Box<DynamicObject>),
}

/// Creates a child; [`Created::Taken`] when the name turned out to be taken.
async fn create_child(
    ctl: &Controller,
    api: &Api<DynamicObject>,
    step: &ChildStep,
    on: &Regarding,
) -> Result<Created, ChildProblem> {
    let label = &step.label;
    tracing::info!(action = "create-child", child = %label, "creating child");
    match apply::create(api, &step.name, &step.object, &ctl.target.field_manager).await {
        Ok(c) if !c.created => {
            wrote_version(ctl, on, step, &c.object);
            tracing::debug!(action = "create-child", child = %label, "child already there (cache lagging); nothing changed");
            // The cache has not seen it yet: its watch event is on the way.
            Ok(Created::Done(true))
        }
        Ok(c) => {
            wrote_version(ctl, on, step, &c.object);
            ctl.events.record(
                on,
                EventKind::Normal,
                "ChildCreated",
                &format!("created {label}"),
            );
            Ok(Created::Done(true))
        }
        Err(e)
            if matches!(
                classify(&e),
                ApiErrorClass::AlreadyExists | ApiErrorClass::Conflict | ApiErrorClass::Invalid(_)
            ) =>
        {
            // Our cache was stale and somebody else's object has the
            // name (409: its fields differ; 422: it has another
            // controller): look, and report the collision.
            match api.get_opt(&step.name).await {
                Ok(Some(fresh)) => Ok(Created::Taken(Box::new(fresh))),
                // Nothing there: the refusal was about our own
                // object (e.g. 422 naming a field); report it.
                Ok(None) => Err(child_api_problem(label, &e)),
                Err(get) => Err(child_api_problem(label, &get)),
            }
        }
        Err(e) => Err(child_api_problem(label, &e)),
    }
}

async fn update_child(
    ctl: &Controller,
    api: &Api<DynamicObject>,
    step: &ChildStep,
    on: &Regarding,
) -> Result<bool, ChildProblem> {
    let label = &step.label;
    tracing::info!(action = "update-child", child = %label, "applying child");
    let key = ObjectKey {
        namespace: step.namespace.clone(),
        name: step.name.clone(),
    };
    let seen_rv = ctl
        .child(step.kind, &key)
        .and_then(|c| c.metadata.resource_version.clone());
    match apply::apply(api, &step.name, &step.object, &ctl.target.field_manager).await {
        Ok(stored) => {
            // The server changed it only if its resourceVersion moved: then
            // its watch event will trigger another pass.
            let changed = seen_rv.is_some() && stored.metadata.resource_version != seen_rv;
            wrote_version(ctl, on, step, &stored);
            ctl.events.record(
                on,
                EventKind::Normal,
                "ChildUpdated",
                &format!("updated {label}"),
            );
            Ok(changed)
        }
        Err(e) => Err(child_api_problem(label, &e)),
    }
}

/// Adopts an orphan or takes over a child with Metacontroller's leftovers
/// ([`crate::adopt::take_over`]).
async fn adopt_child(
    ctl: &Controller,
    api: &Api<DynamicObject>,
    step: &ChildStep,
    on: &Regarding,
    action: &ChildAction,
) -> Result<(), ChildProblem> {
    let label = &step.label;
    let (reason, what) = match action {
        ChildAction::Adopt => ("ChildAdopted", "adopted"),
        _ => ("ChildTakenOver", "took over"),
    };
    tracing::info!(action = reason, child = %label, "taking over child");
    match crate::adopt::take_over(api, &step.name, &step.object, &ctl.target.field_manager).await {
        Ok(stored) => {
            wrote_version(ctl, on, step, &stored);
            ctl.events
                .record(on, EventKind::Normal, reason, &format!("{what} {label}"));
            Ok(())
        }
        Err(e) if matches!(classify(&e), ApiErrorClass::Conflict) => Err(ChildProblem {
            problem: Problem {
                reason: "ApplyFailed",
                message: format!("adopting {label}: it changed meanwhile"),
            },
            retry: Some(Fail::Conflict),
        }),
        Err(e) => Err(child_api_problem(label, &e)),
    }
}

async fn recreate_child(
    api: &Api<DynamicObject>,
    step: &ChildStep,
    uid: &str,
    ctl: &Controller,
    on: &Regarding,
) -> Result<bool, ChildProblem> {
    let label = &step.label;
    tracing::info!(action = "recreate-child", child = %label, "deleting child to recreate it");
    match apply::delete(api, &step.name, uid).await {
        Ok(()) => {
            wrote(
                ctl,
                on,
                step.kind,
                step_key(step),
                Left::Gone(uid.to_string()),
            );
            ctl.events.record(
                on,
                EventKind::Normal,
                "ChildDeleted",
                &format!("deleted {label} to recreate it"),
            );
            Ok(true)
        }
        Err(e)
            if matches!(
                classify(&e),
                ApiErrorClass::NotFound | ApiErrorClass::Conflict
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(child_api_problem(label, &e)),
    }
}

fn child_api_problem(label: &str, e: &kube::Error) -> ChildProblem {
    match classify(e) {
        ApiErrorClass::Invalid(msg) => ChildProblem {
            problem: Problem {
                reason: "ChildInvalid",
                message: format!("{label} rejected by the API server: {msg}"),
            },
            retry: None,
        },
        _ => ChildProblem {
            problem: Problem {
                reason: "ApplyFailed",
                message: format!("applying {label}: {e}"),
            },
            retry: Some(api_fail(e)),
        },
    }
}

/// Writes the parent's status if it changed (status subresource when present),
/// with a resourceVersion precondition. A 409 re-reads the parent and retries
/// the status write alone while the generation is unchanged; otherwise the pass
/// runs again on the fresh parent.
///
/// Remembers the status it wrote, or found already right, for the parent
/// ([`Controller::remember_status`]): a later status change to anything else
/// triggers a reconcile ([`crate::controller::status_drifted`]), so a status
/// overwritten by someone else, or judged right from a stale cache, converges
/// back, while the echo of this write does not trigger again.
async fn write_status(
    ctl: &Controller,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    update: StatusUpdate,
) -> Result<bool, Fail> {
    if !ctl.target.writes_status(parent) {
        // Decorator mode without `writeStatus`: the status is its owner's.
        return Ok(false);
    }
    let mut fresh: Option<DynamicObject> = None;
    for _ in 0..=CONFLICT_RETRIES {
        let base = fresh.as_ref().unwrap_or(parent);
        let current = base.data.get("status");
        // A status that differs only in fields the parent CRD prunes is
        // already what the server would store: writing it changes nothing.
        let computed = decide::status_to_write(
            &ctl.target,
            current,
            base.metadata.generation,
            &update,
            &now_rfc3339(),
        );
        let Some(new) = computed else {
            already_right(ctl, key, current, fresh.is_none());
            return Ok(false);
        };
        let restoring = ctl.status_seen.matches(key, current) == Some(false);
        if restoring
            && let Some(wait) =
                ctl.status_seen
                    .restore_wait(key, tokio::time::Instant::now(), ctl.resync)
        {
            // Someone else keeps changing it back: restore later, not in a
            // ping-pong at full speed.
            tracing::warn!(
                action = "defer-status",
                wait_ms = wait.as_millis() as u64,
                "status keeps being changed by another writer; restoring it later"
            );
            return Err(Fail::Backoff(Some(wait)));
        }
        let write = StatusWrite {
            parent,
            base,
            new: &new,
            restoring,
        };
        match patch_status(ctl, key, api, write).await? {
            None => return Ok(true),
            Some(f) => fresh = Some(f),
        }
    }
    Err(Fail::Conflict)
}

/// The status is already right: remember it, and if the cache moved on
/// during the pass, reconcile again.
fn already_right(ctl: &Controller, key: &ObjectKey, current: Option<&Value>, first_read: bool) {
    ctl.status_accepted(key);
    ctl.remember_status(key, current);
    // The pass judged a parent snapshot taken when it started. If the
    // cache moved on meanwhile (typically the echo of this host's own
    // earlier status write, which did not count as drift while the
    // memory still matched it), "already right" may be wrong: run
    // again on the newer state. Checked after `remember_status`, so an
    // echo arriving later is judged against what was remembered here.
    let latest = ctl.parent_cache.get(key);
    if first_read
        && latest.as_ref().and_then(|p| p.data.get("status")) != current
        && latest.is_some()
    {
        tracing::debug!(
            action = "recheck-status",
            "parent status changed during the pass; reconciling again"
        );
        ctl.queue.add(key.clone());
    }
}

/// One status write: the parent the pass judged, the object the write is
/// based on (it or a fresh read), the new status, and whether it overwrites
/// someone else's.
struct StatusWrite<'a> {
    parent: &'a DynamicObject,
    base: &'a DynamicObject,
    new: &'a Value,
    restoring: bool,
}

/// Sends one status merge patch (resourceVersion precondition). `Ok(None)`:
/// done; `Ok(Some(fresh))`: a conflict while the spec still stands — retry
/// the status alone on `fresh` (rule 12).
async fn patch_status(
    ctl: &Controller,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    w: StatusWrite<'_>,
) -> Result<Option<DynamicObject>, Fail> {
    let name = w.parent.metadata.name.clone().unwrap_or_default();
    let pp = PatchParams {
        field_manager: Some(ctl.target.field_manager.clone()),
        ..PatchParams::default()
    };
    let body = json!({
        "metadata": {"resourceVersion": w.base.metadata.resource_version},
        "status": merge_patch(w.base.data.get("status"), w.new),
    });
    // Before the write: its watch echo may arrive before the response.
    let before = ctl.status_seen.recall(key);
    ctl.remember_status(key, Some(w.new));
    tracing::debug!(action = "write-status", "status changed; writing it");
    let r = if ctl.target.parent.status_subresource {
        api.patch_status(&name, &pp, &Patch::Merge(&body)).await
    } else {
        api.patch(&name, &pp, &Patch::Merge(&body)).await
    };
    let e = match r {
        Ok(stored) => {
            ctl.status_accepted(key);
            // What the server kept (it may prune or default fields).
            ctl.remember_status(key, stored.data.get("status"));
            if w.restoring {
                ctl.status_seen.restored(key, tokio::time::Instant::now());
            }
            return Ok(None);
        }
        Err(e) => e,
    };
    match classify(&e) {
        ApiErrorClass::NotFound => Ok(None),
        ApiErrorClass::Invalid(_) => {
            // Not written: what was remembered still stands.
            ctl.status_seen.reset(key, before);
            status_rejected(ctl, key, w.parent, &e);
            Err(Fail::StatusRejected)
        }
        ApiErrorClass::Conflict => {
            // Not written: what was remembered still stands.
            ctl.status_seen.reset(key, before);
            // Usually only the status moved (our cache had not seen the
            // last status write yet). While the spec the plugin answered
            // for still stands, only the status write is retried on a fresh
            // read: re-running the pass would call the plugin again and
            // re-apply children against the same lagging child caches. Any
            // other change that matters has queued another reconcile.
            match api.get_opt(&name).await {
                Ok(Some(f)) if decide::same_spec(w.parent, &f) => Ok(Some(f)),
                Ok(Some(_)) => Err(Fail::Conflict),
                Ok(None) => Ok(None),
                Err(e) => Err(api_fail(&e)),
            }
        }
        _ => Err(api_fail(&e)),
    }
}

/// Reports a status the API server refused: a warning in the log (default
/// level), a Warning Event on the parent, and the controller's record that the
/// manager turns into the WasmController's `ParentStatusAccepted=False`.
fn status_rejected(ctl: &Controller, key: &ObjectKey, parent: &DynamicObject, e: &kube::Error) {
    // The server's message names the field(s) it refused.
    let message = match classify(e) {
        ApiErrorClass::Invalid(m) => m,
        _ => e.to_string(),
    };
    tracing::warn!(
        action = "status-rejected",
        error = %message,
        "the API server rejected the parent's status; it keeps its old status until the plugin's status or the CRD's status schema changes"
    );
    ctl.events.record(
        &regarding(ctl, parent),
        EventKind::Warning,
        "StatusRejected",
        &format!(
            "the API server rejected the status written by {}: {message}",
            ctl.target.field_manager
        ),
    );
    ctl.status_rejected(key, &message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_a_pass_hashes_and_sends_is_that_of_the_serving_versions_request() {
        // A candidate with a config of its own is hashed and called with
        // that config (as `Installed::request` builds its Values); without
        // one, with the request's.
        let req = wr_runtime::ReconcileRequest {
            parent: serde_json::json!({"metadata": {"name": "p"}}),
            children: vec![serde_json::json!({"data": {"a": "b"}})],
            related: vec![],
            finalizing: false,
            config: Some(serde_json::json!({"tag": "active"})),
            now: "2026-01-01T00:00:00Z".into(),
        };
        let text = |r: &wr_runtime::ReconcileRequest| wr_runtime::RequestText::new(r).unwrap();
        assert_eq!(served_text(&req, None).unwrap(), text(&req));
        let canary = serde_json::json!({"tag": "canary"});
        let mut as_candidate = req.clone();
        as_candidate.config = Some(canary.clone());
        let served = served_text(&req, Some(&canary)).unwrap();
        assert_eq!(served, text(&as_candidate));
        assert_ne!(
            memo::inputs_hash("sha256:c", &served),
            memo::inputs_hash("sha256:c", &text(&req)),
            "the candidate's config is one of its inputs"
        );
    }

    #[test]
    fn the_plugins_verdict_outranks_how_the_writes_went() {
        use ReconcileResult::*;
        let fail = Outcome::Failure { at_least: None };
        let ok = Outcome::Success { next: None };
        for (outcome, verdict, want) in [
            (ok, Some(PermanentError), PermanentError),
            (fail, Some(PluginFault), PluginFault),
            (fail, noted(Some(TransientError), Conflict), Conflict),
            (fail, noted(Some(PluginFault), Conflict), PluginFault),
            (ok, noted(None, PermanentError), PermanentError),
            // A conflict a later attempt got past is a success.
            (ok, Some(Conflict), Success),
            (fail, None, TransientError),
            (Outcome::Forget, None, Success),
        ] {
            assert_eq!(
                report(outcome, verdict).result,
                want,
                "{outcome:?} {verdict:?}"
            );
        }
    }

    #[test]
    fn now_is_cut_to_the_second_never_rounded_up() {
        let t: k8s_openapi::jiff::Timestamp = "2026-01-15T12:00:00.9Z".parse().unwrap();
        assert_eq!(whole_seconds(t), "2026-01-15T12:00:00Z");
        let t: k8s_openapi::jiff::Timestamp = "2026-01-15T12:00:07.2Z".parse().unwrap();
        assert_eq!(whole_seconds(t), "2026-01-15T12:00:07Z");
    }
}
