//! Slots for plugin loads (compiles), shared by all controllers of a manager.
//!
//! Loads run off the manager's sync loop (one task each), so one controller's
//! compile never holds up another controller's start or hot reload. They are
//! CPU-bound, so how many run at once is bounded — and bounded so that large
//! components cannot take every slot: a component of at least
//! [`LARGE_COMPONENT_BYTES`] (a JavaScript or Python component of 10–20 MB
//! compiles for half a minute) takes a "large" slot first, and there is one
//! large slot fewer than there are slots. A small component (a Rust plugin of
//! a few hundred KB compiles in well under a second) therefore always finds a
//! free slot while only large ones run, and waits at most for other small ones.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Components at least this large count as large loads (4 MiB).
pub const LARGE_COMPONENT_BYTES: usize = 4 << 20;

/// The default number of load slots: the machine's parallelism, at least 2.
pub fn default_parallel_loads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2)
}

/// The slots (see the module documentation).
pub(crate) struct LoadSlots {
    all: Arc<Semaphore>,
    large: Arc<Semaphore>,
}

/// A held slot; dropping it frees it.
pub(crate) struct LoadSlot {
    _large: Option<OwnedSemaphorePermit>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl LoadSlots {
    /// `parallel` slots (raised to 2), of which `parallel - 1` may hold large loads.
    pub(crate) fn new(parallel: usize) -> Self {
        let parallel = parallel.max(2);
        Self {
            all: Arc::new(Semaphore::new(parallel)),
            large: Arc::new(Semaphore::new(parallel - 1)),
        }
    }

    /// Waits for a slot for a component of `size` bytes.
    pub(crate) async fn acquire(&self, size: usize) -> LoadSlot {
        // The semaphores are never closed, so acquiring only fails if they
        // were; then the load runs without a slot rather than not at all.
        let large = if size >= LARGE_COMPONENT_BYTES {
            self.large.clone().acquire_owned().await.ok()
        } else {
            None
        };
        let slot = self.all.clone().acquire_owned().await.ok();
        LoadSlot {
            _large: large,
            _slot: slot,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[test]
    fn large_loads_never_take_the_last_slot() {
        let slots = LoadSlots::new(2);
        let big = LARGE_COMPONENT_BYTES;
        let first = slots.acquire(big).now_or_never().expect("a free slot");
        // A second large load waits for the first ...
        assert!(slots.acquire(big).now_or_never().is_none());
        // ... a small one does not.
        let small = slots
            .acquire(1000)
            .now_or_never()
            .expect("the reserved slot");
        // With every slot taken, any load waits.
        assert!(slots.acquire(1000).now_or_never().is_none());
        drop(first);
        assert!(slots.acquire(1000).now_or_never().is_some());
        drop(small);
    }

    #[test]
    fn at_least_two_slots() {
        let slots = LoadSlots::new(0);
        let _a = slots.acquire(1).now_or_never().expect("first");
        let _b = slots.acquire(1).now_or_never().expect("second");
        assert!(slots.acquire(1).now_or_never().is_none());
    }
}
