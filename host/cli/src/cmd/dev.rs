//! `wasm-reconciler dev` (issue 6): the embedded default in one process — the
//! embedded API server, the host, the CRDs, the example plugins installed as
//! WasmControllers and sample parents — so a newcomer sees it work with one
//! command and a plugin author gets a hot-reload inner loop.
//!
//! The plugins are loaded from local files (`spec.plugin.path`) in
//! `--plugin-dir`; [`reload`] notices when such a file changes and nudges the
//! WasmController so the manager reloads it at once.

mod host_rbac;
mod reload;
mod report;
mod seed;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

/// Log filter used when neither `--log-level` nor `RUST_LOG` is set: the
/// host's reconcile actions at info, everything else only when it goes wrong.
pub const DEFAULT_LOG_FILTER: &str = "warn,wasm_reconciler=info,wr_engine=info";

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Port of the embedded API server (0 picks a free port).
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Keep the cluster's objects here across restarts (snapshot + write-ahead
    /// log). Without it the cluster lives in memory and is gone on exit.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Directory of plugin components: the examples `static_site.wasm` and
    /// `tombstone.wasm` (what `plugins/build.sh` produces) are installed when
    /// present; a directory given here may hold only your own components.
    /// Watched: rebuild a plugin and the running controller hot-reloads it.
    /// [default: $CARGO_TARGET_DIR/plugins/wasm32-wasip2/plugin, or
    /// ./target/plugins/wasm32-wasip2/plugin]
    #[arg(long)]
    pub plugin_dir: Option<PathBuf>,
    /// Where to write the kubeconfig [default: <data-dir>/kubeconfig with
    /// --data-dir, else ./dev.kubeconfig].
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Do not create the sample parents (StaticSite `web`, Workspace `team-a`).
    #[arg(long)]
    pub no_samples: bool,
    /// With `--authorization rbac` the host runs as ServiceAccount
    /// `wasm-reconciler/wasm-reconciler` bound to exactly what
    /// `wasm-reconciler rbac` prints for the installed controllers.
    #[command(flatten)]
    pub auth: crate::cmd::apiserver::AuthArgs,
    /// Do not run the workload simulator (then nothing runs Deployments:
    /// they stay at 0 available replicas).
    #[arg(long)]
    pub no_simulate: bool,
    #[command(flatten)]
    pub simulate: crate::cmd::simulate::SimulateTuning,
    #[command(flatten)]
    pub record: crate::cmd::record_args::RecordArgs,
}

impl DevArgs {
    fn plugin_dir(&self) -> PathBuf {
        match &self.plugin_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("target"))
                .join("plugins")
                .join("wasm32-wasip2")
                .join("plugin"),
        }
    }

    fn kubeconfig_path(&self) -> PathBuf {
        match (&self.kubeconfig_out, &self.data_dir) {
            (Some(p), _) => p.clone(),
            (None, Some(d)) => d.join("kubeconfig"),
            (None, None) => PathBuf::from("dev.kubeconfig"),
        }
    }
}

pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(serve(args))
}

/// Absolute form of `p` (for the printed commands, which may be pasted anywhere).
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

async fn serve(args: DevArgs) -> anyhow::Result<ExitCode> {
    // Listen for Ctrl-C and SIGTERM before anything starts: a signal that
    // arrives while the server starts and the examples are installed then
    // stops `dev` cleanly once that is done, instead of killing it by the
    // default action half-way through writing its data directory.
    let stop =
        wr_operator::ShutdownSignal::install().context("listening for SIGTERM and SIGINT")?;
    let plugin_dir = absolute(&args.plugin_dir());
    let plugins = seed::plugin_files(&plugin_dir, args.plugin_dir.is_some())?;

    // dev always writes its kubeconfig (with the admin token).
    args.auth.check_bind(args.bind, true)?;
    let server = wr_apiserver::start(wr_apiserver::Config {
        bind: SocketAddr::new(args.bind, args.port),
        data_dir: args.data_dir.clone(),
        auth: args.auth.config(),
        ..Default::default()
    })
    .await
    .with_context(|| {
        format!(
            "starting the embedded API server on {}:{} (another `dev` or `apiserver` there? \
             --port 0 picks a free port)",
            args.bind, args.port
        )
    })?;
    let kubeconfig = absolute(&args.kubeconfig_path());
    if let Some(parent) = kubeconfig.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    server
        .write_kubeconfig(&kubeconfig)
        .with_context(|| format!("writing kubeconfig to {}", kubeconfig.display()))?;

    let sim = if args.no_simulate {
        None
    } else {
        Some(crate::cmd::simulate::start(&server, &args.simulate).await?)
    };
    let result = run_host(&args, &server, &plugins, &kubeconfig, stop).await;
    if let Some(sim) = sim {
        sim.stop().await;
    }
    server.shutdown().await;
    result
}

async fn run_host(
    args: &DevArgs,
    server: &wr_apiserver::RunningServer,
    plugins: &[seed::PluginFile],
    kubeconfig: &Path,
    stop: wr_operator::ShutdownSignal,
) -> anyhow::Result<ExitCode> {
    // dev's own writes are the admin's (the kubeconfig's token).
    let config = token_config(&server.url(), &server.admin_token()).await?;
    let client = kube::Client::try_from(config.clone())?;

    seed::install(&client, plugins, !args.no_samples).await?;

    let host_config = if args.auth.authorization == crate::cmd::apiserver::AuthorizationArg::Rbac {
        let token = host_rbac::install(&client, server, plugins).await?;
        token_config(&server.url(), &token).await?
    } else {
        config
    };
    let engine_client = kube::Client::try_from(wr_engine::engine_config(host_config))?;

    let runtime = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig {
        cache_dir: args.data_dir.as_ref().map(|d| d.join("compile-cache")),
        ..Default::default()
    })
    .map_err(|e| anyhow::anyhow!("starting the plugin runtime: {e}"))?;
    let loader = Arc::new(wr_engine::wasm::WasmLoader::new(runtime));
    let opts = wr_engine::ManagerOptions {
        // A plugin author's edit should show within a second even without the watcher.
        plugin_poll: Duration::from_secs(1),
        recorder: args.record.recorder()?,
        ..Default::default()
    };
    let manager = wr_engine::Manager::new(engine_client, loader, opts);

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(reload::watch(
        client.clone(),
        plugins.to_vec(),
        stop_rx.clone(),
    ));
    let reporter = tokio::spawn(report::follow_parents(client.clone(), stop_rx));

    // The banner is the command's output: stdout, after everything is installed.
    print!(
        "{}",
        report::banner(
            &server.url(),
            kubeconfig,
            args.data_dir.as_deref(),
            &report::Installed {
                examples: &plugins
                    .iter()
                    .map(|p| p.controller.clone())
                    .collect::<Vec<_>>(),
                samples: !args.no_samples,
            }
        )
    );
    tracing::info!(url = %server.url(), "dev cluster running; Ctrl-C to stop");

    // A second signal stops at once (as `run` does), without waiting for
    // in-flight reconciles.
    let result = tokio::select! {
        r = manager.run(stop.graceful.clone().cancelled_owned()) => r,
        _ = stop.immediate.cancelled() => return Ok(ExitCode::from(130)),
    };
    let _ = stop_tx.send(true);
    let _ = watcher.await;
    let _ = reporter.await;
    result.context("running the controller manager")?;
    tracing::info!("dev cluster stopped");
    Ok(ExitCode::SUCCESS)
}

/// A client configuration for `url` presenting bearer `token` (through an
/// in-memory kubeconfig, the way kube builds every authenticated config).
async fn token_config(url: &str, token: &str) -> anyhow::Result<kube::Config> {
    let yaml = wr_apiserver::kubeconfig::kubeconfig_yaml_with_token(url, Some(token));
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).context("client kubeconfig")?;
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .context("client configuration")
}
