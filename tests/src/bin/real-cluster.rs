//! `real-cluster up --dir D` starts a real control plane (etcd, kube-apiserver,
//! kube-controller-manager built from `tests/kube/`) in the background and
//! prints the environment that points the test suites at it;
//! `real-cluster down --dir D` stops it and checks that no process is left;
//! `real-cluster env --dir D` prints that environment again.
//!
//! ```sh
//! eval "$(cargo run -p wr-tests --bin real-cluster -- up --dir /tmp/wr-real)"
//! cargo test -p wr-tests --test suite -- engine_scenarios::
//! cargo run -p wr-tests --bin real-cluster -- down --dir /tmp/wr-real
//! ```

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use wr_tests::real_cluster::{self, ClusterFiles, RealCluster, StartOptions};

const USAGE: &str = "usage: real-cluster (up|down|env) --dir DIR";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = args.first().context(USAGE)?.as_str();
    let dir = match args.get(1..3) {
        Some([flag, d]) if flag == "--dir" => PathBuf::from(d),
        _ => bail!(USAGE),
    };
    match cmd {
        "up" => {
            if dir.join("pgid").exists() {
                bail!(
                    "{} already holds a control plane; run `real-cluster down --dir {}` first",
                    dir.display(),
                    dir.display()
                );
            }
            let mut c = RealCluster::start(StartOptions {
                dir: Some(dir),
                detach: true,
            })?;
            c.detach();
            eprintln!(
                "real control plane ready in {:.1} s at {} (process group {}; logs in {})",
                c.start_secs,
                c.files.url,
                c.pgid,
                c.files.dir.display()
            );
            print_env(&c.files);
        }
        "env" => print_env(&real_cluster::files_in(&dir)?),
        "down" => {
            real_cluster::stop_dir(&dir)?;
            std::fs::remove_file(dir.join("pgid"))?;
            eprintln!(
                "real control plane in {} stopped; no process left",
                dir.display()
            );
        }
        _ => bail!(USAGE),
    }
    Ok(())
}

/// Shell lines that select the real cluster for the test suites.
fn print_env(f: &ClusterFiles) {
    println!("export WR_TEST_CLUSTER=real");
    println!("export WR_REAL_KUBECONFIG={}", f.kubeconfig.display());
    println!("export WR_REAL_AUDIT_LOG={}", f.audit_log.display());
}
