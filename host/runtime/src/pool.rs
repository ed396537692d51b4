//! The thread pool plugin calls run on, apart from the caller's async runtime.
//!
//! A plugin call is CPU-bound for its whole length (instantiate, run the
//! guest, parse its answer): tens of microseconds for a small plugin, up to
//! its timeout for a hostile one. Run on the engine's tokio worker threads,
//! every call delays the watches, API responses and lease renewals queued
//! behind it on that thread; at high rates the host's I/O then waits for
//! guest CPU (the side-by-side bench's webhook variant, whose plugin runs in
//! another process, converged faster for that reason). With
//! `WR_PLUGIN_CALL_POOL=1` calls therefore run on a small multi-threaded
//! tokio runtime of their own, one worker per CPU: the OS shares the cores
//! between the two pools, and the engine's I/O tasks are never queued behind
//! a guest. Off by default: the hop's cost is measured, its gain is not yet
//! (see [`run`]).
//!
//! Limits are unchanged: the instance-slot semaphore bounds the calls in
//! flight, epoch interruption stops a call past its timeout (and yields this
//! pool's worker at every tick, so a looping plugin cannot hold it), fuel
//! and memory caps are per store. Cancellation is kept too: dropping the
//! caller's future aborts the pool task ([`AbortOnDrop`]), which stops the
//! guest at its next yield and frees its slot.
//!
//! One pool per process (created on the first call): runtimes are cheap to
//! create in tests and a pool per `PluginRuntime` would multiply threads;
//! the pool is never dropped, so no runtime is ever shut down from inside
//! one of its own tasks.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;
use tokio::task::{JoinError, JoinHandle};

use crate::error::{CallError, FaultKind};

/// Name of the pool's threads (visible in `top -H`, profiles and panics).
pub(crate) const THREAD_NAME: &str = "wr-plugin-call";

static POOL: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The process-wide pool, created on first use with one worker per CPU.
fn pool() -> Result<&'static Runtime, CallError> {
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|message| {
        CallError::fault(
            FaultKind::Internal,
            format!("cannot start the plugin call pool: {message}"),
        )
    })
}

/// Environment variable that turns the pool on (`1`).
pub(crate) const POOL_ENV: &str = "WR_PLUGIN_CALL_POOL";

/// Whether calls hop to the pool. Off unless `WR_PLUGIN_CALL_POOL=1`: on an
/// idle 2-core machine (2026-12-02, `cargo bench -p wr-runtime --bench
/// plugin_runtime`) the hop more than doubled a sequential call (total per
/// call 83 µs inline vs 210 µs on the pool; instantiate 11 vs 29 µs on a
/// woken pool thread), and its gain for the engine's I/O under load is not
/// measured yet (docs/benchmarks.md), so it stays opt-in until it is.
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(POOL_ENV).is_ok_and(|v| v == "1"))
}

/// Runs `call` where calls run: on the pool when it is on ([`POOL_ENV`]),
/// else inline on the caller's task (dropping the future drops the call).
pub(crate) async fn run<F, T>(call: F) -> Result<T, CallError>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    if enabled() {
        on_pool(call).await
    } else {
        Ok(call.await)
    }
}

/// Runs `call` on the pool and waits for it from any executor. Dropping the
/// returned future aborts the call. A panic in the call (a host bug) is
/// reported as an internal fault, not propagated.
async fn on_pool<F, T>(call: F) -> Result<T, CallError>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let task = AbortOnDrop(pool()?.spawn(PoolCall(Box::pin(call))));
    task.await.map_err(|e: JoinError| {
        CallError::fault(
            FaultKind::Internal,
            format!("the plugin call task failed: {e}"),
        )
    })
}

/// The future a pool task runs. Its own type, with a `poll` that is never
/// inlined, so a profiler can select the pool's share of a call by name:
/// the instruction-count gate (`tests/src/bin/instr_bench.rs`) counts
/// `*wr_runtime::pool::PoolCall*poll*` on the pool's threads besides its
/// workload function on the caller's.
/// (Boxed so it is `Unpin` without unsafe pin projection.)
struct PoolCall<F>(Pin<Box<F>>);

impl<F: Future> Future for PoolCall<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// A pool task that is aborted when its waiter goes away (a reconcile
/// cancelled by shutdown, a lost lease or a caller's own timeout), so an
/// abandoned call does not keep its instance slot until its timeout.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn calls_run_on_the_pool_not_on_the_callers_thread() {
        let caller = std::thread::current().id();
        let (ran_on, name) = on_pool(async {
            let me = std::thread::current();
            (me.id(), me.name().map(str::to_owned))
        })
        .await
        .unwrap();
        assert_ne!(ran_on, caller);
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_waiter_aborts_the_call() {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = SetOnDrop(Arc::clone(&dropped));
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let waiter = tokio::spawn(on_pool(async move {
            let _guard = guard;
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        }));
        started_rx.await.unwrap();
        waiter.abort();
        // The pool task's state (and so the guard) is dropped soon after
        // the abort; poll for it rather than sleep a fixed time.
        for _ in 0..1000 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the pool task outlived its aborted waiter");
    }

    #[tokio::test]
    async fn a_panicking_call_is_an_internal_fault() {
        let err = on_pool(async { panic!("boom") }).await.unwrap_err();
        assert!(
            matches!(
                err,
                CallError::Fault {
                    kind: FaultKind::Internal,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
