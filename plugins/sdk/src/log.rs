//! The `log` import: the only capability a plugin has.

/// How loud a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Writes a line to the host log (tagged by the host with controller and
/// parent). The host caps size and rate. In native unit tests this prints to
/// stderr, which `cargo test` captures.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::wasm_reconciler::plugin::types::LogLevel as Wit;
        let level = match level {
            LogLevel::Trace => Wit::Trace,
            LogLevel::Debug => Wit::Debug,
            LogLevel::Info => Wit::Info,
            LogLevel::Warn => Wit::Warn,
            LogLevel::Error => Wit::Error,
        };
        crate::bindings::wasm_reconciler::plugin::host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[plugin {level:?}] {message}");
}
