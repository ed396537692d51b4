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
}

impl MemoTable {
    /// An empty table applying `policy` (`spec.plugin.memoize`).
    pub fn new(policy: Memoize) -> Self {
        MemoTable {
            policy,
            last: Mutex::default(),
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

    /// Forgets `key` (the pass was not quiet, failed, or the parent is gone).
    pub fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
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
}
