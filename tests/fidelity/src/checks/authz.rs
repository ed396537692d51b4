//! Authorization answers: a small matrix of users × requests, each asked
//! three ways — the request itself (its 403 body when denied), a
//! SelfSubjectAccessReview as the user, a SubjectAccessReview about the
//! user — plus `kubectl auth can-i` as the user. Users are impersonated by
//! the admin (`system:masters` on both servers), so no tokens are minted.
//!
//! The RBAC objects, in the area's namespace NS:
//! - Role `reader` (get/list/watch pods and configmaps), bound to User
//!   `alice` and to the ServiceAccount `NS/robot`;
//! - Role `cm-writer` (create/update/delete configmaps, and get only the
//!   configmap `open`), bound to the Group `fid-RUN-devs` (user `bob`);
//! - ClusterRole `fid-RUN-ns-lister` (list namespaces), bound by a
//!   ClusterRoleBinding to `bob`;
//! - a RoleBinding of `carol` to a missing Role (an RBAC evaluation error);
//! - `dave`: nothing.

use serde_json::{Value, json};

use super::Ctx;
use crate::run::Run;
use crate::target::{Req, TABLE};

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// A user as impersonated: name and groups (`Impersonate-Group`).
struct User {
    id: &'static str,
    name: String,
    groups: Vec<String>,
}

/// One request of the matrix: (id, verb, resource, namespaced, name).
const ASKS: &[(&str, &str, &str, bool, &str)] = &[
    ("list-pods", "list", "pods", true, ""),
    ("get-configmap-open", "get", "configmaps", true, "open"),
    ("create-configmap", "create", "configmaps", true, ""),
    (
        "delete-configmap-open",
        "delete",
        "configmaps",
        true,
        "open",
    ),
    ("list-secrets", "list", "secrets", true, ""),
    ("list-namespaces", "list", "namespaces", false, ""),
];

fn users(r: &Run, ns: &str) -> Vec<User> {
    let u = |id: &'static str, name: String, groups: Vec<String>| User { id, name, groups };
    vec![
        u("alice", "alice".into(), vec![]),
        u("bob", "bob".into(), vec![format!("fid-{}-devs", r.token)]),
        u("robot", format!("system:serviceaccount:{ns}:robot"), vec![]),
        u("carol", "carol".into(), vec![]),
        u("dave", "dave".into(), vec![]),
    ]
}

/// The groups kube-apiserver gives an impersonated user (as SAR needs them).
fn effective_groups(u: &User, ns: &str) -> Vec<String> {
    let mut g = u.groups.clone();
    if u.name.starts_with("system:serviceaccount:") {
        g.push("system:serviceaccounts".into());
        g.push(format!("system:serviceaccounts:{ns}"));
    }
    g.push("system:authenticated".into());
    g
}

fn impersonating<'a>(mut req: Req<'a>, u: &User) -> Req<'a> {
    req = req.header("Impersonate-User", u.name.clone());
    for g in &u.groups {
        req = req.header("Impersonate-Group", g.clone());
    }
    req
}

async fn put(r: &Run, path: &str, obj: Value) -> anyhow::Result<()> {
    let resp = r.send(Req::with_body("POST", path, &obj)).await?;
    anyhow::ensure!(
        resp.ok() || resp.code == 409,
        "creating {path} on {}: {} {}",
        r.t.name,
        resp.code,
        String::from_utf8_lossy(&resp.body)
    );
    Ok(())
}

async fn setup(r: &Run, ns: &str) -> anyhow::Result<()> {
    let rb = |name: &str, role_kind: &str, role: &str, subjects: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": subjects})
    };
    let roles = format!("{RBAC}/namespaces/{ns}/roles");
    let bindings = format!("{RBAC}/namespaces/{ns}/rolebindings");
    put(
        r,
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}),
    )
    .await?;
    put(
        r,
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "configmaps"],
                       "verbs": ["get", "list", "watch"]}]}),
    )
    .await?;
    put(
        r,
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "cm-writer"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["create", "update", "delete"]},
                      {"apiGroups": [""], "resources": ["configmaps"],
                       "resourceNames": ["open"], "verbs": ["get"]}]}),
    )
    .await?;
    put(
        r,
        &bindings,
        rb(
            "readers",
            "Role",
            "reader",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                   {"kind": "ServiceAccount", "name": "robot", "namespace": ns}]),
        ),
    )
    .await?;
    put(
        r,
        &bindings,
        rb(
            "devs",
            "Role",
            "cm-writer",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                    "name": format!("fid-{}-devs", r.token)}]),
        ),
    )
    .await?;
    put(
        r,
        &bindings,
        rb(
            "dangling",
            "Role",
            "no-such-role",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}]),
        ),
    )
    .await?;
    let lister = format!("fid-{}-ns-lister", r.token);
    put(
        r,
        &format!("{RBAC}/clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": lister},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]}),
    )
    .await?;
    put(
        r,
        &format!("{RBAC}/clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": lister},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": lister},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}),
    )
    .await?;
    put(
        r,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "open"}}),
    )
    .await?;
    // kube-apiserver's RBAC authorizer reads informers: wait until the last
    // binding is in effect (the embedded server answers at once).
    let probe = sar_body(
        "bob",
        &["system:authenticated".into()],
        "list",
        "namespaces",
        "",
        "",
    );
    for _ in 0..100 {
        let resp = r
            .send(Req::with_body(
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                &probe,
            ))
            .await?;
        if resp.json()["status"]["allowed"] == true {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!("RBAC bindings not in effect on {} after 10 s", r.t.name)
}

fn attributes(verb: &str, resource: &str, ns: &str, name: &str) -> Value {
    let mut a = json!({"verb": verb, "resource": resource});
    if !ns.is_empty() {
        a["namespace"] = json!(ns);
    }
    if !name.is_empty() {
        a["name"] = json!(name);
    }
    a
}

fn sar_body(
    user: &str,
    groups: &[String],
    verb: &str,
    resource: &str,
    ns: &str,
    name: &str,
) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups,
                 "resourceAttributes": attributes(verb, resource, ns, name)}})
}

/// The request a user makes for one matrix entry.
fn request(verb: &str, resource: &str, ns: &str, name: &str) -> Req<'static> {
    let base = if ns.is_empty() {
        format!("/api/v1/{resource}")
    } else {
        format!("/api/v1/namespaces/{ns}/{resource}")
    };
    match verb {
        "create" => Req::with_body(
            "POST",
            base,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made"}}),
        )
        .path_suffix("?dryRun=All"),
        // With a body, DeleteOptions come from it alone (not the query).
        "delete" => Req::with_body(
            "DELETE",
            format!("{base}/{name}"),
            &json!({"dryRun": ["All"]}),
        ),
        _ if !name.is_empty() => Req::get(format!("{base}/{name}")),
        _ => Req::get(base),
    }
}

/// What a client sees of an answer: the code, and the Status when denied.
fn seen(code: u16, body: Value) -> Value {
    if (200..300).contains(&code) {
        json!({"code": code})
    } else {
        json!({"code": code, "body": body})
    }
}

pub async fn authz(r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    let ns = r.namespace("authz").await?;
    setup(r, &ns).await?;
    // `kubectl get roles,rolebindings -o wide` as the server prints them.
    for res in ["roles", "rolebindings"] {
        let resp = r
            .send(Req::get(format!("{RBAC}/namespaces/{ns}/{res}")).accept(TABLE))
            .await?;
        let j = resp.json();
        let rows: Vec<Value> = j["rows"]
            .as_array()
            .into_iter()
            .flatten()
            // Kept as `{cells}` under `rows` so ages are normalised.
            .map(|row| json!({"cells": row["cells"]}))
            .collect();
        r.record(
            &format!("authz/table/{res}"),
            json!({"code": resp.code, "columns": j["columnDefinitions"].as_array().map(|c| c.len()), "rows": rows}),
        );
    }
    for u in users(r, &ns) {
        for (id, verb, resource, namespaced, name) in ASKS {
            let scope = if *namespaced { ns.as_str() } else { "" };
            let resp = r
                .send(impersonating(request(verb, resource, scope, name), &u))
                .await?;
            r.record(
                &format!("authz/request/{}/{id}", u.id),
                seen(resp.code, resp.json()),
            );
            let ssar = json!({"apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes(verb, resource, scope, name)}});
            let resp = r
                .send(impersonating(
                    Req::with_body(
                        "POST",
                        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                        &ssar,
                    ),
                    &u,
                ))
                .await?;
            r.record(
                &format!("authz/ssar/{}/{id}", u.id),
                json!({"code": resp.code, "status": resp.json()["status"]}),
            );
            let sar = sar_body(
                &u.name,
                &effective_groups(&u, &ns),
                verb,
                resource,
                scope,
                name,
            );
            let resp = r
                .send(Req::with_body(
                    "POST",
                    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                    &sar,
                ))
                .await?;
            r.record(
                &format!("authz/sar/{}/{id}", u.id),
                json!({"code": resp.code, "status": resp.json()["status"]}),
            );
        }
    }
    // Impersonation itself needs the `impersonate` verb: alice may not act as bob.
    let alice = &users(r, &ns)[0];
    let resp = r
        .send(
            impersonating(Req::get(format!("/api/v1/namespaces/{ns}/pods")), alice)
                .header("Impersonate-User", "bob"),
        )
        .await?;
    r.record(
        "authz/impersonation-needs-impersonate",
        seen(resp.code, resp.json()),
    );
    kubectl_can_i(r, ctx, &ns).await
}

/// `kubectl auth can-i` as the users: its output and exit code.
async fn kubectl_can_i(r: &Run, ctx: &Ctx, ns: &str) -> anyhow::Result<()> {
    let devs = format!("fid-{}-devs", r.token);
    let robot = format!("system:serviceaccount:{ns}:robot");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "alice-list-pods",
            vec!["list", "pods", "-n", ns, "--as", "alice"],
        ),
        (
            "alice-delete-pods",
            vec!["delete", "pods", "-n", ns, "--as", "alice"],
        ),
        (
            "bob-create-configmaps",
            vec![
                "create",
                "configmaps",
                "-n",
                ns,
                "--as",
                "bob",
                "--as-group",
                &devs,
            ],
        ),
        (
            "bob-get-configmap-open",
            vec![
                "get",
                "configmap/open",
                "-n",
                ns,
                "--as",
                "bob",
                "--as-group",
                &devs,
            ],
        ),
        (
            "bob-list-namespaces",
            vec!["list", "namespaces", "--as", "bob"],
        ),
        (
            "robot-watch-configmaps",
            vec!["watch", "configmaps", "-n", ns, "--as", &robot],
        ),
        (
            "carol-list-pods",
            vec!["list", "pods", "-n", ns, "--as", "carol"],
        ),
        (
            "dave-list-secrets",
            vec!["list", "secrets", "-n", ns, "--as", "dave"],
        ),
        ("alice-list", vec!["--list", "-n", ns, "--as", "alice"]),
    ];
    for (id, args) in cases {
        let out = tokio::process::Command::new(&ctx.kubectl)
            .arg("--kubeconfig")
            .arg(&r.t.kubeconfig)
            .args(["auth", "can-i"])
            .args(&args)
            .output()
            .await?;
        let mut lines = vec![format!("exit={}", out.status.code().unwrap_or(-1))];
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        lines.extend(super::kubectl::normalise(&text, &r.token));
        r.record(&format!("authz/kubectl/{id}"), json!(lines));
    }
    Ok(())
}
