//! Load-time checks that a component implements one of the contract's
//! worlds, which one (that is how the contract version is detected: from the
//! component's type, never from a flag), with messages that say exactly what
//! is missing or unexpected.

use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre, Linker};

use crate::bindings::{WorldPre, v0_1, v0_2};
use crate::contract::{ContractVersion, World};
use crate::error::LoadError;
use crate::sandbox::HostState;

/// Import namespaces the host links. Anything else is rejected up front, so
/// the error names the import instead of failing later at instantiation.
const PROVIDED_IMPORTS: &[&str] = &[
    "wasm-reconciler:plugin/host@0.1.",
    "wasm-reconciler:plugin/types@0.1.",
    "wasm-reconciler:plugin/host@0.2.",
    "wasm-reconciler:plugin/types@0.2.",
    "wasi:",
];

/// Why `wasi:http` is refused and how to build without it. The default
/// StarlingMonkey build of componentize-js imports it for `fetch()`.
const WASI_HTTP_HINT: &str = "plugins get no network, so the host links no wasi:http. \
A componentize-js (StarlingMonkey) build imports it by default: build with \
`disableFeatures: [\"http\", \"fetch-event\"]` (jco: `jco componentize --disable http fetch-event`), or with \
componentize-qjs; see docs/authoring.md, JavaScript";

/// Checks imports and exports, finds the world the component implements and
/// pre-links it for that world so every call only instantiates.
pub(crate) fn link(
    engine: &Engine,
    linker: &Linker<HostState>,
    component: &Component,
) -> Result<WorldPre, LoadError> {
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        if name.starts_with("wasi:http/") {
            return Err(LoadError::UnknownImport {
                import: name.to_string(),
                detail: WASI_HTTP_HINT.into(),
                source: None,
            });
        }
        if !PROVIDED_IMPORTS
            .iter()
            .any(|prefix| name.starts_with(prefix))
        {
            return Err(LoadError::UnknownImport {
                import: name.to_string(),
                detail: "no such interface in the host".into(),
                source: None,
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
    let func = |wanted: &str| exports.iter().find(|(name, _)| name == wanted);
    match func("reconcile") {
        None => {
            let names: Vec<&str> = exports.iter().map(|(n, _)| n.as_str()).collect();
            return Err(LoadError::WorldMismatch {
                detail: format!(
                    "missing export `reconcile: func(request: reconcile-request) -> result<reconcile-response, reconcile-error>`; the component exports [{}]",
                    names.join(", ")
                ),
                source: None,
            });
        }
        Some((_, false)) => {
            return Err(LoadError::WorldMismatch {
                detail: "export `reconcile` is not a function".into(),
                source: None,
            });
        }
        Some(_) => {}
    }
    let pre = linker.instantiate_pre(component).map_err(|e| {
        let detail = format!("{e:#}");
        let import = imported_name(&detail).unwrap_or_else(|| "(see detail)".into());
        LoadError::UnknownImport {
            import,
            detail,
            source: Some(e),
        }
    })?;
    // The exports say which world the component means; the typed pre-link
    // then checks every export's type against that world's bindings.
    let (version, world) = match (func("info").is_some(), func("customize").is_some()) {
        (true, true) => (ContractVersion::V0_2, World::ReconcilerWithCustomize),
        (true, false) => (ContractVersion::V0_2, World::Reconciler),
        (false, _) => (ContractVersion::V0_1, World::Reconciler),
    };
    let first = match typed(pre.clone(), version, world) {
        Ok(linked) => return Ok(linked),
        Err(e) => e,
    };
    // Extra exports may mislead the guess (e.g. an unrelated `info`): any
    // other world whose types fit is still that world.
    for other_version in ContractVersion::ALL.iter().rev() {
        for other_world in other_version.worlds() {
            if (*other_version, *other_world) == (version, world) {
                continue;
            }
            if let Ok(linked) = typed(pre.clone(), *other_version, *other_world) {
                return Ok(linked);
            }
        }
    }
    Err(LoadError::WorldMismatch {
        detail: format!(
            "by its exports it is `{}`, but an export has the wrong type (built against another WIT version?): {first:#}",
            world.qualified(version)
        ),
        source: Some(first),
    })
}

/// Pre-links for one world; fails when an export's type does not match it.
fn typed(
    pre: InstancePre<HostState>,
    version: ContractVersion,
    world: World,
) -> wasmtime::Result<WorldPre> {
    Ok(match (version, world) {
        (ContractVersion::V0_1, _) => WorldPre::V0_1(v0_1::ReconcilerPre::new(pre)?),
        (ContractVersion::V0_2, World::Reconciler) => {
            WorldPre::V0_2(v0_2::ReconcilerPre::new(pre)?)
        }
        (ContractVersion::V0_2, World::ReconcilerWithCustomize) => {
            WorldPre::V0_2Customize(v0_2::customize::ReconcilerWithCustomizePre::new(pre)?)
        }
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
