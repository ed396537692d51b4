//! Error types of the runtime: one enum per operation so callers can match on
//! exactly the failures that operation can have.

/// Why the runtime itself could not be created (engine config rejected,
/// cache directory unusable, ...).
///
/// Messages carry the underlying error's text (wasmtime's whole chain), and
/// the underlying error is also the [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime rejected the engine configuration.
    #[error("cannot create the wasmtime engine: {0:#}")]
    Engine(#[source] wasmtime::Error),
    /// The thread that advances the engine's epoch (call timeouts) did not start.
    #[error("cannot create the wasmtime engine: cannot start epoch ticker: {0}")]
    EpochTicker(#[source] std::io::Error),
    /// The host-side linker could not be set up (a bug, not a plugin problem).
    #[error("cannot set up the host linker: {0:#}")]
    Linker(#[source] wasmtime::Error),
    /// The precompiled-artifact cache directory cannot be created.
    #[error("cannot use cache directory {path}: {source}")]
    CacheDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a component could not be loaded.
///
/// Every message says what is wrong with the component itself, so that
/// `render` and the engine can show it to the plugin author verbatim; where
/// wasmtime said why, its error is the [`std::error::Error::source`] too.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid WebAssembly component (e.g. a core module,
    /// or a component using a feature the host does not enable).
    #[error("not a valid WebAssembly component: {0:#}")]
    Compile(#[source] wasmtime::Error),
    /// The bytes are neither WebAssembly binary (no `\0asm` header) nor text:
    /// not a component at all (a wrong file, a truncated or garbled upload).
    #[error(
        "not a WebAssembly component: {len} bytes that do not start with the WebAssembly magic \\0asm (they start with {head})"
    )]
    NotWasm {
        /// Size of the bytes.
        len: usize,
        /// Their first bytes, escaped.
        head: String,
    },
    /// The component imports something the host does not provide. The host
    /// provides `wasm-reconciler:plugin/host` (0.1.x and 0.2.x) and WASI 0.2
    /// (with an empty context).
    #[error(
        "component imports `{import}`, which the host does not provide (a plugin may import only `wasm-reconciler:plugin/host@0.1.x`, `wasm-reconciler:plugin/host@0.2.x` and WASI 0.2): {detail}"
    )]
    UnknownImport {
        import: String,
        detail: String,
        /// wasmtime's link error, when linking found the import.
        #[source]
        source: Option<wasmtime::Error>,
    },
    /// The component implements none of the plugin worlds this host supports
    /// (the message lists them: see `ContractVersion::supported_worlds`).
    #[error(
        "component implements none of the plugin worlds this host supports ({supported}): {detail}",
        supported = crate::ContractVersion::supported_worlds().join(", ")
    )]
    WorldMismatch {
        detail: String,
        /// wasmtime's type error, when an export has the wrong type.
        #[source]
        source: Option<wasmtime::Error>,
    },
    /// The component implements a 0.2.0 world but its `info` export failed
    /// when the host called it at load.
    #[error("plugin `info` failed at load: {0}")]
    Info(#[source] InfoError),
}

/// Why calling a 0.2.0 component's `info` at load failed.
#[derive(Debug, thiserror::Error)]
pub enum InfoError {
    /// The thread's runtime for the call could not be built.
    #[error("cannot start a runtime for it: {0}")]
    Runtime(#[source] std::io::Error),
    /// The runtime is shutting down.
    #[error("the instance slots are closed")]
    SlotsClosed,
    /// The call itself failed.
    #[error(transparent)]
    Call(CallError),
    /// The call panicked.
    #[error("the call panicked")]
    Panicked,
}

/// Which kind of misbehaviour stopped a call. The host survives all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FaultKind {
    /// The plugin trapped (panic, `unreachable`, out-of-bounds access, ...).
    Trap,
    /// The wall-clock timeout expired (epoch interruption).
    Timeout,
    /// The fuel budget was used up.
    FuelExhausted,
    /// The plugin tried to grow its memory past the cap.
    MemoryLimit,
    /// The response was not what the contract says (a child or the status
    /// is not a JSON object).
    InvalidOutput,
    /// The response is larger than `CallLimits::max_response_bytes`.
    ResponseTooLarge,
    /// A host-side failure that is not the plugin's fault.
    Internal,
}

impl FaultKind {
    /// Stable, CamelCase name, usable as a Kubernetes condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            FaultKind::Trap => "PluginTrap",
            FaultKind::Timeout => "PluginTimeout",
            FaultKind::FuelExhausted => "PluginFuelExhausted",
            FaultKind::MemoryLimit => "PluginMemoryLimit",
            FaultKind::InvalidOutput => "PluginInvalidOutput",
            FaultKind::ResponseTooLarge => "PluginResponseTooLarge",
            FaultKind::Internal => "PluginHostError",
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            FaultKind::Trap => "trap",
            FaultKind::Timeout => "timeout",
            FaultKind::FuelExhausted => "fuel exhausted",
            FaultKind::MemoryLimit => "memory limit",
            FaultKind::InvalidOutput => "invalid output",
            FaultKind::ResponseTooLarge => "response too large",
            FaultKind::Internal => "internal host error",
        };
        f.write_str(text)
    }
}

/// Why a call did not produce a response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The plugin says retrying the same input cannot help (e.g. invalid spec).
    #[error("permanent plugin error {reason}: {message}")]
    Permanent { reason: String, message: String },
    /// The plugin says a later attempt may succeed.
    #[error("transient plugin error {reason}: {message}")]
    Transient { reason: String, message: String },
    /// The plugin misbehaved (or the host failed); no answer from the plugin.
    #[error("plugin fault ({kind}): {message}")]
    Fault { kind: FaultKind, message: String },
}

impl CallError {
    /// Process exit code shared by the commands that call plugins
    /// (docs/architecture.md): 3 permanent, 4 transient, 5 fault.
    pub fn exit_code(&self) -> u8 {
        match self {
            CallError::Permanent { .. } => 3,
            CallError::Transient { .. } => 4,
            CallError::Fault { .. } => 5,
        }
    }

    /// CamelCase reason suitable for the parent's Ready condition.
    pub fn reason(&self) -> &str {
        match self {
            CallError::Permanent { reason, .. } | CallError::Transient { reason, .. } => reason,
            CallError::Fault { kind, .. } => kind.reason(),
        }
    }

    /// Whether the host should retry with backoff (transient errors and faults
    /// that may depend on load, like timeouts) rather than wait for a change.
    pub fn is_retryable(&self) -> bool {
        match self {
            CallError::Permanent { .. } => false,
            CallError::Transient { .. } => true,
            CallError::Fault { kind, .. } => {
                matches!(kind, FaultKind::Timeout | FaultKind::Internal)
            }
        }
    }

    pub(crate) fn fault(kind: FaultKind, message: impl Into<String>) -> Self {
        CallError::Fault {
            kind,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_match_the_cli_convention() {
        let p = CallError::Permanent {
            reason: "InvalidSpec".into(),
            message: "x".into(),
        };
        let t = CallError::Transient {
            reason: "NotYet".into(),
            message: "x".into(),
        };
        let f = CallError::fault(FaultKind::Timeout, "x");
        assert_eq!((p.exit_code(), t.exit_code(), f.exit_code()), (3, 4, 5));
        assert_eq!(f.reason(), "PluginTimeout");
        assert!(!p.is_retryable());
        assert!(t.is_retryable());
    }
}
