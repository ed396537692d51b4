//! `wasm-reconciler replay --records DIR --plugin new.wasm`: re-runs recorded
//! requests (`--record` on `run`/`dev`) against any component, offline, with
//! the host's runtime and each record's own call limits, and reports which
//! parents' outputs would change, field by field.
//!
//! Each outcome is rendered exactly as the recorder stored it
//! (`wr_engine::record::outcome_bytes`, Secrets redacted the same way), so
//! "same" means byte for byte: replaying the recorded component reproduces
//! every record (plugins are pure functions of their request).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use wr_engine::record::{self, Record, store};
use wr_runtime::{ReconcileRequest, RuntimeConfig};

/// `apiVersion` of the JSON report.
pub const REPLAY_API_VERSION: &str = "wasm-reconciler.dev/replay/v1";

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The record store (`--record DIR` of `run` or `dev`).
    #[arg(long, value_name = "DIR")]
    pub records: PathBuf,
    /// The component to replay the recorded requests against.
    #[arg(long, value_name = "P.wasm")]
    pub plugin: PathBuf,
    /// Only records of this WasmController.
    #[arg(long)]
    pub controller: Option<String>,
    /// Only the newest record of each parent.
    #[arg(long)]
    pub latest: bool,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Exit 1 when any output would change (like `git diff --exit-code`).
    #[arg(long)]
    pub exit_code: bool,
    /// Directory of the precompiled-plugin cache.
    #[arg(long, value_name = "DIR", env = "WASM_RECONCILER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// One record whose outcome would change.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedRecord {
    /// Record number.
    pub seq: u64,
    /// The fields that differ (recorded → replayed).
    pub changes: Vec<store::Change>,
}

/// Per parent: how many records were replayed and which changed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReplay {
    /// WasmController.
    pub controller: String,
    /// `namespace/name`.
    pub parent: String,
    /// Records replayed.
    pub records: usize,
    /// Records whose outcome differs.
    pub changed: Vec<ChangedRecord>,
}

/// The report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`REPLAY_API_VERSION`].
    pub api_version: &'static str,
    /// Digest of the replayed component.
    pub plugin: String,
    /// Every parent replayed, changed ones first.
    pub parents: Vec<ParentReplay>,
    /// Parents with at least one changed record.
    pub changed_parents: usize,
    /// Records replayed.
    pub records: usize,
    /// Records whose outcome differs.
    pub changed_records: usize,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let report = replay(&args)?;
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", text(&report)),
    }
    Ok(if args.exit_code && report.changed_records > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn selected(args: &ReplayArgs) -> anyhow::Result<Vec<Record>> {
    let all = store::read_records(&args.records)
        .with_context(|| format!("reading the record store {}", args.records.display()))?;
    let mut recs: Vec<Record> = all
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| args.controller.as_ref().is_none_or(|c| *c == r.controller))
        .collect();
    if args.latest {
        let mut newest: BTreeMap<(String, String), Record> = BTreeMap::new();
        for r in recs {
            newest.insert((r.controller.clone(), r.parent.key()), r);
        }
        recs = newest.into_values().collect();
    }
    Ok(recs)
}

/// Replays the selected records and compares each outcome with the recorded one.
pub fn replay(args: &ReplayArgs) -> anyhow::Result<Report> {
    let recs = selected(args)?;
    let bytes = std::fs::read(&args.plugin)
        .with_context(|| format!("reading {}", args.plugin.display()))?;
    let runtime = super::plugin_runtime::create(RuntimeConfig {
        cache_dir: super::plugin_runtime::cache_dir(false, args.cache_dir.as_ref()),
        ..RuntimeConfig::default()
    })?;
    let plugin = runtime
        .load(&bytes)
        .map_err(|e| anyhow::anyhow!("loading {}: {e}", args.plugin.display()))?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // The same request under the same limits gives the same answer: call once.
    type Key = (String, String, record::RecordedLimits);
    let mut answers: HashMap<Key, Vec<u8>> = HashMap::new();
    let mut parents: BTreeMap<(String, String), ParentReplay> = BTreeMap::new();
    for r in &recs {
        let key = (r.request.clone(), r.now.clone(), r.limits);
        let replayed = match answers.get(&key) {
            Some(b) => b.clone(),
            None => {
                let text = store::read_blob(&args.records, &r.request).with_context(|| {
                    format!("record {}: reading request blob {}", r.seq, r.request)
                })?;
                let req: ReconcileRequest = record::request_of(&text, &r.now)
                    .with_context(|| format!("record {}: request blob {}", r.seq, r.request))?;
                let limits = r.limits.into();
                let result = tokio
                    .block_on(plugin.reconcile(&req, &limits))
                    .map_err(wr_engine::wasm::map_error);
                let (b, _) = record::outcome_bytes(&result);
                answers.insert(key, b.clone());
                b
            }
        };
        let recorded = store::read_blob(&args.records, &r.outcome)
            .with_context(|| format!("record {}: reading outcome blob {}", r.seq, r.outcome))?;
        let p = parents
            .entry((r.controller.clone(), r.parent.key()))
            .or_insert_with(|| ParentReplay {
                controller: r.controller.clone(),
                parent: r.parent.key(),
                records: 0,
                changed: Vec::new(),
            });
        p.records += 1;
        if replayed != recorded {
            let old: serde_json::Value = serde_json::from_slice(&recorded).unwrap_or_default();
            let new: serde_json::Value = serde_json::from_slice(&replayed).unwrap_or_default();
            p.changed.push(ChangedRecord {
                seq: r.seq,
                changes: store::changes(&old, &new, 64),
            });
        }
    }
    let mut parents: Vec<ParentReplay> = parents.into_values().collect();
    parents.sort_by_key(|p| p.changed.is_empty());
    Ok(Report {
        api_version: REPLAY_API_VERSION,
        plugin: plugin.digest().to_string(),
        changed_parents: parents.iter().filter(|p| !p.changed.is_empty()).count(),
        changed_records: parents.iter().map(|p| p.changed.len()).sum(),
        records: recs.len(),
        parents,
    })
}

/// A value for a one-line report: JSON cut to 60 characters, or `(absent)`.
pub(super) fn short(v: &Option<serde_json::Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 60 {
                format!("{}…", s.chars().take(60).collect::<String>())
            } else {
                s
            }
        }
    }
}

/// The human report.
pub fn text(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "replayed {} record(s) of {} parent(s) against {}",
        r.records,
        r.parents.len(),
        r.plugin
    );
    for p in &r.parents {
        if p.changed.is_empty() {
            let _ = writeln!(
                out,
                "same     {} {} ({} record(s))",
                p.controller, p.parent, p.records
            );
            continue;
        }
        let _ = writeln!(
            out,
            "changed  {} {} ({} of {} record(s))",
            p.controller,
            p.parent,
            p.changed.len(),
            p.records
        );
        // The newest changed record says what the rollout would do now.
        if let Some(c) = p.changed.last() {
            for ch in &c.changes {
                let _ = writeln!(
                    out,
                    "    #{} {}: {} -> {}",
                    c.seq,
                    ch.path,
                    short(&ch.old),
                    short(&ch.new)
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "summary: {} of {} parent(s) would change ({} of {} record(s))",
        r.changed_parents,
        r.parents.len(),
        r.changed_records,
        r.records
    );
    out
}
