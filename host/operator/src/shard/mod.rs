//! Sharding parents across host replicas (issue 19), with Kubernetes Leases as
//! the only coordination layer.
//!
//! - **Membership**: every replica keeps one Lease of its own,
//!   `<group>-member-<slug>`, labelled `wasm-reconciler.dev/shard-group=<group>`
//!   and renewed every retry period ([`member`]). A replica whose renewals fail
//!   for the renew deadline *fences* itself: it works on nothing, before anyone
//!   may consider it gone (lease duration > renew deadline, as for leader election).
//! - **The shard map**: the elected leader ([`crate::leader`]) runs the
//!   [`coordinator`]: it watches the member Leases and, when the live set
//!   changes, writes the next numbered map (an [`Epoch`]) to the Lease
//!   `<group>-shards` with a resourceVersion precondition. A member is dropped
//!   once its Lease has not changed for its duration (measured on the
//!   coordinator's clock, like client-go's leader election) or at once when it
//!   deleted its Lease on a graceful leave.
//! - **Assignment**: a parent falls in one of 64 fixed shard buckets
//!   ([`wr_engine::shard_bucket`], a hash of its key); a bucket's owner in a
//!   map is given by rendezvous hashing over the map's members ([`assign`]);
//!   a change moves ≈ 1/N of the buckets.
//! - **Handover without two owners** ([`view`]): on reading a newer map a
//!   replica stops work on what it loses, finishes or cancels what is in
//!   flight, then *acknowledges* the map number in its Lease. It keeps working
//!   on what it keeps; it gains nothing until the map has *settled* — every
//!   member of it acknowledged. A crashed replica acknowledges nothing, so a
//!   map that still counts it never settles; the next map, without it, is
//!   written only after its Lease expired, by which time it fenced itself.
//!
//! The gate admits by [`ShardView::owns`] in every mode. With narrowed
//! caches (`run --shard-cache narrow`, the default) a replica also watches
//! only the parents and children labelled with its buckets, re-listing them
//! before it acknowledges a map ([`follow`]); with `shared` it caches every
//! parent and child and the gate alone filters.

pub mod assign;
pub mod coordinator;
pub mod gate;
pub mod member;
pub mod metrics;
pub mod view;

pub use coordinator::Coordinator;
pub use gate::{Gained, ShardGate, follow};
pub use member::{Acknowledger, Membership};
pub use metrics::ShardMetrics;
pub use view::{Epoch, ShardView};

use std::time::Duration;

/// Label on every member Lease of one group.
pub const GROUP_LABEL: &str = "wasm-reconciler.dev/shard-group";
/// Annotation on a member Lease: the highest map number it acknowledged.
pub const ACK_ANNOTATION: &str = "wasm-reconciler.dev/shard-ack";
/// Annotation on the map Lease: the map's number.
pub const EPOCH_ANNOTATION: &str = "wasm-reconciler.dev/shard-epoch";
/// Annotation on the map Lease: its members, a JSON list of identities.
pub const MEMBERS_ANNOTATION: &str = "wasm-reconciler.dev/shard-members";

/// Annotation on the map Lease: a readable line about the last change
/// (`kubectl get lease <group>-shards -o yaml`).
pub const CHANGE_ANNOTATION: &str = "wasm-reconciler.dev/shard-last-change";

/// Settings of one shard group; timings named and defaulted like leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// Namespace of the member Leases and the map.
    pub namespace: String,
    /// The group's name (the Deployment's name): prefixes every Lease.
    pub group: String,
    /// This replica's identity; unique per process.
    pub identity: String,
    /// How long a member's Lease stays valid after its last observed change.
    pub lease_duration: Duration,
    /// How long a member keeps trying to renew before it fences itself.
    pub renew_deadline: Duration,
    /// Interval between renewals (members) and membership checks (coordinator).
    pub retry_period: Duration,
}

/// Errors of shard membership.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The settings contradict each other.
    #[error("invalid shard settings: {0}")]
    Config(String),
    /// A Lease request failed.
    #[error("shard lease {namespace}/{name}")]
    Api {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The map Lease carries annotations this host cannot read.
    #[error("shard map {namespace}/{name}: annotation {annotation}: {message}")]
    BadMap {
        /// Namespace of the map Lease.
        namespace: String,
        /// Name of the map Lease.
        name: String,
        /// The annotation that is wrong.
        annotation: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

impl ShardConfig {
    /// Defaults of leader election: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: impl Into<String>, group: impl Into<String>) -> Self {
        ShardConfig {
            namespace: namespace.into(),
            group: group.into(),
            identity: crate::leader::default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Same ordering as leader election: lease > renew deadline > 1.2 × retry.
    pub fn validate(&self) -> Result<(), ShardError> {
        let bad = |m: &str| Err(ShardError::Config(m.to_string()));
        if self.namespace.is_empty() || self.group.is_empty() || self.identity.is_empty() {
            return bad("namespace, group and identity must not be empty");
        }
        if self.retry_period.is_zero() || self.lease_duration <= self.renew_deadline {
            return bad("lease duration must be greater than the renew deadline");
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return bad("renew deadline must be greater than 1.2 × retry period");
        }
        Ok(())
    }

    /// Name of the Lease holding the shard map.
    pub fn map_name(&self) -> String {
        format!("{}-shards", self.group)
    }

    /// Name of this replica's member Lease: a DNS-1123 slug of the identity
    /// plus a short digest of it (two identities never share a Lease).
    pub fn member_name(&self) -> String {
        let slug: String = self
            .identity
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(40)
            .collect();
        let digest = format!("{:016x}", assign::weight("member-name", &self.identity));
        format!(
            "{}-member-{}-{}",
            self.group,
            slug.trim_matches('-'),
            &digest[..8]
        )
    }

    /// `leaseDurationSeconds`: whole seconds, rounded up, at least 1.
    fn duration_seconds(&self) -> i32 {
        (self.lease_duration.as_secs_f64().ceil() as i32).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_lease_names_are_dns_names_and_unique() {
        let mut a = ShardConfig::new("ns", "wr");
        a.identity = "Pod_Name.x_0123456789abcdef".into();
        let mut b = a.clone();
        b.identity = "pod-name-x-0123456789abcdef".into();
        let (na, nb) = (a.member_name(), b.member_name());
        assert_ne!(na, nb);
        for n in [na, nb] {
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{n}"
            );
        }
    }

    #[test]
    fn timings_must_be_ordered() {
        assert!(ShardConfig::new("ns", "wr").validate().is_ok());
        let mut c = ShardConfig::new("ns", "wr");
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
    }
}
