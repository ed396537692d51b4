//! `wasm-reconciler apiserver` authentication (issue 20, item 18): beyond
//! loopback it refuses to start where nobody could get the token, requires the
//! token it writes into the kubeconfig, and never logs it; on loopback the
//! token-less user is the admin (`kubectl auth whoami`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::run_common::{BIN, Proc, get};
use anyhow::{Context, Result, ensure};

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
    // kubectl sends no bearer token over plain HTTP; a raw request does.
    let (code, body) = get_with_token(&local, "/api/v1/namespaces", &token)?;
    ensure!(code == 200, "the admin token must work, got {code}: {body}");
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
    // Loopback keeps today's convenience: no token needed.
    ensure!(get(&url, "/api/v1/namespaces")?.0 == 200);
    // ... as the admin (what kubectl, which sends no token over HTTP, is).
    let (code, body) = post_json(
        &url,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
    )?;
    ensure!(
        code == 201 && body.contains("system:masters"),
        "whoami: {code} {body}"
    );

    let (_open, url, _) = start(&["--bind", "0.0.0.0", "--insecure"])?;
    let port = url.rsplit(':').next().context("port")?;
    let (code, _) = get(&format!("http://127.0.0.1:{port}"), "/api/v1/namespaces")?;
    ensure!(
        code == 200,
        "--insecure serves anonymous requests, got {code}"
    );
    Ok(())
}

/// One HTTP/1.1 request with optional bearer token and JSON body: (code, body).
fn request(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let hostport = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let code = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status line")?;
    Ok((
        code,
        resp.split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or("")
            .to_string(),
    ))
}

fn get_with_token(base: &str, path: &str, token: &str) -> Result<(u16, String)> {
    request(base, "GET", path, Some(token), "")
}

fn post_json(base: &str, path: &str, body: &str) -> Result<(u16, String)> {
    request(base, "POST", path, None, body)
}
