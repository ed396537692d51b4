//! Shared helpers for the end-to-end tests.
pub mod bench;
pub mod cluster;
pub mod languages;
pub mod plugins;
pub mod reload;
