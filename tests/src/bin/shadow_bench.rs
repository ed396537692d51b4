//! Shadow-mode overhead (issue 17 figure): the same fleet of static-site
//! parents converged and then updated by the engine twice — once with the
//! active version alone, once with a candidate in shadow — and, for each,
//! the reconcile latency (p50/p99, from the engine's own
//! `reconcile_finished` durations) and the CPU seconds of the host process.
//!
//! The candidate is the same component under another digest (a custom
//! section appended) with the same config, so every shadow call runs the
//! full comparison and finds the outputs identical: the cost measured is
//! the shadow machinery's (the second call, the comparison, the counts),
//! not a difference report.
//!
//! The API server runs as a child process (this binary re-executed with
//! `serve-apiserver`) so the CPU measured here is the host's plus the
//! bench's own small client (the same in both modes). The modes alternate
//! (off, shadow, off, shadow, …) so that a change in the machine's load
//! does not land on one mode only.
//!
//!     cargo run -p wr-tests --bin shadow_bench -- [PARENTS=300] [ROUNDS=2] [MAX_SHADOW_CALLS]

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use wr_engine::{EngineObserver, Manager, ManagerOptions, ReconcileResult, WasmController};
use wr_tests::bench::{ServerProc, create_static_sites, static_site_ar};
use wr_tests::cluster::install_crd;
use wr_tests::plugins::{plugin_path, workspace_root};

const NS: &str = "bench";
/// Workers of the bench's controller.
const CONCURRENCY: u32 = 8;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.first().map(String::as_str) == Some("serve-apiserver") {
        return rt.block_on(serve_apiserver());
    }
    let arg = |i: usize, default: u64| -> Result<u64> {
        args.get(i)
            .map_or(Ok(default), |a| a.parse().context("arguments are numbers"))
    };
    let parents = arg(0, 300)? as usize;
    let rounds = arg(1, 2)?;
    let max_shadow = args
        .get(2)
        .map(|a| a.parse::<u32>())
        .transpose()
        .context("MAX_SHADOW_CALLS is a number")?;
    // Build the component and its twin before anything is timed.
    let active = plugin_path("static-site");
    let bytes = std::fs::read(&active)?;
    let dir = tempfile::tempdir()?;
    let twin = dir.path().join("static_site_twin.wasm");
    std::fs::write(
        &twin,
        wr_tests::reload::inflate_component(&bytes, bytes.len() + 256),
    )?;
    let mut results = Vec::new();
    for round in 0..rounds {
        for shadow in [false, true] {
            let candidate = shadow.then_some(twin.as_path());
            let r = rt.block_on(run(parents, &active, candidate, max_shadow))?;
            eprintln!("round {} shadow={shadow}: {r}", round + 1);
            results.push((shadow, r));
        }
    }
    let summary = summarize(&results);
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "parents": parents,
            "rounds": rounds,
            "max_concurrent_shadow_calls": max_shadow,
            "runs": results.iter().map(|(s, r)| json!({"shadow": s, "result": r})).collect::<Vec<_>>(),
            "median_of_rounds": summary,
        }))?
    );
    Ok(())
}

/// Child mode: the API server alone; prints its URL, stops when stdin closes.
async fn serve_apiserver() -> Result<()> {
    use tokio::io::AsyncReadExt;
    let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    server.shutdown().await;
    Ok(())
}

/// What the engine tells the bench: every reconcile's duration, shadow
/// outcomes, plugin calls.
#[derive(Default)]
struct Recorder {
    latencies: Mutex<Vec<Duration>>,
    errors: Mutex<u64>,
    shadow: Mutex<BTreeMap<String, u64>>,
    plugin_calls: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl EngineObserver for Recorder {
    fn reconcile_finished(&self, _controller: &str, result: ReconcileResult, took: Duration) {
        lock(&self.latencies).push(took);
        if result != ReconcileResult::Success {
            *lock(&self.errors) += 1;
        }
    }
    fn plugin_call(&self, _c: &str, _took: Duration, _fault: Option<wr_engine::FaultKind>) {
        *lock(&self.plugin_calls) += 1;
    }
    fn shadow_call(&self, _controller: &str, outcome: &str) {
        *lock(&self.shadow).entry(outcome.to_string()).or_default() += 1;
    }
}

impl Recorder {
    /// Takes what was recorded since the last take.
    fn take(&self) -> (Vec<Duration>, u64, BTreeMap<String, u64>, u64) {
        (
            std::mem::take(&mut *lock(&self.latencies)),
            std::mem::take(&mut *lock(&self.errors)),
            std::mem::take(&mut *lock(&self.shadow)),
            std::mem::take(&mut *lock(&self.plugin_calls)),
        )
    }
}

/// CPU seconds (user + system) of this process so far, from `/proc/self/stat`.
fn cpu_secs() -> f64 {
    let ticks = clock_ticks();
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the `(comm)`, which may contain spaces.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            // utime and stime are fields 14 and 15 (1-based) of the line,
            // 12 and 13 (1-based) after the comm.
            let u: f64 = f.get(11)?.parse().ok()?;
            let s: f64 = f.get(12)?.parse().ok()?;
            Some((u + s) / ticks)
        })
        .unwrap_or(f64::NAN)
}

/// `getconf CLK_TCK` (100 on Linux unless the kernel says otherwise).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(-1.0)
}

/// Parents Ready for their current generation.
async fn ready(client: &Client) -> Result<usize> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &static_site_ar());
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|o| {
            let generation = o.metadata.generation;
            o.data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "True"
                            && c["observedGeneration"].as_i64() == generation
                    })
                })
        })
        .count())
}

/// Waits until every parent is Ready for its generation (returns when,
/// from `t`), then until the engine has been idle (no reconcile, no shadow
/// call) for two seconds.
async fn settle(client: &Client, rec: &Recorder, n: usize, t: Instant) -> Result<f64> {
    while ready(client).await? < n {
        if t.elapsed() > Duration::from_secs(1800) {
            bail!("not Ready in 30 min");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let to_ready = t.elapsed().as_secs_f64();
    let count = || lock(&rec.latencies).len() as u64 + lock(&rec.shadow).values().sum::<u64>();
    let mut last = count();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = count();
        if now == last {
            return Ok(to_ready);
        }
        last = now;
    }
}

/// One phase's figures.
fn phase(rec: &Recorder, cpu: f64, to_ready: f64) -> Value {
    let (mut lat, errors, shadow, calls) = rec.take();
    lat.sort();
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return f64::NAN;
        }
        let i = ((lat.len() as f64 - 1.0) * p).round() as usize;
        round(lat[i].as_secs_f64() * 1000.0)
    };
    json!({
        "reconciles": lat.len(),
        "not_success": errors,
        "plugin_calls": calls,
        "shadow_calls": shadow,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "host_cpu_secs": round(cpu),
        "secs_to_ready": round(to_ready),
    })
}

async fn run(
    n: usize,
    active: &std::path::Path,
    candidate: Option<&std::path::Path>,
    max_shadow: Option<u32>,
) -> Result<Value> {
    let server = ServerProc::start("serve-apiserver")?;
    let config = kube::Config::new(server.url.parse()?);
    let client = Client::try_from(config.clone())?;
    let engine_client = Client::try_from(wr_engine::engine_config(config))?;
    install_crd(&client, serde_json::to_value(WasmController::crd())?).await?;
    let crd_text = std::fs::read_to_string(workspace_root().join("examples/static-site/crd.yaml"))?;
    install_crd(&client, serde_yaml::from_str(&crd_text)?).await?;
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    ns_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;

    let rec = Arc::new(Recorder::default());
    let rt = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig::default())
        .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
    let loader: Arc<dyn wr_engine::PluginLoader> = Arc::new(wr_engine::wasm::WasmLoader::new(rt));
    let opts = ManagerOptions {
        observer: Some(rec.clone()),
        ..ManagerOptions::default()
    };
    let manager = Manager::new(engine_client, loader, opts);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = manager
            .run(async move {
                let _ = stopped.await;
            })
            .await;
    });

    // The controller first, loaded (both versions) before any parent exists:
    // the timed phases are reconciles only, not compiles.
    let mut plugin = json!({"path": active.display().to_string(),
                            "config": {"clusterDomain": "cluster.local"}});
    if let Some(c) = candidate {
        plugin["candidate"] = json!({"path": c.display().to_string()});
        if let Some(m) = max_shadow {
            plugin["candidate"]["maxConcurrentShadowCalls"] = json!(m);
        }
    }
    let wc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": "static-site"},
        "spec": {
            "parentResource": {"apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "resource": "staticsites"},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": plugin,
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": CONCURRENCY,
        }
    }))?;
    let wcs: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<WasmController>(&()));
    wcs.create(&PostParams::default(), &wc).await?;
    let want = if candidate.is_some() {
        &["PluginLoaded", "CandidateLoaded"][..]
    } else {
        &["PluginLoaded"][..]
    };
    let t = Instant::now();
    loop {
        let wc = wcs.get("static-site").await?;
        let conds = wc
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array);
        let loaded = want.iter().all(|w| {
            conds.is_some_and(|cs| cs.iter().any(|c| c["type"] == *w && c["status"] == "True"))
        });
        if loaded {
            break;
        }
        if t.elapsed() > Duration::from_secs(600) {
            bail!("the controller did not load in 10 min");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    rec.take();
    let load = load1();

    // Converge: N parents created, each reconciled until Ready.
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &static_site_ar());
    let (cpu0, t) = (cpu_secs(), Instant::now());
    create_static_sites(&sites, NS, n, 16).await?;
    let to_ready = settle(&client, &rec, n, t).await?;
    let converge = phase(&rec, cpu_secs() - cpu0, to_ready);

    // Update: every parent's content changes (a new ConfigMap, a rolled Deployment).
    let (cpu0, t) = (cpu_secs(), Instant::now());
    let patched: Vec<Result<(), kube::Error>> = futures::stream::iter(0..n)
        .map(|i| {
            let sites = sites.clone();
            async move {
                let body =
                    json!({"spec": {"content": {"index.html": format!("<h1>site {i} v2</h1>")}}});
                sites
                    .patch(
                        &format!("site-{i:05}"),
                        &PatchParams::default(),
                        &Patch::Merge(&body),
                    )
                    .await
                    .map(drop)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in patched {
        r.context("updating a parent")?;
    }
    let to_ready = settle(&client, &rec, n, t).await?;
    let update = phase(&rec, cpu_secs() - cpu0, to_ready);
    let shadow_status = wcs
        .get("static-site")
        .await?
        .data
        .pointer("/status/shadow")
        .map(|s| {
            json!({"identical": s["identical"], "differing": s["differing"],
                   "failing": s["failing"], "dropped": s["dropped"]})
        });

    let _ = stop.send(());
    let _ = task.await;
    drop(server);
    Ok(json!({
        "converge": converge,
        "update": update,
        "status_shadow": shadow_status,
        "load_avg_1m_at_start": load,
    }))
}

/// Per mode and phase, the median over rounds of each figure.
fn summarize(results: &[(bool, Value)]) -> Value {
    let mut out = serde_json::Map::new();
    for shadow in [false, true] {
        let mut modes = serde_json::Map::new();
        for ph in ["converge", "update"] {
            let mut figs = serde_json::Map::new();
            for f in ["p50_ms", "p99_ms", "host_cpu_secs", "secs_to_ready"] {
                let mut xs: Vec<f64> = results
                    .iter()
                    .filter(|(s, _)| *s == shadow)
                    .filter_map(|(_, r)| r[ph][f].as_f64())
                    .collect();
                xs.sort_by(f64::total_cmp);
                let median = match xs.len() {
                    0 => f64::NAN,
                    l if l % 2 == 1 => xs[l / 2],
                    l => (xs[l / 2 - 1] + xs[l / 2]) / 2.0,
                };
                figs.insert(f.into(), json!(round(median)));
            }
            modes.insert(ph.into(), Value::Object(figs));
        }
        out.insert(
            if shadow { "shadow" } else { "off" }.into(),
            Value::Object(modes),
        );
    }
    Value::Object(out)
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
