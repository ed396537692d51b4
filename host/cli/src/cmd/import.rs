//! `wasm-reconciler import metacontroller -f compositecontroller.yaml`: prints
//! the WasmController equivalent to each Metacontroller CompositeController,
//! with the settings that do not carry over listed (with the reason) on
//! stderr and as a comment above each controller. CustomResourceDefinitions
//! among the inputs tell the importer the kinds of custom child resources.
//! See docs/migrating-from-metacontroller.md.

mod go_duration;
mod kinds;
mod metacontroller;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use kinds::Kinds;
use metacontroller::PluginPlacement;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub from: ImportFrom,
}

#[derive(Debug, clap::Subcommand)]
pub enum ImportFrom {
    /// Convert Metacontroller CompositeControllers to WasmControllers.
    Metacontroller(MetacontrollerArgs),
}

#[derive(Debug, clap::Args)]
pub struct MetacontrollerArgs {
    /// CompositeController manifests (and CRDs of custom child kinds): files,
    /// directories, or `-` for stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Namespace of the plugin ConfigMap `<name>-hook` each controller loads.
    #[arg(
        long,
        default_value = "wasm-reconciler",
        conflicts_with = "plugin_path"
    )]
    pub plugin_namespace: String,
    /// Load the plugin from this file instead (for `wasm-reconciler dev`).
    #[arg(long)]
    pub plugin_path: Option<String>,
}

pub fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    match args.from {
        ImportFrom::Metacontroller(args) => run_metacontroller(args),
    }
}

fn run_metacontroller(args: MetacontrollerArgs) -> anyhow::Result<ExitCode> {
    let mut docs = Vec::new();
    for f in &args.files {
        let source = f.display().to_string();
        docs.extend(
            super::rbac::read(f)?
                .into_iter()
                .map(|d| (source.clone(), d)),
        );
    }
    let mut kinds = Kinds::builtins();
    let mut controllers = Vec::new();
    for (source, doc) in docs {
        if !kinds.add_crd(&doc) {
            controllers.push((source, doc));
        }
    }
    if controllers.is_empty() {
        bail!("no CompositeController found in the given files");
    }
    let placement = match args.plugin_path {
        Some(p) => PluginPlacement::Path(p),
        None => PluginPlacement::ConfigMapIn(args.plugin_namespace),
    };
    let mut out = String::new();
    // A document that cannot be imported (a DecoratorController) is reported
    // and the exit code says so, but the others are still printed: one
    // refused document does not lose the rest of the file.
    let mut refused = 0;
    for (source, doc) in &controllers {
        let imported = match metacontroller::convert(doc, &kinds, &placement)
            .with_context(|| format!("importing from {source}"))
        {
            Ok(i) => i,
            Err(e) => {
                eprintln!("error: {e:#}");
                refused += 1;
                continue;
            }
        };
        let name = imported
            .controller
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        for u in &imported.unmappable {
            eprintln!(
                "warning: CompositeController {name}: {} not mapped: {}",
                u.field, u.reason
            );
        }
        if !out.is_empty() {
            out.push_str("---\n");
        }
        out.push_str(&metacontroller::render(&imported)?);
    }
    print!("{out}");
    if refused > 0 {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
