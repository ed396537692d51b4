//! Bench: the static-site plugin in Rust, JavaScript, Python, C and Go, on the
//! shared fixture `tests/fixtures/static-site/rollout`. Prints the table of
//! docs/authoring.md (component size raw and gzipped, cold compile, cached
//! load, per-call latency p50/p99). Ignored by default; run with
//!
//!     plugins/languages/build-all.sh --no-test && \
//!     cargo test -p wr-tests --test suite -- languages_bench:: --ignored --nocapture
//!
//! Timings are printed, never asserted. `WR_BENCH_LANGS=rust,go` keeps only
//! those rows; `WR_BENCH_EXTRA=name=path.wasm,...` adds rows for other
//! builds of the same plugin (e.g. the Go variants of docs/authoring.md,
//! "Size and speed").

use std::time::{Duration, Instant};

use wr_runtime::{CallLimits, PluginRuntime, RuntimeConfig};
use wr_tests::languages::{Components, components, fixtures};
use wr_tests::plugins::plugin_bytes;

const PLUGIN: &str = "static-site";
const FIXTURE: &str = "rollout";
/// Calls per language for the latency percentiles (after 5 warm-up calls).
const CALLS: usize = 200;

struct Row {
    lang: String,
    raw: usize,
    gzipped: usize,
    cold_compile: Duration,
    cached_load: Duration,
    p50: Duration,
    p99: Duration,
    instantiate_p50: Duration,
}

fn gzipped_len(bytes: &[u8]) -> usize {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("gzip")
        .args(["-9", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    // Feed stdin from another thread: gzip's output would fill the pipe
    // (and block both sides) before a large input is written.
    let mut stdin = child.stdin.take().expect("stdin");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("gzip output");
    writer
        .join()
        .expect("writer thread")
        .expect("write to gzip");
    out.stdout.len()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

async fn measure(lang: &str, bytes: &[u8]) -> Row {
    let request = fixtures(PLUGIN)
        .into_iter()
        .find(|f| f.name == FIXTURE)
        .expect("the shared fixture")
        .request;
    let limits = CallLimits {
        timeout: Duration::from_secs(30),
        max_memory_bytes: 256 << 20,
        ..CallLimits::default()
    };

    // Cold: a fresh runtime without a disk cache compiles the component.
    let cold_rt = PluginRuntime::new(RuntimeConfig::default()).expect("runtime");
    let started = Instant::now();
    cold_rt
        .load(bytes)
        .unwrap_or_else(|e| panic!("{lang}: {e}"));
    let cold_compile = started.elapsed();

    // Cached: a second runtime on a warm disk cache (what a restart sees).
    let dir = tempfile::tempdir().expect("tempdir");
    let config = || RuntimeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..RuntimeConfig::default()
    };
    PluginRuntime::new(config())
        .expect("runtime")
        .load(bytes)
        .expect("warm the cache");
    let rt = PluginRuntime::new(config()).expect("runtime");
    let started = Instant::now();
    let plugin = rt.load(bytes).expect("cached load");
    let cached_load = started.elapsed();
    assert_eq!(
        rt.stats().disk_cache_hits,
        1,
        "{lang}: the load did not come from the disk cache"
    );

    for _ in 0..5 {
        plugin
            .reconcile(&request, &limits)
            .await
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
    }
    let mut totals = Vec::with_capacity(CALLS);
    let mut instantiates = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let (result, timings) = plugin.reconcile_timed(&request, &limits).await;
        totals.push(started.elapsed());
        instantiates.push(timings.instantiate);
        result.unwrap_or_else(|e| panic!("{lang}: {e}"));
    }
    totals.sort();
    instantiates.sort();
    Row {
        lang: lang.to_string(),
        raw: bytes.len(),
        gzipped: gzipped_len(bytes),
        cold_compile,
        cached_load,
        p50: percentile(&totals, 0.5),
        p99: percentile(&totals, 0.99),
        instantiate_p50: percentile(&instantiates, 0.5),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn kib(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", n as f64 / 1024.0)
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "bench: run explicitly with --ignored --nocapture"]
async fn bench_languages() {
    let ports = match components(PLUGIN) {
        Components::Ready(ports) => ports,
        Components::Skipped(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let only = std::env::var("WR_BENCH_LANGS").ok();
    let wanted = |lang: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|l| l == lang))
    };
    let mut rows = Vec::new();
    if wanted("rust") {
        rows.push(measure("rust", &plugin_bytes(PLUGIN)).await);
    }
    for (lang, bytes) in ports.iter().filter(|(lang, _)| wanted(lang)) {
        rows.push(measure(lang, bytes).await);
    }
    for extra in std::env::var("WR_BENCH_EXTRA")
        .unwrap_or_default()
        .split(',')
        .filter(|e| !e.is_empty())
    {
        let (name, path) = extra
            .split_once('=')
            .unwrap_or_else(|| panic!("WR_BENCH_EXTRA: {extra:?} is not name=path"));
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("WR_BENCH_EXTRA {path}: {e}"));
        rows.push(measure(name, &bytes).await);
    }
    println!(
        "\nstatic-site on fixture `{FIXTURE}`, {CALLS} calls each (p50/p99 include instantiation)\n"
    );
    println!(
        "| language | size | gzipped | cold compile | cached load | call p50 | call p99 | instantiate p50 |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.lang,
            kib(r.raw),
            kib(r.gzipped),
            ms(r.cold_compile),
            ms(r.cached_load),
            ms(r.p50),
            ms(r.p99),
            ms(r.instantiate_p50)
        );
    }
}
