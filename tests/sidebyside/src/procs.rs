//! Child processes of the bench (this binary re-executed with a subcommand)
//! and what `/proc` says about them: CPU seconds and peak RSS per process, so
//! each variant's cost is its own.
//!
//! Protocol: a child prints one line when ready (its URL, or `ready`), then
//! answers one JSON line per command line read from stdin; closing stdin
//! stops it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};
use wr_tests::bench::status_kib;

/// A running child process.
pub struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The first line it printed.
    pub hello: String,
}

impl Proc {
    /// Starts `current_exe args...` and waits for its first line.
    pub fn spawn(args: &[&str]) -> Result<Self> {
        Self::spawn_wrapped(&[], &[], args)
    }

    /// Like [`Proc::spawn`], run under `wrapper` (a command and its
    /// arguments, e.g. `valgrind --tool=callgrind`) when it is not empty,
    /// with `envs` added to its environment.
    pub fn spawn_wrapped(wrapper: &[String], envs: &[(&str, &str)], args: &[&str]) -> Result<Self> {
        // `SIDEBYSIDE_CHILD_EXE`: run the children from another build of
        // this binary (a profile of the host before and after a change,
        // driven by the same bench).
        let exe = match std::env::var_os("SIDEBYSIDE_CHILD_EXE") {
            Some(exe) => std::path::PathBuf::from(exe),
            None => std::env::current_exe()?,
        };
        let mut cmd = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(&exe);
                cmd
            }
            None => Command::new(&exe),
        };
        let mut child = cmd
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting child {args:?}"))?;
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().context("child stdout")?);
        let mut hello = String::new();
        stdout.read_line(&mut hello)?;
        if hello.is_empty() {
            let status = child.wait()?;
            bail!("child {args:?} exited before it was ready: {status}");
        }
        Ok(Self {
            child,
            stdin,
            stdout,
            hello: hello.trim().to_string(),
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line and reads one reply line.
    pub fn ask(&mut self, command: &str) -> Result<String> {
        let stdin = self.stdin.as_mut().context("child stdin closed")?;
        writeln!(stdin, "{command}")?;
        stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        if line.is_empty() {
            bail!("child exited while answering {command:?}");
        }
        Ok(line)
    }

    /// CPU seconds (user + system) used so far.
    pub fn cpu_secs(&self) -> f64 {
        cpu_secs(self.pid())
    }

    /// Peak RSS (VmHWM) in KiB since start or the last [`Proc::reset_peak`].
    pub fn peak_rss_kib(&self) -> u64 {
        status_kib(Some(self.pid()), "VmHWM:")
    }

    /// Resets VmHWM to the current RSS (`echo 5 > /proc/pid/clear_refs`), so
    /// the next peak is per workload. Returns false where the kernel refuses.
    pub fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").is_ok()
    }

    /// Closes stdin and waits for the child to exit.
    pub fn stop(mut self) -> Result<()> {
        drop(self.stdin.take());
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Clock ticks per second for `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux).
fn clk_tck() -> f64 {
    static TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TCK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// utime + stime of a `/proc/<pid>/stat` line, in ticks.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces: fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime field 15.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// CPU seconds of a process.
pub fn cpu_secs(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat_ticks(&s))
        .map_or(0.0, |t| t as f64 / clk_tck())
}

/// Child side: reads command lines from stdin on a blocking thread and hands
/// them to the async side; the channel closes when stdin does.
pub fn stdin_commands() -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line.trim().to_string()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Child side: prints one line to stdout and flushes it.
pub fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_skip_names_with_spaces() {
        let line = "4242 (tokio worker (x)) S 1 2 3 4 5 6 7 8 9 10 123 45 0 0 20 0 8 0 99 1000 50";
        assert_eq!(parse_stat_ticks(line), Some(168));
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn own_process_is_readable() {
        let pid = std::process::id();
        assert!(status_kib(Some(pid), "VmRSS:") > 0);
        assert!(cpu_secs(pid) >= 0.0);
    }
}
