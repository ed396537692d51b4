//! Chaos and crash-restart suite (issue 7). See docs/chaos.md.
//!
//! Runs the real `wasm-reconciler` binary as processes (one API server with
//! fault admin, one or more `run` hosts with leader election), drives a seeded
//! workload under API faults, SIGKILLs and a plugin version swap, then stops
//! the chaos, waits for convergence and checks invariants on the objects the
//! API server stores. Exit 0: every invariant held; 1: a violation (the seed
//! and the replay command are printed); 2: the harness itself failed.

mod args;
mod cluster;
mod desired;
mod faultplan;
mod invariants;
mod procs;
mod promtext;
mod report;
mod setup;
mod supervisor;
mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::Value;
use tokio::sync::{Mutex, Semaphore, watch};

use args::{Args, Settings};
use invariants::Check;
use workload::{Op, Outcome, Outcomes, Planner};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CHAOS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("chaos=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if let Some(path) = &args.judge_log {
        return match judge_log(path) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("chaos: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chaos: starting tokio: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("chaos: the harness failed: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The component of the adversarial plugin: `--plugin`, else built by the test helpers.
async fn plugin_path(args: &Args) -> Result<PathBuf> {
    if let Some(p) = &args.plugin {
        return Ok(p.clone());
    }
    tokio::task::spawn_blocking(|| wr_tests::plugins::plugin_path("adversarial"))
        .await
        .context("building the adversarial plugin (plugins/build.sh)")
}

fn work_dir(args: &Args, seed: u64) -> Result<(PathBuf, bool)> {
    let (dir, given) = match &args.work_dir {
        Some(d) => (d.clone(), true),
        None => (
            std::env::temp_dir().join(format!("wr-chaos-{seed}-{}", std::process::id())),
            false,
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok((dir, given))
}

async fn run(args: Args) -> Result<bool> {
    let s = args.settings()?;
    let bin = args.binary()?;
    let replay = args::replay_command(s.seed);
    let (dir, keep_dir) = work_dir(&args, s.seed)?;
    eprintln!(
        "chaos: seed {} · work dir {} · binary {}",
        s.seed,
        dir.display(),
        bin.display()
    );
    let v1_bytes =
        std::fs::read(plugin_path(&args).await?).context("reading the adversarial plugin")?;
    let v2_bytes = setup::version_two(&v1_bytes)?;
    let v1 = dir.join("plugin-v1.wasm");
    let v2 = dir.join("plugin-v2.wasm");
    std::fs::write(&v1, &v1_bytes)?;
    std::fs::write(&v2, &v2_bytes)?;

    let wall = Instant::now();
    let cluster = cluster::Cluster::start(&args, &bin, &dir, s.seed).await?;
    let kubeconfig = cluster.kubeconfig().to_path_buf();
    let client = cluster.client().await?;
    if cluster.is_real() {
        eprintln!(
            "chaos: real cluster: host SIGKILLs and leader kills only (API faults need the embedded server)"
        );
        cluster::check_clean(&client).await?;
    }
    setup::install_kinds(&client).await?;
    if !setup::publish(&bin, &kubeconfig, &v1, 5).await? {
        anyhow::bail!("publishing plugin version 1 failed (no faults yet)");
    }
    let hostile = (s.hostile_parents > 0).then_some(v1.as_path());
    setup::install_controllers(&client, s.fail_percent, hostile).await?;
    let hostile_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        setup::HOSTILE_NS,
        &setup::parent_ar("HostileParent"),
    );
    for i in 0..s.hostile_parents {
        hostile_api
            .create(
                &PostParams::default(),
                &workload::hostile_object(&workload::hostile_name(i)),
            )
            .await
            .context("creating a hostile parent")?;
    }

    let state = Arc::new(Mutex::new(supervisor::State::default()));
    let (kills_tx, kills_rx) = watch::channel(false);
    let (stop_tx, stop_rx) = watch::channel(false);
    let sup = tokio::spawn(supervisor::run(
        supervisor::Config {
            bin: bin.clone(),
            kubeconfig: kubeconfig.clone(),
            dir: dir.clone(),
            hosts: s.hosts,
            kill_every_secs: s.kill_every_secs,
            seed: s.seed,
            t0: wall,
            shard: s.shard,
        },
        client.clone(),
        state.clone(),
        kills_rx,
        stop_rx,
    ));
    wait_for_leader(&state, 120).await?;
    eprintln!(
        "chaos: hosts up after {:.1}s; workload and faults start",
        wall.elapsed().as_secs_f64()
    );

    // Chaos on.
    let chaos_start = Instant::now();
    if s.fault_rate > 0.0 {
        faultplan::set(&client, &faultplan::spec(s.fault_rate, Some(s.seed), 0)).await?;
    }
    kills_tx.send_replace(s.kill_every_secs > 0.0);
    let ops = run_workload(&client, &s, &bin, &kubeconfig, &v2).await;
    let (ops, swap) = ops?;

    // Chaos off: faults, kills; the hosts keep running (restarted if killed).
    kills_tx.send_replace(false);
    let faults = if cluster.is_real() {
        BTreeMap::new()
    } else {
        let f = faultplan::injected(&client)
            .await
            .context("reading the injected faults")?;
        faultplan::clear(&client).await.context("clearing faults")?;
        f
    };
    let chaos_secs = chaos_start.elapsed().as_secs_f64();
    let cleared = Instant::now();
    eprintln!(
        "chaos: workload done after {chaos_secs:.1}s; faults cleared; waiting for convergence"
    );

    let version = if swap.published { "v2" } else { "v1" };
    let (checks, converged_after) =
        converge(&client, version, s.converge_timeout_secs, cleared).await?;

    // No hot loop: the healthy controller must go quiet once converged. A
    // host restarted after the last kill, or a dead member's Lease expiring,
    // moves parents, and whoever gains them reconciles each once: that is a
    // handover, not a hot loop. So the window starts only once every slot
    // runs and the hosts agree (one leader, or one settled shard map with
    // every host in it), and a membership change inside it is named.
    let membership = wait_for_stable_membership(&state, s.hosts, s.shard, 90).await;
    let quiet_secs = 10.0;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (before, seen_before) = (
        healthy_reconciles(&state).await,
        membership_seen(&state, s.shard).await,
    );
    tokio::time::sleep(Duration::from_secs_f64(quiet_secs)).await;
    let (after, seen_after) = (
        healthy_reconciles(&state).await,
        membership_seen(&state, s.shard).await,
    );
    let membership_moved = (seen_before != seen_after)
        .then(|| format!("membership changed in the window: {seen_before} -> {seen_after}"));
    let mut stable = if converged_after.is_some() {
        check_once(&client, version).await?
    } else {
        checks.clone()
    };
    if s.shard && !cluster.is_real() {
        let log = faultplan::requests(&client)
            .await
            .context("reading the request log")?;
        let check = invariants::never_two_owners(&log, procs::SHARD_GROUP);
        if !check.ok() {
            // The log lives in the API server's memory only; keep it for
            // the diagnosis (one JSON record per line, in completion order).
            keep_request_log(&dir.join("requests.jsonl"), &log);
        }
        stable.push(check);
    }

    let st = state.lock().await;
    let rep = report::build(report::Inputs {
        settings: &s,
        replay: &replay,
        wall_secs: wall.elapsed().as_secs_f64(),
        chaos_secs,
        ops: &ops,
        faults: &faults,
        swap: &swap,
        state: &st,
        checks: &stable,
        converged_after,
        quiet: (quiet_secs, after - before),
        membership_moved,
        membership,
    });
    drop(st);
    // A real cluster may be shared: the WasmControllers go while a host runs
    // (it releases the parents), the rest once the hosts are stopped.
    let cleanup = if cluster.is_real() {
        cluster::delete_controllers(&client, 120).await
    } else {
        Ok(())
    };
    let _ = stop_tx.send(true);
    let _ = sup.await;
    let cleanup = match cleanup {
        Ok(()) if cluster.is_real() => cluster::delete_the_rest(&client, 120).await,
        other => other,
    };
    if let Err(e) = &cleanup {
        eprintln!("chaos: cleaning up the real cluster failed: {e:#}");
    }
    cluster.stop().await;

    report::print(&rep);
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&rep.json)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("chaos: report written to {}", path.display());
    }
    if rep.ok {
        if !keep_dir {
            let _ = std::fs::remove_dir_all(&dir);
        }
    } else {
        eprintln!(
            "chaos: FAILED — seed {}; logs kept in {}",
            s.seed,
            dir.display()
        );
        eprintln!("chaos: replay with: {replay}");
    }
    Ok(rep.ok)
}

async fn wait_for_leader(state: &Mutex<supervisor::State>, secs: u64) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        {
            let s = state.lock().await;
            if s.incarnations.iter().any(|i| i.led) {
                return Ok(());
            }
            if Instant::now() > until {
                anyhow::bail!("no host became leader within {secs}s: {:?}", s.errors);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the live hosts say about the group, one line: each live host's
/// shard epoch and whether its map settled (sharded), or who leads.
async fn membership_seen(state: &Mutex<supervisor::State>, shard: bool) -> String {
    let s = state.lock().await;
    let mut live: Vec<String> = s
        .incarnations
        .iter()
        .filter(|i| i.end.is_none())
        .map(|i| {
            let m = &i.metrics;
            if shard {
                format!(
                    "{}:epoch={},members={},member={},settled={}",
                    i.name,
                    promtext::sum(m, "wasm_reconciler_shard_epoch", &[]),
                    promtext::sum(m, "wasm_reconciler_shard_members", &[]),
                    promtext::sum(m, "wasm_reconciler_shard_member", &[]),
                    promtext::sum(m, "wasm_reconciler_shard_settled", &[]),
                )
            } else {
                format!(
                    "{}:leader={}",
                    i.name,
                    promtext::sum(m, "wasm_reconciler_leader", &[])
                )
            }
        })
        .collect();
    live.sort();
    live.join(" ")
}

/// Waits until every host slot runs and the group agrees: one leader, or
/// (sharded) one settled map of every host, read by all. Returns whether it
/// did within `secs` and what the hosts said last.
async fn wait_for_stable_membership(
    state: &Mutex<supervisor::State>,
    hosts: usize,
    shard: bool,
    secs: u64,
) -> (bool, String) {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let agreed = {
            let s = state.lock().await;
            let live: Vec<&supervisor::Incarnation> = s
                .incarnations
                .iter()
                .filter(|i| i.end.is_none() && !i.metrics.is_empty())
                .collect();
            let value =
                |i: &supervisor::Incarnation, name: &str| promtext::sum(&i.metrics, name, &[]);
            let epochs: std::collections::BTreeSet<u64> = live
                .iter()
                .map(|i| value(i, "wasm_reconciler_shard_epoch") as u64)
                .collect();
            live.len() == hosts
                && if shard {
                    epochs.len() == 1
                        && live.iter().all(|i| {
                            // The map's members are exactly the live hosts:
                            // as many, and each one in it. A host that has
                            // read a settled map but is not yet in it (a
                            // joiner), beside a dead member whose Lease has
                            // not expired, also counts `hosts` members; its
                            // join then moves parents inside the window.
                            value(i, "wasm_reconciler_shard_settled") >= 1.0
                                && value(i, "wasm_reconciler_shard_member") >= 1.0
                                && value(i, "wasm_reconciler_shard_members") as usize == hosts
                        })
                } else {
                    live.iter()
                        .filter(|i| value(i, "wasm_reconciler_leader") >= 1.0)
                        .count()
                        == 1
                }
        };
        let seen = membership_seen(state, shard).await;
        if agreed {
            return (true, seen);
        }
        if Instant::now() > until {
            return (false, seen);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The plugin swap's outcome.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Swap {
    pub enabled: bool,
    pub published: bool,
    pub at_secs: Option<f64>,
}

/// Initial creates, then the steady mix until the duration is up; the plugin
/// swap half-way; forced 410s every ~10 s. Returns outcomes by operation kind.
async fn run_workload(
    client: &Client,
    s: &Settings,
    bin: &Path,
    kubeconfig: &Path,
    v2: &Path,
) -> Result<(BTreeMap<String, Outcomes>, Swap)> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(s.duration_secs);
    let outcomes: Arc<std::sync::Mutex<BTreeMap<String, Outcomes>>> = Arc::default();
    let sem = Arc::new(Semaphore::new(16));
    let mut planner = Planner::new(s.seed, s.parents, s.hostile_parents);
    let spawn = |op: Op, permit: tokio::sync::OwnedSemaphorePermit| {
        let client = client.clone();
        let outcomes = outcomes.clone();
        tokio::spawn(async move {
            let o = workload::execute(&client, &op).await;
            let mut m = outcomes.lock().unwrap_or_else(|p| p.into_inner());
            let e = m.entry(op.kind().to_string()).or_default();
            match o {
                Outcome::Ok => e.ok += 1,
                Outcome::NotFound => e.not_found += 1,
                Outcome::Failed => e.failed += 1,
            }
            drop(permit);
        });
    };
    for op in planner.initial() {
        let permit = sem.clone().acquire_owned().await?;
        spawn(op, permit);
    }
    eprintln!(
        "chaos: {} parents created (or attempted) in {:.1}s",
        s.parents,
        start.elapsed().as_secs_f64()
    );
    let swap_at = start + Duration::from_secs_f64(s.duration_secs / 2.0);
    let mut swap = Swap {
        enabled: s.swap,
        ..Default::default()
    };
    let mut swap_task = None;
    let interval = Duration::from_secs_f64(1.0 / s.ops_per_sec.max(0.01));
    let mut next_gone = Instant::now() + Duration::from_secs(10);
    let mut tick = tokio::time::interval(interval);
    while Instant::now() < deadline {
        tick.tick().await;
        if s.swap && swap_task.is_none() && Instant::now() >= swap_at {
            swap.at_secs = Some(start.elapsed().as_secs_f64());
            let (bin, kc, v2) = (
                bin.to_path_buf(),
                kubeconfig.to_path_buf(),
                v2.to_path_buf(),
            );
            swap_task = Some(tokio::spawn(async move {
                setup::publish(&bin, &kc, &v2, 20).await
            }));
        }
        if s.fault_rate > 0.0 && Instant::now() >= next_gone {
            next_gone = Instant::now() + Duration::from_secs(10);
            if let Err(e) = faultplan::set(client, &faultplan::spec(s.fault_rate, None, 2)).await {
                tracing::warn!(error = %e, "forcing 410 Gone failed");
            }
        }
        let op = planner.next_op();
        let permit = sem.clone().acquire_owned().await?;
        spawn(op, permit);
    }
    // Wait for operations in flight.
    let _all = sem.acquire_many(16).await?;
    if let Some(t) = swap_task {
        swap.published = t.await.context("the swap task panicked")??;
    }
    let out = outcomes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok((out, swap))
}

async fn list(api: &Api<DynamicObject>) -> Result<Vec<Value>> {
    let items = api.list(&ListParams::default()).await?.items;
    items
        .into_iter()
        .map(|o| serde_json::to_value(o).map_err(Into::into))
        .collect()
}

/// One invariant pass over the API server's store.
async fn check_once(client: &Client, version: &str) -> Result<Vec<Check>> {
    let parents: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        setup::NS,
        &setup::parent_ar(setup::PARENT_KIND),
    );
    let cms: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), setup::NS, &setup::configmap_ar());
    let all_cms: Api<DynamicObject> = Api::all_with(client.clone(), &setup::configmap_ar());
    let finalizer = format!("{}/{}", wr_engine::crd::GROUP, setup::HEALTHY);
    Ok(invariants::check(
        &list(&parents).await?,
        &list(&cms).await?,
        &list(&all_cms).await?,
        &invariants::Expect {
            version,
            finalizer: &finalizer,
            parent_kind: setup::PARENT_KIND,
        },
    ))
}

/// Polls the invariants until all hold or `timeout` passes; returns the last
/// checks and, when they held, the seconds since `since`.
async fn converge(
    client: &Client,
    version: &str,
    timeout: u64,
    since: Instant,
) -> Result<(Vec<Check>, Option<f64>)> {
    let until = since + Duration::from_secs(timeout);
    let mut last_print = Instant::now();
    loop {
        let checks = match check_once(client, version).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "listing for the invariant check failed");
                Vec::new()
            }
        };
        if !checks.is_empty() && checks.iter().all(Check::ok) {
            return Ok((checks, Some(since.elapsed().as_secs_f64())));
        }
        if Instant::now() > until {
            return Ok((checks, None));
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            last_print = Instant::now();
            let open: Vec<String> = checks
                .iter()
                .filter(|c| !c.ok())
                .map(|c| format!("{}={}", c.name, c.violations))
                .collect();
            eprintln!(
                "chaos: {:.0}s after the faults: not converged yet ({})",
                since.elapsed().as_secs_f64(),
                open.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn healthy_reconciles(state: &Mutex<supervisor::State>) -> f64 {
    let s = state.lock().await;
    promtext::sum(
        &s.all_samples(),
        "wasm_reconciler_reconciles_total",
        &[("controller", setup::HEALTHY)],
    )
}

/// Writes the request log as JSON lines to `path` (best effort: a failure
/// to write it is reported, the run's verdict does not depend on it).
/// `--judge-log`: the "never two owners" check on a kept request log.
fn judge_log(path: &std::path::Path) -> Result<bool> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the request log {}", path.display()))?;
    let log = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str::<wr_apiserver::RequestRecord>(l)
                .with_context(|| format!("{}: line {}", path.display(), n + 1))
        })
        .collect::<Result<Vec<_>>>()?;
    let check = invariants::never_two_owners(&log, procs::SHARD_GROUP);
    println!(
        "{}: {} ({} writer changes checked, {} violations)",
        check.name,
        if check.ok() { "PASS" } else { "FAIL" },
        check.checked,
        check.violations
    );
    for e in &check.examples {
        println!("  {e}");
    }
    Ok(check.ok())
}

fn keep_request_log(path: &std::path::Path, log: &[wr_apiserver::RequestRecord]) {
    let text: String = log
        .iter()
        .filter_map(|r| serde_json::to_string(r).ok())
        .map(|l| l + "\n")
        .collect();
    match std::fs::write(path, text) {
        Ok(()) => eprintln!("chaos: request log kept in {}", path.display()),
        Err(e) => eprintln!(
            "chaos: cannot keep the request log in {}: {e}",
            path.display()
        ),
    }
}
