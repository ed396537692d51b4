//! Fault injection, the request log and persistence, through a real `kube::Client`.

mod common;

use common::{cm, server, server_with, status};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use wr_apiserver::{Config, FaultAction, FaultRule, FaultSpec, WatchFaults};

fn rule(verbs: &[&str], action: FaultAction) -> FaultRule {
    FaultRule::new(verbs, 1.0, action)
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<http::Response<kube::client::Body>> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body))?;
    Ok(client.send(req).await?)
}

#[tokio::test]
async fn error_faults_answer_with_status_and_commit_nothing() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cases = [
        (FaultAction::Conflict, 409, "Conflict"),
        (
            FaultAction::TooManyRequests {
                retry_after_seconds: 3,
            },
            429,
            "TooManyRequests",
        ),
        (FaultAction::InternalError, 500, "InternalError"),
        (FaultAction::Unavailable, 503, "ServiceUnavailable"),
        (
            FaultAction::Timeout {
                hold_ms: 10,
                drop_connection: false,
            },
            504,
            "Timeout",
        ),
    ];
    for (action, code, reason) in cases {
        srv.faults().set(FaultSpec {
            rules: vec![rule(&["create"], action.clone())],
            ..Default::default()
        });
        let e = status(api.create(&PostParams::default(), &cm("x", &[])).await);
        assert_eq!((e.code, e.reason.as_str()), (code, reason), "{action:?}");
        assert!(
            api.get_opt("x").await?.is_none(),
            "{action:?} committed nothing"
        );
    }
    srv.faults().set(FaultSpec {
        rules: vec![rule(
            &["list"],
            FaultAction::TooManyRequests {
                retry_after_seconds: 7,
            },
        )],
        ..Default::default()
    });
    let resp = send(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        vec![],
    )
    .await?;
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("7")
    );
    srv.faults().clear();
    assert!(api.list(&ListParams::default()).await?.items.is_empty());
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn dropped_connections_with_and_without_commit() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    srv.faults().set(FaultSpec {
        rules: vec![rule(&["create"], FaultAction::CommitThenDrop)],
        ..Default::default()
    });
    let r = api
        .create(&PostParams::default(), &cm("committed", &[]))
        .await;
    assert!(
        r.is_err() && !matches!(r, Err(kube::Error::Api(_))),
        "no response: {r:?}"
    );
    srv.faults().clear();
    assert!(
        api.get_opt("committed").await?.is_some(),
        "the write was committed"
    );

    srv.faults().set(FaultSpec {
        rules: vec![rule(
            &["create"],
            FaultAction::Timeout {
                hold_ms: 10,
                drop_connection: true,
            },
        )],
        ..Default::default()
    });
    let r = api.create(&PostParams::default(), &cm("lost", &[])).await;
    assert!(
        r.is_err() && !matches!(r, Err(kube::Error::Api(_))),
        "no response: {r:?}"
    );
    srv.faults().clear();
    assert!(api.get_opt("lost").await?.is_none(), "nothing committed");
    let codes: Vec<(String, u16, Option<String>)> = srv
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .map(|r| (r.name.unwrap_or_default(), r.code, r.fault))
        .collect();
    assert_eq!(codes[0].1, 0);
    assert_eq!(codes[0].2.as_deref(), Some("commitThenDrop"));
    assert_eq!(codes[1].2.as_deref(), Some("timeout"));
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn latency_and_stale_lists() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("old", &[])).await?;
    api.create(&PostParams::default(), &cm("new", &[])).await?;
    srv.faults().set(FaultSpec {
        rules: vec![
            rule(&["list"], FaultAction::StaleList { versions_behind: 1 }),
            rule(&["get"], FaultAction::Latency { ms: 20 }),
        ],
        ..Default::default()
    });
    let stale = api.list(&ListParams::default()).await?;
    assert_eq!(
        stale.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        vec!["old"]
    );
    assert_eq!(
        stale.metadata.resource_version,
        Some((srv.resource_version() - 1).to_string())
    );
    assert!(api.get("new").await.is_ok());
    let faults: Vec<String> = srv
        .faults()
        .injected()
        .into_iter()
        .map(|i| i.fault)
        .collect();
    assert_eq!(faults, vec!["staleList", "latency"]);
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn watch_streams_are_cut_and_gone_is_forced() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = srv.resource_version().to_string();
    for n in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(n, &[])).await?;
    }
    srv.faults().set_watch(WatchFaults {
        cut_after_events: Some(2),
        ..Default::default()
    });
    let events: Vec<_> = api
        .watch(&WatchParams::default().timeout(30), &start)
        .await?
        .try_collect()
        .await?;
    assert_eq!(events.len(), 2, "cut after 2 events");

    srv.faults().set_watch(WatchFaults {
        cut_after_ms: Some(50),
        ..Default::default()
    });
    let events: Vec<_> = api
        .watch(
            &WatchParams::default().timeout(30),
            &srv.resource_version().to_string(),
        )
        .await?
        .try_collect()
        .await?;
    assert!(
        events.iter().all(|e| matches!(e, WatchEvent::Bookmark(_))),
        "stream ended by the cut"
    );

    srv.faults().set_watch(WatchFaults::default());
    srv.faults().force_gone(1);
    let events: Vec<_> = api
        .watch(&WatchParams::default(), &start)
        .await?
        .try_collect()
        .await?;
    match events.as_slice() {
        [WatchEvent::Error(s)] => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected a single 410, got {other:?}"),
    }
    // Only the next one: the following watch works again.
    let events: Vec<_> = api
        .watch(&WatchParams::default().timeout(1), &start)
        .await?
        .try_collect()
        .await?;
    assert_eq!(events.len(), 3);

    // A continued list after forced Gone.
    let page = api.list(&ListParams::default().limit(1)).await?;
    srv.faults().force_gone(1);
    let token = page.metadata.continue_.unwrap_or_default();
    let e = status(
        api.list(&ListParams::default().limit(1).continue_token(&token))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    // Watch-level faults are in the injection log too (for chaos reports):
    // the two cut-armed watches and the two forced 410s.
    let counts = srv.faults().counts();
    assert_eq!(counts.get(wr_apiserver::faults::FAULT_GONE), Some(&2));
    assert_eq!(counts.get(wr_apiserver::faults::FAULT_WATCH_CUT), Some(&2));
    srv.shutdown().await;
    Ok(())
}

async fn faulty_run(seed: u64) -> anyhow::Result<(Vec<wr_apiserver::Injected>, Vec<u16>)> {
    let (srv, client) = server_with(Config {
        seed,
        ..Default::default()
    })
    .await?;
    srv.faults().set(FaultSpec {
        rules: vec![
            FaultRule::new(&["create"], 0.3, FaultAction::InternalError),
            FaultRule::new(&["get"], 0.3, FaultAction::Unavailable),
        ],
        ..Default::default()
    });
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..40 {
        let _ = api
            .create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await;
        let _ = api.get(&format!("c{i}")).await;
    }
    let codes = srv.requests().into_iter().map(|r| r.code).collect();
    let injected = srv.faults().injected();
    srv.shutdown().await;
    Ok((injected, codes))
}

#[tokio::test]
async fn same_seed_same_fault_sequence() -> anyhow::Result<()> {
    let a = faulty_run(42).await?;
    let b = faulty_run(42).await?;
    let c = faulty_run(43).await?;
    assert!(!a.0.is_empty());
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
    Ok(())
}

#[tokio::test]
async fn admin_path_sets_faults_and_serves_the_request_log() -> anyhow::Result<()> {
    let (srv, client) = server_with(Config {
        fault_admin: true,
        ..Default::default()
    })
    .await?;
    let spec =
        json!({"rules": [{"verbs": ["create"], "rate": 1.0, "action": {"kind": "unavailable"}}]});
    let resp = send(
        &client,
        "PUT",
        "/_wr/admin/faults",
        serde_json::to_vec(&spec)?,
    )
    .await?;
    assert_eq!(resp.status().as_u16(), 200);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        status(api.create(&PostParams::default(), &cm("x", &[])).await).code,
        503
    );
    assert_eq!(
        send(&client, "DELETE", "/_wr/admin/faults", vec![])
            .await?
            .status()
            .as_u16(),
        200
    );
    api.create(&PostParams::default(), &cm("x", &[])).await?;
    let resp = send(&client, "GET", "/_wr/admin/requests", vec![]).await?;
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await?
        .to_bytes();
    let log: Vec<wr_apiserver::RequestRecord> = serde_json::from_slice(&bytes)?;
    let codes: Vec<u16> = log
        .iter()
        .filter(|r| r.verb == "create")
        .map(|r| r.code)
        .collect();
    assert_eq!(codes, vec![503, 201]);
    srv.shutdown().await;

    let (srv, client) = server().await?;
    let resp = send(&client, "GET", "/_wr/admin/requests", vec![]).await?;
    assert_eq!(resp.status().as_u16(), 404, "admin path is off by default");
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn request_log_records_verbs_managers_and_patch_types() -> anyhow::Result<()> {
    let (srv, client) = server().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("a", &[])).await?;
    api.get("a").await?;
    api.list(&ListParams::default()).await?;
    api.patch(
        "a",
        &PatchParams::apply("me"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}})),
    )
    .await?;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await?;
    api.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &cm("b", &[]),
    )
    .await?;
    api.delete("a", &Default::default()).await?;
    let log = srv.requests();
    let verbs: Vec<&str> = log.iter().map(|r| r.verb.as_str()).collect();
    assert_eq!(
        verbs,
        vec![
            "create", "get", "list", "patch", "patch", "create", "delete"
        ]
    );
    assert_eq!(log.iter().filter(|r| r.is_write()).count(), 5);
    assert_eq!(log[3].field_manager.as_deref(), Some("me"));
    assert_eq!(log[3].patch_type.as_deref(), Some("apply"));
    assert_eq!(log[4].patch_type.as_deref(), Some("merge"));
    assert!(log[5].dry_run);
    assert_eq!(
        (
            log[0].resource.as_str(),
            log[0].namespace.as_deref(),
            log[0].code
        ),
        ("configmaps", Some("default"), 201)
    );
    srv.clear_requests();
    assert!(srv.requests().is_empty());
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn persisted_objects_survive_a_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = || Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let (srv, client) = server_with(config()).await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api
        .create(&PostParams::default(), &cm("a", &[("k", "v")]))
        .await?;
    api.create(&PostParams::default(), &cm("b", &[])).await?;
    api.delete("b", &Default::default()).await?;
    let rv_before = srv.resource_version();
    srv.shutdown().await;

    let (srv, client) = server_with(config()).await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let back = api.get("a").await?;
    assert_eq!(back.metadata.uid, a.metadata.uid);
    assert_eq!(back.metadata.resource_version, a.metadata.resource_version);
    assert!(api.get_opt("b").await?.is_none());
    assert_eq!(srv.resource_version(), rv_before);
    let c = api.create(&PostParams::default(), &cm("c", &[])).await?;
    assert!(common::rv(&c.metadata) > rv_before);
    // No clean shutdown this time: the write-ahead log alone must hold the write.
    drop(srv);
    let (srv2, client) = server_with(Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    })
    .await?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(api.get_opt("c").await?.is_some());
    srv2.shutdown().await;
    Ok(())
}
