//! `wasm-reconciler apiserver` authentication (issue 20, item 18): beyond
//! loopback it refuses to start where nobody could get the token, requires the
//! token it writes into the kubeconfig, and never logs it; on loopback the
//! kubeconfig's user is the admin (`kubectl auth whoami`).

mod run_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use run_common::{BIN, Proc, get, kubectl};

/// Starts `apiserver ARGS`; returns it, its printed URL and a channel of its stderr lines.
fn start(args: &[&str]) -> Result<(Proc, String, mpsc::Receiver<String>)> {
    let mut child = Command::new(BIN)
        .args(["--log-level", "debug", "apiserver", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the apiserver")?;
    let (err_tx, err_rx) = mpsc::channel();
    let stderr = child.stderr.take().context("no stderr")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            let _ = err_tx.send(line);
        }
    });
    let stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            let _ = tx.send(line);
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .context("waiting for the URL")?;
    Ok((
        Proc {
            child,
            name: "apiserver".into(),
        },
        url,
        err_rx,
    ))
}

fn token_of(kc: &std::path::Path) -> Result<String> {
    let v: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(kc)?)?;
    v["users"][0]["user"]["token"]
        .as_str()
        .map(str::to_string)
        .context("no token in the kubeconfig")
}

#[test]
fn bind_beyond_loopback_without_a_kubeconfig_is_refused() -> Result<()> {
    let out = Command::new(BIN)
        .args(["apiserver", "--port", "0", "--bind", "0.0.0.0"])
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "must refuse to start");
    ensure!(
        stderr.contains("--kubeconfig-out") && stderr.contains("--insecure"),
        "the error must say how to go on: {stderr}"
    );
    Ok(())
}

#[test]
fn bind_beyond_loopback_requires_the_kubeconfig_token_and_never_logs_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("kc");
    let kc_arg = kc.to_str().context("path")?;
    let (mut proc, url, stderr) = start(&["--bind", "0.0.0.0", "--kubeconfig-out", kc_arg])?;
    let port = url.rsplit(':').next().context("port")?;
    let local = format!("http://127.0.0.1:{port}");
    let (code, body) = get(&local, "/api/v1/namespaces")?;
    ensure!(
        code == 401,
        "a request without a token must get 401, got {code}: {body}"
    );
    let token = token_of(&kc)?;
    ensure!(token.len() >= 32, "token too short");
    let who = kubectl(
        &kc,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    )?;
    ensure!(who.trim() == "admin", "whoami: {who}");
    kubectl(&kc, &["create", "configmap", "c", "--from-literal=a=b"])?;
    proc.signal("TERM")?;
    proc.wait_exit(30)?;
    let log: Vec<String> = stderr.try_iter().collect();
    ensure!(!log.is_empty(), "expected debug logs");
    ensure!(
        !log.iter().any(|l| l.contains(&token)),
        "the token must never be logged"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kc)?.permissions().mode() & 0o777;
        ensure!(mode == 0o600, "kubeconfig mode {mode:o}");
    }
    Ok(())
}

#[test]
fn loopback_kubeconfig_names_the_admin_and_insecure_serves_anonymous() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("kc");
    let (_proc, url, _) = start(&["--kubeconfig-out", kc.to_str().context("path")?])?;
    token_of(&kc)?;
    let groups = kubectl(
        &kc,
        &["auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}"],
    )?;
    ensure!(groups.contains("system:masters"), "groups: {groups}");
    // Loopback keeps today's convenience: no token needed.
    ensure!(get(&url, "/api/v1/namespaces")?.0 == 200);
    ensure!(kubectl(&kc, &["auth", "can-i", "delete", "pods"])?.trim() == "yes");

    let (_open, url, _) = start(&["--bind", "0.0.0.0", "--insecure"])?;
    let port = url.rsplit(':').next().context("port")?;
    let (code, _) = get(&format!("http://127.0.0.1:{port}"), "/api/v1/namespaces")?;
    ensure!(
        code == 200,
        "--insecure serves anonymous requests, got {code}"
    );
    Ok(())
}
