//! `wasm-reconciler run`: the operator in a real cluster.
//!
//! Connects (kubeconfig, context, or in-cluster), serves `/metrics`,
//! `/healthz`, `/readyz`, `/livez`, campaigns for the leader Lease and runs the
//! controller manager only while it leads. The sequence lives here; the pieces
//! are `wr_operator` (election, probes, metrics, shutdown) and `wr_engine`.
//!
//! - SIGTERM/SIGINT: stop taking new work, let in-flight reconciles finish
//!   within `--shutdown-timeout-seconds`, release the Lease, exit 0. A second
//!   signal exits at once (code 1).
//! - Losing leadership (renewals failed for the renew deadline): stop the
//!   manager, wait for in-flight reconciles at most until a standby may take
//!   over, and exit 1 — like client-go's `OnStoppedLeading`. Exiting is the
//!   only way to be sure no worker of this process still writes; the pod
//!   restarts and rejoins as a standby.
//! - Every API request carries `User-Agent: wasm-reconciler/VERSION (run;
//!   IDENTITY)`, IDENTITY being the Lease identity, so audit logs tell the
//!   replicas apart.

mod observer;
mod sharded;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, ListParams};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wr_operator::{
    ApiMetricsLayer, HealthInputs, LeaderElection, LeaderState, LeaseConfig, Liveness, Metrics,
    ShutdownSignal, finish_within,
};

use observer::MetricsObserver;

/// Log filter used when neither `--log-level` nor `RUST_LOG` is set: warnings
/// and errors, plus the lifecycle lines an operator wants to see when all is
/// well — the process's own steps, leadership changes (`wr_operator::leader`),
/// the signal that stops it (`wr_operator::shutdown`)
/// and one line per controller started, reloaded, reconfigured or stopped
/// (`wr_engine::manager`). Per-reconcile lines stay at debug/info of other
/// modules and are not shown.
pub const DEFAULT_LOG_FILTER: &str = "warn,wasm_reconciler=info,wr_operator::leader=info,wr_operator::shutdown=info,wr_engine::manager=info";

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// Directory for precompiled plugin artifacts.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Resync period (seconds) for controllers that set none.
    #[arg(long, default_value_t = 600)]
    pub resync_seconds: u64,
    /// Reconciles that may run at once across all controllers, handed out
    /// round-robin among controllers with waiting work (each still capped by
    /// its maxConcurrentReconciles), so a controller with a deep backlog
    /// cannot make another wait behind it.
    #[arg(long, default_value_t = wr_engine::turns::DEFAULT_RECONCILE_SLOTS)]
    pub reconcile_slots: usize,
    /// Address of /metrics, /healthz, /readyz and /livez (port 0: any free port).
    #[arg(long, default_value = wr_operator::health::DEFAULT_BIND)]
    pub metrics_bind: SocketAddr,
    /// Campaign for the leader Lease; only the leader reconciles.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the leader Lease.
    #[arg(long, default_value = "wasm-reconciler")]
    pub lease_name: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE, the in-cluster
    /// namespace, or the kubeconfig's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// A standby takes over a lease not renewed for this long.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// The leader steps down after failing to renew for this long.
    #[arg(long, default_value_t = 10)]
    pub renew_deadline_seconds: u64,
    /// Interval of acquire / renew attempts.
    #[arg(long, default_value_t = 2)]
    pub retry_period_seconds: u64,
    /// Deadline for in-flight reconciles after SIGTERM/SIGINT.
    #[arg(long, default_value_t = 25)]
    pub shutdown_timeout_seconds: u64,
    /// /livez fails when queued work made no progress for this long.
    #[arg(long, default_value_t = 600)]
    pub liveness_stall_seconds: u64,
    /// `parents_finalizer_pending` counts parents deleting for longer than this.
    #[arg(long, default_value_t = 300)]
    pub finalizer_pending_seconds: u64,
    /// Scale out: every replica started with the same group reconciles its
    /// share of the parents (member Leases `<group>-member-*`, shard map
    /// `<group>-shards`, coordinator Lease `<group>-coordinator`, all in the
    /// Lease namespace; the lease timings above apply). Replaces
    /// `--leader-elect`.
    #[arg(long)]
    pub shard_group: Option<String>,
    /// With `--shard-group`: `narrow` caches only this replica's shard
    /// buckets (parents and children carry the label
    /// `wasm-reconciler.dev/shard-bucket`, set by the host); `shared` caches
    /// every parent and child and filters at admission.
    #[arg(long, value_enum, default_value_t = ShardCache::Narrow)]
    pub shard_cache: ShardCache,
    #[command(flatten)]
    pub record: super::record_args::RecordArgs,
}

/// What a sharded replica caches (`run --shard-cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShardCache {
    /// Only the parents and children of its shard buckets (label selector).
    Narrow,
    /// Every parent and child (one shared watch per kind).
    Shared,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let code = match args.shard_group.clone().filter(|g| !g.is_empty()) {
        Some(group) => rt.block_on(sharded::serve(args, group)),
        None => rt.block_on(serve(args)),
    };
    // A plugin call stuck in a blocking thread must not hold the exit.
    rt.shutdown_timeout(Duration::from_secs(1));
    code
}

async fn kube_config(args: &RunArgs) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    Ok(match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    })
}

/// The Lease namespace: the flag / `$POD_NAMESPACE`, else the connection's
/// default namespace (in-cluster: the pod's).
fn lease_namespace(args: &RunArgs, config: &kube::Config) -> String {
    args.lease_namespace
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| config.default_namespace.clone())
}

fn lease_config(args: &RunArgs, namespace: String, identity: String) -> LeaseConfig {
    let mut c = LeaseConfig::new(namespace, args.lease_name.clone());
    c.identity = identity;
    c.lease_duration = Duration::from_secs(args.lease_duration_seconds);
    c.renew_deadline = Duration::from_secs(args.renew_deadline_seconds);
    c.retry_period = Duration::from_secs(args.retry_period_seconds);
    c
}

/// The `User-Agent` of every request of this process:
/// `wasm-reconciler/VERSION (run; IDENTITY)`, IDENTITY being the Lease
/// identity. API server audit logs (and the tests' request log) can then tell
/// the replicas apart and check that only the leader writes.
fn user_agent(identity: &str) -> String {
    format!(
        "wasm-reconciler/{} (run; {identity})",
        env!("CARGO_PKG_VERSION")
    )
}

fn identify(config: &mut kube::Config, identity: &str) -> anyhow::Result<()> {
    config.headers.push((
        "user-agent".parse().context("User-Agent header name")?,
        user_agent(identity)
            .parse()
            .with_context(|| format!("identity {identity:?} is not a valid header value"))?,
    ));
    Ok(())
}

async fn serve(args: RunArgs) -> anyhow::Result<ExitCode> {
    let shutdown = ShutdownSignal::install().context("installing signal handlers")?;
    let liveness = Liveness::new(Duration::from_secs(args.liveness_stall_seconds));
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::new(&mut registry, liveness.clone()));

    let mut config = kube_config(&args)
        .await
        .context("reading the cluster connection")?;
    let identity = wr_operator::leader::default_identity();
    identify(&mut config, &identity)?;
    let namespace = lease_namespace(&args, &config);
    let client = kube::client::ClientBuilder::try_from(wr_engine::engine_config(config))
        .context("building the API client")?
        .with_layer(&ApiMetricsLayer::new(metrics.clone()))
        .build();

    let (synced_tx, synced_rx) = watch::channel(false);
    // Without election this process always leads; keep the sender alive so
    // the channel never reads as closed (= election ended).
    let (_always_leader, fixed_state) = watch::channel(LeaderState::Leader);
    let election = if args.leader_elect {
        let lease = lease_config(&args, namespace, identity);
        tracing::info!(namespace = %lease.namespace, lease = %lease.name, identity = %lease.identity, "campaigning for leadership");
        Some(LeaderElection::start(client.clone(), lease).context("starting leader election")?)
    } else {
        tracing::info!("leader election disabled; this process reconciles");
        None
    };
    let mut leader = election
        .as_ref()
        .map(LeaderElection::state)
        .unwrap_or(fixed_state);

    let health_stop = CancellationToken::new();
    let inputs = HealthInputs {
        registry: Arc::new(registry),
        caches_synced: synced_rx,
        leader: leader.clone(),
        liveness,
    };
    let (addr, _health) = wr_operator::serve_health(args.metrics_bind, inputs, health_stop.clone())
        .await
        .with_context(|| format!("binding {}", args.metrics_bind))?;
    // Tests and scripts read the bound address (port 0) from here.
    println!("metrics: http://{addr}");

    // A standby runs no caches; it is ready once it can list WasmControllers.
    let probe = args.leader_elect.then(|| {
        tokio::spawn(standby_probe(
            client.clone(),
            synced_tx.clone(),
            Duration::from_secs(args.retry_period_seconds.max(1)),
        ))
    });

    let became_leader = tokio::select! {
        _ = shutdown.graceful.cancelled() => false,
        r = leader.wait_for(LeaderState::is_leader) => r.is_ok(),
    };
    if !became_leader {
        if let Some(p) = probe {
            p.abort();
        }
        return finish(election, &health_stop, shutdown.graceful.is_cancelled()).await;
    }
    if let Some(p) = probe {
        p.abort();
    }
    metrics.leader(true);
    tracing::info!("leading; starting controllers");
    // The leader's readiness is its own manager's cache.
    synced_tx.send_replace(false);

    let runtime = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig {
        cache_dir: args.cache_dir.clone(),
        ..Default::default()
    })
    .map_err(|e| anyhow::anyhow!("starting the plugin runtime: {e}"))?;
    let loader = Arc::new(wr_engine::wasm::WasmLoader::new(runtime));
    let observer = MetricsObserver::new(
        metrics.clone(),
        synced_tx,
        Duration::from_secs(args.finalizer_pending_seconds),
    );
    let opts = wr_engine::ManagerOptions {
        default_resync: Duration::from_secs(args.resync_seconds),
        reconcile_slots: args.reconcile_slots,
        observer: Some(Arc::new(observer)),
        recorder: args.record.recorder()?,
        ..Default::default()
    };
    let manager = wr_engine::Manager::new(client.clone(), loader, opts);
    let stop = CancellationToken::new();
    let mut task = tokio::spawn(manager.run(stop.clone().cancelled_owned()));

    let lost = tokio::select! {
        _ = shutdown.graceful.cancelled() => false,
        _ = leader.wait_for(|s| !s.is_leader()) => true,
        r = &mut task => {
            metrics.leader(false);
            health_stop.cancel();
            return match r {
                Ok(Ok(())) => Err(anyhow::anyhow!("the controller manager stopped unexpectedly")),
                Ok(Err(e)) => Err(e).context("the controller manager failed"),
                Err(e) => Err(e).context("the controller manager panicked"),
            };
        }
    };
    stop.cancel();
    let deadline = stop_deadline(&args, lost);
    tokio::select! {
        _ = finish_within(deadline, &mut task) => {}
        _ = shutdown.immediate.cancelled() => {
            tracing::warn!("stopping at once; the lease is left to expire");
            return Ok(ExitCode::FAILURE);
        }
    }
    metrics.leader(false);
    if lost {
        tracing::error!("lost leadership; exiting so that a restart rejoins as standby");
        if let Some(e) = election {
            e.abort();
        }
        health_stop.cancel();
        return Ok(ExitCode::FAILURE);
    }
    finish(election, &health_stop, true).await
}

/// Releases the lease (graceful stop) or reports that the election ended.
async fn finish(
    election: Option<LeaderElection>,
    health_stop: &CancellationToken,
    graceful: bool,
) -> anyhow::Result<ExitCode> {
    let code = match (election, graceful) {
        (Some(e), true) => match e.release().await {
            Ok(released) => {
                tracing::info!(released, "left the election");
                ExitCode::SUCCESS
            }
            Err(err) => {
                tracing::warn!(error = %err, "releasing the lease failed; it will expire");
                ExitCode::SUCCESS
            }
        },
        (None, true) => ExitCode::SUCCESS,
        (_, false) => {
            tracing::error!("leader election stopped");
            ExitCode::FAILURE
        }
    };
    health_stop.cancel();
    tracing::info!("stopped");
    Ok(code)
}

/// Marks a standby ready once the API server answers a WasmController list
/// (what its caches would need when it takes over).
async fn standby_probe(client: kube::Client, synced: watch::Sender<bool>, every: Duration) {
    let api: Api<wr_engine::WasmController> = Api::all(client);
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => {
                synced.send_replace(true);
                return;
            }
            Err(e) => tracing::debug!(error = %e, "API server not answering yet"),
        }
        tokio::time::sleep(every).await;
    }
}

/// How long in-flight reconciles may finish when stopping. A replica that
/// lost its lease must not outlive the margin before another may take over;
/// otherwise the shutdown timeout applies.
fn stop_deadline(args: &RunArgs, lost: bool) -> Duration {
    if lost {
        Duration::from_secs(
            args.lease_duration_seconds
                .saturating_sub(args.renew_deadline_seconds)
                .min(args.shutdown_timeout_seconds),
        )
    } else {
        tracing::info!(
            timeout_secs = args.shutdown_timeout_seconds,
            "stopping: no new work; waiting for in-flight reconciles"
        );
        Duration::from_secs(args.shutdown_timeout_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_carries_the_lease_identity_in_its_user_agent() {
        let mut config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        identify(&mut config, "pod-0_abc").unwrap();
        let (name, value) = config.headers.last().unwrap();
        assert_eq!(name.as_str(), "user-agent");
        let value = value.to_str().unwrap();
        assert!(value.starts_with("wasm-reconciler/"), "{value}");
        assert!(value.ends_with(" (run; pod-0_abc)"), "{value}");
    }

    #[test]
    fn an_identity_that_is_no_header_value_is_an_error() {
        let mut config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        assert!(identify(&mut config, "bad\nid").is_err());
    }
}
