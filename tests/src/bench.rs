//! Small helpers the bench binaries share: memory figures from `/proc`, the
//! example StaticSite resource they all drive, creating a fleet of them, and
//! the embedded API server as a child process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

/// A `Vm*:` field (e.g. `"VmRSS:"`, `"VmHWM:"`) of `/proc/<pid>/status`
/// (`None`: this process) in KiB; 0 when unreadable.
pub fn status_kib(pid: Option<u32>, field: &str) -> u64 {
    let path = pid.map_or_else(
        || "/proc/self/status".to_string(),
        |p| format!("/proc/{p}/status"),
    );
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident set size of this process, KiB.
pub fn rss_kib() -> u64 {
    status_kib(None, "VmRSS:")
}

/// Peak resident set size of this process, KiB.
pub fn hwm_kib() -> u64 {
    status_kib(None, "VmHWM:")
}

/// The example StaticSite parent resource (`examples/static-site/crd.yaml`).
pub fn static_site_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("examples.wasm-reconciler.dev", "v1alpha1", "StaticSite"),
        "staticsites",
    )
}

/// Creates StaticSites `site-00000` … in `namespace` of `sites`, `concurrency`
/// requests at a time (responses are dropped as they arrive: only errors are
/// kept, so a large fleet costs no memory here).
pub async fn create_static_sites(
    sites: &Api<DynamicObject>,
    namespace: &str,
    n: usize,
    concurrency: usize,
) -> Result<()> {
    let results: Vec<Result<(), kube::Error>> = futures::stream::iter(0..n)
        .map(|i| {
            let sites = sites.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
                    "metadata": {"name": format!("site-{i:05}"), "namespace": namespace},
                    "spec": {"image": "nginx:1.27", "replicas": 2, "port": 8080,
                             "content": {"index.html": format!("<h1>site {i}</h1>")}}
                }))
                .map_err(kube::Error::SerdeError)?;
                sites.create(&PostParams::default(), &obj).await.map(drop)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for r in results {
        r.context("creating a parent")?;
    }
    Ok(())
}

/// The embedded API server in a child process (the bench binary itself, run
/// with `arg`, which serves and prints its URL on the first line); stopped by
/// closing its stdin when dropped. A separate process keeps its CPU apart
/// from the measured host's.
pub struct ServerProc {
    child: Child,
    /// The server's base URL.
    pub url: String,
}

impl ServerProc {
    /// Starts `current_exe arg` and reads its URL.
    pub fn start(arg: &str) -> Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(arg)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the API server process")?;
        let out = child.stdout.take().context("child stdout")?;
        let mut url = String::new();
        BufReader::new(out).read_line(&mut url)?;
        Ok(Self {
            child,
            url: url.trim().to_string(),
        })
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
