//! Log setup shared by every subcommand: human-readable on a terminal,
//! JSON with `--log-format json`; level from `--log-level` or `RUST_LOG`.

use anyhow::Context;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Log output format.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter (overrides RUST_LOG), e.g. `info` or `wr_engine=debug`.
    #[arg(long, global = true)]
    pub log_level: Option<String>,
}

/// Installs the global tracing subscriber; logs go to stderr so that commands
/// like `render` and `crds` keep stdout for their output.
pub fn init(args: &LogArgs) -> anyhow::Result<()> {
    let filter = match &args.log_level {
        Some(level) => {
            EnvFilter::try_new(level).with_context(|| format!("invalid --log-level {level:?}"))?
        }
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}
