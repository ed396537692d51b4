//! What one replica may work on: the pure half of the handover protocol
//! (see the module docs of [`crate::shard`]), kept apart from the Lease I/O so
//! that every rule is unit-tested without an API server.

use super::assign::{bucket_key, owner};
use wr_engine::shard_bucket::{BUCKETS, bucket_of};

/// One numbered version of the shard map: the members the parents are divided
/// among. Numbers only grow (the coordinator writes `n + 1` with a
/// resourceVersion precondition), so an old map can never be mistaken for a
/// new one, even when the same set of members comes back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Epoch {
    /// The map's version.
    pub number: u64,
    /// Member identities, sorted.
    pub members: Vec<String>,
}

impl Epoch {
    /// Who owns `key` in this epoch: the owner of its bucket.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.bucket_owner(bucket_of(key))
    }

    /// Who owns `bucket` in this epoch ([`bucket_key`] hashed over the members).
    pub fn bucket_owner(&self, bucket: u32) -> Option<&str> {
        owner(&self.members, &bucket_key(bucket))
    }

    /// The buckets `identity` owns in this epoch, ascending.
    pub fn buckets_of(&self, identity: &str) -> Vec<u32> {
        (0..BUCKETS)
            .filter(|b| self.bucket_owner(*b) == Some(identity))
            .collect()
    }
}

/// How many acknowledged epochs a replica remembers while waiting for one to
/// settle; beyond that it works on nothing until one settles (safe, and only
/// reachable when membership changes faster than replicas acknowledge).
pub const MAX_HELD: usize = 16;

/// One replica's view of the shard map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardView {
    /// This replica's identity.
    pub identity: String,
    /// The newest map this replica has read.
    pub current: Epoch,
    /// Every member of `current` has acknowledged it: each has stopped working
    /// on what `current` gives to someone else.
    pub settled: bool,
    /// The last map this replica saw settled, then every map it acknowledged
    /// since (empty before the first settled map). A key this replica still works on during a change must
    /// be its own in all of them: it dropped everything else on the way.
    pub held: Vec<Epoch>,
    /// The highest epoch this replica has acknowledged.
    pub acked: u64,
    /// No renewal of this replica's member Lease succeeded within the renew
    /// deadline: others may soon treat it as gone, so it works on nothing.
    pub fenced: bool,
}

impl ShardView {
    /// A replica that has read nothing yet: it owns nothing.
    pub fn new(identity: impl Into<String>) -> Self {
        ShardView {
            identity: identity.into(),
            current: Epoch::default(),
            settled: false,
            held: Vec::new(),
            acked: 0,
            fenced: true,
        }
    }

    /// The buckets this replica must have in its caches under the newest
    /// map: those the map gives it, including the ones it may not work on
    /// until the map settles (a superset of what [`ShardView::owns`] admits),
    /// so that what it gains is listed before it acknowledges.
    pub fn watched_buckets(&self) -> Vec<u32> {
        self.current.buckets_of(&self.identity)
    }

    /// Whether this replica may reconcile the parent with shard key `key` now.
    ///
    /// It must be the key's owner in the current map, and either the map has
    /// settled (every member dropped what it lost) or the key was this
    /// replica's in every epoch it acknowledged since the last settled one
    /// (it keeps what it had; it gains nothing until the map settles).
    pub fn owns(&self, key: &str) -> bool {
        if self.fenced || self.current.owner(key) != Some(self.identity.as_str()) {
            return false;
        }
        if self.settled {
            return true;
        }
        !self.held.is_empty()
            && self
                .held
                .iter()
                .all(|e| e.owner(key) == Some(self.identity.as_str()))
    }

    /// Reads map `epoch`. A newer map unsettles the view; an older or equal
    /// one changes nothing.
    pub fn read(&mut self, epoch: Epoch) {
        if epoch.number > self.current.number {
            self.current = epoch;
            self.settled = false;
        }
    }

    /// This replica has stopped all work on keys the current map gives to
    /// others: record the acknowledgement (written to its Lease next).
    pub fn acknowledge(&mut self, number: u64) {
        if number != self.current.number || number <= self.acked {
            return;
        }
        self.acked = number;
        if self.held.is_empty() {
            // No settled map seen yet (a joiner): it holds nothing to keep.
        } else if self.held.len() >= MAX_HELD {
            // An empty list owns nothing until a map settles.
            self.held.clear();
        } else {
            self.held.push(self.current.clone());
        }
    }

    /// The acknowledgements every member published: settled when each member
    /// of the current map has acknowledged it (or a later one).
    pub fn observe_acks<'a>(&mut self, acks: impl Fn(&str) -> Option<u64> + 'a) {
        let n = self.current.number;
        if n == 0 || self.acked < n {
            return;
        }
        let all = self
            .current
            .members
            .iter()
            .all(|m| acks(m).is_some_and(|a| a >= n));
        if all && !self.settled {
            self.settled = true;
            self.held = vec![self.current.clone()];
        }
    }

    /// The epoch this replica still has to acknowledge, if any.
    pub fn pending_ack(&self) -> Option<u64> {
        (self.current.number > self.acked).then_some(self.current.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn epoch(number: u64, members: &[&str]) -> Epoch {
        Epoch {
            number,
            members: members.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn keys() -> Vec<String> {
        (0..600).map(|i| format!("ns/p-{i}")).collect()
    }

    /// A small world of replicas that read maps and acknowledge at chosen
    /// moments; the invariant is checked after every step.
    struct World {
        views: BTreeMap<String, ShardView>,
    }

    impl World {
        fn new(ids: &[&str]) -> Self {
            let mut views = BTreeMap::new();
            for id in ids {
                let mut v = ShardView::new(*id);
                v.fenced = false;
                views.insert(id.to_string(), v);
            }
            World { views }
        }
        fn read(&mut self, id: &str, e: &Epoch) {
            if let Some(v) = self.views.get_mut(id) {
                v.read(e.clone());
            }
            self.check();
        }
        fn ack(&mut self, id: &str) {
            if let Some(v) = self.views.get_mut(id)
                && let Some(n) = v.pending_ack()
            {
                v.acknowledge(n);
            }
            self.check();
        }
        fn observe(&mut self, id: &str) {
            let acks: BTreeMap<String, u64> = self
                .views
                .iter()
                .map(|(k, v)| (k.clone(), v.acked))
                .collect();
            if let Some(v) = self.views.get_mut(id) {
                v.observe_acks(|m| acks.get(m).copied());
            }
            self.check();
        }
        fn owners(&self, key: &str) -> Vec<&str> {
            self.views
                .values()
                .filter(|v| v.owns(key))
                .map(|v| v.identity.as_str())
                .collect()
        }
        fn check(&self) {
            for k in keys() {
                let o = self.owners(&k);
                assert!(o.len() <= 1, "{k} owned by {o:?}");
            }
        }
        fn owned_by_someone(&self) -> usize {
            keys().iter().filter(|k| !self.owners(k).is_empty()).count()
        }
    }

    #[test]
    fn a_fresh_replica_owns_nothing_until_its_first_map_settles() {
        let mut w = World::new(&["a", "b"]);
        let e1 = epoch(1, &["a", "b"]);
        w.read("a", &e1);
        w.ack("a");
        assert_eq!(w.owned_by_someone(), 0);
        w.observe("a");
        assert_eq!(w.owned_by_someone(), 0, "b has not acknowledged");
        w.read("b", &e1);
        w.ack("b");
        w.observe("a");
        w.observe("b");
        assert_eq!(w.owned_by_someone(), keys().len());
    }

    fn settled(ids: &[&str], e: &Epoch) -> World {
        let mut w = World::new(ids);
        for id in ids {
            w.read(id, e);
            w.ack(id);
        }
        for id in ids {
            w.observe(id);
        }
        w
    }

    #[test]
    fn a_joiner_gains_only_after_every_member_acknowledged() {
        let e1 = epoch(1, &["a", "b"]);
        let mut w = settled(&["a", "b"], &e1);
        w.views.insert("c".into(), {
            let mut v = ShardView::new("c");
            v.fenced = false;
            v
        });
        let e2 = epoch(2, &["a", "b", "c"]);
        w.read("c", &e2);
        w.ack("c");
        w.observe("c");
        assert!(keys().iter().all(|k| !w.views["c"].owns(k)));
        // a drops what it loses at once; b has not read e2 yet and keeps all of its keys.
        w.read("a", &e2);
        let lost_by_a = keys()
            .iter()
            .filter(|k| e1.owner(k) == Some("a") && e2.owner(k) != Some("a"))
            .count();
        assert!(lost_by_a > 0);
        assert!(
            keys()
                .iter()
                .filter(|k| e2.owner(k) != Some("a"))
                .all(|k| !w.views["a"].owns(k))
        );
        w.ack("a");
        w.observe("c");
        assert!(
            keys().iter().all(|k| !w.views["c"].owns(k)),
            "b has not acknowledged"
        );
        w.read("b", &e2);
        w.ack("b");
        for id in ["a", "b", "c"] {
            w.observe(id);
        }
        assert_eq!(w.owned_by_someone(), keys().len());
        assert!(keys().iter().any(|k| w.views["c"].owns(k)));
    }

    #[test]
    fn a_key_dropped_in_an_unsettled_epoch_is_not_taken_back_from_an_older_one() {
        // a saw e1 settled; e2 moved k to b and settled while a did not
        // observe it; e3 gives k back to a. a must not resume k before e3 settles.
        let e1 = epoch(1, &["a", "b"]);
        let mut w = settled(&["a", "b"], &e1);
        let e2 = epoch(2, &["b"]);
        w.read("a", &e2);
        w.ack("a");
        w.read("b", &e2);
        w.ack("b");
        w.observe("b"); // b settles e2 (a is not a member of e2); a does not observe.
        let e3 = epoch(3, &["a", "b"]);
        w.read("a", &e3); // a reads e3 first; b still works under e2.
        let k = keys()
            .into_iter()
            .find(|k| e1.owner(k) == Some("a") && e3.owner(k) == Some("a"))
            .unwrap_or_default();
        assert!(w.views["b"].owns(&k), "b owns every key under settled e2");
        assert!(!w.views["a"].owns(&k), "a resumed a key it dropped in e2");
    }

    #[test]
    fn a_fenced_replica_owns_nothing() {
        let e1 = epoch(1, &["a"]);
        let mut w = settled(&["a"], &e1);
        assert_eq!(w.owned_by_someone(), keys().len());
        if let Some(v) = w.views.get_mut("a") {
            v.fenced = true;
        }
        assert_eq!(w.owned_by_someone(), 0);
    }

    #[test]
    fn an_older_map_read_late_changes_nothing() {
        let mut v = ShardView::new("a");
        v.read(epoch(5, &["a"]));
        v.read(epoch(4, &["a", "b"]));
        assert_eq!(v.current.number, 5);
        v.acknowledge(4);
        assert_eq!(v.acked, 0, "acknowledging a map not read is ignored");
    }

    #[test]
    fn too_many_unsettled_epochs_own_nothing_until_one_settles() {
        let mut v = ShardView::new("a");
        v.fenced = false;
        v.read(epoch(1, &["a", "b"]));
        v.acknowledge(1);
        v.observe_acks(|_| Some(1));
        assert!(keys().iter().any(|k| v.owns(k)));
        for n in 2..=(MAX_HELD as u64 + 2) {
            v.read(epoch(n, &["a", "b"]));
            v.acknowledge(n);
        }
        assert!(keys().iter().all(|k| !v.owns(k)));
        v.observe_acks(|_| Some(u64::MAX));
        assert!(keys().iter().any(|k| v.owns(k)));
    }
}
