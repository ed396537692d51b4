//! `wasm-reconciler crds`: print the CRDs the host needs (generated from the
//! engine's Rust types; `crds/` holds the checked-in copy).

use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {}

pub fn run(_args: CrdsArgs) -> anyhow::Result<ExitCode> {
    let yaml = wr_engine::crd_yaml().context("rendering the WasmController CRD")?;
    print!("{yaml}");
    Ok(ExitCode::SUCCESS)
}
