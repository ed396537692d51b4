//! One replica's membership: it renews its own Lease (carrying its latest
//! acknowledgement), reads the shard map and the other members' acknowledgements,
//! and publishes a [`ShardView`] that says which parents it may work on.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    ACK_ANNOTATION, EPOCH_ANNOTATION, Epoch, GROUP_LABEL, MEMBERS_ANNOTATION, ShardConfig,
    ShardError, ShardView,
};

/// Pause between attempts of a failed member-lease renewal.
const RENEW_RETRY: Duration = Duration::from_millis(250);

/// A running membership. Dropping it without [`Membership::leave`] behaves
/// like a crash: the Lease stays until it expires.
pub struct Membership {
    view: watch::Receiver<ShardView>,
    ack: Acknowledger,
    stop: CancellationToken,
    task: JoinHandle<()>,
    api: Api<Lease>,
    config: ShardConfig,
}

impl Membership {
    /// Joins the group. With `auto_ack` every new map is acknowledged as soon as
    /// it is read (for a replica that checks [`ShardView::owns`] before each
    /// piece of work and has nothing in flight to drain); otherwise the caller
    /// acknowledges with [`Membership::acknowledge`] once drained.
    pub fn start(
        client: kube::Client,
        config: ShardConfig,
        auto_ack: bool,
    ) -> Result<Self, ShardError> {
        config.validate()?;
        let api = Api::<Lease>::namespaced(client, &config.namespace);
        let (view_tx, view) = watch::channel(ShardView::new(config.identity.clone()));
        let (ack, ack_rx) = watch::channel(0);
        let stop = CancellationToken::new();
        let member = Member {
            api: api.clone(),
            config: config.clone(),
            view: ShardView::new(config.identity.clone()),
            tx: view_tx,
            ack_rx,
            auto_ack,
            last_renew: None,
        };
        let task = tokio::spawn(member.run(stop.clone()));
        Ok(Membership {
            view,
            ack: Acknowledger(std::sync::Arc::new(ack)),
            stop,
            task,
            api,
            config,
        })
    }

    /// The current view; changes whenever the map, the acknowledgements or the
    /// fence change.
    pub fn view(&self) -> watch::Receiver<ShardView> {
        self.view.clone()
    }

    /// Every piece of work on keys that map `number` gives to others has
    /// stopped: publish the acknowledgement.
    pub fn acknowledge(&self, number: u64) {
        self.ack.acknowledge(number);
    }

    /// A handle that acknowledges maps for this membership (the handover
    /// task holds it while the membership itself stays with `run`).
    pub fn acknowledger(&self) -> Acknowledger {
        self.ack.clone()
    }

    /// Leaves gracefully: stops renewing and deletes the member Lease, so the
    /// coordinator drops this replica at once. The caller must have stopped all
    /// work first.
    pub async fn leave(self) -> Result<(), ShardError> {
        self.stop.cancel();
        let _ = self.task.await;
        let name = self.config.member_name();
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(ShardError::Api {
                namespace: self.config.namespace.clone(),
                name,
                source,
            }),
        }
    }

    /// Stops without touching the Lease (what a crash does; tests).
    pub fn abort(self) {
        self.task.abort();
    }
}

/// Publishes acknowledgements of one [`Membership`]; see
/// [`Membership::acknowledge`].
#[derive(Clone)]
pub struct Acknowledger(std::sync::Arc<watch::Sender<u64>>);

impl Acknowledger {
    /// An acknowledger publishing to `tx` (tests of [`super::follow`]).
    #[cfg(test)]
    pub(crate) fn to(tx: watch::Sender<u64>) -> Self {
        Acknowledger(std::sync::Arc::new(tx))
    }

    /// Acknowledges map `number` (ignored unless newer than the last one).
    pub fn acknowledge(&self, number: u64) {
        self.0.send_if_modified(|cur| {
            let newer = number > *cur;
            if newer {
                *cur = number;
            }
            newer
        });
    }
}

struct Member {
    api: Api<Lease>,
    config: ShardConfig,
    view: ShardView,
    tx: watch::Sender<ShardView>,
    ack_rx: watch::Receiver<u64>,
    auto_ack: bool,
    last_renew: Option<Instant>,
}

impl Member {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            self.step().await;
            let wait = self
                .config
                .retry_period
                .mul_f64(1.0 + rand::random::<f64>() * 0.2);
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
                _ = self.ack_rx.changed() => {}
            }
        }
        let mut gone = self.view.clone();
        gone.fenced = true;
        self.tx.send_replace(gone);
    }

    /// One round: read the map, acknowledge if due, renew, read the acks.
    async fn step(&mut self) {
        let budget = self.config.retry_period;
        match tokio::time::timeout(budget, read_map(&self.api, &self.config)).await {
            Ok(Ok(Some(epoch))) => self.view.read(epoch),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "reading the shard map failed"),
            Err(_) => tracing::warn!("reading the shard map timed out"),
        }
        if let Some(n) = self.view.pending_ack()
            && (self.auto_ack || *self.ack_rx.borrow_and_update() >= n)
        {
            self.view.acknowledge(n);
        }
        self.renew_until_deadline().await;
        let deadline = self.config.renew_deadline;
        self.view.fenced = self.last_renew.is_none_or(|t| t.elapsed() >= deadline);
        match tokio::time::timeout(budget, member_acks(&self.api, &self.config)).await {
            Ok(Ok(acks)) => self.view.observe_acks(|m| acks.get(m).copied()),
            Ok(Err(e)) => tracing::warn!(error = %e, "listing the member leases failed"),
            Err(_) => tracing::warn!("listing the member leases timed out"),
        }
        let view = self.view.clone();
        self.tx.send_if_modified(|cur| {
            let changed = *cur != view;
            if changed {
                if cur.current.number != view.current.number {
                    tracing::info!(
                        epoch = view.current.number,
                        members = view.current.members.len(),
                        "shard map changed"
                    );
                }
                if view.settled && !cur.settled {
                    tracing::info!(epoch = view.current.number, "shard map settled");
                }
                *cur = view;
            }
            changed
        });
    }

    /// Renews, retrying a failed renewal every [`RENEW_RETRY`] until it
    /// succeeds or the renew deadline has passed. One attempt per round was
    /// not enough: a round (map read, renewal, acknowledgement list, retry
    /// period) lasts 2-3 s, so two failed renewals in a row (a few per cent at
    /// the chaos suite's 10 % faults per request) fenced a healthy replica.
    async fn renew_until_deadline(&mut self) {
        let deadline = self.config.renew_deadline;
        loop {
            let left = match self.last_renew {
                Some(t) => deadline.saturating_sub(t.elapsed()),
                None => deadline,
            };
            match tokio::time::timeout(left.max(Duration::from_millis(1)), self.renew()).await {
                Ok(Ok(())) => {
                    self.last_renew = Some(Instant::now());
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "renewing the member lease failed"),
                Err(_) => tracing::warn!("renewing the member lease timed out"),
            }
            let left = match self.last_renew {
                Some(t) => deadline.saturating_sub(t.elapsed()),
                // Not joined yet: the next round tries again.
                None => return,
            };
            if left <= RENEW_RETRY {
                return;
            }
            tokio::time::sleep(RENEW_RETRY).await;
        }
    }

    /// Creates or renews this replica's Lease with its acknowledgement.
    async fn renew(&self) -> Result<(), ShardError> {
        let name = self.config.member_name();
        let err = |source| ShardError::Api {
            namespace: self.config.namespace.clone(),
            name: name.clone(),
            source,
        };
        let now = MicroTime(Timestamp::now());
        let existing = self.api.get_opt(&name).await.map_err(err)?;
        let mut lease = existing.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                acquire_time: Some(now.clone()),
                ..LeaseSpec::default()
            }),
        });
        lease
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(GROUP_LABEL.into(), self.config.group.clone());
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ACK_ANNOTATION.into(), self.view.acked.to_string());
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds = Some(self.config.duration_seconds());
        spec.renew_time = Some(now);
        let result = if lease.metadata.resource_version.is_some() {
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await
        } else {
            self.api.create(&PostParams::default(), &lease).await
        };
        result.map(|_| ()).map_err(err)
    }
}

/// The shard map, if the coordinator has written one.
pub(super) async fn read_map(
    api: &Api<Lease>,
    config: &ShardConfig,
) -> Result<Option<Epoch>, ShardError> {
    let name = config.map_name();
    let lease = api.get_opt(&name).await.map_err(|source| ShardError::Api {
        namespace: config.namespace.clone(),
        name: name.clone(),
        source,
    })?;
    lease.map(|l| parse_map(config, &l)).transpose()
}

/// The map in a map Lease's annotations.
pub(super) fn parse_map(config: &ShardConfig, lease: &Lease) -> Result<Epoch, ShardError> {
    let bad = |annotation, message: String| ShardError::BadMap {
        namespace: config.namespace.clone(),
        name: config.map_name(),
        annotation,
        message,
    };
    let annotations = lease.metadata.annotations.clone().unwrap_or_default();
    let number = annotations
        .get(EPOCH_ANNOTATION)
        .ok_or_else(|| bad(EPOCH_ANNOTATION, "missing".into()))?
        .parse::<u64>()
        .map_err(|e| bad(EPOCH_ANNOTATION, e.to_string()))?;
    let mut members: Vec<String> = serde_json::from_str(
        annotations
            .get(MEMBERS_ANNOTATION)
            .ok_or_else(|| bad(MEMBERS_ANNOTATION, "missing".into()))?,
    )
    .map_err(|e| bad(MEMBERS_ANNOTATION, e.to_string()))?;
    members.sort();
    members.dedup();
    Ok(Epoch { number, members })
}

/// Each member's identity and acknowledged map number.
async fn member_acks(
    api: &Api<Lease>,
    config: &ShardConfig,
) -> Result<BTreeMap<String, u64>, ShardError> {
    let leases = list_members(api, config).await?;
    Ok(leases
        .iter()
        .filter_map(|l| {
            let id = l.spec.as_ref()?.holder_identity.clone()?;
            let ack = l
                .metadata
                .annotations
                .as_ref()?
                .get(ACK_ANNOTATION)?
                .parse()
                .ok()?;
            Some((id, ack))
        })
        .collect())
}

/// The group's member Leases.
pub(super) async fn list_members(
    api: &Api<Lease>,
    config: &ShardConfig,
) -> Result<Vec<Lease>, ShardError> {
    let selector = format!("{GROUP_LABEL}={}", config.group);
    api.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .map_err(|source| ShardError::Api {
            namespace: config.namespace.clone(),
            name: format!("(member leases of {})", config.group),
            source,
        })
}
