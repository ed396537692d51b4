//! The production [`PluginLoader`]: WebAssembly components run by `wr-runtime`.

use std::sync::Arc;

use futures::future::BoxFuture;
use wr_runtime::{
    CallError, CallLimits, PluginRuntime, ReconcileRequest, ReconcileResponse, RequestText,
};

use crate::plugin::{PluginError, PluginLoader, ReconcilePlugin};

/// Loads components with a shared [`PluginRuntime`] (compilation off the async runtime).
#[derive(Clone)]
pub struct WasmLoader {
    runtime: PluginRuntime,
}

impl WasmLoader {
    /// A loader backed by `runtime`.
    pub fn new(runtime: PluginRuntime) -> Self {
        Self { runtime }
    }
}

impl PluginLoader for WasmLoader {
    fn load(&self, bytes: Vec<u8>) -> BoxFuture<'static, Result<Arc<dyn ReconcilePlugin>, String>> {
        let rt = self.runtime.clone();
        Box::pin(async move {
            let loaded = tokio::task::spawn_blocking(move || rt.load(&bytes))
                .await
                .map_err(|e| format!("plugin load task failed: {e}"))?;
            loaded
                .map(|p| Arc::new(WasmPlugin(p)) as Arc<dyn ReconcilePlugin>)
                .map_err(|e| e.to_string())
        })
    }
}

struct WasmPlugin(wr_runtime::Plugin);

impl ReconcilePlugin for WasmPlugin {
    fn digest(&self) -> &str {
        self.0.digest()
    }

    fn info(&self) -> Option<wr_runtime::PluginInfo> {
        Some(*self.0.info())
    }

    fn reconcile<'a>(
        &'a self,
        req: &'a ReconcileRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move { self.0.reconcile(req, limits).await.map_err(map_error) })
    }

    fn reconcile_text<'a>(
        &'a self,
        _req: &'a ReconcileRequest,
        text: RequestText,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<ReconcileResponse, PluginError>> {
        Box::pin(async move { self.0.reconcile_text(text, limits).await.map_err(map_error) })
    }

    fn customize<'a>(
        &'a self,
        req: &'a wr_runtime::CustomizeRequest,
        limits: &'a CallLimits,
    ) -> BoxFuture<'a, Result<Option<Vec<wr_runtime::RelatedSelector>>, PluginError>> {
        Box::pin(async move { self.0.customize(req, limits).await.map_err(map_error) })
    }
}

/// Maps the runtime's error onto the engine's: the same three classes, the
/// fault kind kept as it is (how each is handled is [`crate::decide`]'s call).
pub fn map_error(e: CallError) -> PluginError {
    match e {
        CallError::Permanent { reason, message } => PluginError::Permanent { reason, message },
        CallError::Transient { reason, message } => PluginError::Transient { reason, message },
        CallError::Fault { kind, message } => PluginError::Fault { kind, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wr_runtime::FaultKind;

    #[test]
    fn fault_kinds_are_kept_as_they_are() {
        for kind in [FaultKind::Trap, FaultKind::InvalidOutput] {
            let f = map_error(CallError::Fault {
                kind,
                message: "x".into(),
            });
            assert_eq!(
                f,
                PluginError::Fault {
                    kind,
                    message: "x".into()
                }
            );
        }
    }
}
