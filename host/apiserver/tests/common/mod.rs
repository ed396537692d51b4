//! Shared helpers of the conformance tests: a server per test and a real
//! `kube::Client` talking to it over loopback.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::ObjectMeta;
use wr_apiserver::{Config, RunningServer};

pub async fn server_with(config: Config) -> anyhow::Result<(RunningServer, Client)> {
    let server = wr_apiserver::start(config).await?;
    // No client-side retries: tests see each injected 429/503/504 as is.
    let mut kc = kube::Config::new(server.url().parse()?);
    kc.default_retry = false;
    let client = Client::try_from(kc)?;
    Ok((server, client))
}

pub async fn server() -> anyhow::Result<(RunningServer, Client)> {
    server_with(Config::default()).await
}

/// The API `Status` of a failed call.
pub fn status(r: Result<impl std::fmt::Debug, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

/// Poll `check` until it holds (10 s at most). Background work (GC,
/// namespace cleanup) is asynchronous, as on a real cluster.
pub async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

pub fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
