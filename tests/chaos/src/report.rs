//! The run's report: what was done, what was injected, what held. Printed as
//! text and written as JSON; `ok` is false on any violation.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::Swap;
use crate::args::Settings;
use crate::invariants::Check;
use crate::promtext::{self, Sample};
use crate::setup::{HEALTHY, HOSTILE};
use crate::supervisor::State;
use crate::workload::Outcomes;

const RECONCILES: &str = "wasm_reconciler_reconciles_total";
const DURATION: &str = "wasm_reconciler_reconcile_duration_seconds";
const PLUGIN_CALLS: &str = "wasm_reconciler_plugin_call_duration_seconds_count";
const PLUGIN_FAULTS: &str = "wasm_reconciler_plugin_faults_total";
const API_REQUESTS: &str = "wasm_reconciler_api_requests_total";

/// Healthy reconciles allowed in the quiet window after convergence.
pub fn quiet_bound(parents: usize) -> f64 {
    2.0 + parents as f64 / 100.0
}

/// Upper bound on the healthy controller's plugin calls: five times what the
/// run can explain — a call per parent at start, after every leader change and
/// per plugin version, and two per operation (the op and a retry).
pub fn calls_bound(parents_created: u64, ops: u64, leader_changes: u64, swaps: u64) -> f64 {
    5.0 * ((parents_created * (2 + leader_changes + 2 * swaps)) + 2 * ops) as f64
}

pub struct Inputs<'a> {
    pub settings: &'a Settings,
    pub replay: &'a str,
    pub wall_secs: f64,
    pub chaos_secs: f64,
    pub ops: &'a BTreeMap<String, Outcomes>,
    pub faults: &'a BTreeMap<String, u64>,
    pub swap: &'a Swap,
    pub state: &'a State,
    pub checks: &'a [Check],
    pub converged_after: Option<f64>,
    /// (window seconds, healthy reconciles in it)
    pub quiet: (f64, f64),
    /// Set when the hosts' membership changed inside the quiet window.
    pub membership_moved: Option<String>,
    /// Whether every host ran and agreed before the quiet window, and what
    /// they said.
    pub membership: (bool, String),
}

pub struct Report {
    pub json: Value,
    pub ok: bool,
}

fn ms(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |s| json!((s * 1000.0 * 10.0).round() / 10.0))
}

fn latency(samples: &[Sample], controller: &str) -> Value {
    let b = promtext::buckets(samples, DURATION, &[("controller", controller)]);
    let ok = promtext::buckets(
        samples,
        DURATION,
        &[("controller", controller), ("result", "success")],
    );
    json!({
        "p50Ms": ms(promtext::quantile(0.5, &b)),
        "p99Ms": ms(promtext::quantile(0.99, &b)),
        "successP50Ms": ms(promtext::quantile(0.5, &ok)),
        "successP99Ms": ms(promtext::quantile(0.99, &ok)),
    })
}

/// A host exit that is not a crash: 1 is the designed exit on lost leadership.
fn is_crash(end: &str) -> bool {
    end.starts_with("exited(") && end != "exited(1)" && end != "exited(0)"
}

pub fn build(i: Inputs<'_>) -> Report {
    let s = i.settings;
    let samples = i.state.all_samples();
    let healthy = [("controller", HEALTHY)];
    let reconciles_by = promtext::sum_by(&samples, RECONCILES, &healthy, "result");
    let reconciles_all = promtext::sum(&samples, RECONCILES, &[]);
    let hostile_by = promtext::sum_by(&samples, RECONCILES, &[("controller", HOSTILE)], "result");
    let hostile_faults =
        promtext::sum_by(&samples, PLUGIN_FAULTS, &[("controller", HOSTILE)], "kind");
    let calls = promtext::sum(&samples, PLUGIN_CALLS, &healthy);
    let api = promtext::sum(&samples, API_REQUESTS, &[]);
    let api_by_code = promtext::sum_by(&samples, API_REQUESTS, &[], "code");

    let ops_total: u64 = i.ops.values().map(|o| o.ok + o.not_found + o.failed).sum();
    let created = i.ops.get("create").map_or(0, |o| o.ok + o.failed);
    let leaders = i.state.incarnations.iter().filter(|x| x.led).count() as u64;
    let bound = calls_bound(created, ops_total, leaders, u64::from(i.swap.published));
    let quiet_max = quiet_bound(s.parents);
    let crashes: Vec<&str> = i
        .state
        .incarnations
        .iter()
        .filter(|x| x.end.as_deref().is_some_and(is_crash))
        .map(|x| x.name.as_str())
        .collect();

    let mut extra = vec![
        (
            "converged",
            i.converged_after.is_some(),
            format!("within {}s of the faults stopping", s.converge_timeout_secs),
        ),
        (
            "noHotLoop",
            i.quiet.1 <= quiet_max,
            format!(
                "{} healthy reconciles in a {}s quiet window after convergence (max {quiet_max}){}",
                i.quiet.1,
                i.quiet.0,
                i.membership_moved
                    .as_deref()
                    .map_or(String::new(), |m| format!("; {m}"))
            ),
        ),
        (
            "membershipSettled",
            i.membership.0,
            format!(
                "every host running and agreeing before the quiet window: {}",
                i.membership.1
            ),
        ),
        (
            "pluginCallsBounded",
            calls <= bound,
            format!("{calls} healthy plugin calls (max {bound})"),
        ),
        (
            "noHostCrash",
            crashes.is_empty(),
            format!("crashed: {crashes:?}"),
        ),
    ];
    if i.swap.enabled {
        extra.push((
            "pluginSwapPublished",
            i.swap.published,
            "version 2 published mid-run".to_string(),
        ));
    }
    let ok = i.checks.iter().all(Check::ok) && !i.checks.is_empty() && extra.iter().all(|e| e.1);

    let last_leader = i.state.incarnations.iter().rev().find(|x| x.led);
    let rss = json!({
        "finalLeader": last_leader.map(|x| json!({
            "name": x.name, "atLeadKiB": x.rss_first_kib, "atEndKiB": x.rss_last_kib, "maxKiB": x.rss_max_kib,
            "seriesSecsKiB": x.rss_series,
        })),
        "maxAnyHostKiB": i.state.incarnations.iter().filter_map(|x| x.rss_max_kib).max(),
    });
    let violations = |name: &str| -> usize {
        i.checks
            .iter()
            .filter(|c| c.name == name)
            .map(|c| c.violations)
            .sum()
    };
    // The headline figures (target 0 each).
    let objects = json!({
        "lost": violations("noLostChildren"),
        "duplicated": violations("noDuplicateChildren") + violations("noUnownedObjects"),
        "leaked": violations("noLeakedChildren") + violations("noParentStuckDeleting"),
        "wrong": violations("childrenExact"),
    });
    let json = json!({
        "ok": ok,
        "objects": objects,
        "seed": s.seed,
        "replay": i.replay,
        "settings": s,
        "wallSeconds": (i.wall_secs * 10.0).round() / 10.0,
        "chaosSeconds": (i.chaos_secs * 10.0).round() / 10.0,
        "operations": i.ops,
        "operationsTotal": ops_total,
        "faultsInjected": i.faults,
        "faultsTotal": i.faults.values().sum::<u64>(),
        "hostKills": i.state.kills,
        "hostIncarnations": i.state.incarnations.len(),
        "leaders": leaders,
        "unexpectedExits": i.state.unexpected_exits,
        "harnessErrors": i.state.errors,
        "pluginSwap": i.swap,
        "invariants": i.checks,
        "runChecks": extra.iter().map(|(n, ok, d)| json!({"name": n, "ok": ok, "detail": d})).collect::<Vec<_>>(),
        "convergenceSeconds": i.converged_after.map(|x| (x * 10.0).round() / 10.0),
        "healthy": {
            "reconcilesByResult": reconciles_by,
            "pluginCalls": calls,
            "pluginCallsPerParentCreated": if created > 0 { json!((calls / created as f64 * 100.0).round() / 100.0) } else { Value::Null },
            "latency": latency(&samples, HEALTHY),
        },
        "hostile": {
            "enabled": s.hostile_parents > 0,
            "reconcilesByResult": hostile_by,
            "pluginFaultsByKind": hostile_faults,
        },
        "apiRequests": api,
        "apiRequestsByCode": api_by_code,
        "apiRequestsPerReconcile": if reconciles_all > 0.0 { json!((api / reconciles_all * 100.0).round() / 100.0) } else { Value::Null },
        "rss": rss,
    });
    Report { json, ok }
}

pub fn print(r: &Report) {
    let j = &r.json;
    println!("==== chaos report ====");
    println!(
        "seed {} · wall {}s · chaos {}s · ops {} · faults {} · kills {} · incarnations {}",
        j["seed"],
        j["wallSeconds"],
        j["chaosSeconds"],
        j["operationsTotal"],
        j["faultsTotal"],
        j["hostKills"],
        j["hostIncarnations"]
    );
    println!("operations: {}", j["operations"]);
    println!("faults injected: {}", j["faultsInjected"]);
    println!("plugin swap: {}", j["pluginSwap"]);
    println!("unexpected host exits: {}", j["unexpectedExits"]);
    println!(
        "healthy: reconciles {} · plugin calls {} ({} per parent created) · latency {}",
        j["healthy"]["reconcilesByResult"],
        j["healthy"]["pluginCalls"],
        j["healthy"]["pluginCallsPerParentCreated"],
        j["healthy"]["latency"]
    );
    println!(
        "hostile: {} · plugin faults {}",
        j["hostile"]["reconcilesByResult"], j["hostile"]["pluginFaultsByKind"]
    );
    println!(
        "API requests {} · per reconcile {} · by code {}",
        j["apiRequests"], j["apiRequestsPerReconcile"], j["apiRequestsByCode"]
    );
    let mut rss = j["rss"].clone();
    if let Some(l) = rss.get_mut("finalLeader").and_then(Value::as_object_mut) {
        l.remove("seriesSecsKiB");
    }
    println!("RSS (series in the JSON report): {rss}");
    println!("objects lost/duplicated/leaked/wrong: {}", j["objects"]);
    match j["convergenceSeconds"].as_f64() {
        Some(x) => println!("converged {x}s after the faults stopped"),
        None => println!("NOT converged within the timeout"),
    }
    for c in j["invariants"].as_array().into_iter().flatten() {
        let ok = c["violations"] == 0;
        println!(
            "  [{}] {} ({} checked, {} violations)",
            if ok { "ok" } else { "FAIL" },
            c["name"].as_str().unwrap_or(""),
            c["checked"],
            c["violations"]
        );
        for e in c["examples"].as_array().into_iter().flatten() {
            println!("         {}", e.as_str().unwrap_or(""));
        }
    }
    for c in j["runChecks"].as_array().into_iter().flatten() {
        println!(
            "  [{}] {}: {}",
            if c["ok"] == true { "ok" } else { "FAIL" },
            c["name"].as_str().unwrap_or(""),
            c["detail"].as_str().unwrap_or("")
        );
    }
    println!("result: {}", if r.ok { "PASS" } else { "FAIL" });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_classification() {
        assert!(!is_crash("killed"));
        assert!(!is_crash("exited(1)"));
        assert!(is_crash("exited(101)"));
        assert!(is_crash("exited(signal)"));
    }
}
