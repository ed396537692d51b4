//! Throughput and latency of the embedded API server, through a real
//! `kube::Client` over loopback (what the host's own benchmarks see).
//! Run: `cargo bench -p wr-apiserver --bench apiserver`; results go into
//! `docs/benchmarks.md` by hand. Plain `main` (no criterion): each figure is
//! one long run, and the list/watch figures need custom timing.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{
    Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), "bench".to_string())].into()),
            ..Default::default()
        },
        data: Some([("key".to_string(), "value".repeat(8))].into()),
        ..Default::default()
    }
}

fn client(url: &str) -> anyhow::Result<Client> {
    let mut kc = kube::Config::new(url.parse()?);
    kc.default_retry = false;
    Ok(Client::try_from(kc)?)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// `total` writes by `clients` concurrent clients, each with its own connection.
async fn writes(
    url: &str,
    ns: &str,
    clients: usize,
    total: usize,
    update: bool,
) -> anyhow::Result<f64> {
    let per = total / clients;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let api: Api<ConfigMap> = Api::namespaced(client(url)?, ns);
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                let name = format!("c{c}-{i}");
                if update {
                    let p = json!({"data": {"key": format!("v{i}")}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&p))
                        .await?;
                } else {
                    api.create(&PostParams::default(), &cm(&name)).await?;
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok((per * clients) as f64 / start.elapsed().as_secs_f64())
}

async fn ensure_ns(url: &str, ns: &str) -> anyhow::Result<()> {
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client(url)?);
    let mut n = k8s_openapi::api::core::v1::Namespace::default();
    n.metadata.name = Some(ns.into());
    nss.create(&PostParams::default(), &n).await?;
    Ok(())
}

async fn list_latency(url: &str, ns: &str) -> anyhow::Result<Duration> {
    let api: Api<ConfigMap> = Api::namespaced(client(url)?, ns);
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let l = api.list(&ListParams::default()).await?;
        best = best.min(t.elapsed());
        assert!(!l.items.is_empty());
    }
    Ok(best)
}

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

async fn watch_latency(url: &str, watchers: usize, events: usize) -> anyhow::Result<(f64, f64)> {
    ensure_ns(url, "watch").await?;
    let mut handles = Vec::new();
    for _ in 0..watchers {
        let api: Api<ConfigMap> = Api::namespaced(client(url)?, "watch");
        let mut stream = api
            .watch(&WatchParams::default().timeout(120), "0")
            .await?
            .boxed();
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while lat.len() < events {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(c))) => {
                        let sent: u128 = c
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get("sent"))
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        lat.push((now_micros() - sent) as f64);
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
            lat
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let api: Api<ConfigMap> = Api::namespaced(client(url)?, "watch");
    for i in 0..events {
        let mut c = cm(&format!("w{i}"));
        c.metadata.annotations = Some([("sent".to_string(), now_micros().to_string())].into());
        api.create(&PostParams::default(), &c).await?;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await?);
    }
    all.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| all[((all.len() as f64 - 1.0) * p) as usize] / 1000.0;
    Ok((pct(0.5), pct(0.99)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rss0 = rss_kib();
    let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
    let url = server.url();
    ensure_ns(&url, "one").await?;
    ensure_ns(&url, "many").await?;
    let c1 = writes(&url, "one", 1, 3_000, false).await?;
    let u1 = writes(&url, "one", 1, 3_000, true).await?;
    let c16 = writes(&url, "many", 16, 16_000, false).await?;
    let u16 = writes(&url, "many", 16, 16_000, true).await?;
    println!("creates/s  1 client : {c1:.0}");
    println!("updates/s  1 client : {u1:.0}");
    println!("creates/s 16 clients: {c16:.0}");
    println!("updates/s 16 clients: {u16:.0}");

    ensure_ns(&url, "l10k").await?;
    writes(&url, "l10k", 16, 10_000, false).await?;
    let l10k = list_latency(&url, "l10k").await?;
    println!("list 10k objects    : {:.1} ms", l10k.as_secs_f64() * 1e3);
    let rss_before = rss_kib();
    ensure_ns(&url, "l100k").await?;
    writes(&url, "l100k", 16, 100_000, false).await?;
    let rss_after = rss_kib();
    let l100k = list_latency(&url, "l100k").await?;
    println!("list 100k objects   : {:.1} ms", l100k.as_secs_f64() * 1e3);
    println!(
        "memory per object   : {:.2} KiB (RSS {} -> {} KiB for 100k ConfigMaps; process start {} KiB)",
        (rss_after.saturating_sub(rss_before)) as f64 / 100_000.0,
        rss_before,
        rss_after,
        rss0
    );
    let (p50, p99) = watch_latency(&url, 10, 500).await?;
    println!("watch delivery, 10 watchers: p50 {p50:.2} ms, p99 {p99:.2} ms");
    server.shutdown().await;
    Ok(())
}
