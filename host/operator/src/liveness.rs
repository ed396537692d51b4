//! The liveness rule behind `/livez`: the process is alive only while its work
//! queue makes progress. A deadlocked worker pool, a wedged watch loop or a
//! plugin call that never returns leaves a live process that does nothing;
//! restarting it is the only fix, so the probe must see it.
//!
//! Rule: `/livez` fails when work is queued (total depth > 0) and no reconcile
//! has finished for `stall_after`, counted from the later of the last finished
//! reconcile and the moment the queue became non-empty. A failing reconcile is
//! progress (the loop runs; a restart would not help an API outage); an idle
//! process with an empty queue (e.g. a standby) is always live.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default `stall_after`: longer than the largest plugin timeout (300 s) plus
/// API retries, so only a real stall trips it.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(600);

/// Shared handle: the engine (through [`crate::Metrics`]) reports queue depth and
/// finished reconciles; the health server asks [`Liveness::check`].
#[derive(Clone, Debug)]
pub struct Liveness {
    inner: Arc<Mutex<State>>,
    stall_after: Duration,
}

#[derive(Debug)]
struct State {
    depth: HashMap<String, u64>,
    last_progress: Instant,
}

/// Why `/livez` fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stalled {
    /// Items waiting in all queues.
    pub queued: u64,
    /// Time since the last progress.
    pub since: Duration,
}

impl Liveness {
    /// A tracker that reports a stall after `stall_after` without progress.
    pub fn new(stall_after: Duration) -> Self {
        Liveness {
            inner: Arc::new(Mutex::new(State {
                depth: HashMap::new(),
                last_progress: Instant::now(),
            })),
            stall_after,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A reconcile finished (with any result).
    pub fn progress(&self) {
        self.state().last_progress = Instant::now();
    }

    /// Current depth of one controller's queue.
    pub fn queue_depth(&self, controller: &str, depth: u64) {
        let mut s = self.state();
        let before: u64 = s.depth.values().sum();
        if depth == 0 {
            s.depth.remove(controller);
        } else {
            s.depth.insert(controller.to_string(), depth);
        }
        if before == 0 && depth > 0 {
            // Waiting starts now, not at the last reconcile of a long idle spell.
            s.last_progress = Instant::now();
        }
    }

    /// `Err` when the queue is stalled.
    pub fn check(&self) -> Result<(), Stalled> {
        let s = self.state();
        stalled(
            s.depth.values().sum(),
            s.last_progress.elapsed(),
            self.stall_after,
        )
    }
}

/// The rule itself, on plain values.
fn stalled(queued: u64, since: Duration, stall_after: Duration) -> Result<(), Stalled> {
    if queued > 0 && since >= stall_after {
        Err(Stalled { queued, since })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(60);

    #[test]
    fn empty_queue_is_live_however_long_idle() {
        assert!(stalled(0, Duration::from_secs(10_000), LIMIT).is_ok());
    }

    #[test]
    fn queued_work_without_progress_past_the_limit_is_a_stall() {
        assert!(stalled(3, Duration::from_secs(59), LIMIT).is_ok());
        assert_eq!(
            stalled(3, Duration::from_secs(61), LIMIT),
            Err(Stalled {
                queued: 3,
                since: Duration::from_secs(61)
            })
        );
    }

    #[test]
    fn handle_sums_queues_and_fails_with_zero_limit() {
        let l = Liveness::new(Duration::ZERO);
        assert!(l.check().is_ok());
        l.queue_depth("a", 2);
        l.queue_depth("b", 1);
        assert_eq!(l.check().map_err(|s| s.queued), Err(3));
        l.queue_depth("a", 0);
        l.queue_depth("b", 0);
        assert!(l.check().is_ok());
    }

    #[test]
    fn handle_with_generous_limit_is_live_while_working() {
        let l = Liveness::new(Duration::from_secs(3600));
        l.queue_depth("a", 5);
        l.progress();
        assert!(l.check().is_ok());
    }
}
