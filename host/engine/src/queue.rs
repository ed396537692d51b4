//! The per-controller work queue.
//!
//! Hand-written rather than kube-runtime's `Controller`/`scheduler` because the
//! engine needs, for dynamically typed parents resolved at run time and for
//! controllers started and stopped while the process runs: per-key exponential
//! backoff that starts at 5 ms and resets on success, a floor for 429 Retry-After,
//! "done with this key, next run at T" that *replaces* the previous timer
//! (resync/requeue-after), and triggers from a shared cache (one watch per kind
//! across controllers) rather than from a watch owned by the controller. The
//! kube-runtime `Controller` owns its watches and its error policy is a single
//! callback without per-key state, so using it would mean one watch per
//! controller per kind and re-implementing backoff on top of it anyway.
//!
//! Guarantees: a key is queued at most once (dedup); a key is never handed to
//! two workers at once (a trigger during a run marks it dirty and it runs again
//! right after); timers are per key and the earliest wins for external triggers.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Namespace (None for cluster-scoped) and name of an object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// Builds a key.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

pub use crate::backoff::Backoff;

/// How a run of a key ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Success: reset backoff; run again at `next` (resync/requeue-after) if given.
    Success {
        /// Delay of the next scheduled run.
        next: Option<Duration>,
    },
    /// Failure: exponential backoff, but wait at least `at_least` (429 Retry-After).
    Failure {
        /// Minimum delay.
        at_least: Option<Duration>,
    },
    /// The object is gone: drop all state for the key.
    Forget,
}

#[derive(Default)]
struct State {
    ready: VecDeque<ObjectKey>,
    queued: HashSet<ObjectKey>,
    running: HashSet<ObjectKey>,
    dirty: HashSet<ObjectKey>,
    timers: BTreeSet<(Instant, ObjectKey)>,
    deadlines: HashMap<ObjectKey, Instant>,
    failures: HashMap<ObjectKey, u32>,
    /// When each key in `ready` was queued (for the oldest-item-age metric).
    since: HashMap<ObjectKey, Instant>,
    closed: bool,
}

impl State {
    fn enqueue(&mut self, key: ObjectKey) {
        if self.running.contains(&key) {
            self.dirty.insert(key);
        } else if self.queued.insert(key.clone()) {
            self.since.insert(key.clone(), Instant::now());
            self.ready.push_back(key);
        }
    }

    fn clear_timer(&mut self, key: &ObjectKey) {
        if let Some(at) = self.deadlines.remove(key) {
            self.timers.remove(&(at, key.clone()));
        }
    }

    fn set_timer(&mut self, key: ObjectKey, at: Instant) {
        self.clear_timer(&key);
        self.deadlines.insert(key.clone(), at);
        self.timers.insert((at, key));
    }

    fn fire_due(&mut self, now: Instant) {
        while let Some((at, _)) = self.timers.first() {
            if *at > now {
                break;
            }
            if let Some((_, key)) = self.timers.pop_first() {
                self.deadlines.remove(&key);
                self.enqueue(key);
            }
        }
    }
}

/// A deduplicating, delaying work queue with per-key backoff.
pub struct WorkQueue {
    state: Mutex<State>,
    notify: Notify,
    backoff: Backoff,
}

impl WorkQueue {
    /// An empty queue.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half-updated in a
        // way that matters more than stopping the controller, so recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `key` as soon as a worker is free (deduplicated).
    pub fn add(&self, key: ObjectKey) {
        self.lock().enqueue(key);
        self.notify.notify_waiters();
    }

    /// Runs `key` after `delay` unless an earlier run is already scheduled.
    pub fn add_after(&self, key: ObjectKey, delay: Duration) {
        let at = Instant::now() + delay;
        let mut st = self.lock();
        match st.deadlines.get(&key) {
            Some(existing) if *existing <= at => {}
            _ => st.set_timer(key, at),
        }
        drop(st);
        self.notify.notify_waiters();
    }

    /// Waits for the next key to run; `None` once the queue is closed.
    pub async fn next(&self) -> Option<ObjectKey> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let wake_at = {
                let mut st = self.lock();
                if st.closed {
                    return None;
                }
                st.fire_due(Instant::now());
                if let Some(key) = st.ready.pop_front() {
                    st.queued.remove(&key);
                    st.since.remove(&key);
                    st.running.insert(key.clone());
                    return Some(key);
                }
                st.timers.first().map(|(at, _)| *at)
            };
            match wake_at {
                Some(at) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Reports the end of a run of `key` (handed out by [`WorkQueue::next`]).
    /// Returns the delay of the next scheduled run, if any.
    pub fn done(&self, key: &ObjectKey, outcome: Outcome) -> Option<Duration> {
        let mut st = self.lock();
        st.running.remove(key);
        let was_dirty = st.dirty.remove(key);
        let delay = match outcome {
            Outcome::Success { next } => {
                st.failures.remove(key);
                next
            }
            Outcome::Failure { at_least } => {
                let n = st.failures.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                let d = self.backoff.delay(*n);
                Some(at_least.map_or(d, |m| d.max(m)))
            }
            Outcome::Forget => {
                st.failures.remove(key);
                None
            }
        };
        match delay {
            Some(d) => st.set_timer(key.clone(), Instant::now() + d),
            None => st.clear_timer(key),
        }
        if was_dirty {
            st.enqueue(key.clone());
        }
        drop(st);
        self.notify.notify_waiters();
        delay
    }

    /// Consecutive failures of `key` so far.
    pub fn failures(&self, key: &ObjectKey) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Number of keys waiting to run now (for tests and metrics).
    pub fn ready_len(&self) -> usize {
        self.lock().ready.len()
    }

    /// Keys waiting to run now and how long the oldest has waited (metrics,
    /// liveness). `ready` is FIFO, so its front is the oldest.
    pub fn depth_and_oldest(&self) -> (usize, Option<Duration>) {
        let st = self.lock();
        let oldest = st
            .ready
            .front()
            .and_then(|k| st.since.get(k))
            .map(|t| t.elapsed());
        (st.ready.len(), oldest)
    }

    /// True once [`WorkQueue::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Stops handing out keys; waiting workers return `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), n)
    }

    #[tokio::test(start_paused = true)]
    async fn depth_and_oldest_follow_the_ready_keys() {
        let q = WorkQueue::new(Backoff::default());
        assert_eq!(q.depth_and_oldest(), (0, None));
        q.add(k("a"));
        q.add(k("b"));
        let (depth, oldest) = q.depth_and_oldest();
        assert_eq!(depth, 2);
        assert!(oldest.is_some());
        assert_eq!(q.next().await, Some(k("a")));
        assert_eq!(q.next().await, Some(k("b")));
        assert_eq!(q.depth_and_oldest(), (0, None));
        assert!(!q.is_closed());
        q.close();
        assert!(q.is_closed());
    }

    #[tokio::test(start_paused = true)]
    async fn duplicate_adds_collapse_into_one_run() {
        let q = WorkQueue::new(Backoff::default());
        for _ in 0..100 {
            q.add(k("a"));
        }
        q.add(k("b"));
        assert_eq!(q.ready_len(), 2);
        assert_eq!(q.next().await, Some(k("a")));
        assert_eq!(q.next().await, Some(k("b")));
        assert_eq!(q.ready_len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_never_handed_out_twice_at_once() {
        let q = WorkQueue::new(Backoff::default());
        q.add(k("a"));
        assert_eq!(q.next().await, Some(k("a")));
        q.add(k("a"));
        assert_eq!(q.ready_len(), 0, "running key must not be queued again");
        q.done(&k("a"), Outcome::Success { next: None });
        assert_eq!(q.ready_len(), 1, "trigger during the run reruns it after");
        assert_eq!(q.next().await, Some(k("a")));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_and_success_resets() {
        let q = WorkQueue::new(Backoff::default());
        q.add(k("a"));
        let mut delays = vec![];
        for _ in 0..4 {
            let key = q.next().await.unwrap();
            delays.push(q.done(&key, Outcome::Failure { at_least: None }).unwrap());
        }
        // Each delay is the backoff's for that many failures (jittered up to twice the nominal).
        for (n, d) in (1..).zip(&delays) {
            let nominal = Backoff::default().nominal(n);
            assert!(*d >= nominal && *d <= nominal * 2, "{n}: {d:?}");
        }
        let key = q.next().await.unwrap();
        q.done(&key, Outcome::Success { next: None });
        assert_eq!(q.failures(&k("a")), 0);
        q.add(k("a"));
        let key = q.next().await.unwrap();
        let first = q.done(&key, Outcome::Failure { at_least: None }).unwrap();
        assert!(
            first <= Duration::from_millis(10),
            "reset to the base: {first:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_key_runs_again_only_after_its_backoff() {
        let q = WorkQueue::new(Backoff::default());
        q.add(k("a"));
        let key = q.next().await.unwrap();
        let start = Instant::now();
        let d = q.done(&key, Outcome::Failure { at_least: None }).unwrap();
        // Paused time: nothing is due before the delay (less the timer's 1 ms
        // granularity), the key is after it.
        let early = tokio::time::timeout(d - Duration::from_millis(1), q.next()).await;
        assert!(early.is_err(), "handed out before its backoff of {d:?}");
        assert_eq!(q.next().await, Some(k("a")));
        assert!(Instant::now().duration_since(start) >= d);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_a_floor() {
        let q = WorkQueue::new(Backoff::default());
        q.add(k("a"));
        let key = q.next().await.unwrap();
        let d = q.done(
            &key,
            Outcome::Failure {
                at_least: Some(Duration::from_secs(3)),
            },
        );
        assert_eq!(d, Some(Duration::from_secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn earliest_timer_wins_for_triggers_and_done_replaces_it() {
        let q = WorkQueue::new(Backoff::default());
        q.add_after(k("a"), Duration::from_secs(100));
        q.add_after(k("a"), Duration::from_millis(10));
        q.add_after(k("a"), Duration::from_secs(50));
        assert_eq!(q.next().await, Some(k("a")));
        q.done(
            &k("a"),
            Outcome::Success {
                next: Some(Duration::from_millis(5)),
            },
        );
        assert_eq!(q.next().await, Some(k("a")));
        q.done(
            &k("a"),
            Outcome::Success {
                next: Some(Duration::from_secs(3600)),
            },
        );
        let woke = tokio::time::timeout(Duration::from_millis(100), q.next()).await;
        assert!(woke.is_err(), "the 1 h resync replaced earlier timers");
    }

    #[tokio::test(start_paused = true)]
    async fn forget_drops_the_timer_and_close_ends_workers() {
        let q = WorkQueue::new(Backoff::default());
        q.add(k("a"));
        let key = q.next().await.unwrap();
        q.done(&key, Outcome::Forget);
        q.close();
        assert_eq!(q.next().await, None);
    }
}
