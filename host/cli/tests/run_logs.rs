//! `run` at the default log level (no `--log-level`, no `RUST_LOG`): quiet
//! about every reconcile, but it says what it does — leadership, one line per
//! controller started, the shutdown — so an operator reading the pod log sees
//! that all is well (issue 20, item 17).

use std::process::{Command, Stdio};

use crate::run_common::*;
use anyhow::{Context, Result, ensure};

#[test]
fn run_logs_leadership_and_each_controller_started_at_the_default_level() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (_api, kc) = apiserver(dir.path())?;
    install_example(&kc, dir.path(), true)?;
    let log = dir.path().join("run.log");
    let child = Command::new(BIN)
        .args(["run", "--kubeconfig"])
        .arg(&kc)
        .args([
            "--metrics-bind",
            "127.0.0.1:0",
            "--lease-namespace",
            "default",
        ])
        .env_remove("RUST_LOG")
        .env("POD_NAME", "run-logs")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting run")?;
    let mut run = Proc {
        child,
        name: "run-logs".into(),
    };
    eventually("the example parent Ready", 120, || {
        (web_ready(&kc).as_deref() == Some("True")).then_some(())
    })?;
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let text = eventually("the start-up lines", 30, || {
        let t = read();
        (t.contains("became leader") && t.contains("controller started")).then_some(t)
    })?;
    let started: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("controller started"))
        .collect();
    ensure!(
        started.len() == 1 && started[0].contains("static-site"),
        "one line per controller started, naming it:\n{text}"
    );
    // Nothing per reconcile at this level.
    ensure!(!text.contains("creating child"), "{text}");

    run.signal("TERM")?;
    ensure!(run.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
    let text = read();
    ensure!(text.contains("shutting down"), "{text}");
    ensure!(text.contains("released the lease"), "{text}");
    Ok(())
}
