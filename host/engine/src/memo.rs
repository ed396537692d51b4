//! Per-parent memory of memoisation (rule 13, decided in
//! [`crate::decide::memo`]): the inputs hash of the last plugin call that found
//! the parent converged, and the requeue the plugin asked for then. One entry
//! of 48 bytes plus the key per parent, dropped when the parent goes or the
//! pass stops being quiet; a new controller (spec or config change) starts
//! empty.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use wr_runtime::PluginInfo;

use crate::decide::memo::{InputsHash, Memoize, memoisable};
use crate::queue::ObjectKey;

/// How many passes of one parent generation may leave the status write to
/// the pass their child writes trigger. Creating children typically takes
/// two (the second pass may run on the watch event of the first child before
/// the others' have arrived); the bound keeps a child that someone else keeps
/// changing from holding the status back.
pub(crate) const MAX_DEFERRALS: u8 = 3;

/// The parent generation (uid, generation) whose status write was deferred,
/// and how many times.
type Deferred = (String, Option<i64>, u8);

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
}

impl MemoTable {
    /// An empty table applying `policy` (`spec.plugin.memoize`).
    pub fn new(policy: Memoize) -> Self {
        MemoTable {
            policy,
            last: Mutex::default(),
            deferred: Mutex::default(),
        }
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

    /// Records the inputs of a quiet pass of `key`.
    pub fn record(&self, key: &ObjectKey, inputs: InputsHash, requeue_after: Option<Duration>) {
        self.lock().insert(
            key.clone(),
            Entry {
                inputs,
                requeue_after,
            },
        );
    }

    /// Forgets `key`'s recorded inputs (the pass was not quiet or failed).
    pub fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    /// Forgets everything about `key` (the parent is gone).
    pub fn forget_parent(&self, key: &ObjectKey) {
        self.forget(key);
        self.deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
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

    /// Parents with a recorded hash.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_parent_dropped_when_forgotten() {
        let t = MemoTable::new(Memoize::Always);
        let k = ObjectKey {
            namespace: Some("ns".into()),
            name: "p".into(),
        };
        let (a, b) = (InputsHash([1; 32]), InputsHash([2; 32]));
        t.record(&k, a, None);
        t.record(&k, b, Some(Duration::from_secs(5)));
        assert_eq!(t.len(), 1);
        assert_eq!(t.last(&k).map(|l| l.0), Some(b));
        t.forget(&k);
        assert_eq!(t.len(), 0);
        assert!(t.last(&k).is_none());
    }

    #[test]
    fn a_status_write_is_deferred_a_bounded_number_of_times_per_generation() {
        let t = MemoTable::new(Memoize::Auto);
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
