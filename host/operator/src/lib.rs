//! What it takes to run the host as a production operator (issue 6): leader
//! election on a `coordination.k8s.io/v1` Lease, the `/metrics`, `/healthz`,
//! `/readyz` and `/livez` endpoints, the Prometheus metric families, and the
//! SIGTERM/SIGINT shutdown sequence.
//!
//! The pieces are independent and take plain inputs (watch channels, a
//! registry, a [`liveness::Liveness`] handle) so that `wasm-reconciler run` wires
//! them to the engine without this crate depending on it.

pub mod api_metrics;
pub mod health;
pub mod leader;
pub mod liveness;
pub mod metrics;
pub mod shard;
pub mod shutdown;

pub use api_metrics::ApiMetricsLayer;
pub use health::{HealthInputs, serve as serve_health};
pub use leader::{LeaderElection, LeaderError, LeaderState, LeaseConfig};
pub use liveness::Liveness;
pub use metrics::Metrics;
pub use shutdown::{ShutdownSignal, finish_within};
