//! Which parents this process may reconcile: the seam through which a sharded
//! `run` (issue 19) keeps each parent on one replica.
//!
//! The engine asks before every reconcile (a worker took the key from the
//! queue) and holds the returned [`Ticket`] until the reconcile has finished,
//! its writes included. An implementation can therefore tell which admitted
//! reconciles are still in flight and wait for them before it hands parents
//! over. A key that is not admitted is dropped from the queue
//! ([`crate::queue::Outcome::Forget`]); the implementation re-enqueues what it
//! gains with [`crate::ManagerHandle::requeue_matching`].
//!
//! The manager's own writes to WasmControllers (finalizer, status, releasing
//! parents on deletion) are admitted the same way, under [`MANAGER_SCOPE`]:
//! every replica runs every controller, but only the WasmController's owner
//! writes it.

use std::any::Any;

use crate::queue::ObjectKey;

/// Scope of the manager's WasmController writes in [`Admission::enter`].
pub const MANAGER_SCOPE: &str = "wasmcontrollers";

/// Held while an admitted reconcile runs; dropping it ends the reconcile for
/// the admission (whatever it tracks).
pub type Ticket = Box<dyn Any + Send + Sync>;

/// Decides which keys this process works on.
pub trait Admission: Send + Sync {
    /// `Some` when this process may reconcile `key` of controller `scope`
    /// now; the ticket is held until the reconcile has finished.
    fn enter(&self, scope: &str, key: &ObjectKey) -> Option<Ticket>;
}

tokio::task_local! {
    /// Whether the WasmController being synced is this process's to write
    /// (set around each manager sync; absent outside of one = yes).
    static WRITES_WASMCONTROLLER: bool;
}

/// Runs one manager sync with its write permission.
pub(crate) async fn with_wasmcontroller_writes<F: std::future::Future>(
    allowed: bool,
    f: F,
) -> F::Output {
    WRITES_WASMCONTROLLER.scope(allowed, f).await
}

/// True when the current manager sync may write its WasmController.
pub(crate) fn writes_wasmcontroller() -> bool {
    WRITES_WASMCONTROLLER.try_with(|w| *w).unwrap_or(true)
}
