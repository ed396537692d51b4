//! `wasm-reconciler new NAME --lang rust|js|python|c|go`: a plugin project of
//! its own, in a directory outside this repository.
//!
//! The project gets a small working reconcile, golden tests, a parent CRD
//! and a WasmController, a build script and a README of next steps. The SDK
//! and the WIT are **vendored** into it from copies compiled into this binary
//! (`files`), so `new` works offline, on any machine, and the project builds
//! against exactly the contract this host speaks; the only downloads are the
//! language's own toolchain packages (crates.io, npm, PyPI, Debian), which
//! each build script installs once into the same cache this repository's
//! builds use (`~/.cache/wasm-reconciler`).

mod files;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Go,
    Js,
    Python,
    C,
}

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Name of the plugin (a DNS label, e.g. `my-app`): the directory, the
    /// WasmController, and (CamelCased) the parent kind.
    pub name: String,
    /// Language of the plugin.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// Where to create the project [default: ./NAME]. Must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `my-app` → `MyApp`.
fn camel(name: &str) -> String {
    name.split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The values of the `{{...}}` placeholders.
fn placeholders(name: &str, lang: Lang) -> Vec<(&'static str, String)> {
    let kind = camel(name);
    let singular = kind.to_ascii_lowercase();
    let (title, layout, sdk_note) = match lang {
        Lang::Rust => (
            "Rust",
            "| `src/lib.rs` | the reconcile logic and its unit tests (`cargo test`) |\n| `sdk/` | the wasm-reconciler Rust SDK (vendored) |\n",
            "The SDK is vendored in `sdk/` (a path dependency): it builds offline against\nthe WIT in `wit/`; only its crates.io dependencies (wit-bindgen, serde_json,\nsha2, hex) are downloaded, once, by cargo. The release profile in\n`Cargo.toml` builds small components (`lto`, `panic = \"abort\"`, `strip`).",
        ),
        Lang::Js => (
            "JavaScript",
            "| `src/plugin.js` | the reconcile logic |\n| `src/plugin.test.js` | its unit tests (`node --test src/`) |\n| `src/component.js` | the component entry (WIT export and `log` import) |\n| `sdk/` | the wasm-reconciler JavaScript SDK (vendored) |\n| `tools/` | the pinned toolchain (componentize-qjs) |\n",
            "Built with componentize-qjs (QuickJS-NG, ~1 MB components, `--stub-wasi`:\nno WASI imports). Building with componentize-js (StarlingMonkey) instead\nalso works, but its default build imports `wasi:http`, which the host does\nnot provide: pass `disableFeatures: [\"http\", \"fetch-event\"]` (CLI: `--disable http fetch-event`)\n(see the wasm-reconciler docs, `docs/authoring.md`, JavaScript).",
        ),
        Lang::Python => (
            "Python",
            "| `src/plugin.py` | the reconcile logic |\n| `src/test_plugin.py` | its unit tests (pytest) |\n| `src/app.py` | the component entry (WIT export and `log` import) |\n| `sdk/wr_plugin/` | the wasm-reconciler Python SDK (vendored) |\n| `tools/requirements.txt` | the pinned toolchain (componentize-py, pytest) |\n",
            "Built with componentize-py (CPython inside: ~18 MB, ~6 MB gzipped;\n`publish` compresses and chunks it into ConfigMaps).",
        ),
        Lang::C => (
            "C",
            "| `src/plugin.c` | the reconcile logic |\n| `src/test_plugin.c` | its native unit tests |\n| `src/component.c` | the component entry |\n| `sdk/` | the wasm-reconciler C SDK and its generated WIT bindings (vendored) |\n| `tools/requirements.txt` | the pinned wasm-tools |\n",
            "Built with clang-19 and wasi-libc (Debian packages) and wasm-tools (PyPI);\ncomponents are ~40 KB and import no WASI.",
        ),
        Lang::Go => (
            "Go",
            "| `src/plugin.go` | the reconcile logic |\n| `src/plugin_test.go` | its unit tests (`go test ./...`) |\n| `src/main.go` | the component entry (registers the reconcile function) |\n| `sdk/` | the wasm-reconciler Go SDK (vendored, standard library only) |\n| `wasi/` | the WASI stub adapter (the component imports no WASI) |\n| `tools/` | the pinned wasm-tools (PyPI) and Wizer (npm) |\n",
            "Built with standard Go (>= 1.24, `GOOS=wasip1 GOARCH=wasm -buildmode=c-shared`),\npre-initialised with Wizer (the Go runtime's start-up runs once at build\ntime), and wrapped into a component by wasm-tools with a stub WASI adapter;\ncomponents are ~4 MB (~1 MB gzipped).",
        ),
    };
    let lang_name = match lang {
        Lang::Rust => "rust",
        Lang::Go => "go",
        Lang::Js => "js",
        Lang::Python => "python",
        Lang::C => "c",
    };
    // The Rust SDK builds against 0.2.0 (`wit/0.2.0`); the others against 0.1.0.
    let wit_row = match lang {
        Lang::Rust => {
            "| `wit/0.2.0/reconciler.wit` | the contract between host and plugin that the SDK builds against (WIT 0.2.0; `wit/reconciler.wit` is 0.1.0) |"
        }
        _ => "| `wit/reconciler.wit` | the contract between host and plugin (WIT 0.1.0) |",
    };
    vec![
        ("{{name}}", name.to_string()),
        ("{{wit_row}}", wit_row.to_string()),
        ("{{crate}}", name.replace('-', "_")),
        ("{{kind}}", kind),
        ("{{plural}}", format!("{singular}s")),
        ("{{singular}}", singular),
        ("{{group}}", format!("{name}.example.com")),
        ("{{lang}}", lang_name.to_string()),
        ("{{lang_title}}", title.to_string()),
        ("{{layout}}", layout.to_string()),
        ("{{sdk_note}}", sdk_note.to_string()),
    ]
}

fn fill(text: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(text.to_string(), |t, (k, v)| t.replace(k, v))
}

/// The project's files for `lang`, placeholders filled.
pub fn project_files(name: &str, lang: Lang) -> anyhow::Result<Vec<(String, String)>> {
    let own: files::Files = match lang {
        Lang::Rust => files::RUST,
        Lang::Js => files::JS,
        Lang::Python => files::PYTHON,
        Lang::C => files::C,
        Lang::Go => files::GO,
    };
    let values = placeholders(name, lang);
    let mut out = Vec::new();
    for (path, text) in files::COMMON.iter().chain(own) {
        let mut text = fill(text, &values);
        if lang == Lang::Rust && *path == "sdk/src/lib.rs" {
            // In this repository the SDK reads the WIT at ../../wit/0.2.0 (and
            // a plugin crate under plugins/ at ../../wit/0.2.0); in the project
            // the copy is at wit/0.2.0 of the project root.
            text = text
                .replace("path: \"../../wit/0.2.0\"", "path: \"../wit/0.2.0\"")
                .replace("($ty, \"../../wit/0.2.0\")", "($ty, \"wit/0.2.0\")");
        }
        out.push((path.to_string(), text));
    }
    Ok(out)
}

pub fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    if !wr_engine::validate::is_dns_label(&args.name)
        || !args.name.starts_with(|c: char| c.is_ascii_lowercase())
    {
        bail!(
            "NAME {:?} must be a DNS label starting with a letter (lowercase letters, digits and '-', at most 63)",
            args.name
        );
    }
    let files = project_files(&args.name, args.lang)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} exists and is not empty; choose another --dir",
            dir.display()
        );
    }
    for (path, text) in &files {
        write(&dir.join(path), text)?;
    }
    make_executable(&dir.join("build.sh"))?;
    println!(
        "created {} ({} plugin `{}`). Next:\n\n    cd {}\n    ./build.sh\n    wasm-reconciler test\n    wasm-reconciler render --plugin build/{}.wasm --parent example.yaml --controller controller.yaml\n\nsee {}/README.md for dev, plan and publish.",
        dir.display(),
        placeholders(&args.name, args.lang)
            .into_iter()
            .find(|(k, _)| *k == "{{lang_title}}")
            .map(|(_, v)| v)
            .unwrap_or_default(),
        args.name,
        dir.display(),
        args.name,
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_kinds_and_placeholders_are_all_filled() {
        assert_eq!(camel("my-app"), "MyApp");
        for lang in [Lang::Rust, Lang::Js, Lang::Python, Lang::C, Lang::Go] {
            for (path, text) in project_files("my-app", lang).unwrap() {
                for (key, _) in placeholders("my-app", lang) {
                    assert!(!text.contains(key), "{lang:?} {path}: {key} left");
                }
            }
        }
        let files = project_files("my-app", Lang::Rust).unwrap();
        let sdk = &files.iter().find(|(p, _)| p == "sdk/src/lib.rs").unwrap().1;
        assert!(sdk.contains("path: \"../wit/0.2.0\""), "the SDK's WIT path");
        assert!(
            !sdk.contains("path: \"../../wit") && !sdk.contains("\"../../wit/0.2.0\")"),
            "a path into this repository is left"
        );
        assert!(files.iter().any(|(p, _)| p == "wit/0.2.0/reconciler.wit"));
    }

    /// Session 8 trial: the Rust project's README said "WIT 0.1.0" while its
    /// SDK builds against `wit/0.2.0`.
    #[test]
    fn the_readme_names_the_wit_the_project_builds_against() {
        for lang in [Lang::Rust, Lang::Js, Lang::Python, Lang::C, Lang::Go] {
            let files = project_files("my-app", lang).unwrap();
            let text = |p: &str| files.iter().find(|(f, _)| f == p).map(|(_, t)| t.as_str());
            let readme = text("README.md").unwrap();
            let row = readme
                .lines()
                .find(|l| l.contains("the contract between host and plugin"))
                .unwrap_or_else(|| panic!("{lang:?}: no WIT row in README"));
            let wit = row.split('`').nth(1).unwrap();
            let package = text(wit)
                .unwrap_or_else(|| panic!("{lang:?}: README names {wit}, not in the project"))
                .lines()
                .find_map(|l| l.strip_prefix("package wasm-reconciler:plugin@"))
                .unwrap()
                .trim_end_matches(';')
                .to_string();
            assert!(row.contains(&format!("(WIT {package}")), "{lang:?}: {row}");
            if lang == Lang::Rust {
                assert!(
                    text("sdk/src/lib.rs").unwrap().contains(&format!(
                        "path: \"../{}\"",
                        wit.trim_end_matches("/reconciler.wit")
                    )),
                    "the Rust SDK builds against another WIT than {wit}"
                );
            }
        }
    }

    #[test]
    fn go_projects_import_their_own_vendored_sdk() {
        let files = project_files("demo-go", Lang::Go).unwrap();
        let text = |p: &str| &files.iter().find(|(f, _)| f == p).unwrap().1;
        assert!(text("go.mod").starts_with("module demo-go"));
        assert!(text("src/main.go").contains("import wr \"demo-go/sdk\""));
        assert!(files.iter().any(|(f, _)| f == "sdk/abi_wasip1.go"));
    }
}
