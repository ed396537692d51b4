//! The integration tests of the `wasm-reconciler` binary as one test binary:
//! each file here is a module (one link of wasmtime and kube instead of one
//! per file). Run one file's tests with
//! `cargo test -p wasm-reconciler --test cli -- FILE::`. A new test file is
//! added as a `mod` line. Helpers shared by several files are the modules
//! `run_common`, `request_log` and `real_kube`.

mod real_kube;
mod request_log;
mod run_common;

mod apiserver_auth;
mod apiserver_simulate;
mod dev;
mod docs_builtin_kinds;
mod import_metacontroller;
mod plan;
mod publish;
mod rbac_enforced;
mod rbac_requests;
mod real_helm;
mod real_rbac;
mod record_replay;
mod render;
mod render_agrees;
mod rollout_cli;
mod rollout_leader;
mod run_leader;
mod run_logs;
mod run_metrics;
mod run_shard;
mod signed_plugins;
