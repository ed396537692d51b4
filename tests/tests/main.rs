//! The integration tests of wr-tests as one binary: each file under `tests/`
//! is a module here (one link of wasmtime and kube instead of one per file).
//! Run one file's tests with `cargo test -p wr-tests --test suite -- FILE::`.
//! A new test file is added as a `mod` line; it logs through
//! `wr_tests::logs::init()` (one tracing subscriber per process).

mod contract_versions;
mod engine_adoption;
mod engine_decorator;
mod engine_examples;
mod engine_fairness;
mod engine_host;
mod engine_memo;
mod engine_related;
mod engine_rolling;
mod engine_scenarios;
mod engine_status;
mod engine_status_mode;
mod engine_strategies;
mod engine_trial;
mod languages_bench;
mod languages_e2e;
mod languages_metacontroller;
mod languages_starlingmonkey;
mod languages_static_site;
mod plan_preview;
mod reload_configmap;
mod rollouts;
mod runtime_cache;
mod runtime_determinism;
mod runtime_sandbox;
