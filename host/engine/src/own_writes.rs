//! Read-your-own-writes for the child caches.
//!
//! A pass that created, changed or deleted children is followed by passes that
//! their watch events trigger. Watch events arrive one by one, so the pass the
//! first event triggers can run while the child cache has not yet shown the
//! host's other writes: the plugin is told a child it just created is missing
//! (its status is judged from that and written, then rewritten one pass later:
//! two status writes where rule 14 promises one), a child deleted for Recreate
//! is still there (deleted again: a 404), a created child is absent (applied
//! again). Found as flaky tests under CPU load (`engine_memo`,
//! `engine_strategies`).
//!
//! So the host remembers, per parent, what its writes left on the server (the
//! child's new resourceVersion, or that the child with a uid is gone), and a
//! pass of that parent waits until the child caches show it — the way
//! client-go controllers use "expectations". The pass does not block a
//! worker: it ends at once and the watch event that shows the write queues the
//! parent again (the cache is updated before its subscribers hear of it). A
//! write the caches have not shown after [`SHOWN_WITHIN`] (a watch that broke
//! and relists, a child someone else deleted at once) is given up on: the
//! pass then runs on what the cache has, as it did before.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::queue::ObjectKey;

/// How long a pass waits for the child caches to show the host's own writes.
pub const SHOWN_WITHIN: Duration = Duration::from_secs(5);

/// What a child write left on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Left {
    /// The child now has this resourceVersion.
    Version(String),
    /// The child with this uid is gone.
    Gone(String),
}

/// A cached child as [`shown`] needs it: (uid, resourceVersion).
pub type Cached<'a> = Option<(&'a str, &'a str)>;

/// Whether a cache entry shows the write that `left`.
///
/// A resourceVersion is shown by itself or by a later one. Kubernetes
/// resourceVersions are etcd revisions (decimal integers) on kube-apiserver and
/// on the embedded API server; one that does not parse is only shown by itself.
pub fn shown(left: &Left, cached: Cached<'_>) -> bool {
    match (left, cached) {
        (Left::Gone(uid), Some((u, _))) => u != uid,
        (Left::Gone(_), None) => true,
        (Left::Version(_), None) => false,
        (Left::Version(rv), Some((_, c))) => {
            c == rv
                || matches!(
                    (c.parse::<u64>(), rv.parse::<u64>()),
                    (Ok(c), Ok(w)) if c >= w
                )
        }
    }
}

#[derive(Debug)]
struct Pending {
    kind: usize,
    child: ObjectKey,
    left: Left,
    until: Instant,
}

/// Per parent: the child writes the caches have not shown yet.
#[derive(Debug, Default)]
pub struct OwnWrites {
    pending: Mutex<HashMap<ObjectKey, Vec<Pending>>>,
}

impl OwnWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Vec<Pending>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a write to child `child` (of child kind `kind`) of `parent`.
    pub fn wrote(&self, parent: &ObjectKey, kind: usize, child: ObjectKey, left: Left) {
        let until = Instant::now() + SHOWN_WITHIN;
        let mut m = self.lock();
        let v = m.entry(parent.clone()).or_default();
        v.retain(|p| p.kind != kind || p.child != child);
        v.push(Pending {
            kind,
            child,
            left,
            until,
        });
    }

    /// `None` when the caches show every write recorded for `parent` (those
    /// shown or given up on are dropped); otherwise how long the oldest
    /// unshown write may still take. `cached(kind, child)` reads a child cache.
    pub fn unshown<F>(&self, parent: &ObjectKey, cached: F) -> Option<Duration>
    where
        F: Fn(usize, &ObjectKey) -> Option<(String, String)>,
    {
        let now = Instant::now();
        let mut m = self.lock();
        let v = m.get_mut(parent)?;
        v.retain(|p| {
            let c = cached(p.kind, &p.child);
            let c = c.as_ref().map(|(u, rv)| (u.as_str(), rv.as_str()));
            p.until > now && !shown(&p.left, c)
        });
        let wait = v.iter().map(|p| p.until - now).min();
        if v.is_empty() {
            m.remove(parent);
        }
        wait
    }

    /// Forgets `parent` (it is gone).
    pub fn forget(&self, parent: &ObjectKey) {
        self.lock().remove(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> ObjectKey {
        ObjectKey {
            namespace: Some("ns".into()),
            name: n.into(),
        }
    }

    #[test]
    fn a_version_is_shown_by_itself_or_a_later_one() {
        let v = Left::Version("10".into());
        assert!(!shown(&v, None), "not in the cache yet");
        assert!(!shown(&v, Some(("u", "9"))), "an older version");
        assert!(shown(&v, Some(("u", "10"))));
        assert!(shown(&v, Some(("u", "11"))), "changed again since");
        let opaque = Left::Version("abc".into());
        assert!(shown(&opaque, Some(("u", "abc"))));
        assert!(!shown(&opaque, Some(("u", "abd"))));
    }

    #[test]
    fn a_deletion_is_shown_by_absence_or_another_object() {
        let g = Left::Gone("u1".into());
        assert!(
            !shown(&g, Some(("u1", "5"))),
            "the deleted object is cached"
        );
        assert!(shown(&g, None));
        assert!(shown(&g, Some(("u2", "6"))), "recreated since");
    }

    #[tokio::test(start_paused = true)]
    async fn a_parent_waits_until_its_writes_are_shown_or_given_up() {
        let t = OwnWrites::default();
        let (p, a, b) = (key("p"), key("a"), key("b"));
        assert_eq!(t.unshown(&p, |_, _| None), None, "nothing written");
        t.wrote(&p, 0, a.clone(), Left::Version("3".into()));
        t.wrote(&p, 0, b.clone(), Left::Version("4".into()));
        let only_a = |_: usize, k: &ObjectKey| (k == &a).then(|| ("u".into(), "3".into()));
        assert_eq!(t.unshown(&p, only_a), Some(SHOWN_WITHIN), "b not shown");
        let both =
            |_: usize, k: &ObjectKey| Some(("u".into(), if k == &a { "3" } else { "4" }.into()));
        assert_eq!(t.unshown(&p, both), None);
        assert_eq!(t.unshown(&p, |_, _| None), None, "shown writes are dropped");

        t.wrote(&p, 1, a.clone(), Left::Version("7".into()));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            t.unshown(&p, |_, _| None),
            Some(SHOWN_WITHIN - Duration::from_secs(2))
        );
        tokio::time::advance(SHOWN_WITHIN).await;
        assert_eq!(t.unshown(&p, |_, _| None), None, "given up on");
        t.wrote(&p, 1, a, Left::Version("8".into()));
        t.forget(&p);
        assert_eq!(t.unshown(&p, |_, _| None), None);
    }
}
