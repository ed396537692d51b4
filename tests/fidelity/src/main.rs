//! `fidelity`: sends the same requests to the embedded API server and to a
//! real kube-apiserver and compares what came back, check by check, after
//! normalising what legitimately differs between clusters (see normalize.rs).
//! Prints identical/total per area, writes `fidelity.json` and `fidelity.md`,
//! and exits non-zero only if a check listed in the baseline (identical when
//! the baseline was written) is no longer identical: a measurement, with a
//! ratchet against regressions.

mod checks;
mod compare;
mod normalize;
mod pb;
mod run;
mod target;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rand::Rng;

use crate::compare::{CheckResult, Report};
use crate::run::Run;
use crate::target::{Req, Target};

#[derive(Parser, Debug)]
#[command(about = "Compare the embedded API server with a real kube-apiserver")]
struct Args {
    /// Kubeconfig of the real kube-apiserver (the referee); default: the
    /// `WR_REAL_KUBECONFIG` that `real-cluster up` exports.
    #[arg(long, env = "WR_REAL_KUBECONFIG")]
    real: PathBuf,
    /// Kubeconfig of an already running embedded server.
    #[arg(long, conflicts_with = "embedded_bin")]
    embedded: Option<PathBuf>,
    /// Start `BIN apiserver --port 0` and compare against it.
    #[arg(long)]
    embedded_bin: Option<PathBuf>,
    /// Directory for fidelity.json and fidelity.md (and kubectl outputs).
    #[arg(long, default_value = "target/fidelity")]
    report: PathBuf,
    /// Baseline: ids of checks that must stay identical.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/baseline.json"))]
    baseline: PathBuf,
    /// Reasons for differences, by check-id prefix.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/reasons.json"))]
    reasons: PathBuf,
    /// Also write the report as this document (docs/fidelity.md).
    #[arg(long)]
    doc: Option<PathBuf>,
    /// Rewrite the baseline with the checks identical in this run.
    #[arg(long)]
    update_baseline: bool,
    /// Run only these areas (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// kubectl used by the kubectl area (a fixed minor: plain `kubectl`
    /// dispatches on the server's version).
    #[arg(long, default_value = "/usr/lib/google-cloud-sdk/bin/kubectl.1.32")]
    kubectl: PathBuf,
}

/// The embedded server started by this program; killed on drop.
struct Embedded {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_embedded(bin: &std::path::Path) -> anyhow::Result<(Embedded, PathBuf)> {
    let dir = tempfile::tempdir().context("temp dir")?;
    let kc = dir.path().join("kubeconfig");
    let child = Command::new(bin)
        // RBAC enforced, as the real control plane runs with
        // `--authorization-mode=RBAC` (the admin is in system:masters on both).
        .args([
            "apiserver",
            "--port",
            "0",
            "--authorization",
            "rbac",
            "--kubeconfig-out",
        ])
        .arg(&kc)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let e = Embedded { child, _dir: dir };
    for _ in 0..100 {
        if kc.exists() && std::fs::metadata(&kc).map(|m| m.len() > 0).unwrap_or(false) {
            return Ok((e, kc));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    anyhow::bail!("{} apiserver wrote no kubeconfig in 10 s", bin.display())
}

async fn version(t: &Target) -> String {
    match t.send(Req::get("/version")).await {
        Ok(r) => r.json()["gitVersion"].as_str().unwrap_or("?").to_string(),
        Err(e) => format!("unreachable: {e:#}"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (_embedded, embedded_kc) = match (&args.embedded, &args.embedded_bin) {
        (Some(kc), _) => (None, kc.clone()),
        (None, Some(bin)) => {
            let (e, kc) = start_embedded(bin)?;
            (Some(e), kc)
        }
        (None, None) => anyhow::bail!("give --embedded KUBECONFIG or --embedded-bin BIN"),
    };
    let emb = Target::connect("embedded", &embedded_kc).await?;
    let real = Target::connect("real", &args.real).await?;
    let token = format!("r{:05x}", rand::rng().random_range(0..0xfffff));
    std::fs::create_dir_all(&args.report)
        .with_context(|| format!("creating {}", args.report.display()))?;

    let plan = Arc::new(checks::discovery::plan(&real).await?);
    let (a, b) = (
        Run::new(emb.clone(), &token),
        Run::new(real.clone(), &token),
    );
    let ctx = checks::Ctx {
        plan,
        kubectl: args.kubectl.clone(),
        out: args.report.clone(),
    };
    let only = |area: &str| args.only.is_empty() || args.only.iter().any(|o| o == area);
    for area in checks::AREAS {
        if !only(area) {
            continue;
        }
        eprintln!("area {area}");
        let (ra, rb) = tokio::join!(checks::run(area, &a, &ctx), checks::run(area, &b, &ctx));
        for (r, res) in [(&a, ra), (&b, rb)] {
            if let Err(e) = res {
                eprintln!("  {area} stopped on {}: {e:#}", r.t.name);
                r.record(
                    &format!("{area}/stopped"),
                    serde_json::json!(format!("{e:#}")),
                );
            }
        }
    }
    checks::cleanup(&a).await;
    checks::cleanup(&b).await;

    let (obs_a, obs_b) = (a.into_observations(), b.into_observations());
    // The raw (normalised) observations, for reading a difference in full.
    for (name, obs) in [("embedded", &obs_a), ("real", &obs_b)] {
        let path = args.report.join(format!("observations-{name}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(obs)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let results = compare::compare(&obs_a, &obs_b);
    let areas = compare::figures(&results);
    let report = Report {
        embedded_version: version(&emb).await,
        real_version: version(&real).await,
        identical: results.iter().filter(|r| r.identical).count(),
        total: results.len(),
        areas,
        checks: results,
    };
    for (area, f) in &report.areas {
        println!("{area:<12} {:>4} / {:<4}", f.identical, f.total);
    }
    println!(
        "{:<12} {:>4} / {:<4}",
        "total", report.identical, report.total
    );
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(args.report.join("fidelity.json"), json)?;
    let reasons: compare::Reasons = serde_json::from_str(
        &std::fs::read_to_string(&args.reasons)
            .with_context(|| format!("reading {}", args.reasons.display()))?,
    )
    .with_context(|| format!("parsing {}", args.reasons.display()))?;
    let md = compare::markdown(&report, &reasons);
    std::fs::write(
        args.report.join("fidelity.md"),
        format!("# Fidelity report\n\n{md}"),
    )?;
    if let Some(doc) = &args.doc {
        let text = format!("{DOC_INTRO}\n## Figures ({})\n\n{md}", today());
        std::fs::write(doc, text).with_context(|| format!("writing {}", doc.display()))?;
        println!("document written: {}", doc.display());
    }
    println!("report: {}", args.report.join("fidelity.md").display());

    let run_all = args.only.is_empty();
    if args.update_baseline {
        anyhow::ensure!(run_all, "--update-baseline needs a run of every area");
        write_baseline(&args.baseline, &report.checks)?;
        println!("baseline written: {}", args.baseline.display());
        return Ok(());
    }
    let regressed = regressions(&args.baseline, &report.checks, &args.only)?;
    if !regressed.is_empty() {
        for r in &regressed {
            eprintln!(
                "REGRESSION {}: {}",
                r.id,
                r.difference.as_deref().unwrap_or("missing")
            );
        }
        anyhow::bail!(
            "{} checks identical in the baseline differ now",
            regressed.len()
        );
    }
    Ok(())
}

/// The date (UTC) for the document's heading.
fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The head of docs/fidelity.md; the figures and differences follow.
const DOC_INTRO: &str = include_str!("../doc-intro.md");

#[derive(serde::Serialize, serde::Deserialize)]
struct Baseline {
    identical: BTreeSet<String>,
}

fn write_baseline(path: &std::path::Path, checks: &[CheckResult]) -> anyhow::Result<()> {
    let b = Baseline {
        identical: checks
            .iter()
            .filter(|c| c.identical)
            .map(|c| c.id.clone())
            .collect(),
    };
    std::fs::write(path, serde_json::to_string_pretty(&b)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Checks in the baseline that are not identical now (within the areas run).
fn regressions(
    path: &std::path::Path,
    checks: &[CheckResult],
    only: &[String],
) -> anyhow::Result<Vec<CheckResult>> {
    if !path.exists() {
        eprintln!("no baseline at {}: nothing to hold", path.display());
        return Ok(Vec::new());
    }
    let b: Baseline = serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    Ok(b.identical
        .iter()
        .filter(|id| only.is_empty() || only.iter().any(|o| o == compare::area_of(id)))
        .filter_map(|id| match checks.iter().find(|c| &c.id == id) {
            Some(c) if c.identical => None,
            Some(c) => Some(c.clone()),
            None => Some(CheckResult {
                id: id.clone(),
                identical: false,
                difference: Some("not observed in this run".into()),
            }),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(id: &str, identical: bool) -> CheckResult {
        CheckResult {
            id: id.into(),
            identical,
            difference: (!identical).then(|| "differs".to_string()),
        }
    }

    #[test]
    fn a_baseline_check_that_differs_or_vanishes_is_a_regression() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("baseline.json");
        write_baseline(
            &path,
            &[check("a/x", true), check("a/y", true), check("b/z", false)],
        )?;
        let now = [check("a/x", true), check("a/y", false), check("b/z", true)];
        let r: Vec<String> = regressions(&path, &now, &[])?
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(r, vec!["a/y"]);
        let gone: Vec<String> = regressions(&path, &[check("a/y", true)], &[])?
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(gone, vec!["a/x"]);
        // Areas not run are not held against the run.
        assert!(regressions(&path, &[], &["b".to_string()])?.is_empty());
        Ok(())
    }
}
