//! `wasm-reconciler run`: the operator. Connects to a cluster (kubeconfig,
//! context, or in-cluster), runs one controller per WasmController, and stops
//! gracefully on SIGINT/SIGTERM (in-flight reconciles finish).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// Directory for precompiled plugin artifacts.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Resync period (seconds) for controllers that set none.
    #[arg(long, default_value_t = 600)]
    pub resync_seconds: u64,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(serve(args))
}

async fn client(args: &RunArgs) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(wr_engine::engine_config(config))?)
}

async fn serve(args: RunArgs) -> anyhow::Result<ExitCode> {
    let client = client(&args).await.context("connecting to the cluster")?;
    let runtime = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig {
        cache_dir: args.cache_dir.clone(),
        ..Default::default()
    })
    .map_err(|e| anyhow::anyhow!("starting the plugin runtime: {e}"))?;
    let loader = Arc::new(wr_engine::wasm::WasmLoader::new(runtime));
    let opts = wr_engine::ManagerOptions {
        default_resync: std::time::Duration::from_secs(args.resync_seconds),
        ..Default::default()
    };
    let manager = wr_engine::Manager::new(client, loader, opts);
    tracing::info!("manager starting");
    manager.run(shutdown_signal()).await?;
    tracing::info!("manager stopped");
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
