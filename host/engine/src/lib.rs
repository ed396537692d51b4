//! The reconcile engine (issue 4): the `WasmController` CRD, one controller per
//! WasmController, shared caches, the work queue, child apply, finalizers, status
//! and events.
//!
//! Entry point: [`Manager::new`] + [`Manager::run`]. Each controller applies
//! children under the field manager `wasm-reconciler/<controller-name>` and puts
//! the finalizer `wasm-reconciler.dev/<controller-name>` on parents when its spec
//! says `finalize: true`.

// Production functions stay short (issue 14; threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

pub mod admission;
pub mod adopt;
pub mod apply;
pub mod backoff;
pub mod cache;
pub mod canary;
pub mod candidate;
pub mod chunked;
pub mod controller;
pub mod crd;
pub mod decide;
pub mod diff;
pub mod errors;
pub mod events;
pub mod finalize;
pub mod loads;
pub mod manager;
mod memo;
pub mod observe;
pub mod own_writes;
pub mod plan;
pub mod plugin;
pub mod plugin_source;
pub mod plugin_watch;
pub mod queue;
mod reconcile;
pub mod record;
pub mod related;
pub mod resolve;
pub mod rollout;
pub mod shadow;
pub mod shard_bucket;
pub mod shard_label;
pub mod signing;
pub mod status;
pub mod status_schema;
pub mod target;
pub mod turns;
pub mod validate;
pub mod versions;
pub mod wasm;

pub use crd::{WasmController, WasmControllerSpec, WasmControllerStatus, crd_yaml};
pub use manager::{EngineError, Manager, ManagerHandle, ManagerOptions, engine_config};
pub use observe::{EngineObserver, FaultKind, ReconcileReport, ReconcileResult};
pub use plugin::{PluginError, PluginLoader, ReconcilePlugin};
pub use target::Target;

#[cfg(test)]
mod test_fixtures;
