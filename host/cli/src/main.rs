//! `wasm-reconciler`: the command-line edge of the project. Each subcommand
//! lives in its own module under `cmd/`; this file only parses and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod logging;

/// mimalloc: the host builds and drops many small JSON trees per reconcile,
/// and its per-thread free lists cost fewer instructions than glibc's malloc
/// for that (docs/benchmarks.md, "Host CPU per reconcile, session 8").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    #[cfg(feature = "dev")]
    /// Run a plugin offline on files: parent (+ observed children) in, desired state out.
    Render(cmd::render::RenderArgs),
    #[cfg(feature = "dev")]
    /// Run the embedded Kubernetes-compatible API server on its own.
    Apiserver(cmd::apiserver::ApiserverArgs),
    /// Print the CustomResourceDefinitions the host needs (WasmController).
    Crds(cmd::crds::CrdsArgs),
    /// Run the operator: one controller per WasmController, until SIGINT/SIGTERM.
    Run(cmd::run::RunArgs),
    #[cfg(feature = "dev")]
    /// Embedded API server + host + example plugins and parents in one process.
    Dev(cmd::dev::DevArgs),
    /// Print the least-privilege RBAC (ClusterRole, Lease Role, bindings) for WasmControllers.
    Rbac(cmd::rbac::RbacArgs),
    /// Encode a component as the ConfigMap(s) a WasmController loads (compressed, chunked as needed).
    Publish(cmd::publish::PublishArgs),
    /// Preview a candidate plugin over a controller's live parents; applies nothing.
    Plan(cmd::plan::PlanArgs),
    /// Show or drive the canary rollout of a controller's candidate version.
    Rollout(cmd::rollout::RolloutArgs),
    /// Convert another tool's controllers to WasmControllers (Metacontroller's CompositeController).
    Import(cmd::import::ImportArgs),
    #[cfg(feature = "dev")]
    /// Golden-file tests: run a plugin on every case directory and compare with expected.yaml.
    Test(cmd::test::TestArgs),
    /// Create a plugin project (source, SDK, build script, golden test, CRD, WasmController).
    New(cmd::new::NewArgs),
    /// Re-run recorded reconciles (`--record`) against a component offline; report which outputs would change.
    Replay(cmd::replay::ReplayArgs),
    /// A parent's reconcile history from a record store: trigger, input digest, output changes, writes.
    Explain(cmd::explain::ExplainArgs),
    /// Generate an ed25519 key pair for signed plugins (`publish --sign`).
    Keygen(cmd::keygen::KeygenArgs),
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    let default_filter = match cli.command {
        #[cfg(feature = "dev")]
        Command::Dev(_) => Some(cmd::dev::DEFAULT_LOG_FILTER),
        Command::Run(_) => Some(cmd::run::DEFAULT_LOG_FILTER),
        // A plugin's own log lines are what its author is looking for.
        #[cfg(feature = "dev")]
        Command::Render(_) | Command::Test(_) => Some("warn,wr_plugin=info"),
        _ => None,
    };
    if let Some(filter) = default_filter
        && cli.log.log_level.is_none()
        && std::env::var_os("RUST_LOG").is_none()
    {
        cli.log.log_level = Some(filter.to_string());
    }
    if let Err(err) = logging::init(&cli.log) {
        eprintln!("error: {}", error_text(&err));
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        #[cfg(feature = "dev")]
        Command::Render(args) => cmd::render::run(args),
        #[cfg(feature = "dev")]
        Command::Apiserver(args) => cmd::apiserver::run(args),
        Command::Crds(args) => cmd::crds::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Rbac(args) => cmd::rbac::run(args),
        #[cfg(feature = "dev")]
        Command::Dev(args) => cmd::dev::run(args),
        Command::Publish(args) => cmd::publish::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Rollout(args) => cmd::rollout::run(args),
        Command::Import(args) => cmd::import::run(args),
        #[cfg(feature = "dev")]
        Command::Test(args) => cmd::test::run(args),
        Command::New(args) => cmd::new::run(args),
        Command::Replay(args) => cmd::replay::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Keygen(args) => cmd::keygen::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", error_text(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, as anyhow's `{:#}` prints them,
/// less the causes whose text is already there: the library errors say
/// what their source said in their own message (their status conditions and
/// events show `to_string()`) and keep it as `source()` too.
fn error_text(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[test]
    fn a_source_already_in_its_errors_message_is_printed_once() {
        let io = std::io::Error::other("disk on fire");
        let err = wr_runtime::RuntimeError::CacheDir {
            path: "/cache".into(),
            source: io,
        };
        let err = anyhow::Error::new(err).context("starting the runtime");
        assert_eq!(
            format!("{err:#}"),
            "starting the runtime: cannot use cache directory /cache: disk on fire: disk on fire"
        );
        assert_eq!(
            error_text(&err),
            "starting the runtime: cannot use cache directory /cache: disk on fire"
        );
        // Causes that add something are all printed.
        let plain = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(error_text(&plain), "outer: middle: inner");
    }
}
