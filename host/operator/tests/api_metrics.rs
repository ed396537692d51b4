//! The client layer counts real requests to the embedded API server.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use wr_operator::{ApiMetricsLayer, Liveness, Metrics};

#[tokio::test]
async fn requests_are_counted_by_verb_and_code() -> anyhow::Result<()> {
    let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::new(
        &mut registry,
        Liveness::new(Duration::from_secs(60)),
    ));
    let config = kube::Config::new(server.url().parse()?);
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&ApiMetricsLayer::new(metrics.clone()))
        .build();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(api.get_opt("missing").await?.is_none());
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("x".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await?;
    api.get("x").await?;
    api.list(&Default::default()).await?;

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    for line in [
        r#"wasm_reconciler_api_requests_total{verb="get",code="404"} 1"#,
        r#"wasm_reconciler_api_requests_total{verb="get",code="200"} 1"#,
        r#"wasm_reconciler_api_requests_total{verb="create",code="201"} 1"#,
        r#"wasm_reconciler_api_requests_total{verb="list",code="200"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    server.shutdown().await;
    Ok(())
}
