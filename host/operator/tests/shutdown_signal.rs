//! The signal handlers, with real signals sent to this test process (its own
//! binary, so no other test shares the process-wide handlers).

#![cfg(unix)]

use std::time::Duration;

use wr_operator::ShutdownSignal;

fn send(signal: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(std::process::id().to_string())
        .status()?;
    anyhow::ensure!(status.success(), "kill -{signal} failed");
    Ok(())
}

#[tokio::test]
async fn first_signal_is_graceful_second_is_immediate() -> anyhow::Result<()> {
    let s = ShutdownSignal::install()?;
    assert!(!s.graceful.is_cancelled());
    send("TERM")?;
    tokio::time::timeout(Duration::from_secs(30), s.graceful.cancelled()).await?;
    assert!(
        !s.immediate.is_cancelled(),
        "one signal must not force an immediate stop"
    );
    send("INT")?;
    tokio::time::timeout(Duration::from_secs(30), s.immediate.cancelled()).await?;
    Ok(())
}
