//! Protobuf: bodies sent as `application/vnd.kubernetes.protobuf` (what
//! kubectl's generators send: create namespace/configmap/secret/deployment/
//! service/role/rolebinding) and responses asked for as protobuf.

use serde_json::json;

use crate::pb::{Msg, envelope, envelope_type, meta};
use crate::run::Run;
use crate::target::{PROTOBUF, Req};

fn container(name: &str, image: &str) -> Msg {
    Msg::new().str(1, name).str(2, image)
}

pub async fn protobuf(r: &Run) -> anyhow::Result<()> {
    let ns = r.namespace("protobuf").await?;
    let labels = [("app", "web")];
    let deployment = Msg::new().msg(1, meta("web", &labels)).msg(
        2,
        Msg::new()
            .int(1, 2)
            .msg(2, Msg::new().entry(1, "app", "web"))
            .msg(
                3,
                Msg::new()
                    .msg(1, meta("", &labels))
                    .msg(2, Msg::new().msg(2, container("nginx", "nginx"))),
            ),
    );
    let service = Msg::new().msg(1, meta("web", &labels)).msg(
        2,
        Msg::new()
            .msg(
                1,
                Msg::new()
                    .str(1, "80-80")
                    .str(2, "TCP")
                    .int(3, 80)
                    .msg(4, Msg::new().int(1, 0).int(2, 80)),
            )
            .entry(2, "app", "web")
            .str(4, "ClusterIP"),
    );
    let role = Msg::new().msg(1, meta("reader", &[])).msg(
        2,
        Msg::new()
            .str(1, "get")
            .str(1, "list")
            .str(2, "")
            .str(3, "pods"),
    );
    let binding = Msg::new()
        .msg(1, meta("reader", &[]))
        .msg(
            2,
            Msg::new()
                .str(1, "User")
                .str(2, "rbac.authorization.k8s.io")
                .str(3, "alice"),
        )
        .msg(
            3,
            Msg::new()
                .str(1, "rbac.authorization.k8s.io")
                .str(2, "Role")
                .str(3, "reader"),
        );
    let cm = Msg::new()
        .msg(1, meta("settings", &[]))
        .entry(2, "mode", "fast");
    let secret = Msg::new()
        .msg(1, meta("token", &[]))
        .msg(2, Msg::new().str(1, "t").bytes(2, b"s3cret"))
        .str(3, "Opaque");
    let namespace = Msg::new().msg(1, meta(&r.ns("pbns"), &[]));
    let cases = [
        (
            "configmap",
            "v1",
            "ConfigMap",
            format!("/api/v1/namespaces/{ns}/configmaps"),
            cm,
        ),
        (
            "secret",
            "v1",
            "Secret",
            format!("/api/v1/namespaces/{ns}/secrets"),
            secret,
        ),
        (
            "namespace",
            "v1",
            "Namespace",
            "/api/v1/namespaces".to_string(),
            namespace,
        ),
        (
            "deployment",
            "apps/v1",
            "Deployment",
            format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            deployment,
        ),
        (
            "service",
            "v1",
            "Service",
            format!("/api/v1/namespaces/{ns}/services"),
            service,
        ),
        (
            "role",
            "rbac.authorization.k8s.io/v1",
            "Role",
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            role,
        ),
        (
            "rolebinding",
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
            binding,
        ),
    ];
    for (id, av, kind, path, msg) in cases {
        let resp = r
            .send(
                Req::get(path)
                    .method("POST")
                    .content_type(PROTOBUF)
                    .raw_body(envelope(av, kind, msg)),
            )
            .await?;
        let mut v = Run::view(&resp);
        if let Some(b) = v["body"].as_object_mut() {
            b.remove("status");
        }
        r.record(&format!("protobuf/create-{id}"), v);
    }
    r.call(
        "protobuf/garbage-body",
        Req::get(format!("/api/v1/namespaces/{ns}/configmaps"))
            .method("POST")
            .content_type(PROTOBUF)
            .raw_body(b"k8s\0\x0a\xff".to_vec()),
    )
    .await?;
    for (id, path, accept) in [
        (
            "get-configmap",
            format!("/api/v1/namespaces/{ns}/configmaps/settings"),
            PROTOBUF,
        ),
        (
            "get-deployment",
            format!("/apis/apps/v1/namespaces/{ns}/deployments/web"),
            PROTOBUF,
        ),
        (
            "list-configmaps",
            format!("/api/v1/namespaces/{ns}/configmaps"),
            PROTOBUF,
        ),
        (
            "kubectl-accept",
            format!("/api/v1/namespaces/{ns}/configmaps/settings"),
            "application/vnd.kubernetes.protobuf, */*",
        ),
    ] {
        let resp = r.send(Req::get(path).accept(accept)).await?;
        r.record(
            &format!("protobuf/{id}"),
            json!({"code": resp.code, "contentType": resp.content_type, "envelope": envelope_type(&resp.body)}),
        );
    }
    Ok(())
}
