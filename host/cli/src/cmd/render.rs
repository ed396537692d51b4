//! `wasm-reconciler render`: run a plugin offline on files, no cluster.
//!
//! Reads the parent (and optionally observed children, related objects and
//! controller config), calls the plugin once with the same sandbox and limits
//! as the controller, and prints the response (desired children, conditions,
//! status patch, events, requeue hint) as YAML or JSON on stdout.
//!
//! Exit codes (docs/architecture.md): 0 success, 1 bad input or other error,
//! 3 permanent plugin error, 4 transient plugin error, 5 plugin fault (trap,
//! timeout, fuel, memory, invalid output, or a component that cannot be loaded).

mod input;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use wr_runtime::{CallLimits, PluginRuntime, ReconcileRequest, RelatedObjects, RuntimeConfig};

/// Exit code for a plugin that cannot be loaded: a fault of the plugin.
const EXIT_FAULT: u8 = 5;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
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
    /// Directory of the precompiled-plugin cache
    /// (default: $XDG_CACHE_HOME/wasm-reconciler or ~/.cache/wasm-reconciler).
    #[arg(long, value_name = "DIR", env = "WASM_RECONCILER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not read or write the precompiled-plugin cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Wall-clock limit of the call, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub timeout_ms: u64,
    /// Memory limit of the plugin, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub max_memory_mib: usize,
    /// Optional fuel budget (instruction-count limit).
    #[arg(long)]
    pub fuel: Option<u64>,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let request = build_request(&args)?;
    let bytes = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read plugin {}", args.plugin.display()))?;
    let runtime = make_runtime(&args)?;
    let plugin_name = args.plugin.display().to_string();
    let plugin = match runtime.load(&bytes) {
        Ok(plugin) => plugin,
        Err(err) => {
            eprintln!("error: cannot load plugin {plugin_name}: {err}");
            return Ok(ExitCode::from(EXIT_FAULT));
        }
    };
    let limits = CallLimits {
        timeout: Duration::from_millis(args.timeout_ms),
        max_memory_bytes: args.max_memory_mib.saturating_mul(1 << 20),
        fuel: args.fuel,
        ..CallLimits::default()
    };
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = {
        let _span = tracing::info_span!("render", plugin = %plugin_name, digest = plugin.digest())
            .entered();
        tokio.block_on(plugin.reconcile(&request, &limits))
    };
    match result {
        Ok(response) => {
            let text = match args.output {
                // A comment, so the document stays exactly the response.
                OutputFormat::Yaml => format!(
                    "# plugin contract: {}\n{}",
                    plugin.info().qualified_world(),
                    serde_yaml::to_string(&response)?
                ),
                OutputFormat::Json => serde_json::to_string_pretty(&response)? + "\n",
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("error: plugin {plugin_name}: {err}");
            Ok(ExitCode::from(err.exit_code()))
        }
    }
}

fn build_request(args: &RenderArgs) -> anyhow::Result<ReconcileRequest> {
    let parent = input::single_object(&args.parent)?;
    let children = match &args.observed {
        Some(path) => input::objects(path)?,
        None => Vec::new(),
    };
    let mut related = Vec::new();
    for arg in &args.related {
        related_arg(&mut related, arg)?;
    }
    let config = args.config.as_deref().map(input::config).transpose()?;
    let now = match &args.now {
        Some(text) => normalize_time(text)?,
        None => chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    Ok(ReconcileRequest {
        parent,
        children,
        related,
        finalizing: args.finalizing,
        config,
        now,
    })
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
fn normalize_time(text: &str) -> anyhow::Result<String> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .with_context(|| format!("--now {text:?} is not an RFC 3339 timestamp"))?;
    Ok(parsed
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

fn make_runtime(args: &RenderArgs) -> anyhow::Result<PluginRuntime> {
    super::plugin_runtime::create(RuntimeConfig {
        cache_dir: super::plugin_runtime::cache_dir(args.no_cache, args.cache_dir.as_ref()),
        max_instances: 2,
        max_memory_bytes: args.max_memory_mib.saturating_mul(1 << 20).max(1 << 20),
    })
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
