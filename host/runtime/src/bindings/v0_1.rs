//! Bindings of contract 0.1.0 (`wit/reconciler.wit`), kept so components
//! built against it load forever. Frozen: nothing here changes when the
//! contract moves on, only the adapter to the host types may.

wasmtime::component::bindgen!({
    path: "../../wit/reconciler.wit",
    world: "reconciler",
    exports: { default: async },
});

use self::wasm_reconciler::plugin::host as host_iface;
pub(crate) use self::wasm_reconciler::plugin::types as wit;

use crate::error::CallError;
use crate::types as host;

/// Lowers the host request: `related` is flattened (0.1.0 has no groups).
pub(crate) fn request(req: &host::ReconcileRequest) -> Result<wit::ReconcileRequest, CallError> {
    use super::text;
    Ok(wit::ReconcileRequest {
        parent: text(&req.parent)?,
        children: req.children.iter().map(text).collect::<Result<_, _>>()?,
        related: req.related_flat().map(text).collect::<Result<_, _>>()?,
        finalizing: req.finalizing,
        config: req.config.as_ref().map(text).transpose()?,
        now: req.now.clone(),
    })
}

super::common_conversions!();
