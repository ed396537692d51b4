//! Per-call store state: the empty WASI context, captured stdio, the memory
//! limiter and the plugin `log` import.
//!
//! Everything here is created fresh for each call, so nothing a plugin does
//! survives into the next call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

/// How loud a plugin log line is: the `log-level` of every contract version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Cap on the bytes a plugin may write to stdout and to stderr per call; the
/// rest is dropped (counted, not an error: logging must never fail a call).
pub(crate) const STDIO_CAP_BYTES: usize = 16 * 1024;
/// Cap on one `log` message and on all `log` messages of one call.
pub(crate) const LOG_MESSAGE_CAP_BYTES: usize = 4 * 1024;
pub(crate) const LOG_TOTAL_CAP_BYTES: usize = 64 * 1024;

/// The fixed instant plugins see if they read the WASI wall clock:
/// 2000-01-01T00:00:00Z. Time reaches a plugin only through `request.now`.
const FIXED_WALL_CLOCK_SECS: u64 = 946_684_800;

/// The state of one call's `Store`.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    /// Set when the plugin tried to grow memory past the cap, so a resulting
    /// trap is reported as `MemoryLimit` rather than a generic trap.
    pub(crate) memory_limit_hit: bool,
    /// Bytes of linear memory granted to the instance so far (all memories;
    /// wasm memory never shrinks, so this is the call's peak).
    pub(crate) memory_bytes: usize,
    pub(crate) stdout: CapturedOutput,
    pub(crate) stderr: CapturedOutput,
    log_bytes: usize,
    log_dropped: usize,
}

impl HostState {
    pub(crate) fn new(max_memory_bytes: usize) -> Self {
        let stdout = CapturedOutput::new(STDIO_CAP_BYTES);
        let stderr = CapturedOutput::new(STDIO_CAP_BYTES);
        // Nothing is inherited: no preopens, env, args or network. Clocks are
        // frozen and randomness is a constant stream, so a plugin that reads
        // them gets nothing usable and stays deterministic.
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FixedWallClock)
            .monotonic_clock(FixedMonotonicClock)
            .secure_random(wasmtime_wasi::Deterministic::new(vec![0]))
            .insecure_random(wasmtime_wasi::Deterministic::new(vec![0]))
            .insecure_random_seed(0)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let limits = StoreLimitsBuilder::new()
            .memory_size(max_memory_bytes)
            .trap_on_grow_failure(true)
            .build();
        HostState {
            wasi,
            table: ResourceTable::new(),
            limits,
            memory_limit_hit: false,
            memory_bytes: 0,
            stdout,
            stderr,
            log_bytes: 0,
            log_dropped: 0,
        }
    }

    /// Number of log messages dropped because the per-call budget was used up.
    pub(crate) fn log_dropped(&self) -> usize {
        self.log_dropped
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Delegates to `StoreLimits` (which traps on a failed grow) and remembers
/// that the cap was hit.
impl ResourceLimiter for HostState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let outcome = self.limits.memory_growing(current, desired, maximum);
        match outcome {
            Ok(true) => self.memory_bytes += desired.saturating_sub(current),
            _ => self.memory_limit_hit = true,
        }
        outcome
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_limit_hit = true;
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl HostState {
    /// The `log` import, whichever contract version called it (the bindings
    /// of each version delegate here).
    pub(crate) fn plugin_log(&mut self, level: Level, message: &str) {
        if self.log_bytes >= LOG_TOTAL_CAP_BYTES {
            self.log_dropped += 1;
            return;
        }
        let message = truncate(message, LOG_MESSAGE_CAP_BYTES);
        self.log_bytes += message.len();
        emit(level, "log", message);
    }
}

/// Writes one plugin log line to `tracing` under target `wr_plugin`; the
/// engine's span around the call adds controller and parent.
pub(crate) fn emit(level: Level, source: &'static str, message: &str) {
    match level {
        Level::Trace => tracing::trace!(target: "wr_plugin", source, message),
        Level::Debug => tracing::debug!(target: "wr_plugin", source, message),
        Level::Info => tracing::info!(target: "wr_plugin", source, message),
        Level::Warn => tracing::warn!(target: "wr_plugin", source, message),
        Level::Error => tracing::error!(target: "wr_plugin", source, message),
    }
}

/// Cuts `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Sends what the plugin wrote to stdout/stderr to the log, one event per line.
pub(crate) fn flush_stdio(state: &HostState) {
    for (source, pipe, level) in [
        ("stdout", &state.stdout, Level::Info),
        ("stderr", &state.stderr, Level::Warn),
    ] {
        let (bytes, dropped) = pipe.take();
        let text = String::from_utf8_lossy(&bytes);
        for line in text.lines().filter(|l| !l.is_empty()) {
            emit(level, source, line);
        }
        if dropped > 0 {
            tracing::warn!(target: "wr_plugin", source, dropped_bytes = dropped, "plugin output over the cap was dropped");
        }
    }
    if state.log_dropped() > 0 {
        tracing::warn!(target: "wr_plugin", dropped_messages = state.log_dropped(), "plugin log messages over the cap were dropped");
    }
}

struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::from_secs(FIXED_WALL_CLOCK_SECS)
    }
}

struct FixedMonotonicClock;

impl HostMonotonicClock for FixedMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A size-capped in-memory stdout/stderr. Unlike wasmtime-wasi's
/// `MemoryOutputPipe`, writes past the cap are silently dropped (and counted)
/// instead of trapping: a chatty plugin must not fail for it.
#[derive(Clone)]
pub(crate) struct CapturedOutput {
    inner: Arc<Mutex<Captured>>,
    cap: usize,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: usize,
}

impl CapturedOutput {
    fn new(cap: usize) -> Self {
        CapturedOutput {
            inner: Arc::new(Mutex::new(Captured::default())),
            cap,
        }
    }

    fn push(&self, data: &[u8]) {
        // A poisoned lock only means another writer panicked; the buffer is still usable.
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.cap.saturating_sub(inner.bytes.len());
        let keep = room.min(data.len());
        inner.bytes.extend_from_slice(&data[..keep]);
        inner.dropped += data.len() - keep;
    }

    /// Returns what was captured and how many bytes were dropped.
    fn take(&self) -> (Vec<u8>, usize) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let taken = std::mem::take(&mut *inner);
        (taken.bytes, taken.dropped)
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_output_drops_past_the_cap() {
        let out = CapturedOutput::new(4);
        out.push(b"abc");
        out.push(b"defg");
        let (bytes, dropped) = out.take();
        assert_eq!(bytes, b"abcd");
        assert_eq!(dropped, 3);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
