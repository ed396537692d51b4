//! Load-time checks that a component implements the `reconciler` world, with
//! messages that say exactly what is missing or unexpected.

use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker};

use crate::bindings::ReconcilerPre;
use crate::error::LoadError;
use crate::sandbox::HostState;

/// Import namespaces the host links. Anything else is rejected up front, so
/// the error names the import instead of failing later at instantiation.
const PROVIDED_IMPORTS: &[&str] = &[
    "wasm-reconciler:plugin/host@0.1.",
    "wasm-reconciler:plugin/types@0.1.",
    "wasi:",
];

/// Why `wasi:http` is refused and how to build without it. The default
/// StarlingMonkey build of componentize-js imports it for `fetch()`.
const WASI_HTTP_HINT: &str = "plugins get no network, so the host links no wasi:http. \
A componentize-js (StarlingMonkey) build imports it by default: build with \
`disableFeatures: [\"http\"]` (jco: `jco componentize --disable http`), or with \
componentize-qjs; see docs/authoring.md, JavaScript";

/// Checks imports and exports, then pre-links the component so every call
/// only instantiates.
pub(crate) fn link(
    engine: &Engine,
    linker: &Linker<HostState>,
    component: &Component,
) -> Result<ReconcilerPre<HostState>, LoadError> {
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        if name.starts_with("wasi:http/") {
            return Err(LoadError::UnknownImport {
                import: name.to_string(),
                detail: WASI_HTTP_HINT.into(),
            });
        }
        if !PROVIDED_IMPORTS
            .iter()
            .any(|prefix| name.starts_with(prefix))
        {
            return Err(LoadError::UnknownImport {
                import: name.to_string(),
                detail: "no such interface in the host".into(),
            });
        }
    }
    let exports: Vec<(String, bool)> = ty
        .exports(engine)
        .map(|(name, item)| {
            (
                name.to_string(),
                matches!(item.ty, ComponentItem::ComponentFunc(_)),
            )
        })
        .collect();
    match exports.iter().find(|(name, _)| name == "reconcile") {
        None => {
            let names: Vec<&str> = exports.iter().map(|(n, _)| n.as_str()).collect();
            return Err(LoadError::WorldMismatch(format!(
                "missing export `reconcile: func(request: reconcile-request) -> result<reconcile-response, reconcile-error>`; the component exports [{}]",
                names.join(", ")
            )));
        }
        Some((_, false)) => {
            return Err(LoadError::WorldMismatch(
                "export `reconcile` is not a function".into(),
            ));
        }
        Some(_) => {}
    }
    let pre = linker.instantiate_pre(component).map_err(|e| {
        let detail = format!("{e:#}");
        let import = imported_name(&detail).unwrap_or_else(|| "(see detail)".into());
        LoadError::UnknownImport { import, detail }
    })?;
    ReconcilerPre::new(pre).map_err(|e| {
        LoadError::WorldMismatch(format!(
            "export `reconcile` has the wrong type (built against another WIT version?): {e:#}"
        ))
    })
}

/// Pulls the import name out of wasmtime's "component imports instance `x`" message.
fn imported_name(detail: &str) -> Option<String> {
    let start = detail.find('`')? + 1;
    let len = detail[start..].find('`')?;
    Some(detail[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_backticked_name() {
        assert_eq!(
            imported_name("component imports instance `wasi:cli/env@0.3.0`, but ...").as_deref(),
            Some("wasi:cli/env@0.3.0")
        );
        assert_eq!(imported_name("nothing here"), None);
    }
}
