//! Shared by the `languages_*` tests and the language bench: where the
//! JavaScript, Python, C and Go components are, the skip policy when they are not
//! built, the fixture inputs they run on, and the runtime settings that let
//! every test binary share one compile of each component.
//!
//! The components are built by `plugins/languages/build-all.sh` (toolchains
//! come from npm, PyPI and Debian); these tests only load them.

use std::path::{Path, PathBuf};

use serde_json::Value;
use wr_runtime::{CallError, ReconcileRequest, ReconcileResponse, RuntimeConfig};

use crate::plugins::workspace_root;

/// The languages a plugin is ported to, as named under `plugins/<lang>/`.
pub const LANGUAGES: &[&str] = &["js", "python", "c", "go"];

/// `$WR_LANG_OUT`, else `$CARGO_TARGET_DIR/languages`, else `target/languages`:
/// the same rule as `plugins/languages/lib.sh`.
pub fn lang_out_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WR_LANG_OUT") {
        return workspace_root().join(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| workspace_root().join(d))
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("languages")
}

/// Runtime settings for tests that load the language components: the disk
/// cache under [`lang_out_dir`] is shared by every test binary (and kept by
/// CI between runs), so the ~18 MB Python component is compiled once, not
/// once per test process (a cold compile takes tens of seconds).
pub fn runtime_config() -> RuntimeConfig {
    RuntimeConfig {
        cache_dir: Some(lang_out_dir().join("wasmtime-cache")),
        ..RuntimeConfig::default()
    }
}

/// What a caller of these tests should do about a missing component.
pub enum Components {
    /// One `(language, bytes)` per language.
    Ready(Vec<(&'static str, Vec<u8>)>),
    /// Some are missing and they are not required: the message says which.
    Skipped(String),
}

/// The components of `plugin` in every language. When one is missing the
/// caller skips with the returned message, except under CI (`CI` set) or
/// `WR_REQUIRE_LANGUAGES=1`, where it panics with instructions;
/// `WR_SKIP_LANGUAGES=1` always skips.
pub fn components(plugin: &str) -> Components {
    components_in(plugin, LANGUAGES)
}

/// [`components`] for a plugin ported to only some of the languages.
pub fn components_in(plugin: &str, languages: &[&'static str]) -> Components {
    if std::env::var("WR_SKIP_LANGUAGES").is_ok_and(|v| v == "1") {
        return Components::Skipped(format!(
            "WR_SKIP_LANGUAGES=1: the {plugin} components in other languages are not tested"
        ));
    }
    let mut ready = Vec::new();
    let mut missing = Vec::new();
    for lang in languages {
        let path = lang_out_dir().join(lang).join(format!("{plugin}.wasm"));
        match std::fs::read(&path) {
            Ok(bytes) => ready.push((*lang, bytes)),
            Err(e) => missing.push(format!("{} ({e})", path.display())),
        }
    }
    if missing.is_empty() {
        return Components::Ready(ready);
    }
    let msg = format!(
        "the {plugin} components in other languages are not built: {}. \
         Build them with `plugins/languages/build-all.sh` (installs node/npm, \
         componentize-py and clang toolchains), or set WR_SKIP_LANGUAGES=1 to skip",
        missing.join(", ")
    );
    // A plain `cargo test --workspace` on a machine without the JS/Python/C
    // toolchains skips (and says why); CI, which builds them, must not.
    let required = std::env::var("WR_REQUIRE_LANGUAGES").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    if !required {
        Components::Skipped(msg)
    } else {
        panic!("{msg} (required because CI or WR_REQUIRE_LANGUAGES=1 is set)");
    }
}

/// One fixture case of `tests/fixtures/<plugin>/<case>`, read the way
/// `wasm-reconciler render` reads it (see tests/fixtures/README.md).
pub struct Fixture {
    pub name: String,
    pub dir: PathBuf,
    pub request: ReconcileRequest,
}

/// The `now` used when a fixture's `args` set none.
pub const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

/// Every fixture case of `plugin`, sorted by name.
pub fn fixtures(plugin: &str) -> Vec<Fixture> {
    let root = workspace_root().join("tests/fixtures").join(plugin);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("parent.yaml").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter().map(|dir| read_fixture(&dir)).collect()
}

fn read_fixture(dir: &Path) -> Fixture {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let parent = yaml_docs(&read("parent.yaml").unwrap_or_default())
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{}: parent.yaml is empty", dir.display()));
    let children = read("observed.yaml")
        .map(|t| yaml_docs(&t))
        .unwrap_or_default();
    // Keyed by plural resource name, as `render --related FILE` does.
    let mut related = Vec::new();
    for object in read("related.yaml")
        .map(|t| yaml_docs(&t))
        .unwrap_or_default()
    {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = object["kind"].as_str().unwrap_or_default();
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        let plural = kube::core::ApiResource::from_gvk(&gvk).plural;
        wr_runtime::RelatedObjects::group(&mut related, &plural).push(object);
    }
    let config = read("config.json").map(|t| {
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: config.json: {e}", dir.display()))
    });
    let mut finalizing = false;
    let mut now = DEFAULT_NOW.to_string();
    for arg in read("args").unwrap_or_default().lines().map(str::trim) {
        if arg == "--finalizing" {
            finalizing = true;
        } else if let Some(v) = arg.strip_prefix("--now=") {
            now = v.to_string();
        }
    }
    Fixture {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dir: dir.to_path_buf(),
        request: ReconcileRequest {
            parent,
            children,
            related,
            finalizing,
            config,
            now,
        },
    }
}

/// The non-empty documents of a multi-document YAML text, as JSON values.
pub fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("bad YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// A call's outcome in a form two languages can be compared on: the
/// response as data (key order ignored), or the error's kind, reason and message.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ok(ReconcileResponse),
    Permanent { reason: String, message: String },
    Transient { reason: String, message: String },
    Fault(String),
}

impl From<Result<ReconcileResponse, CallError>> for Outcome {
    fn from(result: Result<ReconcileResponse, CallError>) -> Self {
        match result {
            Ok(resp) => Outcome::Ok(resp),
            Err(CallError::Permanent { reason, message }) => Outcome::Permanent { reason, message },
            Err(CallError::Transient { reason, message }) => Outcome::Transient { reason, message },
            Err(other) => Outcome::Fault(other.to_string()),
        }
    }
}
