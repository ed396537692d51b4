//! Per-parent memory of memoisation (rule 13, decided in
//! [`crate::decide::memo`]): the inputs hash of the last plugin call that found
//! the parent converged, and the requeue the plugin asked for then. One entry
//! of 48 bytes plus the key per parent, dropped when the parent goes or the
//! pass stops being quiet; a new controller (spec or config change) starts
//! empty.
//!
//! Also the echo a status-only write awaits (rule 13.4): a pass whose only
//! write was the parent's status cannot record its inputs (the status it wrote
//! is an input), and the echo of the host's own status write triggers nothing
//! by itself (`controller::status_drifted`). So that write marks the parent,
//! and its echo queues one more pass, which calls the plugin on the status as
//! written and records the inputs if it needs no write — instead of leaving
//! the parent unmemoised until the next resync.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wr_runtime::PluginInfo;

use crate::controller::ControllerStats;
use crate::decide::memo::{InputsHash, Memoize, memoisable};
use crate::queue::ObjectKey;

/// How many passes of one parent generation may leave the status write to
/// the pass their child writes trigger. Creating children typically takes
/// two (the second pass may run on the watch event of the first child before
/// the others' have arrived); the bound keeps a child that someone else keeps
/// changing from holding the status back.
pub(crate) const MAX_DEFERRALS: u8 = 3;

/// How many status-only writes of one parent in a row (without a quiet pass
/// between them) may have their echo trigger another pass. A plugin whose
/// status settles (a state machine walking a few phases, a status derived
/// from the one it reads) gets there; one whose status changes on every
/// call (a counter) is held to this many passes, then the resync period.
pub(crate) const MAX_ECHO_PASSES: u8 = 3;

/// The parent generation (uid, generation) whose status write was deferred,
/// and how many times.
type Deferred = (String, Option<i64>, u8);

/// Status-only writes since the parent's last quiet pass, and whether the
/// echo of the last one is still awaited.
#[derive(Debug, Default, Clone, Copy)]
struct Echo {
    streak: u8,
    awaited: bool,
}

/// What a quiet pass left for the next one.
#[derive(Debug, Clone, Copy)]
struct Entry {
    inputs: InputsHash,
    requeue_after: Option<Duration>,
}

/// The memo of one controller.
#[derive(Debug, Default)]
pub(crate) struct MemoTable {
    policy: Memoize,
    last: Mutex<HashMap<ObjectKey, Entry>>,
    /// Per parent: the (uid, generation) whose status write was deferred
    /// ([`crate::decide::converge`]) and how many times.
    deferred: Mutex<HashMap<ObjectKey, Deferred>>,
    /// Per parent: status-only writes awaiting a quiet pass (rule 13.4).
    echoes: Mutex<HashMap<ObjectKey, Echo>>,
    /// Where the number of entries is published (`memo_entries`).
    stats: Arc<ControllerStats>,
}

impl MemoTable {
    /// An empty table applying `policy` (`spec.plugin.memoize`), publishing
    /// its size in `stats.memo_entries`.
    pub fn new(policy: Memoize, stats: Arc<ControllerStats>) -> Self {
        MemoTable {
            policy,
            last: Mutex::default(),
            deferred: Mutex::default(),
            echoes: Mutex::default(),
            stats,
        }
    }

    fn echoes(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Echo>> {
        self.echoes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the table's size (a gauge: parents a resync would skip).
    fn publish(&self, len: usize) {
        self.stats.memo_entries.store(len as u64, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Entry>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether calls of a plugin with `info` may be skipped at all.
    pub fn memoisable(&self, info: Option<&PluginInfo>) -> bool {
        memoisable(self.policy, info)
    }

    /// The hash recorded for `key`, with the requeue its pass asked for.
    pub fn last(&self, key: &ObjectKey) -> Option<(InputsHash, Option<Duration>)> {
        self.lock().get(key).map(|e| (e.inputs, e.requeue_after))
    }

    /// Records the inputs of a quiet pass of `key` (which also ends its
    /// streak of status-only writes).
    pub fn record(&self, key: &ObjectKey, inputs: InputsHash, requeue_after: Option<Duration>) {
        let mut m = self.lock();
        m.insert(
            key.clone(),
            Entry {
                inputs,
                requeue_after,
            },
        );
        self.publish(m.len());
        drop(m);
        self.echoes().remove(key);
    }

    /// Forgets `key`'s recorded inputs (the pass was not quiet or failed).
    pub fn forget(&self, key: &ObjectKey) {
        let mut m = self.lock();
        if m.remove(key).is_some() {
            self.publish(m.len());
        }
    }

    /// Forgets everything about `key` (the parent is gone).
    pub fn forget_parent(&self, key: &ObjectKey) {
        self.forget(key);
        self.deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        self.echoes().remove(key);
    }

    /// Rule 13.4, before a status-only write of `key` is sent: true (and
    /// the echo is awaited) unless [`MAX_ECHO_PASSES`] status-only writes
    /// in a row already had theirs. Marked before the write because its
    /// watch echo may arrive before the response.
    pub fn await_echo(&self, key: &ObjectKey) -> bool {
        let mut m = self.echoes();
        let e = m.entry(key.clone()).or_default();
        if e.streak >= MAX_ECHO_PASSES {
            return false;
        }
        e.streak += 1;
        e.awaited = true;
        true
    }

    /// The awaited write did not happen (refused, conflict, already right):
    /// no echo is coming, and it does not count towards the streak.
    pub fn echo_cancelled(&self, key: &ObjectKey) {
        if let Some(e) = self.echoes().get_mut(key)
            && e.awaited
        {
            e.awaited = false;
            e.streak = e.streak.saturating_sub(1);
        }
    }

    /// A status change of `key` arrived in the parent cache: true once per
    /// awaited echo (the caller queues the pass that may record the memo).
    pub fn echo_arrived(&self, key: &ObjectKey) -> bool {
        self.echoes()
            .get_mut(key)
            .is_some_and(|e| std::mem::take(&mut e.awaited))
    }

    /// True for the first [`MAX_DEFERRALS`] times it is asked for `key` at
    /// this (uid, generation): a child that keeps changing (another writer
    /// fighting the host) cannot keep the parent's status from being written.
    pub fn may_defer(&self, key: &ObjectKey, generation: (&str, Option<i64>)) -> bool {
        let mut m = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        let (uid, g) = generation;
        let e = m
            .entry(key.clone())
            .or_insert_with(|| (uid.to_string(), g, 0));
        if e.0 != uid || e.1 != g {
            *e = (uid.to_string(), g, 0);
        }
        if e.2 >= MAX_DEFERRALS {
            return false;
        }
        e.2 += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_parent_dropped_when_forgotten() {
        let stats = Arc::new(ControllerStats::default());
        let t = MemoTable::new(Memoize::Always, stats.clone());
        let len = || stats.memo_entries.load(Ordering::Relaxed);
        let k = ObjectKey {
            namespace: Some("ns".into()),
            name: "p".into(),
        };
        let (a, b) = (InputsHash([1; 32]), InputsHash([2; 32]));
        t.record(&k, a, None);
        t.record(&k, b, Some(Duration::from_secs(5)));
        assert_eq!(len(), 1);
        assert_eq!(t.last(&k).map(|l| l.0), Some(b));
        t.forget(&k);
        assert_eq!(len(), 0);
        assert!(t.last(&k).is_none());
        t.record(&k, a, None);
        t.forget_parent(&k);
        assert_eq!(len(), 0, "gone with the parent");
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn rule13_4_a_status_only_writes_echo_queues_one_pass() {
        let t = MemoTable::new(Memoize::Auto, Arc::default());
        let (k, other) = (key("p"), key("q"));
        assert!(!t.echo_arrived(&k), "nothing awaited");
        assert!(t.await_echo(&k));
        assert!(!t.echo_arrived(&other), "per parent");
        assert!(t.echo_arrived(&k), "the echo queues a pass");
        assert!(!t.echo_arrived(&k), "once");
        // A write that did not happen awaits nothing.
        assert!(t.await_echo(&k));
        t.echo_cancelled(&k);
        assert!(!t.echo_arrived(&k));
    }

    #[test]
    fn rule13_4_a_status_that_never_settles_gets_a_bounded_number_of_echo_passes() {
        let t = MemoTable::new(Memoize::Auto, Arc::default());
        let k = key("p");
        for _ in 0..MAX_ECHO_PASSES {
            assert!(t.await_echo(&k));
            assert!(t.echo_arrived(&k));
        }
        assert!(!t.await_echo(&k), "bounded while no pass is quiet");
        assert!(!t.echo_arrived(&k));
        // A cancelled write does not use up the bound.
        let c = key("c");
        for _ in 0..MAX_ECHO_PASSES + 2 {
            assert!(t.await_echo(&c));
            t.echo_cancelled(&c);
        }
        // A quiet pass ends the streak.
        t.record(&k, InputsHash([1; 32]), None);
        assert!(t.await_echo(&k), "a new streak after a quiet pass");
        t.forget_parent(&k);
        for _ in 0..MAX_ECHO_PASSES {
            assert!(t.await_echo(&k), "forgotten with the parent");
        }
    }

    #[test]
    fn a_status_write_is_deferred_a_bounded_number_of_times_per_generation() {
        let t = MemoTable::new(Memoize::Auto, Arc::default());
        let k = ObjectKey {
            namespace: None,
            name: "p".into(),
        };
        for _ in 0..MAX_DEFERRALS {
            assert!(t.may_defer(&k, ("u", Some(1))));
        }
        assert!(!t.may_defer(&k, ("u", Some(1))), "bounded per generation");
        assert!(t.may_defer(&k, ("u", Some(2))), "a new generation");
        assert!(t.may_defer(&k, ("other", Some(2))), "a new object");
        for _ in 0..MAX_DEFERRALS {
            t.may_defer(&k, ("other", Some(2)));
        }
        assert!(!t.may_defer(&k, ("other", Some(2))));
        t.forget_parent(&k);
        assert!(
            t.may_defer(&k, ("other", Some(2))),
            "forgotten with the parent"
        );
    }
}
