//! Rust SDK for wasm-reconciler plugins.
//!
//! A plugin is a plain Rust function from a [`Request`] to a [`Response`]:
//!
//! ```ignore
//! use wr_plugin_sdk::prelude::*;
//!
//! struct MyPlugin;
//!
//! impl Reconciler for MyPlugin {
//!     fn reconcile(req: &Request) -> Result<Response, Error> {
//!         let name = child_name(req.name()?, "config");
//!         let cm = object("v1", "ConfigMap", req.namespace(), &name);
//!         Ok(Response::new().child(cm))
//!     }
//! }
//!
//! wr_plugin_sdk::export_reconciler!(MyPlugin);
//! ```
//!
//! The SDK builds against the newest plugin contract,
//! `wasm-reconciler:plugin@0.2.0` (`wit/0.2.0/reconciler.wit`). What 0.2.0
//! adds, from the author's side:
//!
//! - [`Reconciler::READS_NOW`]: declare `false` when the response never
//!   depends on `request.now`, so the host may skip calls whose inputs did not
//!   change (the default, `true`, is always safe);
//! - [`Request::related`]: related objects grouped by the WasmController's
//!   related rule;
//! - [`Customize`] and [`export_reconciler_with_customize!`]: choose, per
//!   parent, which related objects to receive.
//!
//! The WIT bindings live in [`bindings`]; authors never touch them. Because
//! the logic is an ordinary function over `serde_json::Value`, it is unit
//! tested natively with `cargo test` (the bindings compile on any target; the
//! `log` import is only called on `wasm32`).

#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // generated code
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/0.2.0",
        world: "reconciler",
        // The customize world (generated in the plugin crate by
        // `export_reconciler_with_customize!`) shares these types.
        generate_unused_types: true,
        pub_export_macro: true,
        export_macro_name: "__export_reconciler_world",
        default_bindings_module: "wr_plugin_sdk::bindings",
    });
}

#[doc(hidden)]
pub mod __private;
pub mod alloc;
mod customize;
mod error;
mod log;
mod names;
mod object;
mod request;
mod response;

/// The guest allocator (wasm only; natively built plugins and their tests
/// keep the system allocator). See [`alloc`].
#[cfg(all(target_arch = "wasm32", feature = "bump-allocator"))]
#[global_allocator]
static ALLOCATOR: alloc::BumpAllocator = alloc::BumpAllocator::new();

pub use customize::{CustomizeRequest, RelatedSelector};
pub use error::Error;
pub use log::{LogLevel, log};
pub use names::{child_name, content_hash, is_dns1123_label};
pub use object::{Meta, annotate, find, label, object};
pub use request::{Children, ChildrenIter, Related, Request};
pub use response::{Condition, ConditionStatus, Event, EventType, Response};
pub use serde_json::{self, Value, json};

/// The one trait a plugin implements.
pub trait Reconciler {
    /// Whether the response may depend on `request.now`. Declare `false`
    /// only when it never does: the host may then skip a call whose other
    /// inputs (plugin, config, parent, children, related) did not change,
    /// and a plugin that did read `now` would miss the passing of time. The
    /// default, `true`, is always safe. The host reads it once, at load
    /// (the contract's `info` export).
    const READS_NOW: bool = true;

    /// Computes the desired children and status for one parent. Pure: the
    /// same request must always give the same response.
    fn reconcile(req: &Request) -> Result<Response, Error>;
}

/// A plugin that also chooses, per parent, which related objects it
/// receives (contract 0.2.0, world `reconciler-with-customize`). Export it
/// with [`export_reconciler_with_customize!`].
pub trait Customize: Reconciler {
    /// The related objects this parent needs, each narrowing one of the
    /// WasmController's related rules (by its key). A rule no selector
    /// names is handed over unnarrowed. Pure, like `reconcile`.
    fn customize(req: &CustomizeRequest) -> Result<Vec<RelatedSelector>, Error>;
}

/// Everything a plugin usually needs, in one `use`.
pub mod prelude {
    pub use crate::{
        Condition, ConditionStatus, Customize, CustomizeRequest, Error, Event, EventType, LogLevel,
        Meta, Reconciler, Related, RelatedSelector, Request, Response, Value, annotate, child_name,
        content_hash, find, json, label, log, object,
    };
}

/// Exports a [`Reconciler`] implementation as the component's `reconcile`
/// function. Use once per plugin crate: `wr_plugin_sdk::export_reconciler!(MyPlugin);`
#[macro_export]
macro_rules! export_reconciler {
    ($ty:ty) => {
        const _: () = {
            struct __WrPluginExport;

            impl $crate::bindings::Guest for __WrPluginExport {
                fn info() -> $crate::bindings::PluginInfo {
                    $crate::__private::info::<$ty>()
                }

                fn reconcile(
                    request: $crate::bindings::ReconcileRequest,
                ) -> ::core::result::Result<
                    $crate::bindings::ReconcileResponse,
                    $crate::bindings::ReconcileError,
                > {
                    $crate::__private::dispatch::<$ty>(request)
                }
            }

            $crate::bindings::__export_reconciler_world!(__WrPluginExport with_types_in $crate::bindings);
        };
    };
}

/// Exports a [`Customize`] implementation: `reconcile`, `info` and
/// `customize` (world `reconciler-with-customize`). Use instead of
/// [`export_reconciler!`], once per plugin crate.
///
/// The world's bindings are generated in the plugin crate itself, by this
/// macro, from the WIT files of this repository (`$CARGO_MANIFEST_DIR/../../wit/0.2.0`,
/// right for a crate under `plugins/`; pass the WIT directory as a second
/// argument otherwise). They cannot live in this crate: the component type
/// of every world generated in a crate ends up in the plugin, and a plugin
/// without `customize` would then be refused for not exporting it.
#[macro_export]
macro_rules! export_reconciler_with_customize {
    ($ty:ty) => {
        $crate::export_reconciler_with_customize!($ty, "../../wit/0.2.0");
    };
    ($ty:ty, $wit:literal) => {
        #[allow(clippy::too_many_arguments)] // generated code
        mod __wr_customize_bindings {
            $crate::__wit_bindgen::generate!({
                path: $wit,
                world: "reconciler-with-customize",
                runtime_path: "wr_plugin_sdk::__wit_bindgen::rt",
                with: {
                    "wasm-reconciler:plugin/types@0.2.0": wr_plugin_sdk::bindings::wasm_reconciler::plugin::types,
                    "wasm-reconciler:plugin/host@0.2.0": wr_plugin_sdk::bindings::wasm_reconciler::plugin::host,
                },
            });
        }

        const _: () = {
            struct __WrPluginExport;

            impl __wr_customize_bindings::Guest for __WrPluginExport {
                fn info() -> $crate::bindings::PluginInfo {
                    $crate::__private::info::<$ty>()
                }

                fn reconcile(
                    request: $crate::bindings::ReconcileRequest,
                ) -> ::core::result::Result<
                    $crate::bindings::ReconcileResponse,
                    $crate::bindings::ReconcileError,
                > {
                    $crate::__private::dispatch::<$ty>(request)
                }

                fn customize(
                    request: $crate::bindings::wasm_reconciler::plugin::types::CustomizeRequest,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<$crate::bindings::wasm_reconciler::plugin::types::RelatedSelector>,
                    $crate::bindings::ReconcileError,
                > {
                    $crate::__private::dispatch_customize::<$ty>(request)
                }
            }

            __wr_customize_bindings::export!(__WrPluginExport with_types_in __wr_customize_bindings);
        };
    };
}

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;
