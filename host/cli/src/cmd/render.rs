//! `wasm-reconciler render`: run a plugin offline on files, no cluster.
//!
//! Reads the parent (and optionally observed children, related objects and
//! controller config), calls the plugin once with the same sandbox and limits
//! as the controller, and prints the response (desired children, conditions,
//! status patch, events, requeue hint) as YAML or JSON on stdout.
//!
//! The answer is judged as the live host judges it (`judge`): the engine's
//! own validation of plugin output, the declared child kinds and scope of a
//! WasmController (`--controller`), the same call limits.
//!
//! Exit codes (docs/architecture.md): 0 success, 1 bad input or other error,
//! 3 permanent plugin error, 4 transient plugin error, 5 plugin fault (trap,
//! timeout, fuel, memory, invalid output, or a component that cannot be loaded).

mod input;
pub mod judge;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wr_runtime::{
    CallError, CallLimits, CallTimings, FaultKind, Plugin, ReconcileRequest, ReconcileResponse,
    RelatedObjects, RuntimeConfig,
};

pub use judge::Rules;

pub use super::plugin_runtime::EXIT_FAULT;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
}

/// Where the rules a response is judged by come from (shared with `test`).
#[derive(Debug, Clone, clap::Args)]
pub struct RuleArgs {
    /// A WasmController (YAML; CRDs may follow in the same file): the plugin
    /// output is checked against its declared child kinds and scope, the call
    /// gets its limits and (without --config) its `spec.plugin.config`.
    #[arg(long, value_name = "FILE")]
    pub controller: Option<PathBuf>,
    /// CustomResourceDefinition(s) of custom kinds the controller names, for
    /// their scope (repeatable). Built-in kinds need none.
    #[arg(long, value_name = "FILE")]
    pub crd: Vec<PathBuf>,
    /// Wall-clock limit of the call, in milliseconds (default: the controller's, else the host's default).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Memory limit of the plugin, in MiB (default: the controller's, else the host's default).
    #[arg(long, value_name = "MIB")]
    pub max_memory_mib: Option<usize>,
    /// Optional fuel budget (instruction-count limit).
    #[arg(long)]
    pub fuel: Option<u64>,
    /// Directory of the precompiled-plugin cache
    /// (default: $XDG_CACHE_HOME/wasm-reconciler or ~/.cache/wasm-reconciler).
    #[arg(long, value_name = "DIR", env = "WASM_RECONCILER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not read or write the precompiled-plugin cache.
    #[arg(long)]
    pub no_cache: bool,
}

impl RuleArgs {
    /// The controller's rules (or the host's defaults) and the call limits,
    /// with the command-line overrides applied.
    pub fn load(&self) -> anyhow::Result<(Rules, CallLimits)> {
        let rules = Rules::load(self.controller.as_deref(), &self.crd)?;
        let mut limits = rules.limits();
        if let Some(ms) = self.timeout_ms {
            limits.timeout = Duration::from_millis(ms);
        }
        if let Some(mib) = self.max_memory_mib {
            limits.max_memory_bytes = mib.saturating_mul(1 << 20);
        }
        if self.fuel.is_some() {
            limits.fuel = self.fuel;
        }
        Ok((rules, limits))
    }
}

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The plugin component (.wasm).
    #[arg(long, value_name = "P.wasm")]
    pub plugin: PathBuf,
    /// The parent object (YAML or JSON, exactly one document).
    #[arg(long, value_name = "FILE")]
    pub parent: PathBuf,
    /// Observed children (multi-document YAML, or a `kind: List`).
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
    /// Related objects (multi-document YAML, or a `kind: List`), as
    /// `NAME=FILE` to hand them over under the WasmController related rule
    /// key NAME, or `FILE` to key them by their plural resource name (the
    /// key of an unnamed rule). Repeatable.
    #[arg(long, value_name = "[NAME=]FILE")]
    pub related: Vec<String>,
    /// Per-controller plugin config (a JSON or YAML document).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Render as if the parent were being deleted (finalizer still present).
    #[arg(long)]
    pub finalizing: bool,
    /// The time the plugin sees, RFC 3339 (default: now). Fix it for reproducible output.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: OutputFormat,
    /// Print the call's time and memory on stderr.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub rules: RuleArgs,
}

/// How a call failed, in the classes the host reacts to differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorClass {
    /// The plugin returned a permanent error (exit 3).
    Permanent,
    /// The plugin returned a transient error (exit 4).
    Transient,
    /// Trap, timeout, fuel, memory, oversized response (exit 5).
    Fault,
    /// Output the host rejects as a whole: `InvalidPluginOutput` (exit 5).
    InvalidOutput,
}

impl ErrorClass {
    /// The exit code of `render` for this class.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorClass::Permanent => 3,
            ErrorClass::Transient => 4,
            ErrorClass::Fault | ErrorClass::InvalidOutput => EXIT_FAULT,
        }
    }
}

/// A failed call as the host would record it on the parent's `Ready` condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub class: ErrorClass,
    pub reason: String,
    pub message: String,
}

impl Failure {
    fn from_call(err: CallError) -> Failure {
        match err {
            CallError::Permanent { reason, message } => Failure {
                class: ErrorClass::Permanent,
                reason,
                message,
            },
            CallError::Transient { reason, message } => Failure {
                class: ErrorClass::Transient,
                reason,
                message,
            },
            CallError::Fault {
                kind: FaultKind::InvalidOutput,
                message,
            } => Failure::invalid(message),
            CallError::Fault { kind, message } => Failure {
                class: ErrorClass::Fault,
                reason: kind.reason().to_string(),
                message,
            },
        }
    }

    fn invalid(message: String) -> Failure {
        Failure {
            class: ErrorClass::InvalidOutput,
            reason: "InvalidPluginOutput".into(),
            message,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.class {
            ErrorClass::Permanent => "permanent plugin error",
            ErrorClass::Transient => "transient plugin error",
            ErrorClass::Fault => "plugin fault",
            ErrorClass::InvalidOutput => "invalid output, rejected whole as the host would:",
        };
        write!(f, "{what} {}: {}", self.reason, self.message)
    }
}

/// A loaded plugin and the runtime that calls it.
pub struct Loaded {
    plugin: Plugin,
    tokio: tokio::runtime::Runtime,
    /// The plugin file, as given: named in every error.
    pub name: String,
}

impl Loaded {
    /// Reads and compiles `path` with a runtime sized for `limits`; the inner
    /// `Err` is the runtime's load error (a fault of the plugin).
    pub fn load(
        path: &Path,
        args: &RuleArgs,
        limits: &CallLimits,
    ) -> anyhow::Result<Result<Loaded, String>> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read plugin {}", path.display()))?;
        let runtime = super::plugin_runtime::create(RuntimeConfig {
            cache_dir: super::plugin_runtime::cache_dir(args.no_cache, args.cache_dir.as_ref()),
            max_instances: 2,
            max_memory_bytes: limits.max_memory_bytes.max(1 << 20),
        })?;
        let plugin = match runtime.load(&bytes) {
            Ok(plugin) => plugin,
            Err(err) => return Ok(Err(err.to_string())),
        };
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        Ok(Ok(Loaded {
            plugin,
            tokio,
            name: path.display().to_string(),
        }))
    }

    /// One call, judged as the host judges it.
    pub fn call(
        &self,
        request: &ReconcileRequest,
        limits: &CallLimits,
        rules: &Rules,
    ) -> anyhow::Result<(Result<ReconcileResponse, Failure>, CallTimings)> {
        let (result, timings) = {
            let _span =
                tracing::info_span!("render", plugin = %self.name, digest = self.plugin.digest())
                    .entered();
            self.tokio
                .block_on(self.plugin.reconcile_timed(request, limits))
        };
        let verdict = match result {
            Err(err) => Err(Failure::from_call(err)),
            Ok(response) => match rules.judge(&request.parent, &response)? {
                Ok(()) => Ok(response),
                Err(message) => Err(Failure::invalid(message)),
            },
        };
        Ok((verdict, timings))
    }
}

/// The inputs of one call, read from files as `render` and `test` take them.
pub struct RequestFiles<'a> {
    pub parent: &'a Path,
    pub observed: Option<&'a Path>,
    /// `[NAME=]FILE` arguments (see `--related`).
    pub related: &'a [String],
    pub config: Option<&'a Path>,
    pub finalizing: bool,
    pub now: Option<&'a str>,
}

impl RequestFiles<'_> {
    /// The request; `config` falls back to the controller's `spec.plugin.config`.
    pub fn request(&self, rules: &Rules) -> anyhow::Result<ReconcileRequest> {
        let parent = input::single_object(self.parent)?;
        let objects = |p: Option<&Path>| p.map(input::objects).transpose();
        let config: Option<Value> = match self.config {
            Some(path) => Some(input::config(path)?),
            None => rules.config(),
        };
        let now = match self.now {
            Some(text) => normalize_time(text)?,
            None => chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let mut related = Vec::new();
        for arg in self.related {
            related_arg(&mut related, arg)?;
        }
        Ok(ReconcileRequest {
            parent,
            children: objects(self.observed)?.unwrap_or_default(),
            related,
            finalizing: self.finalizing,
            config,
            now,
        })
    }
}

/// `--stats`: where the call's time went and how much memory it had.
pub fn stats_line(timings: &CallTimings, limits: &CallLimits) -> String {
    format!(
        "stats: instantiate {:.2} ms, call {:.2} ms, memory {:.1} MiB (limits: timeout {} ms, memory {} MiB{})",
        timings.instantiate.as_secs_f64() * 1e3,
        timings.call.as_secs_f64() * 1e3,
        timings.memory_bytes as f64 / f64::from(1 << 20),
        limits.timeout.as_millis(),
        limits.max_memory_bytes >> 20,
        limits
            .fuel
            .map(|f| format!(", fuel {f}"))
            .unwrap_or_default()
    )
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let (rules, limits) = args.rules.load()?;
    let request = RequestFiles {
        parent: &args.parent,
        observed: args.observed.as_deref(),
        related: &args.related,
        config: args.config.as_deref(),
        finalizing: args.finalizing,
        now: args.now.as_deref(),
    }
    .request(&rules)?;
    let loaded = match Loaded::load(&args.plugin, &args.rules, &limits)? {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("error: cannot load plugin {}: {err}", args.plugin.display());
            return Ok(ExitCode::from(EXIT_FAULT));
        }
    };
    let (verdict, timings) = loaded.call(&request, &limits, &rules)?;
    if args.stats {
        eprintln!("{}", stats_line(&timings, &limits));
    }
    match verdict {
        Ok(response) => {
            let text = match args.output {
                // A comment, so the document stays exactly the response.
                OutputFormat::Yaml => format!(
                    "# plugin contract: {}\n{}",
                    loaded.plugin.info().qualified_world(),
                    serde_yaml::to_string(&response)?
                ),
                OutputFormat::Json => serde_json::to_string_pretty(&response)? + "\n",
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => {
            eprintln!("error: plugin {}: {failure}", loaded.name);
            Ok(ExitCode::from(failure.class.exit_code()))
        }
    }
}

/// Adds the objects of one `--related [NAME=]FILE` to their groups. A bare
/// FILE keys each object by the plural of its kind, as discovery would for
/// a rule without a name (kube's pluralisation; name the rule for a kind
/// whose plural is irregular).
fn related_arg(groups: &mut Vec<RelatedObjects>, arg: &str) -> anyhow::Result<()> {
    let (name, path) = match arg.split_once('=') {
        Some((name, path)) if !name.is_empty() && !name.contains('/') => (Some(name), path),
        _ => (None, arg),
    };
    let path = std::path::Path::new(path);
    for (index, object) in input::objects(path)?.into_iter().enumerate() {
        let key = match name {
            Some(name) => name.to_string(),
            None => plural_of(&object).with_context(|| {
                format!(
                    "{} document {}: cannot key it without apiVersion and kind (or use --related NAME={})",
                    path.display(),
                    index + 1,
                    path.display()
                )
            })?,
        };
        RelatedObjects::group(groups, &key).push(object);
    }
    if let Some(name) = name {
        // A rule that selected nothing still has its (empty) group.
        RelatedObjects::group(groups, name);
    }
    Ok(())
}

/// The plural resource name of `object`'s kind.
fn plural_of(object: &serde_json::Value) -> Option<String> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    Some(kube::core::ApiResource::from_gvk(&gvk).plural)
}

/// Validates `--now` and writes it in UTC with a `Z`, as the host does.
pub fn normalize_time(text: &str) -> anyhow::Result<String> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text.trim())
        .with_context(|| format!("--now {text:?} is not an RFC 3339 timestamp"))?;
    Ok(parsed
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_related_files_are_keyed_by_plural_and_named_ones_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.yaml");
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: b}\n",
        )
        .unwrap();
        let mut groups = Vec::new();
        related_arg(&mut groups, file.to_str().unwrap()).unwrap();
        related_arg(&mut groups, &format!("tls={}", file.display())).unwrap();
        let keys: Vec<(&str, usize)> = groups
            .iter()
            .map(|g| (g.name.as_str(), g.objects.len()))
            .collect();
        assert_eq!(keys, vec![("secrets", 1), ("ingresses", 1), ("tls", 2)]);
    }

    #[test]
    fn now_is_normalized_to_utc() {
        assert_eq!(
            normalize_time("2026-11-30T10:00:00+01:00").unwrap(),
            "2026-11-30T09:00:00Z"
        );
        assert!(normalize_time("tomorrow").is_err());
    }
}
