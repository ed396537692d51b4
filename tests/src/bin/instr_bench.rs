//! Deterministic performance gate (issue 15 item 5): counts the instructions
//! of a fixed workload with valgrind's callgrind and compares them with the
//! baseline committed in `tests/perf-baseline.json`. Instruction counts do
//! not depend on the machine's load, so CI can fail a change that makes the
//! host more than 10 % more expensive without any timing in a test.
//!
//! Two workloads, each in one `#[inline(never)]` function that callgrind
//! counts alone (`--toggle-collect`), with no network and fixed inputs
//! (`now` included). The plugin runtime runs each call on its own thread
//! pool (`wr_runtime`'s `pool` module), so the count also toggles on in the
//! pool task's `PoolCall::poll`: the caller's share (lowering the request)
//! and the pool's (instantiate, run, parse the answer) are both counted.
//!
//! - `reconcile-path`: the engine's decision core for a parent with 10
//!   ConfigMap children that already match — observe, build the request,
//!   serialise its objects (the wire text), hash that text (memoisation),
//!   judge the answer, compute the status — 20 times;
//! - `plugin-call`: the static-site component (contract 0.2.0) called 20
//!   times on the `tests/fixtures/static-site/rollout` request as the
//!   engine calls it, its objects already serialised (`RequestText`, made
//!   outside the count like the engine makes it in the reconcile path),
//!   after a warm-up call outside the count (compilation is not what is
//!   gated).
//!
//! Commands (see `docs/benchmarks.md`, "Instruction-count gate"):
//!
//!     cargo run -p wr-tests --bin instr_bench -- gate            # compare, exit 1 over +10 %
//!     cargo run -p wr-tests --bin instr_bench -- gate --update   # rewrite the baseline
//!     cargo run -p wr-tests --bin instr_bench -- run WORKLOAD    # the workload alone (what valgrind runs)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};
use wr_engine::apply::{self, OwnerRef};
use wr_engine::crd::UpdateMethod;
use wr_engine::decide::{self, Source, memo};
use wr_engine::queue::ObjectKey;
use wr_engine::resolve::Resolved;
use wr_engine::status_schema::SchemaCheck;
use wr_engine::target::{Target, TargetChild};
use wr_engine::validate::DeclaredKind;
use wr_runtime::{CallLimits, ReconcileRequest, ReconcileResponse, RequestText};
use wr_tests::plugins::{plugin_bytes, plugin_target_dir, workspace_root};

/// The allocator of the `wasm-reconciler` binary, so the count is of the host
/// as shipped (malloc and free are a large share of the reconcile path).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Fails the gate: more than this fraction above the baseline.
const TOLERANCE: f64 = 0.10;
const WORKLOADS: [&str; 2] = ["reconcile-path", "plugin-call"];
const RECONCILE_ROUNDS: usize = 20;
const PLUGIN_CALLS: usize = 20;
const CHILDREN: usize = 10;
const NOW: &str = "2026-01-15T12:00:00Z";
/// Directory of the runtime's compiled-component cache for `run plugin-call`.
const CACHE_ENV: &str = "WR_INSTR_BENCH_CACHE";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run(args.get(1).map(String::as_str).unwrap_or("")),
        Some("gate") => gate(args.iter().any(|a| a == "--update")),
        _ => bail!("usage: instr_bench gate [--update] | run reconcile-path|plugin-call"),
    }
}

fn baseline_path() -> PathBuf {
    workspace_root().join("tests").join("perf-baseline.json")
}

/// Counts every workload under callgrind and compares (or rewrites) the baseline.
fn gate(update: bool) -> Result<()> {
    // Build the plugin components natively first (the valgrind run must not).
    let _ = plugin_bytes("static-site");
    let exe = std::env::current_exe()?;
    let mut counts = BTreeMap::new();
    for w in WORKLOADS {
        let n = count(&exe, w)?;
        println!("{w}: {n} instructions");
        counts.insert(w.to_string(), n);
    }
    let path = baseline_path();
    let counts = keyed_for_this_kernel(counts, pagemap_scan_kernel());
    if update {
        // Keep the other kernel's baselines: only this machine's keys change.
        let mut all = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| {
                serde_json::from_value::<BTreeMap<String, u64>>(v["instructions"].clone()).ok()
            })
            .unwrap_or_default();
        all.extend(counts);
        let doc = json!({
            "note": "instruction counts of tests/src/bin/instr_bench.rs under callgrind; regenerate with: cargo run -p wr-tests --bin instr_bench -- gate --update",
            "tolerance": TOLERANCE,
            "instructions": all,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
        println!("baseline written to {}", path.display());
        return Ok(());
    }
    let base: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    let failed = over_budget(&counts, &base)
        .with_context(|| format!("{}: run with --update", path.display()))?;
    if !failed.is_empty() {
        bail!(
            "instruction count over the baseline by more than {:.0} %: {}; if intended, regenerate with `cargo run -p wr-tests --bin instr_bench -- gate --update` and commit tests/perf-baseline.json",
            TOLERANCE * 100.0,
            failed.join(", ")
        );
    }
    Ok(())
}

/// The plugin-call workload's baseline key on a kernel without
/// `PAGEMAP_SCAN`. The runtime asks wasmtime to reset an instance's memory by
/// the pages a call dirtied (`pagemap_scan(Auto)`); on a kernel older than
/// 6.7 wasmtime falls back to zeroing the kept-resident memory after every
/// call (~1 MiB, about 2.3× the instructions of the whole call), so one
/// baseline cannot serve both kinds of kernel.
const PLUGIN_CALL_WITHOUT_PAGEMAP_SCAN: &str = "plugin-call-without-pagemap-scan";

/// Whether this kernel has the `PAGEMAP_SCAN` ioctl (Linux ≥ 6.7).
fn pagemap_scan_kernel() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| kernel_at_least(&r, (6, 7)))
        .unwrap_or(false)
}

/// Whether a kernel release string such as `6.18.44-fc` is at least `min`.
fn kernel_at_least(release: &str, min: (u64, u64)) -> bool {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next().and_then(|p| p.parse::<u64>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u64>().ok());
    matches!((major, minor), (Some(a), Some(b)) if (a, b) >= min)
}

/// The counts under the baseline keys of this kind of kernel.
fn keyed_for_this_kernel(
    counts: BTreeMap<String, u64>,
    pagemap_scan: bool,
) -> BTreeMap<String, u64> {
    counts
        .into_iter()
        .map(|(w, n)| {
            if w == "plugin-call" && !pagemap_scan {
                (PLUGIN_CALL_WITHOUT_PAGEMAP_SCAN.to_string(), n)
            } else {
                (w, n)
            }
        })
        .collect()
}

/// The workloads more than [`TOLERANCE`] above their baseline, described;
/// an error when a workload has no baseline.
fn over_budget(counts: &BTreeMap<String, u64>, base: &Value) -> Result<Vec<String>> {
    let mut failed = Vec::new();
    for (w, n) in counts {
        let Some(b) = base["instructions"][w].as_u64().filter(|b| *b > 0) else {
            bail!("no baseline for {w}");
        };
        let ratio = *n as f64 / b as f64;
        println!("{w}: {n} vs baseline {b} ({:+.1} %)", (ratio - 1.0) * 100.0);
        if ratio > 1.0 + TOLERANCE {
            failed.push(format!("{w} +{:.1} %", (ratio - 1.0) * 100.0));
        }
    }
    Ok(failed)
}

/// Instructions executed inside the workload function of `workload`.
fn count(exe: &Path, workload: &str) -> Result<u64> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("callgrind.out");
    let cache = dir.path().join("cache");
    // Native warm-up run: compiles the component into the cache.
    let warm = Command::new(exe)
        .args(["run", workload])
        .env(CACHE_ENV, &cache)
        .status()?;
    if !warm.success() {
        bail!("native run of {workload} failed: {warm}");
    }
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--toggle-collect=*instr_bench::workload_*")
        // The plugin call's share on the runtime's call pool (other threads;
        // callgrind's collection state is per thread, so the two never nest).
        .arg("--toggle-collect=*wr_runtime::pool::PoolCall*::poll")
        // JIT-compiled wasm code is written then run: make valgrind notice.
        .arg("--smc-check=all")
        .arg("--quiet")
        .arg(exe)
        .args(["run", workload])
        .env(CACHE_ENV, &cache)
        .status()
        .context("running valgrind (apt-get install valgrind)")?;
    if !status.success() {
        bail!("valgrind run of {workload} failed: {status}");
    }
    let text = std::fs::read_to_string(&out)?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no instruction total in {}", out.display()))
}

/// Runs one workload (what callgrind counts); prints a checksum so the work
/// cannot be optimised away and a broken workload is seen.
fn run(workload: &str) -> Result<()> {
    match workload {
        "reconcile-path" => {
            let fx = Fixture::new();
            let quiet = workload_reconcile_path(&fx);
            if quiet != RECONCILE_ROUNDS {
                let a = decided(&fx.target, &fx.parent, &fx.children, &fx.answer);
                let actions: Vec<_> = a.children.iter().map(|c| &c.action).collect();
                bail!("the fixture did not converge: {quiet} quiet rounds; {actions:?}");
            }
            println!("reconcile-path: {quiet} quiet rounds");
        }
        "plugin-call" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // One instance slot: the pooling allocator's address-space
            // reservation must fit in what valgrind can map.
            let cfg = wr_runtime::RuntimeConfig {
                max_instances: 1,
                max_memory_bytes: 64 << 20,
                // `gate` fills it with a native run first, so the run under
                // valgrind loads the compiled component instead of compiling.
                cache_dir: std::env::var_os(CACHE_ENV).map(PathBuf::from),
            };
            let runtime =
                wr_runtime::PluginRuntime::new(cfg).map_err(|e| anyhow::anyhow!("runtime: {e}"))?;
            let plugin = runtime
                .load(&static_site_bytes()?)
                .map_err(|e| anyhow::anyhow!("loading static-site: {e}"))?;
            let req = static_site_request()?;
            let limits = CallLimits::default();
            // Warm-up outside the count: first-call set-up is not the call.
            rt.block_on(plugin.reconcile(&req, &limits))
                .map_err(|e| anyhow::anyhow!("warm-up call: {e}"))?;
            // One text per call, made outside the count (the engine makes it
            // in the reconcile path and moves it into the call).
            let text = RequestText::new(&req).map_err(|e| anyhow::anyhow!("request text: {e}"))?;
            let texts = vec![text; PLUGIN_CALLS];
            let children = rt.block_on(workload_plugin_call(&plugin, texts, &limits))?;
            println!("plugin-call: {children} children");
        }
        other => bail!("unknown workload {other:?}; known: {WORKLOADS:?}"),
    }
    Ok(())
}

#[inline(never)]
async fn workload_plugin_call(
    plugin: &wr_runtime::Plugin,
    texts: Vec<RequestText>,
    limits: &CallLimits,
) -> Result<usize> {
    let mut children = 0;
    for text in texts {
        let r = plugin
            .reconcile_text(text, limits)
            .await
            .map_err(|e| anyhow::anyhow!("call: {e}"))?;
        children += r.children.len();
    }
    Ok(children)
}

/// The component `gate` built (read directly: no cargo run under valgrind).
fn static_site_bytes() -> Result<Vec<u8>> {
    let path = plugin_target_dir().join("wasm32-wasip2/plugin/static_site.wasm");
    std::fs::read(&path).with_context(|| format!("reading {} (plugins/build.sh)", path.display()))
}

/// The request of `tests/fixtures/static-site/rollout` (parent, observed
/// children, config) at a fixed `now`.
fn static_site_request() -> Result<ReconcileRequest> {
    let dir = workspace_root().join("tests/fixtures/static-site/rollout");
    let yaml = |name: &str| -> Result<Vec<Value>> {
        let text = std::fs::read_to_string(dir.join(name))?;
        let mut out = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc)?;
            if !v.is_null() {
                out.push(v);
            }
        }
        Ok(out)
    };
    let parent = yaml("parent.yaml")?
        .into_iter()
        .next()
        .context("parent.yaml is empty")?;
    let config: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
    Ok(ReconcileRequest {
        parent,
        children: yaml("observed.yaml")?,
        related: vec![],
        finalizing: false,
        config: Some(config),
        now: NOW.into(),
    })
}

/// A controller with ConfigMap children, a parent, its 10 children exactly
/// as desired, and the plugin answer that desires them.
struct Fixture {
    target: Target,
    parent: DynamicObject,
    children: Vec<Arc<DynamicObject>>,
    answer: ReconcileResponse,
}

fn resolved(api_version: &str, kind: &str, plural: &str) -> Resolved {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Resolved {
        ar: ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        },
        namespaced: true,
        status_subresource: true,
    }
}

impl Fixture {
    fn new() -> Fixture {
        let target = Target {
            name: "bench".into(),
            field_manager: "wasm-reconciler/bench".into(),
            finalizer: wr_engine::finalize::finalizer_name("bench"),
            finalize: false,
            parent: resolved("example.com/v1", "Site", "sites"),
            declared: vec![DeclaredKind {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespaced: true,
            }],
            children: vec![TargetChild {
                resolved: resolved("v1", "ConfigMap", "configmaps"),
                method: UpdateMethod::InPlace,
                rolling: Default::default(),
            }],
            related: vec![],
            config: Some(json!({"tier": "gold"})),
            limits: CallLimits::default(),
            concurrency: 1,
            resync: None,
            status_schema: SchemaCheck::BuiltIn,
            status_mode: wr_engine::status::StatusMode::Merge,
            adoption: wr_engine::crd::Adoption::Never,
            decorate: None,
            shard_labels: false,
        };
        let desired: Vec<Value> = (0..CHILDREN)
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": format!("site-{i}"), "namespace": "ns", "labels": {"app": "site"}},
                       "data": {"index": i.to_string(), "body": "x".repeat(200)}})
            })
            .collect();
        let owner = OwnerRef {
            api_version: "example.com/v1".into(),
            kind: "Site".into(),
            name: "site".into(),
            uid: "uid-site".into(),
        };
        let children: Vec<Arc<DynamicObject>> = desired
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut o = apply::desired_object(d, &owner);
                o["metadata"]["namespace"] = json!("ns");
                o["metadata"]["uid"] = json!(format!("uid-{i}"));
                o["metadata"]["resourceVersion"] = json!(format!("{}", 100 + i));
                Arc::new(serde_json::from_value(o).unwrap_or_else(|e| panic!("child: {e}")))
            })
            .collect();
        let answer = ReconcileResponse {
            children: desired,
            conditions: vec![],
            status: Some(json!({"children": CHILDREN})),
            requeue_after_seconds: None,
            events: vec![],
            finalized: false,
        };
        // The status the host wrote last time: nothing to write now.
        let status = decide::status_to_write(
            &target,
            None,
            Some(1),
            &decide::Answer::settle(&decided(&target, &parent(None), &children, &answer), &[])
                .status
                .unwrap_or_else(|| panic!("a status")),
            NOW,
        );
        Fixture {
            parent: parent(status),
            target,
            children,
            answer,
        }
    }
}

fn parent(status: Option<Value>) -> DynamicObject {
    let mut p = json!({"apiVersion": "example.com/v1", "kind": "Site",
        "metadata": {"name": "site", "namespace": "ns", "uid": "uid-site",
                     "generation": 1, "resourceVersion": "99"},
        "spec": {"replicas": 3, "content": {"index.html": "<h1>hi</h1>"}}});
    if let Some(s) = status {
        p["status"] = s;
    }
    serde_json::from_value(p).unwrap_or_else(|e| panic!("parent: {e}"))
}

/// The children of the fixture as the engine's caches hold them.
struct Snapshot<'a>(&'a [Arc<DynamicObject>]);

impl Source for Snapshot<'_> {
    fn owned_by(&self, _kind: usize, _uid: &str) -> Vec<Arc<DynamicObject>> {
        self.0.to_vec()
    }
    fn related_in(&self, _rule: usize, _ns: Option<&str>) -> Vec<Arc<DynamicObject>> {
        Vec::new()
    }
    fn child(&self, _kind: usize, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        self.0
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(key.name.as_str()))
            .cloned()
    }
}

fn decided(
    target: &Target,
    parent: &DynamicObject,
    children: &[Arc<DynamicObject>],
    answer: &ReconcileResponse,
) -> decide::Answer {
    let src = Snapshot(children);
    let observed = decide::observe(target, parent.clone(), &src);
    match decide::decide(target, &observed, &src, &Ok(answer.clone()), NOW) {
        decide::Decision::Answered(a) => a,
        decide::Decision::Failed(f) => panic!("fixture rejected: {:?}", f.failure),
    }
}

/// One converged reconcile of the fixture per round, as the engine does it
/// minus the I/O; returns how many rounds found nothing to write.
#[inline(never)]
fn workload_reconcile_path(fx: &Fixture) -> usize {
    let src = Snapshot(&fx.children);
    let mut quiet = 0;
    for _ in 0..RECONCILE_ROUNDS {
        let observed = decide::observe(&fx.target, fx.parent.clone(), &src);
        let req = decide::request(&fx.target, &observed, NOW);
        // The wire text, made once: hashed here, moved into the call.
        let Ok(text) = RequestText::new(&req) else {
            continue;
        };
        let inputs = memo::inputs_hash("sha256:bench", &text);
        std::hint::black_box((inputs, text));
        let a = match decide::decide(&fx.target, &observed, &src, &Ok(fx.answer.clone()), NOW) {
            decide::Decision::Answered(a) => a,
            decide::Decision::Failed(_) => continue,
        };
        let settle = a.settle(&a.known_problems());
        let write = settle.status.as_ref().and_then(|u| {
            decide::status_to_write(
                &fx.target,
                observed.parent.data.get("status"),
                observed.parent.metadata.generation,
                u,
                NOW,
            )
        });
        if memo::quiet(&a, write.is_none()) {
            quiet += 1;
        }
    }
    quiet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_kernel_is_held_to_its_own_plugin_call_baseline() {
        assert!(kernel_at_least("6.18.44-fc-v669", (6, 7)));
        assert!(kernel_at_least("6.7.0", (6, 7)));
        assert!(!kernel_at_least("6.6.87-generic", (6, 7)));
        assert!(!kernel_at_least("5.15.0-105-generic", (6, 7)));
        assert!(!kernel_at_least("garbage", (6, 7)));
        let counts = BTreeMap::from([
            ("plugin-call".to_string(), 5),
            ("reconcile-path".to_string(), 7),
        ]);
        let old = keyed_for_this_kernel(counts.clone(), false);
        assert_eq!(old.get(PLUGIN_CALL_WITHOUT_PAGEMAP_SCAN), Some(&5));
        assert_eq!(old.get("reconcile-path"), Some(&7));
        assert_eq!(keyed_for_this_kernel(counts.clone(), true), counts);
    }

    #[test]
    fn the_gate_fails_only_above_ten_percent_and_without_a_baseline() {
        let base = json!({"instructions": {"a": 1000, "b": 1000}});
        let counts = |a: u64, b: u64| BTreeMap::from([("a".to_string(), a), ("b".to_string(), b)]);
        assert!(over_budget(&counts(1100, 900), &base).unwrap().is_empty());
        assert_eq!(over_budget(&counts(1101, 1000), &base).unwrap().len(), 1);
        assert_eq!(over_budget(&counts(2000, 5000), &base).unwrap().len(), 2);
        let missing = BTreeMap::from([("c".to_string(), 1)]);
        assert!(over_budget(&missing, &base).is_err());
    }

    #[test]
    fn the_reconcile_fixture_is_converged() {
        // A fixture that needed writes would gate a different path.
        assert_eq!(workload_reconcile_path(&Fixture::new()), RECONCILE_ROUNDS);
    }
}
