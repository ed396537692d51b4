//! `wasm-reconciler plan`: preview what a candidate plugin would do to every
//! live parent of a WasmController, without writing anything.
//!
//! Thin on purpose: reading the controller, resolving its resources, listing
//! the live state and planning each parent is `wr_engine::plan`, which
//! renders the decision of the engine's decision core (`wr_engine::decide`,
//! the same functions a reconcile executes);
//! this module connects, loads the candidate with the engine's `WasmLoader`
//! under the controller's limits, and prints (`plan/text.rs`) or serializes
//! the result. Its only API calls are GET (discovery, the WasmController) and
//! LIST; requests carry the User-Agent [`USER_AGENT`].
//!
//! Exit codes: 0 the plan was computed (with or without changes, even when
//! some parents fail); 1 the cluster could not be read, bad flags or input,
//! a `--parent` that does not exist; 5 the component cannot be loaded; when
//! there is at least one parent and *every* parent fails, the candidate is
//! treated like `render` treats a failing call: 5 if any failure is a fault
//! or invalid output, else 3 if any is a permanent error, else 4.

mod input;
mod text;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use wr_engine::PluginLoader;
use wr_engine::Target;
use wr_engine::plan::{FailureClass, ParentResult, Plan, Snapshot};
use wr_runtime::{PluginRuntime, RuntimeConfig};

/// User-Agent of every request `plan` makes (lets audit logs and tests tell
/// its reads apart from the operator's).
pub const USER_AGENT: &str = "wasm-reconciler-plan";

const EXIT_PERMANENT: u8 = 3;
const EXIT_TRANSIENT: u8 = 4;
const EXIT_FAULT: u8 = 5;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Name of the WasmController whose parents are planned.
    #[arg(long, value_name = "NAME")]
    pub controller: String,
    /// The candidate component (.wasm).
    #[arg(long, value_name = "P.wasm")]
    pub plugin: PathBuf,
    /// Plugin config for the candidate, instead of the controller's
    /// `spec.plugin.config`: inline JSON, or `@FILE` (JSON or YAML).
    #[arg(long, value_name = "JSON|@FILE")]
    pub config: Option<String>,
    /// Plan only these parents (`NAMESPACE/NAME`, or `NAME` when cluster-scoped); repeatable.
    #[arg(long = "parent", value_name = "NS/NAME")]
    pub parents: Vec<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// The time every request carries, RFC 3339 (default: now).
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Directory of the precompiled-plugin cache
    /// (default: $XDG_CACHE_HOME/wasm-reconciler or ~/.cache/wasm-reconciler).
    #[arg(long, value_name = "DIR", env = "WASM_RECONCILER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not read or write the precompiled-plugin cache.
    #[arg(long)]
    pub no_cache: bool,
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let code = rt.block_on(plan(args));
    // A plugin call stuck in a blocking thread must not hold the exit.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

async fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let now = input::now(args.now.as_deref())?;
    let config_override = args.config.as_deref().map(input::config).transpose()?;
    let only = input::parent_keys(&args.parents)?;
    let bytes = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read plugin {}", args.plugin.display()))?;

    let client = super::user_client::connect(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        USER_AGENT,
    )
    .await?;
    let wc = super::user_client::get_controller(client.clone(), &args.controller).await?;
    let mut target = Target::resolve(&client, &args.controller, &wc.spec)
        .await
        .with_context(|| format!("resolving the resources of {}", args.controller))?;
    if let Some(c) = config_override {
        target.config = Some(c);
    }

    let loader = wr_engine::wasm::WasmLoader::new(runtime(&args, &target)?);
    let plugin = match loader.load(bytes).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot load plugin {}: {e}", args.plugin.display());
            return Ok(ExitCode::from(EXIT_FAULT));
        }
    };

    let snap = Snapshot::take(&client, &target)
        .await
        .context("reading the live state")?;
    if let Some(keys) = &only {
        for k in keys {
            let found = snap.parents().iter().any(|p| {
                p.metadata.name.as_deref() == Some(&k.name) && p.metadata.namespace == k.namespace
            });
            if !found {
                anyhow::bail!("parent {} not found", input::show_key(k));
            }
        }
    }
    tracing::info!(controller = %args.controller, parents = snap.parents().len(), digest = plugin.digest(), "planning");
    let result =
        wr_engine::plan::plan(&target, &snap, Arc::clone(&plugin), &now, only.as_deref()).await;
    match args.output {
        OutputFormat::Text => print!("{}", text::render(&result)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&result)?),
    }
    Ok(ExitCode::from(exit_code(&result)))
}

/// 0 unless every parent failed (module docs).
fn exit_code(plan: &Plan) -> u8 {
    let failures: Vec<FailureClass> = plan
        .parents
        .iter()
        .filter(|p| p.result == ParentResult::Error)
        .filter_map(|p| p.error.as_ref().map(|e| e.class))
        .collect();
    if plan.parents.is_empty() || failures.len() < plan.parents.len() {
        return 0;
    }
    if failures
        .iter()
        .any(|c| matches!(c, FailureClass::Fault | FailureClass::InvalidOutput))
    {
        EXIT_FAULT
    } else if failures.contains(&FailureClass::Permanent) {
        EXIT_PERMANENT
    } else {
        EXIT_TRANSIENT
    }
}

fn runtime(args: &PlanArgs, target: &Target) -> anyhow::Result<PluginRuntime> {
    super::plugin_runtime::create(RuntimeConfig {
        cache_dir: super::plugin_runtime::cache_dir(args.no_cache, args.cache_dir.as_ref()),
        max_instances: target.concurrency.max(1) as u32,
        max_memory_bytes: target.limits.max_memory_bytes.max(1 << 20),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wr_engine::plan::{ParentPlan, PlanFailure};

    fn parent(result: ParentResult, class: Option<FailureClass>) -> ParentPlan {
        ParentPlan {
            namespace: None,
            name: "p".into(),
            uid: "u".into(),
            result,
            finalizing: false,
            finalizer: None,
            children: vec![],
            conditions: vec![],
            status: vec![],
            status_write: false,
            error: class.map(|class| PlanFailure {
                class,
                reason: "R".into(),
                message: String::new(),
            }),
            skipped: None,
            requeue_after_seconds: None,
        }
    }

    #[test]
    fn exit_code_is_zero_unless_every_parent_failed() {
        let p = |v| Plan::new("c", "d", "t", v);
        assert_eq!(exit_code(&p(vec![])), 0);
        let ok = parent(ParentResult::Changes, None);
        let perm = parent(ParentResult::Error, Some(FailureClass::Permanent));
        let tran = parent(ParentResult::Error, Some(FailureClass::Transient));
        let bad = parent(ParentResult::Error, Some(FailureClass::InvalidOutput));
        assert_eq!(exit_code(&p(vec![ok, perm.clone()])), 0);
        assert_eq!(exit_code(&p(vec![perm.clone(), tran.clone()])), 3);
        assert_eq!(exit_code(&p(vec![tran.clone()])), 4);
        assert_eq!(exit_code(&p(vec![perm, tran, bad])), 5);
    }
}
