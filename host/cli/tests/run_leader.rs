//! Acceptance (issue 6): two `wasm-reconciler run --leader-elect` processes
//! against one standalone `wasm-reconciler apiserver`. Exactly one reconciles;
//! SIGTERM on the leader releases the Lease so the standby takes over long
//! before the lease would expire and the old leader exits 0; `kill -9` on the
//! new leader lets a third process take over after expiry and converge.

mod run_common;

use anyhow::{Result, ensure};
use run_common::*;

const CONTROLLER: &str = r#"{controller="static-site",result="success"}"#;

/// A long lease (60 s) makes the SIGTERM hand-over unambiguous: anything well
/// under it can only come from the release.
const LEASE: &[&str] = &[
    "--leader-elect=true",
    "--lease-duration-seconds=60",
    "--renew-deadline-seconds=40",
    "--retry-period-seconds=1",
    "--shutdown-timeout-seconds=10",
];

fn reconciles(url: &str) -> f64 {
    sample(
        url,
        &format!("wasm_reconciler_reconciles_total{CONTROLLER}"),
    )
    .unwrap_or(0.0)
}

fn is_leader(url: &str) -> Option<bool> {
    sample(url, "wasm_reconciler_leader").map(|v| v == 1.0)
}

#[test]
fn one_leader_reconciles_sigterm_hands_over_at_once_and_kill_9_fails_over() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (_api, kc) = apiserver(dir.path())?;
    install_example(&kc, dir.path(), true)?;

    let (mut a, a_url) = run(&kc, "run-a", LEASE)?;
    eventually("run-a to lead", 60, || {
        lease_holder(&kc).filter(|h| h.starts_with("run-a_"))
    })?;
    let (mut b, b_url) = run(&kc, "run-b", LEASE)?;

    // The leader converges the example; the standby is ready but idle.
    eventually("the example parent Ready with its Deployment", 120, || {
        (web_ready(&kc).as_deref() == Some("True") && web_replicas(&kc).as_deref() == Some("2"))
            .then_some(())
    })?;
    eventually("run-b ready as a standby", 60, || {
        get(&b_url, "/readyz").ok().filter(|(c, _)| *c == 200)
    })?;
    set_replicas(&kc, 3)?;
    eventually("the Deployment to follow the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("3")).then_some(())
    })?;
    ensure!(reconciles(&a_url) >= 1.0, "the leader counted no reconcile");
    ensure!(is_leader(&a_url) == Some(true));
    ensure!(is_leader(&b_url) == Some(false), "run-b must be a standby");
    ensure!(
        reconciles(&b_url) == 0.0,
        "the standby reconciled: {}",
        reconciles(&b_url)
    );

    // SIGTERM: the leader finishes, releases the lease and exits 0; the standby
    // takes over well within the 60 s lease.
    a.signal("TERM")?;
    ensure!(a.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
    eventually("run-b to take over after the release", 20, || {
        lease_holder(&kc).filter(|h| h.starts_with("run-b_"))
    })?;
    eventually("run-b to report leadership", 20, || {
        is_leader(&b_url).filter(|l| *l)
    })?;
    set_replicas(&kc, 4)?;
    eventually("run-b to converge the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("4")).then_some(())
    })?;
    ensure!(
        reconciles(&b_url) >= 1.0,
        "the new leader counted no reconcile"
    );

    // kill -9: nothing is released; run-c takes over once the lease expires.
    let (_c, c_url) = run(&kc, "run-c", LEASE)?;
    eventually("run-c ready as a standby", 60, || {
        get(&c_url, "/readyz").ok().filter(|(c, _)| *c == 200)
    })?;
    ensure!(reconciles(&c_url) == 0.0, "the standby run-c reconciled");
    b.signal("KILL")?;
    let _ = b.wait_exit(10)?;
    eventually("run-c to take over the expired lease", 120, || {
        lease_holder(&kc).filter(|h| h.starts_with("run-c_"))
    })?;
    set_replicas(&kc, 1)?;
    eventually("run-c to converge the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("1")).then_some(())
    })?;
    eventually("run-c to count its reconciles", 30, || {
        (reconciles(&c_url) >= 1.0).then_some(())
    })?;
    Ok(())
}
