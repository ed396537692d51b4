//! Bindings of contract 0.2.0 (`wit/0.2.0/reconciler.wit`): world
//! `reconciler` here, world `reconciler-with-customize` in [`customize`],
//! which shares this module's types and `log` import.

wasmtime::component::bindgen!({
    path: "../../wit/0.2.0",
    world: "reconciler",
    exports: { default: async },
});

/// The world with `customize`. A second `bindgen!` because a component that
/// does not export `customize` cannot be pre-linked for it (the component
/// model has no optional exports).
pub(crate) mod customize {
    wasmtime::component::bindgen!({
        path: "../../wit/0.2.0",
        world: "reconciler-with-customize",
        exports: { default: async },
        with: {
            "wasm-reconciler:plugin/types": super::wasm_reconciler::plugin::types,
            "wasm-reconciler:plugin/host": super::wasm_reconciler::plugin::host,
        },
    });
}

use self::wasm_reconciler::plugin::host as host_iface;
pub(crate) use self::wasm_reconciler::plugin::types as wit;

use crate::contract::{self, ContractVersion, World};
use crate::error::CallError;
use crate::types as host;

/// Lowers the host request (the host shape is this version's shape).
pub(crate) fn request(req: host::RequestText) -> wit::ReconcileRequest {
    wit::ReconcileRequest {
        parent: req.parent,
        children: req.children,
        related: req
            .related
            .into_iter()
            .map(|group| wit::RelatedObjects {
                name: group.name,
                objects: group.objects,
            })
            .collect(),
        finalizing: req.finalizing,
        config: req.config,
        now: req.now,
    }
}

/// Lowers a `customize` request.
pub(crate) fn customize_request(
    req: &host::CustomizeRequest,
) -> Result<wit::CustomizeRequest, CallError> {
    Ok(wit::CustomizeRequest {
        parent: host::json_text(&req.parent)?,
        config: req.config.as_ref().map(host::json_text).transpose()?,
    })
}

/// What the plugin declared through `info`.
pub(crate) fn info(info: wit::PluginInfo, world: World) -> contract::PluginInfo {
    contract::PluginInfo {
        contract: ContractVersion::V0_2,
        world,
        reads_now: info.reads_now,
    }
}

/// Lifts one selector into the host shape (Kubernetes' operator spelling).
pub(crate) fn selector(s: wit::RelatedSelector) -> host::RelatedSelector {
    host::RelatedSelector {
        name: s.name,
        match_labels: s.match_labels.into_iter().collect(),
        match_expressions: s
            .match_expressions
            .into_iter()
            .map(|r| host::LabelRequirement {
                key: r.key,
                operator: match r.operator {
                    wit::SelectorOperator::In => "In",
                    wit::SelectorOperator::NotIn => "NotIn",
                    wit::SelectorOperator::Exists => "Exists",
                    wit::SelectorOperator::DoesNotExist => "DoesNotExist",
                }
                .to_string(),
                values: r.values,
            })
            .collect(),
        names: s.names,
        namespace: s.namespace,
    }
}

super::common_conversions!();
