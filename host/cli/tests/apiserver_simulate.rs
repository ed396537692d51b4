//! `wasm-reconciler apiserver --simulate` (issue 16, item 6): the standalone
//! server with the workload simulator beside it, seen through `kubectl` —
//! a simulated Node appears and a Deployment created with kubectl becomes
//! available with Running pods.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wasm-reconciler");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kubectl_json(kc: &Path, args: &[&str]) -> Result<Value> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .args(["-o", "json"])
        .stdin(Stdio::null())
        .output()
        .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[test]
fn apiserver_with_simulate_runs_a_kubectl_deployment() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kc = dir.path().join("kubeconfig");
    let mut child = Command::new(BIN)
        .args([
            "apiserver",
            "--port",
            "0",
            "--simulate",
            "--simulate-delay",
            "200ms",
        ])
        .args(["--simulate-nodes", "2", "--kubeconfig-out"])
        .arg(&kc)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the apiserver")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let server = Server(child);
    let mut url = String::new();
    BufReader::new(stdout).read_line(&mut url)?;
    ensure!(url.starts_with("http://"), "no URL printed: {url:?}");

    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kc)
        .args([
            "create",
            "deployment",
            "web",
            "--image",
            "nginx:1.27",
            "--replicas",
            "3",
        ])
        .output()?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let d = loop {
        let d = kubectl_json(&kc, &["get", "deployment", "web"])?;
        if d["status"]["availableReplicas"] == 3 && d["status"]["updatedReplicas"] == 3 {
            break d;
        }
        if Instant::now() > deadline {
            bail!("Deployment web not available in time: {d:#}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let available = d["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .context("Available condition")?;
    assert_eq!(available["status"], "True");
    let nodes = kubectl_json(&kc, &["get", "nodes"])?;
    let names: Vec<&str> = nodes["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["sim-node-1", "sim-node-2"]);
    let pods = kubectl_json(&kc, &["get", "pods", "-l", "app=web"])?;
    let pods = pods["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(pods.len(), 3);
    assert!(
        pods.iter().all(|p| p["status"]["phase"] == "Running"),
        "{pods:#?}"
    );
    drop(server);
    Ok(())
}
