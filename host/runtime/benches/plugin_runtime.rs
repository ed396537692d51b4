//! Plugin runtime figures for docs/benchmarks.md (a bench, not a test):
//!
//! - per-call latency p50/p99 of `static-site` with a parent and 10 observed
//!   children, split into instantiate and call; throughput on one core; on
//!   the plain engine (no fuel budget) and on the fuel-metered one;
//! - load time: compile (`Component::new` + validation) vs precompiled-cache
//!   load (+ validation), per example plugin;
//! - plugin sizes raw and gzipped.
//!
//! Run: `cargo bench -p wr-runtime --bench plugin_runtime`. The plugins are
//! built first with the same command the tests use (into target/plugins),
//! unless `WR_BENCH_PLUGIN_DIR` names a directory of prebuilt `.wasm` files.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::request;
use wr_runtime::{CallLimits, Plugin, PluginRuntime, ReconcileRequest, RuntimeConfig};

const PLUGINS: &[&str] = &["static-site", "tombstone"];
const WARMUP: usize = 200;
const CALLS: usize = 5000;
const LOADS: usize = 5;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn build_plugins() -> PathBuf {
    let target = workspace().join("target/plugins");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace())
        .args(["build", "--target", "wasm32-wasip2", "--profile", "plugin"])
        .arg("--target-dir")
        .arg(&target);
    for p in PLUGINS {
        cmd.args(["-p", p]);
    }
    let status = cmd.status().expect("run cargo");
    assert!(status.success(), "plugin build failed");
    target.join("wasm32-wasip2/plugin")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Sorted instantiate, call and total durations of `CALLS` calls after a
/// warm-up, and the wall time of the measured calls.
fn latency(
    tokio: &tokio::runtime::Runtime,
    plugin: &Plugin,
    req: &ReconcileRequest,
    limits: &CallLimits,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>, Duration) {
    for _ in 0..WARMUP {
        tokio.block_on(plugin.reconcile(req, limits)).expect("call");
    }
    let (mut inst, mut call, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    for _ in 0..CALLS {
        let t = Instant::now();
        let (result, timings) = tokio.block_on(plugin.reconcile_timed(req, limits));
        total.push(t.elapsed());
        result.expect("call");
        inst.push(timings.instantiate);
        call.push(timings.call);
    }
    let wall = started.elapsed();
    for v in [&mut inst, &mut call, &mut total] {
        v.sort();
    }
    (inst, call, total, wall)
}

fn main() {
    // `WR_BENCH_PLUGIN_DIR` compares other builds of the same plugins (e.g.
    // another opt-level) without touching the workspace profile.
    let dir = match std::env::var_os("WR_BENCH_PLUGIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => build_plugins(),
    };
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");

    println!(
        "## Per-call latency: static-site, parent + 10 observed children, {CALLS} sequential calls on one thread\n"
    );
    println!(
        "Load average before the run: {}\n",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let rt = PluginRuntime::new(RuntimeConfig::default()).expect("runtime");
    let bytes = std::fs::read(dir.join("static_site.wasm")).expect("read plugin");
    let plugin = rt.load(&bytes).expect("load");
    let req = request();
    let unmetered = CallLimits::default();
    let metered = CallLimits {
        fuel: Some(u64::MAX),
        ..CallLimits::default()
    };
    println!("| engine | phase | p50 | p99 |\n| --- | --- | --- | --- |");
    for (engine, limits) in [
        ("plain (no fuel budget)", &unmetered),
        ("fuel-metered (budget set)", &metered),
    ] {
        let (inst, call, total, wall) = latency(&tokio, &plugin, &req, limits);
        println!(
            "| {engine} | instantiate (fresh Store + InstancePre::instantiate) | {} | {} |",
            us(percentile(&inst, 0.5)),
            us(percentile(&inst, 0.99))
        );
        println!(
            "| {engine} | call (lower request, run, lift + parse response) | {} | {} |",
            us(percentile(&call, 0.5)),
            us(percentile(&call, 0.99))
        );
        println!(
            "| {engine} | instantiate + call (sum of p50s) | {} | |",
            us(percentile(&inst, 0.5) + percentile(&call, 0.5)),
        );
        println!(
            "| {engine} | total per call (incl. request serialisation, store drop) | {} | {} |",
            us(percentile(&total, 0.5)),
            us(percentile(&total, 0.99))
        );
        println!(
            "| {engine} | throughput on one core | {:.0} calls/s | |",
            CALLS as f64 / wall.as_secs_f64()
        );
    }
    println!();

    println!(
        "## Load time per plugin (median of {LOADS}; both include world validation + pre-linking)\n"
    );
    println!(
        "| plugin | compile (`Component::new`) | from precompiled disk cache | raw size | gzipped |\n| --- | --- | --- | --- | --- |"
    );
    for name in PLUGINS {
        let file = dir.join(format!("{}.wasm", name.replace('-', "_")));
        let bytes = std::fs::read(&file).expect("read plugin");
        let cache = tempfile::tempdir().expect("tempdir");
        let mut compile = Vec::new();
        let mut cached = Vec::new();
        for _ in 0..LOADS {
            // Fresh runtimes each time so the in-memory map does not answer.
            let cold = PluginRuntime::new(RuntimeConfig::default()).expect("runtime");
            let t = Instant::now();
            cold.load(&bytes).expect("load");
            compile.push(t.elapsed());
            assert_eq!(cold.stats().compiled, 1);
            let config = RuntimeConfig {
                cache_dir: Some(cache.path().into()),
                ..RuntimeConfig::default()
            };
            PluginRuntime::new(config.clone())
                .expect("runtime")
                .load(&bytes)
                .expect("load");
            let warm = PluginRuntime::new(config).expect("runtime");
            let t = Instant::now();
            warm.load(&bytes).expect("load");
            cached.push(t.elapsed());
            assert_eq!(warm.stats().disk_cache_hits, 1);
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&bytes).expect("gzip");
        let gz = gz.finish().expect("gzip");
        println!(
            "| {name} | {} | {} | {} KiB | {} KiB |",
            ms(median(compile)),
            ms(median(cached)),
            bytes.len() / 1024,
            gz.len() / 1024
        );
    }
}
