//! Side-by-side benchmark (issue 9): the same static-site reconcile logic run
//! three ways against the embedded API server — as the WASM component in the
//! host, as a native kube-runtime controller, and as an HTTP webhook called
//! by the host — plus the API server's raw write rate for the same objects.
//!
//!     cargo run --release -p sidebyside -- --sizes 1000,10000 --out docs/bench/
//!
//! Every party is its own process (this binary re-executed with a
//! subcommand): the API server, each controller, the hook. So CPU seconds
//! and peak RSS are per variant. Writes `sidebyside.json`, `sidebyside.md`
//! and `sidebyside.svg` into `--out`.

mod alloc;
mod apitime;
mod bench;
mod breakdown;
mod client;
mod hook;
mod hosted;
mod logic;
mod native;
mod procs;
mod report;
mod reqlog;
mod samples;
mod stats;
mod svg;
mod track;

use std::path::PathBuf;

#[global_allocator]
static GLOBAL: alloc::Chosen = alloc::Chosen;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sidebyside",
    about = "WASM plugin vs native controller vs webhook, side by side"
)]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
    /// Numbers of parents, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    sizes: Vec<usize>,
    /// Rounds per size; each round rotates the variant order.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Variants, comma-separated (wasm, native, webhook, webhook-rtt).
    #[arg(long, value_delimiter = ',', default_value = "wasm,native,webhook")]
    variants: Vec<String>,
    /// Delay added to every hook call of the `webhook-rtt` variant, in
    /// milliseconds: the round trip of an in-cluster Service hop (the plain
    /// `webhook` variant is loopback, the webhook's best case).
    #[arg(long, default_value_t = 1.0)]
    hook_rtt_ms: f64,
    /// Only the `converge` workload per variant run (the scale runs).
    #[arg(long)]
    converge_only: bool,
    /// Skip the `restart` workload (controller process restarted on the
    /// converged fleet).
    #[arg(long)]
    no_restart: bool,
    /// Output directory.
    #[arg(long, default_value = "docs/bench")]
    out: PathBuf,
    /// Component to run (default: build/locate plugins/static-site).
    #[arg(long)]
    wasm: Option<PathBuf>,
    /// Only rewrite the Markdown and SVG of `--out` from its sidebyside.json.
    #[arg(long)]
    report_only: bool,
}

/// Child processes (internal).
#[derive(Subcommand)]
enum Child {
    /// The embedded API server.
    #[command(hide = true)]
    ServeApiserver,
    /// A controller variant.
    #[command(hide = true)]
    Controller {
        /// wasm, native or webhook.
        variant: String,
        /// API server URL.
        #[arg(long)]
        api: String,
        /// Hook URL (webhook).
        #[arg(long)]
        hook: Option<String>,
        /// Compile cache directory of the plugin runtime (wasm).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Delay added to every hook call, µs (webhook).
        #[arg(long, default_value_t = 0)]
        rtt_us: u64,
    },
    /// The webhook server.
    #[command(hide = true)]
    Hook,
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.child {
        Some(Child::ServeApiserver) => rt.block_on(serve_apiserver()),
        Some(Child::Controller {
            variant,
            api,
            hook,
            cache,
            rtt_us,
        }) => rt.block_on(async {
            match variant.as_str() {
                "native" => native::run(&api).await,
                v => {
                    let rtt = std::time::Duration::from_micros(rtt_us);
                    hosted::run(v, &api, hook.as_deref(), cache, rtt).await
                }
            }
        }),
        Some(Child::Hook) => rt.block_on(hook::run()),
        None if cli.report_only => {
            let r: report::Results = serde_json::from_str(
                &std::fs::read_to_string(cli.out.join("sidebyside.json"))
                    .context("reading sidebyside.json")?,
            )?;
            report::write_outputs(&r, &cli.out)
        }
        None => {
            let variants = cli
                .variants
                .iter()
                .map(|v| bench::Variant::parse(v))
                .collect::<Result<Vec<_>>>()?;
            let wasm = match cli.wasm {
                Some(p) => p,
                None => wr_tests::plugins::plugin_path("static-site"),
            };
            std::fs::create_dir_all(&cli.out)
                .with_context(|| format!("creating {}", cli.out.display()))?;
            // The component is compiled once, here, into a disk cache that
            // every wasm controller process then loads from (as `dev` and a
            // restarted operator with a kept cache dir do): process start-up
            // times do not include a compile.
            let cache = std::env::temp_dir().join("sidebyside-compile-cache");
            let rt_cfg = wr_runtime::RuntimeConfig {
                cache_dir: Some(cache.clone()),
                ..Default::default()
            };
            wr_runtime::PluginRuntime::new(rt_cfg)
                .map_err(|e| anyhow::anyhow!("runtime: {e}"))?
                .load(&std::fs::read(&wasm)?)
                .map_err(|e| anyhow::anyhow!("compiling {}: {e}", wasm.display()))?;
            rt.block_on(report::run_all(
                &cli.sizes,
                cli.rounds,
                &variants,
                &bench::Opts {
                    wasm,
                    cache,
                    hook_rtt_us: (cli.hook_rtt_ms * 1e3).round() as u64,
                    converge_only: cli.converge_only,
                    no_restart: cli.no_restart,
                },
                &cli.out,
            ))
        }
    }
}

/// Child mode: the API server alone; prints its URL, stops when stdin closes.
async fn serve_apiserver() -> Result<()> {
    let server = wr_apiserver::start(wr_apiserver::Config {
        fault_admin: true,
        watch_history: 200_000,
        ..Default::default()
    })
    .await?;
    procs::say(&server.url())?;
    let mut commands = procs::stdin_commands();
    while commands.recv().await.is_some() {
        procs::say("{}")?;
    }
    server.shutdown().await;
    Ok(())
}
