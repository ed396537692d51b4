//! Fairness between controllers on one host (issue 19, item 3): a host-wide
//! budget of concurrent reconciles ("turns"), handed out round-robin among
//! the controllers that have a worker waiting.
//!
//! Each controller keeps its own queue and at most `maxConcurrentReconciles`
//! workers; a worker that took a key from its queue asks for a turn before it
//! reconciles. While turns are free they are granted at once; once the budget
//! is used up, each turn given back goes to the *next controller in the ring*
//! that has a waiting worker, not to the oldest waiter. A controller with
//! 10,000 queued parents and many workers therefore cannot make a quiet
//! controller's reconciles wait behind its own: the quiet one's next worker
//! is served within one turn per busy controller.
//!
//! Hand-written: tokio's `Semaphore` is FIFO across all waiters (which is
//! what starves the quiet controller) and no maintained crate offers a
//! keyed round-robin semaphore.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Default host-wide budget: the wasm runtime's instance slots
/// (`RuntimeConfig::max_instances`), beyond which plugin calls would queue
/// in arrival order anyway.
pub const DEFAULT_RECONCILE_SLOTS: usize = 64;

/// The host-wide budget of concurrent reconciles; see the module doc.
pub struct Turns {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    free: usize,
    /// Controllers with at least one waiting worker, in serving order.
    ring: VecDeque<String>,
    /// Each controller's waiting workers, oldest first.
    waiting: HashMap<String, VecDeque<oneshot::Sender<()>>>,
}

/// A turn held for one reconcile; given back on drop.
pub struct Turn {
    turns: Arc<Turns>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.turns.give_back();
    }
}

impl Turns {
    /// A budget of `slots` concurrent reconciles (at least 1).
    pub fn new(slots: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                free: slots.max(1),
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a counter and queues of senders: a panic elsewhere
        // cannot leave it inconsistent, so recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a turn for a worker of `controller`.
    pub async fn acquire(self: &Arc<Self>, controller: &str) -> Turn {
        let rx = {
            let mut st = self.lock();
            if st.free > 0 && st.ring.is_empty() {
                st.free -= 1;
                return Turn {
                    turns: self.clone(),
                };
            }
            let (tx, rx) = oneshot::channel();
            let queue = st.waiting.entry(controller.to_string()).or_default();
            let was_idle = queue.is_empty();
            queue.push_back(tx);
            if was_idle {
                st.ring.push_back(controller.to_string());
            }
            rx
        };
        let mut waiting = Waiting {
            turns: self.clone(),
            rx: Some(rx),
        };
        if let Some(rx) = waiting.rx.as_mut() {
            // The sender is only dropped after a successful send or with the
            // whole `Turns`, which this future keeps alive.
            let _ = rx.await;
        }
        waiting.rx = None;
        Turn {
            turns: self.clone(),
        }
    }

    /// Turns free right now (metrics, tests).
    pub fn free(&self) -> usize {
        self.lock().free
    }

    /// Hands a turn to the next controller in the ring with a live waiter,
    /// or puts it back in the budget.
    fn give_back(&self) {
        let mut st = self.lock();
        while let Some(controller) = st.ring.pop_front() {
            let Some(queue) = st.waiting.get_mut(&controller) else {
                continue;
            };
            let mut granted = false;
            while let Some(tx) = queue.pop_front() {
                if tx.send(()).is_ok() {
                    granted = true;
                    break;
                }
            }
            if queue.is_empty() {
                st.waiting.remove(&controller);
            } else {
                // Served: to the back of the ring.
                st.ring.push_back(controller);
            }
            if granted {
                return;
            }
        }
        st.free += 1;
    }
}

/// A worker waiting for a turn. Dropped before the turn arrived (the worker
/// was cancelled): closes the channel, and gives back a turn that was granted
/// in the meantime.
struct Waiting {
    turns: Arc<Turns>,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.turns.give_back();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Order in which waiting workers of several controllers are served.
    async fn served(turns: &Arc<Turns>, waiters: &[&str]) -> Vec<String> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (i, c) in waiters.iter().enumerate() {
            let (turns, tx, c) = (turns.clone(), tx.clone(), c.to_string());
            tasks.push(tokio::spawn(async move {
                let t = turns.acquire(&c).await;
                let _ = tx.send((c, i, t));
            }));
            // Queued in this order.
            tokio::task::yield_now().await;
        }
        drop(tx);
        let mut order = Vec::new();
        let mut held = Vec::new();
        // Every waiter is queued; give back one turn at a time.
        while order.len() < waiters.len() {
            if let Some(t) = held.pop() {
                drop(t);
            }
            let (c, _, t) = rx.recv().await.expect("a waiter is served");
            order.push(c);
            held.push(t);
        }
        order
    }

    #[tokio::test(start_paused = true)]
    async fn free_turns_are_granted_at_once_up_to_the_budget() {
        let turns = Turns::new(2);
        let a = turns.acquire("a").await;
        let _b = turns.acquire("a").await;
        assert_eq!(turns.free(), 0);
        let third = tokio::time::timeout(Duration::from_secs(1), turns.acquire("b")).await;
        assert!(
            third.is_err(),
            "a third turn was granted over a budget of 2"
        );
        drop(a);
        assert_eq!(turns.free(), 1, "the cancelled waiter left nothing behind");
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_controllers_are_served_round_robin_not_in_arrival_order() {
        let turns = Turns::new(1);
        let held = turns.acquire("noisy").await;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = turns.clone();
        let order = tokio::spawn(async move {
            // Five of the noisy controller's workers queue before the quiet one's two.
            let order = served(
                &t,
                &[
                    "noisy", "noisy", "noisy", "noisy", "noisy", "quiet", "quiet",
                ],
            )
            .await;
            let _ = tx.send(());
            order
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(held);
        rx.await.expect("served");
        let order = order.await.expect("no panic");
        assert_eq!(
            order,
            [
                "noisy", "quiet", "noisy", "quiet", "noisy", "noisy", "noisy"
            ],
            "FIFO would serve the quiet controller last"
        );
        assert_eq!(turns.free(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_does_not_lose_a_turn() {
        let turns = Turns::new(1);
        let held = turns.acquire("a").await;
        let t = turns.clone();
        let gone = tokio::spawn(async move {
            let _t = t.acquire("b").await;
        });
        tokio::task::yield_now().await;
        gone.abort();
        let _ = gone.await;
        drop(held);
        assert_eq!(turns.free(), 1);
        let again = tokio::time::timeout(Duration::from_secs(1), turns.acquire("c")).await;
        assert!(again.is_ok(), "the turn given back was lost");
    }
}
