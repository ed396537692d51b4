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
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Run the workload simulator: Deployments, StatefulSets, DaemonSets and
    /// Jobs get pods that become Running on simulated Nodes (docs/dev.md).
    #[arg(long)]
    pub simulate: bool,
    #[command(flatten)]
    pub simulate_tuning: crate::cmd::simulate::SimulateTuning,
}

/// Authentication and authorisation flags of `apiserver` and `dev`.
#[derive(Debug, Clone, clap::Args)]
pub struct AuthArgs {
    /// How requests are authorised: `always-allow` (anyone the server
    /// authenticates may do anything) or `rbac` (the admin token is allowed
    /// everything; ServiceAccount tokens from `kubectl create token` get what
    /// the stored Roles, ClusterRoles and bindings grant, as in a real cluster).
    #[arg(long, value_enum, default_value_t = AuthorizationArg::AlwaysAllow)]
    pub authorization: AuthorizationArg,
    /// Beyond loopback, also serve requests without a bearer token (as
    /// `system:anonymous`). Without it a non-loopback `--bind` requires the
    /// admin token of the written kubeconfig (or a ServiceAccount token).
    #[arg(long)]
    pub insecure: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthorizationArg {
    AlwaysAllow,
    Rbac,
}

impl AuthArgs {
    pub fn config(&self) -> wr_apiserver::AuthConfig {
        wr_apiserver::AuthConfig {
            authorization: match self.authorization {
                AuthorizationArg::AlwaysAllow => wr_apiserver::AuthorizationMode::AlwaysAllow,
                AuthorizationArg::Rbac => wr_apiserver::AuthorizationMode::Rbac,
            },
            insecure: self.insecure,
            admin_token: None,
        }
    }

    /// Refuse a setup that would expose a writable cluster or lock everyone
    /// out; warn when `--insecure` opens one up on purpose.
    pub fn check_bind(&self, bind: IpAddr, kubeconfig_written: bool) -> anyhow::Result<()> {
        if bind.is_loopback() {
            return Ok(());
        }
        if self.insecure {
            tracing::warn!(
                %bind,
                authorization = ?self.authorization,
                "--insecure: requests without a token are served as system:anonymous from any address that reaches the server"
            );
            return Ok(());
        }
        if !kubeconfig_written {
            anyhow::bail!(
                "--bind {bind} is reachable beyond loopback, so every request must carry the generated admin token, which is written only with --kubeconfig-out FILE; pass --kubeconfig-out (or --insecure to serve requests without a token)"
            );
        }
        Ok(())
    }
}

pub fn run(args: ApiserverArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: ApiserverArgs) -> anyhow::Result<ExitCode> {
    args.auth
        .check_bind(args.bind, args.kubeconfig_out.is_some())?;
    let config = wr_apiserver::Config {
        bind: SocketAddr::new(args.bind, args.port),
        data_dir: args.data_dir.clone(),
        watch_history: args.watch_history,
        fault_admin: args.enable_fault_admin,
        seed: args.seed,
        auth: args.auth.config(),
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
    let sim = if args.simulate {
        Some(crate::cmd::simulate::start(&server, &args.simulate_tuning).await?)
    } else {
        None
    };
    // The URL on stdout is the command's output (scripts read it).
    println!("{}", server.url());
    wait_for_signal().await?;
    tracing::info!("shutting down");
    if let Some(sim) = sim {
        sim.stop().await;
    }
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
