//! The real processes: one `wasm-reconciler apiserver` and the
//! `wasm-reconciler run` hosts. Hosts are SIGKILLed and restarted by the
//! supervisor; each start is a new incarnation with its own identity.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// Namespace of the leader Lease and the plugin ConfigMap.
pub const SYSTEM_NS: &str = "chaos-system";
/// Name of the leader Lease (the `run` default).
pub const LEASE: &str = "wasm-reconciler";

/// The API server process.
pub struct ApiServer {
    pub child: Child,
    pub url: String,
    pub kubeconfig: PathBuf,
}

fn log_file(dir: &Path, name: &str) -> Result<std::fs::File> {
    let p = dir.join(format!("{name}.log"));
    std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))
}

/// Reads stdout until a line starting with `prefix` (within 60 s), then keeps
/// draining it in the background so the process never blocks on a full pipe.
async fn first_line(child: &mut Child, prefix: &str, what: &str) -> Result<String> {
    let out = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(out).lines();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if line.starts_with(prefix) {
                return Ok::<_, std::io::Error>(Some(line));
            }
        }
        Ok(None)
    })
    .await
    .with_context(|| format!("{what}: no {prefix:?} line within 60 s"))??;
    let Some(line) = found else {
        bail!("{what} exited before printing {prefix:?} (see its log)");
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(line)
}

/// Starts the API server on a free port with fault admin on and data in `dir/apiserver-data`.
pub async fn start_apiserver(bin: &Path, dir: &Path, seed: u64) -> Result<ApiServer> {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(bin)
        .args(["--log-level", "warn", "apiserver", "--port", "0"])
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--data-dir")
        .arg(dir.join("apiserver-data"))
        .args(["--enable-fault-admin", "--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(log_file(dir, "apiserver")?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} apiserver", bin.display()))?;
    let url = first_line(&mut child, "http", "apiserver").await?;
    Ok(ApiServer {
        child,
        url: url.trim().to_string(),
        kubeconfig,
    })
}

/// One `wasm-reconciler run` incarnation.
pub struct Host {
    /// Index in the supervisor's incarnation history.
    pub index: usize,
    /// `$POD_NAME`: the prefix of its Lease identity.
    pub name: String,
    pub child: Child,
    pub pid: u32,
    pub metrics_url: String,
}

/// Lease timings: short, so that a SIGKILLed leader is replaced within
/// seconds, yet ~5 renewal attempts (GET + PUT each, both under faults) fit in
/// the renew deadline. With 4 s (~3 attempts) a leader lost its lease about
/// every 2 minutes at 10 % faults and exited 1, as designed.
const LEASE_FLAGS: &[&str] = &[
    "--leader-elect=true",
    "--lease-duration-seconds=8",
    "--renew-deadline-seconds=6",
    "--retry-period-seconds=1",
    "--shutdown-timeout-seconds=5",
];

/// Name of the shard group of `--shard` runs.
pub const SHARD_GROUP: &str = "chaos";

/// Starts a host; logs go to `dir/<name>.log` (level from `$CHAOS_HOST_LOG`, default warn).
pub async fn start_host(
    bin: &Path,
    kubeconfig: &Path,
    dir: &Path,
    slot: usize,
    index: usize,
    shard: bool,
) -> Result<Host> {
    let name = format!("host{slot}-i{index}");
    let level = std::env::var("CHAOS_HOST_LOG").unwrap_or_else(|_| "warn".into());
    let mut child = Command::new(bin)
        .args(["--log-level", &level, "run", "--kubeconfig"])
        .arg(kubeconfig)
        .args([
            "--metrics-bind",
            "127.0.0.1:0",
            "--lease-namespace",
            SYSTEM_NS,
        ])
        .arg("--cache-dir")
        .arg(dir.join(format!("cache-{slot}")))
        .args(LEASE_FLAGS)
        .args(if shard {
            &["--shard-group", SHARD_GROUP][..]
        } else {
            &[][..]
        })
        .env("POD_NAME", &name)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(log_file(dir, &name)?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let pid = child.id().context("host has no pid")?;
    let line = first_line(&mut child, "metrics: ", &name).await?;
    Ok(Host {
        index,
        name,
        child,
        pid,
        metrics_url: line.trim_start_matches("metrics: ").trim().to_string(),
    })
}

/// Resident set size of `pid` in KiB (Linux `/proc`), None when gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// GET `base` + `path` over plain HTTP/1.1 (loopback probes only).
pub async fn http_get(base: &str, path: &str) -> Result<String> {
    let hostport = base.trim_start_matches("http://").to_string();
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(&hostport).await?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .context("metrics scrape timed out")??;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP header end")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or(""));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
}

/// Decodes a chunked body (sizes in hex on their own lines).
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        let (Some(chunk), Some(next)) = (after.get(..n), after.get(n..)) else {
            break;
        };
        if n == 0 {
            break;
        }
        out.push_str(chunk);
        rest = next.trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn dechunks() {
        assert_eq!(
            super::dechunk("5\r\nhello\r\n3\r\n ab\r\n0\r\n\r\n"),
            "hello ab"
        );
    }
}
