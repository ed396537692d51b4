//! An embedded Kubernetes-compatible API server (issue 3): the dev cluster
//! behind `wasm-reconciler dev` and the test bed of every integration test.
//!
//! It speaks the real HTTP/JSON protocol (discovery, get/list/watch,
//! create/update/patch/apply/delete, status subresources, CRDs) so that
//! `kube::Client` and `kubectl` work against it unchanged. Start one with
//! [`start`]; inject faults at run time with [`RunningServer::faults`]; count
//! API writes with [`RunningServer::requests`].

// `ApiError` is large (message, details, causes) but only built on the
// failure path and rendered once per request; boxing it everywhere would
// cost more code than it saves.
#![allow(clippy::result_large_err)]
#![warn(clippy::too_many_lines)]

pub mod patch;

mod app;
mod catalog;

pub mod auth;
mod discovery;
mod errors;
pub mod faults;
mod gc;
mod handlers;
mod kinds;
pub mod kubeconfig;
mod meta;
mod openapi;
mod ops;
mod patching;
mod persistence;
mod printers;
mod printers_config;
mod protobuf;
mod requests;
mod resources;
mod scale;
mod selectors;
mod server;
mod store;
mod table;
mod validation;
mod version;
mod watch;

pub use auth::{AuthConfig, AuthorizationMode};
pub use errors::ApiError;
pub use faults::{Decision, FaultAction, FaultHandle, FaultRule, FaultSpec, Injected, WatchFaults};
pub use requests::RequestRecord;
pub use server::{Config, RunningServer, StartError, start};
pub use version::{KUBERNETES_MINOR, KUBERNETES_VERSION};

/// A built-in resource this server serves, for tools that need a kind's
/// plural and scope without a running server (`render --controller`
/// resolving child kinds offline, the list in `docs/authoring.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinKind {
    /// API group (`""` for the core group).
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name, e.g. `deployments`.
    pub resource: String,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// Every built-in resource of the catalog (`catalog.rs`), one per group + plural.
pub fn builtin_kinds() -> Vec<BuiltinKind> {
    catalog::builtins()
        .into_iter()
        .map(|d| BuiltinKind {
            group: d.group,
            versions: d.versions,
            kind: d.kind,
            resource: d.resource,
            namespaced: d.namespaced,
        })
        .collect()
}
