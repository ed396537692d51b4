//! Engine bench (issue 4 figures): the static-site wasm plugin against the
//! embedded API server, N parents × 3 children from empty to all Ready, then
//! a full resync of the converged parents.
//!
//! The API server runs as a child process (this binary re-executed with
//! `serve-apiserver`) so the RSS measured in this process is the host's share
//! (manager, caches, wasm runtime; plus the bench's own small client).
//! API requests are read from the server's request log over its admin path.
//!
//!     cargo run --release -p wr-tests --bin engine_bench -- 1000 10000

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use wr_apiserver::RequestRecord;
use wr_engine::{Manager, ManagerOptions, WasmController};
use wr_tests::cluster::install_crd;
use wr_tests::plugins::{plugin_path, workspace_root};

const NS: &str = "bench";
/// Workers of the bench's static-site controller.
const CONCURRENCY: u32 = 16;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.first().map(String::as_str) == Some("serve-apiserver") {
        return rt.block_on(serve_apiserver());
    }
    let sizes: Vec<usize> = if args.is_empty() {
        vec![1000, 10_000]
    } else {
        args.iter()
            .map(|a| a.parse().context("sizes are numbers"))
            .collect::<Result<_>>()?
    };
    // Build the component before anything is timed.
    let wasm = plugin_path("static-site");
    for n in sizes {
        let r = rt.block_on(run(n, &wasm))?;
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    Ok(())
}

/// Child mode: the API server alone; prints its URL, stops when stdin closes.
async fn serve_apiserver() -> Result<()> {
    let server = wr_apiserver::start(wr_apiserver::Config {
        fault_admin: true,
        watch_history: 200_000,
        ..Default::default()
    })
    .await?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    tokio::task::spawn_blocking(|| {
        let mut s = String::new();
        while std::io::stdin()
            .read_line(&mut s)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
    })
    .await?;
    server.shutdown().await;
    Ok(())
}

struct ServerProc {
    child: Child,
    url: String,
}

impl ServerProc {
    fn start() -> Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("serve-apiserver")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let out = child.stdout.take().context("child stdout")?;
        let mut url = String::new();
        BufReader::new(out).read_line(&mut url)?;
        Ok(Self {
            child,
            url: url.trim().to_string(),
        })
    }

    fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(&format!("/proc/{}/status", self.child.id()), "VmHWM:")
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn proc_status_kib(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn rss_kib() -> u64 {
    proc_status_kib("/proc/self/status", "VmRSS:")
}

/// Samples this process's RSS every 20 ms while alive; keeps the maximum.
struct RssSampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(rss_kib()));
        let (s, m) = (stop.clone(), max.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                m.fetch_max(rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self {
            stop,
            max,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.max.load(Ordering::Relaxed)
    }
}

async fn admin(client: &Client, method: &str, what: &str) -> Result<String> {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("/_wr/admin/{what}"))
        .body(Vec::new())?;
    Ok(client.request_text(req).await?)
}

async fn requests(client: &Client) -> Result<Vec<RequestRecord>> {
    Ok(serde_json::from_str(
        &admin(client, "GET", "requests").await?,
    )?)
}

fn site_ar() -> ApiResource {
    ApiResource {
        group: "examples.wasm-reconciler.dev".into(),
        version: "v1alpha1".into(),
        api_version: "examples.wasm-reconciler.dev/v1alpha1".into(),
        kind: "StaticSite".into(),
        plural: "staticsites".into(),
    }
}

/// Parents Ready for their current generation.
fn ready_count(list: &[DynamicObject]) -> usize {
    list.iter()
        .filter(|p| {
            let generation = p.metadata.generation;
            p.data
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
        .count()
}

fn start_manager(
    client: &Client,
    wasm: &wr_engine::wasm::WasmLoader,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
    wr_engine::ManagerHandle,
) {
    let loader: Arc<dyn wr_engine::PluginLoader> = Arc::new(wasm.clone());
    let manager = Manager::new(client.clone(), loader, ManagerOptions::default());
    let handle = manager.handle();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = manager
            .run(async move {
                let _ = rx.await;
            })
            .await;
    });
    (task, tx, handle)
}

async fn run(n: usize, wasm: &std::path::Path) -> Result<Value> {
    let server = ServerProc::start()?;
    let client = Client::try_from(kube::Config::new(server.url.parse()?))?;
    let engine_client = Client::try_from(wr_engine::engine_config(kube::Config::new(
        server.url.parse()?,
    )))?;
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

    // Parents first, controller second: the timed phase is the engine's.
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &site_ar());
    let t = Instant::now();
    let results: Vec<Result<DynamicObject, kube::Error>> = futures::stream::iter(0..n)
        .map(|i| {
            let sites = sites.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
                    "metadata": {"name": format!("site-{i:05}"), "namespace": NS},
                    "spec": {"image": "nginx:1.27", "replicas": 2, "port": 8080,
                             "content": {"index.html": format!("<h1>site {i}</h1>")}}
                }))
                .map_err(kube::Error::SerdeError)?;
                sites.create(&PostParams::default(), &obj).await
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for r in results {
        r.context("creating parent")?;
    }
    let create_secs = t.elapsed().as_secs_f64();

    let rt = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig::default())
        .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
    let loader = wr_engine::wasm::WasmLoader::new(rt);
    admin(&client, "DELETE", "requests").await?;
    let rss_before = rss_kib();
    let sampler = RssSampler::start();

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
            "maxConcurrentReconciles": CONCURRENCY,
        }
    }))?;
    let t = Instant::now();
    let (task, stop, _handle) = start_manager(&engine_client, &loader);
    Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<WasmController>(&()))
        .create(&PostParams::default(), &wc)
        .await?;
    let mut polls = 0u64;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        polls += 1;
        let list = sites.list(&ListParams::default()).await?;
        if ready_count(&list.items) == n {
            break;
        }
        if t.elapsed() > Duration::from_secs(1800) {
            bail!("did not converge in 30 min");
        }
    }
    let converge_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let peak_rss = sampler.finish();
    let log = requests(&client).await?;
    // The bench's own requests: one WasmController create and `polls` lists.
    let engine_requests = log.len() as u64 - polls - 1;
    let mut by_verb = std::collections::BTreeMap::<String, u64>::new();
    for r in &log {
        *by_verb.entry(r.verb.clone()).or_default() += 1;
    }
    *by_verb.entry("list".into()).or_default() -= polls;
    *by_verb.entry("create".into()).or_default() -= 1;

    // JSON size of what the engine caches: parents, children, WasmControllers.
    let mut json_bytes = 0usize;
    let mut cached = 0usize;
    for (g, v, k, p) in [
        (
            "examples.wasm-reconciler.dev",
            "v1alpha1",
            "StaticSite",
            "staticsites",
        ),
        ("apps", "v1", "Deployment", "deployments"),
        ("", "v1", "Service", "services"),
        ("", "v1", "ConfigMap", "configmaps"),
        (
            "wasm-reconciler.dev",
            "v1alpha1",
            "WasmController",
            "wasmcontrollers",
        ),
    ] {
        let ar = ApiResource {
            group: g.into(),
            version: v.into(),
            api_version: if g.is_empty() {
                v.into()
            } else {
                format!("{g}/{v}")
            },
            kind: k.into(),
            plural: p.into(),
        };
        let list = Api::<DynamicObject>::all_with(client.clone(), &ar)
            .list(&ListParams::default())
            .await?;
        cached += list.items.len();
        for o in &list.items {
            json_bytes += serde_json::to_vec(o)?.len();
        }
    }

    // "All Ready" can precede the last status updates (the plugin's Available
    // condition follows the Deployment it observes one reconcile later): wait
    // until the engine stops writing before calling the parents converged.
    let mut last = requests(&client).await?.len();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = requests(&client).await?.len();
        if now == last {
            break;
        }
        last = now;
    }
    let quiet_secs = t.elapsed().as_secs_f64();
    // Minus the bench's 5 lists of the JSON-size measurement.
    let settle_requests = (last as u64).saturating_sub(log.len() as u64 + 5);

    // Full resync: a fresh manager re-reconciles every converged parent.
    let _ = stop.send(());
    let _ = task.await;
    admin(&client, "DELETE", "requests").await?;
    let t = Instant::now();
    let (task, stop, handle) = start_manager(&engine_client, &loader);
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(s) = handle.stats("static-site").await
            && s.plugin_calls.load(Ordering::Relaxed) >= n as u64
        {
            break;
        }
        if t.elapsed() > Duration::from_secs(1800) {
            bail!("resync did not finish in 30 min");
        }
    }
    let resync_secs = t.elapsed().as_secs_f64();
    // Let in-flight reconciles of the last parents finish before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resync_log = requests(&client).await?;
    let resync_writes: Vec<&RequestRecord> = resync_log.iter().filter(|r| r.is_write()).collect();
    let mut resync_write_kinds = std::collections::BTreeMap::<String, u64>::new();
    for r in &resync_writes {
        *resync_write_kinds
            .entry(format!(
                "{} {}{}",
                r.verb,
                r.resource,
                r.subresource
                    .as_deref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default()
            ))
            .or_default() += 1;
    }
    let _ = stop.send(());
    let _ = task.await;

    Ok(json!({
        "parents": n,
        "children_per_parent": 3,
        "create_parents_secs": round(create_secs),
        "converge_secs": round(converge_secs),
        "engine_api_requests": engine_requests,
        "engine_api_requests_per_parent": round(engine_requests as f64 / n as f64),
        "engine_requests_by_verb": by_verb,
        "host_rss_before_kib": rss_before,
        "host_peak_rss_kib": peak_rss,
        "host_rss_growth_kib": peak_rss.saturating_sub(rss_before),
        "apiserver_peak_rss_kib": server.peak_rss_kib(),
        "cached_objects": cached,
        "cached_json_kib": json_bytes / 1024,
        "peak_rss_over_json": round(peak_rss as f64 * 1024.0 / json_bytes as f64),
        "rss_growth_over_json": round(peak_rss.saturating_sub(rss_before) as f64 * 1024.0 / json_bytes as f64),
        "settle_after_ready_secs": round(quiet_secs),
        "settle_requests": settle_requests,
        "resync_secs": round(resync_secs),
        "resync_api_requests": resync_log.len(),
        "resync_writes": resync_writes.len(),
        "resync_writes_by_kind": resync_write_kinds,
    }))
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
