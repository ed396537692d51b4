//! Offline micro-timings of the steps of one host reconcile that neither the
//! engine's observer nor the client layer can separate (cache read → JSON,
//! request encode, instantiate, call, response decode, diff, status), each
//! run in a loop on the real objects of one converged parent taken from the
//! cluster at the end of a run. Single-threaded, no contention: a lower bound
//! per step, to show where the time goes relative to the in-run figures.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, anyhow};
use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wr_plugin_sdk::Reconciler;
use wr_runtime::{ReconcileRequest, ReconcileResponse};

use crate::bench::Sample;
use crate::stats::summarize;

/// One timed step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// Which step (and which variants pay for it).
    pub name: String,
    /// Median, µs.
    pub p50_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
}

/// All steps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Micro {
    /// Iterations per step.
    pub iterations: usize,
    /// Steps in reconcile order.
    pub steps: Vec<Step>,
}

fn time<T>(name: &str, iterations: usize, mut f: impl FnMut() -> T) -> Step {
    // Warm up, then time each iteration.
    for _ in 0..iterations / 10 {
        std::hint::black_box(f());
    }
    let mut v = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        std::hint::black_box(f());
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let s = summarize(&v);
    Step {
        name: name.into(),
        p50_us: s.p50,
        mean_us: s.mean,
    }
}

/// Times every step `iterations` times.
pub async fn measure(sample: &Sample, wasm: &Path, iterations: usize) -> Result<Micro> {
    let parent: DynamicObject = serde_json::from_value(sample.parent.clone())?;
    let children: Vec<DynamicObject> = sample
        .children
        .iter()
        .map(|c| serde_json::from_value(c.clone()))
        .collect::<Result<_, _>>()?;
    let req = ReconcileRequest {
        parent: serde_json::to_value(&parent)?,
        children: children
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        related: vec![],
        finalizing: false,
        config: Some(crate::logic::config()),
        now: "2026-11-30T00:00:00Z".into(),
    };
    let mut steps = Vec::new();
    steps.push(time(
        "all: cached objects -> JSON values (parent + 3 children)",
        iterations,
        || {
            let p = serde_json::to_value(&parent).unwrap_or(Value::Null);
            let c: Vec<Value> = children
                .iter()
                .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                .collect();
            (p, c)
        },
    ));
    steps.push(time(
        "wasm: request values -> JSON text (into the sandbox)",
        iterations,
        || {
            let p = serde_json::to_string(&req.parent).unwrap_or_default();
            let c: Vec<String> = req
                .children
                .iter()
                .map(|c| serde_json::to_string(c).unwrap_or_default())
                .collect();
            (p, c)
        },
    ));

    let bytes = std::fs::read(wasm)?;
    let rt = wr_runtime::PluginRuntime::new(wr_runtime::RuntimeConfig::default())
        .map_err(|e| anyhow!("runtime: {e}"))?;
    let plugin = tokio::task::spawn_blocking(move || rt.load(&bytes))
        .await?
        .map_err(|e| anyhow!("load: {e}"))?;
    let limits = wr_runtime::CallLimits::default();
    let mut inst = Vec::with_capacity(iterations);
    let mut call = Vec::with_capacity(iterations);
    let mut resp: Option<ReconcileResponse> = None;
    for i in 0..iterations + iterations / 10 {
        let (r, t) = plugin.reconcile_timed(&req, &limits).await;
        if i >= iterations / 10 {
            inst.push(t.instantiate.as_secs_f64() * 1e6);
            call.push(t.call.as_secs_f64() * 1e6);
        }
        resp = Some(r.map_err(|e| anyhow!("plugin: {e}"))?);
    }
    let resp = resp.ok_or_else(|| anyhow!("no plugin response"))?;
    for (name, v) in [
        ("wasm: instantiate (fresh Store + instance)", inst),
        (
            "wasm: call (lower request, run plugin, lift + parse response)",
            call,
        ),
    ] {
        let s = summarize(&v);
        steps.push(Step {
            name: name.into(),
            p50_us: s.p50,
            mean_us: s.mean,
        });
    }
    let sdk_req = wr_plugin_sdk::Request {
        parent: req.parent.clone(),
        children: req.children.clone().into(),
        related: vec![],
        finalizing: false,
        config: req.config.clone(),
        now: req.now.clone(),
    };
    steps.push(time(
        "native: the same logic as a Rust call (no boundary)",
        iterations,
        || static_site::StaticSite::reconcile(&sdk_req).is_ok(),
    ));
    let texts: Vec<String> = resp
        .children
        .iter()
        .map(|c| serde_json::to_string(c).unwrap_or_default())
        .collect();
    steps.push(time(
        "wasm: response JSON text -> values (part of the call above)",
        iterations,
        || {
            texts
                .iter()
                .map(|t| serde_json::from_str::<Value>(t).unwrap_or(Value::Null))
                .collect::<Vec<_>>()
        },
    ));
    let owner = wr_engine::apply::OwnerRef {
        api_version: parent
            .types
            .as_ref()
            .map(|t| t.api_version.clone())
            .unwrap_or_default(),
        kind: "StaticSite".into(),
        name: parent.metadata.name.clone().unwrap_or_default(),
        uid: parent.metadata.uid.clone().unwrap_or_default(),
    };
    let uid = owner.uid.clone();
    steps.push(time(
        "host: diff (desired object + hash + plan vs cache, 3 children)",
        iterations,
        || {
            resp.children
                .iter()
                .zip(&children)
                .map(|(d, c)| {
                    // What the engine's `apply::decide` does for an owned child.
                    let desired = wr_engine::apply::desired_object(d, &owner);
                    wr_engine::apply::controller_uid(c) == Some(uid.as_str())
                        && serde_json::to_value(c)
                            .is_ok_and(|o| wr_engine::diff::is_subset(&desired, &o))
                })
                .collect::<Vec<_>>()
        },
    ));
    let mut conditions = vec![wr_engine::status::DesiredCondition::ready(
        true,
        "Reconciled",
        "",
    )];
    conditions.extend(
        resp.conditions
            .iter()
            .map(wr_engine::status::DesiredCondition::from_plugin),
    );
    let update = wr_engine::status::StatusUpdate {
        conditions,
        replace_conditions: true,
        plugin_status: resp.status.clone(),
    };
    steps.push(time(
        "all: next status (conditions, no-op check)",
        iterations,
        || {
            wr_engine::status::next_status(
                parent.data.get("status"),
                parent.metadata.generation,
                &update,
                wr_engine::status::StatusMode::Merge,
                "2026-11-30T00:00:00Z",
            )
        },
    ));
    steps.push(time(
        "webhook: request + response JSON encode and decode (both ends)",
        iterations,
        || -> Option<ReconcileResponse> {
            let a = serde_json::to_vec(&req).ok()?;
            let r: ReconcileRequest = serde_json::from_slice(&a).ok()?;
            std::hint::black_box(r);
            let b = serde_json::to_vec(&resp).ok()?;
            serde_json::from_slice(&b).ok()
        },
    ));
    Ok(Micro { iterations, steps })
}
