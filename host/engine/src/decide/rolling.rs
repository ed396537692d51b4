//! Rolling updates (`RollingInPlace`, `RollingRecreate`): which changed
//! children of a kind may be updated in this pass, and what the parent's
//! `RollingUpdate` condition says about the rollout.
//!
//! Level-based like the rest of the decision core: nothing is remembered
//! between passes. Each pass counts the children of a rolling kind that are
//! *unavailable* — not created yet, being deleted, or failing the kind's
//! `statusChecks` — and lets at most `maxUnavailable` minus that many changed
//! children be updated, in the plugin's order (changed children that already
//! fail the checks first, so a broken child is repaired before a healthy one
//! is taken down). The others are [`ChildAction::Queued`]. A recreated child
//! is missing and then failing the checks until it passes them, so the next
//! child waits for it.
//!
//! A child that fails the checks for longer than `progressDeadlineSeconds`
//! after the host last wrote it (its creation, or the host's last apply in
//! its `managedFields`) stops the rollout: no further child is updated and
//! the parent's `RollingUpdate` condition is `False`/`Stalled` and `Ready` is
//! `False`/`RolloutStalled`, both naming the child and the failed check.
//!
//! Use a field check such as `status.observedGeneration == metadata.generation`
//! with `RollingInPlace`: right after an in-place update, a `Ready` condition
//! may still be the one from before it.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::Value;

use super::{ChildStep, Problem, Source};
use crate::apply::ChildAction;
use crate::crd::{StatusChecks, UpdateStrategy};
use crate::queue::ObjectKey;
use crate::status::DesiredCondition;
use crate::target::Target;

/// Type of the parent condition that reports rollouts.
pub const CONDITION: &str = "RollingUpdate";
/// `Ready` reason of a parent whose rollout stalled.
pub const STALLED: &str = "RolloutStalled";

/// Default `maxUnavailable`.
pub const DEFAULT_MAX_UNAVAILABLE: u32 = 1;
/// Default `progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: u32 = 600;

/// A child kind's rolling settings, with defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Rolling {
    /// What an available child shows.
    pub checks: StatusChecks,
    /// Children updating or failing the checks at once.
    pub max_unavailable: usize,
    /// How long one child may fail the checks after the host wrote it.
    pub deadline: Duration,
}

impl Default for Rolling {
    fn default() -> Self {
        Self::from_strategy(None)
    }
}

impl Rolling {
    /// The settings of `strategy` (defaults when unset).
    pub fn from_strategy(strategy: Option<&UpdateStrategy>) -> Self {
        let s = strategy.cloned().unwrap_or_default();
        Self {
            checks: s.status_checks.unwrap_or_default(),
            max_unavailable: s.max_unavailable.unwrap_or(DEFAULT_MAX_UNAVAILABLE).max(1) as usize,
            deadline: Duration::from_secs(u64::from(
                s.progress_deadline_seconds
                    .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS),
            )),
        }
    }
}

/// What a rollout means for the parent this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// The `RollingUpdate` condition.
    pub condition: DesiredCondition,
    /// Set when a child missed its deadline: `Ready=False` with it.
    pub stalled: Option<Problem>,
    /// When to look again if nothing changes (a waited-for child's deadline).
    pub recheck: Option<Duration>,
}

/// `Ok` when `child` passes every check; otherwise the first failure, e.g.
/// `condition Ready is False` or `status.observedGeneration is 1, not
/// metadata.generation 2`.
pub fn check(checks: &StatusChecks, child: &Value) -> Result<(), String> {
    for c in &checks.conditions {
        let want = c.status.as_deref().unwrap_or("True");
        let found = child
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|x| x.get("type").and_then(Value::as_str) == Some(c.type_.as_str()))
            });
        let Some(found) = found else {
            return Err(format!("condition {} is missing", c.type_));
        };
        let status = found.get("status").and_then(Value::as_str).unwrap_or("");
        if status != want {
            return Err(format!("condition {} is {status}", c.type_));
        }
        if let Some(reason) = &c.reason {
            let got = found.get("reason").and_then(Value::as_str).unwrap_or("");
            if got != reason {
                return Err(format!(
                    "condition {} has reason {got:?}, not {reason:?}",
                    c.type_
                ));
            }
        }
    }
    for f in &checks.fields {
        let Some(got) = at_path(child, &f.path) else {
            return Err(format!("{} is not set", f.path));
        };
        match (&f.equals_path, &f.value) {
            (Some(other), _) => match at_path(child, other) {
                Some(want) if same(got, want) => {}
                Some(want) => return Err(format!("{} is {got}, not {other} {want}", f.path)),
                None => return Err(format!("{other} is not set")),
            },
            (None, Some(want)) if !same(got, want) => {
                return Err(format!("{} is {got}, not {want}", f.path));
            }
            _ => {}
        }
    }
    Ok(())
}

/// `a.b.c` in `v`.
fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .filter(|v| !v.is_null())
}

/// Equal, numbers by value (`1` == `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// When the host last wrote `child`: its creation, or the host's last apply
/// (the `time` of its `managedFields` entry), whichever is later.
pub fn last_written(child: &DynamicObject, field_manager: &str) -> Option<Timestamp> {
    let created = child.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let applied = child
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref() == Some(field_manager) && m.subresource.is_none())
        .filter_map(|m| m.time.as_ref().map(|t| t.0))
        .max();
    created.into_iter().chain(applied).max()
}

/// One child of a rolling kind that is not available.
struct Unavailable {
    step: usize,
    why: String,
    since: Option<Timestamp>,
}

/// The rollout of one kind as this pass sees it.
struct KindRollout {
    kind: String,
    total: usize,
    updated: usize,
    unavailable: Vec<Unavailable>,
    updating: Vec<usize>,
    stalled: Option<(usize, String)>,
    recheck: Option<Duration>,
}

/// Gates the changed children of every rolling kind in `steps` (turning the
/// ones that must wait into [`ChildAction::Queued`]) and returns what the
/// parent's conditions say; `None` when no rolling kind has a desired child.
pub fn gate(
    target: &Target,
    steps: &mut [ChildStep],
    src: &dyn Source,
    now: &str,
) -> Option<Rollout> {
    let now: Option<Timestamp> = now.parse().ok();
    let mut kinds = Vec::new();
    for (k, child) in target.children.iter().enumerate() {
        if !child.method.is_rolling() || !steps.iter().any(|s| s.kind == k) {
            continue;
        }
        kinds.push(gate_kind(target, k, steps, src, now));
    }
    if kinds.is_empty() {
        return None;
    }
    Some(summarize(target, &kinds, steps))
}

/// Gates one rolling kind's changed children: counts them, finds the
/// unavailable ones and a stalled one, and lets as many updates through as
/// the kind's `maxUnavailable` leaves room for (unhealthy children first).
fn gate_kind(
    target: &Target,
    k: usize,
    steps: &mut [ChildStep],
    src: &dyn Source,
    now: Option<Timestamp>,
) -> KindRollout {
    let rolling = &target.children[k].rolling;
    let (mut r, changed) = survey(target, k, steps, src);
    if let Some(now) = now {
        apply_deadline(&mut r, rolling.deadline, now);
    }
    admit_updates(&mut r, rolling.max_unavailable, changed, steps);
    r
}

/// The children of kind `k` to change, unhealthy ones first (they cannot
/// make availability worse).
struct Changed {
    broken: Vec<usize>,
    healthy: Vec<usize>,
}

/// Counts kind `k`'s children, notes the unavailable ones (not created yet,
/// being deleted, failing their status checks) and sorts the ones to change
/// by their health.
fn survey(
    target: &Target,
    k: usize,
    steps: &[ChildStep],
    src: &dyn Source,
) -> (KindRollout, Changed) {
    let rolling = &target.children[k].rolling;
    let mut r = KindRollout {
        kind: target.children[k].resolved.ar.kind.clone(),
        total: 0,
        updated: 0,
        unavailable: Vec::new(),
        updating: Vec::new(),
        stalled: None,
        recheck: None,
    };
    let mut changed = Changed {
        broken: Vec::new(),
        healthy: Vec::new(),
    };
    for (i, step) in steps.iter().enumerate().filter(|(_, s)| s.kind == k) {
        r.total += 1;
        let observed = || {
            src.child(
                k,
                &ObjectKey {
                    namespace: step.namespace.clone(),
                    name: step.name.clone(),
                },
            )
        };
        let verdict = |o: &DynamicObject| {
            check(
                &rolling.checks,
                &serde_json::to_value(o).unwrap_or(Value::Null),
            )
        };
        match &step.action {
            ChildAction::Create => r.unavailable.push(Unavailable {
                step: i,
                why: "not created yet".into(),
                since: None,
            }),
            ChildAction::Wait => r.unavailable.push(Unavailable {
                step: i,
                why: "being deleted".into(),
                since: None,
            }),
            ChildAction::Unchanged => {
                r.updated += 1;
                if let Some(o) = observed()
                    && let Err(why) = verdict(&o)
                {
                    r.unavailable.push(Unavailable {
                        step: i,
                        why,
                        since: last_written(&o, &target.field_manager),
                    });
                }
            }
            // Adopting an orphan or taking over Metacontroller's fields
            // rewrites the child like an update: gated the same way.
            ChildAction::Apply
            | ChildAction::Recreate { .. }
            | ChildAction::Adopt
            | ChildAction::TakeOver => match observed().map(|o| verdict(&o)) {
                Some(Ok(())) => changed.healthy.push(i),
                _ => changed.broken.push(i),
            },
            ChildAction::Left | ChildAction::Collision(_) | ChildAction::Queued(_) => {}
        }
    }
    (r, changed)
}

/// The progress deadline: the first child unavailable for longer stalls the
/// kind; otherwise the earliest deadline still ahead is when to look again.
fn apply_deadline(r: &mut KindRollout, deadline: Duration, now: Timestamp) {
    for u in &r.unavailable {
        let Some(since) = u.since else { continue };
        let waited = Duration::try_from(now.duration_since(since)).unwrap_or_default();
        if waited >= deadline {
            if r.stalled.is_none() {
                r.stalled = Some((u.step, u.why.clone()));
            }
        } else {
            let left = deadline - waited;
            r.recheck = Some(r.recheck.map_or(left, |d| d.min(left)));
        }
    }
}

/// Lets through as many changes as `max_unavailable` leaves room for (none
/// when stalled); the rest become [`ChildAction::Queued`], naming the child
/// they wait for.
fn admit_updates(
    r: &mut KindRollout,
    max_unavailable: usize,
    changed: Changed,
    steps: &mut [ChildStep],
) {
    let slots = match r.stalled {
        Some(_) => 0,
        None => max_unavailable.saturating_sub(r.unavailable.len()),
    };
    let waiting_for = r
        .stalled
        .as_ref()
        .map(|(i, _)| *i)
        .or(r.unavailable.first().map(|u| u.step));
    for (n, i) in changed
        .broken
        .into_iter()
        .chain(changed.healthy)
        .enumerate()
    {
        if n < slots {
            r.updating.push(i);
        } else {
            let why = match waiting_for {
                Some(w) => format!("rolling update: waiting for {}", steps[w].label),
                None => "rolling update: waiting for the children being updated".into(),
            };
            steps[i].action = ChildAction::Queued(why);
        }
    }
}

/// One condition for all rolling kinds: `Stalled` outranks `Progressing`,
/// which outranks `Complete`.
fn summarize(target: &Target, kinds: &[KindRollout], steps: &[ChildStep]) -> Rollout {
    let many = kinds.len() > 1;
    let mut messages = Vec::new();
    let mut stalled = None;
    let mut progressing = false;
    let mut recheck: Option<Duration> = None;
    for r in kinds {
        let prefix = if many {
            format!("{}: ", r.kind)
        } else {
            String::new()
        };
        let count = format!("{prefix}{}/{} updated", r.updated, r.total);
        let msg = if let Some((i, why)) = &r.stalled {
            let deadline = target
                .children
                .iter()
                .find(|c| c.resolved.ar.kind == r.kind)
                .map_or(0, |c| c.rolling.deadline.as_secs());
            let m = format!(
                "{count}, rollout stopped: {} has not passed its status checks within {deadline}s: {why}",
                steps[*i].label
            );
            stalled.get_or_insert(Problem {
                reason: STALLED,
                message: m.clone(),
            });
            m
        } else if let Some(u) = r.unavailable.first() {
            progressing = true;
            let more = match r.unavailable.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            format!(
                "{count}, waiting for {}: {}{more}",
                steps[u.step].label, u.why
            )
        } else if let Some(i) = r.updating.first() {
            progressing = true;
            format!("{count}, updating {}", steps[*i].label)
        } else {
            count
        };
        messages.push(msg);
        if let Some(d) = r.recheck {
            recheck = Some(recheck.map_or(d, |x| x.min(d)));
        }
    }
    let (status, reason) = match (&stalled, progressing) {
        (Some(_), _) => (false, "Stalled"),
        (None, true) => (true, "Progressing"),
        (None, false) => (true, "Complete"),
    };
    Rollout {
        condition: DesiredCondition {
            type_: CONDITION.into(),
            status: if status { "True" } else { "False" },
            reason: reason.into(),
            message: messages.join("; "),
        },
        stalled,
        recheck,
    }
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
mod tests;
