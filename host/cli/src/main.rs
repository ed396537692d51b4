//! `wasm-reconciler`: the command-line edge of the project. Each subcommand
//! lives in its own module under `cmd/`; this file only parses and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod logging;

/// Kubernetes operator host that runs reconcile logic as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "wasm-reconciler", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    log: logging::LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a plugin offline on files: parent (+ observed children) in, desired state out.
    Render(cmd::render::RenderArgs),
    /// Run the embedded Kubernetes-compatible API server on its own.
    Apiserver(cmd::apiserver::ApiserverArgs),
    /// Print the CustomResourceDefinitions the host needs (WasmController).
    Crds(cmd::crds::CrdsArgs),
    /// Run the operator: one controller per WasmController, until SIGINT/SIGTERM.
    Run(cmd::run::RunArgs),
    /// Print the least-privilege RBAC (ClusterRole, Lease Role, bindings) for WasmControllers.
    Rbac(cmd::rbac::RbacArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(err) = logging::init(&cli.log) {
        eprintln!("error: {err:#}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Render(args) => cmd::render::run(args),
        Command::Apiserver(args) => cmd::apiserver::run(args),
        Command::Crds(args) => cmd::crds::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Rbac(args) => cmd::rbac::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
