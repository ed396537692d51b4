//! Authentication and RBAC of the embedded server (issue 20, item 18),
//! through real `kube::Client`s presenting the admin token, ServiceAccount
//! tokens from the TokenRequest subresource, or nothing.

mod common;

use common::status;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wr_apiserver::{AuthConfig, AuthorizationMode, Config, RunningServer};

async fn client_with(url: &str, token: Option<&str>) -> anyhow::Result<Client> {
    let yaml = wr_apiserver::kubeconfig::kubeconfig_yaml_with_token(url, token);
    let kc = kube::config::Kubeconfig::from_yaml(&yaml)?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    cfg.default_retry = false;
    Ok(Client::try_from(cfg)?)
}

async fn rbac_server() -> anyhow::Result<(RunningServer, Client)> {
    let srv = wr_apiserver::start(Config {
        auth: AuthConfig {
            authorization: AuthorizationMode::Rbac,
            ..Default::default()
        },
        ..Default::default()
    })
    .await?;
    let admin = client_with(&srv.url(), Some(&srv.admin_token())).await?;
    Ok((srv, admin))
}

/// POST `body` to `path`: (code, JSON body).
async fn post(client: &Client, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
    send(client, "POST", path, body).await
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    body: Value,
) -> anyhow::Result<(u16, Value)> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body)?))?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await?
        .to_bytes();
    Ok((code, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

async fn apply(admin: &Client, path: &str, obj: Value) -> anyhow::Result<()> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!("{path}/{name}?fieldManager=test&force=true"))
        .header("content-type", "application/apply-patch+yaml")
        .body(kube::client::Body::from(serde_json::to_vec(&obj)?))?;
    let resp = admin.send(req).await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "apply {path}/{name}: {}",
        resp.status()
    );
    Ok(())
}

/// Namespace `x`, ServiceAccount `x/bot` and a token for it (`kubectl create token bot -n x`).
async fn bot(admin: &Client) -> anyhow::Result<String> {
    apply(
        admin,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
    )
    .await?;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "x");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "bot"}}))?,
    )
    .await?;
    let (code, tr) = post(
        admin,
        "/api/v1/namespaces/x/serviceaccounts/bot/token",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await?;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    assert!(tr["status"]["expirationTimestamp"].is_string());
    Ok(tr["status"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

const BOT: &str = "system:serviceaccount:x:bot";

#[tokio::test]
async fn service_account_tokens_get_exactly_what_their_bindings_grant() -> anyhow::Result<()> {
    let (srv, admin) = rbac_server().await?;
    let token = bot(&admin).await?;
    let sa = client_with(&srv.url(), Some(&token)).await?;

    // Nothing bound yet: kube-apiserver's 403, even for a resource this server does not serve.
    let s = status(
        Api::<ConfigMap>::namespaced(sa.clone(), "x")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        format!(
            "configmaps is forbidden: User \"{BOT}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"x\""
        )
    );
    let (code, body) = send(&sa, "GET", "/api/v1/namespaces/x/pods", Value::Null).await?;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "pods is forbidden: User \"{BOT}\" cannot list resource \"pods\" in API group \"\" in the namespace \"x\""
        )
    );
    assert_eq!(body["details"]["kind"], "pods");

    // A Role in x bound to the SA (subject without namespace: the binding's).
    apply(&admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/x/roles", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "cm", "namespace": "x"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "create"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["get", "patch"]}]})).await?;
    apply(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/x/rolebindings",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "cm", "namespace": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}),
    )
    .await?;
    let in_x: Api<ConfigMap> = Api::namespaced(sa.clone(), "x");
    in_x.list(&ListParams::default()).await?;
    in_x.create(&PostParams::default(), &common::cm("mine", &[("a", "1")]))
        .await?;
    in_x.create(&PostParams::default(), &common::cm("other", &[]))
        .await?;
    in_x.get("mine").await?;
    // resourceNames: another name is refused, with the name in the message.
    let s = status(in_x.get("other").await);
    assert_eq!(
        s.message,
        format!(
            "configmaps \"other\" is forbidden: User \"{BOT}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"x\""
        )
    );
    // Another namespace is out of reach of a RoleBinding.
    let s = status(
        Api::<ConfigMap>::namespaced(sa.clone(), "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(s.code, 403);

    // A server-side apply that creates needs `create` besides `patch`:
    // allowed for "mine"'s rule only where both are granted.
    apply(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/x/roles",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "cm", "namespace": "x"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}]}),
    )
    .await?;
    let pp = PatchParams::apply("bot");
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}});
    let s = status(in_x.patch("new", &pp, &Patch::Apply(&doc)).await);
    assert_eq!(
        (s.code, s.message.as_str()),
        (403, "configmaps \"new\" is forbidden: ")
    );
    in_x.patch("mine", &pp, &Patch::Apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}, "data": {"b": "2"}}))).await?;

    // Groups: every ServiceAccount of x, cluster-wide through a ClusterRoleBinding.
    apply(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "ns-reader"},
        "rules": [{"apiGroups": ["*"], "resources": ["namespaces", "*/status"], "verbs": ["get"]}]})).await?;
    apply(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "ns-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ns-reader"},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts:x"}]})).await?;
    assert_eq!(
        send(&sa, "GET", "/api/v1/namespaces/default", Value::Null)
            .await?
            .0,
        200
    );
    assert_eq!(
        send(&sa, "GET", "/api/v1/namespaces/default/status", Value::Null)
            .await?
            .0,
        200
    );
    let (code, body) = send(&sa, "GET", "/api/v1/namespaces", Value::Null).await?;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "namespaces is forbidden: User \"{BOT}\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        )
    );
    // Discovery is everyone's (system:discovery), other paths are not.
    assert_eq!(send(&sa, "GET", "/apis", Value::Null).await?.0, 200);
    let (code, body) = send(&sa, "GET", "/metrics", Value::Null).await?;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!("forbidden: User \"{BOT}\" cannot get path \"/metrics\"")
    );

    // A binding to a missing role shows in the denial.
    apply(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/x/rolebindings",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "ghost", "namespace": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ghost"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "x"}]}),
    )
    .await?;
    let (_, body) = send(
        &sa,
        "DELETE",
        "/api/v1/namespaces/x/configmaps/mine",
        Value::Null,
    )
    .await?;
    assert_eq!(
        body["message"],
        format!(
            "configmaps \"mine\" is forbidden: User \"{BOT}\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"x\": rbac: RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"
        )
    );
    // The admin (system:masters) is never refused.
    Api::<ConfigMap>::namespaced(admin.clone(), "x")
        .delete("mine", &Default::default())
        .await?;
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn review_apis_answer_can_i_and_whoami() -> anyhow::Result<()> {
    let (srv, admin) = rbac_server().await?;
    let token = bot(&admin).await?;
    let sa = client_with(&srv.url(), Some(&token)).await?;
    apply(&admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/x/roles", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "leases", "namespace": "x"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["l"], "verbs": ["get"]}]})).await?;
    apply(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/x/rolebindings",
        json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "leases", "namespace": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "x"}]}),
    )
    .await?;

    let ssar = |attrs: Value| json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attrs}});
    let (code, r) = post(&sa, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        ssar(json!({"namespace": "x", "verb": "get", "group": "coordination.k8s.io", "resource": "leases", "name": "l"}))).await?;
    assert_eq!(code, 201);
    assert_eq!(r["status"]["allowed"], true);
    assert_eq!(
        r["status"]["reason"],
        "RBAC: allowed by RoleBinding \"leases/x\" of Role \"leases\" to ServiceAccount \"bot/x\""
    );
    let (_, r) = post(&sa, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        ssar(json!({"namespace": "x", "verb": "get", "group": "coordination.k8s.io", "resource": "leases"}))).await?;
    assert_eq!(r["status"], json!({"allowed": false}));
    let (_, r) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        ssar(json!({"verb": "delete", "group": "*", "resource": "*"})),
    )
    .await?;
    assert_eq!(r["status"]["allowed"], true);
    let (code, _) = post(
        &sa,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"kind": "SelfSubjectAccessReview", "spec": {}}),
    )
    .await?;
    assert_eq!(code, 422);

    // SubjectAccessReview: the admin asks about the bot; the bot may not ask.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": BOT, "groups": ["system:serviceaccounts", "system:serviceaccounts:x", "system:authenticated"],
                 "resourceAttributes": {"namespace": "x", "verb": "get", "group": "coordination.k8s.io", "resource": "leases", "name": "l"}}});
    let (code, r) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar.clone(),
    )
    .await?;
    assert_eq!((code, r["status"]["allowed"].clone()), (201, json!(true)));
    let (code, r) = post(
        &sa,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar,
    )
    .await?;
    assert_eq!(code, 403);
    assert_eq!(
        r["message"],
        format!(
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{BOT}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        )
    );

    // SelfSubjectRulesReview: the Role's rule and the bootstrap ones.
    let (code, r) = post(&sa, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "x"}})).await?;
    assert_eq!(code, 201);
    let rules = r["status"]["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(rules.contains(&json!({"verbs": ["get"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["l"]})), "{rules:?}");
    assert!(rules.iter().any(|r| {
        r["resources"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("selfsubjectaccessreviews")))
    }));
    assert!(
        r["status"]["nonResourceRules"]
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["nonResourceURLs"]
                .as_array()
                .is_some_and(|u| u.contains(&json!("/apis/*")))))
    );
    assert_eq!(r["status"]["incomplete"], false);

    // SelfSubjectReview (`kubectl auth whoami`) and TokenReview.
    let (_, r) = post(
        &sa,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await?;
    assert_eq!(r["status"]["userInfo"]["username"], BOT);
    assert_eq!(
        r["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:x",
            "system:authenticated"
        ])
    );
    let (_, r) = post(
        &admin,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await?;
    assert_eq!(
        r["status"]["userInfo"],
        json!({"username": "admin", "groups": ["system:masters", "system:authenticated"]})
    );
    let (_, r) = post(
        &admin,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"kind": "TokenReview", "spec": {"token": token}}),
    )
    .await?;
    assert_eq!(
        (
            r["status"]["authenticated"].clone(),
            r["status"]["user"]["username"].clone()
        ),
        (json!(true), json!(BOT))
    );
    let (_, r) = post(
        &admin,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"kind": "TokenReview", "spec": {"token": "forged"}}),
    )
    .await?;
    assert_ne!(r["status"]["authenticated"], true);

    // In discovery, with the token subresource.
    let authz = admin
        .list_api_group_resources("authorization.k8s.io/v1")
        .await?;
    let names: Vec<&str> = authz.resources.iter().map(|r| r.name.as_str()).collect();
    for n in [
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "subjectaccessreviews",
        "localsubjectaccessreviews",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    let core = admin.list_core_api_resources("v1").await?;
    assert!(
        core.resources
            .iter()
            .any(|r| r.name == "serviceaccounts/token")
    );
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn bad_expired_or_orphaned_tokens_are_401() -> anyhow::Result<()> {
    let (srv, admin) = rbac_server().await?;
    let token = bot(&admin).await?;
    let whoami = |c: Client| async move {
        post(
            &c,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json!({"kind": "SelfSubjectReview"}),
        )
        .await
    };
    assert_eq!(
        whoami(client_with(&srv.url(), Some(&token)).await?)
            .await?
            .0,
        201
    );
    let (code, body) = whoami(client_with(&srv.url(), Some("not-a-token")).await?).await?;
    assert_eq!(code, 401);
    assert_eq!(
        (body["reason"].clone(), body["message"].clone()),
        (json!("Unauthorized"), json!("Unauthorized"))
    );
    // Too short a lifetime is refused like kube-apiserver does.
    let (code, body) = post(
        &admin,
        "/api/v1/namespaces/x/serviceaccounts/bot/token",
        json!({"spec": {"expirationSeconds": 60}}),
    )
    .await?;
    assert_eq!(code, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("may not specify a duration less than 10 minutes"),
        "{body}"
    );
    assert_eq!(
        post(
            &admin,
            "/api/v1/namespaces/x/serviceaccounts/nobody/token",
            json!({})
        )
        .await?
        .0,
        404
    );
    // A token dies with its ServiceAccount, and does not come back with a new one of that name.
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "x");
    sas.delete("bot", &Default::default()).await?;
    assert_eq!(
        whoami(client_with(&srv.url(), Some(&token)).await?)
            .await?
            .0,
        401
    );
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "bot"}}))?,
    )
    .await?;
    assert_eq!(
        whoami(client_with(&srv.url(), Some(&token)).await?)
            .await?
            .0,
        401
    );
    // No token on loopback: the admin (kubectl sends no token over plain HTTP).
    let (_, r) = whoami(client_with(&srv.url(), None).await?).await?;
    assert_eq!(r["status"]["userInfo"]["username"], "admin");
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn beyond_loopback_every_request_needs_a_token() -> anyhow::Result<()> {
    let srv = wr_apiserver::start(Config {
        bind: "0.0.0.0:0".parse()?,
        ..Default::default()
    })
    .await?;
    let url = format!("http://127.0.0.1:{}", srv.addr().port());
    let anon = client_with(&url, None).await?;
    let (code, body) = send(
        &anon,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await?;
    assert_eq!((code, body["reason"].clone()), (401, json!("Unauthorized")));
    assert_eq!(send(&anon, "GET", "/version", Value::Null).await?.0, 401);
    // The kubeconfig carries the admin token, which works.
    let kc = srv.kubeconfig_yaml();
    assert!(kc.contains(&srv.admin_token()));
    let admin = client_with(&url, Some(&srv.admin_token())).await?;
    Api::<ConfigMap>::namespaced(admin, "default")
        .list(&ListParams::default())
        .await?;
    srv.shutdown().await;

    // `insecure` opts back into anonymous access; loopback always allows it.
    for (bind, insecure) in [("0.0.0.0:0", true), ("127.0.0.1:0", false)] {
        let srv = wr_apiserver::start(Config {
            bind: bind.parse()?,
            auth: AuthConfig {
                insecure,
                ..Default::default()
            },
            ..Default::default()
        })
        .await?;
        let anon = client_with(&format!("http://127.0.0.1:{}", srv.addr().port()), None).await?;
        Api::<ConfigMap>::namespaced(anon, "default")
            .list(&ListParams::default())
            .await?;
        srv.shutdown().await;
    }
    Ok(())
}

/// `kubectl --as`: the impersonation headers make the request another
/// user's, if the caller may `impersonate` them (as kube-apiserver's
/// impersonation filter; compared with kube-apiserver v1.37.2 by
/// `tests/fidelity`, check kubectl/44-auth-can-i-as-alice-denied).
#[tokio::test]
async fn impersonation_headers_act_as_the_user_when_allowed() -> anyhow::Result<()> {
    let (srv, admin) = rbac_server().await?;
    let token = bot(&admin).await?;
    let as_alice = |client: &Client, path: &str, body: Value| {
        let client = client.clone();
        let path = path.to_string();
        async move {
            let req = http::Request::builder()
                .method("POST")
                .uri(path)
                .header("content-type", "application/json")
                .header("impersonate-user", "alice")
                .header("impersonate-group", "devs")
                .body(kube::client::Body::from(serde_json::to_vec(&body)?))?;
            let resp = client.send(req).await?;
            let code = resp.status().as_u16();
            let bytes = http_body_util::BodyExt::collect(resp.into_body())
                .await?
                .to_bytes();
            anyhow::Ok((
                code,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            ))
        }
    };
    // The admin (system:masters) may impersonate: the review is alice's.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, who) = as_alice(
        &admin,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        review.clone(),
    )
    .await?;
    assert_eq!(code, 201, "{who}");
    assert_eq!(
        who["status"]["userInfo"],
        json!({"username": "alice", "groups": ["devs", "system:authenticated"]})
    );
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "resource": "pods", "namespace": "x"}}});
    let (code, answer) = as_alice(
        &admin,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        ssar,
    )
    .await?;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["status"]["allowed"], false);
    // A ServiceAccount without the `impersonate` verb is refused, naming the user.
    let bot = client_with(&srv.url(), Some(&token)).await?;
    let (code, denied) = as_alice(
        &bot,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        review,
    )
    .await?;
    assert_eq!(code, 403, "{denied}");
    assert_eq!(
        denied["message"],
        format!(
            "users \"alice\" is forbidden: User \"{BOT}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )
    );
    srv.shutdown().await;
    Ok(())
}
