//! Prometheus families of one shard-group member: what it owns, the map it
//! works under, and how long handovers take. No per-object labels.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Gauges and the handover histogram of one replica.
#[derive(Clone)]
pub struct ShardMetrics {
    owned_parents: Gauge,
    members: Gauge,
    member: Gauge,
    epoch: Gauge,
    settled: Gauge,
    fenced: Gauge,
    rejoins: Counter,
    handover: Histogram,
    gained: Counter,
    buckets: Gauge,
    cache_objects: Family<Vec<(String, String)>, Gauge>,
}

impl ShardMetrics {
    /// Registers the families under `wasm_reconciler_shard_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = ShardMetrics {
            owned_parents: Gauge::default(),
            members: Gauge::default(),
            member: Gauge::default(),
            epoch: Gauge::default(),
            settled: Gauge::default(),
            fenced: Gauge::default(),
            rejoins: Counter::default(),
            // 50 ms … ~27 min: a handover waits for in-flight reconciles
            // and, after a crash, for the dead member's lease to expire.
            handover: Histogram::new(exponential_buckets(0.05, 2.0, 16)),
            gained: Counter::default(),
            buckets: Gauge::default(),
            cache_objects: Family::default(),
        };
        let r = registry.sub_registry_with_prefix(crate::metrics::PREFIX);
        r.register(
            "shard_owned_parents",
            "Parents (all controllers) this replica owns under the shard map it works with",
            m.owned_parents.clone(),
        );
        r.register(
            "shard_members",
            "Members of the newest shard map this replica read",
            m.members.clone(),
        );
        r.register(
            "shard_member",
            "1 when this replica is a member of the newest shard map it read (a joiner is not until the coordinator adds it)",
            m.member.clone(),
        );
        r.register(
            "shard_epoch",
            "Number of the newest shard map this replica read",
            m.epoch.clone(),
        );
        r.register(
            "shard_settled",
            "1 when every member acknowledged the newest shard map",
            m.settled.clone(),
        );
        r.register(
            "shard_fenced",
            "1 when this replica's member lease is past its renew deadline (works on nothing)",
            m.fenced.clone(),
        );
        r.register(
            "shard_gained_parents",
            "Parents re-enqueued because a settled shard map gave them to this replica (kept ones are not)",
            m.gained.clone(),
        );
        r.register(
            "shard_rejoins",
            "Times this replica was fenced, drained and rejoined the group as a new member",
            m.rejoins.clone(),
        );
        r.register(
            "shard_handover_duration_seconds",
            "From reading a new shard map to seeing it settled (drain, acknowledgements of every member)",
            m.handover.clone(),
        );
        r.register(
            "shard_watched_buckets",
            "Shard buckets this replica's parent and child caches hold (of 64; all when not narrowed)",
            m.buckets.clone(),
        );
        r.register(
            "cache_objects",
            "Objects held in this replica's cache, per kind",
            m.cache_objects.clone(),
        );
        m
    }

    /// Records how many buckets the caches were narrowed to.
    pub fn watched_buckets(&self, n: usize) {
        self.buckets.set(n as i64);
    }

    /// Records the objects cached of `kind`.
    pub fn cache_objects(&self, kind: &str, n: usize) {
        self.cache_objects
            .get_or_create(&vec![("kind".to_string(), kind.to_string())])
            .set(n as i64);
    }

    /// Records the map this replica works under.
    pub fn view(&self, view: &super::ShardView) {
        self.members.set(view.current.members.len() as i64);
        self.member
            .set(i64::from(view.current.members.contains(&view.identity)));
        self.epoch.set(view.current.number as i64);
        self.settled.set(i64::from(view.settled));
        self.fenced.set(i64::from(view.fenced));
    }

    /// Records how many parents this replica owns.
    pub fn owned(&self, n: usize) {
        self.owned_parents.set(n as i64);
    }

    /// Counts parents re-enqueued after a map settled.
    pub fn gained(&self, n: usize) {
        self.gained.inc_by(n as u64);
    }

    /// Records one rejoin after fencing.
    pub fn rejoined(&self) {
        self.rejoins.inc();
    }

    /// Records one handover, from reading the map to its settling.
    pub fn handover(&self, took: std::time::Duration) {
        self.handover.observe(took.as_secs_f64());
    }
}
