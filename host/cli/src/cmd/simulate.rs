//! The workload simulator's flags and start-up, shared by `dev` (on by
//! default) and `apiserver` (off by default): see `wr_simulator` and
//! docs/dev.md, "Workloads come alive".

use std::time::Duration;

use anyhow::Context;

/// How the simulator behaves (both commands).
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateTuning {
    /// Time from a Pod's creation to Running and Ready (a Job's pods then run
    /// as long again before they succeed): `1s`, `500ms`, `2.5s`, `0`.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub simulate_delay: Duration,
    /// Simulated Nodes created at start (`sim-node-1` …) when missing.
    #[arg(long, default_value_t = 1)]
    pub simulate_nodes: usize,
}

/// `500ms`, `2s`, `1.5s` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (use e.g. 500ms, 2s)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}` is not a duration (use e.g. 500ms, 2s)"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// Start the simulator against `server` as its admin (over loopback HTTP,
/// like any client: see `wr_simulator` for why).
pub async fn start(
    server: &wr_apiserver::RunningServer,
    tuning: &SimulateTuning,
) -> anyhow::Result<wr_simulator::Simulator> {
    // The server may listen on a wildcard address; the simulator is local.
    let mut addr = server.addr();
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let url = format!("http://{addr}");
    let yaml =
        wr_apiserver::kubeconfig::kubeconfig_yaml_with_token(&url, Some(&server.admin_token()));
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).context("simulator kubeconfig")?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .context("simulator client configuration")?;
    let client = kube::Client::try_from(config).context("simulator client")?;
    tracing::info!(
        delay_ms = tuning.simulate_delay.as_millis() as u64,
        nodes = tuning.simulate_nodes,
        "workload simulator on: Deployments, StatefulSets, DaemonSets and Jobs get running pods"
    );
    Ok(wr_simulator::spawn(
        client,
        wr_simulator::Config {
            delay: tuning.simulate_delay,
            nodes: tuning.simulate_nodes,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_in_seconds_and_milliseconds() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
