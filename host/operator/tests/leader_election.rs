//! Leader election against the embedded API server over loopback: exactly one
//! leader among several candidates; a crashed leader (task aborted, lease not
//! released) is replaced once its lease expires; a released lease is taken
//! over long before it would have expired.
//!
//! Bounds are generous multiples of the lease settings ("eventually"), never
//! exact timings.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use wr_operator::{LeaderElection, LeaderState, LeaseConfig};

const NS: &str = "default";

async fn server() -> anyhow::Result<(wr_apiserver::RunningServer, Client)> {
    let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
    let client = Client::try_from(kube::Config::new(server.url().parse()?))?;
    Ok((server, client))
}

fn config(
    name: &str,
    identity: &str,
    lease: Duration,
    renew: Duration,
    retry: Duration,
) -> LeaseConfig {
    LeaseConfig {
        identity: identity.to_string(),
        lease_duration: lease,
        renew_deadline: renew,
        retry_period: retry,
        ..LeaseConfig::new(NS, name)
    }
}

/// Polls `check` every 100 ms for at most `limit`.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check()
}

fn leaders(electors: &[(String, LeaderElection)]) -> Vec<String> {
    electors
        .iter()
        .filter(|(_, e)| e.state().borrow().is_leader())
        .map(|(id, _)| id.clone())
        .collect()
}

async fn holder(client: &Client, name: &str) -> anyhow::Result<Option<String>> {
    let lease = Api::<Lease>::namespaced(client.clone(), NS)
        .get(name)
        .await?;
    Ok(lease.spec.and_then(|s| s.holder_identity))
}

async fn transitions(client: &Client, name: &str) -> anyhow::Result<i32> {
    let lease = Api::<Lease>::namespaced(client.clone(), NS)
        .get(name)
        .await?;
    Ok(lease.spec.and_then(|s| s.lease_transitions).unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_a_crashed_leader_is_replaced_after_expiry() -> anyhow::Result<()> {
    let (server, client) = server().await?;
    let lease = Duration::from_secs(3);
    let (renew, retry) = (Duration::from_secs(2), Duration::from_millis(300));
    let mut electors = Vec::new();
    for id in ["a", "b", "c"] {
        let e = LeaderElection::start(client.clone(), config("crash", id, lease, renew, retry))?;
        electors.push((id.to_string(), e));
    }

    let settled = eventually(10 * lease, || {
        leaders(&electors).len() == 1 && electors.iter().all(|(_, e)| e.state().borrow().is_known())
    })
    .await;
    assert!(settled, "no single leader emerged");
    let first = leaders(&electors).remove(0);
    assert_eq!(
        holder(&client, "crash").await?.as_deref(),
        Some(first.as_str())
    );
    for (id, e) in &electors {
        if *id != first {
            assert_eq!(
                *e.state().borrow(),
                LeaderState::Standby {
                    holder: first.clone()
                }
            );
        }
    }
    // Stays stable across several renewals: still exactly that one leader.
    let mut stable = true;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stable &= leaders(&electors) == vec![first.clone()];
    }
    assert!(stable, "leadership flapped while the leader was healthy");
    let before = transitions(&client, "crash").await?;

    // kill -9: the leader stops renewing and never releases.
    let idx = electors
        .iter()
        .position(|(id, _)| *id == first)
        .unwrap_or(0);
    let (_, crashed) = electors.remove(idx);
    crashed.abort();

    let mut never_two = true;
    let taken_over = eventually(10 * lease, || {
        let l = leaders(&electors);
        never_two &= l.len() <= 1;
        l.len() == 1
    })
    .await;
    assert!(taken_over, "no standby took over after the leader crashed");
    assert!(never_two, "two leaders at once");
    let second = leaders(&electors).remove(0);
    assert_ne!(second, first);
    assert_eq!(
        holder(&client, "crash").await?.as_deref(),
        Some(second.as_str())
    );
    assert_eq!(transitions(&client, "crash").await?, before + 1);

    for (_, e) in electors {
        e.release().await?;
    }
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_release_hands_over_long_before_expiry() -> anyhow::Result<()> {
    let (server, client) = server().await?;
    // A long lease: a takeover well inside it can only come from the release.
    let lease = Duration::from_secs(120);
    let (renew, retry) = (Duration::from_secs(60), Duration::from_millis(300));
    let a = LeaderElection::start(client.clone(), config("handover", "a", lease, renew, retry))?;
    assert!(
        eventually(Duration::from_secs(20), || a.state().borrow().is_leader()).await,
        "the only candidate did not become leader"
    );
    let b = LeaderElection::start(client.clone(), config("handover", "b", lease, renew, retry))?;
    assert!(
        eventually(Duration::from_secs(20), || *b.state().borrow()
            == LeaderState::Standby { holder: "a".into() })
        .await,
        "the second candidate did not see the leader"
    );

    let released = a.release().await?;
    assert!(released, "the leader reported nothing to release");
    assert!(
        eventually(Duration::from_secs(30), || b.state().borrow().is_leader()).await,
        "the standby did not take over the released lease"
    );
    assert_eq!(holder(&client, "handover").await?.as_deref(), Some("b"));

    // A standby's release is a no-op on the lease.
    let c = LeaderElection::start(client.clone(), config("handover", "c", lease, renew, retry))?;
    assert!(
        eventually(Duration::from_secs(20), || c.state().borrow().is_known()).await,
        "third candidate never learnt the state"
    );
    assert!(
        !c.release().await?,
        "a standby must not release the leader's lease"
    );
    assert_eq!(holder(&client, "handover").await?.as_deref(), Some("b"));

    b.release().await?;
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn unreachable_api_server_leaves_the_state_unknown() -> anyhow::Result<()> {
    // A port nobody listens on: bind, read the port, drop the listener.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let client = Client::try_from(kube::Config::new(
        format!("http://127.0.0.1:{port}").parse()?,
    ))?;
    let retry = Duration::from_millis(100);
    let e = LeaderElection::start(
        client,
        config(
            "nowhere",
            "a",
            Duration::from_secs(3),
            Duration::from_secs(2),
            retry,
        ),
    )?;
    // Several attempts fail; the state never claims leader or standby.
    let mut known = false;
    for _ in 0..10 {
        tokio::time::sleep(retry).await;
        known |= e.state().borrow().is_known();
    }
    assert!(!known, "state became known without an API server");
    e.abort();
    Ok(())
}

#[test]
fn invalid_durations_are_refused_before_starting() {
    let c = config(
        "x",
        "a",
        Duration::from_secs(5),
        Duration::from_secs(5),
        Duration::from_secs(1),
    );
    assert!(c.validate().is_err());
}
