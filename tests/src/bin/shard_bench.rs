//! Shard bench (issue 19 figures): `wasm-reconciler run --shard-group` with
//! 1, 2, 4 … replicas against one `wasm-reconciler apiserver`, N StaticSite
//! parents (the static-site component), every API request delayed by
//! `--latency-ms` (the API server's `latency` fault rule) so that the host's
//! waiting on the API, which sharding divides, is visible next to its CPU.
//!
//! Per configuration, on a fresh API server: the parents and the
//! WasmController exist first; then the replicas start and the clock runs
//! until every parent is Ready for its generation. Reported: converge time,
//! CPU seconds and RSS (current and peak) of each replica and of the API
//! server. `0` in `--replicas` is one *unsharded* `run` (the baseline for
//! memory). With `--rebalance`, the first sharded configuration continues
//! after convergence: one replica joins, then one of the first is SIGKILLed;
//! each time the bench reports how long until the live replicas' owned counts
//! (`wasm_reconciler_shard_owned_parents`, recounted every 2 s by each
//! replica) cover every parent again and how many parents moved.
//!
//!     cargo build --release -p wasm-reconciler
//!     cargo run -p wr-tests --bin shard_bench -- \
//!         --bin $CARGO_TARGET_DIR/release/wasm-reconciler \
//!         --parents 10000 --replicas 0,1,2,4 --latency-ms 10 --rebalance

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, CustomResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use wr_engine::WasmController;
use wr_tests::bench::{create_static_sites, static_site_ar, status_kib};
use wr_tests::cluster::install_crd;
use wr_tests::plugins::{plugin_path, workspace_root};

const NS: &str = "default";
const GROUP: &str = "bench";
const PAGE: u32 = 500;
/// Lease timings of the replicas: generous, so that a replica starved of CPU
/// on a shared machine is not fenced mid-run (a fenced replica exits 1 and
/// the bench stops). A crashed replica's parents move after the lease
/// duration, which the kill figure includes.
const LEASE_SECS: u64 = 15;
const LEASE: &[&str] = &[
    "--lease-duration-seconds=15",
    "--renew-deadline-seconds=10",
    "--retry-period-seconds=2",
    "--shutdown-timeout-seconds=10",
    "--resync-seconds=3600",
];

struct Opts {
    bin: PathBuf,
    parents: usize,
    replicas: Vec<usize>,
    latency_ms: u64,
    concurrency: u32,
    rebalance: bool,
}

fn opts() -> Result<Opts> {
    let mut o = Opts {
        bin: std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"))
            .join("release/wasm-reconciler"),
        parents: 10_000,
        replicas: vec![0, 1, 2, 4],
        latency_ms: 10,
        concurrency: 4,
        rebalance: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--bin" => o.bin = PathBuf::from(val()?),
            "--parents" => o.parents = val()?.parse()?,
            "--replicas" => {
                o.replicas = val()?
                    .split(',')
                    .map(|s| s.parse().context("--replicas is a list of numbers"))
                    .collect::<Result<_>>()?
            }
            "--latency-ms" => o.latency_ms = val()?.parse()?,
            "--concurrency" => o.concurrency = val()?.parse()?,
            "--rebalance" => o.rebalance = true,
            other => bail!("unknown argument {other}"),
        }
    }
    if !o.bin.exists() {
        bail!(
            "{} does not exist (build it, or pass --bin)",
            o.bin.display()
        );
    }
    Ok(o)
}

fn main() -> Result<()> {
    let o = opts()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let wasm = plugin_path("static-site");
    let largest = o.replicas.iter().copied().max().unwrap_or(0);
    for &r in &o.replicas {
        let with_rebalance = o.rebalance && r >= 1 && r == largest;
        let v = rt.block_on(run(&o, &wasm, r, with_rebalance))?;
        println!("{}", serde_json::to_string(&v)?);
    }
    Ok(())
}

/// A child process killed on drop.
struct Proc {
    child: Child,
    name: String,
    metrics: Option<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// User + system CPU seconds so far (`/proc/<pid>/stat`, 100 ticks/s).
    fn cpu_secs(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        // After the command name: state is field 3, utime 14, stime 15.
        let tick = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok());
        (tick(14).unwrap_or(0.0) + tick(15).unwrap_or(0.0)) / 100.0
    }

    fn kib(&self, field: &str) -> u64 {
        status_kib(Some(self.child.id()), field)
    }

    fn figures(&self) -> Value {
        json!({
            "name": self.name,
            "cpuSecs": round(self.cpu_secs()),
            "rssMiB": round(self.kib("VmRSS:") as f64 / 1024.0),
            "peakRssMiB": round(self.kib("VmHWM:") as f64 / 1024.0),
        })
    }
}

/// Spawns `bin args`, stderr to `dir/name.log`, and waits for the first
/// stdout line starting with `prefix` (returned without it).
fn spawn(bin: &Path, args: &[String], dir: &Path, name: &str, prefix: &str) -> Result<Proc> {
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    let mut child = Command::new(bin)
        .args(args)
        .env("POD_NAME", name)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let out = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    let wanted = prefix.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if let Some(rest) = line.strip_prefix(&wanted) {
                let _ = tx.send(rest.trim().to_string());
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(120))
        .with_context(|| format!("{name} did not print {prefix:?} (see its log)"))?;
    Ok(Proc {
        child,
        name: name.into(),
        metrics: Some(first),
    })
}

fn replica(o: &Opts, dir: &Path, kc: &Path, name: &str, sharded: bool) -> Result<Proc> {
    let mut args: Vec<String> = ["--log-level", "warn", "run", "--kubeconfig"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(kc.display().to_string());
    for a in [
        "--metrics-bind",
        "127.0.0.1:0",
        "--lease-namespace",
        NS,
        "--cache-dir",
    ] {
        args.push(a.into());
    }
    args.push(dir.join(format!("cache-{name}")).display().to_string());
    args.extend(LEASE.iter().map(|s| s.to_string()));
    if sharded {
        args.extend(["--shard-group".to_string(), GROUP.to_string()]);
    }
    spawn(&o.bin, &args, dir, name, "metrics: ")
}

/// Value of the unlabelled sample `series` in `url/metrics`.
fn sample(url: &str, series: &str) -> Option<f64> {
    let hostport = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(hostport).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    resp.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn rejoins(p: &Proc) -> f64 {
    p.metrics
        .as_deref()
        .and_then(|u| sample(u, "wasm_reconciler_shard_rejoins_total"))
        .unwrap_or(-1.0)
}

fn owned(p: &Proc) -> f64 {
    p.metrics
        .as_deref()
        .and_then(|u| sample(u, "wasm_reconciler_shard_owned_parents"))
        .unwrap_or(-1.0)
}

#[derive(Deserialize)]
struct Page {
    items: Vec<Item>,
    metadata: PageMeta,
}
#[derive(Deserialize)]
struct PageMeta {
    #[serde(rename = "continue")]
    cont: Option<String>,
}
#[derive(Deserialize)]
struct Item {
    metadata: ItemMeta,
    status: Option<ItemStatus>,
}
#[derive(Deserialize)]
struct ItemMeta {
    generation: Option<i64>,
}
#[derive(Deserialize)]
struct ItemStatus {
    #[serde(default)]
    conditions: Vec<Cond>,
}
#[derive(Deserialize)]
struct Cond {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(rename = "observedGeneration")]
    observed_generation: Option<i64>,
}

/// Parents Ready for their current generation (read in pages).
async fn ready_count(client: &Client) -> Result<usize> {
    let base = format!(
        "/apis/examples.wasm-reconciler.dev/v1alpha1/namespaces/{NS}/staticsites?limit={PAGE}"
    );
    let mut ready = 0;
    let mut cont: Option<String> = None;
    loop {
        let uri = match &cont {
            Some(c) => format!("{base}&continue={c}"),
            None => base.clone(),
        };
        let page: Page = client
            .request(http::Request::get(uri).body(Vec::new())?)
            .await?;
        ready += page
            .items
            .iter()
            .filter(|p| {
                p.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Ready"
                            && c.status == "True"
                            && c.observed_generation == p.metadata.generation
                    })
                })
            })
            .count();
        match page.metadata.cont.filter(|c| !c.is_empty()) {
            Some(c) => cont = Some(c),
            None => return Ok(ready),
        }
    }
}

/// Sets (or with 0 clears) a latency rule on every request but watches.
async fn set_latency(client: &Client, ms: u64) -> Result<()> {
    let spec = if ms == 0 {
        json!({"rules": []})
    } else {
        json!({"rules": [{
            "verbs": ["get", "list", "create", "update", "patch", "delete"],
            "rate": 1.0, "action": {"kind": "latency", "ms": ms}
        }]})
    };
    client
        .request_text(http::Request::put("/_wr/admin/faults").body(serde_json::to_vec(&spec)?)?)
        .await
        .context("setting the latency rule")?;
    Ok(())
}

async fn setup(o: &Opts, client: &Client, wasm: &Path) -> Result<f64> {
    install_crd(client, serde_json::to_value(WasmController::crd())?).await?;
    let crd = std::fs::read_to_string(workspace_root().join("examples/static-site/crd.yaml"))?;
    install_crd(client, serde_yaml::from_str(&crd)?).await?;
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &static_site_ar());
    let t = Instant::now();
    create_static_sites(&sites, NS, o.parents, 32).await?;
    let wc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "static-site"},
        "spec": {
            "parentResource": {"apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "resource": "staticsites"},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": wasm.display().to_string(), "config": {"clusterDomain": "cluster.local"}},
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": o.concurrency,
        }
    }))?;
    Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<WasmController>(&()))
        .create(&PostParams::default(), &wc)
        .await
        .context("creating the WasmController")?;
    Ok(t.elapsed().as_secs_f64())
}

/// Waits until the live replicas' owned counts add up to every parent with
/// each owning some; returns the seconds waited and the counts.
async fn shares(live: &[&Proc], n: usize, since: Instant) -> Result<(f64, Vec<f64>)> {
    loop {
        let o: Vec<f64> = live.iter().map(|p| owned(p)).collect();
        if o.iter().sum::<f64>() == n as f64 && o.iter().all(|c| *c > 0.0) {
            return Ok((since.elapsed().as_secs_f64(), o));
        }
        if since.elapsed() > Duration::from_secs(600) {
            let gone: Vec<&str> = live
                .iter()
                // An exited, not yet reaped child is a zombie: state `Z`.
                .filter(|p| {
                    std::fs::read_to_string(format!("/proc/{}/stat", p.child.id()))
                        .map_or(true, |st| st.contains(") Z "))
                })
                .map(|p| p.name.as_str())
                .collect();
            bail!(
                "owned counts {o:?} did not cover {n} parents within 10 min (exited: {gone:?}; see their logs)"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run(o: &Opts, wasm: &Path, replicas: usize, rebalance: bool) -> Result<Value> {
    // Kept (logs of the API server and every replica), path on stderr: a
    // replica that exits or is fenced mid-run is diagnosed from its log.
    let dir = tempfile::Builder::new().prefix("shard-bench-").tempdir()?;
    eprintln!(
        "shard_bench: {} replicas, logs in {}",
        replicas.max(1),
        dir.path().display()
    );
    let dir = KeptDir(dir.keep());
    let kc = dir.path().join("kubeconfig");
    let api_args: Vec<String> = [
        "apiserver",
        "--port",
        "0",
        "--enable-fault-admin",
        "--watch-history",
        "200000",
        "--kubeconfig-out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([kc.display().to_string()])
    .collect();
    let mut api = spawn(&o.bin, &api_args, dir.path(), "apiserver", "http")?;
    api.metrics = None;
    let config = wr_tests::real_cluster::kube_config(&kc).await?;
    let client = Client::try_from(config)?;
    let create_secs = setup(o, &client, wasm).await?;
    set_latency(&client, o.latency_ms).await?;
    let load_before = load1();
    let api_cpu0 = api.cpu_secs();

    let sharded = replicas > 0;
    let t = Instant::now();
    let mut procs = Vec::new();
    for i in 0..replicas.max(1) {
        procs.push(replica(o, dir.path(), &kc, &format!("r{i}"), sharded)?);
    }
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if ready_count(&client).await? == o.parents {
            break;
        }
        for p in &mut procs {
            if let Some(st) = p.child.try_wait()? {
                bail!("{} exited ({st}) before convergence; see its log", p.name);
            }
        }
        if t.elapsed() > Duration::from_secs(3600) {
            bail!("did not converge within an hour");
        }
    }
    let converge_secs = t.elapsed().as_secs_f64();
    let mut v = json!({
        "replicas": replicas.max(1),
        "sharded": sharded,
        "parents": o.parents,
        "latencyMs": o.latency_ms,
        "maxConcurrentReconciles": o.concurrency,
        "createSecs": round(create_secs),
        "convergeSecs": round(converge_secs),
        "perReplica": procs.iter().map(Proc::figures).collect::<Vec<_>>(),
        "apiserverCpuSecs": round(api.cpu_secs() - api_cpu0),
        "load1Before": load_before,
        "load1After": load1(),
    });
    if sharded {
        let live: Vec<&Proc> = procs.iter().collect();
        let (_, counts) = shares(&live, o.parents, Instant::now()).await?;
        v["ownedAtConvergence"] = json!(counts);
        // A replica fenced under CPU starvation drains and rejoins as a new
        // member; say how often that happened.
        v["rejoins"] = json!(procs.iter().map(rejoins).collect::<Vec<_>>());
    }
    if rebalance {
        v["rebalance"] = rebalance_figures(o, dir.path(), &kc, &client, &mut procs).await?;
    }
    Ok(v)
}

/// One replica joins; then one that does not keep the map (the coordinator
/// Lease's holder) is SIGKILLed: the common case, a member lease expiring.
async fn rebalance_figures(
    o: &Opts,
    dir: &Path,
    kc: &Path,
    client: &Client,
    procs: &mut Vec<Proc>,
) -> Result<Value> {
    let t = Instant::now();
    procs.push(replica(o, dir, kc, &format!("r{}", procs.len()), true)?);
    let live: Vec<&Proc> = procs.iter().collect();
    let (join_secs, after_join) = shares(&live, o.parents, t).await?;
    let moved_in = after_join.last().copied().unwrap_or(0.0);

    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), NS);
    let holder = leases
        .get(&format!("{GROUP}-coordinator"))
        .await
        .context("reading the coordinator Lease")?
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    // Identities are `$POD_NAME_<random>`.
    let at = procs
        .iter()
        .position(|p| !holder.starts_with(&format!("{}_", p.name)))
        .context("no replica but the coordinator")?;
    let victim = procs.remove(at);
    let victim_name = victim.name.clone();
    let lost = owned(&victim);
    let t = Instant::now();
    drop(victim);
    let live: Vec<&Proc> = procs.iter().collect();
    let (death_secs, after_death) = shares(&live, o.parents, t).await?;
    let handover = |p: &Proc| {
        let url = p.metrics.as_deref().unwrap_or("");
        (
            sample(url, "wasm_reconciler_shard_handover_duration_seconds_count").unwrap_or(0.0),
            sample(url, "wasm_reconciler_shard_handover_duration_seconds_sum").unwrap_or(0.0),
        )
    };
    Ok(json!({
        "joinSecs": round(join_secs),
        "movedToJoiner": moved_in,
        "ownedAfterJoin": after_join,
        "killed": victim_name,
        "coordinator": holder,
        "killSecs": round(death_secs),
        "ownedByKilled": lost,
        "ownedAfterKill": after_death,
        "handoversCountSum": procs.iter().map(handover).collect::<Vec<_>>(),
        "rejoins": procs.iter().map(rejoins).collect::<Vec<_>>(),
        "leaseDurationSecs": LEASE_SECS,
    }))
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A work directory that is not removed.
struct KeptDir(PathBuf);

impl KeptDir {
    fn path(&self) -> &Path {
        &self.0
    }
}
