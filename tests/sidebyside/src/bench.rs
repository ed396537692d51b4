//! The orchestrator: per N and round, each variant in turn (rotated order)
//! against a fresh API server child process, through four workloads:
//!
//! 1. `converge`: N parents exist, the controller starts, until every parent
//!    is Ready for its generation;
//! 2. `update`: a spec change (new content) on every parent, until every
//!    parent is Ready for its new generation;
//! 3. `tamper`: every Deployment scaled by hand and every 10th ConfigMap
//!    deleted, until all are restored;
//! 4. `resync`: every parent enqueued once in the running controller (a
//!    periodic resync of the converged fleet), until each was reconciled;
//! 5. `restart`: the controller process is restarted on the converged state,
//!    until it has reconciled every parent once.
//!
//! After each "done" the bench waits until the objects are quiet for 2 s
//! (no watch event) and reports what happened in between separately.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wr_apiserver::RequestRecord;

use crate::native::site_ar;
use crate::procs::Proc;
use crate::reqlog::{BENCH_AGENT, CONTROLLER_AGENT, Counts, count, minus};
use crate::samples::ChildStats;
use crate::stats::{Summary, summarize};
use crate::track::{Tracker, rv, wait_quiet};

/// Namespace of the bench objects.
pub const NS: &str = "bench";
/// Concurrency of the bench's own writes (parent creates, update wave, tampering).
const BENCH_CONCURRENCY: usize = 32;
/// Workers of every controller variant (and of the raw-write client).
pub const CONTROLLER_CONCURRENCY: usize = 16;
const QUIET: Duration = Duration::from_secs(2);
const LONG: Duration = Duration::from_secs(1800);

/// The ways of running the logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The host with the WASM component.
    Wasm,
    /// kube-runtime with the logic compiled in.
    Native,
    /// The host calling an HTTP hook on loopback (the webhook's best case).
    Webhook,
    /// The same hook with an added delay per call (`--hook-rtt-ms`): the
    /// network round trip of an in-cluster Service hop, which loopback lacks.
    #[serde(rename = "webhook-rtt")]
    WebhookRtt,
}

impl Variant {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Wasm => "wasm",
            Variant::Native => "native",
            Variant::Webhook => "webhook",
            Variant::WebhookRtt => "webhook-rtt",
        }
    }

    /// Whether a hook process serves the logic.
    pub fn has_hook(self) -> bool {
        matches!(self, Variant::Webhook | Variant::WebhookRtt)
    }

    /// Parses a lowercase name.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "wasm" => Variant::Wasm,
            "native" => Variant::Native,
            "webhook" => Variant::Webhook,
            "webhook-rtt" => Variant::WebhookRtt,
            other => bail!("unknown variant {other:?} (wasm, native, webhook, webhook-rtt)"),
        })
    }
}

/// `variants` rotated left by `round`: A B C, B C A, C A B, ...
pub fn rotation<T: Copy>(variants: &[T], round: usize) -> Vec<T> {
    let n = variants.len().max(1);
    (0..variants.len())
        .map(|i| variants[(i + round) % n])
        .collect()
}

/// One workload of one variant run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    /// `converge`, `update`, `tamper`, `resync`.
    pub name: String,
    /// Seconds until done.
    pub secs: f64,
    /// Further seconds until quiet (excluding the 2 s quiet window itself).
    pub settle_secs: f64,
    /// Controller requests until done.
    pub requests: Counts,
    /// Controller requests after done until quiet.
    pub settle_requests: Counts,
    /// Controller writes until done per second until done.
    pub write_rate: f64,
    /// Reconciles run (until quiet).
    pub reconciles: u64,
    /// Controller process CPU seconds (until quiet).
    pub cpu_secs: f64,
    /// Hook process CPU seconds (webhook only).
    pub hook_cpu_secs: Option<f64>,
    /// API server CPU seconds.
    pub apiserver_cpu_secs: f64,
    /// Controller process peak RSS during the workload, KiB.
    pub peak_rss_kib: u64,
    /// Hook process peak RSS, KiB (webhook only).
    pub hook_peak_rss_kib: Option<u64>,
    /// Latency summaries by sample set (see `samples::set`), ms.
    pub latency_ms: BTreeMap<String, Summary>,
}

/// One variant, one N, one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantRun {
    /// Which variant.
    pub variant: Variant,
    /// Parents.
    pub n: usize,
    /// Round (0-based).
    pub round: usize,
    /// Position in this round's order (0 = first).
    pub position: usize,
    /// Seconds the bench took to create the N parents.
    pub create_parents_secs: f64,
    /// The workloads in order.
    pub workloads: Vec<Workload>,
}

/// The API server's raw write rate for the same objects.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawRun {
    /// Parents.
    pub n: usize,
    /// Round.
    pub round: usize,
    /// Writes made: 3 child creates, 1 status patch, 3 events per parent.
    pub writes: u64,
    /// Seconds.
    pub secs: f64,
    /// Writes per second.
    pub rate: f64,
    /// API server CPU seconds.
    pub apiserver_cpu_secs: f64,
}

/// Objects of one converged parent (for the offline breakdown).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// The parent as served.
    pub parent: Value,
    /// Its three children as served.
    pub children: Vec<Value>,
}

/// What the bench needs from main.
pub struct Opts {
    /// Component path (static-site).
    pub wasm: PathBuf,
    /// The runtime's compile cache (warmed before any run).
    pub cache: PathBuf,
    /// Delay added to every hook call of the `webhook-rtt` variant, µs.
    pub hook_rtt_us: u64,
    /// Stop each variant run after `converge` (the scale runs).
    pub converge_only: bool,
    /// Skip the `restart` workload.
    pub no_restart: bool,
}

/// The bench's kube client and the server's admin API.
pub struct Cluster {
    /// API server child.
    pub server: Proc,
    /// URL.
    pub url: String,
    /// Bench client.
    pub client: Client,
}

impl Cluster {
    /// A fresh API server with the CRDs and the namespace.
    pub async fn start() -> Result<Self> {
        let server = Proc::spawn(&["serve-apiserver"])?;
        let url = server.hello.clone();
        let client = crate::client::build(&url, BENCH_AGENT, None, false)?;
        wr_tests::cluster::install_crd(
            &client,
            serde_json::to_value(wr_engine::WasmController::crd())?,
        )
        .await?;
        let crd_text = std::fs::read_to_string(
            wr_tests::plugins::workspace_root().join("examples/static-site/crd.yaml"),
        )?;
        wr_tests::cluster::install_crd(&client, serde_yaml::from_str(&crd_text)?).await?;
        let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        ns_api
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
            )
            .await?;
        Ok(Self {
            server,
            url,
            client,
        })
    }

    async fn admin(&self, method: &str, what: &str) -> Result<String> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("/_wr/admin/{what}"))
            .body(Vec::new())?;
        Ok(self.client.request_text(req).await?)
    }

    /// The request log.
    pub async fn log(&self) -> Result<Vec<RequestRecord>> {
        Ok(serde_json::from_str(&self.admin("GET", "requests").await?)?)
    }

    /// Empties the request log.
    pub async fn clear_log(&self) -> Result<()> {
        self.admin("DELETE", "requests").await.map(|_| ())
    }

    /// Parents.
    pub fn sites(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NS, &site_ar())
    }

    /// Creates N parents; returns their uids in order.
    pub async fn create_parents(&self, n: usize) -> Result<Vec<String>> {
        let sites = self.sites();
        let results: Vec<Result<DynamicObject>> = futures::stream::iter(0..n)
            .map(|i| {
                let sites = sites.clone();
                async move {
                    let obj: DynamicObject = serde_json::from_value(parent_json(i))?;
                    Ok(sites.create(&PostParams::default(), &obj).await?)
                }
            })
            .buffered(BENCH_CONCURRENCY)
            .collect()
            .await;
        results
            .into_iter()
            .map(|r| r.map(|o| o.metadata.uid.unwrap_or_default()))
            .collect()
    }
}

/// Name of parent `i`.
pub fn parent_name(i: usize) -> String {
    format!("site-{i:05}")
}

/// Parent `i` as created.
pub fn parent_json(i: usize) -> Value {
    json!({
        "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
        "metadata": {"name": parent_name(i), "namespace": NS},
        "spec": {"image": "nginx:1.27", "replicas": 2, "port": 8080,
                 "content": {"index.html": format!("<h1>site {i}</h1>")}}
    })
}

/// Ready=True for the parent's current generation.
pub fn ready_for_generation(p: &DynamicObject) -> bool {
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
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// Deployment resource.
pub fn deployments() -> ApiResource {
    resource("apps", "v1", "Deployment", "deployments")
}

/// ConfigMap resource.
pub fn configmaps() -> ApiResource {
    resource("", "v1", "ConfigMap", "configmaps")
}

/// Service resource.
pub fn services() -> ApiResource {
    resource("", "v1", "Service", "services")
}

/// The controller process(es) of one variant.
struct Controller {
    ctl: Proc,
    hook: Option<Proc>,
}

impl Controller {
    fn start(v: Variant, url: &str, hook: Option<&Proc>, opts: &Opts) -> Result<Proc> {
        let wrap = controller_wrapper();
        match v {
            // A kube-rs controller runs on the system allocator by default.
            Variant::Native => Proc::spawn_wrapped(
                &wrap,
                &[(crate::alloc::ENV, "system")],
                &["controller", "native", "--api", url],
            ),
            Variant::Wasm => Proc::spawn_wrapped(
                &wrap,
                &[],
                &[
                    "controller",
                    "wasm",
                    "--api",
                    url,
                    "--cache",
                    &opts.cache.display().to_string(),
                ],
            ),
            Variant::Webhook | Variant::WebhookRtt => {
                let hook = hook.context("webhook needs its hook")?;
                let rtt = if v == Variant::WebhookRtt {
                    opts.hook_rtt_us
                } else {
                    0
                };
                Proc::spawn_wrapped(
                    &wrap,
                    &[],
                    &[
                        "controller",
                        "webhook",
                        "--api",
                        url,
                        "--hook",
                        &hook.hello,
                        "--rtt-us",
                        &rtt.to_string(),
                    ],
                )
            }
        }
    }

    /// Stops the controller and its hook.
    fn stop(self) -> Result<()> {
        self.ctl.stop()?;
        if let Some(h) = self.hook {
            h.stop()?;
        }
        Ok(())
    }

    fn stats(&mut self) -> Result<ChildStats> {
        Ok(serde_json::from_str(&self.ctl.ask("stats")?)?)
    }

    fn count(&mut self) -> Result<u64> {
        let s: ChildStats = serde_json::from_str(&self.ctl.ask("count")?)?;
        Ok(s.reconciles)
    }
}

/// `SIDEBYSIDE_CONTROLLER_WRAP`: a command the controller processes run under,
/// split at spaces — e.g. `valgrind --tool=callgrind
/// --callgrind-out-file=/tmp/cg/%p.out` for an instruction profile of the
/// host (docs/benchmarks.md, "Host cost per reconcile").
fn controller_wrapper() -> Vec<String> {
    std::env::var("SIDEBYSIDE_CONTROLLER_WRAP")
        .map(|w| w.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Under callgrind, dumps the controller's counts so far as one part named
/// after the workload (`callgrind_control -d`), so each workload's profile is
/// its own. A failed dump is reported, not fatal: the figures still hold.
fn dump_profile(c: &Controller, workload: &str) {
    if !controller_wrapper().iter().any(|w| w.contains("callgrind")) {
        return;
    }
    let pid = c.ctl.pid().to_string();
    match std::process::Command::new("callgrind_control")
        .args(["-d", workload, &pid])
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => eprintln!(
            "[sidebyside] callgrind_control -d {workload} {pid}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("[sidebyside] callgrind_control: {e}"),
    }
}

/// The WasmController's `maxConcurrentReconciles`: [`CONTROLLER_CONCURRENCY`]
/// unless `SIDEBYSIDE_CONCURRENCY` says otherwise (a profile under valgrind
/// runs with a small instance pool and so with as many concurrent reconciles).
fn controller_concurrency() -> usize {
    std::env::var("SIDEBYSIDE_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CONTROLLER_CONCURRENCY)
}

/// Start-of-workload readings.
struct Meter {
    started: Instant,
    cpu: f64,
    hook_cpu: f64,
    api_cpu: f64,
    reconciles: u64,
}

impl Meter {
    async fn begin(c: &mut Controller, cluster: &Cluster) -> Result<Self> {
        c.ctl.reset_peak();
        if let Some(h) = &c.hook {
            h.reset_peak();
        }
        let s = c.stats()?; // drains samples of the previous workload
        cluster.clear_log().await?;
        Ok(Self {
            started: Instant::now(),
            cpu: c.ctl.cpu_secs(),
            hook_cpu: c.hook.as_ref().map_or(0.0, Proc::cpu_secs),
            api_cpu: cluster.server.cpu_secs(),
            reconciles: s.reconciles,
        })
    }

    /// For a freshly started controller process: everything since its start.
    fn fresh(cluster: &Cluster, started: Instant) -> Self {
        Self {
            started,
            cpu: 0.0,
            hook_cpu: 0.0,
            api_cpu: cluster.server.cpu_secs(),
            reconciles: 0,
        }
    }

    /// Call when done: takes the log, waits for quiet, takes it again.
    async fn end(
        self,
        name: &str,
        c: &mut Controller,
        cluster: &Cluster,
        trackers: &[&Tracker],
    ) -> Result<Workload> {
        let secs = self.started.elapsed().as_secs_f64();
        let at_done = count(&cluster.log().await?, CONTROLLER_AGENT);
        let t = Instant::now();
        wait_quiet(trackers, QUIET, LONG).await?;
        let settle_secs = (t.elapsed().as_secs_f64() - QUIET.as_secs_f64()).max(0.0);
        let at_quiet = count(&cluster.log().await?, CONTROLLER_AGENT);
        let stats = c.stats()?;
        dump_profile(c, name);
        let latency_ms = stats
            .samples_ms
            .iter()
            .map(|(k, v)| (k.clone(), summarize(v)))
            .collect();
        Ok(Workload {
            name: name.into(),
            secs,
            settle_secs,
            write_rate: at_done.writes as f64 / secs,
            settle_requests: minus(&at_quiet, &at_done),
            requests: at_done,
            reconciles: stats.reconciles.saturating_sub(self.reconciles),
            cpu_secs: c.ctl.cpu_secs() - self.cpu,
            hook_cpu_secs: c.hook.as_ref().map(|h| h.cpu_secs() - self.hook_cpu),
            apiserver_cpu_secs: cluster.server.cpu_secs() - self.api_cpu,
            peak_rss_kib: c.ctl.peak_rss_kib(),
            hook_peak_rss_kib: c.hook.as_ref().map(Proc::peak_rss_kib),
            latency_ms,
        })
    }
}

/// Applies `f` to 0..n with the bench's concurrency; returns the highest
/// resourceVersion of the results.
async fn wave<F, Fut>(n: usize, f: F) -> Result<u64>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let rvs: Vec<Result<u64>> = futures::stream::iter(0..n)
        .map(f)
        .buffer_unordered(BENCH_CONCURRENCY)
        .collect()
        .await;
    let mut max = 0;
    for r in rvs {
        max = max.max(r?);
    }
    Ok(max)
}

/// Runs the four workloads for one variant on a fresh API server.
pub async fn run_variant(
    v: Variant,
    n: usize,
    round: usize,
    position: usize,
    opts: &Opts,
    want_sample: bool,
) -> Result<(VariantRun, Option<Sample>)> {
    eprintln!("[sidebyside] N={n} round={round} variant={}", v.name());
    let cluster = Cluster::start().await?;
    let t = Instant::now();
    cluster.create_parents(n).await?;
    let create_parents_secs = t.elapsed().as_secs_f64();

    let parents = Tracker::start(cluster.sites(), Arc::new(ready_for_generation));
    let deploys = Tracker::start(
        Api::namespaced_with(cluster.client.clone(), NS, &deployments()),
        Arc::new(|d: &DynamicObject| d.data.pointer("/spec/replicas") == Some(&json!(2))),
    );
    let cms = Tracker::start(
        Api::namespaced_with(cluster.client.clone(), NS, &configmaps()),
        Arc::new(|_: &DynamicObject| true),
    );
    parents
        .wait("parents listed", 0, LONG, |total, _| total == n)
        .await?;
    let all = [&parents, &deploys, &cms];

    let hook = if v.has_hook() {
        Some(Proc::spawn(&["hook"])?)
    } else {
        None
    };
    if v != Variant::Native {
        create_wasm_controller(&cluster.client, &opts.wasm).await?;
    }

    // 1. converge from empty.
    cluster.clear_log().await?;
    let started = Instant::now();
    let mut c = Controller {
        ctl: Controller::start(v, &cluster.url, hook.as_ref(), opts)?,
        hook,
    };
    parents
        .wait("converge", 0, LONG, |total, ok| total == n && ok == n)
        .await?;
    let mut workloads = vec![
        Meter::fresh(&cluster, started)
            .end("converge", &mut c, &cluster, &all)
            .await?,
    ];
    // The hook's CPU for converge: everything since it started.
    if let (Some(h), Some(w)) = (&c.hook, workloads.last_mut()) {
        w.hook_cpu_secs = Some(h.cpu_secs());
    }
    if opts.converge_only {
        c.stop()?;
        return Ok((
            VariantRun {
                variant: v,
                n,
                round,
                position,
                create_parents_secs,
                workloads,
            },
            None,
        ));
    }

    // 2. spec-update wave.
    let m = Meter::begin(&mut c, &cluster).await?;
    let sites = cluster.sites();
    let max_rv = wave(n, |i| {
        let sites = sites.clone();
        async move {
            let patch =
                json!({"spec": {"content": {"index.html": format!("<h1>site {i} v2</h1>")}}});
            let o = sites
                .patch(
                    &parent_name(i),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            Ok(rv(&o))
        }
    })
    .await?;
    parents
        .wait("update", max_rv, LONG, |total, ok| total == n && ok == n)
        .await?;
    workloads.push(m.end("update", &mut c, &cluster, &all).await?);

    // 3. tampering burst: every Deployment scaled, every 10th ConfigMap deleted.
    let m = Meter::begin(&mut c, &cluster).await?;
    let dapi: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), NS, &deployments());
    let capi: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), NS, &configmaps());
    let max_rv = wave(n, |i| {
        let (dapi, capi) = (dapi.clone(), capi.clone());
        async move {
            let name = parent_name(i);
            let pp = PatchParams {
                field_manager: Some("tamper".into()),
                ..PatchParams::default()
            };
            let o = dapi
                .patch(&name, &pp, &Patch::Merge(&json!({"spec": {"replicas": 7}})))
                .await?;
            let mut max = rv(&o);
            if i % 10 == 0 {
                let del = capi
                    .delete(&format!("{name}-content"), &DeleteParams::default())
                    .await?;
                if let Some(o) = del.left() {
                    max = max.max(rv(&o));
                }
            }
            Ok(max)
        }
    })
    .await?;
    deploys
        .wait("tamper: deployments", max_rv, LONG, |total, ok| {
            total == n && ok == n
        })
        .await?;
    cms.wait("tamper: configmaps", max_rv, LONG, |total, _| total == n)
        .await?;
    workloads.push(m.end("tamper", &mut c, &cluster, &all).await?);

    let sample = if want_sample {
        Some(sample(&cluster).await?)
    } else {
        None
    };

    // 4. resync in the running process: every parent enqueued once on the
    // converged fleet (the host memoises: no plugin call, no write). First
    // the controller goes idle: passes that write nothing (the tamper's
    // last passes, the host's memo passes) make no watch event, so "quiet"
    // above does not mean they are done; a resync enqueued while they are
    // queued would coalesce with them and count their calls.
    let idle_since = Instant::now();
    let mut last = c.count()?;
    let mut still = Instant::now();
    while still.elapsed() < Duration::from_secs(1) && idle_since.elapsed() < LONG {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = c.count()?;
        if now != last {
            (last, still) = (now, Instant::now());
        }
    }
    let m = Meter::begin(&mut c, &cluster).await?;
    let target = m.reconciles + n as u64;
    c.ctl.ask("resync")?;
    loop {
        if c.count()? >= target {
            break;
        }
        if m.started.elapsed() > LONG {
            bail!("resync did not finish");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    workloads.push(m.end("resync", &mut c, &cluster, &all).await?);

    if opts.no_restart {
        c.stop()?;
        return Ok((
            VariantRun {
                variant: v,
                n,
                round,
                position,
                create_parents_secs,
                workloads,
            },
            sample,
        ));
    }

    // 5. restart: a fresh controller process on converged parents.
    let Controller { ctl, hook } = c;
    ctl.stop()?;
    cluster.clear_log().await?;
    let started = Instant::now();
    let mut c = Controller {
        ctl: Controller::start(v, &cluster.url, hook.as_ref(), opts)?,
        hook,
    };
    let hook_cpu0 = c.hook.as_ref().map_or(0.0, Proc::cpu_secs);
    if let Some(h) = &c.hook {
        h.reset_peak();
    }
    loop {
        if c.count()? >= n as u64 {
            break;
        }
        if started.elapsed() > LONG {
            bail!("restart did not finish");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut w = Meter::fresh(&cluster, started)
        .end("restart", &mut c, &cluster, &all)
        .await?;
    if let Some(h) = &c.hook {
        w.hook_cpu_secs = Some(h.cpu_secs() - hook_cpu0);
    }
    workloads.push(w);

    c.stop()?;
    Ok((
        VariantRun {
            variant: v,
            n,
            round,
            position,
            create_parents_secs,
            workloads,
        },
        sample,
    ))
}

async fn create_wasm_controller(client: &Client, wasm: &std::path::Path) -> Result<()> {
    let wc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1", "kind": "WasmController",
        "metadata": {"name": crate::hosted::CONTROLLER},
        "spec": {
            "parentResource": {"apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "resource": "staticsites"},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}],
            "plugin": {"path": wasm.display().to_string(), "config": crate::logic::config()},
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": controller_concurrency(),
        }
    }))?;
    Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::erase::<wr_engine::WasmController>(&()),
    )
    .create(&PostParams::default(), &wc)
    .await?;
    Ok(())
}

async fn sample(cluster: &Cluster) -> Result<Sample> {
    let name = parent_name(0);
    let parent = cluster.sites().get(&name).await?;
    let mut children = Vec::new();
    for (ar, cname) in [
        (configmaps(), format!("{name}-content")),
        (deployments(), name.clone()),
        (services(), name.clone()),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), NS, &ar);
        let mut o = api.get(&cname).await?;
        o.metadata.managed_fields = None;
        children.push(serde_json::to_value(o)?);
    }
    let mut parent = parent;
    parent.metadata.managed_fields = None;
    Ok(Sample {
        parent: serde_json::to_value(parent)?,
        children,
    })
}

/// The physical limit: the same converge writes (3 child creates, 1 status
/// patch, 3 events per parent) by one client with the controllers'
/// concurrency, no controller, no reads.
pub async fn run_raw(n: usize, round: usize) -> Result<RawRun> {
    eprintln!("[sidebyside] N={n} round={round} raw writes");
    let cluster = Cluster::start().await?;
    let uids = cluster.create_parents(n).await?;
    // Everything computed before the clock starts: only writes are timed.
    let mut work = Vec::with_capacity(n);
    for (i, uid) in uids.iter().enumerate() {
        let mut parent = parent_json(i);
        parent["metadata"]["uid"] = json!(uid);
        let req = wr_runtime::ReconcileRequest {
            parent,
            children: vec![],
            related: vec![],
            finalizing: false,
            config: Some(crate::logic::config()),
            now: "2026-11-30T00:00:00Z".into(),
        };
        let resp = crate::logic::reconcile(req).map_err(|e| anyhow::anyhow!("{e}"))?;
        let owner = wr_engine::apply::OwnerRef {
            api_version: site_ar().api_version,
            kind: "StaticSite".into(),
            name: parent_name(i),
            uid: uid.clone(),
        };
        let children: Vec<Value> = resp
            .children
            .iter()
            .map(|c| wr_engine::apply::desired_object(c, &owner))
            .collect();
        let mut status = resp.status.clone().unwrap_or(json!({}));
        status["conditions"] = json!([{"type": "Ready", "status": "True", "reason": "Reconciled",
            "message": "", "lastTransitionTime": "2026-11-30T00:00:00Z", "observedGeneration": 1}]);
        work.push((i, uid.clone(), children, status));
    }
    let client = cluster.client.clone();
    let before = cluster.server.cpu_secs();
    let started = Instant::now();
    let results: Vec<Result<u64>> = futures::stream::iter(work)
        .map(|(i, uid, children, status)| {
            let client = client.clone();
            async move {
                let name = parent_name(i);
                let events = async {
                    let api: Api<k8s_openapi::api::core::v1::Event> =
                        Api::namespaced(client.clone(), NS);
                    for (k, kind) in ["ConfigMap", "Deployment", "Service"].iter().enumerate() {
                        let ev: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
                            "metadata": {"name": format!("{name}.{k}"), "namespace": NS},
                            "involvedObject": {"apiVersion": site_ar().api_version, "kind": "StaticSite",
                                               "name": name, "namespace": NS, "uid": uid},
                            "reason": "ChildCreated", "message": format!("created {kind} {name}"),
                            "type": "Normal", "count": 1,
                        }))?;
                        api.create(&PostParams::default(), &ev).await?;
                    }
                    anyhow::Ok(3u64)
                };
                let writes = async {
                    for c in &children {
                        let ar = match c["kind"].as_str() {
                            Some("ConfigMap") => configmaps(),
                            Some("Deployment") => deployments(),
                            _ => services(),
                        };
                        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
                        let obj: DynamicObject = serde_json::from_value(c.clone())?;
                        api.create(&PostParams::default(), &obj).await?;
                    }
                    let sites: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), NS, &site_ar());
                    sites
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
                        .await?;
                    anyhow::Ok(children.len() as u64 + 1)
                };
                let (a, b) = futures::join!(events, writes);
                Ok(a? + b?)
            }
        })
        .buffer_unordered(CONTROLLER_CONCURRENCY)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let mut writes = 0;
    for r in results {
        writes += r?;
    }
    Ok(RawRun {
        n,
        round,
        writes,
        secs,
        rate: writes as f64 / secs,
        apiserver_cpu_secs: cluster.server.cpu_secs() - before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotations_alternate_the_order() {
        let v = [Variant::Wasm, Variant::Native, Variant::Webhook];
        assert_eq!(rotation(&v, 0), v);
        assert_eq!(
            rotation(&v, 1),
            [Variant::Native, Variant::Webhook, Variant::Wasm]
        );
        assert_eq!(rotation(&v, 3), v);
        assert_eq!(Variant::parse("webhook").unwrap(), Variant::Webhook);
        assert_eq!(Variant::parse("webhook-rtt").unwrap(), Variant::WebhookRtt);
        assert_eq!(
            serde_json::to_string(&Variant::WebhookRtt).unwrap(),
            "\"webhook-rtt\""
        );
        assert!(Variant::parse("grpc").is_err());
    }

    #[test]
    fn readiness_is_per_generation() {
        let mut p: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "x/v1", "kind": "StaticSite",
            "metadata": {"name": "a", "generation": 2},
            "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}
        }))
        .unwrap();
        assert!(!ready_for_generation(&p));
        p.metadata.generation = Some(1);
        assert!(ready_for_generation(&p));
    }
}
