//! One tracing subscriber for the whole test process.
//!
//! The integration tests share one binary (`tests/main.rs`), and a process has
//! one global subscriber: whichever test installed its own first would decide
//! for all (the log-capturing tests of `engine_host` would capture nothing
//! when another test's test-writer subscriber won). So every test calls
//! [`init`]: `RUST_LOG` lines go to the test writer (shown for failed tests),
//! and every line at `warn` and above (the CLI's default filter) is also kept
//! in memory for [`lines`].

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

static CAPTURED: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

fn captured() -> Arc<Mutex<Vec<u8>>> {
    CAPTURED.get_or_init(Arc::default).clone()
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the process's subscriber (once; later calls do nothing).
pub fn init() {
    let buf = captured();
    let shown = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(EnvFilter::from_default_env());
    let kept = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(move || Capture(buf.clone()))
        .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
    let _ = tracing_subscriber::registry()
        .with(shown)
        .with(kept)
        .try_init();
}

/// Kept lines (`warn` and above, from every test in the process so far) that
/// contain every one of `parts`: name something unique to the test.
pub fn lines(parts: &[&str]) -> Vec<String> {
    let buf = captured();
    let text = String::from_utf8_lossy(&buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    text.lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(str::to_string)
        .collect()
}
