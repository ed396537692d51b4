//! Shared helpers for the end-to-end tests.
pub mod audit;
pub mod bench;
pub mod cluster;
pub mod languages;
pub mod logs;
pub mod plugins;
pub mod real_cluster;
pub mod reload;
pub mod shard_log;
pub mod target;
