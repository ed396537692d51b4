//! The leader's part: keep the shard map equal to the set of live members,
//! one numbered map at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::member::{list_members, parse_map};
use super::{EPOCH_ANNOTATION, Epoch, MEMBERS_ANNOTATION, ShardConfig, ShardError};

/// The running coordinator; run it only while this replica leads.
pub struct Coordinator {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Coordinator {
    /// Starts keeping the map of `config.group`.
    pub fn start(client: kube::Client, config: ShardConfig) -> Result<Self, ShardError> {
        config.validate()?;
        let api = Api::<Lease>::namespaced(client, &config.namespace);
        let stop = CancellationToken::new();
        let keeper = Keeper {
            api,
            config,
            seen: BTreeMap::new(),
        };
        let task = tokio::spawn(keeper.run(stop.clone()));
        Ok(Coordinator { stop, task })
    }

    /// Stops (on losing leadership or at shutdown).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

struct Keeper {
    api: Api<Lease>,
    config: ShardConfig,
    /// Per member Lease: its last record and when this process first saw it.
    seen: BTreeMap<String, (LeaseSpec, Instant)>,
}

impl Keeper {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            if let Err(e) = self.step().await {
                tracing::warn!(error = %e, "keeping the shard map failed");
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    async fn step(&mut self) -> Result<(), ShardError> {
        let live = self.live_members().await?;
        let name = self.config.map_name();
        let err = |source| ShardError::Api {
            namespace: self.config.namespace.clone(),
            name: name.clone(),
            source,
        };
        let existing = self.api.get_opt(&name).await.map_err(err)?;
        let current = existing
            .as_ref()
            .map(|l| parse_map(&self.config, l))
            .transpose()?;
        if current.as_ref().map(|e| &e.members) == Some(&live)
            || (current.is_none() && live.is_empty())
        {
            return Ok(());
        }
        let next = Epoch {
            number: current.as_ref().map_or(1, |e| e.number + 1),
            members: live,
        };
        let mut lease = existing.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec::default()),
        });
        let members = serde_json::to_string(&next.members).unwrap_or_else(|_| "[]".into());
        let annotations = lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(EPOCH_ANNOTATION.into(), next.number.to_string());
        annotations.insert(MEMBERS_ANNOTATION.into(), members);
        annotations.insert(
            super::CHANGE_ANNOTATION.into(),
            change_summary(current.as_ref(), &next, &Timestamp::now().to_string()),
        );
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.config.identity.clone());
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        // The resourceVersion read above is the precondition: of two
        // coordinators (a leadership change) only one writes map n + 1.
        let written = if lease.metadata.resource_version.is_some() {
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await
        } else {
            self.api.create(&PostParams::default(), &lease).await
        };
        match written {
            Ok(_) => {
                tracing::info!(
                    epoch = next.number,
                    members = next.members.len(),
                    "wrote the shard map"
                );
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(source) => Err(err(source)),
        }
    }

    /// Identities of the member Leases whose record changed within their
    /// duration, on this process's clock (clock skew between nodes does not matter).
    async fn live_members(&mut self) -> Result<Vec<String>, ShardError> {
        let leases = list_members(&self.api, &self.config).await?;
        let mut live = Vec::new();
        let mut still = BTreeMap::new();
        for lease in leases {
            let (Some(name), Some(spec)) = (lease.metadata.name.clone(), lease.spec) else {
                continue;
            };
            let seen_at = match self.seen.get(&name) {
                Some((old, at)) if *old == spec => *at,
                _ => Instant::now(),
            };
            let valid_for = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.config.lease_duration);
            if let Some(id) = spec.holder_identity.clone().filter(|h| !h.is_empty())
                && seen_at.elapsed() < valid_for
            {
                live.push(id);
            }
            still.insert(name, (spec, seen_at));
        }
        self.seen = still;
        live.sort();
        live.dedup();
        Ok(live)
    }
}

/// The readable line of [`super::CHANGE_ANNOTATION`]: which map replaced
/// which, when, who joined and who left.
fn change_summary(previous: Option<&Epoch>, next: &Epoch, at: &str) -> String {
    let before: &[String] = previous.map_or(&[], |e| &e.members);
    let joined: Vec<&str> = next
        .members
        .iter()
        .filter(|m| !before.contains(m))
        .map(String::as_str)
        .collect();
    let left: Vec<&str> = before
        .iter()
        .filter(|m| !next.members.contains(m))
        .map(String::as_str)
        .collect();
    format!(
        "map {} at {at}: {} members; joined [{}]; left [{}]",
        next.number,
        next.members.len(),
        joined.join(", "),
        left.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_summary_names_who_joined_and_who_left() {
        let e = |n, m: &[&str]| Epoch {
            number: n,
            members: m.iter().map(|s| s.to_string()).collect(),
        };
        let s = change_summary(Some(&e(4, &["a", "b"])), &e(5, &["b", "c"]), "T");
        assert_eq!(s, "map 5 at T: 2 members; joined [c]; left [a]");
    }
}
