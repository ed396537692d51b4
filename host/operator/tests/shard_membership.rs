//! Shard membership against the embedded API server over loopback: replicas
//! join and settle, a joiner gains only after everyone acknowledged, a crashed
//! replica's keys move once its Lease expired, a graceful leave moves them at
//! once — and at no sampled moment do two replicas own one key.
//!
//! Bounds are generous multiples of the lease settings ("eventually"), never
//! exact timings.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use wr_operator::shard::{Coordinator, Membership, ShardConfig, ShardView};

const NS: &str = "default";

async fn server() -> anyhow::Result<(wr_apiserver::RunningServer, Client)> {
    let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
    let client = Client::try_from(kube::Config::new(server.url().parse()?))?;
    Ok((server, client))
}

fn config(identity: &str) -> ShardConfig {
    ShardConfig {
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
        ..ShardConfig::new(NS, "wr")
    }
}

fn keys() -> Vec<String> {
    (0..300)
        .map(|i| format!("ns-{}/parent-{i}", i % 3))
        .collect()
}

/// The views of the running replicas, and a record of every double owner seen.
struct Fleet {
    views: BTreeMap<String, watch::Receiver<ShardView>>,
}

impl Fleet {
    fn owners(&self, key: &str) -> Vec<String> {
        self.views
            .iter()
            .filter(|(_, v)| v.borrow().owns(key))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Two owners of one key, seen as "a owns, b owns, a still owns" (three
    /// reads in order, so a handover between two reads is not mistaken for
    /// an overlap).
    fn double_owners(&self) -> Vec<String> {
        let mut found = Vec::new();
        for k in keys() {
            let first = self.owners(&k);
            if first.len() > 1 {
                let again = self.owners(&k);
                if again.len() > 1 && again.iter().any(|o| first.contains(o)) {
                    found.push(format!("{k}: {again:?}"));
                }
            }
        }
        found
    }

    fn all_owned_once(&self) -> bool {
        keys().iter().all(|k| self.owners(k).len() == 1)
    }

    fn owned_by(&self, id: &str) -> usize {
        keys().iter().filter(|k| self.owners(k) == [id]).count()
    }
}

/// Polls every 20 ms for at most `limit`, checking the invariant each time.
async fn eventually(
    fleet: &Fleet,
    violations: &mut Vec<String>,
    limit: Duration,
    mut check: impl FnMut(&Fleet) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        violations.extend(fleet.double_owners());
        if check(fleet) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_settle_hand_over_and_never_share_a_key() -> anyhow::Result<()> {
    let (_server, client) = server().await?;
    let coordinator = Coordinator::start(client.clone(), config("coordinator"))?;
    let mut members = BTreeMap::new();
    let mut fleet = Fleet {
        views: BTreeMap::new(),
    };
    let mut violations = Vec::new();
    for id in ["a", "b"] {
        let m = Membership::start(client.clone(), config(id), true)?;
        fleet.views.insert(id.into(), m.view());
        members.insert(id.to_string(), m);
    }
    let limit = Duration::from_secs(20);
    anyhow::ensure!(
        eventually(&fleet, &mut violations, limit, Fleet::all_owned_once).await,
        "two replicas never settled: a owns {}, b owns {}",
        fleet.owned_by("a"),
        fleet.owned_by("b")
    );

    // c joins, acknowledging by hand: a and b acknowledge at once, c holds
    // back — c may not gain before its own acknowledgement is published.
    let c = Membership::start(client.clone(), config("c"), false)?;
    fleet.views.insert("c".into(), c.view());
    let mut c_view = c.view();
    let epoch = loop {
        c_view.changed().await?;
        let v = c_view.borrow().clone();
        if v.current.members.iter().any(|m| m == "c") {
            break v.current.number;
        }
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    violations.extend(fleet.double_owners());
    anyhow::ensure!(
        fleet.owned_by("c") == 0,
        "c owns {} keys before acknowledging map {epoch}",
        fleet.owned_by("c")
    );
    c.acknowledge(epoch);
    // From here on c acknowledges each new map as soon as it reads it (it has
    // nothing in flight), as `eventually` polls.
    let ack_c = |f: &Fleet| {
        if let Some(n) = f.views.get("c").and_then(|v| v.borrow().pending_ack()) {
            c.acknowledge(n);
        }
    };
    anyhow::ensure!(
        eventually(&fleet, &mut violations, limit, |f| {
            ack_c(f);
            f.all_owned_once() && f.owned_by("c") > 0
        })
        .await,
        "three replicas never settled"
    );

    // a crashes: its keys move only after its Lease expired.
    if let Some(a) = members.remove("a") {
        a.abort();
    }
    fleet.views.remove("a");
    anyhow::ensure!(
        eventually(&fleet, &mut violations, limit, |f| {
            ack_c(f);
            f.all_owned_once()
        })
        .await,
        "a's keys never moved to b and c"
    );

    // b leaves gracefully: c takes everything.
    if let Some(b) = members.remove("b") {
        b.leave().await?;
    }
    fleet.views.remove("b");
    anyhow::ensure!(
        eventually(&fleet, &mut violations, limit, |f| {
            ack_c(f);
            f.owned_by("c") == keys().len()
        })
        .await,
        "c never took b's keys"
    );
    anyhow::ensure!(violations.is_empty(), "two owners seen: {violations:?}");
    c.leave().await?;
    coordinator.stop().await;
    Ok(())
}

/// A replica whose member-lease renewals fail twice in a row keeps its lease:
/// a failed renewal is retried within the round, not one round (here at
/// least 2 s, the retry period) later, which with a 4 s renew deadline fenced
/// it (exit 1 in `run`; the chaos suite's "unexpected host exits").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_failed_renewals_in_a_row_do_not_fence() -> anyhow::Result<()> {
    use wr_apiserver::{FaultAction, FaultRule};
    let (server, client) = server().await?;
    let config = ShardConfig {
        identity: "a".into(),
        lease_duration: Duration::from_secs(6),
        renew_deadline: Duration::from_secs(4),
        retry_period: Duration::from_secs(2),
        ..ShardConfig::new(NS, "wr")
    };
    let m = Membership::start(client.clone(), config, true)?;
    let mut view = m.view();
    tokio::time::timeout(Duration::from_secs(30), view.wait_for(|v| !v.fenced)).await??;
    // The next two renewals (updates of a Lease) fail with 500.
    server.faults().add_rule(FaultRule {
        resources: vec!["leases".into()],
        times: Some(2),
        ..FaultRule::new(&["update"], 1.0, FaultAction::InternalError)
    });
    let fenced = tokio::time::timeout(Duration::from_secs(12), view.wait_for(|v| v.fenced)).await;
    let injected = server.faults().injected().len();
    anyhow::ensure!(
        fenced.is_err(),
        "failed renewals ({injected} injected) fenced the replica (renew deadline 4 s)"
    );
    anyhow::ensure!(injected == 2, "{injected} faults injected, expected 2");
    m.leave().await?;
    Ok(())
}
