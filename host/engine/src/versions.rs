//! The lifecycle of one controller's plugin versions, as one state type.
//!
//! A version is *loading* (compiling off the manager's loop), *loaded* (ready,
//! waiting to serve), *failed* (refused; not retried until the source holds
//! other bytes), *active* (serving), *previous* (what served before the
//! active one: the rollback target), *rolled back* (refused while the source
//! still holds it), or the *candidate* (run in the shadow of the active one
//! and for the parents a canary rollout moved to it; see [`crate::shadow`]
//! and [`crate::canary`]). The manager asks this type what to do and tells
//! it what happened; every transition is a method here, unit-tested without
//! a plugin or an API server (`P` is the plugin handle; the manager uses
//! `Arc<dyn ReconcilePlugin>`).

use std::sync::Arc;

use crate::rollout::Judge;

/// Which of a controller's two sources a load is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `spec.plugin`.
    Active,
    /// `spec.plugin.candidate`.
    Candidate,
}

/// A version that serves (or served): digest, plugin, when it was loaded.
#[derive(Clone)]
pub struct Serving<P> {
    /// `sha256:<hex>`.
    pub digest: String,
    /// The loaded plugin.
    pub plugin: P,
    /// When it was loaded (RFC 3339).
    pub loaded_at: String,
}

/// A finished load that does not serve yet.
struct Finished<P> {
    digest: String,
    result: Result<P, String>,
    load_ms: Option<u64>,
}

/// The loading path of one role: in flight, finished, refused.
struct Load<P> {
    loading: Option<String>,
    loaded: Option<Finished<P>>,
    /// Digest and load error of the version that failed.
    failed: Option<(String, String)>,
}

impl<P> Default for Load<P> {
    fn default() -> Self {
        Self {
            loading: None,
            loaded: None,
            failed: None,
        }
    }
}

/// What the loading path holds for one role and digest ([`Versions::lookup`]).
pub enum Lookup<P> {
    /// This version failed to load before (with the error): nothing to
    /// retry until the source changes. Callers that keep their report in
    /// the cluster say it again when it is missing (a first report can land
    /// on a status that is never written).
    Failed(String),
    /// This version just failed to load (report it once).
    Refused(String),
    /// Loaded and waiting to serve (with how long the load took).
    Ready(P, Option<u64>),
    /// A load of this role is in flight.
    Busy,
    /// Nothing yet: the caller starts the load (now claimed).
    Start,
}

/// All versions of one controller.
pub struct Versions<P> {
    active: Option<Serving<P>>,
    previous: Option<Serving<P>>,
    rolled_back: Option<String>,
    candidate: Option<Serving<P>>,
    judge: Option<(String, Arc<Judge>)>,
    loads: [Load<P>; 2],
}

impl<P> Default for Versions<P> {
    fn default() -> Self {
        Self {
            active: None,
            previous: None,
            rolled_back: None,
            candidate: None,
            judge: None,
            loads: [Load::default(), Load::default()],
        }
    }
}

fn slot(role: Role) -> usize {
    match role {
        Role::Active => 0,
        Role::Candidate => 1,
    }
}

impl<P: Clone> Versions<P> {
    /// Looks up (and, for [`Lookup::Start`], claims) the load of `digest`.
    pub fn lookup(&mut self, role: Role, digest: &str) -> Lookup<P> {
        let l = &mut self.loads[slot(role)];
        if let Some((_, msg)) = l.failed.as_ref().filter(|(d, _)| d == digest) {
            return Lookup::Failed(msg.clone());
        }
        if let Some(f) = l.loaded.take_if(|f| f.digest == digest) {
            return match f.result {
                Ok(p) => {
                    let ready = Lookup::Ready(p.clone(), f.load_ms);
                    l.loaded = Some(Finished { result: Ok(p), ..f });
                    ready
                }
                Err(msg) => {
                    l.failed = Some((f.digest, msg.clone()));
                    Lookup::Refused(msg)
                }
            };
        }
        if l.loading.is_some() {
            return Lookup::Busy;
        }
        l.loading = Some(digest.to_string());
        Lookup::Start
    }

    /// A load claimed by [`Self::lookup`] finished. False when nobody waits
    /// for it any more (another digest was claimed since): drop the result.
    pub fn load_finished(
        &mut self,
        role: Role,
        digest: &str,
        result: Result<P, String>,
        load_ms: Option<u64>,
    ) -> bool {
        let l = &mut self.loads[slot(role)];
        if l.loading.as_deref() != Some(digest) {
            return false;
        }
        l.loading = None;
        l.loaded = Some(Finished {
            digest: digest.to_string(),
            result,
            load_ms,
        });
        true
    }

    /// Keeps a loaded version that could not start yet, so a retry does not
    /// load it again.
    pub fn keep_loaded(&mut self, role: Role, digest: &str, plugin: P, load_ms: Option<u64>) {
        self.loads[slot(role)].loaded = Some(Finished {
            digest: digest.to_string(),
            result: Ok(plugin),
            load_ms,
        });
    }

    /// `digest` now serves: the version it replaces (if another) becomes the
    /// previous one, and the loading path is cleared.
    pub fn activate(&mut self, digest: &str, plugin: P, now: &str) {
        let new = Serving {
            digest: digest.to_string(),
            plugin,
            loaded_at: now.to_string(),
        };
        if let Some(old) = self.active.replace(new)
            && old.digest != digest
        {
            self.previous = Some(old);
        }
        let l = &mut self.loads[slot(Role::Active)];
        l.loaded = None;
        l.failed = None;
    }

    /// The active version failed its judgement: the previous version serves
    /// again, and the failed one is remembered so that it is not loaded again
    /// while the source holds it. Returns the version to swap in.
    pub fn roll_back(&mut self, now: &str) -> Option<Serving<P>> {
        let mut back = self.previous.take()?;
        back.loaded_at = now.to_string();
        if let Some(bad) = self.active.replace(back.clone()) {
            self.rolled_back = Some(bad.digest);
        }
        self.judge = None;
        Some(back)
    }

    /// True while the source still holds the rolled-back `digest`; any other
    /// digest ends the refusal.
    pub fn refuses(&mut self, digest: &str) -> bool {
        match &self.rolled_back {
            Some(bad) if bad == digest => true,
            _ => {
                self.rolled_back = None;
                false
            }
        }
    }

    /// The serving version.
    pub fn active(&self) -> Option<&Serving<P>> {
        self.active.as_ref()
    }

    /// The rollback target.
    pub fn previous(&self) -> Option<&Serving<P>> {
        self.previous.as_ref()
    }

    /// Judges the active `digest` (automatic rollback), or stops judging.
    pub fn set_judge(&mut self, judge: Option<(String, Arc<Judge>)>) {
        self.judge = judge;
    }

    /// The judge of `digest`, when that version is being judged.
    pub fn judge_of(&self, digest: &str) -> Option<Arc<Judge>> {
        match &self.judge {
            Some((d, j)) if d == digest => Some(j.clone()),
            _ => None,
        }
    }

    /// The candidate `digest` is loaded.
    pub fn set_candidate(&mut self, digest: &str, plugin: P, now: &str) {
        self.candidate = Some(Serving {
            digest: digest.to_string(),
            plugin,
            loaded_at: now.to_string(),
        });
        let l = &mut self.loads[slot(Role::Candidate)];
        l.loaded = None;
        l.failed = None;
    }

    /// The loaded candidate.
    pub fn candidate(&self) -> Option<&Serving<P>> {
        self.candidate.as_ref()
    }

    /// The spec names no candidate (any more): forget it and its loads.
    pub fn clear_candidate(&mut self) {
        self.candidate = None;
        self.loads[slot(Role::Candidate)] = Load::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type V = Versions<&'static str>;

    fn ready(v: &mut V, role: Role, d: &str) -> Option<&'static str> {
        match v.lookup(role, d) {
            Lookup::Ready(p, _) => Some(p),
            _ => None,
        }
    }

    #[test]
    fn a_load_is_claimed_once_and_its_result_waits_until_it_serves() {
        let mut v = V::default();
        assert!(matches!(v.lookup(Role::Active, "d1"), Lookup::Start));
        assert!(matches!(v.lookup(Role::Active, "d1"), Lookup::Busy));
        // The candidate has its own loading path.
        assert!(matches!(v.lookup(Role::Candidate, "c1"), Lookup::Start));
        assert!(v.load_finished(Role::Active, "d1", Ok("p1"), Some(3)));
        assert_eq!(ready(&mut v, Role::Active, "d1"), Some("p1"));
        // Still there for a retry (e.g. the controller could not start).
        assert_eq!(ready(&mut v, Role::Active, "d1"), Some("p1"));
        v.activate("d1", "p1", "t1");
        assert_eq!(v.active().map(|s| s.digest.as_str()), Some("d1"));
        assert!(v.previous().is_none());
        // Served: the finished load is gone, a new lookup starts a load.
        assert!(matches!(v.lookup(Role::Active, "d1"), Lookup::Start));
    }

    #[test]
    fn a_superseded_load_is_dropped() {
        let mut v = V::default();
        assert!(matches!(v.lookup(Role::Active, "d1"), Lookup::Start));
        v.clear_candidate();
        assert!(!v.load_finished(Role::Active, "other", Ok("p"), None));
        assert!(!v.load_finished(Role::Candidate, "d1", Ok("p"), None));
    }

    #[test]
    fn a_failed_load_is_reported_once_then_not_retried_until_the_digest_changes() {
        let mut v = V::default();
        let _ = v.lookup(Role::Active, "bad");
        v.load_finished(Role::Active, "bad", Err("no".into()), None);
        assert!(matches!(v.lookup(Role::Active, "bad"), Lookup::Refused(m) if m == "no"));
        assert!(matches!(v.lookup(Role::Active, "bad"), Lookup::Failed(m) if m == "no"));
        assert!(matches!(v.lookup(Role::Active, "good"), Lookup::Start));
    }

    #[test]
    fn activation_keeps_the_replaced_version_as_the_rollback_target() {
        let mut v = V::default();
        v.activate("d1", "p1", "t1");
        v.activate("d2", "p2", "t2");
        assert_eq!(v.previous().map(|s| s.plugin), Some("p1"));
        // Re-activating the same digest (a restart) keeps the previous one.
        v.activate("d2", "p2", "t3");
        assert_eq!(v.previous().map(|s| s.plugin), Some("p1"));
        assert_eq!(v.active().map(|s| s.loaded_at.as_str()), Some("t3"));
    }

    #[test]
    fn roll_back_restores_the_previous_version_and_refuses_the_bad_one_while_held() {
        let mut v = V::default();
        v.activate("d1", "p1", "t1");
        v.activate("d2", "p2", "t2");
        let back = v.roll_back("t3").map(|s| (s.digest, s.plugin, s.loaded_at));
        assert_eq!(back, Some(("d1".into(), "p1", "t3".into())));
        assert_eq!(v.active().map(|s| s.digest.as_str()), Some("d1"));
        assert!(v.previous().is_none(), "no second rollback to the bad one");
        assert!(v.roll_back("t4").is_none());
        assert!(v.refuses("d2"));
        assert!(v.refuses("d2"));
        // The source moved on: the refusal ends.
        assert!(!v.refuses("d3"));
        assert!(!v.refuses("d2"));
    }

    #[test]
    fn the_judge_belongs_to_one_digest_and_ends_with_a_rollback() {
        let mut v = V::default();
        let policy = crate::crd::RollbackPolicy {
            reconciles: Some(1),
            max_fault_percent: Some(0),
        };
        let j = Judge::new(&policy, Box::new(|| {}));
        v.activate("d1", "p1", "t1");
        v.activate("d2", "p2", "t2");
        v.set_judge(Some(("d2".into(), j)));
        assert!(v.judge_of("d2").is_some());
        assert!(v.judge_of("d1").is_none());
        v.roll_back("t3");
        assert!(v.judge_of("d2").is_none());
    }

    #[test]
    fn the_candidate_loads_apart_and_is_forgotten_with_the_spec() {
        let mut v = V::default();
        v.activate("d1", "p1", "t1");
        assert!(matches!(v.lookup(Role::Candidate, "c1"), Lookup::Start));
        v.load_finished(Role::Candidate, "c1", Ok("pc"), None);
        let Lookup::Ready(p, _) = v.lookup(Role::Candidate, "c1") else {
            panic!("candidate not ready");
        };
        v.set_candidate("c1", p, "t2");
        assert_eq!(v.candidate().map(|s| s.plugin), Some("pc"));
        // The active version is untouched by the candidate's life.
        assert_eq!(v.active().map(|s| s.digest.as_str()), Some("d1"));
        v.clear_candidate();
        assert!(v.candidate().is_none());
        assert!(matches!(v.lookup(Role::Candidate, "c1"), Lookup::Start));
    }
}
