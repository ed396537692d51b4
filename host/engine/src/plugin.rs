//! The engine's view of a plugin: something that answers a `ReconcileRequest`.
//!
//! A trait rather than `wr_runtime::Plugin` directly so the controller machinery
//! can be unit-tested with in-process fakes, and so tests can script plugin
//! behaviour (fail N times, permanent error, invalid output) without building a
//! component per scenario. Production code uses [`crate::wasm::WasmLoader`].

use std::sync::Arc;

use futures::future::BoxFuture;
use wr_runtime::{
    CallLimits, CustomizeRequest, FaultKind, ReconcileRequest, ReconcileResponse, RelatedSelector,
};

/// Why a plugin call produced no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// Retrying the same input cannot help: Ready=False, no retry until the parent changes.
    #[error("permanent plugin error {reason}: {message}")]
    Permanent {
        /// CamelCase reason.
        reason: String,
        /// Detail.
        message: String,
    },
    /// May succeed later: per-key backoff.
    #[error("transient plugin error {reason}: {message}")]
    Transient {
        /// CamelCase reason.
        reason: String,
        /// Detail.
        message: String,
    },
    /// The sandbox stopped the call (trap, timeout, fuel, memory, malformed
    /// output): the runtime's own fault kind, carried as a type up to the
    /// metrics. Malformed output (`FaultKind::InvalidOutput`) is not retried,
    /// like output the host's validation rejects ([`crate::decide`]).
    #[error("plugin fault ({kind}): {message}")]
    Fault {
        /// Which limit or failure.
        kind: FaultKind,
        /// Detail.
        message: String,
    },
}

/// A loaded plugin.
pub trait ReconcilePlugin: Send + Sync {
    /// `sha256:<hex>` of the component.
    fn digest(&self) -> &str;
    /// The plugin contract version and world the component implements and
    /// what it declared at load (`None`: not a component, e.g. a test fake).
    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        None
    }
    /// One reconcile call.
    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>>;
    /// One `customize` call: the related objects this parent asks for.
    /// `Ok(None)` (the default) when the plugin does not export `customize`:
    /// the controller's related rules apply unnarrowed.
    fn customize<'a>(
        &'a self,
        _req: &'a CustomizeRequest,
        _limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<Option<Vec<RelatedSelector>>, PluginError>> {
        Box::pin(async { Ok(None) })
    }
}

/// Turns component bytes into a callable plugin.
pub trait PluginLoader: Send + Sync {
    /// Compiles/validates `bytes` (CPU heavy: implementations must not block the
    /// async runtime). The error message is shown in the `PluginLoaded` condition.
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>>;
}
