//! Leader election on a `coordination.k8s.io/v1` Lease: only the leader
//! reconciles, a standby takes over within the lease duration when the leader
//! dies, and a graceful shutdown releases the lease so a standby takes over at
//! its next retry.
//!
//! This is client-go's `leaderelection` algorithm, hand-written on purpose:
//! `kube-leader-election` still depends on kube 4, and `kube-lease-manager`
//! (kube 5) takes an expired lease with an unconditional patch (no
//! resourceVersion precondition), so two standbys can both believe they hold
//! it, and it has no renew deadline after which a cut-off leader steps down.
//! The algorithm here:
//!
//! - every `retry_period` (jittered up to +20 %) a candidate GETs the lease;
//! - a lease held by someone else is valid until `leaseDurationSeconds` after
//!   the moment *this process* last saw its record change (a local monotonic
//!   clock, so clock skew between nodes does not matter);
//! - a free, released or expired lease is taken with an UPDATE carrying the
//!   resourceVersion read (optimistic concurrency: of two racing candidates
//!   exactly one gets 409), bumping `leaseTransitions` and `acquireTime`;
//! - the leader renews every `retry_period`; when no renewal succeeded for
//!   `renew_deadline` (< lease duration) it steps down before anyone else may
//!   take over;
//! - release clears `holderIdentity` and sets a 1 s duration.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Lease settings, named and defaulted like client-go / controller-runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease (the host's own namespace in a cluster).
    pub namespace: String,
    /// Lease name; every replica of one deployment uses the same.
    pub name: String,
    /// This process's identity; unique per process.
    pub identity: String,
    /// How long a standby waits after the last observed renewal before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// Interval between acquire / renew attempts.
    pub retry_period: Duration,
}

/// client-go's jitter factor on acquire retries (`wait.JitterUntil(…, 1.2)` in
/// spirit; we use a smaller +20 % so tests with short periods stay brisk).
const JITTER: f64 = 0.2;

impl LeaseConfig {
    /// Defaults of controller-runtime: 15 s lease, 10 s renew deadline, 2 s retry,
    /// identity from [`default_identity`].
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// The ordering client-go insists on: lease duration > renew deadline >
    /// retry period × 1.2, all positive. Otherwise a slow leader could still
    /// believe it leads after a standby took over.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let bad = |m: &str| Err(LeaderError::Config(m.to_string()));
        if self.name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            return bad("lease name, namespace and identity must not be empty");
        }
        if self.retry_period.is_zero() {
            return bad("retry period must be positive");
        }
        if self.lease_duration <= self.renew_deadline {
            return bad("lease duration must be greater than the renew deadline");
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * (1.0 + JITTER) {
            return bad("renew deadline must be greater than 1.2 × retry period");
        }
        Ok(())
    }

    /// `leaseDurationSeconds`: whole seconds, rounded up, at least 1.
    fn duration_seconds(&self) -> i32 {
        let s = self.lease_duration.as_secs_f64().ceil();
        (s as i32).max(1)
    }
}

/// `$POD_NAME` (or `$HOSTNAME`) plus a random suffix, like client-go's
/// `hostname_uuid`: readable in `kubectl get lease`, unique across restarts.
pub fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "wasm-reconciler".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4().simple())
}

/// What this process knows about the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// Not yet known (start-up), or the API server could not be reached.
    Unknown,
    /// This process holds the lease and may reconcile.
    Leader,
    /// Another process holds the lease.
    Standby {
        /// Its `holderIdentity`.
        holder: String,
    },
}

impl LeaderState {
    /// Only the leader reconciles.
    pub fn is_leader(&self) -> bool {
        matches!(self, LeaderState::Leader)
    }

    /// Leader or standby: what `/readyz` requires.
    pub fn is_known(&self) -> bool {
        !matches!(self, LeaderState::Unknown)
    }
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The durations or names are unusable.
    #[error("invalid leader election settings: {0}")]
    Config(String),
    /// A Lease request failed.
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The election task panicked or was aborted.
    #[error("leader election task ended abnormally: {0}")]
    Task(#[source] tokio::task::JoinError),
}

/// A running election. Dropping it leaves the task running; call
/// [`LeaderElection::release`] on graceful shutdown.
pub struct LeaderElection {
    state: watch::Receiver<LeaderState>,
    stop: CancellationToken,
    task: JoinHandle<Result<bool, LeaderError>>,
}

impl LeaderElection {
    /// Starts campaigning in a background task.
    pub fn start(client: kube::Client, config: LeaseConfig) -> Result<Self, LeaderError> {
        config.validate()?;
        let (tx, rx) = watch::channel(LeaderState::Unknown);
        let stop = CancellationToken::new();
        let elector = Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            tx,
        };
        let task = tokio::spawn(elector.run(stop.clone()));
        Ok(LeaderElection {
            state: rx,
            stop,
            task,
        })
    }

    /// The election state; changes are published as they happen.
    pub fn state(&self) -> watch::Receiver<LeaderState> {
        self.state.clone()
    }

    /// Stops campaigning and, if this process leads, releases the lease so a
    /// standby takes over at its next retry instead of after the lease
    /// duration. Call it after in-flight reconciles finished. Returns whether
    /// a held lease was released.
    pub async fn release(self) -> Result<bool, LeaderError> {
        self.stop.cancel();
        self.task.await.map_err(LeaderError::Task)?
    }

    /// Stops campaigning without touching the lease (what a crash does; tests).
    pub fn abort(self) {
        self.task.abort();
    }
}

/// Result of one acquire-or-renew attempt.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease (acquired or renewed).
    Held,
    /// Someone else holds a valid lease.
    Other(String),
    /// Our write lost a race (409); try again later.
    Conflict,
}

struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// Last lease record seen and when (local clock) it was first seen.
    observed: Option<(LeaseSpec, Instant)>,
    tx: watch::Sender<LeaderState>,
}

impl Elector {
    fn api_err(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    fn publish(&self, state: LeaderState) {
        self.tx.send_if_modified(|cur| {
            if *cur == state {
                false
            } else {
                *cur = state;
                true
            }
        });
    }

    async fn run(mut self, stop: CancellationToken) -> Result<bool, LeaderError> {
        loop {
            if !self.acquire(&stop).await {
                return Ok(false);
            }
            self.publish(LeaderState::Leader);
            tracing::info!(lease = %self.config.name, identity = %self.config.identity, "became leader");
            if !self.renew(&stop).await {
                return self.release().await;
            }
            tracing::warn!(lease = %self.config.name, identity = %self.config.identity, "lost leadership");
        }
    }

    /// Campaigns until the lease is held (true) or `stop` fires (false).
    async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held) => return true,
                Ok(Attempt::Other(holder)) => self.publish(LeaderState::Standby { holder }),
                Ok(Attempt::Conflict) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "acquiring the lease failed");
                    self.publish(LeaderState::Unknown);
                }
            }
            let wait = jittered(self.config.retry_period);
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Renews until `stop` fires (false) or leadership is lost (true).
    async fn renew(&mut self, stop: &CancellationToken) -> bool {
        let mut last_renew = Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let budget = self
                .config
                .renew_deadline
                .saturating_sub(last_renew.elapsed());
            let attempt = tokio::time::timeout(budget, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(Attempt::Held)) => last_renew = Instant::now(),
                Ok(Ok(Attempt::Other(holder))) => {
                    self.publish(LeaderState::Standby { holder });
                    return true;
                }
                Ok(Ok(Attempt::Conflict)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "renewing the lease failed")
                }
                Err(_) => tracing::warn!(lease = %self.config.name, "renewing the lease timed out"),
            }
            if last_renew.elapsed() >= self.config.renew_deadline {
                self.publish(LeaderState::Unknown);
                return true;
            }
        }
    }

    /// Remembers `spec` and when it was first seen (the expiry clock).
    fn observe(&mut self, spec: &LeaseSpec) -> Instant {
        match &self.observed {
            Some((seen, at)) if seen == spec => *at,
            _ => {
                let now = Instant::now();
                self.observed = Some((spec.clone(), now));
                now
            }
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaderError> {
        let now = MicroTime(Timestamp::now());
        let existing = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.api_err(e))?;
        let Some(mut lease) = existing else {
            let spec = LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.config.duration_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            };
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created.spec.unwrap_or_default());
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
                Err(e) => Err(self.api_err(e)),
            };
        };
        let old = lease.spec.clone().unwrap_or_default();
        let seen_at = self.observe(&old);
        let holder = old.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(self.config.identity.as_str());
        if let Some(h) = holder.as_ref().filter(|_| !mine) {
            let valid_for = old
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.config.lease_duration);
            if seen_at.elapsed() < valid_for {
                return Ok(Attempt::Other(h.clone()));
            }
            tracing::info!(lease = %self.config.name, previous = %h, "lease expired; taking over");
        }
        let new = next_spec(&old, &self.config, mine, now);
        lease.spec = Some(new);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated.spec.unwrap_or_default());
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(self.api_err(e)),
        }
    }

    /// Gives the lease up if we hold it (resourceVersion-checked).
    async fn release(&mut self) -> Result<bool, LeaderError> {
        self.publish(LeaderState::Unknown);
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.api_err(e))?
        else {
            return Ok(false);
        };
        let old = lease.spec.clone().unwrap_or_default();
        if old.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        lease.spec = Some(released_spec(&old, MicroTime(Timestamp::now())));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                tracing::info!(lease = %self.config.name, identity = %self.config.identity, "released the lease");
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.api_err(e)),
        }
    }
}

/// The record written by a successful acquire (`mine == false`) or renew.
fn next_spec(old: &LeaseSpec, config: &LeaseConfig, mine: bool, now: MicroTime) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.duration_seconds()),
        acquire_time: if mine {
            old.acquire_time.clone().or_else(|| Some(now.clone()))
        } else {
            Some(now.clone())
        },
        renew_time: Some(now),
        lease_transitions: if mine {
            old.lease_transitions
        } else {
            Some(old.lease_transitions.unwrap_or(0).saturating_add(1))
        },
        ..old.clone()
    }
}

/// The record written on release: no holder, 1 s duration (client-go's
/// `ReleaseOnCancel`), transitions kept.
fn released_spec(old: &LeaseSpec, now: MicroTime) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        ..old.clone()
    }
}

fn jittered(base: Duration) -> Duration {
    base.mul_f64(1.0 + rand::random::<f64>() * JITTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LeaseConfig {
        LeaseConfig {
            identity: "me".into(),
            ..LeaseConfig::new("ns", "lease")
        }
    }

    #[test]
    fn defaults_are_valid_and_ordering_is_enforced() {
        assert!(cfg().validate().is_ok());
        let mut c = cfg();
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.retry_period = c.renew_deadline;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.identity.clear();
        assert!(c.validate().is_err());
    }

    #[test]
    fn duration_seconds_rounds_up() {
        let mut c = cfg();
        c.lease_duration = Duration::from_millis(1500);
        assert_eq!(c.duration_seconds(), 2);
        c.lease_duration = Duration::from_millis(10);
        assert_eq!(c.duration_seconds(), 1);
    }

    fn t(s: i64) -> MicroTime {
        MicroTime(Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn taking_over_bumps_transitions_and_acquire_time() {
        let old = LeaseSpec {
            holder_identity: Some("other".into()),
            acquire_time: Some(t(10)),
            renew_time: Some(t(20)),
            lease_transitions: Some(3),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        };
        let new = next_spec(&old, &cfg(), false, t(100));
        assert_eq!(new.holder_identity.as_deref(), Some("me"));
        assert_eq!(new.lease_transitions, Some(4));
        assert_eq!(new.acquire_time, Some(t(100)));
        assert_eq!(new.renew_time, Some(t(100)));
    }

    #[test]
    fn renewing_keeps_acquire_time_and_transitions() {
        let old = LeaseSpec {
            holder_identity: Some("me".into()),
            acquire_time: Some(t(10)),
            renew_time: Some(t(20)),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        };
        let new = next_spec(&old, &cfg(), true, t(100));
        assert_eq!(new.lease_transitions, Some(3));
        assert_eq!(new.acquire_time, Some(t(10)));
        assert_eq!(new.renew_time, Some(t(100)));
    }

    #[test]
    fn release_clears_holder_and_shortens_duration() {
        let old = LeaseSpec {
            holder_identity: Some("me".into()),
            lease_transitions: Some(2),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        };
        let new = released_spec(&old, t(5));
        assert_eq!(new.holder_identity, None);
        assert_eq!(new.lease_duration_seconds, Some(1));
        assert_eq!(new.lease_transitions, Some(2));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(1));
            assert!(d >= Duration::from_secs(1) && d <= Duration::from_millis(1200));
        }
    }
}
