//! Keeps the hosts running: scrapes each incarnation's `/metrics` and RSS
//! every second, SIGKILLs the leader on a seeded schedule while kills are
//! enabled, restarts killed hosts after a short seeded delay, and restarts
//! (and records) hosts that exit on their own.
//!
//! Counters restart at zero in every process, so run totals are the sum over
//! incarnations of each one's last scrape (a killed host's last second is lost).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::sync::{Mutex, watch};

use crate::procs::{self, Host, LEASE, SYSTEM_NS};
use crate::promtext::{self, Sample};

/// What the run learned about one host process.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Incarnation {
    pub name: String,
    pub slot: usize,
    pub started_at_secs: f64,
    pub ended_at_secs: Option<f64>,
    /// `killed`, `exited(<code>)`, or None while running.
    pub end: Option<String>,
    /// Ever seen as leader (`wasm_reconciler_leader 1`).
    pub led: bool,
    pub rss_first_kib: Option<u64>,
    pub rss_last_kib: Option<u64>,
    pub rss_max_kib: Option<u64>,
    /// (seconds since the run started, KiB) every 10 s, to tell a plateau from a leak.
    pub rss_series: Vec<(u64, u64)>,
    #[serde(skip)]
    pub metrics: Vec<Sample>,
}

/// Shared, read by the main task for reports.
#[derive(Default)]
pub struct State {
    pub incarnations: Vec<Incarnation>,
    pub kills: u64,
    pub unexpected_exits: Vec<String>,
    pub errors: Vec<String>,
}

impl State {
    /// Every incarnation's last scrape, concatenated (sum over processes).
    pub fn all_samples(&self) -> Vec<Sample> {
        self.incarnations
            .iter()
            .flat_map(|i| i.metrics.iter().cloned())
            .collect()
    }
}

/// Inputs of the supervisor.
pub struct Config {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
    pub hosts: usize,
    pub kill_every_secs: f64,
    pub seed: u64,
    pub t0: Instant,
    /// Hosts form a shard group: each works once its first map settled.
    pub shard: bool,
}

struct Slot {
    host: Option<Host>,
    restart_at: Option<Instant>,
}

/// Current holder of the leader Lease.
pub async fn lease_holder(client: &Client) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NS);
    api.get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

/// Runs until `stop` turns true; kills only while `kills` is true.
pub async fn run(
    cfg: Config,
    client: Client,
    state: Arc<Mutex<State>>,
    mut kills: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x0c0ffee);
    let mut slots: Vec<Slot> = (0..cfg.hosts)
        .map(|_| Slot {
            host: None,
            restart_at: Some(Instant::now()),
        })
        .collect();
    let next_kill_in = |rng: &mut StdRng| {
        Duration::from_secs_f64(cfg.kill_every_secs * rng.random_range(0.5..1.5))
    };
    let mut next_kill = Instant::now() + next_kill_in(&mut rng);
    let mut tick = tokio::time::interval(Duration::from_millis(1000));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => {}
            _ = kills.changed() => {}
        }
        if *stop.borrow() {
            break;
        }
        let now = Instant::now();
        let secs = now.duration_since(cfg.t0).as_secs_f64();
        // Exits on their own, restarts due.
        for (i, slot) in slots.iter_mut().enumerate() {
            if let Some(h) = slot.host.as_mut()
                && let Ok(Some(st)) = h.child.try_wait()
            {
                let how = format!(
                    "exited({})",
                    st.code().map_or("signal".into(), |c| c.to_string())
                );
                let mut s = state.lock().await;
                s.unexpected_exits
                    .push(format!("{} {how} at {secs:.1}s", h.name));
                if let Some(inc) = s.incarnations.get_mut(h.index) {
                    inc.end = Some(how);
                    inc.ended_at_secs = Some(secs);
                }
                drop(s);
                slot.host = None;
                slot.restart_at = Some(now + Duration::from_secs(1));
            }
            if slot.host.is_none() && slot.restart_at.is_some_and(|t| t <= now) {
                let index = state.lock().await.incarnations.len();
                match procs::start_host(&cfg.bin, &cfg.kubeconfig, &cfg.dir, i, index, cfg.shard)
                    .await
                {
                    Ok(h) => {
                        let mut s = state.lock().await;
                        s.incarnations.push(Incarnation {
                            name: h.name.clone(),
                            slot: i,
                            started_at_secs: secs,
                            ..Default::default()
                        });
                        slot.host = Some(h);
                        slot.restart_at = None;
                    }
                    Err(e) => {
                        state
                            .lock()
                            .await
                            .errors
                            .push(format!("starting host in slot {i}: {e:#}"));
                        slot.restart_at = Some(now + Duration::from_secs(2));
                    }
                }
            }
        }
        // Scrape.
        for slot in &slots {
            let Some(h) = &slot.host else { continue };
            let text = procs::http_get(&h.metrics_url, "/metrics").await;
            let rss = procs::rss_kib(h.pid);
            let mut s = state.lock().await;
            let Some(inc) = s.incarnations.get_mut(h.index) else {
                continue;
            };
            if let Ok(text) = text {
                inc.metrics = promtext::parse(&text);
                // A shard member "leads" (works) once a map it is in settled.
                let working = if cfg.shard {
                    "wasm_reconciler_shard_settled"
                } else {
                    "wasm_reconciler_leader"
                };
                if promtext::sum(&inc.metrics, working, &[]) >= 1.0 {
                    inc.led = true;
                }
            }
            if let Some(r) = rss {
                // RSS "at start" is taken once the process leads (its
                // controllers, caches and plugins are up), not at exec.
                if inc.led && inc.rss_first_kib.is_none() {
                    inc.rss_first_kib = Some(r);
                }
                inc.rss_last_kib = Some(r);
                let t = secs as u64;
                if inc.rss_series.last().is_none_or(|(at, _)| t >= at + 10) {
                    inc.rss_series.push((t, r));
                }
                inc.rss_max_kib = Some(inc.rss_max_kib.map_or(r, |m| m.max(r)));
            }
        }
        // Kill the leader on schedule.
        if *kills.borrow() && now >= next_kill {
            next_kill = now + next_kill_in(&mut rng);
            let holder = lease_holder(&client).await.unwrap_or_default();
            let prefix = holder.split('_').next().unwrap_or("").to_string();
            let live: Vec<usize> = (0..slots.len())
                .filter(|i| slots[*i].host.is_some())
                .collect();
            let target = live
                .iter()
                .copied()
                .find(|i| slots[*i].host.as_ref().is_some_and(|h| h.name == prefix))
                .or_else(|| (!live.is_empty()).then(|| live[rng.random_range(0..live.len())]));
            if let Some(i) = target
                && let Some(mut h) = slots[i].host.take()
            {
                let _ = h.child.start_kill();
                let _ = h.child.wait().await;
                let mut s = state.lock().await;
                s.kills += 1;
                if let Some(inc) = s.incarnations.get_mut(h.index) {
                    inc.end = Some("killed".into());
                    inc.ended_at_secs = Some(secs);
                }
                drop(s);
                tracing::info!(host = %h.name, leader = (h.name == prefix), at_secs = secs, "SIGKILL");
                // Mostly back within seconds (two hosts again); sometimes the
                // survivor runs alone for a while.
                let down = if rng.random_bool(0.7) {
                    rng.random_range(0.5..3.0)
                } else {
                    rng.random_range(8.0..15.0)
                };
                slots[i].restart_at = Some(now + Duration::from_secs_f64(down));
            }
        }
    }
    for slot in slots.iter_mut() {
        if let Some(mut h) = slot.host.take() {
            let _ = h.child.start_kill();
            let _ = h.child.wait().await;
        }
    }
}
