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
//! The WIT bindings live in [`bindings`]; authors never touch them. Because
//! the logic is an ordinary function over `serde_json::Value`, it is unit
//! tested natively with `cargo test` (the bindings compile on any target; the
//! `log` import is only called on `wasm32`).

#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // generated code
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "reconciler",
        pub_export_macro: true,
        export_macro_name: "__export_reconciler_world",
        default_bindings_module: "wr_plugin_sdk::bindings",
    });
}

#[doc(hidden)]
pub mod __private;
mod error;
mod log;
mod names;
mod object;
mod request;
mod response;

pub use error::Error;
pub use log::{LogLevel, log};
pub use names::{child_name, content_hash, is_dns1123_label};
pub use object::{Meta, annotate, find, label, object};
pub use request::Request;
pub use response::{Condition, ConditionStatus, Event, EventType, Response};
pub use serde_json::{self, Value, json};

/// The one trait a plugin implements.
pub trait Reconciler {
    /// Computes the desired children and status for one parent. Pure: the
    /// same request must always give the same response.
    fn reconcile(req: &Request) -> Result<Response, Error>;
}

/// Everything a plugin usually needs, in one `use`.
pub mod prelude {
    pub use crate::{
        Condition, ConditionStatus, Error, Event, EventType, LogLevel, Meta, Reconciler, Request,
        Response, Value, annotate, child_name, content_hash, find, json, label, log, object,
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
