//! Engine bench (issue 4 figures): the static-site wasm plugin against the
//! embedded API server, N parents × 3 children from empty to all Ready, then
//! a full resync of the converged parents.
//!
//! The API server runs as a child process (this binary re-executed with
//! `serve-apiserver`) so the RSS measured in this process is the host's share
//! (manager, caches, wasm runtime; plus the bench's own small client).
//! API requests are counted from the server's request log by the child itself,
//! which answers `summary` / `clear` lines on its stdin with one JSON line, so
//! the log (tens of thousands of records) is never copied into this process.
//!
//! Memory: the peak is the kernel's high-water mark (`VmHWM`, reset through
//! `/proc/self/clear_refs` just before the manager starts) and, as a cross
//! check, the largest `VmRSS` sampled every 20 ms. The bench's own work in
//! this process is kept small so that it does not count as the host's: parents
//! are created without keeping the responses, and the readiness polls and the
//! JSON-size measurement read lists in pages, decoding only what they need.
//!
//!     cargo run --release -p wr-tests --bin engine_bench -- 1000 10000

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use wr_engine::{Manager, ManagerOptions, WasmController};
use wr_tests::bench::{create_static_sites, hwm_kib, rss_kib, static_site_ar, status_kib};
use wr_tests::cluster::install_crd;
use wr_tests::plugins::{plugin_path, workspace_root};

const NS: &str = "bench";
/// Workers of the bench's static-site controller.
const CONCURRENCY: u32 = 16;
/// Objects per page of the bench's own lists.
const PAGE: u32 = 500;

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

/// Child mode: the API server alone; prints its URL, answers `summary` and
/// `clear` lines on stdin (one JSON line each on stdout), stops when stdin
/// closes.
async fn serve_apiserver() -> Result<()> {
    use tokio::io::AsyncBufReadExt;
    let server = wr_apiserver::start(wr_apiserver::Config {
        fault_admin: true,
        watch_history: 200_000,
        ..Default::default()
    })
    .await?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = match line.trim() {
            "summary" => serde_json::to_string(&LogSummary::of(&server.requests()))?,
            "clear" => {
                server.clear_requests();
                "{}".to_string()
            }
            other => serde_json::to_string(&json!({"error": format!("unknown command {other}")}))?,
        };
        println!("{reply}");
        std::io::stdout().flush()?;
    }
    server.shutdown().await;
    Ok(())
}

/// What the bench needs from the API server's request log.
#[derive(Serialize, Deserialize, Default)]
struct LogSummary {
    total: u64,
    by_verb: BTreeMap<String, u64>,
    /// "verb resource[/subresource]" of every write.
    writes_by_kind: BTreeMap<String, u64>,
}

impl LogSummary {
    fn of(log: &[wr_apiserver::RequestRecord]) -> Self {
        let mut s = Self {
            total: log.len() as u64,
            ..Self::default()
        };
        for r in log {
            *s.by_verb.entry(r.verb.clone()).or_default() += 1;
            if r.is_write() {
                let sub = r.subresource.as_deref().map(|x| format!("/{x}"));
                *s.writes_by_kind
                    .entry(format!(
                        "{} {}{}",
                        r.verb,
                        r.resource,
                        sub.unwrap_or_default()
                    ))
                    .or_default() += 1;
            }
        }
        s
    }

    fn writes(&self) -> u64 {
        self.writes_by_kind.values().sum()
    }
}

struct ServerProc {
    child: Child,
    out: BufReader<ChildStdout>,
    url: String,
}

impl ServerProc {
    fn start() -> Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("serve-apiserver")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(child.stdout.take().context("child stdout")?);
        let mut url = String::new();
        out.read_line(&mut url)?;
        Ok(Self {
            child,
            out,
            url: url.trim().to_string(),
        })
    }

    /// Sends one command line to the child and reads its one-line answer
    /// (blocking I/O of a few bytes; `block_in_place` keeps the runtime going).
    fn command(&mut self, cmd: &str) -> Result<String> {
        tokio::task::block_in_place(|| {
            let stdin = self.child.stdin.as_mut().context("child stdin")?;
            writeln!(stdin, "{cmd}")?;
            stdin.flush()?;
            let mut line = String::new();
            self.out.read_line(&mut line)?;
            Ok(line)
        })
    }

    fn summary(&mut self) -> Result<LogSummary> {
        Ok(serde_json::from_str(&self.command("summary")?)?)
    }

    fn clear_requests(&mut self) -> Result<()> {
        self.command("clear").map(drop)
    }

    fn peak_rss_kib(&self) -> u64 {
        status_kib(Some(self.child.id()), "VmHWM:")
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Resets this process's `VmHWM` to its current RSS (Linux `clear_refs` 5);
/// false when the kernel refuses, and then the sampled peak is the figure.
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(-1.0)
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

#[derive(Deserialize)]
struct Page<T> {
    metadata: PageMeta,
    items: Vec<T>,
}

#[derive(Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    continue_: Option<String>,
}

/// Just what readiness needs from a parent.
#[derive(Deserialize)]
struct ReadyItem {
    metadata: ReadyMeta,
    #[serde(default)]
    status: Option<ReadyStatus>,
}

#[derive(Deserialize)]
struct ReadyMeta {
    generation: Option<i64>,
}

#[derive(Deserialize)]
struct ReadyStatus {
    #[serde(default)]
    conditions: Vec<ReadyCondition>,
}

#[derive(Deserialize)]
struct ReadyCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(rename = "observedGeneration")]
    observed_generation: Option<i64>,
}

impl ReadyItem {
    /// Ready for its current generation.
    fn ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Ready"
                    && c.status == "True"
                    && c.observed_generation == self.metadata.generation
            })
        })
    }
}

/// Parents Ready for their current generation, and the list requests made
/// (pages of [`PAGE`], decoded into [`ReadyItem`]s only).
async fn ready_count(client: &Client) -> Result<(usize, u64)> {
    let base = format!(
        "/apis/examples.wasm-reconciler.dev/v1alpha1/namespaces/{NS}/staticsites?limit={PAGE}"
    );
    let (mut ready, mut requests) = (0usize, 0u64);
    let mut cont: Option<String> = None;
    loop {
        let uri = match &cont {
            Some(c) => format!("{base}&continue={c}"),
            None => base.clone(),
        };
        let page: Page<ReadyItem> = client
            .request(http::Request::get(uri).body(Vec::new())?)
            .await?;
        requests += 1;
        ready += page.items.iter().filter(|p| p.ready()).count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => cont = Some(c),
            None => return Ok((ready, requests)),
        }
    }
}

/// Count and JSON size (compact, as `DynamicObject`) of every object of `ar`,
/// with and without `managedFields`, read in pages; and the pages read.
async fn json_size(client: &Client, ar: &ApiResource) -> Result<(usize, usize, usize, u64)> {
    let api = Api::<DynamicObject>::all_with(client.clone(), ar);
    let (mut count, mut full, mut stripped, mut pages) = (0, 0, 0, 0u64);
    let mut cont: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(c) = &cont {
            lp = lp.continue_token(c);
        }
        let list = api.list(&lp).await?;
        pages += 1;
        for mut o in list.items {
            count += 1;
            full += serde_json::to_vec(&o)?.len();
            o.metadata.managed_fields = None;
            stripped += serde_json::to_vec(&o)?.len();
        }
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => cont = Some(c),
            None => return Ok((count, full, stripped, pages)),
        }
    }
}

/// Average cost of the engine cache's representation for one object: encode
/// to compact JSON (without `managedFields`) when a watch event arrives, and
/// decode back to a `DynamicObject` on every read. Returns (bytes, encode µs,
/// decode µs), the best of several batches.
fn codec_cost(obj: &DynamicObject) -> Result<(usize, f64, f64)> {
    // Best of several short batches: this machine is shared, and a batch that
    // was preempted says nothing about the code.
    const BATCHES: u32 = 10;
    const ROUNDS: u32 = 200;
    let mut o = obj.clone();
    o.metadata.managed_fields = None;
    let bytes = serde_json::to_vec(&o)?;
    let (mut encode, mut decode) = (f64::MAX, f64::MAX);
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..ROUNDS {
            std::hint::black_box(serde_json::to_vec(std::hint::black_box(&o))?);
        }
        encode = encode.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(ROUNDS));
        let t = Instant::now();
        for _ in 0..ROUNDS {
            std::hint::black_box(serde_json::from_slice::<DynamicObject>(
                std::hint::black_box(&bytes),
            )?);
        }
        decode = decode.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(ROUNDS));
    }
    Ok((bytes.len(), encode, decode))
}

/// [`codec_cost`] of one object of each cached kind in the bench namespace,
/// and the decode time of one reconcile's reads (parent + 3 children).
async fn codec_costs(client: &Client) -> Result<Value> {
    let mut out = serde_json::Map::new();
    let mut per_reconcile = 0.0;
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
    ] {
        let ar = ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(g, v, k), p);
        let list = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar)
            .list(&ListParams::default().limit(1))
            .await?;
        let obj = list.items.first().context("no object to measure")?;
        let (bytes, encode, decode) = codec_cost(obj)?;
        per_reconcile += decode;
        out.insert(
            k.into(),
            json!({"bytes": bytes, "encode_us": round(encode), "decode_us": round(decode)}),
        );
    }
    out.insert(
        "decode_per_reconcile_us".into(),
        json!(round(per_reconcile)),
    );
    Ok(Value::Object(out))
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
    let mut server = ServerProc::start()?;
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
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &static_site_ar());
    let t = Instant::now();
    create_static_sites(&sites, NS, n, 32).await?;
    let create_secs = t.elapsed().as_secs_f64();

    let rt = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig::default())
        .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
    let loader = wr_engine::wasm::WasmLoader::new(rt);
    server.clear_requests()?;
    let load_start = load1();
    let rss_before = rss_kib();
    let hwm_reset = reset_hwm();
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
        let (ready, requests) = ready_count(&client).await?;
        polls += requests;
        if ready == n {
            break;
        }
        if t.elapsed() > Duration::from_secs(1800) {
            bail!("did not converge in 30 min");
        }
    }
    let converge_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let sampled_peak = sampler.finish();
    let hwm = hwm_kib();
    let peak_rss = sampled_peak.max(if hwm_reset { hwm } else { 0 });
    let rss_converged = rss_kib();
    let log = server.summary()?;
    // The bench's own requests: one WasmController create and `polls` list pages.
    let engine_requests = log.total - polls - 1;
    let mut by_verb = log.by_verb.clone();
    *by_verb.entry("list".into()).or_default() -= polls;
    *by_verb.entry("create".into()).or_default() -= 1;

    // JSON size of what the engine caches: parents, children, WasmControllers.
    let (mut json_bytes, mut json_stripped, mut cached, mut size_pages) = (0, 0, 0, 0);
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
        let (c, full, stripped, pages) = json_size(&client, &ar).await?;
        cached += c;
        json_bytes += full;
        json_stripped += stripped;
        size_pages += pages;
    }

    // "All Ready" can precede the last status updates (the plugin's Available
    // condition follows the Deployment it observes one reconcile later): wait
    // until the engine stops writing before calling the parents converged.
    let mut last = server.summary()?.total;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = server.summary()?.total;
        if now == last {
            break;
        }
        last = now;
    }
    let quiet_secs = t.elapsed().as_secs_f64();
    let rss_quiet = rss_kib();
    // Minus the bench's list pages of the JSON-size measurement.
    let settle_requests = last.saturating_sub(log.total + size_pages);
    let hwm_converged = hwm_kib();
    let codec = codec_costs(&client).await?;

    // Full resync: a fresh manager re-reconciles every converged parent.
    let _ = stop.send(());
    let _ = task.await;
    server.clear_requests()?;
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
    let resync_log = server.summary()?;
    let _ = stop.send(());
    let _ = task.await;
    let rss_after_resync = rss_kib();
    let hwm_end = hwm_kib();
    let load_end = load1();

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
        "host_peak_rss_sampled_kib": sampled_peak,
        "host_vmhwm_until_ready_kib": if hwm_reset { Some(hwm) } else { None },
        "host_vmhwm_until_quiet_kib": if hwm_reset { Some(hwm_converged) } else { None },
        "host_vmhwm_incl_resync_kib": if hwm_reset { Some(hwm_end) } else { None },
        "host_rss_at_ready_kib": rss_converged,
        "host_rss_quiet_kib": rss_quiet,
        "host_rss_after_resync_kib": rss_after_resync,
        "host_rss_growth_kib": peak_rss.saturating_sub(rss_before),
        "apiserver_peak_rss_kib": server.peak_rss_kib(),
        "cached_objects": cached,
        "cached_json_kib": json_bytes / 1024,
        "cached_json_without_managed_fields_kib": json_stripped / 1024,
        "peak_rss_over_json": round(peak_rss as f64 * 1024.0 / json_bytes as f64),
        "rss_growth_over_json": round(peak_rss.saturating_sub(rss_before) as f64 * 1024.0 / json_bytes as f64),
        "quiet_rss_over_json": round(rss_quiet as f64 * 1024.0 / json_bytes as f64),
        "load_avg_1m_start_end": [load_start, load_end],
        "cache_codec": codec,
        "settle_after_ready_secs": round(quiet_secs),
        "settle_requests": settle_requests,
        "resync_secs": round(resync_secs),
        "resync_api_requests": resync_log.total,
        "resync_writes": resync_log.writes(),
        "resync_writes_by_kind": resync_log.writes_by_kind,
    }))
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
