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

use crate::types as host;

/// Lowers the host request: `related` is flattened (0.1.0 has no groups).
pub(crate) fn request(req: host::RequestText) -> wit::ReconcileRequest {
    wit::ReconcileRequest {
        parent: req.parent,
        children: req.children,
        related: req.related.into_iter().flat_map(|g| g.objects).collect(),
        finalizing: req.finalizing,
        config: req.config,
        now: req.now,
    }
}

super::common_conversions!();
