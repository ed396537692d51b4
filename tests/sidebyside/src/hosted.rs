//! Variants 1 and 3 (controller child process): the host's `wr_engine::Manager`
//! running the static-site WasmController with either
//! * the WASM component (`wasm`): the same `wr_runtime::Plugin` the
//!   production `WasmLoader` wraps, called through `reconcile_timed` so the
//!   instantiate / call split is recorded (two `Instant` reads per call), or
//! * a `ReconcilePlugin` that POSTs the request as JSON to the hook server
//!   (`webhook`, the Metacontroller sync-hook model).
//!
//! Reconcile and plugin-call latencies come from the engine's own
//! `EngineObserver`; API request times from a layer on the client.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use wr_engine::{
    EngineObserver, FaultKind, PluginError, PluginLoader, ReconcilePlugin, ReconcileResult,
};
use wr_runtime::{CallLimits, PluginRuntime, ReconcileRequest, ReconcileResponse};

use crate::logic::LogicError;
use crate::procs::{say, stdin_commands};
use crate::samples::{ChildStats, Samples, set};

/// Name of the WasmController the bench creates.
pub const CONTROLLER: &str = "static-site";

struct Observer(Arc<Samples>);

impl EngineObserver for Observer {
    fn reconcile_finished(&self, _: &str, _: ReconcileResult, took: Duration) {
        self.0.add(set::RECONCILE, took);
    }
    fn plugin_call(&self, _: &str, took: Duration, _: Option<FaultKind>) {
        self.0.add(set::LOGIC, took);
    }
}

/// Loads components with the runtime; records CallTimings.
struct TimedWasmLoader {
    runtime: PluginRuntime,
    samples: Arc<Samples>,
}

impl PluginLoader for TimedWasmLoader {
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>> {
        let rt = self.runtime.clone();
        let samples = self.samples.clone();
        Box::pin(async move {
            let loaded = tokio::task::spawn_blocking(move || rt.load(&bytes))
                .await
                .map_err(|e| format!("plugin load task failed: {e}"))?;
            loaded
                .map(|plugin| Arc::new(TimedWasm { plugin, samples }) as Arc<dyn ReconcilePlugin>)
                .map_err(|e| e.to_string())
        })
    }
}

struct TimedWasm {
    plugin: wr_runtime::Plugin,
    samples: Arc<Samples>,
}

impl ReconcilePlugin for TimedWasm {
    fn digest(&self) -> &str {
        self.plugin.digest()
    }

    // What the production wrapper (`wr_engine::wasm`) reports: the contract
    // and `reads-now`, which decide whether a reconcile may be memoised.
    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        Some(*self.plugin.info())
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move {
            let (r, t) = self.plugin.reconcile_timed(req, limits).await;
            self.samples.add(set::INSTANTIATE, t.instantiate);
            self.samples.add(set::WASM_CALL, t.call);
            r.map_err(wr_engine::wasm::map_error)
        })
    }

    // What the engine calls: the request text it already made for its memo
    // hash goes to the wire as is (as in `wr_engine::wasm`).
    fn reconcile_text<'a>(
        &'a self,
        _req: &'a ReconcileRequest,
        text: wr_runtime::RequestText,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move {
            let (r, t) = self.plugin.reconcile_text_timed(text, limits).await;
            self.samples.add(set::INSTANTIATE, t.instantiate);
            self.samples.add(set::WASM_CALL, t.call);
            r.map_err(wr_engine::wasm::map_error)
        })
    }
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// "Loads" the webhook: the component bytes only give the digest.
struct HookLoader {
    url: String,
    http: HttpClient,
    samples: Arc<Samples>,
    rtt: Duration,
}

impl PluginLoader for HookLoader {
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>> {
        let plugin = HookPlugin {
            digest: wr_engine::plugin_source::digest(&bytes),
            url: format!("{}/sync", self.url.trim_end_matches('/')),
            http: self.http.clone(),
            samples: self.samples.clone(),
            rtt: self.rtt,
        };
        Box::pin(async move { Ok(Arc::new(plugin) as Arc<dyn ReconcilePlugin>) })
    }
}

struct HookPlugin {
    digest: String,
    url: String,
    http: HttpClient,
    samples: Arc<Samples>,
    /// Added to every call: the network round trip loopback does not have.
    rtt: Duration,
}

fn transient(reason: &str, e: impl std::fmt::Display) -> PluginError {
    PluginError::Transient {
        reason: reason.into(),
        message: e.to_string(),
    }
}

impl HookPlugin {
    async fn call(&self, req: &ReconcileRequest) -> Result<ReconcileResponse, PluginError> {
        let body = serde_json::to_vec(req).map_err(|e| transient("HookEncode", e))?;
        let request = http::Request::post(&self.url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| transient("HookRequest", e))?;
        let resp = self
            .http
            .request(request)
            .await
            .map_err(|e| transient("HookUnreachable", e))?;
        if !self.rtt.is_zero() {
            // The reconcile awaits the delay like a network round trip (the
            // worker is free meanwhile). tokio's timer has 1 ms granularity,
            // so the delay actually taken is recorded as its own sample set.
            let t = Instant::now();
            tokio::time::sleep(self.rtt).await;
            self.samples.add(set::HOOK_RTT, t.elapsed());
        }
        let status = resp.status();
        if let Some(us) = resp
            .headers()
            .get(crate::hook::HANDLER_MICROS)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            self.samples
                .add(set::HOOK_HANDLER, Duration::from_micros(us));
        }
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| transient("HookUnreachable", e))?
            .to_bytes();
        match status {
            http::StatusCode::OK => {
                serde_json::from_slice(&bytes).map_err(|e| PluginError::Permanent {
                    reason: "InvalidPluginOutput".into(),
                    message: e.to_string(),
                })
            }
            http::StatusCode::UNPROCESSABLE_ENTITY => {
                let e: LogicError =
                    serde_json::from_slice(&bytes).map_err(|e| transient("HookError", e))?;
                Err(if e.permanent {
                    PluginError::Permanent {
                        reason: e.reason,
                        message: e.message,
                    }
                } else {
                    PluginError::Transient {
                        reason: e.reason,
                        message: e.message,
                    }
                })
            }
            other => Err(transient("HookError", format!("hook answered {other}"))),
        }
    }
}

impl ReconcilePlugin for HookPlugin {
    fn digest(&self) -> &str {
        &self.digest
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move {
            // The same wall-clock budget the sandbox enforces.
            match tokio::time::timeout(limits.timeout, self.call(req)).await {
                Ok(r) => r,
                Err(_) => Err(PluginError::Fault {
                    kind: wr_runtime::FaultKind::Timeout,
                    message: "webhook did not answer in time".into(),
                }),
            }
        })
    }
}

/// Child entry point: `controller wasm|webhook --api URL [--hook URL --rtt-us N]`.
pub async fn run(
    variant: &str,
    api: &str,
    hook: Option<&str>,
    cache: Option<std::path::PathBuf>,
    rtt: Duration,
) -> Result<()> {
    let samples = Arc::new(Samples::default());
    let client = crate::client::build(
        api,
        crate::reqlog::CONTROLLER_AGENT,
        Some(samples.clone()),
        true,
    )?;
    let loader: Arc<dyn PluginLoader> = match variant {
        "wasm" => {
            // `SIDEBYSIDE_MAX_INSTANCES` shrinks the instance pool: under
            // valgrind the default pool's 1 TiB address-space reservation
            // does not fit (docs/benchmarks.md, "Host cost per reconcile").
            let defaults = wr_runtime::RuntimeConfig::default();
            let max_instances = std::env::var("SIDEBYSIDE_MAX_INSTANCES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(defaults.max_instances);
            let runtime = PluginRuntime::new(wr_runtime::RuntimeConfig {
                cache_dir: cache,
                max_instances,
                ..defaults
            })
            .map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
            Arc::new(TimedWasmLoader {
                runtime,
                samples: samples.clone(),
            })
        }
        "webhook" => {
            let http =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .pool_max_idle_per_host(64)
                    .build_http();
            Arc::new(HookLoader {
                url: hook
                    .context("--hook is required for the webhook variant")?
                    .to_string(),
                http,
                samples: samples.clone(),
                rtt,
            })
        }
        other => anyhow::bail!("unknown hosted variant {other}"),
    };
    let opts = wr_engine::ManagerOptions {
        observer: Some(Arc::new(Observer(samples.clone()))),
        ..Default::default()
    };
    let manager = wr_engine::Manager::new(client, loader, opts);
    let handle = manager.handle();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(async move {
        let _ = stop_rx.await;
    }));
    say("ready")?;
    let started = Instant::now();
    let mut commands = stdin_commands();
    while let Some(cmd) = commands.recv().await {
        let reconciles = match handle.stats(CONTROLLER).await {
            Some(s) => s.reconciles.load(Ordering::Relaxed),
            None => 0,
        };
        let reply = match cmd.as_str() {
            "count" => ChildStats {
                reconciles,
                ..Default::default()
            },
            // A full resync in this process: every parent enqueued once
            // (memoised when converged).
            "resync" => {
                handle.requeue_matching(|_| true).await;
                ChildStats {
                    reconciles,
                    ..Default::default()
                }
            }
            _ => ChildStats {
                reconciles,
                samples_ms: samples.drain(),
            },
        };
        say(&serde_json::to_string(&reply)?)?;
    }
    let _ = stop_tx.send(());
    let _ = task.await;
    tracing::debug!(secs = started.elapsed().as_secs_f64(), "controller stopped");
    Ok(())
}
