//! The host under exactly the RBAC `wasm-reconciler rbac` prints (issue 20,
//! item 18): the embedded API server enforces RBAC (`--authorization rbac`),
//! the printed objects are applied for ServiceAccount `default/wasm-reconciler`,
//! `kubectl create token` mints its token, and `wasm-reconciler run` uses it.
//! A lifecycle (parents created, spec edited, child deleted by hand, parent
//! deleted through its finalizer, SIGTERM) gets no 403; with one rule taken
//! away (`create` on Deployments) a new parent fails with the 403 a real
//! cluster gives and the host reports it on the parent.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use wr_apiserver::RequestRecord;

use crate::request_log::*;
use crate::run_common::*;

const LEASE: &[&str] = &[
    "--leader-elect=true",
    "--lease-duration-seconds=15",
    "--renew-deadline-seconds=10",
    "--retry-period-seconds=1",
    "--shutdown-timeout-seconds=10",
];

fn apply(kc: &Path, f: &Path) -> Result<()> {
    kubectl(
        kc,
        &["apply", "--server-side", "-f", f.to_str().unwrap_or("")],
    )?;
    Ok(())
}

/// `wasm-reconciler rbac` for the examples, host in namespace `default`.
fn rbac_yaml(root: &Path) -> Result<String> {
    let out = Command::new(BIN)
        .args(["rbac", "--namespace", "default", "-f"])
        .arg(root.join("examples/static-site"))
        .arg("-f")
        .arg(root.join("examples/tombstone"))
        .output()
        .context("running wasm-reconciler rbac")?;
    ensure!(
        out.status.success(),
        "rbac: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

fn publish(kc: &Path, plugin: &Path, name: &str) -> Result<()> {
    let out = Command::new(BIN)
        .args(["publish", "--plugin"])
        .arg(plugin)
        .args([
            "--name",
            name,
            "--namespace",
            "wasm-reconciler",
            "--apply",
            "--kubeconfig",
        ])
        .arg(kc)
        .output()?;
    ensure!(
        out.status.success(),
        "publish: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn jsonpath(kc: &Path, what: &[&str], path: &str) -> Option<String> {
    let mut args = vec!["-n", "default", "get"];
    args.extend_from_slice(what);
    let jp = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &jp]);
    kubectl(kc, &args).ok().map(|s| s.trim().to_string())
}

fn host_requests(url: &str, id_prefix: &str) -> Result<Vec<RequestRecord>> {
    Ok(requests(url)?
        .into_iter()
        .filter(|r| host_identity(r).is_some_and(|id| id.starts_with(id_prefix)))
        .collect())
}

#[test]
fn host_runs_under_the_printed_rbac_without_a_403_and_fails_without_a_rule() -> Result<()> {
    let root = wr_tests::plugins::workspace_root();
    let dir = tempfile::tempdir()?;
    let (_api, kc, url) = apiserver_with_log_args(dir.path(), &["--authorization", "rbac"])?;

    // --- Install as the admin (the kubeconfig's token).
    install_wc_crd(&kc, dir.path())?;
    for f in [
        "examples/static-site/crd.yaml",
        "examples/tombstone/crd.yaml",
    ] {
        apply(&kc, &root.join(f))?;
    }
    kubectl(&kc, &["create", "namespace", "wasm-reconciler"])?;
    publish(
        &kc,
        &wr_tests::plugins::plugin_path("static-site"),
        "static-site-plugin",
    )?;
    publish(
        &kc,
        &wr_tests::plugins::plugin_path("tombstone"),
        "tombstone-plugin",
    )?;
    for f in [
        "examples/static-site/controller.yaml",
        "examples/tombstone/controller.yaml",
    ] {
        apply(&kc, &root.join(f))?;
    }

    // --- The host's identity: the printed RBAC, a ServiceAccount, its token.
    let rbac_file = dir.path().join("rbac.yaml");
    std::fs::write(&rbac_file, rbac_yaml(&root)?)?;
    apply(&kc, &rbac_file)?;
    kubectl(
        &kc,
        &[
            "-n",
            "default",
            "create",
            "serviceaccount",
            "wasm-reconciler",
        ],
    )?;
    // TokenRequest as JSON (kubectl sends it as protobuf, which this
    // branch's codec does not decode), and as the admin: no token on loopback.
    let (code, body) = http(
        &url,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/wasm-reconciler/token",
        Some(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}"#),
    )?;
    ensure!(code == 201, "TokenRequest: {code} {body}");
    let tr: Value = serde_json::from_str(&body)?;
    let token = tr["status"]["token"]
        .as_str()
        .context("no token")?
        .to_string();
    // kube-rs (the host) sends the token over plain HTTP; kubectl would not.
    let host_kc = dir.path().join("host.kubeconfig");
    std::fs::write(
        &host_kc,
        wr_apiserver::kubeconfig::kubeconfig_yaml_with_token(&url, Some(&token)),
    )?;

    // --- A lifecycle under it.
    let (mut host, _) = run(&host_kc, "rbac-enforced", LEASE)?;
    eventually("the host to take the lease", 60, || {
        lease_holder(&kc).filter(|h| h.starts_with("rbac-enforced_"))
    })?;
    apply(&kc, &root.join("examples/static-site/site.yaml"))?;
    apply(&kc, &root.join("examples/tombstone/workspace.yaml"))?;
    eventually("web Ready with a 2-replica Deployment", 120, || {
        (web_ready(&kc).as_deref() == Some("True") && web_replicas(&kc).as_deref() == Some("2"))
            .then_some(())
    })?;
    eventually("workspace team-a Ready", 120, || {
        (jsonpath(
            &kc,
            &["workspace", "team-a"],
            r#"{.status.conditions[?(@.type=="Ready")].status}"#,
        )
        .as_deref()
            == Some("True"))
        .then_some(())
    })?;
    set_replicas(&kc, 3)?;
    eventually("the Deployment to follow the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("3")).then_some(())
    })?;
    let uid = jsonpath(&kc, &["service", "web"], "{.metadata.uid}").context("service web")?;
    kubectl(&kc, &["-n", "default", "delete", "service", "web"])?;
    eventually("service web to be recreated", 60, || {
        jsonpath(&kc, &["service", "web"], "{.metadata.uid}").filter(|u| !u.is_empty() && *u != uid)
    })?;
    kubectl(
        &kc,
        &[
            "-n",
            "default",
            "delete",
            "workspace",
            "team-a",
            "--wait=false",
        ],
    )?;
    eventually("workspace team-a to be gone", 90, || {
        kubectl(
            &kc,
            &[
                "-n",
                "default",
                "get",
                "workspace",
                "team-a",
                "--ignore-not-found",
                "-o",
                "name",
            ],
        )
        .ok()
        .filter(|s| s.trim().is_empty())
    })?;
    host.signal("TERM")?;
    ensure!(host.wait_exit(30)? == Some(0), "SIGTERM must exit 0");

    let reqs = host_requests(&url, "rbac-enforced_")?;
    ensure!(reqs.len() > 20, "only {} host requests", reqs.len());
    let refused: Vec<String> = reqs
        .iter()
        .filter(|r| r.code == 403)
        .map(describe)
        .collect();
    ensure!(
        refused.is_empty(),
        "the printed RBAC refused {} host requests:\n{}",
        refused.len(),
        refused.join("\n")
    );

    // --- One rule taken away: no `create` on Deployments.
    let mut docs: Vec<Value> = Vec::new();
    for d in serde_yaml::Deserializer::from_str(&std::fs::read_to_string(&rbac_file)?) {
        let v: Value = serde::Deserialize::deserialize(d)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    let mut cluster_role = docs
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .context("no ClusterRole printed")?;
    let mut removed = 0;
    for rule in cluster_role["rules"].as_array_mut().context("rules")? {
        let is_deploy = rule["apiGroups"] == serde_json::json!(["apps"])
            && rule["resources"]
                .as_array()
                .is_some_and(|r| r.contains(&"deployments".into()));
        if is_deploy && let Some(verbs) = rule["verbs"].as_array_mut() {
            let before = verbs.len();
            verbs.retain(|v| v != "create");
            removed += before - verbs.len();
        }
    }
    ensure!(
        removed == 1,
        "expected one `create` on deployments to remove, found {removed}"
    );
    let weaker = dir.path().join("weaker.json");
    std::fs::write(&weaker, cluster_role.to_string())?;
    kubectl(&kc, &["replace", "-f", weaker.to_str().unwrap_or("")])?;

    let (mut host, _) = run(&host_kc, "rbac-weaker", LEASE)?;
    eventually("the second host to take the lease", 60, || {
        lease_holder(&kc).filter(|h| h.starts_with("rbac-weaker_"))
    })?;
    let site2 = dir.path().join("site2.yaml");
    std::fs::write(
        &site2,
        std::fs::read_to_string(root.join("examples/static-site/site.yaml"))?
            .replace("name: web,", "name: web2,"),
    )?;
    apply(&kc, &site2)?;
    let message = eventually("web2 to report the refused Deployment", 120, || {
        let reason = jsonpath(
            &kc,
            &["staticsite", "web2"],
            r#"{.status.conditions[?(@.type=="Ready")].reason}"#,
        )?;
        let message = jsonpath(
            &kc,
            &["staticsite", "web2"],
            r#"{.status.conditions[?(@.type=="Ready")].message}"#,
        )?;
        (reason == "ApplyFailed").then_some(message)
    })?;
    ensure!(message.contains("forbidden"), "Ready message: {message}");
    ensure!(
        web_ready(&kc).as_deref() == Some("True"),
        "web itself is unaffected"
    );
    host.signal("TERM")?;
    host.wait_exit(30)?;
    let reqs = host_requests(&url, "rbac-weaker_")?;
    let refused: Vec<&RequestRecord> = reqs.iter().filter(|r| r.code == 403).collect();
    ensure!(!refused.is_empty(), "the removed rule must cost a 403");
    for r in &refused {
        ensure!(
            r.resource == "deployments" && r.name.as_deref() == Some("web2"),
            "only the Deployment web2 may be refused: {}",
            describe(r)
        );
    }
    eprintln!(
        "{} refused requests, all `create` of Deployment web2 (apply)",
        refused.len()
    );
    Ok(())
}
