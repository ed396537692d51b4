//! `wasm-reconciler run --shard-group NAME`: every replica reconciles, each
//! only the parents the group's shard map gives it (issue 19;
//! [`wr_operator::shard`]).
//!
//! The map divides 64 fixed shard buckets among the members
//! ([`wr_engine::shard_bucket`]: a parent's bucket is a hash of its
//! `namespace/name`, carried as the label `wasm-reconciler.dev/shard-bucket`
//! that the host puts on parents and on the children it applies). With
//! `--shard-cache narrow` (the default) a replica's parent and child caches
//! watch `labelSelector: wasm-reconciler.dev/shard-bucket in (its buckets)`;
//! on a new map it drains what it lost, re-lists with the new buckets (the
//! gained ones are cached, the lost ones leave), and only then acknowledges,
//! so the drain-then-acknowledge handover is unchanged. Parents without a
//! valid label are labelled by the replica owning their bucket
//! ([`wr_engine::shard_label`]). Related objects and WasmControllers are
//! cached whole. `--shard-cache shared` caches every parent and child and
//! filters only at admission ([`wr_operator::shard::ShardGate`], which
//! checks ownership in both modes). A rebalance writes nothing: the map moves
//! buckets, the labels stay.
//!
//! The elected leader (Lease `<group>-coordinator`) keeps the shard map;
//! every replica, leader included, is a member. SIGTERM: finish in-flight
//! reconciles, then delete the member Lease (the map drops this replica at
//! once) and release the coordinator Lease. Fenced (member Lease not renewed
//! for the renew deadline, e.g. a replica starved of CPU): admit nothing,
//! wait for in-flight reconciles at most the margin to the lease duration,
//! then leave as that member and rejoin under a new member identity
//! (`<identity>-rejoinN`; the User-Agent keeps the process identity) — a
//! joiner gains nothing until a map without the old member has settled. Only
//! when in-flight reconciles outlast the margin does it exit 1 (a restart
//! rejoins).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wr_engine::shard_bucket::BUCKETS;
use wr_operator::shard::{Coordinator, Membership, ShardConfig, ShardGate, ShardMetrics, follow};
use wr_operator::{
    ApiMetricsLayer, HealthInputs, LeaderElection, LeaderState, Liveness, Metrics, ShutdownSignal,
    finish_within,
};

use super::RunArgs;
use super::observer::MetricsObserver;

/// How often the owned-parents gauge is recounted.
const COUNT_EVERY: Duration = Duration::from_secs(2);

pub(super) async fn serve(args: RunArgs, group: String) -> anyhow::Result<ExitCode> {
    let shutdown = ShutdownSignal::install().context("installing signal handlers")?;
    let liveness = Liveness::new(Duration::from_secs(args.liveness_stall_seconds));
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::new(&mut registry, liveness.clone()));
    let shard_metrics = ShardMetrics::new(&mut registry);

    let mut config = super::kube_config(&args)
        .await
        .context("reading the cluster connection")?;
    let identity = wr_operator::leader::default_identity();
    super::identify(&mut config, &identity)?;
    let namespace = super::lease_namespace(&args, &config);
    let client = kube::client::ClientBuilder::try_from(wr_engine::engine_config(config))
        .context("building the API client")?
        .with_layer(&ApiMetricsLayer::new(metrics.clone()))
        .build();

    let mut shard = ShardConfig::new(namespace.clone(), group.clone());
    shard.identity = identity.clone();
    shard.lease_duration = Duration::from_secs(args.lease_duration_seconds);
    shard.renew_deadline = Duration::from_secs(args.renew_deadline_seconds);
    shard.retry_period = Duration::from_secs(args.retry_period_seconds);
    shard
        .validate()
        .with_context(|| format!("shard group {group}"))?;

    let mut lease = super::lease_config(&args, namespace, identity.clone());
    lease.name = format!("{group}-coordinator");
    tracing::info!(group = %group, identity = %identity, lease = %lease.name, "joining the shard group");
    let election =
        LeaderElection::start(client.clone(), lease).context("starting leader election")?;
    let coordinating = tokio::spawn(coordinate(client.clone(), shard.clone(), election.state()));

    let (synced_tx, synced_rx) = watch::channel(false);
    let health_stop = CancellationToken::new();
    let inputs = HealthInputs {
        registry: Arc::new(registry),
        caches_synced: synced_rx,
        leader: election.state(),
        liveness,
    };
    let (addr, _health) = wr_operator::serve_health(args.metrics_bind, inputs, health_stop.clone())
        .await
        .with_context(|| format!("binding {}", args.metrics_bind))?;
    println!("metrics: http://{addr}");

    let mut membership = Membership::start(client.clone(), shard.clone(), false)
        .context("joining the shard group")?;
    let gate = ShardGate::new(identity.clone());

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
        admission: Some(Arc::new(gate.clone())),
        shard_buckets: args.shard_cache == super::ShardCache::Narrow,
        ..Default::default()
    };
    let manager = wr_engine::Manager::new(client.clone(), loader, opts);
    let handle = manager.handle();
    let stop = CancellationToken::new();
    let mut task = tokio::spawn(manager.run(stop.clone().cancelled_owned()));

    let counting = tokio::spawn(count_owned(
        handle.clone(),
        gate.clone(),
        shard_metrics.clone(),
    ));

    // One member identity per incarnation: a fenced replica that drained
    // rejoins as a new member (a joiner, which gains nothing until a map
    // without its old identity has settled) instead of exiting.
    let mut rejoins = 0u32;
    let mut member = identity.clone();
    let (membership, following, fenced_out) = loop {
        let (fenced_tx, mut fenced) = watch::channel(true);
        let requeue = handle.clone();
        let following = tokio::spawn(follow(
            gate.clone(),
            membership.view(),
            membership.acknowledger(),
            {
                let h = handle.clone();
                let m = shard_metrics.clone();
                let narrow = args.shard_cache == super::ShardCache::Narrow;
                move |buckets: Vec<u32>| {
                    let (h, m) = (h.clone(), m.clone());
                    async move {
                        h.narrow_to(&buckets).await;
                        let n = if narrow {
                            buckets.len()
                        } else {
                            BUCKETS as usize
                        };
                        m.watched_buckets(n);
                    }
                }
            },
            {
                let gained_metrics = shard_metrics.clone();
                move |gained: wr_operator::shard::Gained| {
                    let h = requeue.clone();
                    let m = gained_metrics.clone();
                    tokio::spawn(async move {
                        let n = h.requeue_matching(|k| gained.contains(k)).await;
                        m.gained(n);
                        tracing::info!(
                            parents = n,
                            "re-enqueued the parents the shard map gave this replica"
                        );
                    });
                }
            },
            Some(shard_metrics.clone()),
            fenced_tx,
        ));
        // Fenced only counts once this replica has been a member (it starts
        // fenced). A closed channel (membership ended) counts as fenced too.
        let outcome = tokio::select! {
            _ = shutdown.graceful.cancelled() => Ok(false),
            _ = async {
                if fenced.wait_for(|f| !*f).await.is_ok() {
                    let _ = fenced.wait_for(|f| *f).await;
                }
            } => Ok(true),
            r = &mut task => Err(match r {
                Ok(Ok(())) => anyhow::anyhow!("the controller manager stopped unexpectedly"),
                Ok(Err(e)) => anyhow::Error::new(e).context("the controller manager failed"),
                Err(e) => anyhow::Error::new(e).context("the controller manager panicked"),
            }),
        };
        match outcome {
            Ok(true) => {}
            Ok(false) => break (membership, following, false),
            Err(e) => {
                health_stop.cancel();
                return Err(e);
            }
        }
        following.abort();
        let margin = super::stop_deadline(&args, true);
        tracing::error!(
            member = %member,
            margin_secs = margin.as_secs(),
            "member lease not renewed within the renew deadline; admitting nothing, draining"
        );
        // The gate holds the fenced view: nothing new is admitted.
        if tokio::time::timeout(margin, gate.drained()).await.is_err() {
            break (membership, following, true);
        }
        // Nothing of the old member runs any more: leave as on SIGTERM, so
        // the coordinator drops it at once (or its Lease expires).
        if let Err(e) = membership.leave().await {
            tracing::warn!(error = %e, "leaving as the fenced member failed; its lease will expire");
        }
        rejoins += 1;
        let mut again = shard.clone();
        again.identity = format!("{identity}-rejoin{rejoins}");
        tracing::warn!(old = %member, member = %again.identity, "drained after fencing; rejoining the shard group");
        shard_metrics.rejoined();
        member = again.identity.clone();
        membership =
            Membership::start(client.clone(), again, false).context("rejoining the shard group")?;
    };
    stop.cancel();
    counting.abort();
    if fenced_out {
        following.abort();
        coordinating.abort();
        // Reconciles of the old member still run past the margin: only the
        // process exit stops them before others may take its parents.
        membership.abort();
        election.abort();
        health_stop.cancel();
        tracing::error!("fenced and not drained in time; exiting so that a restart rejoins");
        return Ok(ExitCode::FAILURE);
    }
    let deadline = super::stop_deadline(&args, false);
    tokio::select! {
        _ = finish_within(deadline, &mut task) => {}
        _ = shutdown.immediate.cancelled() => {
            tracing::warn!("stopping at once; the member lease is left to expire");
            return Ok(ExitCode::FAILURE);
        }
    }
    following.abort();
    coordinating.abort();
    // Only now, with every reconcile of this process finished, may others
    // take its parents: deleting the member Lease drops it from the map.
    if let Err(e) = membership.leave().await {
        tracing::warn!(error = %e, "leaving the shard group failed; the member lease will expire");
    }
    if let Err(e) = election.release().await {
        tracing::warn!(error = %e, "releasing the coordinator lease failed; it will expire");
    }
    health_stop.cancel();
    tracing::info!("left the shard group; stopped");
    Ok(ExitCode::SUCCESS)
}

/// Runs the map keeper while this replica holds the coordinator Lease.
async fn coordinate(
    client: kube::Client,
    shard: ShardConfig,
    mut leader: watch::Receiver<LeaderState>,
) {
    loop {
        if leader.wait_for(LeaderState::is_leader).await.is_err() {
            return;
        }
        let keeper = match Coordinator::start(client.clone(), shard.clone()) {
            Ok(k) => k,
            Err(e) => {
                tracing::error!(error = %e, "cannot keep the shard map");
                return;
            }
        };
        tracing::info!(group = %shard.group, "coordinating the shard map");
        let lost = leader.wait_for(|s| !s.is_leader()).await.is_err();
        keeper.stop().await;
        tracing::info!(group = %shard.group, "no longer coordinating the shard map");
        if lost {
            return;
        }
    }
}

/// Recounts the parents this replica owns (a parent reconciled by two
/// controllers counts once).
async fn count_owned(handle: wr_engine::ManagerHandle, gate: ShardGate, metrics: ShardMetrics) {
    loop {
        let mut keys: Vec<_> = handle
            .parent_keys()
            .await
            .into_iter()
            .flat_map(|(_, k)| k)
            .collect();
        keys.sort();
        keys.dedup();
        metrics.owned(keys.iter().filter(|k| gate.owns(k)).count());
        for (kind, n) in handle.cache_sizes() {
            metrics.cache_objects(&kind, n);
        }
        tokio::time::sleep(COUNT_EVERY).await;
    }
}
