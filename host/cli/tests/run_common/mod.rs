//! Helpers of the `run` acceptance tests: real `wasm-reconciler` processes
//! (a standalone `apiserver` and `run`s), `kubectl` against them, and a
//! minimal HTTP GET for the probe endpoints (a client crate for three GETs to
//! loopback is not worth the dependency).

#![allow(dead_code)]

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

pub const BIN: &str = env!("CARGO_BIN_EXE_wasm-reconciler");

/// The example parent's resource, fully qualified: on a shared real cluster
/// other tests install StaticSite kinds under other groups.
pub const SITE_RESOURCE: &str = "staticsites.examples.wasm-reconciler.dev";

thread_local! {
    /// The namespace of the example and of the Lease: `default` on the
    /// embedded server, a namespace of the test's own on the shared real
    /// cluster. Per thread: the tests of all files share one binary and run
    /// in parallel, each on its own thread (libtest's), and these tests call
    /// it from that thread.
    static TEST_NS: RefCell<String> = const { RefCell::new(String::new()) };
}

/// See [`TEST_NS`].
pub fn test_ns() -> String {
    let ns = TEST_NS.with_borrow(Clone::clone);
    if ns.is_empty() { "default".into() } else { ns }
}

/// Sets [`TEST_NS`] for this test (the cluster fixture of `request_log`
/// does; an empty name means `default`).
pub fn set_test_ns(ns: &str) {
    TEST_NS.with_borrow_mut(|n| *n = ns.to_string());
}

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    pub fn signal(&self, sig: &str) -> Result<()> {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()?;
        if !st.success() {
            bail!("kill -{sig} {} failed", self.name);
        }
        Ok(())
    }

    /// Waits for the exit code (bounded).
    pub fn wait_exit(&mut self, secs: u64) -> Result<Option<i32>> {
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st.code());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("{} did not exit within {secs}s", self.name)
    }
}

/// Reads the first stdout line matching `prefix` within `secs`.
fn first_line(child: &mut Child, prefix: &str, secs: u64) -> Result<String> {
    let out = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    let prefix = prefix.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if line.starts_with(&prefix) {
                let _ = tx.send(line);
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .context("waiting for the process to print its address")
}

/// `wasm-reconciler apiserver` on a free port; returns it and its kubeconfig.
pub fn apiserver(dir: &Path) -> Result<(Proc, PathBuf)> {
    let kc = dir.join("kubeconfig");
    let mut child = Command::new(BIN)
        .args(["apiserver", "--port", "0", "--kubeconfig-out"])
        .arg(&kc)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the apiserver")?;
    first_line(&mut child, "http", 60)?;
    Ok((
        Proc {
            child,
            name: "apiserver".into(),
        },
        kc,
    ))
}

/// `wasm-reconciler run` with `extra` flags; returns it and its metrics URL.
pub fn run(kubeconfig: &Path, name: &str, extra: &[&str]) -> Result<(Proc, String)> {
    let mut child = Command::new(BIN)
        .args(["--log-level", "info", "run", "--kubeconfig"])
        .arg(kubeconfig)
        .args([
            "--metrics-bind",
            "127.0.0.1:0",
            "--lease-namespace",
            &test_ns(),
        ])
        .args(extra)
        .env("POD_NAME", name)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting run {name}"))?;
    let line = first_line(&mut child, "metrics: ", 60)?;
    let url = line.trim_start_matches("metrics: ").trim().to_string();
    Ok((
        Proc {
            child,
            name: name.into(),
        },
        url,
    ))
}

/// `kubectl --kubeconfig kc ARGS`; stdout on success.
pub fn kubectl(kc: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .output()
        .context("running kubectl")?;
    if !out.status.success() {
        bail!(
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Installs the CRDs, the static-site WasmController (plugin from the built
/// component's path) and the example parent.
pub fn install_example(kc: &Path, dir: &Path, with_wc_crd: bool) -> Result<()> {
    let root = wr_tests::plugins::workspace_root();
    if with_wc_crd {
        install_wc_crd(kc, dir)?;
    }
    kubectl(
        kc,
        &[
            "apply",
            "--server-side",
            "-f",
            root.join("examples/static-site/crd.yaml")
                .to_str()
                .unwrap_or(""),
        ],
    )?;
    let plugin = wr_tests::plugins::plugin_path("static-site");
    let wc = std::fs::read_to_string(root.join("examples/static-site/controller.yaml"))?.replace(
        "configMap: {name: static-site-plugin, namespace: wasm-reconciler, key: plugin.wasm}",
        &format!("path: {}", plugin.display()),
    );
    if !wc.contains("path: ") {
        bail!(
            "examples/static-site/controller.yaml no longer names the plugin ConfigMap as expected"
        );
    }
    let wc_file = dir.join("controller.yaml");
    std::fs::write(&wc_file, wc)?;
    kubectl(
        kc,
        &[
            "apply",
            "--server-side",
            "-f",
            wc_file.to_str().unwrap_or(""),
        ],
    )?;
    let site = std::fs::read_to_string(root.join("examples/static-site/site.yaml"))?;
    let site_file = dir.join("site.yaml");
    std::fs::write(
        &site_file,
        site.replace("namespace: default", &format!("namespace: {}", test_ns())),
    )?;
    kubectl(
        kc,
        &[
            "apply",
            "--server-side",
            "-f",
            site_file.to_str().unwrap_or(""),
        ],
    )?;
    Ok(())
}

/// The WasmController CRD from `wasm-reconciler crds`.
pub fn install_wc_crd(kc: &Path, dir: &Path) -> Result<()> {
    let out = Command::new(BIN).arg("crds").output()?;
    if !out.status.success() {
        bail!("wasm-reconciler crds failed");
    }
    let f = dir.join("crds.yaml");
    std::fs::write(&f, out.stdout)?;
    kubectl(
        kc,
        &["apply", "--server-side", "-f", f.to_str().unwrap_or("")],
    )?;
    Ok(())
}

/// Replicas of the `web` Deployment (the example parent's child), if it exists.
pub fn web_replicas(kc: &Path) -> Option<String> {
    kubectl(
        kc,
        &[
            "-n",
            &test_ns(),
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
    )
    .ok()
    .map(|s| s.trim().to_string())
}

/// Ready condition status of the example parent.
pub fn web_ready(kc: &Path) -> Option<String> {
    kubectl(
        kc,
        &[
            "-n",
            &test_ns(),
            "get",
            SITE_RESOURCE,
            "web",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ],
    )
    .ok()
    .map(|s| s.trim().to_string())
}

/// Sets the example parent's replicas.
pub fn set_replicas(kc: &Path, n: u32) -> Result<()> {
    kubectl(
        kc,
        &[
            "-n",
            &test_ns(),
            "patch",
            SITE_RESOURCE,
            "web",
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"replicas":{n}}}}}"#),
        ],
    )?;
    Ok(())
}

/// Holder of the leader Lease.
pub fn lease_holder(kc: &Path) -> Option<String> {
    kubectl(
        kc,
        &[
            "-n",
            &test_ns(),
            "get",
            "lease",
            "wasm-reconciler",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    )
    .ok()
    .map(|s| s.trim().to_string())
}

/// GET `url` + `path`: (status code, body).
pub fn get(base: &str, path: &str) -> Result<(u16, String)> {
    let hostport = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let code = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status line")?;
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok((code, body.to_string()))
}

/// Value of the sample `series` (exact name and labels) in `/metrics`.
pub fn sample(base: &str, series: &str) -> Option<f64> {
    let (_, body) = get(base, "/metrics").ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Polls `f` every 200 ms until it returns `Some`, for at most `secs`.
pub fn eventually<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> Result<T> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() >= until {
            bail!("timed out after {secs}s waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
