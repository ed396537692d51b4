//! One pass of the simulator: load the world, run each controller over it,
//! and learn when the next timer (a pod due to start, a Job due to finish)
//! comes due.

use std::collections::HashMap;

use serde_json::Value;
use tokio::time::Instant;

use crate::Config;
use crate::world::World;
use crate::write::{WriteError, Writer};

/// The earliest moment something will change without an API event.
#[derive(Debug, Default)]
pub struct Due {
    next: Option<Instant>,
}

impl Due {
    pub fn at(&mut self, at: Instant) {
        self.next = Some(self.next.map_or(at, |n| n.min(at)));
    }

    /// A wall-clock moment (from a timestamp in an object).
    pub fn at_utc(&mut self, at: chrono::DateTime<chrono::Utc>) {
        let left = (at - chrono::Utc::now()).to_std().unwrap_or_default();
        // Timestamps have whole seconds: look again just after the second.
        self.at(Instant::now() + left + std::time::Duration::from_millis(50));
    }
}

/// What the simulator remembers between passes.
#[derive(Debug, Default)]
pub struct State {
    /// When the simulator first saw each pod (by uid): the delay runs from here.
    pub first_seen: HashMap<String, Instant>,
    /// Next host part of a pod IP, per node.
    pub next_ip: HashMap<String, u32>,
    /// The configured nodes have been created.
    pub nodes_created: bool,
}

/// Everything a controller needs during a pass.
pub struct Cx<'a> {
    pub writer: &'a Writer,
    pub config: &'a Config,
    pub state: &'a mut State,
    pub world: &'a World,
    pub due: Due,
    /// Pods placed on each node during this pass (not yet in `world`).
    pub placed: HashMap<String, usize>,
}

impl Cx<'_> {
    /// Log a failed write and look again soon; a conflict or a vanished
    /// object is routine (the next pass sees the new state).
    pub fn failed(&mut self, what: &str, e: WriteError) {
        match e.code() {
            Some(404 | 409) => {
                tracing::debug!(object = what, error = %e, "simulator write raced; next pass retries")
            }
            _ => tracing::warn!(object = what, error = %e, "simulator write failed; retrying"),
        }
        self.due
            .at(Instant::now() + std::time::Duration::from_secs(1));
    }

    /// The simulated nodes pods may be placed on (Ready, not being deleted).
    pub fn sim_nodes(&self) -> Vec<&Value> {
        self.world
            .nodes
            .iter()
            .filter(|n| crate::nodes::is_simulated(n) && !crate::world::is_deleting(n))
            .collect()
    }
}

pub struct Sim {
    writer: Writer,
    config: Config,
    state: State,
}

impl Sim {
    pub fn new(client: kube::Client, config: Config) -> Self {
        Sim {
            writer: Writer::new(client),
            config,
            state: State::default(),
        }
    }

    /// Run every controller once; returns when to look again at the latest.
    pub async fn pass(&mut self) -> Result<Option<Instant>, WriteError> {
        let world = World::load(self.writer.client()).await?;
        let mut cx = Cx {
            writer: &self.writer,
            config: &self.config,
            state: &mut self.state,
            world: &world,
            due: Due::default(),
            placed: HashMap::new(),
        };
        if crate::nodes::sync(&mut cx).await {
            // Nodes were just created: place nothing before they are seen.
            return Ok(Some(Instant::now()));
        }
        crate::deployment::sync(&mut cx).await;
        crate::replicaset::sync(&mut cx).await;
        crate::statefulset::sync(&mut cx).await;
        crate::daemonset::sync(&mut cx).await;
        crate::job::sync(&mut cx).await;
        crate::kubelet::sync(&mut cx).await;
        let live: std::collections::HashSet<&str> =
            world.pods.iter().map(crate::world::uid).collect();
        cx.state
            .first_seen
            .retain(|uid, _| live.contains(uid.as_str()));
        Ok(cx.due.next)
    }
}
