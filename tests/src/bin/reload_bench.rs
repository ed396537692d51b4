//! Hot-reload bench (issue 5 figures): the real `WasmLoader`, the real
//! static-site component and the embedded API server as a child process (so
//! the RSS measured here is the host's share), as in `engine_bench`.
//!
//! Phases, in one process (plus fresh child processes for the memory figure):
//! 1. **rollouts of changed logic**: N parents Ready on version 0, then
//!    `rollouts` times a new build whose output differs (the default cluster
//!    domain in `status.url`, see [`with_domain`]) is published to the plugin
//!    ConfigMap; timed from the apply returning to: the load returning (the
//!    manager swaps right after), the first reconcile on the new version, the
//!    WasmController status reporting the new digest, and every parent's
//!    status showing the new output;
//! 2. **swaps**: `swaps` times a never-seen build of the same logic (a custom
//!    section makes the digest differ: a compile), then `swaps` flips between
//!    two versions loaded before (in-memory hit); same marks, plus the
//!    plugin-call counter reaching N (every parent re-reconciled; no output
//!    changes, so nothing else shows it). Every swap starts from a quiet engine;
//! 3. **compile vs cache**: `WasmLoader::load` cold (fresh runtime, empty
//!    cache dir: compile + artifact write), cold without a cache dir, from the
//!    disk cache (fresh runtime), and again on the same runtime (in memory),
//!    for static-site and — when built — its JavaScript and Python ports;
//! 4. **memory**: fresh child processes load (and call once) 0, 1 or 10
//!    distinct builds of static-site, and 1 of the Python port; their RSS.
//!
//! API observations (status polls every 5 ms, parent lists every 250 ms) run
//! on their own runtime thread with their own client.
//!
//!     cargo build --release -p wr-tests --bin reload_bench
//!     target/release/reload_bench [parents=1000] [swaps=20] [rollouts=5]

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use wr_engine::wasm::WasmLoader;
use wr_engine::{
    Manager, ManagerHandle, ManagerOptions, PluginError, PluginLoader, ReconcilePlugin,
    WasmController,
};
use wr_runtime::{CallLimits, PluginRuntime, ReconcileRequest, RuntimeConfig};
use wr_tests::bench::{ServerProc, hwm_kib, rss_kib, static_site_ar};
use wr_tests::cluster::install_crd;
use wr_tests::plugins::{plugin_bytes, workspace_root};

const NS: &str = "bench";
const PLUGIN_NS: &str = "wasm-system";
const PLUGIN_CM: &str = "static-site-plugin";
const CONTROLLER: &str = "static-site";
/// Workers of the bench's controller (as in `engine_bench`).
const CONCURRENCY: u32 = 16;
/// The static-site plugin's default cluster domain (`plugins/static-site/src/spec.rs`).
const DOMAIN: &[u8] = b"cluster.local";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("serve-apiserver") => return rt.block_on(serve_apiserver()),
        Some("rss-child") => {
            let n: usize = args.get(1).context("rss-child N [COMPONENT]")?.parse()?;
            let r = rt.block_on(rss_child(n, args.get(2).map(PathBuf::from)))?;
            println!("{}", serde_json::to_string(&r)?);
            return Ok(());
        }
        _ => {}
    }
    let num = |i: usize, d: usize| -> Result<usize> {
        args.get(i)
            .map(|a| a.parse().context("arguments are numbers"))
            .unwrap_or(Ok(d))
    };
    let (parents, swaps, rollouts) = (num(0, 1000)?, num(1, 20)?, num(2, 5)?);
    let site = plugin_bytes("static-site");
    let server = ServerProc::start("serve-apiserver")?;
    let observer = Observer::start(&server.url)?;
    let live = rt.block_on(live(&server, &observer, parents, swaps, rollouts, &site))?;
    drop(observer);
    drop(server);
    let mut compile = vec![rt.block_on(compile_figures("static-site (Rust)", &site, 5))?];
    for (lang, reps) in [("js", 3), ("python", 2)] {
        let path = languages_dir().join(lang).join("static-site.wasm");
        match std::fs::read(&path) {
            Ok(b) => compile.push(rt.block_on(compile_figures(
                &format!("static-site ({lang})"),
                &b,
                reps,
            ))?),
            Err(e) => eprintln!("skipping {lang}: {} not readable: {e}", path.display()),
        }
    }
    let mut memory = Vec::new();
    for n in [0, 1, 10] {
        memory.push(rss_in_child(n, None)?);
    }
    let python = languages_dir().join("python").join("static-site.wasm");
    if python.is_file() {
        memory.push(rss_in_child(1, Some(&python))?);
    }
    let out = json!({"live": live, "compile": compile, "memory": memory});
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `$WR_LANG_OUT`, else `$CARGO_TARGET_DIR/languages`, else `target/languages`
/// (the rule of `plugins/languages/lib.sh`).
fn languages_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WR_LANG_OUT").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("languages")
}

/// `component` with a custom section carrying `tag`: same behaviour, other digest.
fn tagged(component: &[u8], tag: &str) -> Vec<u8> {
    let name = b"reload-bench";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section id
    let mut n = body.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    out.extend_from_slice(&body);
    out
}

/// A build of static-site whose default cluster domain is `cluster.rNNNN`
/// instead of `cluster.local`: the string literal in the data segment is
/// replaced by one of the same length, as a rebuild with another default
/// would. Version 0 is the original. Its effect is visible in every
/// parent's `status.url`.
fn with_domain(component: &[u8], version: u32) -> Result<Vec<u8>> {
    if version == 0 {
        return Ok(component.to_vec());
    }
    let at: Vec<usize> = component
        .windows(DOMAIN.len())
        .enumerate()
        .filter(|(_, w)| *w == DOMAIN)
        .map(|(i, _)| i)
        .collect();
    let [at] = at[..] else {
        bail!(
            "expected exactly one {:?} in the component, found {}",
            String::from_utf8_lossy(DOMAIN),
            at.len()
        );
    };
    let mut out = component.to_vec();
    out[at..at + DOMAIN.len()].copy_from_slice(domain(version).as_bytes());
    Ok(out)
}

fn domain(version: u32) -> String {
    if version == 0 {
        String::from_utf8_lossy(DOMAIN).into_owned()
    } else {
        format!("cluster.r{version:04}")
    }
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

/// When a version's load finished and when its first reconcile started.
#[derive(Clone)]
struct Marks {
    loaded: Instant,
    first_call: Arc<OnceLock<Instant>>,
}

/// The real `WasmLoader`, plus timestamps: when each load returned (the
/// manager swaps right after) and when the loaded version was first called
/// (the first reconcile on it). Engine-internal, so independent of how fast
/// an API client sees the WasmController status.
struct TimingLoader {
    inner: WasmLoader,
    marks: Arc<Mutex<HashMap<String, Marks>>>,
}

impl PluginLoader for TimingLoader {
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>> {
        let digest = wr_engine::plugin_source::digest(&bytes);
        let fut = self.inner.load(bytes);
        let marks = self.marks.clone();
        Box::pin(async move {
            let p = fut.await?;
            let m = Marks {
                loaded: Instant::now(),
                first_call: Arc::new(OnceLock::new()),
            };
            marks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(digest, m.clone());
            Ok(Arc::new(Timed {
                inner: p,
                first_call: m.first_call,
            }) as Arc<dyn ReconcilePlugin>)
        })
    }
}

struct Timed {
    inner: Arc<dyn ReconcilePlugin>,
    first_call: Arc<OnceLock<Instant>>,
}

impl ReconcilePlugin for Timed {
    fn digest(&self) -> &str {
        self.inner.digest()
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<wr_runtime::ReconcileResponse, PluginError>> {
        self.first_call.get_or_init(Instant::now);
        self.inner.reconcile(req, limits)
    }
}

/// (load returned, first call) of `digest` relative to `t0`, once both
/// happened after `sent` (when the apply was sent; an in-memory load can
/// finish before the apply's response is read: then 0).
async fn internal_marks(
    marks: &Mutex<HashMap<String, Marks>>,
    digest: &str,
    sent: Instant,
    t0: Instant,
) -> Result<(f64, f64)> {
    loop {
        let m = marks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(digest)
            .cloned();
        if let Some(m) = m
            && m.loaded >= sent
            && let Some(first) = m.first_call.get()
        {
            return Ok((
                m.loaded.duration_since(t0).as_secs_f64(),
                first.duration_since(t0).as_secs_f64(),
            ));
        }
        if t0.elapsed() > Duration::from_secs(300) {
            bail!("{digest} never loaded and called");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls from its own runtime thread with its own client, so that observing
/// the API is not queued behind the host's tasks in the bench's runtime (as
/// an external client would not be; the 2 CPUs are still shared).
struct Observer {
    rt: tokio::runtime::Runtime,
    wcs: Api<WasmController>,
    sites: Api<DynamicObject>,
}

impl Observer {
    fn start(url: &str) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let url = url.to_string();
        let (wcs, sites) = rt.block_on(async move {
            let client = Client::try_from(kube::Config::new(url.parse()?))?;
            anyhow::Ok((
                Api::<WasmController>::all(client.clone()),
                Api::namespaced_with(client, NS, &static_site_ar()),
            ))
        })?;
        Ok(Self { rt, wcs, sites })
    }

    /// Seconds from `t0` until the WasmController status reports `digest`.
    async fn active(&self, digest: &str, t0: Instant) -> Result<f64> {
        let (wcs, digest) = (self.wcs.clone(), digest.to_string());
        self.rt
            .spawn(async move { until_active(&wcs, &digest, t0).await })
            .await?
    }

    /// Seconds from `t0` until all `n` parents show `domain` in their status.
    async fn all_on(&self, n: usize, domain: &str, t0: Instant) -> Result<f64> {
        let (sites, domain) = (self.sites.clone(), domain.to_string());
        self.rt
            .spawn(async move { until_all_on(&sites, n, &domain, t0).await })
            .await?
    }
}

/// Parents Ready for their current generation whose `status.url` carries `domain`.
fn on_version(list: &[DynamicObject], domain: &str) -> usize {
    let needle = format!(".svc.{domain}:");
    list.iter()
        .filter(|p| {
            let ready = p
                .data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "True"
                            && c["observedGeneration"].as_i64() == p.metadata.generation
                    })
                });
            ready
                && p.data
                    .pointer("/status/url")
                    .and_then(Value::as_str)
                    .is_some_and(|u| u.contains(&needle))
        })
        .count()
}

/// Writes the plugin ConfigMap(s) as `wasm-reconciler publish --apply` does.
async fn publish(client: &Client, component: &[u8]) -> Result<()> {
    let cms = wr_engine::chunked::to_configmaps(
        component,
        PLUGIN_CM,
        PLUGIN_NS,
        wr_engine::plugin_source::DEFAULT_KEY,
        wr_engine::chunked::PublishOptions::default(),
    )?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), PLUGIN_NS);
    let pp = PatchParams::apply("wasm-reconciler-publish").force();
    for cm in &cms {
        let name = cm.metadata.name.clone().context("name")?;
        api.patch(&name, &pp, &Patch::Apply(cm)).await?;
    }
    Ok(())
}

async fn active_digest(api: &Api<WasmController>) -> Option<String> {
    api.get(CONTROLLER).await.ok()?.status?.plugin_digest
}

/// Polls the WasmController every 5 ms until it reports `digest`.
async fn until_active(api: &Api<WasmController>, digest: &str, t0: Instant) -> Result<f64> {
    loop {
        if active_digest(api).await.as_deref() == Some(digest) {
            return Ok(t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > Duration::from_secs(300) {
            bail!("{digest} not active after 300 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls the parents every 250 ms until all `n` show `domain`.
async fn until_all_on(
    sites: &Api<DynamicObject>,
    n: usize,
    domain: &str,
    t0: Instant,
) -> Result<f64> {
    loop {
        let list = sites.list(&ListParams::default()).await?;
        if on_version(&list.items, domain) == n {
            return Ok(t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > Duration::from_secs(600) {
            bail!("parents not on {domain} after 600 s");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the controller's plugin-call counter has not moved for 1.5 s.
async fn quiet(handle: &ManagerHandle) -> Result<()> {
    let stats = handle
        .stats(CONTROLLER)
        .await
        .context("controller running")?;
    let mut last = stats.plugin_calls.load(Ordering::Relaxed);
    let mut still = Instant::now();
    while still.elapsed() < Duration::from_millis(1500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = stats.plugin_calls.load(Ordering::Relaxed);
        if now != last {
            last = now;
            still = Instant::now();
        }
    }
    Ok(())
}

fn percentiles(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| {
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v.get(i).copied().map(ms).unwrap_or(0.0)
    };
    json!({"n": v.len(), "p50_ms": at(0.5), "p99_ms": at(0.99), "min_ms": at(0.0), "max_ms": at(1.0)})
}

fn ms(secs: f64) -> f64 {
    (secs * 10_000.0).round() / 10.0
}

/// One swap's times from the apply returning, in seconds.
struct SwapTimes {
    loaded: f64,
    first_call: f64,
    status: f64,
    all_called: f64,
}

async fn live(
    server: &ServerProc,
    observer: &Observer,
    parents: usize,
    swaps: usize,
    rollouts: usize,
    site: &[u8],
) -> Result<Value> {
    let client = Client::try_from(kube::Config::new(server.url.parse()?))?;
    let engine_client = Client::try_from(wr_engine::engine_config(kube::Config::new(
        server.url.parse()?,
    )))?;
    install_crd(&client, serde_json::to_value(WasmController::crd())?).await?;
    let crd_text = std::fs::read_to_string(workspace_root().join("examples/static-site/crd.yaml"))?;
    install_crd(&client, serde_yaml::from_str(&crd_text)?).await?;
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in [NS, PLUGIN_NS] {
        ns_api
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
            )
            .await?;
    }
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &static_site_ar());
    let results: Vec<Result<DynamicObject, kube::Error>> = futures::stream::iter(0..parents)
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

    let runtime = PluginRuntime::new(RuntimeConfig::default())
        .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
    let marks = Arc::new(Mutex::new(HashMap::new()));
    let loader: Arc<dyn PluginLoader> = Arc::new(TimingLoader {
        inner: WasmLoader::new(runtime.clone()),
        marks: marks.clone(),
    });
    let rss_before = rss_kib();
    publish(&client, site).await?;
    let manager = Manager::new(engine_client.clone(), loader, ManagerOptions::default());
    let handle = manager.handle();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = manager
            .run(async move {
                let _ = stopped.await;
            })
            .await;
    });
    let wc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": CONTROLLER},
        "spec": {
            "parentResource": {"apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "resource": "staticsites"},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"configMap": {"name": PLUGIN_CM, "namespace": PLUGIN_NS}},
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": CONCURRENCY,
        }
    }))?;
    let t = Instant::now();
    Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<WasmController>(&()))
        .create(&PostParams::default(), &wc)
        .await?;
    observer.all_on(parents, &domain(0), t).await?;
    let converge_secs = t.elapsed().as_secs_f64();
    quiet(&handle).await?;
    let rss_one_version = rss_kib();
    let calls = |h: ManagerHandle| async move {
        h.stats(CONTROLLER)
            .await
            .map(|s| s.plugin_calls.load(Ordering::Relaxed))
            .unwrap_or(0)
    };

    // Publishes `bytes` and times the swap; with `domain`, also until every
    // parent's status shows that domain.
    let swap = |bytes: Vec<u8>, domain: Option<String>| {
        let (client, handle, marks) = (client.clone(), handle.clone(), marks.clone());
        async move {
            let digest = wr_engine::plugin_source::digest(&bytes);
            let before = calls(handle.clone()).await;
            let sent = Instant::now();
            publish(&client, &bytes).await?;
            let t0 = Instant::now();
            let all_called = async {
                while calls(handle.clone()).await < before + parents as u64 {
                    if t0.elapsed() > Duration::from_secs(300) {
                        bail!("re-reconcile pass did not finish");
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(t0.elapsed().as_secs_f64())
            };
            let all_on = async {
                match &domain {
                    Some(d) => observer.all_on(parents, d, t0).await.map(Some),
                    None => Ok(None),
                }
            };
            let (internal, status, all_called, all_on) = tokio::join!(
                internal_marks(&marks, &digest, sent, t0),
                observer.active(&digest, t0),
                all_called,
                all_on
            );
            let (loaded, first_call) = internal?;
            let times = SwapTimes {
                loaded,
                first_call,
                status: status?,
                all_called: all_called?,
            };
            let all_on = all_on?;
            quiet(&handle).await?;
            anyhow::Ok((times, all_on, calls(handle.clone()).await - before))
        }
    };

    // 1. Rollouts of changed logic.
    let mut rollout_rows = Vec::new();
    for v in 1..=rollouts as u32 {
        let (t, all_on, n) = swap(with_domain(site, v)?, Some(domain(v))).await?;
        rollout_rows.push(json!({
            "version": v,
            "loaded_ms": ms(t.loaded),
            "first_call_ms": ms(t.first_call),
            "status_ms": ms(t.status),
            "all_parents_status_ms": all_on.map(ms),
            "plugin_calls": n,
        }));
    }
    let logic = with_domain(site, rollouts as u32)?;

    // 2. Swaps: never-seen builds of the same logic, then flips between two known ones.
    let mut new_builds = Vec::new();
    let mut seen = Vec::new();
    for i in 0..swaps {
        let bytes = tagged(&logic, &format!("swap-{i}"));
        new_builds.push(swap(bytes.clone(), None).await?.0);
        seen.push(bytes);
    }
    let mut flips = Vec::new();
    let stats_before = runtime.stats();
    if seen.len() >= 2 {
        for i in 0..swaps {
            let bytes = seen[seen.len() - 2 + (i % 2)].clone();
            flips.push(swap(bytes, None).await?.0);
        }
    }
    let stats_after = runtime.stats();
    let rss_many = rss_kib();
    let versions_loaded = 1 + rollouts + swaps;
    let _ = stop.send(());
    let _ = task.await;
    let summary = |v: &[SwapTimes]| {
        json!({
            "loaded": percentiles(v.iter().map(|t| t.loaded).collect()),
            "first_call": percentiles(v.iter().map(|t| t.first_call).collect()),
            "status": percentiles(v.iter().map(|t| t.status).collect()),
            "all_parents_called": percentiles(v.iter().map(|t| t.all_called).collect()),
        })
    };
    Ok(json!({
        "parents": parents,
        "converge_v0_secs": (converge_secs * 100.0).round() / 100.0,
        "rollouts_changed_logic": rollout_rows,
        "swap_new_build": summary(&new_builds),
        "swap_flip_back": summary(&flips),
        "flip_back_runtime_counters": {
            "compiled": stats_after.compiled - stats_before.compiled,
            "memory_cache_hits": stats_after.memory_cache_hits - stats_before.memory_cache_hits,
        },
        "host_rss_before_manager_kib": rss_before,
        "host_rss_one_version_kib": rss_one_version,
        "host_rss_after_kib": rss_many,
        "versions_loaded_in_live_host": versions_loaded,
    }))
}

fn new_runtime(cache: Option<&Path>) -> Result<PluginRuntime> {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: cache.map(Path::to_path_buf),
        ..RuntimeConfig::default()
    })
    .map_err(|e| anyhow::anyhow!("runtime: {e}"))
}

async fn timed_load(rt: &PluginRuntime, bytes: &[u8]) -> Result<f64> {
    let loader = WasmLoader::new(rt.clone());
    let t = Instant::now();
    loader
        .load(bytes.to_vec())
        .await
        .map_err(|e| anyhow::anyhow!("load: {e}"))?;
    Ok(t.elapsed().as_secs_f64())
}

/// Compile vs caches for one component, `reps` distinct builds (custom section).
async fn compile_figures(name: &str, component: &[u8], reps: usize) -> Result<Value> {
    let dir = tempfile::tempdir()?;
    let (mut cold, mut cold_nodisk, mut disk, mut mem) = (vec![], vec![], vec![], vec![]);
    for i in 0..reps {
        let bytes = tagged(component, &format!("compile-{i}"));
        let plain = new_runtime(None)?;
        cold_nodisk.push(timed_load(&plain, &bytes).await?);
        let a = new_runtime(Some(dir.path()))?;
        cold.push(timed_load(&a, &bytes).await?);
        let b = new_runtime(Some(dir.path()))?;
        disk.push(timed_load(&b, &bytes).await?);
        mem.push(timed_load(&b, &bytes).await?);
        let (sa, sb, sp) = (a.stats(), b.stats(), plain.stats());
        if sp.compiled != 1
            || sa.compiled != 1
            || sa.disk_cache_writes != 1
            || sb.compiled != 0
            || sb.disk_cache_hits != 1
            || sb.memory_cache_hits != 1
        {
            bail!("{name}: unexpected cache counters: plain {sp:?} cold {sa:?} warm {sb:?}");
        }
    }
    Ok(json!({
        "component": name,
        "bytes": component.len(),
        "cold_compile_no_cache_dir": percentiles(cold_nodisk),
        "cold_compile_and_write_artifact": percentiles(cold),
        "disk_cache_hit": percentiles(disk),
        "memory_hit": percentiles(mem),
    }))
}

/// Runs `rss-child n [component]` in a fresh process.
fn rss_in_child(n: usize, component: Option<&Path>) -> Result<Value> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["rss-child", &n.to_string()]);
    if let Some(c) = component {
        cmd.arg(c);
    }
    let out = cmd.stderr(Stdio::inherit()).output()?;
    if !out.status.success() {
        bail!("rss-child {n} failed");
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Child mode: load `n` distinct builds of static-site (or of `component`)
/// and call each once.
async fn rss_child(n: usize, component: Option<PathBuf>) -> Result<Value> {
    let site = match &component {
        Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => plugin_bytes("static-site"),
    };
    let runtime = new_runtime(None)?;
    let loader = WasmLoader::new(runtime.clone());
    let before = rss_kib();
    let req = ReconcileRequest {
        parent: json!({
            "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
            "metadata": {"name": "site", "namespace": NS, "uid": "u1"},
            "spec": {"image": "nginx:1.27", "replicas": 2, "port": 8080,
                     "content": {"index.html": "<h1>site</h1>"}}
        }),
        children: vec![],
        related: vec![],
        finalizing: false,
        config: None,
        now: "2026-11-30T12:00:00Z".into(),
    };
    let limits = CallLimits::default();
    let mut plugins = Vec::new();
    let mut call_errors = Vec::new();
    for i in 0..n {
        let p = loader
            .load(tagged(&site, &format!("rss-{i}")))
            .await
            .map_err(|e| anyhow::anyhow!("load: {e}"))?;
        if let Err(e) = p.reconcile(&req, &limits).await {
            call_errors.push(format!("{e:?}"));
        }
        plugins.push(p);
    }
    let after = rss_kib();
    let stats = runtime.stats();
    Ok(json!({
        "component": component.map(|p| p.display().to_string()).unwrap_or_else(|| "static-site (Rust)".into()),
        "bytes": site.len(),
        "versions": n,
        "call_errors": call_errors,
        "compiled": stats.compiled,
        "rss_runtime_only_kib": before,
        "rss_loaded_kib": after,
        "peak_rss_kib": hwm_kib(),
    }))
}
