//! The graceful shutdown sequence of `wasm-reconciler run`:
//!
//! 1. SIGTERM or SIGINT cancels [`ShutdownSignal::graceful`]: stop taking new
//!    work (the manager stops dequeuing, watches end);
//! 2. in-flight reconciles get until a deadline ([`finish_within`]);
//! 3. the lease is released ([`crate::LeaderElection::release`]) so a standby
//!    takes over at once;
//! 4. the process exits 0.
//!
//! A second signal cancels [`ShutdownSignal::immediate`]: the binary should
//! exit at once (the operator pressed Ctrl-C twice, or the kubelet's grace
//! period is about to end anyway).

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Tokens cancelled by the first and the second termination signal.
#[derive(Debug, Clone)]
pub struct ShutdownSignal {
    /// Cancelled by the first SIGTERM/SIGINT: stop taking new work.
    pub graceful: CancellationToken,
    /// Cancelled by the second one: stop now.
    pub immediate: CancellationToken,
}

impl ShutdownSignal {
    /// Installs the signal handlers (needs a tokio runtime). From here on the
    /// signals no longer kill the process; the tokens must be honoured.
    pub fn install() -> std::io::Result<Self> {
        let s = ShutdownSignal {
            graceful: CancellationToken::new(),
            immediate: CancellationToken::new(),
        };
        let mut signals = Signals::new()?;
        let tokens = s.clone();
        tokio::spawn(async move {
            let name = signals.next().await;
            tracing::info!(
                signal = name,
                "shutting down gracefully; send again to stop at once"
            );
            tokens.graceful.cancel();
            let name = signals.next().await;
            tracing::warn!(signal = name, "second signal; stopping now");
            tokens.immediate.cancel();
        });
        Ok(s)
    }
}

#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Signals)
    }

    async fn next(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    }
}

/// Waits for `work` up to `deadline`; `None` when the deadline passed first
/// (the work is dropped, i.e. cancelled at its next await point).
pub async fn finish_within<F: Future>(deadline: Duration, work: F) -> Option<F::Output> {
    match tokio::time::timeout(deadline, work).await {
        Ok(out) => Some(out),
        Err(_) => {
            tracing::warn!(
                deadline_secs = deadline.as_secs_f64(),
                "in-flight work did not finish before the shutdown deadline"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_that_finishes_returns_its_output() {
        let out = finish_within(Duration::from_secs(3600), async { 7 }).await;
        assert_eq!(out, Some(7));
    }

    #[tokio::test]
    async fn work_that_never_finishes_is_abandoned_at_the_deadline() {
        let out = finish_within(Duration::from_millis(10), std::future::pending::<u8>()).await;
        assert_eq!(out, None);
    }
}
