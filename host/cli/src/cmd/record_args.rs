//! `--record DIR` and its limits, shared by `run` and `dev`: every plugin
//! call is recorded to a store that `replay` and `explain` read
//! (`wr_engine::record`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use wr_engine::record::{RecordOptions, Recorder, SecretPolicy};

/// What the store does with Secrets.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SecretsArg {
    /// Record with every Secret's `data`/`stringData` replaced.
    Redact,
    /// Do not record calls that see or produce a Secret.
    Exclude,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Record every plugin call (request, answer, writes decided) to this
    /// directory, for `wasm-reconciler replay` and `explain`.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Most records kept; the oldest go first.
    #[arg(long, default_value_t = 10_000, requires = "record")]
    pub record_max_records: usize,
    /// Most MiB kept (records and the blobs they reference).
    #[arg(long, default_value_t = 256, requires = "record")]
    pub record_max_mib: u64,
    /// Secrets in a request or answer: redacted (default) or the call not recorded.
    #[arg(long, value_enum, default_value_t = SecretsArg::Redact, requires = "record")]
    pub record_secrets: SecretsArg,
}

impl RecordArgs {
    /// The recorder when `--record` is given.
    pub fn recorder(&self) -> anyhow::Result<Option<Arc<Recorder>>> {
        let Some(dir) = &self.record else {
            return Ok(None);
        };
        let opts = RecordOptions {
            dir: dir.clone(),
            max_records: self.record_max_records,
            max_bytes: self.record_max_mib.saturating_mul(1 << 20),
            secrets: match self.record_secrets {
                SecretsArg::Redact => SecretPolicy::Redact,
                SecretsArg::Exclude => SecretPolicy::Exclude,
            },
        };
        let r = Recorder::start(opts).with_context(|| format!("--record {}", dir.display()))?;
        tracing::info!(dir = %dir.display(), "recording plugin calls");
        Ok(Some(Arc::new(r)))
    }
}
