//! `wasm-reconciler test [DIR]`: golden-file tests for a plugin.
//!
//! Each case is a directory with `parent.yaml` and optionally
//! `observed.yaml`, `related.yaml`, `config.json`, `now` (RFC 3339; default
//! [`golden::DEFAULT_NOW`]), `finalizing` (an empty marker file) and
//! `expected.yaml`: the response as `render` prints it, or
//! `error: {class, reason, message}`. Every case is called and judged exactly
//! as `render` does (the host's validation and limits, `--controller`), and
//! compared as data with a field-by-field diff. `--update` writes what the
//! plugin returned as the new expectation.
//!
//! Exit codes: 0 every case passed, 1 a case failed (or bad input), 5 the
//! plugin cannot be loaded.

mod golden;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::cmd::render::{EXIT_FAULT, Loaded, RequestFiles, RuleArgs};
use golden::{Case, Expected};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// A case directory, or a directory of case directories.
    #[arg(default_value = "tests")]
    pub dir: PathBuf,
    /// The plugin component (default: the controller's `spec.plugin.path`,
    /// relative to the controller file).
    #[arg(long, value_name = "P.wasm")]
    pub plugin: Option<PathBuf>,
    /// Write each failing or new case's result as its `expected.yaml`.
    #[arg(long)]
    pub update: bool,
    /// Run only the cases whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// The rules every case is judged by. Without `--controller`,
    /// `DIR/controller.yaml` or `DIR/../controller.yaml` is used when it exists.
    #[command(flatten)]
    pub rules: RuleArgs,
}

/// The case directories under `dir` (or `dir` itself), sorted by name.
fn cases(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if dir.join("parent.yaml").exists() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read test directory {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("parent.yaml").exists())
        .collect();
    out.sort();
    if out.is_empty() {
        bail!(
            "{}: no test cases (a case is a directory with parent.yaml and expected.yaml)",
            dir.display()
        );
    }
    Ok(out)
}

/// `--plugin`, else the controller's `spec.plugin.path`.
fn plugin_path(args: &TestArgs, rules: &crate::cmd::render::Rules) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.plugin {
        return Ok(p.clone());
    }
    let from_controller = rules
        .controller()
        .and_then(|c| c.plugin.path.clone())
        .zip(args.rules.controller.as_ref());
    match from_controller {
        Some((path, controller)) => Ok(controller.parent().unwrap_or(Path::new(".")).join(path)),
        None => bail!("no plugin: pass --plugin P.wasm (or --controller with spec.plugin.path)"),
    }
}

/// The directory above `dir`, without a `..` when `dir` ends in a name
/// (`tests` → ``), so the paths `test` prints read `build/x.wasm` rather
/// than `tests/../build/x.wasm`.
fn parent_dir(dir: &Path) -> PathBuf {
    match (dir.file_name(), dir.parent()) {
        (Some(_), Some(parent)) => parent.to_path_buf(),
        _ => dir.join(".."),
    }
}

pub fn run(mut args: TestArgs) -> anyhow::Result<ExitCode> {
    if args.rules.controller.is_none() {
        // A project made by `new` keeps it beside `tests/`.
        args.rules.controller = [
            args.dir.join("controller.yaml"),
            parent_dir(&args.dir).join("controller.yaml"),
        ]
        .into_iter()
        .find(|p| p.exists());
    }
    let (rules, limits) = args.rules.load()?;
    let plugin = plugin_path(&args, &rules)?;
    let loaded = match Loaded::load(&plugin, &args.rules, &limits)? {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("error: cannot load plugin {}: {err}", plugin.display());
            return Ok(ExitCode::from(EXIT_FAULT));
        }
    };
    let mut failed = 0usize;
    let mut passed = 0usize;
    let mut updated = 0usize;
    for dir in cases(&args.dir)? {
        let case = Case::read(&dir)?;
        if args
            .filter
            .as_ref()
            .is_some_and(|f| !case.name.contains(f.as_str()))
        {
            continue;
        }
        // related.yaml: each object keyed by its plural (an unnamed rule's key).
        let related: Vec<String> = case
            .file("related.yaml")
            .map(|p| p.display().to_string())
            .into_iter()
            .collect();
        let request = RequestFiles {
            parent: &dir.join("parent.yaml"),
            observed: case.file("observed.yaml").as_deref(),
            related: &related,
            config: case.file("config.json").as_deref(),
            finalizing: case.finalizing,
            now: Some(&case.now),
        }
        .request(&rules)
        .with_context(|| format!("case {}", case.name))?;
        let (verdict, _) = loaded.call(&request, &limits, &rules)?;
        let result = verdict.map(|r| serde_json::to_value(r).unwrap_or_default());
        let expected = Expected::read(&case)?;
        let problems = match &expected {
            Some(e) => e.compare(&result),
            None => vec!["no expected.yaml (run with --update to write it)".to_string()],
        };
        if problems.is_empty() {
            passed += 1;
            println!("ok     {}", case.name);
            continue;
        }
        if args.update {
            let path = dir.join("expected.yaml");
            let text = serde_yaml::to_string(&Expected::of(&result))?;
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let _ = std::fs::remove_file(dir.join("expected-error.txt"));
            updated += 1;
            println!("update {}", case.name);
            continue;
        }
        failed += 1;
        println!("FAIL   {}", case.name);
        for p in problems {
            println!("         {p}");
        }
    }
    println!(
        "{passed} passed, {failed} failed{} ({})",
        if updated > 0 {
            format!(", {updated} updated")
        } else {
            String::new()
        },
        loaded.name
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
