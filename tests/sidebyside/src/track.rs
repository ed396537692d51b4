//! The bench's view of convergence: one watch per resource, kept in memory,
//! counting objects that satisfy a predicate. One watch instead of polling
//! lists (a list of 10,000 parents costs the API server ~100 ms each time and
//! would disturb what is measured).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use kube::runtime::watcher::Event;

type Pred = Arc<dyn Fn(&DynamicObject) -> bool + Send + Sync>;

#[derive(Default)]
struct State {
    ok: HashMap<String, bool>,
    max_rv: u64,
    last_event: Option<Instant>,
}

/// Counts objects of one resource for which a predicate holds.
#[derive(Clone)]
pub struct Tracker {
    state: Arc<Mutex<State>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

/// A resourceVersion as a number (the embedded API server's are integers).
pub fn rv(o: &DynamicObject) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Tracker {
    /// Starts watching `api`.
    pub fn start(api: Api<DynamicObject>, pred: Pred) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            let mut init: HashMap<String, bool> = HashMap::new();
            while let Some(ev) = events.next().await {
                let Ok(ev) = ev else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let mut st = s.lock().unwrap_or_else(|e| e.into_inner());
                st.last_event = Some(Instant::now());
                match ev {
                    Event::Apply(o) => {
                        st.max_rv = st.max_rv.max(rv(&o));
                        st.ok.insert(key(&o), pred(&o));
                    }
                    Event::Delete(o) => {
                        st.max_rv = st.max_rv.max(rv(&o));
                        st.ok.remove(&key(&o));
                    }
                    Event::Init => init.clear(),
                    Event::InitApply(o) => {
                        st.max_rv = st.max_rv.max(rv(&o));
                        init.insert(key(&o), pred(&o));
                    }
                    Event::InitDone => st.ok = std::mem::take(&mut init),
                }
            }
        });
        Self {
            state,
            task: Arc::new(task),
        }
    }

    /// (objects, objects for which the predicate held at their last event).
    pub fn counts(&self) -> (usize, usize) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.ok.len(), st.ok.values().filter(|v| **v).count())
    }

    /// Highest resourceVersion seen.
    pub fn max_rv(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).max_rv
    }

    /// Time since the last event (None before any).
    pub fn idle(&self) -> Option<Duration> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_event
            .map(|t| t.elapsed())
    }

    /// Waits until the watch has delivered `rv` and `done(total, ok)` holds.
    pub async fn wait(
        &self,
        what: &str,
        rv: u64,
        timeout: Duration,
        done: impl Fn(usize, usize) -> bool,
    ) -> Result<()> {
        let started = Instant::now();
        loop {
            let (total, ok) = self.counts();
            if self.max_rv() >= rv && done(total, ok) {
                return Ok(());
            }
            if started.elapsed() > timeout {
                bail!("{what}: not done after {timeout:?} ({ok}/{total} ok)");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Waits until none of `trackers` has seen an event for `quiet`.
pub async fn wait_quiet(trackers: &[&Tracker], quiet: Duration, timeout: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        let idle = trackers
            .iter()
            .map(|t| t.idle().unwrap_or(Duration::MAX))
            .min()
            .unwrap_or(Duration::MAX);
        if idle >= quiet {
            return Ok(());
        }
        if started.elapsed() > timeout {
            bail!("objects still changing after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
