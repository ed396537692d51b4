//! Canary rollout of a candidate version: which parents run it at each step,
//! when the next step starts, and when a gate fails — as pure functions of
//! the policy (`spec.rollout`), the state kept in the cluster
//! (`status.rollout`), what the host observes and the time.
//!
//! The state lives in the WasmController's status, never only in memory: a
//! restarted host (or a new leader) reads it and continues at the same step,
//! with the same parents on the candidate. The manager calls [`advance`] at
//! every sync and writes what it returns; commands from
//! `wasm-reconciler rollout` arrive as an annotation ([`apply_command`]).

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::core::Selector;
use sha2::{Digest, Sha256};

use crate::candidate::{Route, StepMatch};
use crate::crd::{RolloutGates, RolloutPhase, RolloutPolicy, RolloutStatus};

/// Default pause between steps.
pub const DEFAULT_PAUSE_SECONDS: u32 = 60;
/// Default time migrated parents have to become Ready.
pub const DEFAULT_READY_WITHIN_SECONDS: u32 = 60;

/// The stable bucket (0..100) of a parent: the first four bytes of
/// sha256(`namespace/name`) modulo 100. The same at every host and release,
/// so a percentage step selects the same parents after a restart, and nested:
/// the parents below 10 are among those below 50.
pub fn bucket(namespace: Option<&str>, name: &str) -> u32 {
    let mut h = Sha256::new();
    h.update(namespace.unwrap_or("").as_bytes());
    h.update(b"/");
    h.update(name.as_bytes());
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]]) % 100
}

/// The parents the candidate serves in `status`'s state.
pub fn route(policy: &RolloutPolicy, status: &RolloutStatus) -> Route {
    match status.phase {
        RolloutPhase::Promoted => Route::Everybody,
        RolloutPhase::RolledBack | RolloutPhase::Aborted => Route::Nobody,
        RolloutPhase::Progressing | RolloutPhase::Paused => {
            let upto = (status.step.max(1) as usize).min(policy.steps.len());
            Route::Steps(
                policy.steps[..upto]
                    .iter()
                    .filter_map(|s| {
                        if let Some(p) = s.percent {
                            return Some(StepMatch::Percent(p));
                        }
                        if let Some(ns) = &s.namespaces {
                            return Some(StepMatch::Namespaces(ns.clone()));
                        }
                        let sel = s.selector.clone()?;
                        // A selector that does not parse selects nobody
                        // rather than everybody.
                        Selector::try_from(sel).ok().map(StepMatch::Selector)
                    })
                    .collect(),
            )
        }
    }
}

/// A fresh rollout of `digest`: step 1 from `now`.
pub fn begin(policy: &RolloutPolicy, digest: &str, now: Timestamp) -> RolloutStatus {
    RolloutStatus {
        candidate_digest: digest.to_string(),
        phase: RolloutPhase::Progressing,
        step: 1,
        steps: policy.steps.len() as u32,
        step_started_at: Some(stamp(now)),
        message: Some("step 1 started".into()),
        ..RolloutStatus::default()
    }
}

fn stamp(t: Timestamp) -> String {
    crate::reconcile::whole_seconds(t)
}

/// What the host observes of the migrated parents and the candidate's calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed {
    /// Parents the candidate serves now.
    pub migrated: u32,
    /// Of those, parents whose last reconcile succeeded.
    pub ready: u32,
    /// Of those, parents the candidate has answered for (on this host).
    pub answered: u32,
    /// Candidate calls ending in a sandbox fault, this step.
    pub faults: u32,
    /// Candidate calls ending in a permanent error, this step.
    pub permanent: u32,
}

/// A change worth an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Step `n` (1-based, as `status.rollout.step`) started.
    Advanced(u32),
    /// The last step passed: every parent runs the candidate.
    Promoted,
    /// A gate failed: every parent runs the active version again.
    RolledBack(String),
}

/// The next state: gates first (a failed gate rolls back, paused or not),
/// then, when the step's pause is over and its parents are Ready enough, the
/// next step (or promotion after the last).
pub fn advance(
    policy: &RolloutPolicy,
    status: &RolloutStatus,
    seen: Observed,
    now: Timestamp,
) -> (RolloutStatus, Option<Transition>) {
    let mut st = status.clone();
    st.steps = policy.steps.len() as u32;
    st.migrated = seen.migrated;
    st.migrated_ready = seen.ready;
    st.faults = seen.faults;
    st.permanent_errors = seen.permanent;
    if !matches!(st.phase, RolloutPhase::Progressing | RolloutPhase::Paused) {
        return (st, None);
    }
    let gates = policy.gates.clone().unwrap_or_default();
    // 1-based, like the messages; a status without a step is at step 1.
    st.step = st.step.max(1);
    let n = st.step;
    let started = st
        .step_started_at
        .as_deref()
        .and_then(|s| s.parse::<Timestamp>().ok())
        .unwrap_or(now);
    let elapsed = now.duration_since(started);
    let secs = |s: u32| SignedDuration::from_secs(i64::from(s));
    let ready_enough = ready_enough(&gates, &seen);
    let failed = failed_gate(&gates, n, &seen, elapsed);
    if let Some(why) = failed {
        st.phase = RolloutPhase::RolledBack;
        st.message = Some(format!("{why}; every parent is back on the active version"));
        return (st, Some(Transition::RolledBack(why)));
    }
    if st.phase == RolloutPhase::Paused {
        return (st, None);
    }
    let step = policy.steps.get(n as usize - 1);
    let pause = step
        .and_then(|s| s.pause_seconds)
        .or(policy.pause_seconds)
        .unwrap_or(DEFAULT_PAUSE_SECONDS);
    if elapsed < secs(pause) || !ready_enough {
        return (st, None);
    }
    if n as usize >= policy.steps.len() {
        st.phase = RolloutPhase::Promoted;
        st.message = Some(format!(
            "all {n} steps passed; every parent runs the candidate"
        ));
        return (st, Some(Transition::Promoted));
    }
    st.step += 1;
    st.step_started_at = Some(stamp(now));
    st.faults = 0;
    st.permanent_errors = 0;
    st.message = Some(format!("step {} started", st.step));
    let step = st.step;
    (st, Some(Transition::Advanced(step)))
}

/// Whether enough migrated parents are Ready for the gate's `readyPercent`.
fn ready_enough(gates: &RolloutGates, seen: &Observed) -> bool {
    let ready_percent = gates.ready_percent.unwrap_or(100);
    u64::from(seen.ready) * 100 >= u64::from(ready_percent) * u64::from(seen.migrated)
}

/// The gate step `n` failed, if one did: too many faults, too many
/// permanent errors, or too few Ready parents once the step had its time.
fn failed_gate(
    gates: &RolloutGates,
    n: u32,
    seen: &Observed,
    elapsed: SignedDuration,
) -> Option<String> {
    let secs = |s: u32| SignedDuration::from_secs(i64::from(s));
    let max_faults = gates.max_faults.unwrap_or(0);
    let max_permanent = gates.max_permanent_errors.unwrap_or(0);
    let ready_percent = gates.ready_percent.unwrap_or(100);
    let within = gates
        .ready_within_seconds
        .unwrap_or(DEFAULT_READY_WITHIN_SECONDS);
    if seen.faults > max_faults {
        Some(format!(
            "step {n}: the candidate faulted {} time(s) (gate allows {max_faults})",
            seen.faults
        ))
    } else if seen.permanent > max_permanent {
        Some(format!(
            "step {n}: the candidate returned {} permanent error(s) (gate allows {max_permanent})",
            seen.permanent
        ))
    } else if !ready_enough(gates, seen)
        && elapsed >= secs(within)
        // A host that just took over has not seen every migrated parent
        // reconciled yet: judge readiness once it has, or after twice the time.
        && (seen.answered >= seen.migrated || elapsed >= secs(within.saturating_mul(2)))
    {
        Some(format!(
            "step {n}: {} of {} migrated parents Ready after {within}s (gate needs {ready_percent}%)",
            seen.ready, seen.migrated
        ))
    } else {
        None
    }
}

/// A command from `wasm-reconciler rollout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Every parent to the candidate now.
    Promote,
    /// Every parent back to the active version now.
    Abort,
    /// Hold the current step.
    Pause,
    /// Continue a paused rollout, or start a rolled-back or aborted one again at step 1.
    Resume,
}

impl std::str::FromStr for Command {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "promote" => Ok(Command::Promote),
            "abort" => Ok(Command::Abort),
            "pause" => Ok(Command::Pause),
            "resume" => Ok(Command::Resume),
            other => Err(format!(
                "unknown rollout command {other:?} (promote, abort, pause, resume)"
            )),
        }
    }
}

impl Command {
    /// The word of the annotation (`pause`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Promote => "promote",
            Command::Abort => "abort",
            Command::Pause => "pause",
            Command::Resume => "resume",
        }
    }
}

/// The phase `cmd` moves a rollout to from `phase`; `None` when it changes
/// nothing there (pausing what is not progressing, resuming what is
/// progressing or promoted, promoting what is promoted, aborting what is
/// aborted). [`apply_command`] follows it, and `wasm-reconciler rollout`
/// uses it to refuse a command that would change nothing and to know the
/// host applied one (the phase moved: a progress report does not move it).
pub fn phase_after(cmd: Command, phase: RolloutPhase) -> Option<RolloutPhase> {
    match (cmd, phase) {
        (Command::Promote, RolloutPhase::Promoted) | (Command::Abort, RolloutPhase::Aborted) => {
            None
        }
        (Command::Promote, _) => Some(RolloutPhase::Promoted),
        (Command::Abort, _) => Some(RolloutPhase::Aborted),
        (Command::Pause, RolloutPhase::Progressing) => Some(RolloutPhase::Paused),
        (
            Command::Resume,
            RolloutPhase::Paused | RolloutPhase::RolledBack | RolloutPhase::Aborted,
        ) => Some(RolloutPhase::Progressing),
        _ => None,
    }
}

/// Applies `cmd` to `status`.
pub fn apply_command(
    policy: &RolloutPolicy,
    status: &RolloutStatus,
    cmd: Command,
    now: Timestamp,
) -> RolloutStatus {
    let mut st = status.clone();
    if phase_after(cmd, st.phase).is_none() {
        return st;
    }
    match (cmd, st.phase) {
        (Command::Promote, _) => {
            st.phase = RolloutPhase::Promoted;
            st.message = Some("promoted by hand".into());
        }
        (Command::Abort, _) => {
            st.phase = RolloutPhase::Aborted;
            st.message = Some("aborted by hand; every parent is back on the active version".into());
        }
        (Command::Pause, RolloutPhase::Progressing) => {
            st.phase = RolloutPhase::Paused;
            st.message = Some(format!("paused at step {}", st.step.max(1)));
        }
        (Command::Resume, RolloutPhase::Paused) => {
            st.phase = RolloutPhase::Progressing;
            st.message = Some(format!("resumed at step {}", st.step.max(1)));
        }
        (Command::Resume, _) => {
            st = begin(policy, &st.candidate_digest, now);
            st.message = Some("restarted by hand at step 1".into());
        }
        (Command::Pause, _) => {}
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{RolloutGates, RolloutStep};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn step(percent: u32) -> RolloutStep {
        RolloutStep {
            percent: Some(percent),
            namespaces: None,
            selector: None,
            pause_seconds: None,
        }
    }

    fn policy() -> RolloutPolicy {
        RolloutPolicy {
            steps: vec![step(10), step(50), step(100)],
            pause_seconds: Some(30),
            gates: Some(RolloutGates {
                ready_percent: Some(90),
                ready_within_seconds: Some(20),
                max_faults: Some(1),
                max_permanent_errors: Some(0),
            }),
        }
    }

    fn ok(migrated: u32) -> Observed {
        Observed {
            migrated,
            ready: migrated,
            answered: migrated,
            ..Observed::default()
        }
    }

    #[test]
    fn buckets_are_spread_and_percent_steps_nest() {
        let names: Vec<String> = (0..1000).map(|i| format!("p{i}")).collect();
        let in_pct = |p: u32| -> Vec<&String> {
            names.iter().filter(|n| bucket(Some("ns"), n) < p).collect()
        };
        let (ten, fifty) = (in_pct(10), in_pct(50));
        assert!((50..=150).contains(&ten.len()), "{}", ten.len());
        assert!((400..=600).contains(&fifty.len()), "{}", fifty.len());
        assert!(ten.iter().all(|n| fifty.contains(n)));
        assert_eq!(in_pct(100).len(), 1000);
        assert!(in_pct(0).is_empty());
        // Stable: the same parent, the same bucket; the namespace counts.
        assert_eq!(bucket(Some("ns"), "p1"), bucket(Some("ns"), "p1"));
        let moved = names
            .iter()
            .filter(|n| bucket(Some("a"), n) != bucket(Some("b"), n))
            .count();
        assert!(moved > 900);
    }

    #[test]
    fn steps_advance_after_their_pause_and_promote_after_the_last() {
        let p = policy();
        let s0 = begin(&p, "sha256:c", t(0));
        let (s, tr) = advance(&p, &s0, ok(3), t(29));
        assert_eq!((s.step, tr), (1, None));
        let (s1, tr) = advance(&p, &s, ok(3), t(30));
        assert_eq!((s1.step, tr), (2, Some(Transition::Advanced(2))));
        assert_eq!(s1.step_started_at.as_deref(), Some(stamp(t(30)).as_str()));
        let (s2, _) = advance(&p, &s1, ok(10), t(60));
        assert_eq!(s2.step, 3);
        let (s3, tr) = advance(&p, &s2, ok(20), t(90));
        assert_eq!(
            (s3.phase, tr),
            (RolloutPhase::Promoted, Some(Transition::Promoted))
        );
        // Promoted is final.
        assert_eq!(advance(&p, &s3, ok(0), t(500)).1, None);
    }

    #[test]
    fn a_step_waits_for_readiness_and_rolls_back_when_it_does_not_come() {
        let p = policy();
        let s0 = begin(&p, "sha256:c", t(0));
        let slow = Observed {
            migrated: 10,
            ready: 8,
            answered: 10,
            ..Observed::default()
        };
        // Not all answered yet (a new leader): wait up to twice the time.
        let unseen = Observed {
            answered: 9,
            ..slow
        };
        assert_eq!(
            advance(&p, &s0, unseen, t(25)).0.phase,
            RolloutPhase::Progressing
        );
        assert_eq!(
            advance(&p, &s0, unseen, t(40)).0.phase,
            RolloutPhase::RolledBack
        );
        assert_eq!(advance(&p, &s0, slow, t(10)).1, None);
        let (s, tr) = advance(&p, &s0, slow, t(20));
        assert_eq!(s.phase, RolloutPhase::RolledBack);
        let Some(Transition::RolledBack(why)) = tr else {
            panic!("{tr:?}")
        };
        assert!(why.contains("8 of 10"), "{why}");
        // 9 of 10 is 90 %: enough.
        let fine = Observed { ready: 9, ..slow };
        assert_eq!(advance(&p, &s0, fine, t(30)).0.step, 2);
    }

    #[test]
    fn faults_and_permanent_errors_over_the_gate_roll_back_at_once_even_paused() {
        let p = policy();
        let mut s0 = begin(&p, "sha256:c", t(0));
        let one = Observed { faults: 1, ..ok(2) };
        assert_eq!(
            advance(&p, &s0, one, t(1)).0.phase,
            RolloutPhase::Progressing
        );
        s0.phase = RolloutPhase::Paused;
        let two = Observed { faults: 2, ..one };
        let (s, tr) = advance(&p, &s0, two, t(1));
        assert_eq!(s.phase, RolloutPhase::RolledBack);
        assert!(matches!(tr, Some(Transition::RolledBack(w)) if w.contains("faulted 2")));
        let perm = Observed {
            permanent: 1,
            ..ok(2)
        };
        assert_eq!(
            advance(&p, &s0, perm, t(1)).0.phase,
            RolloutPhase::RolledBack
        );
        // Paused holds the step even after its pause.
        assert_eq!(advance(&p, &s0, ok(2), t(100)).0.step, 1);
    }

    #[test]
    fn routes_follow_the_phase_and_include_the_earlier_steps() {
        let mut p = policy();
        p.steps[1] = RolloutStep {
            percent: None,
            namespaces: Some(vec!["canary".into()]),
            selector: None,
            pause_seconds: None,
        };
        let mut s = begin(&p, "d", t(0));
        let none = std::collections::BTreeMap::new();
        let in_ten = (0..100)
            .map(|i| format!("p{i}"))
            .find(|n| bucket(Some("x"), n) < 10)
            .unwrap();
        assert!(route(&p, &s).serves(Some("x"), &in_ten, &none));
        let out_of_ten = (0..100)
            .map(|i| format!("p{i}"))
            .find(|n| bucket(Some("canary"), n) >= 10)
            .unwrap();
        assert!(!route(&p, &s).serves(Some("canary"), &out_of_ten, &none));
        s.step = 2;
        assert!(route(&p, &s).serves(Some("canary"), "any", &none));
        assert!(route(&p, &s).serves(Some("x"), &in_ten, &none));
        s.phase = RolloutPhase::RolledBack;
        assert!(!route(&p, &s).serves(Some("canary"), "any", &none));
        s.phase = RolloutPhase::Promoted;
        assert!(route(&p, &s).serves(Some("other"), "any", &none));
    }

    #[test]
    fn commands_pause_resume_promote_abort_and_restart() {
        let p = policy();
        let s = begin(&p, "d", t(0));
        let paused = apply_command(&p, &s, Command::Pause, t(1));
        assert_eq!(paused.phase, RolloutPhase::Paused);
        let resumed = apply_command(&p, &paused, Command::Resume, t(2));
        assert_eq!(resumed.phase, RolloutPhase::Progressing);
        assert_eq!(
            apply_command(&p, &s, Command::Promote, t(1)).phase,
            RolloutPhase::Promoted
        );
        let aborted = apply_command(&p, &s, Command::Abort, t(1));
        assert_eq!(aborted.phase, RolloutPhase::Aborted);
        let again = apply_command(&p, &aborted, Command::Resume, t(5));
        assert_eq!((again.phase, again.step), (RolloutPhase::Progressing, 1));
        assert_eq!(again.step_started_at.as_deref(), Some(stamp(t(5)).as_str()));
        assert!("sideways".parse::<Command>().is_err());
    }

    /// The phase `rollout pause|resume|promote|abort` waits for is the one
    /// the host's command leaves, in every phase, and a command that changes
    /// nothing leaves the status as it was.
    #[test]
    fn phase_after_is_what_apply_command_does() {
        use RolloutPhase::*;
        let p = policy();
        for cmd in [
            Command::Promote,
            Command::Abort,
            Command::Pause,
            Command::Resume,
        ] {
            assert_eq!(cmd.as_str().parse::<Command>(), Ok(cmd));
            for phase in [Progressing, Paused, Promoted, RolledBack, Aborted] {
                let mut s = begin(&p, "d", t(0));
                s.phase = phase;
                let next = apply_command(&p, &s, cmd, t(9));
                match phase_after(cmd, phase) {
                    Some(want) => assert_eq!(next.phase, want, "{cmd:?} in {phase:?}"),
                    None => assert_eq!(next, s, "{cmd:?} in {phase:?} changes nothing"),
                }
            }
        }
        assert_eq!(phase_after(Command::Pause, Paused), None);
        assert_eq!(phase_after(Command::Resume, Progressing), None);
        assert_eq!(phase_after(Command::Resume, Promoted), None);
        assert_eq!(phase_after(Command::Promote, Promoted), None);
        assert_eq!(phase_after(Command::Abort, Aborted), None);
    }

    /// `status.rollout.step`, its message, the `RolloutStep` Event's step and
    /// a failed gate's message all count the same way (1-based): a status
    /// once said `step: 1` beside "step 2 started".
    #[test]
    fn the_status_step_is_the_step_the_messages_name() {
        let p = policy();
        let s1 = begin(&p, "d", t(0));
        assert_eq!(
            (s1.step, s1.message.as_deref()),
            (1, Some("step 1 started"))
        );
        let (s2, tr) = advance(&p, &s1, ok(3), t(30));
        assert_eq!(tr, Some(Transition::Advanced(2)));
        assert_eq!(
            (s2.step, s2.message.as_deref()),
            (2, Some("step 2 started"))
        );
        let paused = apply_command(&p, &s2, Command::Pause, t(31));
        assert_eq!(paused.message.as_deref(), Some("paused at step 2"));
        let bad = Observed { faults: 2, ..ok(3) };
        let (rolled, _) = advance(&p, &s2, bad, t(32));
        assert_eq!(rolled.step, 2);
        assert!(
            rolled
                .message
                .as_deref()
                .unwrap_or("")
                .starts_with("step 2:"),
            "{rolled:?}"
        );
        // Promotion after the last step names the number of steps.
        let (s3, _) = advance(&p, &s2, ok(3), t(60));
        let (done, tr) = advance(&p, &s3, ok(3), t(90));
        assert_eq!((s3.step, tr), (3, Some(Transition::Promoted)));
        assert_eq!(
            done.message.as_deref(),
            Some("all 3 steps passed; every parent runs the candidate")
        );
    }
}
