//! The API faults of a run, set on the API server process through its admin
//! path (`/_wr/admin/faults`), and the injection counts read back from it.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use kube::Client;
use wr_apiserver::{FaultAction, FaultRule, FaultSpec, Injected, WatchFaults};

const WRITES: &[&str] = &["create", "update", "patch", "delete"];
/// Every watch stream is closed after this long while faults are on.
const WATCH_CUT_MS: u64 = 15_000;

/// Every fault kind the suite injects, named as the API server logs them.
pub const KINDS: &[&str] = &[
    "conflict",
    "tooManyRequests",
    "internalError",
    "unavailable",
    "timeout",
    "commitThenDrop",
    "latency",
    "staleList",
    "watchCut",
    "gone",
];

/// The rules for error rate `rate`: the error kinds share `rate` (so a request
/// fails with about that probability), latency and stale lists come on top at
/// the same rate, and every watch is cut after [`WATCH_CUT_MS`].
pub fn spec(rate: f64, seed: Option<u64>, gone_next: u32) -> FaultSpec {
    let share = rate / 6.0;
    let rule = |verbs: &[&str], rate: f64, action: FaultAction| FaultRule::new(verbs, rate, action);
    FaultSpec {
        rules: vec![
            rule(WRITES, share, FaultAction::Conflict),
            rule(
                &[],
                share,
                FaultAction::TooManyRequests {
                    retry_after_seconds: 1,
                },
            ),
            rule(&[], share, FaultAction::InternalError),
            rule(&[], share, FaultAction::Unavailable),
            rule(
                &[],
                share / 2.0,
                FaultAction::Timeout {
                    hold_ms: 1000,
                    drop_connection: false,
                },
            ),
            rule(
                &[],
                share / 2.0,
                FaultAction::Timeout {
                    hold_ms: 1000,
                    drop_connection: true,
                },
            ),
            rule(WRITES, share, FaultAction::CommitThenDrop),
            rule(&[], rate, FaultAction::Latency { ms: 50 }),
            rule(
                &["list"],
                rate,
                FaultAction::StaleList {
                    versions_behind: 20,
                },
            ),
        ],
        watch: WatchFaults {
            cut_after_events: None,
            cut_after_ms: Some(WATCH_CUT_MS),
            gone_next,
        },
        seed,
    }
}

async fn admin(client: &Client, method: &str, path: &str, body: Vec<u8>) -> Result<String> {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("/_wr/admin/{path}"))
        .header("content-type", "application/json")
        .body(body)?;
    client
        .request_text(req)
        .await
        .with_context(|| format!("{method} /_wr/admin/{path}"))
}

/// The server's request log so far, in completion order.
pub async fn requests(client: &Client) -> Result<Vec<wr_apiserver::RequestRecord>> {
    let text = admin(client, "GET", "requests", Vec::new()).await?;
    serde_json::from_str(&text).context("parsing the request log")
}

/// Replaces the server's fault spec.
pub async fn set(client: &Client, spec: &FaultSpec) -> Result<()> {
    admin(client, "PUT", "faults", serde_json::to_vec(spec)?).await?;
    Ok(())
}

/// Removes every fault.
pub async fn clear(client: &Client) -> Result<()> {
    admin(client, "DELETE", "faults", Vec::new()).await?;
    Ok(())
}

/// Faults injected so far, counted by kind.
pub async fn injected(client: &Client) -> Result<BTreeMap<String, u64>> {
    let text = admin(client, "GET", "faults", Vec::new()).await?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let list: Vec<Injected> = serde_json::from_value(v["injected"].clone())?;
    let mut out: BTreeMap<String, u64> = KINDS.iter().map(|k| (k.to_string(), 0)).collect();
    for i in list {
        *out.entry(i.fault).or_insert(0) += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_configured() {
        let s = spec(0.1, Some(1), 2);
        let mut names: Vec<&str> = s.rules.iter().map(|r| r.action.name()).collect();
        names.push("watchCut");
        names.push("gone");
        for k in KINDS {
            assert!(names.contains(k), "{k} not configured");
        }
        let errors: f64 = s
            .rules
            .iter()
            .filter(|r| {
                !matches!(
                    r.action,
                    FaultAction::Latency { .. } | FaultAction::StaleList { .. }
                )
            })
            .map(|r| r.rate)
            .sum();
        assert!((errors - 0.1).abs() < 1e-9);
    }
}
