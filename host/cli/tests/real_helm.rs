//! The Helm chart, for real (issue 13 item 6): `helm` built from its Go
//! module (`tests/helm/build.sh`), the chart under `host/deploy/helm/` linted,
//! rendered and accepted by a real kube-apiserver (`kubectl apply
//! --dry-run=server`), then installed with `helm install` — its
//! ServiceAccount, ClusterRole (with the rules `wasm-reconciler rbac
//! --cluster-role-only -f examples/…` prints) and leader-election Role — and
//! the host run as a process (no kubelet runs the chart's pods) as the chart's
//! ServiceAccount through the examples' lifecycle with zero 403s in the audit log.
//!
//! `deploy_manifests.rs` (wr-operator) renders the chart with gtmpl against
//! the embedded server on every `cargo test`; this one needs a real API
//! server with RBAC (`WR_TEST_CLUSTER=real`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use serde_json::Value;

use crate::real_kube::*;
use crate::run_common::{BIN, eventually, kubectl};

/// The release (its ClusterRole is named so).
const RELEASE: &str = "wr-helm-real";

#[test]
fn helm_chart_lints_renders_installs_and_its_account_runs_the_examples() -> Result<()> {
    let Some(real) = real(
        "helm_chart_lints_renders_installs_and_its_account_runs_the_examples",
        "`kubectl apply --dry-run=server` and RBAC need a real API server",
    )?
    else {
        return Ok(());
    };
    let kc = real.kubeconfig.clone();
    let dir = tempfile::tempdir()?;
    let helm = helm_binary()?;
    let chart = wr_tests::plugins::workspace_root().join("host/deploy/helm/wasm-reconciler");
    let chart = chart.to_str().context("chart path")?;
    let t0 = Instant::now();

    // --- Lint, and the server accepts every rendered object.
    let lint = run(&helm, &["lint", "--strict", chart], &kc, dir.path())?;
    ensure!(lint.contains("0 chart(s) failed"), "helm lint: {lint}");
    let ns = real.namespace("helm")?;
    let ns = ns.as_str();
    let rules = cluster_role_only_rules()?;
    let set_rules = format!("rbac.rules={rules}");
    let rendered = run(
        &helm,
        &[
            "template",
            RELEASE,
            chart,
            "--namespace",
            ns,
            "--set-json",
            &set_rules,
        ],
        &kc,
        dir.path(),
    )?;
    // The namespace warns on anything short of the restricted Pod Security
    // Standard, which the chart's pods claim to meet (docs/operations.md).
    kubectl(
        &kc,
        &[
            "label",
            "namespace",
            ns,
            "--overwrite",
            "pod-security.kubernetes.io/warn=restricted",
        ],
    )?;
    let (accepted, warnings) =
        kubectl_stdin(&kc, &["apply", "--dry-run=server", "-f", "-"], &rendered)?;
    ensure!(
        !warnings.contains("Warning"),
        "the server warned about the chart:\n{warnings}"
    );
    let kinds: Vec<&str> = accepted
        .lines()
        .filter_map(|l| l.split('/').next())
        .collect();
    for want in [
        "serviceaccount",
        "clusterrole",
        "clusterrolebinding",
        "role",
        "rolebinding",
        "deployment",
        "service",
    ] {
        ensure!(
            kinds
                .iter()
                .any(|k| k.starts_with(&format!("{want}.")) || *k == want),
            "the server did not accept a {want} of the chart:\n{accepted}"
        );
    }

    // --- Install for real, then the examples.
    run(
        &helm,
        &[
            "upgrade",
            "--install",
            RELEASE,
            chart,
            "--namespace",
            ns,
            "--set-json",
            &set_rules,
        ],
        &kc,
        dir.path(),
    )?;
    install_examples(&kc, dir.path())?;
    let outcome = lifecycle_as_chart_account(&real, dir.path(), ns);

    // --- Clean up (also after a failure).
    if outcome.is_err() {
        let _ = kubectl(
            &kc,
            &[
                "-n",
                ns,
                "patch",
                WORKSPACE,
                "team-a",
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ],
        );
        for wc in ["static-site", "tombstone"] {
            let _ = kubectl(
                &kc,
                &[
                    "patch",
                    "wasmcontroller",
                    wc,
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ],
            );
        }
        let _ = kubectl(
            &kc,
            &[
                "delete",
                "wasmcontroller",
                "static-site",
                "tombstone",
                "--ignore-not-found",
                "--wait=false",
            ],
        );
    }
    let uninstall = run(
        &helm,
        &["uninstall", RELEASE, "--namespace", ns],
        &kc,
        dir.path(),
    );
    let _ = kubectl(
        &kc,
        &[
            "delete",
            "namespace",
            ns,
            "--ignore-not-found",
            "--wait=false",
        ],
    );
    outcome?;
    uninstall?;
    ensure!(
        kubectl(
            &kc,
            &[
                "get",
                "clusterrole",
                RELEASE,
                "--ignore-not-found",
                "-o",
                "name"
            ]
        )?
        .trim()
        .is_empty(),
        "helm uninstall left the ClusterRole"
    );
    eprintln!(
        "helm chart checked for real in {:.0}s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Creates, updates, finalizes and deletes the examples' parents as the
/// chart's ServiceAccount, deletes the WasmControllers, and finds no 403 for
/// the account in the audit log.
fn lifecycle_as_chart_account(real: &Real, dir: &Path, ns: &str) -> Result<()> {
    let kc = &real.kubeconfig;
    let sa = "wasm-reconciler";
    let sa_kc = service_account_kubeconfig(kc, dir, ns, sa)?;
    let user = format!("system:serviceaccount:{ns}:{sa}");
    let log = dir.join("host.log");
    // The chart's leader-election Role names the Lease `wasm-reconciler`.
    let mut host = host(&sa_kc, "helm", ns, "wasm-reconciler", &log)?;
    let mut steps = || -> Result<()> {
        eventually("the host to take the chart's lease", 60, || {
            lease_holder(kc, ns, "wasm-reconciler").filter(|h| h.starts_with("helm_"))
        })?;
        apply_text(
            kc,
            dir,
            "site.yaml",
            &example_in("examples/static-site/site.yaml", ns)?,
        )?;
        apply_text(
            kc,
            dir,
            "ws.yaml",
            &example_in("examples/tombstone/workspace.yaml", ns)?,
        )?;
        eventually("web and team-a Ready", 120, || {
            (ready(kc, ns, SITE, "web").as_deref() == Some("True")
                && ready(kc, ns, WORKSPACE, "team-a").as_deref() == Some("True")
                && field(kc, ns, &["deployment", "web"], "{.spec.replicas}").as_deref()
                    == Some("2"))
            .then_some(())
        })?;
        kubectl(
            kc,
            &[
                "-n",
                ns,
                "patch",
                SITE,
                "web",
                "--type=merge",
                "-p",
                r#"{"spec":{"replicas":3}}"#,
            ],
        )?;
        eventually("the Deployment to follow the edit", 60, || {
            (field(kc, ns, &["deployment", "web"], "{.spec.replicas}").as_deref() == Some("3"))
                .then_some(())
        })?;
        kubectl(
            kc,
            &["-n", ns, "delete", WORKSPACE, "team-a", "--wait=false"],
        )?;
        eventually("team-a finalized and gone", 90, || {
            gone(kc, ns, WORKSPACE, "team-a").then_some(())
        })?;
        kubectl(kc, &["-n", ns, "delete", SITE, "web", "--wait=false"])?;
        eventually("web and its Deployment gone", 90, || {
            (gone(kc, ns, SITE, "web") && gone(kc, ns, "deployment", "web")).then_some(())
        })?;
        delete_example_controllers(kc, 90)?;
        host.signal("TERM")?;
        ensure!(host.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
        Ok(())
    };
    steps().map_err(|e| {
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = tail.lines().collect();
        e.context(format!(
            "host log tail:\n{}",
            lines[lines.len().saturating_sub(40)..].join("\n")
        ))
    })?;
    std::thread::sleep(Duration::from_secs(1));
    let (requests, denied) = audit(&real.audit_log, real.audit_from, &user)?;
    eprintln!(
        "audit log: {requests} requests by {user}, {} refused",
        denied.len()
    );
    ensure!(
        requests > 30,
        "only {requests} requests by {user} in the audit log"
    );
    ensure!(
        denied.is_empty(),
        "the chart's RBAC refused {} requests of the host:\n{}",
        denied.len(),
        denied.iter().map(describe).collect::<Vec<_>>().join("\n")
    );
    Ok(())
}

/// The `rules` of `wasm-reconciler rbac --cluster-role-only -f examples/…`, as JSON.
fn cluster_role_only_rules() -> Result<String> {
    let root = wr_tests::plugins::workspace_root();
    let out = Command::new(BIN)
        .args(["rbac", "--cluster-role-only", "-f"])
        .arg(root.join("examples/static-site"))
        .arg("-f")
        .arg(root.join("examples/tombstone"))
        .output()
        .context("running wasm-reconciler rbac")?;
    ensure!(
        out.status.success(),
        "rbac failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let role = Value::deserialize(serde_yaml::Deserializer::from_slice(&out.stdout))
        .context("parsing the ClusterRole")?;
    ensure!(
        role["kind"] == "ClusterRole",
        "rbac --cluster-role-only printed {}",
        role["kind"]
    );
    Ok(role["rules"].to_string())
}

/// `tests/helm/build.sh` (a no-op once built) or `$WR_HELM_BIN`: the `helm` binary.
fn helm_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("WR_HELM_BIN") {
        return Ok(PathBuf::from(p));
    }
    let script = wr_tests::plugins::workspace_root().join("tests/helm/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(out.status.success(), "{} failed", script.display());
    let text = String::from_utf8(out.stdout)?;
    let dir = text
        .lines()
        .last()
        .context("build.sh printed nothing")?
        .trim();
    Ok(Path::new(dir).join("helm"))
}

/// `helm ARGS` with `kc` as its kubeconfig and its own state under `home`; stdout.
fn run(helm: &Path, args: &[&str], kc: &Path, home: &Path) -> Result<String> {
    let out = Command::new(helm)
        .args(args)
        .env("KUBECONFIG", kc)
        .env("HELM_CACHE_HOME", home.join("helm-cache"))
        .env("HELM_CONFIG_HOME", home.join("helm-config"))
        .env("HELM_DATA_HOME", home.join("helm-data"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", helm.display()))?;
    if !out.status.success() {
        bail!(
            "helm {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl ARGS` with `text` on stdin; (stdout, stderr).
fn kubectl_stdin(kc: &Path, args: &[&str], text: &str) -> Result<(String, String)> {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl")?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(text.as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
