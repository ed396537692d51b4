//! Command line and profiles. A profile only fills in defaults: any flag given
//! explicitly wins, so a failing profile run can be replayed and varied.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};

/// Fixed seed of the short profile (CI): the same run every time.
pub const SHORT_SEED: u64 = 7;

/// Which API server the run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterKind {
    /// `wasm-reconciler apiserver` as a process, with API faults.
    Embedded,
    /// A real kube-apiserver (`--kubeconfig`, or one started from `tests/kube`):
    /// host SIGKILLs and leader kills only. API-level faults need the embedded
    /// server's fault admin path, which a real API server does not have.
    Real,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// CI: about 3 minutes wall, fixed seed, every fault kind on.
    Short,
    /// The issue's long run: 10 minutes, 2,000 parents, 10 % faults, a kill every 20 s.
    Long,
    /// Scale out (issue 19): the short run with three `--shard-group` hosts
    /// (kills hit any host) and the "never two owners" check on the request log.
    Sharded,
}

/// Chaos and crash-restart suite: runs the real `wasm-reconciler` binary
/// (API server + hosts) as processes, drives a workload under faults and
/// SIGKILLs, then checks invariants through the API server's store.
#[derive(Debug, Clone, Parser)]
#[command(name = "chaos", version)]
pub struct Args {
    /// Defaults for a known run (explicit flags win).
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// The API server: the embedded one (default) or a real kube-apiserver.
    #[arg(long, value_enum, default_value = "embedded")]
    pub cluster: ClusterKind,
    /// With `--cluster real`: the admin kubeconfig of a running cluster
    /// (default: start one from `tests/kube` and stop it at the end).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The `wasm-reconciler` binary (default: $CARGO_TARGET_DIR or ./target, debug then release).
    #[arg(long)]
    pub bin: Option<PathBuf>,
    /// The adversarial plugin component (default: build it with the test helpers).
    #[arg(long)]
    pub plugin: Option<PathBuf>,
    /// Live parents the workload keeps (it creates them first).
    #[arg(long)]
    pub parents: Option<usize>,
    /// How long the workload and the faults run, e.g. `120s`, `10m`.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Seed of every random choice (workload, kills, fault RNG).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Probability that an API request gets an error-type fault (split over the kinds).
    #[arg(long)]
    pub fault_rate: Option<f64>,
    /// Workload operations per second after the initial creates.
    #[arg(long)]
    pub ops_per_sec: Option<f64>,
    /// Mean seconds between host kills (0: no kills).
    #[arg(long)]
    pub kill_every: Option<f64>,
    /// Hosts running at once (leader election on); kills hit the leader.
    #[arg(long)]
    pub hosts: Option<usize>,
    /// Percent of the healthy plugin's calls that fail transiently.
    #[arg(long)]
    pub fail_percent: Option<u64>,
    /// Parents of the hostile controller (0: no hostile controller).
    #[arg(long)]
    pub hostile_parents: Option<usize>,
    /// Run the hosts as one shard group (`run --shard-group chaos`) instead of
    /// leader election; adds the "never two owners" check.
    #[arg(long)]
    pub shard: bool,
    /// Do not swap the plugin version mid-run.
    #[arg(long)]
    pub no_swap: bool,
    /// Seconds to wait for convergence once faults stop.
    #[arg(long)]
    pub converge_timeout: Option<u64>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Working directory (logs, data, kubeconfig); default: a new temp dir, kept on failure.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Judge a kept request log (`requests.jsonl` of a failed sharded run)
    /// with the "never two owners" check again, and run nothing else.
    #[arg(long, conflicts_with_all = ["profile", "shard", "kubeconfig"])]
    pub judge_log: Option<PathBuf>,
}

/// Every setting resolved.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub profile: Option<String>,
    pub cluster: ClusterKind,
    pub parents: usize,
    pub duration_secs: f64,
    pub seed: u64,
    pub fault_rate: f64,
    pub ops_per_sec: f64,
    pub kill_every_secs: f64,
    pub hosts: usize,
    pub fail_percent: u64,
    pub hostile_parents: usize,
    pub swap: bool,
    pub converge_timeout_secs: u64,
    /// Hosts form a shard group rather than electing one leader.
    pub shard: bool,
}

impl Args {
    pub fn settings(&self) -> Result<Settings> {
        // (parents, duration, seed, rate, ops/s, kill every, hosts, fail %, hostile, converge)
        let d = match self.profile {
            Some(Profile::Short) => (250, 75.0, Some(SHORT_SEED), 0.1, 8.0, 15.0, 2, 10, 12, 90),
            Some(Profile::Long) => (2000, 600.0, None, 0.1, 15.0, 20.0, 2, 10, 40, 600),
            Some(Profile::Sharded) => (250, 75.0, Some(SHORT_SEED), 0.1, 8.0, 15.0, 3, 10, 12, 120),
            None => (500, 120.0, None, 0.1, 10.0, 20.0, 2, 10, 20, 300),
        };
        let seed = self.seed.or(d.2).unwrap_or_else(rand::random);
        let real = self.cluster == ClusterKind::Real;
        if real && self.fault_rate.is_some_and(|r| r > 0.0) {
            bail!(
                "--fault-rate needs the embedded API server (its fault admin path); \
                 with --cluster real the chaos is host SIGKILLs and leader kills only"
            );
        }
        if self.kubeconfig.is_some() && !real {
            bail!("--kubeconfig is for --cluster real");
        }
        let s = Settings {
            profile: self.profile.map(|p| format!("{p:?}").to_lowercase()),
            cluster: self.cluster,
            parents: self.parents.unwrap_or(d.0),
            duration_secs: self.duration.map(|x| x.as_secs_f64()).unwrap_or(d.1),
            seed,
            // A real API server takes no injected faults (see ClusterKind::Real).
            fault_rate: if real {
                0.0
            } else {
                self.fault_rate.unwrap_or(d.3)
            },
            ops_per_sec: self.ops_per_sec.unwrap_or(d.4),
            kill_every_secs: self.kill_every.unwrap_or(d.5),
            hosts: self.hosts.unwrap_or(d.6),
            fail_percent: self.fail_percent.unwrap_or(d.7),
            hostile_parents: self.hostile_parents.unwrap_or(d.8),
            swap: !self.no_swap,
            converge_timeout_secs: self.converge_timeout.unwrap_or(d.9),
            shard: self.shard || self.profile == Some(Profile::Sharded),
        };
        if !(0.0..=1.0).contains(&s.fault_rate) {
            bail!("--fault-rate must be in [0, 1]");
        }
        if s.hosts == 0 || s.parents == 0 || s.fail_percent > 100 {
            bail!("--hosts and --parents must be at least 1, --fail-percent at most 100");
        }
        Ok(s)
    }

    /// The `wasm-reconciler` binary to run.
    pub fn binary(&self) -> Result<PathBuf> {
        if let Some(b) = &self.bin {
            if !b.is_file() {
                bail!(
                    "--bin {}: no such file (build it: cargo build -p wasm-reconciler)",
                    b.display()
                );
            }
            return Ok(b.clone());
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| wr_tests::plugins::workspace_root().join("target"));
        for profile in ["debug", "release"] {
            let p = target.join(profile).join("wasm-reconciler");
            if p.is_file() {
                return Ok(p);
            }
        }
        bail!(
            "no wasm-reconciler binary under {}/{{debug,release}}: build it first \
             (cargo build -p wasm-reconciler) or pass --bin",
            target.display()
        )
    }
}

/// The command line that replays this run: the given arguments with the
/// resolved seed pinned.
pub fn replay_command(seed: u64) -> String {
    let mut out = vec!["cargo run -p chaos --".to_string()];
    let mut skip = false;
    for a in std::env::args().skip(1) {
        if skip {
            skip = false;
            continue;
        }
        if a == "--seed" {
            skip = true;
            continue;
        }
        if a.starts_with("--seed=") {
            continue;
        }
        out.push(shell_quote(&a));
    }
    out.push(format!("--seed {seed}"));
    out.join(" ")
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `90`, `90s`, `2m`, `1h`, `500ms`.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|i| s.split_at(i))
        .unwrap_or((s, "s"));
    let n: f64 = num.parse().with_context(|| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        other => bail!("bad duration unit {other:?} in {s:?}"),
    };
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("120s").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn explicit_flags_win_over_the_profile() {
        let a = Args::parse_from(["chaos", "--profile", "short", "--parents", "9"]);
        let s = a.settings().unwrap();
        assert_eq!((s.parents, s.seed), (9, SHORT_SEED));
        let s = Args::parse_from(["chaos", "--seed", "3"])
            .settings()
            .unwrap();
        assert_eq!((s.parents, s.seed), (500, 3));
    }

    #[test]
    fn the_sharded_profile_runs_three_sharded_hosts() {
        let s = Args::parse_from(["chaos", "--profile", "sharded"])
            .settings()
            .unwrap();
        assert!(s.shard && s.hosts == 3 && s.kill_every_secs > 0.0 && s.fault_rate > 0.0);
        assert!(!Args::parse_from(["chaos"]).settings().unwrap().shard);
    }

    #[test]
    fn a_real_cluster_takes_no_api_faults() {
        let s = Args::parse_from(["chaos", "--profile", "short", "--cluster", "real"])
            .settings()
            .unwrap();
        assert_eq!((s.cluster, s.fault_rate), (ClusterKind::Real, 0.0));
        assert!(
            Args::parse_from(["chaos", "--cluster", "real", "--fault-rate", "0.1"])
                .settings()
                .is_err()
        );
        assert!(
            Args::parse_from(["chaos", "--kubeconfig", "x"])
                .settings()
                .is_err()
        );
    }
}
