//! `wasm-reconciler apiserver` (issue 3): the embedded API server, standalone.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct ApiserverArgs {
    /// Port to listen on (0 picks a free port).
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Write a kubeconfig for the server here.
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Persist objects in this directory (snapshot + write-ahead log).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Serve the fault-injection and request-log admin path `/_wr/admin/`.
    #[arg(long)]
    pub enable_fault_admin: bool,
    /// Seed of the fault-injection RNG (same seed, same faults).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Committed events kept for watches; older versions get 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
}

pub fn run(args: ApiserverArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: ApiserverArgs) -> anyhow::Result<ExitCode> {
    let config = wr_apiserver::Config {
        bind: SocketAddr::new(args.bind, args.port),
        data_dir: args.data_dir.clone(),
        watch_history: args.watch_history,
        fault_admin: args.enable_fault_admin,
        seed: args.seed,
        ..Default::default()
    };
    let server = wr_apiserver::start(config)
        .await
        .context("starting the API server")?;
    if let Some(path) = &args.kubeconfig_out {
        server
            .write_kubeconfig(path)
            .with_context(|| format!("writing kubeconfig to {}", path.display()))?;
        tracing::info!(path = %path.display(), "kubeconfig written");
    }
    // The URL on stdout is the command's output (scripts read it).
    println!("{}", server.url());
    wait_for_signal().await?;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
