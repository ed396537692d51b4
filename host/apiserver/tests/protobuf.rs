//! Protobuf at the wire: requests and responses built and read with
//! `k8s-pb` (kube-rs's generated types, independent of the server's own
//! descriptor-driven codec), as client-go and kubectl's typed clients send
//! them.

mod common;

use std::collections::BTreeMap;

use http_body_util::BodyExt;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::{Value, json};

const PB: &str = "application/vnd.kubernetes.protobuf";

/// What client-go's typed clients send.
fn accept_any() -> String {
    format!("{PB}, */*")
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// The object message inside an enveloped body, with its type.
fn open(body: &[u8]) -> (String, String, Vec<u8>) {
    let rest = body.strip_prefix(b"k8s\0").expect("protobuf magic");
    let u = Unknown::decode(rest).expect("runtime.Unknown");
    let tm = u.type_meta.unwrap_or_default();
    (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
        u.raw.unwrap_or_default(),
    )
}

/// A Deployment as Go's protobuf marshaller writes it for `kubectl create
/// deployment web --image nginx --replicas 2 --port 80`: non-pointer scalars
/// are on the wire even when zero, pointers only when set.
fn go_deployment() -> apps::Deployment {
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            generate_name: Some(String::new()),
            namespace: Some(String::new()),
            self_link: Some(String::new()),
            uid: Some(String::new()),
            resource_version: Some(String::new()),
            generation: Some(0),
            labels: labels.clone(),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(2),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("nginx".into()),
                        image: Some("nginx".into()),
                        ports: vec![core::ContainerPort {
                            name: Some(String::new()),
                            host_port: Some(0),
                            container_port: Some(80),
                            protocol: Some(String::new()),
                            host_ip: Some(String::new()),
                        }],
                        resources: Some(Default::default()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            strategy: Some(Default::default()),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(Default::default()),
    }
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> anyhow::Result<(u16, String, Vec<u8>)> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(body)?;
    let resp = client.send(req.map(kube::client::Body::from)).await?;
    let code = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = resp.into_body().collect().await?.to_bytes().to_vec();
    Ok((code, ct, bytes))
}

#[tokio::test]
async fn protobuf_client_creates_reads_lists_and_watches_a_deployment() -> anyhow::Result<()> {
    let (_server, client) = common::server().await?;
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let body = envelope("apps/v1", "Deployment", go_deployment().encode_to_vec());
    let accept = format!("{PB}, */*");
    let (code, ct, bytes) = send(&client, "POST", path, PB, &accept, body).await?;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(ct, PB);
    let (av, kind, raw) = open(&bytes);
    assert_eq!((av.as_str(), kind.as_str()), ("apps/v1", "Deployment"));
    let created = apps::Deployment::decode(raw.as_slice())?;
    let m = created.metadata.clone().unwrap_or_default();
    assert_eq!(m.name.as_deref(), Some("web"));
    assert_eq!(m.namespace.as_deref(), Some("default"));
    assert!(
        m.uid.is_some_and(|u| !u.is_empty()),
        "server assigned a uid"
    );
    assert!(
        m.creation_timestamp
            .and_then(|t| t.seconds)
            .is_some_and(|s| s > 0)
    );
    let spec = created.spec.clone().unwrap_or_default();
    assert_eq!(spec.replicas, Some(2));
    let c = &spec
        .template
        .unwrap_or_default()
        .spec
        .unwrap_or_default()
        .containers[0];
    assert_eq!(c.image.as_deref(), Some("nginx"));
    assert_eq!(c.ports[0].container_port, Some(80));

    // Stored as the real server stores it: the Go zero values of
    // `omitempty` fields are gone, pointers and required fields are kept.
    let (code, _, json_bytes) = send(
        &client,
        "GET",
        &format!("{path}/web"),
        "",
        "application/json",
        vec![],
    )
    .await?;
    assert_eq!(code, 200);
    let stored: Value = serde_json::from_slice(&json_bytes)?;
    assert_eq!(stored["spec"]["replicas"], 2);
    assert_eq!(stored["spec"].get("paused"), None);
    assert_eq!(stored["spec"].get("minReadySeconds"), None);
    assert_eq!(stored["metadata"].get("generateName"), None);
    let port = &stored["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(port["containerPort"], 80);
    for zero in ["hostPort", "name", "hostIP"] {
        assert_eq!(port.get(zero), None, "{zero} in {port}");
    }

    // get, list and a 404 in protobuf.
    let (code, ct, bytes) =
        send(&client, "GET", &format!("{path}/web"), "", &accept, vec![]).await?;
    assert_eq!((code, ct.as_str()), (200, PB));
    let got = apps::Deployment::decode(open(&bytes).2.as_slice())?;
    assert_eq!(got.metadata, created.metadata);
    let (code, _, bytes) = send(&client, "GET", path, "", &accept, vec![]).await?;
    assert_eq!(code, 200);
    let (_, kind, raw) = open(&bytes);
    assert_eq!(kind, "DeploymentList");
    let list = apps::DeploymentList::decode(raw.as_slice())?;
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.and_then(|m| m.resource_version).is_some());
    let (code, ct, bytes) = send(
        &client,
        "GET",
        &format!("{path}/missing"),
        "",
        &accept,
        vec![],
    )
    .await?;
    assert_eq!((code, ct.as_str()), (404, PB));
    let (av, kind, raw) = open(&bytes);
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "Status"));
    let status = meta::Status::decode(raw.as_slice())?;
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(status.code, Some(404));

    // A watch: length-prefixed WatchEvent frames, each object enveloped.
    let req = http::Request::builder()
        .uri(format!("{path}?watch=true&timeoutSeconds=1"))
        .header("accept", &accept)
        .body(Vec::new())?;
    let resp = client.send(req.map(kube::client::Body::from)).await?;
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let bytes = resp.into_body().collect().await?.to_bytes().to_vec();
    let len = u32::from_be_bytes(bytes[..4].try_into()?) as usize;
    let ev = meta::WatchEvent::decode(&bytes[4..4 + len])?;
    assert_eq!(ev.r#type.as_deref(), Some("ADDED"));
    let (_, kind, raw) = open(&ev.object.and_then(|o| o.raw).unwrap_or_default());
    assert_eq!(kind, "Deployment");
    assert_eq!(
        apps::Deployment::decode(raw.as_slice())?.metadata,
        created.metadata
    );
    Ok(())
}

#[tokio::test]
async fn protobuf_delete_options_and_json_fallbacks() -> anyhow::Result<()> {
    let (_server, client) = common::server().await?;
    let path = "/api/v1/namespaces/default/configmaps";
    let cm = core::ConfigMap {
        metadata: Some(meta::ObjectMeta {
            name: Some("cfg".into()),
            ..Default::default()
        }),
        data: BTreeMap::from([("k".to_string(), "v".to_string())]),
        ..Default::default()
    };
    let (code, ct, _) = send(
        &client,
        "POST",
        path,
        PB,
        "application/json",
        envelope("v1", "ConfigMap", cm.encode_to_vec()),
    )
    .await?;
    assert_eq!(
        (code, ct.as_str()),
        (201, "application/json"),
        "JSON asked, JSON answered"
    );
    let opts = meta::DeleteOptions {
        preconditions: Some(meta::Preconditions {
            resource_version: Some("1".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (code, _, bytes) = send(
        &client,
        "DELETE",
        &format!("{path}/cfg"),
        PB,
        PB,
        envelope("v1", "DeleteOptions", opts.encode_to_vec()),
    )
    .await?;
    assert_eq!(
        code, 409,
        "the stale precondition in the protobuf body applies"
    );
    assert_eq!(
        meta::Status::decode(open(&bytes).2.as_slice())?
            .reason
            .as_deref(),
        Some("Conflict")
    );

    // `/version` is not a kind: JSON, or 406 if the client takes only protobuf.
    let (code, ct, _) = send(&client, "GET", "/version", "", &accept_any(), vec![]).await?;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    let (code, ct, bytes) = send(&client, "GET", "/version", "", PB, vec![]).await?;
    assert_eq!((code, ct.as_str()), (406, PB));
    assert_eq!(
        meta::Status::decode(open(&bytes).2.as_slice())?
            .reason
            .as_deref(),
        Some("NotAcceptable")
    );
    // Discovery documents are kinds with messages.
    let (code, ct, bytes) = send(&client, "GET", "/apis/apps/v1", "", PB, vec![]).await?;
    assert_eq!((code, ct.as_str()), (200, PB));
    let list = meta::APIResourceList::decode(open(&bytes).2.as_slice())?;
    let deployments = list
        .resources
        .iter()
        .find(|r| r.name.as_deref() == Some("deployments"))
        .expect("deployments in apps/v1");
    assert!(
        deployments
            .verbs
            .as_ref()
            .is_some_and(|v| v.items.iter().any(|v| v == "create"))
    );
    Ok(())
}

#[tokio::test]
async fn custom_resources_are_never_protobuf() -> anyhow::Result<()> {
    let (_server, client) = common::server().await?;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    // The CRD itself is a built-in kind: answered in protobuf.
    let (code, _, bytes) = send(
        &client,
        "POST",
        crds,
        "application/json",
        PB,
        serde_json::to_vec(&crd)?,
    )
    .await?;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(open(&bytes).1, "CustomResourceDefinition");
    common::eventually(|| async {
        send(
            &client,
            "GET",
            "/apis/example.com/v1",
            "",
            "application/json",
            vec![],
        )
        .await
        .is_ok_and(|r| r.0 == 200)
    })
    .await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let body = serde_json::to_vec(
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}}),
    )?;
    let (code, ct, _) = send(
        &client,
        "POST",
        widgets,
        "application/json",
        &format!("{PB}, application/json"),
        body,
    )
    .await?;
    assert_eq!(
        (code, ct.as_str()),
        (201, "application/json"),
        "JSON when protobuf is impossible"
    );
    let (code, ct, bytes) = send(&client, "GET", widgets, "", PB, vec![]).await?;
    assert_eq!(
        (code, ct.as_str()),
        (406, PB),
        "protobuf only: not acceptable"
    );
    let status = meta::Status::decode(open(&bytes).2.as_slice())?;
    assert_eq!(
        status.message.as_deref(),
        Some(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        )
    );
    let raw = meta::ObjectMeta {
        name: Some("b".into()),
        ..Default::default()
    }
    .encode_to_vec();
    let (code, _, bytes) = send(
        &client,
        "POST",
        widgets,
        PB,
        "application/json",
        envelope("example.com/v1", "Widget", raw),
    )
    .await?;
    assert_eq!(code, 400, "a protobuf body for a custom resource");
    let status: Value = serde_json::from_slice(&bytes)?;
    assert!(
        status["message"].as_str().is_some_and(
            |m| m.starts_with("Widget in version \"v1\" cannot be handled as a Widget")
        ),
        "{status}"
    );
    Ok(())
}
