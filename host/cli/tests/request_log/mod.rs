//! The API server's request log as the referee of what a `run` process did:
//! a standalone `wasm-reconciler apiserver --enable-fault-admin`, its log read
//! over `/_wr/admin/requests`, and each host request attributed to its
//! process by the `User-Agent` that `run` sends,
//! `wasm-reconciler/VERSION (run; IDENTITY)` (IDENTITY = the Lease identity,
//! `$POD_NAME_<random>`). `kubectl` and `publish` requests carry other agents.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use wr_apiserver::RequestRecord;

use crate::run_common::{BIN, Proc, set_test_ns};

/// Where a test reads the request log: the embedded server's admin path, or
/// the real API server's audit log.
pub enum LogSource {
    /// Base URL of a `wasm-reconciler apiserver --enable-fault-admin`.
    Embedded(String),
    /// This test's session on the shared real cluster (`WR_TEST_CLUSTER=real`).
    Real(wr_tests::target::RealSession),
}

/// An API server for a `run` test and its request log.
pub struct Cluster {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The request log.
    pub log: LogSource,
    _proc: Option<Proc>,
}

/// The embedded API server (with its admin path), or, with
/// `WR_TEST_CLUSTER=real`, a session on the shared real cluster whose namespace
/// becomes the test's namespace ([`crate::run_common::test_ns`]).
pub fn cluster_with_log(dir: &Path) -> Result<Cluster> {
    if wr_tests::target::real_selected() {
        let session = wr_tests::target::RealSession::begin_blocking()?;
        session.create_namespace_blocking("default")?;
        set_test_ns(&session.ns("default"));
        return Ok(Cluster {
            kubeconfig: session.shared.kubeconfig.clone(),
            log: LogSource::Real(session),
            _proc: None,
        });
    }
    // A thread that ran a real-cluster test before must not keep its namespace.
    set_test_ns("");
    let (proc, kubeconfig, url) = apiserver_with_log(dir)?;
    Ok(Cluster {
        kubeconfig,
        log: LogSource::Embedded(url),
        _proc: Some(proc),
    })
}

/// The request log so far, in completion order.
pub fn requests_of(log: &LogSource) -> Result<Vec<RequestRecord>> {
    match log {
        LogSource::Embedded(base) => requests(base),
        LogSource::Real(s) => s.requests(),
    }
}

/// `wasm-reconciler apiserver` on a free port with the admin path on; returns
/// it, its kubeconfig and its base URL.
pub fn apiserver_with_log(dir: &Path) -> Result<(Proc, PathBuf, String)> {
    apiserver_with_log_args(dir, &[])
}

/// [`apiserver_with_log`] with `extra` flags (`--authorization rbac`).
pub fn apiserver_with_log_args(dir: &Path, extra: &[&str]) -> Result<(Proc, PathBuf, String)> {
    let kc = dir.join("kubeconfig");
    let mut child = Command::new(BIN)
        .args([
            "apiserver",
            "--port",
            "0",
            "--enable-fault-admin",
            "--kubeconfig-out",
        ])
        .arg(&kc)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the apiserver")?;
    let out = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if line.starts_with("http") {
                let _ = tx.send(line);
            }
        }
    });
    let proc = Proc {
        child,
        name: "apiserver".into(),
    };
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .context("waiting for the apiserver to print its URL")?;
    Ok((proc, kc, url.trim().to_string()))
}

/// One HTTP/1.1 request to `base` + `path`: (status code, body).
pub fn http(base: &str, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String)> {
    let hostport = base.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(hostport).with_context(|| format!("connecting {hostport}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let resp = String::from_utf8_lossy(&raw);
    let (head, body) = resp.split_once("\r\n\r\n").context("no header end")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status line")?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    Ok((
        code,
        if chunked {
            dechunk(body)?
        } else {
            body.to_string()
        },
    ))
}

/// Body of a `Transfer-Encoding: chunked` response.
fn dechunk(mut rest: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").context("bad chunk header")?;
        let n = usize::from_str_radix(size.trim(), 16).context("bad chunk size")?;
        if n == 0 {
            return Ok(out);
        }
        out.push_str(after.get(..n).context("short chunk")?);
        rest = after.get(n + 2..).context("short chunk trailer")?;
    }
}

/// The whole request log so far, in completion order.
pub fn requests(base: &str) -> Result<Vec<RequestRecord>> {
    let (code, body) = http(base, "GET", "/_wr/admin/requests", None)?;
    if code != 200 {
        bail!("GET /_wr/admin/requests answered {code}: {body}");
    }
    serde_json::from_str(&body).context("parsing the request log")
}

/// Replaces the fault configuration.
pub fn set_faults(base: &str, spec: &Value) -> Result<()> {
    let (code, body) = http(base, "PUT", "/_wr/admin/faults", Some(&spec.to_string()))?;
    if code != 200 {
        bail!("PUT /_wr/admin/faults answered {code}: {body}");
    }
    Ok(())
}

/// Faults injected so far.
pub fn injected(base: &str) -> Result<Vec<Value>> {
    let (code, body) = http(base, "GET", "/_wr/admin/faults", None)?;
    if code != 200 {
        bail!("GET /_wr/admin/faults answered {code}: {body}");
    }
    let v: Value = serde_json::from_str(&body)?;
    Ok(v["injected"].as_array().cloned().unwrap_or_default())
}

/// The Lease identity of the `run` process that made `r`, from its agent.
pub fn host_identity(r: &RequestRecord) -> Option<&str> {
    r.user_agent
        .as_deref()?
        .strip_prefix("wasm-reconciler/")?
        .split_once(" (run; ")?
        .1
        .strip_suffix(')')
}

/// `group/version` of a record (`v1` for the core group).
pub fn group_version(r: &RequestRecord) -> String {
    if r.group.is_empty() {
        r.version.clone()
    } else {
        format!("{}/{}", r.group, r.version)
    }
}

/// `resource` or `resource/subresource`, as RBAC names it.
pub fn rbac_resource(r: &RequestRecord) -> String {
    match &r.subresource {
        Some(s) => format!("{}/{s}", r.resource),
        None => r.resource.clone(),
    }
}

/// A compact line for failure messages.
pub fn describe(r: &RequestRecord) -> String {
    format!(
        "{} {} {} ns={} name={} -> {} ({})",
        r.verb,
        group_version(r),
        rbac_resource(r),
        r.namespace.as_deref().unwrap_or("-"),
        r.name.as_deref().unwrap_or("-"),
        r.code,
        r.user_agent.as_deref().unwrap_or("no agent"),
    )
}
