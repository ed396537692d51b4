//! Fairness between controllers on one host (issue 19): a noisy controller
//! with a deep backlog must not starve a quiet one. Controller A has 10,000
//! StaticSite parents queued and 96 workers; controller B's 10 parents
//! (Widgets, the same static-site component, 4 workers) are created once A is
//! working through its backlog. Each controller has its own queue; the host's
//! budget of concurrent reconciles (here 8 "turns", `ManagerOptions::
//! reconcile_slots`) is handed out round-robin among controllers with waiting
//! workers (`wr_engine::turns`), so B gets every other turn as soon as it has
//! work instead of queueing behind A's 96 workers. B's parents must all
//! converge while A has made only a little progress: with first-come
//! first-served slots (before round-robin turns) A reconciled ~586 parents
//! while B converged (docs/benchmarks.md, "Fairness between controllers").
//!
//! Real wasm components in one shared runtime, the engine's real
//! `kube::Client`, the embedded API server over loopback; the referee is the
//! server's request log (how many of A's parents had their children written
//! between B's creation and B's parents all being Ready), not the clock.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};
use wr_apiserver::RequestRecord;
use wr_tests::cluster::*;

/// A's backlog and B's parents (the numbers).
const A_PARENTS: usize = 10_000;
const B_PARENTS: usize = 10;
/// B must be done before A has reconciled this many more parents. With turns
/// alternating, A runs about as many reconciles as B needs (~2 passes over
/// its 10 parents, 4 at a time) plus the log polling's lag; served first come
/// first served, A's 96 workers would hold almost every turn.
const A_MORE_AT_MOST: usize = 300;
/// A's workers: far more than the host's turns, so that A always has workers
/// waiting for a turn when B asks for one.
const A_WORKERS: u32 = 96;
/// The host's budget of concurrent reconciles (`--reconcile-slots`).
const SLOTS: usize = 8;

fn site_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("examples.wasm-reconciler.dev", "v1alpha1", "StaticSite"),
        "staticsites",
    )
}

fn site_spec(i: usize) -> Value {
    json!({"image": "nginx:1.27", "replicas": 1, "port": 8080,
           "content": {"index.html": format!("<h1>{i}</h1>")}})
}

/// A WasmController running the static-site component on `parent` with
/// `workers` concurrent reconciles.
fn controller(name: &str, parent_api_version: &str, parent: &str, workers: u32) -> Value {
    json!({
        "apiVersion": "wasm-reconciler.dev/v1alpha1",
        "kind": "WasmController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": parent_api_version, "resource": parent},
            "childResources": [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "v1", "resource": "services"},
                {"apiVersion": "v1", "resource": "configmaps"}
            ],
            "plugin": {
                "path": wr_tests::plugins::plugin_path("static-site").display().to_string(),
                "config": {"clusterDomain": "cluster.local"}
            },
            "resyncPeriodSeconds": 3600,
            "maxConcurrentReconciles": workers
        }
    })
}

/// Parents (named `prefix…`) whose Deployment the host has written
/// successfully: a parent's first reconcile writes its children, and its
/// status follows on a later pass, once the children are in the cache.
fn reconciled(log: &[RequestRecord], prefix: &str) -> BTreeSet<String> {
    log.iter()
        .filter(|r| r.is_write() && r.resource == "deployments")
        .filter(|r| (200..300).contains(&r.code))
        .filter_map(|r| r.name.clone())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Parents of `resource` with a successful status write.
fn status_written(log: &[RequestRecord], resource: &str) -> usize {
    log.iter()
        .filter(|r| r.is_write() && r.resource == resource)
        .filter(|r| r.subresource.as_deref() == Some("status"))
        .filter(|r| (200..300).contains(&r.code))
        .filter_map(|r| r.name.as_deref())
        .collect::<BTreeSet<_>>()
        .len()
}

fn is_ready(o: &DynamicObject) -> bool {
    ready_of(o).is_some_and(|(s, _, g)| s == "True" && g == o.metadata.generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_backlog_does_not_starve_another_controller() -> Result<()> {
    let mut env = Env::start_with_wasm().await?;
    if env.server.is_real() {
        // 10,000 parents on the shared real control plane would slow every
        // other test on it; the property is the host's, not the server's.
        eprintln!("skipped on the real cluster: 10,000 parents would load the shared server");
        return Ok(());
    }
    let root = wr_tests::plugins::workspace_root();
    let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(
        root.join("examples/static-site/crd.yaml"),
    )?)?;
    install_crd(&env.client, crd).await?;
    let ns = env.ns("default");
    let t0 = Instant::now();

    // A's backlog exists before the host starts, so all of it is queued at once.
    let sites: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &ns, &site_ar());
    futures::stream::iter(0..A_PARENTS)
        .map(|i| {
            let sites = sites.clone();
            let ns = ns.clone();
            async move {
                let o: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "examples.wasm-reconciler.dev/v1alpha1", "kind": "StaticSite",
                    "metadata": {"name": format!("a{i:05}"), "namespace": ns},
                    "spec": site_spec(i)
                }))?;
                sites
                    .create(&PostParams::default(), &o)
                    .await
                    .with_context(|| format!("creating StaticSite a{i:05}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;
    eprintln!(
        "fairness: {A_PARENTS} parents of A created in {:?}",
        t0.elapsed()
    );
    env.create_controller(controller(
        "noisy-a",
        "examples.wasm-reconciler.dev/v1alpha1",
        "staticsites",
        A_WORKERS,
    ))
    .await?;
    env.create_controller(controller(
        "quiet-b",
        &format!("{TEST_GROUP}/v1"),
        "widgets",
        4,
    ))
    .await?;
    env.opts.reconcile_slots = SLOTS;
    env.server.clear_requests();
    env.start_manager();

    // B's parents are created once A is reconciling its backlog.
    eventually("A to start on its backlog", 300, || async {
        (!reconciled(&env.server.requests(), "a").is_empty()).then_some(())
    })
    .await?;
    let a_done_before = reconciled(&env.server.requests(), "a").len();
    eprintln!("fairness: A started on its backlog at {:?}", t0.elapsed());
    let started = Instant::now();
    for i in 0..B_PARENTS {
        env.create_widget("default", &format!("b{i:02}"), site_spec(i))
            .await?;
    }
    let widgets = env.widgets("default");
    eventually("all of B's parents Ready", 600, || async {
        let list = widgets.list(&ListParams::default()).await.ok()?;
        (list.items.iter().filter(|o| is_ready(o)).count() == B_PARENTS).then_some(())
    })
    .await?;
    let b_took = started.elapsed();
    let log = env.server.requests();
    let a_done = reconciled(&log, "a").len();
    let a_status = status_written(&log, "staticsites");
    let b_done = status_written(&log, "widgets");
    eprintln!(
        "fairness: A had reconciled {a_done_before} of {A_PARENTS} parents when B's {B_PARENTS} \
         were created and {a_done} when they were all Ready ({b_took:?}; status written: A \
         {a_status}, B {b_done})"
    );
    ensure!(
        b_done == B_PARENTS,
        "B's parents are Ready but the log shows status writes for {b_done} of them"
    );
    let a_more = a_done.saturating_sub(a_done_before);
    ensure!(
        a_more <= A_MORE_AT_MOST,
        "controller B waited behind A's backlog: A reconciled {a_more} more of its {A_PARENTS} \
         parents while B's {B_PARENTS} converged (at most {A_MORE_AT_MOST} allowed)"
    );
    Ok(())
}
