//! Acceptance (issue 19): three `wasm-reconciler run --shard-group` processes
//! share a few hundred parents against one standalone `wasm-reconciler
//! apiserver`, through joins, a graceful leave (SIGTERM) and a crash
//! (SIGKILL), with the parents edited after each.
//!
//! The referee is the API server's request log, where every request of a
//! `run` carries its identity in its `User-Agent`: for every parent (its
//! status and its children) the writers follow one another, and a writer
//! change is always preceded by a new shard map and by the previous writer
//! either acknowledging (a write to its member Lease after its last write to
//! that parent) or being dead (no request of it after the new writer's
//! first). Every parent converges after every step, every live replica owns a
//! share (`wasm_reconciler_shard_owned_parents` sums to the parent count) and
//! the map Lease says what changed.

mod request_log;
mod run_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, ensure};
use request_log::*;
use run_common::*;
use serde_json::Value;
use wr_apiserver::RequestRecord;

const GROUP: &str = "wr";
const PARENTS: usize = 200;
const SHARD: &[&str] = &[
    "--shard-group",
    GROUP,
    "--lease-duration-seconds=6",
    "--renew-deadline-seconds=4",
    "--retry-period-seconds=1",
    "--shutdown-timeout-seconds=20",
    "--resync-seconds=3600",
];

fn parent_name(i: usize) -> String {
    format!("s{i:03}")
}

/// Applies all parents with `replicas` (server-side apply: the same manifest
/// creates and later edits them).
fn apply_parents(kc: &Path, dir: &Path, replicas: u32) -> Result<()> {
    let mut yaml = String::new();
    for i in 0..PARENTS {
        yaml.push_str(&format!(
            "---\napiVersion: examples.wasm-reconciler.dev/v1alpha1\nkind: StaticSite\nmetadata: {{name: {}, namespace: {}}}\nspec:\n  image: nginx:1.27\n  replicas: {replicas}\n  port: 8080\n  content:\n    index.html: \"<h1>{i}</h1>\"\n",
            parent_name(i),
            test_ns()
        ));
    }
    let f = dir.join("parents.yaml");
    std::fs::write(&f, yaml)?;
    kubectl(
        kc,
        &["apply", "--server-side", "-f", f.to_str().unwrap_or("")],
    )?;
    Ok(())
}

/// Parents whose Deployment has `replicas` and whose Ready condition is True.
fn converged(kc: &Path, replicas: u32) -> usize {
    let list = |what: &str| -> Vec<Value> {
        kubectl(kc, &["-n", &test_ns(), "get", what, "-o", "json"])
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default()
    };
    let deployed: BTreeSet<String> = list("deployments")
        .iter()
        .filter(|d| d.pointer("/spec/replicas") == Some(&Value::from(replicas)))
        .filter_map(|d| Some(d.pointer("/metadata/name")?.as_str()?.to_string()))
        .collect();
    list(SITE_RESOURCE)
        .iter()
        .filter(|p| {
            let name = p.pointer("/metadata/name").and_then(Value::as_str);
            let ready = p
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            name.is_some_and(|n| n.starts_with('s') && deployed.contains(n)) && ready
        })
        .count()
}

fn converge(kc: &Path, replicas: u32, what: &str) -> Result<()> {
    eventually(what, 240, || {
        (converged(kc, replicas) == PARENTS).then_some(())
    })
    .with_context(|| format!("{} of {PARENTS} converged", converged(kc, replicas)))
}

fn owned(url: &str) -> f64 {
    sample(url, "wasm_reconciler_shard_owned_parents").unwrap_or(-1.0)
}

/// Waits until the live replicas' owned counts add up to every parent (plus
/// the example's `web`) with each owning a share.
fn shares(urls: &[&str]) -> Result<Vec<f64>> {
    eventually("the live replicas to share every parent", 120, || {
        let o: Vec<f64> = urls.iter().map(|u| owned(u)).collect();
        (o.iter().sum::<f64>() == (PARENTS + 1) as f64 && o.iter().all(|n| *n > 0.0)).then_some(o)
    })
}

#[test]
fn replicas_share_parents_and_never_write_one_at_the_same_time() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = cluster_with_log(dir.path())?;
    let kc = cluster.kubeconfig.clone();
    install_example(&kc, dir.path(), true)?;
    apply_parents(&kc, dir.path(), 1)?;

    let (mut a, a_url) = run(&kc, "run-a", SHARD)?;
    let (mut b, b_url) = run(&kc, "run-b", SHARD)?;
    converge(&kc, 1, "every parent converged by two replicas")?;
    shares(&[&a_url, &b_url])?;

    // Join: run-c takes its share; an edit lands on all three.
    let (_c, c_url) = run(&kc, "run-c", SHARD)?;
    shares(&[&a_url, &b_url, &c_url])?;
    apply_parents(&kc, dir.path(), 2)?;
    converge(&kc, 2, "the edit converged by three replicas")?;

    // Graceful leave: run-a finishes, leaves the map, exits 0.
    a.signal("TERM")?;
    ensure!(a.wait_exit(40)? == Some(0), "SIGTERM must exit 0");
    apply_parents(&kc, dir.path(), 3)?;
    converge(&kc, 3, "the edit converged after run-a left")?;
    shares(&[&b_url, &c_url])?;

    // Crash: run-b's parents wait for its member Lease to expire.
    apply_parents(&kc, dir.path(), 4)?;
    b.signal("KILL")?;
    let _ = b.wait_exit(10)?;
    converge(&kc, 4, "the edit converged after run-b crashed")?;
    let (_d, d_url) = run(&kc, "run-d", SHARD)?;
    shares(&[&c_url, &d_url])?;
    apply_parents(&kc, dir.path(), 5)?;
    converge(&kc, 5, "the edit converged after run-d joined")?;

    let map = kubectl(
        &kc,
        &["-n", &test_ns(), "get", "lease", &format!("{GROUP}-shards"), "-o", "yaml"],
    )?;
    ensure!(
        map.contains("wasm-reconciler.dev/shard-last-change") && map.contains("joined ["),
        "the map Lease does not say what changed:\n{map}"
    );

    let log = requests_of(&cluster.log)?;
    let stats = handovers_are_clean(&log, GROUP)?;
    ensure!(
        ["run-a", "run-b", "run-c", "run-d"]
            .iter()
            .all(|p| stats.writes.get(*p).copied().unwrap_or(0) > 0),
        "every replica must have written parents: {:?}",
        stats.writes
    );
    ensure!(
        stats.switches > 0,
        "no parent changed writer: the test proved nothing"
    );
    eprintln!(
        "shard handovers: {} parents changed writer {} times over {} maps; writes {:?}",
        stats.parents_moved, stats.switches, stats.maps, stats.writes
    );
    Ok(())
}

/// The process (`POD_NAME`, the identity's prefix) that made a request.
fn process_of(r: &RequestRecord) -> Option<&str> {
    host_identity(r)?.split('_').next()
}

/// The parent a write belongs to: the parent itself, or a child named after
/// it (`NAME`, `NAME-content`). Events are left out: they are written by
/// detached tasks after the reconcile.
fn parent_of(r: &RequestRecord) -> Option<&str> {
    if !r.is_write()
        || !matches!(
            r.resource.as_str(),
            "staticsites" | "deployments" | "services" | "configmaps"
        )
    {
        return None;
    }
    r.name.as_deref()?.split('-').next()
}

#[derive(Debug, Default)]
struct Handovers {
    writes: BTreeMap<String, usize>,
    switches: usize,
    parents_moved: usize,
    maps: usize,
}

/// The invariant "never two owners", on the request log: per parent, when
/// the writer changes from A (last write at i) to B (first write at j),
/// - a new shard map was written since the parent's previous writer change,
///   and
/// - A acknowledged after i (a write to its member Lease in (i, j)) or was
///   dead by j (no request of A after j).
fn handovers_are_clean(log: &[RequestRecord], group: &str) -> Result<Handovers> {
    let map_name = format!("{group}-shards");
    let member_prefix = format!("{group}-member-");
    let ok = |r: &RequestRecord| (200..300).contains(&r.code);
    let maps: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.resource == "leases" && r.is_write() && ok(r) && r.name.as_deref() == Some(&map_name)
        })
        .map(|(i, _)| i)
        .collect();
    let mut member_writes: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut last_request: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_parent: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    let mut out = Handovers {
        maps: maps.len(),
        ..Handovers::default()
    };
    for (i, r) in log.iter().enumerate() {
        let Some(p) = process_of(r) else { continue };
        last_request.insert(p, i);
        if r.resource == "leases"
            && r.is_write()
            && ok(r)
            && r.name.as_deref().is_some_and(|n| n.starts_with(&member_prefix))
        {
            member_writes.entry(p).or_default().push(i);
        }
        if let Some(parent) = parent_of(r) {
            per_parent.entry(parent).or_default().push((i, p));
            *out.writes.entry(p.to_string()).or_default() += 1;
        }
    }
    for (parent, writes) in &per_parent {
        let mut since = 0;
        let mut moved = false;
        for w in writes.windows(2) {
            let ((i, a), (j, b)) = (w[0], w[1]);
            if a == b {
                continue;
            }
            moved = true;
            out.switches += 1;
            ensure!(
                maps.iter().any(|m| (since..j).contains(m)),
                "{parent}: {b} took over from {a} at #{j} with no new shard map since #{since}: {}",
                describe(&log[j])
            );
            let acked = member_writes
                .get(a)
                .is_some_and(|ws| ws.iter().any(|x| (i + 1..j).contains(x)));
            let dead = last_request.get(a).is_some_and(|l| *l < j);
            ensure!(
                acked || dead,
                "{parent}: {b} wrote at #{j} while {a} (last write #{i}) neither acknowledged nor died: {}",
                describe(&log[j])
            );
            since = j;
        }
        out.parents_moved += usize::from(moved);
    }
    Ok(out)
}

/// The log check itself, on made-up logs: it must catch a takeover without
/// a new map, and one where the previous writer neither acknowledged nor
/// died.
#[test]
fn the_handover_check_catches_two_writers() {
    let rec = |who: &str, verb: &str, resource: &str, name: &str| RequestRecord {
        verb: verb.into(),
        group: String::new(),
        version: "v1".into(),
        resource: resource.into(),
        subresource: None,
        namespace: Some("default".into()),
        name: Some(name.into()),
        code: 200,
        field_manager: None,
        patch_type: None,
        dry_run: false,
        user_agent: Some(format!("wasm-reconciler/0.1.0 (run; {who}_0123)")),
        fault: None,
    };
    let good = vec![
        rec("a", "patch", "configmaps", "s001-content"),
        rec("a", "update", "leases", "g-shards"),
        rec("a", "patch", "staticsites", "s001"),
        rec("a", "update", "leases", "g-member-a-1"),
        rec("b", "patch", "deployments", "s001"),
        rec("b", "patch", "staticsites", "s001"),
    ];
    let stats = handovers_are_clean(&good, "g").unwrap();
    assert_eq!((stats.switches, stats.parents_moved), (1, 1));
    let mut no_ack = good.clone();
    no_ack.remove(3);
    no_ack.push(rec("a", "get", "leases", "g-shards"));
    assert!(handovers_are_clean(&no_ack, "g").is_err());
    let mut no_map = good.clone();
    no_map.remove(1);
    assert!(handovers_are_clean(&no_map, "g").is_err());
    let mut back_and_forth = good;
    back_and_forth.push(rec("a", "update", "leases", "g-member-a-1"));
    back_and_forth.push(rec("b", "update", "leases", "g-member-b-1"));
    back_and_forth.push(rec("a", "patch", "staticsites", "s001"));
    assert!(handovers_are_clean(&back_and_forth, "g").is_err());
}
