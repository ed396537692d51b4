//! One reconcile of one parent, in the order the rulebook requires:
//! read parent from cache → finalize protocol if deleting → otherwise ensure the
//! finalizer before anything is created → collect owned children and related
//! objects → call the plugin → validate its output → apply → delete unwanted
//! children → patch status → record events → schedule the next run.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tracing::Instrument;
use wr_runtime::{EventType, ReconcileRequest, ReconcileResponse, RelatedObjects};

use crate::apply::{self, ChildAction, OwnerRef};
use crate::controller::{Controller, PermanentFailure, count_call};
use crate::errors::{ApiErrorClass, classify, is_precondition_failure};
use crate::events::{EventKind, Regarding};
use crate::finalize;
use crate::plugin::PluginError;
use crate::queue::{ObjectKey, Outcome};
use crate::status::{DesiredCondition, StatusUpdate, merge_patch, next_status};
use crate::validate::validate_response;

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

/// Runs one reconcile of `key` and says when to run it next.
pub(crate) async fn reconcile(ctl: &Arc<Controller>, key: &ObjectKey) -> Outcome {
    ctl.stats
        .reconciles
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(cached) = ctl.parent_cache.get(key) else {
        forget(ctl, key);
        return Outcome::Forget;
    };
    let reconcile_id = uuid::Uuid::new_v4().simple().to_string();
    // A WARN-level span: enabled at the default `warn` filter, so the
    // warnings a reconcile logs (plugin errors, apply failures, collisions)
    // carry the controller and the object's identity. An info span would be
    // filtered out with them and leave those warnings anonymous.
    let span = tracing::warn_span!(
        "reconcile",
        controller = %ctl.name,
        namespace = key.namespace.as_deref().unwrap_or(""),
        name = %key.name,
        generation = cached.metadata.generation.unwrap_or(0),
        reconcile_id = %&reconcile_id[..12],
    );
    // One aggregated child-change event per reconcile (see crate::events).
    let uid = cached.metadata.uid.clone().unwrap_or_default();
    ctl.events.begin_batch(&uid);
    let outcome = passes(ctl, key, (*cached).clone()).instrument(span).await;
    ctl.events.end_batch(&uid);
    outcome
}

/// Runs passes until one finishes, reading the parent fresh after a conflict.
async fn passes(ctl: &Arc<Controller>, key: &ObjectKey, mut parent: DynamicObject) -> Outcome {
    for attempt in 0..=CONFLICT_RETRIES {
        match pass(ctl, key, parent).await {
            Ok(next) => return Outcome::Success { next },
            Err(Fail::Backoff(at_least)) => return Outcome::Failure { at_least },
            Err(Fail::StatusRejected) => {
                crate::observe::note(crate::observe::ReconcileResult::PermanentError);
                ctl.set_health(key, Some(false));
                return Outcome::Success {
                    next: Some(ctl.jittered_resync()),
                };
            }
            Err(Fail::Conflict) if attempt < CONFLICT_RETRIES => {
                tracing::debug!(action = "refetch", "conflict; reading the parent fresh");
                match parent_api(ctl, key).get_opt(&key.name).await {
                    Ok(Some(p)) => parent = p,
                    Ok(None) => {
                        forget(ctl, key);
                        return Outcome::Forget;
                    }
                    Err(e) => {
                        return Outcome::Failure {
                            at_least: retry_floor(&e),
                        };
                    }
                }
            }
            Err(Fail::Conflict) => {
                crate::observe::note(crate::observe::ReconcileResult::Conflict);
                return Outcome::Failure { at_least: None };
            }
        }
    }
    Outcome::Failure { at_least: None }
}

fn retry_floor(e: &kube::Error) -> Option<Duration> {
    match classify(e) {
        ApiErrorClass::TooManyRequests(d) => Some(d),
        _ => None,
    }
}

fn forget(ctl: &Controller, key: &ObjectKey) {
    ctl.permanent
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(key);
    ctl.set_health(key, None);
    ctl.forget_status(key);
    ctl.status_accepted(key);
}

fn parent_api(ctl: &Controller, key: &ObjectKey) -> Api<DynamicObject> {
    match (&key.namespace, ctl.parent.namespaced) {
        (Some(ns), true) => Api::namespaced_with(ctl.client.clone(), ns, &ctl.parent.ar),
        _ => Api::all_with(ctl.client.clone(), &ctl.parent.ar),
    }
}

fn child_api(ctl: &Controller, kind: usize, ns: Option<&str>) -> Api<DynamicObject> {
    let r = &ctl.children[kind].resolved;
    match ns {
        Some(ns) if r.namespaced => Api::namespaced_with(ctl.client.clone(), ns, &r.ar),
        _ => Api::all_with(ctl.client.clone(), &r.ar),
    }
}

fn regarding(ctl: &Controller, p: &DynamicObject) -> Regarding {
    Regarding {
        api_version: ctl.parent.ar.api_version.clone(),
        kind: ctl.parent.ar.kind.clone(),
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

/// A problem found while applying children; reported on Ready.
struct ChildProblem {
    reason: &'static str,
    message: String,
    retry: Option<Fail>,
}

async fn pass(
    ctl: &Arc<Controller>,
    key: &ObjectKey,
    mut parent: DynamicObject,
) -> Result<Option<Duration>, Fail> {
    let api = parent_api(ctl, key);
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let generation = parent.metadata.generation;
    let deleting = parent.metadata.deletion_timestamp.is_some();
    let has_fin = finalize::has_finalizer(&parent, &ctl.finalizer);

    if deleting {
        if !has_fin {
            // Not ours to hold up; garbage collection removes the children.
            return Ok(None);
        }
        if !ctl.finalize {
            tracing::info!(
                action = "remove-finalizer",
                "finalize disabled; releasing parent"
            );
            finalize::remove(&api, &parent, &ctl.finalizer, &ctl.field_manager)
                .await
                .map_err(|e| precondition_or(&e))?;
            return Ok(None);
        }
    } else if ctl.finalize && !has_fin {
        tracing::info!(
            action = "add-finalizer",
            "adding finalizer before any child exists"
        );
        parent = finalize::add(&api, &parent, &ctl.finalizer, &ctl.field_manager)
            .await
            .map_err(|e| precondition_or(&e))?;
    } else if !ctl.finalize && has_fin {
        finalize::remove(&api, &parent, &ctl.finalizer, &ctl.field_manager)
            .await
            .map_err(|e| precondition_or(&e))?;
        return Err(Fail::Conflict);
    }

    if !deleting && let Some((wait, reason, message)) = permanent_wait(ctl, key, &uid, generation) {
        tracing::debug!(
            action = "skip",
            "permanent error for this generation; waiting"
        );
        // No plugin call, but the status still says what this host decided
        // (someone may have overwritten it since).
        write_status(
            ctl,
            key,
            &api,
            &parent,
            StatusUpdate {
                conditions: vec![DesiredCondition::ready(false, &reason, &message)],
                replace_conditions: false,
                plugin_status: None,
            },
        )
        .await?;
        return Ok(Some(wait));
    }

    // Collect observed state from the caches.
    let mut observed: Vec<(usize, Arc<DynamicObject>)> = Vec::new();
    for (i, kind) in ctl.children.iter().enumerate() {
        for child in kind.cache.owned_by(&uid) {
            let ok_ns = !kind.resolved.namespaced
                || !ctl.parent.namespaced
                || child.metadata.namespace == parent.metadata.namespace;
            if ok_ns {
                observed.push((i, child));
            }
        }
    }
    let mut related = Vec::new();
    for r in &ctl.related {
        let ns = match (r.rule.scope, ctl.parent.namespaced) {
            (crate::crd::RelatedScope::Namespace, true) => parent.metadata.namespace.as_deref(),
            _ => None,
        };
        let group = RelatedObjects::group(&mut related, &r.key);
        for o in r.cache.in_namespace(ns) {
            if r.matches(&o) {
                group.push(to_json(&o));
            }
        }
    }
    let req = ReconcileRequest {
        parent: to_json(&parent),
        children: observed.iter().map(|(_, c)| to_json(c)).collect(),
        related,
        finalizing: deleting,
        config: ctl.config.clone(),
        now: now_rfc3339(),
    };

    count_call(ctl);
    let plugin = ctl.plugin();
    let started = std::time::Instant::now();
    let result = plugin.reconcile(&req, &ctl.limits).await;
    let took = started.elapsed();
    let on = regarding(ctl, &parent);
    let resp = match result {
        Ok(r) => r,
        Err(e) => {
            crate::observe::plugin_returned(
                ctl.observer.as_deref(),
                &ctl.name,
                took,
                &Err::<(), _>(e.clone()),
            );
            return plugin_failed(ctl, key, &api, &parent, &on, e).await;
        }
    };

    let validated = validate_response(
        &resp,
        &ctl.declared,
        parent
            .metadata
            .namespace
            .as_deref()
            .filter(|_| ctl.parent.namespaced),
    );
    // Output the host rejects is a plugin fault (`invalid_output`) exactly like
    // output the runtime could not decode: the plugin broke the contract.
    let verdict: Result<(), PluginError> = match &validated {
        Ok(_) => Ok(()),
        Err(invalid) => Err(PluginError::Permanent {
            reason: "InvalidPluginOutput".into(),
            message: invalid.0.clone(),
        }),
    };
    crate::observe::plugin_returned(ctl.observer.as_deref(), &ctl.name, took, &verdict);
    let desired = match validated {
        Ok(d) => d,
        Err(invalid) => {
            tracing::warn!(action = "reject-output", error = %invalid, "invalid plugin output; nothing applied");
            ctl.events
                .record(&on, EventKind::Warning, "InvalidPluginOutput", &invalid.0);
            remember_permanent(
                ctl,
                key,
                &uid,
                generation,
                "InvalidPluginOutput",
                &invalid.0,
            );
            write_status(
                ctl,
                key,
                &api,
                &parent,
                StatusUpdate {
                    conditions: vec![DesiredCondition::ready(
                        false,
                        "InvalidPluginOutput",
                        &invalid.0,
                    )],
                    replace_conditions: false,
                    plugin_status: None,
                },
            )
            .await?;
            ctl.set_health(key, Some(false));
            return Ok(Some(ctl.jittered_resync()));
        }
    };

    // Apply desired children.
    let owner = OwnerRef {
        api_version: ctl.parent.ar.api_version.clone(),
        kind: ctl.parent.ar.kind.clone(),
        name: key.name.clone(),
        uid: uid.clone(),
    };
    let mut problems: Vec<ChildProblem> = Vec::new();
    for d in &desired {
        let kind = &ctl.children[d.kind_index];
        let label = apply::child_label(&kind.resolved.ar.kind, d.namespace.as_deref(), &d.name);
        let obj = apply::desired_object(&d.object, &owner);
        let cached = kind.cache.get(&ObjectKey {
            namespace: d.namespace.clone(),
            name: d.name.clone(),
        });
        if let Err(p) = apply_child(
            ctl,
            d.kind_index,
            d.namespace.as_deref(),
            &d.name,
            &obj,
            cached.as_deref(),
            &uid,
            &on,
            &label,
        )
        .await
        {
            problems.push(p);
        }
    }

    // Delete observed children that are no longer desired.
    for (i, child) in &observed {
        let name = child.metadata.name.clone().unwrap_or_default();
        let wanted = desired.iter().any(|d| {
            d.kind_index == *i && d.name == name && d.namespace == child.metadata.namespace
        });
        if wanted || child.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let child_uid = child.metadata.uid.clone().unwrap_or_default();
        let label = apply::child_label(
            &ctl.children[*i].resolved.ar.kind,
            child.metadata.namespace.as_deref(),
            &name,
        );
        tracing::info!(action = "delete-child", child = %label, "deleting child that is no longer desired");
        match apply::delete(
            &child_api(ctl, *i, child.metadata.namespace.as_deref()),
            &name,
            &child_uid,
        )
        .await
        {
            Ok(()) => ctl.events.record(
                &on,
                EventKind::Normal,
                "ChildDeleted",
                &format!("deleted {label}"),
            ),
            Err(e) => match classify(&e) {
                ApiErrorClass::NotFound | ApiErrorClass::Conflict => {}
                _ => problems.push(ChildProblem {
                    reason: "DeleteFailed",
                    message: format!("deleting {label}: {e}"),
                    retry: Some(api_fail(&e)),
                }),
            },
        }
    }

    // Status.
    let ready = match problems.first() {
        None => DesiredCondition::ready(true, "Reconciled", ""),
        Some(p) => DesiredCondition::ready(false, p.reason, &p.message),
    };
    let mut conditions = vec![ready];
    conditions.extend(resp.conditions.iter().map(DesiredCondition::from_plugin));
    let finalize_now = deleting && resp.finalized && problems.is_empty();
    if !finalize_now {
        write_status(
            ctl,
            key,
            &api,
            &parent,
            StatusUpdate {
                conditions,
                replace_conditions: true,
                plugin_status: resp.status.clone(),
            },
        )
        .await?;
    }
    record_plugin_events(ctl, &on, &resp);
    forget_permanent(ctl, key);
    ctl.set_health(key, Some(problems.is_empty()));

    if finalize_now {
        tracing::info!(
            action = "remove-finalizer",
            "plugin finalized; removing finalizer"
        );
        finalize::remove(&api, &parent, &ctl.finalizer, &ctl.field_manager)
            .await
            .map_err(|e| precondition_or(&e))?;
        ctl.events.forget(&uid);
        return Ok(None);
    }
    if let Some(retry) = problems.into_iter().find_map(|p| p.retry) {
        return Err(retry);
    }
    let next = resp
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s)))
        .map_or_else(|| ctl.jittered_resync(), |d| d.min(ctl.jittered_resync()));
    Ok(Some(next))
}

fn precondition_or(e: &kube::Error) -> Fail {
    if is_precondition_failure(e) {
        Fail::Conflict
    } else {
        api_fail(e)
    }
}

fn to_json(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

#[allow(clippy::too_many_arguments)]
async fn apply_child(
    ctl: &Controller,
    kind: usize,
    ns: Option<&str>,
    name: &str,
    obj: &Value,
    cached: Option<&DynamicObject>,
    parent_uid: &str,
    on: &Regarding,
    label: &str,
) -> Result<(), ChildProblem> {
    let api = child_api(ctl, kind, ns);
    let method = ctl.children[kind].method;
    let mut action = apply::decide(obj, cached, parent_uid, method);
    // Two rounds at most: a create that finds an existing object looks at it once.
    for _ in 0..2 {
        match &action {
            ChildAction::Unchanged | ChildAction::Left | ChildAction::Wait => return Ok(()),
            ChildAction::Collision(why) => {
                let message = apply::collision_message(label, why);
                tracing::warn!(action = "collision", child = %label, "child name taken by another owner");
                ctl.events
                    .record(on, EventKind::Warning, "ChildConflict", &message);
                return Err(ChildProblem {
                    reason: "ChildConflict",
                    message,
                    retry: None,
                });
            }
            ChildAction::Create => {
                tracing::info!(action = "create-child", child = %label, "creating child");
                match apply::create(&api, name, obj, &ctl.field_manager).await {
                    Ok(c) if !c.created => {
                        tracing::debug!(action = "create-child", child = %label, "child already there (cache lagging); nothing changed");
                        return Ok(());
                    }
                    Ok(_) => {
                        ctl.events.record(
                            on,
                            EventKind::Normal,
                            "ChildCreated",
                            &format!("created {label}"),
                        );
                        return Ok(());
                    }
                    Err(e)
                        if matches!(
                            classify(&e),
                            ApiErrorClass::AlreadyExists
                                | ApiErrorClass::Conflict
                                | ApiErrorClass::Invalid(_)
                        ) =>
                    {
                        // Our cache was stale and somebody else's object has the
                        // name (409: its fields differ; 422: it has another
                        // controller): look, and report the collision.
                        match api.get_opt(name).await {
                            Ok(Some(fresh)) => {
                                action = apply::decide(obj, Some(&fresh), parent_uid, method)
                            }
                            // Nothing there: the refusal was about our own
                            // object (e.g. 422 naming a field); report it.
                            Ok(None) => return Err(child_api_problem(label, &e)),
                            Err(get) => return Err(child_api_problem(label, &get)),
                        }
                    }
                    Err(e) => return Err(child_api_problem(label, &e)),
                }
            }
            ChildAction::Apply => {
                tracing::info!(action = "update-child", child = %label, "applying child");
                return match apply::apply(&api, name, obj, &ctl.field_manager).await {
                    Ok(_) => {
                        ctl.events.record(
                            on,
                            EventKind::Normal,
                            "ChildUpdated",
                            &format!("updated {label}"),
                        );
                        Ok(())
                    }
                    Err(e) => Err(child_api_problem(label, &e)),
                };
            }
            ChildAction::Recreate { uid } => {
                tracing::info!(action = "recreate-child", child = %label, "deleting child to recreate it");
                return match apply::delete(&api, name, uid).await {
                    Ok(()) => {
                        ctl.events.record(
                            on,
                            EventKind::Normal,
                            "ChildDeleted",
                            &format!("deleted {label} to recreate it"),
                        );
                        Ok(())
                    }
                    Err(e)
                        if matches!(
                            classify(&e),
                            ApiErrorClass::NotFound | ApiErrorClass::Conflict
                        ) =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(child_api_problem(label, &e)),
                };
            }
        }
    }
    Ok(())
}

fn child_api_problem(label: &str, e: &kube::Error) -> ChildProblem {
    match classify(e) {
        ApiErrorClass::Invalid(msg) => ChildProblem {
            reason: "ChildInvalid",
            message: format!("{label} rejected by the API server: {msg}"),
            retry: None,
        },
        _ => ChildProblem {
            reason: "ApplyFailed",
            message: format!("applying {label}: {e}"),
            retry: Some(api_fail(e)),
        },
    }
}

async fn plugin_failed(
    ctl: &Controller,
    key: &ObjectKey,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    on: &Regarding,
    err: PluginError,
) -> Result<Option<Duration>, Fail> {
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let (reason, message, permanent) = match &err {
        PluginError::Permanent { reason, message } => (reason.clone(), message.clone(), true),
        PluginError::Transient { reason, message } => (reason.clone(), message.clone(), false),
        PluginError::Fault { kind, message } => (kind.clone(), message.clone(), false),
    };
    tracing::warn!(action = "plugin-error", permanent, reason = %reason, "plugin call failed");
    ctl.events.record(on, EventKind::Warning, &reason, &message);
    write_status(
        ctl,
        key,
        api,
        parent,
        StatusUpdate {
            conditions: vec![DesiredCondition::ready(false, &reason, &message)],
            replace_conditions: false,
            plugin_status: None,
        },
    )
    .await?;
    ctl.set_health(key, Some(false));
    if permanent {
        remember_permanent(
            ctl,
            key,
            &uid,
            parent.metadata.generation,
            &reason,
            &message,
        );
        Ok(Some(ctl.jittered_resync()))
    } else {
        Err(Fail::Backoff(None))
    }
}

/// How long to keep skipping the plugin for a remembered permanent failure, with
/// the failure's reason and message.
fn permanent_wait(
    ctl: &Controller,
    key: &ObjectKey,
    uid: &str,
    generation: Option<i64>,
) -> Option<(Duration, String, String)> {
    let map = ctl.permanent.lock().unwrap_or_else(|e| e.into_inner());
    let pf = map.get(key)?;
    if pf.uid != uid || pf.generation != generation {
        return None;
    }
    let elapsed = pf.at.elapsed();
    (elapsed < ctl.resync).then(|| (ctl.resync - elapsed, pf.reason.clone(), pf.message.clone()))
}

fn remember_permanent(
    ctl: &Controller,
    key: &ObjectKey,
    uid: &str,
    generation: Option<i64>,
    reason: &str,
    message: &str,
) {
    ctl.permanent
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(
            key.clone(),
            PermanentFailure {
                uid: uid.to_string(),
                generation,
                at: tokio::time::Instant::now(),
                reason: reason.to_string(),
                message: message.to_string(),
            },
        );
}

fn forget_permanent(ctl: &Controller, key: &ObjectKey) {
    ctl.permanent
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(key);
}

fn record_plugin_events(ctl: &Controller, on: &Regarding, resp: &ReconcileResponse) {
    for ev in &resp.events {
        let kind = match ev.type_ {
            EventType::Normal => EventKind::Normal,
            EventType::Warning => EventKind::Warning,
        };
        ctl.events.record(on, kind, &ev.reason, &ev.message);
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
) -> Result<(), Fail> {
    let name = parent.metadata.name.clone().unwrap_or_default();
    let pp = PatchParams {
        field_manager: Some(ctl.field_manager.clone()),
        ..PatchParams::default()
    };
    let mut fresh: Option<DynamicObject> = None;
    for _ in 0..=CONFLICT_RETRIES {
        let base = fresh.as_ref().unwrap_or(parent);
        let current = base.data.get("status");
        // A status that differs only in fields the parent CRD prunes is
        // already what the server would store: writing it changes nothing.
        let computed = next_status(current, base.metadata.generation, &update, &now_rfc3339())
            .filter(|new| {
                ctl.status_schema
                    .schema()
                    .is_none_or(|s| s.stored(new).as_ref() != current)
            });
        let Some(new) = computed else {
            ctl.status_accepted(key);
            ctl.remember_status(key, current);
            // The pass judged a parent snapshot taken when it started. If the
            // cache moved on meanwhile (typically the echo of this host's own
            // earlier status write, which did not count as drift while the
            // memory still matched it), "already right" may be wrong: run
            // again on the newer state. Checked after `remember_status`, so an
            // echo arriving later is judged against what was remembered here.
            let latest = ctl.parent_cache.get(key);
            if fresh.is_none()
                && latest.as_ref().and_then(|p| p.data.get("status")) != current
                && latest.is_some()
            {
                tracing::debug!(
                    action = "recheck-status",
                    "parent status changed during the pass; reconciling again"
                );
                ctl.queue.add(key.clone());
            }
            return Ok(());
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
        let body = json!({
            "metadata": {"resourceVersion": base.metadata.resource_version},
            "status": merge_patch(current, &new),
        });
        // Before the write: its watch echo may arrive before the response.
        let before = ctl.status_seen.recall(key);
        ctl.remember_status(key, Some(&new));
        tracing::debug!(action = "write-status", "status changed; writing it");
        let r = if ctl.parent.status_subresource {
            api.patch_status(&name, &pp, &Patch::Merge(&body)).await
        } else {
            api.patch(&name, &pp, &Patch::Merge(&body)).await
        };
        match r {
            Ok(stored) => {
                ctl.status_accepted(key);
                // What the server kept (it may prune or default fields).
                ctl.remember_status(key, stored.data.get("status"));
                if restoring {
                    ctl.status_seen.restored(key, tokio::time::Instant::now());
                }
                return Ok(());
            }
            Err(e) if classify(&e) == ApiErrorClass::NotFound => return Ok(()),
            Err(e) if matches!(classify(&e), ApiErrorClass::Invalid(_)) => {
                // Not written: what was remembered still stands.
                ctl.status_seen.reset(key, before);
                status_rejected(ctl, key, parent, &e);
                return Err(Fail::StatusRejected);
            }
            Err(e) if classify(&e) == ApiErrorClass::Conflict => {
                // Not written: what was remembered still stands.
                ctl.status_seen.reset(key, before);
                // Usually only the status moved (our cache had not seen the
                // last status write yet). While the spec the plugin answered
                // for still stands, only the status write is retried on a fresh
                // read: re-running the pass would call the plugin again and
                // re-apply children against the same lagging child caches. Any
                // other change that matters has queued another reconcile.
                match api.get_opt(&name).await {
                    Ok(Some(f)) if same_spec(parent, &f) => fresh = Some(f),
                    Ok(Some(_)) => return Err(Fail::Conflict),
                    Ok(None) => return Ok(()),
                    Err(e) => return Err(api_fail(&e)),
                }
            }
            Err(e) => return Err(api_fail(&e)),
        }
    }
    Err(Fail::Conflict)
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
            ctl.field_manager
        ),
    );
    ctl.status_rejected(key, &message);
}

/// True when `fresh` is the same object at the same spec generation and
/// deletion state as `seen`, so a status computed for `seen` still applies.
fn same_spec(seen: &DynamicObject, fresh: &DynamicObject) -> bool {
    let (a, b) = (&seen.metadata, &fresh.metadata);
    a.uid == b.uid
        && a.generation.is_some()
        && a.generation == b.generation
        && a.deletion_timestamp.is_some() == b.deletion_timestamp.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_cut_to_the_second_never_rounded_up() {
        let t: k8s_openapi::jiff::Timestamp = "2026-01-15T12:00:00.9Z".parse().unwrap();
        assert_eq!(whole_seconds(t), "2026-01-15T12:00:00Z");
        let t: k8s_openapi::jiff::Timestamp = "2026-01-15T12:00:07.2Z".parse().unwrap();
        assert_eq!(whole_seconds(t), "2026-01-15T12:00:07Z");
    }
}
