//! Acceptance (issue 6): two `wasm-reconciler run --leader-elect` processes
//! against one standalone `wasm-reconciler apiserver`. Exactly one reconciles;
//! SIGTERM on the leader releases the Lease so the standby takes over long
//! before the lease would expire and the old leader exits 0; `kill -9` on the
//! new leader lets a third process take over after expiry and converge.
//!
//! "Only the leader writes" is checked twice: by each process's `/metrics`
//! and, independently of the host's own counting, by the API server's request
//! log, where every request of a `run` carries its Lease identity in its
//! `User-Agent`. The release on SIGTERM is seen in the store itself: a watch
//! on the Lease receives the version with no holder.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use crate::request_log::*;
use crate::run_common::*;
use anyhow::{Context, Result, ensure};
use serde_json::Value;
use wr_apiserver::RequestRecord;

const CONTROLLER: &str = r#"{controller="static-site",result="success"}"#;

/// A long lease (30 s) makes the SIGTERM hand-over unambiguous: anything well
/// under it can only come from the release.
const LEASE: &[&str] = &[
    "--leader-elect=true",
    "--lease-duration-seconds=30",
    "--renew-deadline-seconds=20",
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
    let cluster = cluster_with_log(dir.path())?;
    let (kc, api_url) = (cluster.kubeconfig.clone(), &cluster.log);
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

    // The request log agrees: only run-a wrote parents, children and events.
    let log = requests_of(api_url)?;
    let writes = writes_by_process(&log);
    ensure!(
        writes.get("run-a").copied().unwrap_or(0) > 0,
        "the leader made no write: {writes:?}"
    );
    ensure!(
        writes.keys().all(|p| p == "run-a"),
        "a process other than the leader wrote: {writes:?}"
    );
    ensure!(
        log.iter()
            .any(|r| process_of(r) == Some("run-b") && r.resource == "leases"),
        "the standby's lease requests are not in the log under its identity"
    );

    // SIGTERM: the leader finishes, releases the lease and exits 0; the standby
    // takes over well within the 30 s lease. A watch on the Lease records every
    // version the store commits, the released one included.
    let lease_watch = dir.path().join("lease-watch.json");
    let _watch = watch_lease(&kc, &lease_watch)?;
    eventually("the lease watch to deliver the current lease", 30, || {
        std::fs::read_to_string(&lease_watch)
            .ok()
            .filter(|t| t.contains("run-a_"))
    })?;
    a.signal("TERM")?;
    ensure!(a.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
    eventually("run-b to take over after the release", 20, || {
        lease_holder(&kc).filter(|h| h.starts_with("run-b_"))
    })?;
    eventually(
        "the watch to show the released lease, then run-b's",
        20,
        || {
            let versions = lease_versions(&lease_watch);
            let released = versions.iter().position(|l| {
                l.pointer("/spec/holderIdentity")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            })?;
            let a_before = versions[..released]
                .iter()
                .any(|l| holder(l).starts_with("run-a_"));
            let b_after = versions[released..]
                .iter()
                .any(|l| holder(l).starts_with("run-b_"));
            (a_before
                && b_after
                && versions[released].pointer("/spec/leaseDurationSeconds")
                    == Some(&Value::from(1)))
            .then_some(())
        },
    )?;
    let log = requests_of(api_url)?;
    let a_last = log
        .iter()
        .rposition(|r| process_of(r) == Some("run-a"))
        .context("run-a made no request")?;
    ensure!(
        log[a_last].resource == "leases" && log[a_last].verb == "update" && log[a_last].code == 200,
        "run-a's last request must be the release, not {}",
        describe(&log[a_last])
    );
    ensure!(
        acquisition(&log, "run-b").is_some_and(|b| b > a_last),
        "run-b must acquire the lease after run-a released it"
    );
    eventually("run-b to report leadership", 20, || {
        is_leader(&b_url).filter(|l| *l)
    })?;
    set_replicas(&kc, 4)?;
    eventually("run-b to converge the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("4")).then_some(())
    })?;
    // A reconcile is counted when its pass ends, after the Deployment write
    // seen above (and run-b's first pass may be that very one): wait.
    eventually("run-b to count its reconciles", 30, || {
        (reconciles(&b_url) >= 1.0).then_some(())
    })
    .context("the new leader counted no reconcile")?;

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

    // The whole log: every write of a process lies inside its leadership
    // term, the terms follow each other, and each leader wrote.
    let log = requests_of(api_url)?;
    only_leaders_wrote(&log, &["run-a", "run-b", "run-c"])?;
    Ok(())
}

/// The process (`POD_NAME`, the identity's prefix) that made a request.
fn process_of(r: &RequestRecord) -> Option<&str> {
    host_identity(r)?.split('_').next()
}

/// Writes to what a leader alone may write: parents, children, events.
fn is_reconcile_write(r: &RequestRecord) -> bool {
    r.is_write()
        && matches!(
            r.resource.as_str(),
            "staticsites" | "deployments" | "services" | "configmaps" | "events"
        )
}

fn writes_by_process(log: &[RequestRecord]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in log.iter().filter(|r| is_reconcile_write(r)) {
        if let Some(p) = process_of(r) {
            *out.entry(p.to_string()).or_default() += 1;
        }
    }
    out
}

/// Index of `process`'s first successful Lease write: a standby only reads
/// the Lease, so its first successful create/update is its acquisition.
fn acquisition(log: &[RequestRecord], process: &str) -> Option<usize> {
    log.iter().position(|r| {
        process_of(r) == Some(process)
            && r.resource == "leases"
            && matches!(r.verb.as_str(), "create" | "update")
            && matches!(r.code, 200 | 201)
    })
}

/// Every parent/child write of a process comes after its acquisition and
/// before the next leader's; events (written by detached tasks, which may
/// land just after a hand-over) at least after the writer's acquisition.
fn only_leaders_wrote(log: &[RequestRecord], order: &[&str]) -> Result<()> {
    let acq: Vec<usize> = order
        .iter()
        .map(|p| acquisition(log, p).with_context(|| format!("{p} never acquired the lease")))
        .collect::<Result<_>>()?;
    ensure!(
        acq.windows(2).all(|w| w[0] < w[1]),
        "the lease changed hands out of order: {acq:?}"
    );
    for (i, r) in log
        .iter()
        .enumerate()
        .filter(|(_, r)| is_reconcile_write(r))
    {
        let p = process_of(r).unwrap_or("");
        if p.is_empty() {
            continue; // kubectl
        }
        let term = order
            .iter()
            .position(|o| *o == p)
            .with_context(|| format!("unknown process wrote: {}", describe(r)))?;
        ensure!(
            i > acq[term],
            "{p} wrote before it led: {} (acquired at #{}, write #{i})",
            describe(r),
            acq[term]
        );
        if r.resource != "events"
            && let Some(next) = acq.get(term + 1)
        {
            ensure!(
                i < *next,
                "{p} wrote after the next leader took over: {} (#{i} > #{next})",
                describe(r)
            );
        }
    }
    let writes = writes_by_process(log);
    for p in order {
        ensure!(
            writes.get(*p).copied().unwrap_or(0) > 0,
            "{p} led but never wrote: {writes:?}"
        );
    }
    Ok(())
}

/// `kubectl get lease -w -o json` into `out`, killed on drop.
fn watch_lease(kc: &std::path::Path, out: &std::path::Path) -> Result<Proc> {
    let file = std::fs::File::create(out)?;
    let child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args([
            "-n",
            &test_ns(),
            "get",
            "lease",
            "wasm-reconciler",
            "--watch",
            "-o",
            "json",
        ])
        .stdout(Stdio::from(file))
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting kubectl get --watch")?;
    Ok(Proc {
        child,
        name: "lease watch".into(),
    })
}

/// The Lease versions a watch wrote so far (a stream of JSON objects).
fn lease_versions(file: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map_while(|v| v.ok())
        .collect()
}

fn holder(lease: &Value) -> &str {
    lease
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The log check itself, on made-up logs: it must catch a standby's write
/// and a write after the next leader took over.
#[test]
fn the_log_check_catches_a_writing_standby_and_a_late_write() {
    let rec = |who: &str, verb: &str, resource: &str, code: u16| RequestRecord {
        verb: verb.into(),
        group: String::new(),
        version: "v1".into(),
        resource: resource.into(),
        subresource: None,
        namespace: Some("default".into()),
        name: Some("x".into()),
        code,
        field_manager: None,
        patch_type: None,
        dry_run: false,
        user_agent: Some(format!("wasm-reconciler/0.1.0 (run; {who}_0123)")),
        fault: None,
    };
    let good = vec![
        rec("a", "create", "leases", 201),
        rec("b", "get", "leases", 200),
        rec("a", "patch", "configmaps", 200),
        rec("a", "update", "leases", 200),
        rec("b", "update", "leases", 200),
        rec("b", "patch", "configmaps", 200),
    ];
    only_leaders_wrote(&good, &["a", "b"]).unwrap();
    let mut standby_wrote = good.clone();
    standby_wrote.insert(2, rec("b", "patch", "services", 200));
    assert!(only_leaders_wrote(&standby_wrote, &["a", "b"]).is_err());
    let mut late = good.clone();
    late.push(rec("a", "delete", "configmaps", 200));
    assert!(only_leaders_wrote(&late, &["a", "b"]).is_err());
    let mut conflict_is_no_acquisition = good;
    conflict_is_no_acquisition[4].code = 409;
    assert!(only_leaders_wrote(&conflict_is_no_acquisition, &["a", "b"]).is_err());
}
