//! A workload simulator for the dev cluster (issue 16, item 6), in the spirit
//! of KWOK: nothing runs containers, but Deployments, ReplicaSets,
//! StatefulSets, DaemonSets and Jobs get Pods, and Pods on simulated Nodes
//! become `Running` and `Ready` (or `Succeeded`, for a Job's) after a delay,
//! so objects carry the status a real cluster would give them and a plugin
//! that reacts to its children's status can be exercised in `dev`.
//!
//! It is a client of the API server like kube-controller-manager and the
//! kubelet are: every read and write goes over a [`kube::Client`], so what it
//! creates passes the server's decoding, defaulting, validation and
//! managedFields like any other write, shows up in watches, and is collected
//! through its ownerReferences by the server's garbage collector. The same
//! simulator therefore runs against the embedded server or any other.
//!
//! The controllers are level-triggered: a watch event on any of the kinds
//! involved (or a timer coming due) starts a *pass*, which lists the kinds
//! afresh and writes only what differs. A pass after a pass's own writes sees
//! them (lists are consistent reads), so no expectations bookkeeping is
//! needed; the cost is a list per kind per pass, fine for a dev cluster.

mod conditions;
mod daemonset;
mod deployment;
mod hash;
mod job;
mod kubelet;
mod nodes;
mod pass;
mod replicaset;
mod statefulset;
mod template;
mod world;
mod write;

use std::time::Duration;

use futures::StreamExt;
use kube::runtime::watcher;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use write::WriteError;

/// Label that marks a Node as simulated: the simulator places pods on, and
/// plays the kubelet for, Nodes carrying it (add it to a Node you create to
/// grow the simulated cluster).
pub const SIMULATED_NODE_LABEL: &str = "wasm-reconciler.dev/simulated-node";

/// How the simulator behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// Time from a Pod's creation to `Running`/`Ready`; a Job's pods then
    /// run as long again before they succeed.
    pub delay: Duration,
    /// Simulated Nodes to create at start (`sim-node-1` …) when missing.
    pub nodes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            delay: Duration::from_secs(1),
            nodes: 1,
        }
    }
}

/// A running simulator; [`Simulator::stop`] ends it.
pub struct Simulator {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Simulator {
    /// Stop watching and writing; returns once the current pass has ended.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Start the simulator against the cluster `client` talks to. The client
/// needs to read and write the workload kinds and Nodes cluster-wide.
pub fn spawn(client: kube::Client, config: Config) -> Simulator {
    let stop = CancellationToken::new();
    let task = tokio::spawn(run(client, config, stop.clone()));
    Simulator { stop, task }
}

/// Shortest pause between passes: lets a burst of watch events settle.
const SETTLE: Duration = Duration::from_millis(20);
/// Retry interval after a pass that could not list or write.
const RETRY: Duration = Duration::from_secs(1);
/// Longest sleep without any event (a safety net; watches wake it).
const IDLE: Duration = Duration::from_secs(30);

async fn run(client: kube::Client, config: Config, stop: CancellationToken) {
    let wake = std::sync::Arc::new(Notify::new());
    let mut watchers = Vec::new();
    macro_rules! watch {
        ($($ty:ty),*) => {$(
            watchers.push(tokio::spawn(wake_on_events(
                kube::Api::<$ty>::all(client.clone()),
                wake.clone(),
                stop.clone(),
            )));
        )*};
    }
    {
        use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
        watch!(
            core::Node,
            core::Pod,
            apps::ReplicaSet,
            apps::Deployment,
            apps::StatefulSet,
            apps::DaemonSet,
            batch::Job
        );
    }
    tracing::info!(
        delay_ms = config.delay.as_millis() as u64,
        nodes = config.nodes,
        "workload simulator running"
    );
    let mut sim = pass::Sim::new(client, config);
    loop {
        let next = match sim.pass().await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "simulator pass failed; retrying");
                Some(tokio::time::Instant::now() + RETRY)
            }
        };
        let until = next.unwrap_or_else(|| tokio::time::Instant::now() + IDLE);
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = wake.notified() => {}
            _ = tokio::time::sleep_until(until) => {}
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(SETTLE) => {}
        }
    }
    for w in watchers {
        w.abort();
    }
}

/// Wake the pass loop on every change of `api`'s objects.
async fn wake_on_events<K>(api: kube::Api<K>, wake: std::sync::Arc<Notify>, stop: CancellationToken)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    use kube::runtime::WatchStreamExt;
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            ev = stream.next() => match ev {
                Some(Ok(_)) => wake.notify_one(),
                Some(Err(e)) => tracing::debug!(error = %e, "simulator watch error; the watcher retries"),
                None => return,
            },
        }
    }
}
