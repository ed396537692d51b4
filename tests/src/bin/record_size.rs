//! Record store size (issue 17 figure): bytes on disk per 1,000 recorded
//! reconciles of the static-site component, with the engine's manager, the
//! real `WasmLoader` and the embedded API server in this process.
//!
//! Two workloads over `parents` StaticSites:
//! 1. **changes**: every parent's content edited, round after round, until
//!    `target` plugin calls are recorded (every request and answer new);
//! 2. **unchanged inputs**: the WasmController's resync period flipped, which
//!    restarts the controller and reconciles every parent again with inputs
//!    unchanged (what resyncs and restarts look like; requests and answers
//!    are shared blobs), until `target` more calls are recorded.
//!
//! Byte counts do not depend on the build profile:
//!
//!     cargo run -p wr-tests --bin record_size [parents=100] [target=1000]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wr_engine::WasmController;
use wr_engine::record::{BLOBS_DIR, RECORDS_DIR, RecordOptions, Recorder, SecretPolicy, store};
use wr_tests::bench::static_site_ar;
use wr_tests::cluster::{Env, install_crd};

fn example(path: &str) -> Result<Value> {
    let p = wr_tests::plugins::workspace_root()
        .join("examples")
        .join(path);
    Ok(serde_yaml::from_str(&std::fs::read_to_string(p)?)?)
}

/// (records, record bytes, blobs, blob bytes).
fn usage(dir: &Path) -> Result<(usize, u64, usize, u64)> {
    let mut out = (0, 0, 0, 0);
    for e in std::fs::read_dir(dir.join(RECORDS_DIR))? {
        out.0 += 1;
        out.1 += e?.metadata()?.len();
    }
    for e in std::fs::read_dir(dir.join(BLOBS_DIR))? {
        out.2 += 1;
        out.3 += e?.metadata()?.len();
    }
    Ok(out)
}

/// Waits until the store holds at least `n` records and has been quiet for a second.
async fn settle(dir: &Path, n: usize) -> Result<usize> {
    let mut last = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = store::read_records(dir)?.len();
        if now >= n && now == last {
            return Ok(now);
        }
        last = now;
    }
}

fn report(what: &str, before: (usize, u64, usize, u64), after: (usize, u64, usize, u64)) {
    let records = after.0 - before.0;
    let bytes = (after.1 + after.3) - (before.1 + before.3);
    let per_1000 = bytes as f64 * 1000.0 / records.max(1) as f64;
    println!(
        "{what}: {records} records, {} new blobs, {bytes} bytes ({} in records, {} in blobs): {:.0} KiB per 1,000 reconciles",
        after.2 - before.2,
        after.1 - before.1,
        after.3 - before.3,
        per_1000 / 1024.0
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let parents = args.first().copied().unwrap_or(100);
    let target = args.get(1).copied().unwrap_or(1000);

    let mut env = Env::start_with_wasm().await?;
    let dir = env.dir.path().join("records");
    env.opts.recorder = Some(Arc::new(Recorder::start(RecordOptions {
        dir: dir.clone(),
        max_records: 1_000_000,
        max_bytes: u64::MAX,
        secrets: SecretPolicy::Redact,
    })?));
    install_crd(&env.client, example("static-site/crd.yaml")?).await?;
    let mut wc = example("static-site/controller.yaml")?;
    let path = wr_tests::plugins::plugin_path("static-site");
    wc["spec"]["plugin"] = json!({"path": path.display().to_string(), "config": wc["spec"]["plugin"]["config"].clone()});
    env.create_controller(wc).await?;
    env.start_manager();
    let sites: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &static_site_ar());
    let site: DynamicObject = serde_json::from_value(example("static-site/site.yaml")?)?;
    for i in 0..parents {
        let mut s = site.clone();
        s.metadata.name = Some(format!("site-{i}"));
        sites.create(&PostParams::default(), &s).await?;
    }
    let zero = usage(&dir)?;

    // 1. Content edits until `target` calls are recorded.
    let mut round = 0;
    while store::read_records(&dir)?.len() < target {
        round += 1;
        for i in 0..parents {
            let patch =
                json!({"spec": {"content": {"index.html": format!("<h1>round {round}</h1>")}}});
            sites
                .patch(
                    &format!("site-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let n = settle(&dir, target).await?;
    let changed = usage(&dir)?;
    report("changes", zero, changed);

    // 2. Controller restarts: every parent again, inputs unchanged.
    let wcs: Api<WasmController> = Api::all(env.client.clone());
    let mut flip = 0;
    while store::read_records(&dir)?.len() < n + target {
        flip += 1;
        let patch = json!({"spec": {"resyncPeriodSeconds": 600 + flip}});
        wcs.patch(
            "static-site",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        settle(&dir, 0).await?;
    }
    settle(&dir, n + target).await?;
    report("unchanged inputs", changed, usage(&dir)?);
    env.stop_manager().await;
    Ok(())
}
