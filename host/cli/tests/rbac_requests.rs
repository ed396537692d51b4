//! Acceptance (issue 6): "the RBAC printed for the examples allows every
//! request the host made in the acceptance run and nothing more (compare with
//! the API server's request log)".
//!
//! A standalone API server with its request log, the two example controllers
//! with their plugins in ConfigMaps (`publish --apply`), and the real
//! `wasm-reconciler run` binary with leader election on. The run goes through
//! the lifecycle: parents created, a spec updated, a child deleted by hand, a
//! conflict on each parent's status write (re-read path), a parent deleted
//! through its finalizer, a plugin ConfigMap hot-reloaded, SIGTERM (lease
//! release). Then every request the host made (told apart by its
//! `User-Agent`) is evaluated against the rules printed by
//! `wasm-reconciler rbac -f examples/…` with a small RBAC evaluator, and every
//! (apiGroup, resource, verb) those rules grant must have been used, or be in
//! [`JUSTIFIED`] with the reason it is still needed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wr_apiserver::RequestRecord;

use crate::request_log::*;
use crate::run_common::*;

/// Grants the run does not exercise, each with the reason it is still needed:
/// (apiGroup, resource, verb, why).
const JUSTIFIED: &[(&str, &str, &str, &str)] = &[
    (
        "examples.wasm-reconciler.dev",
        "staticsites",
        "patch",
        "static-site has finalize: false and a status subresource, so the parent itself is patched only to remove a finalizer of this controller left from an earlier finalize: true (reconcile, or the WasmController's deletion), or to write status where the CRD has no status subresource; workspaces (finalize: true) exercise it",
    ),
    (
        "examples.wasm-reconciler.dev",
        "staticsites/finalizers",
        "update",
        "never requested by the host: the OwnerReferencesPermissionEnforcement admission plugin requires it of a client that sets blockOwnerDeletion on children (the host's child create/apply); the embedded API server does not run that plugin",
    ),
    (
        "examples.wasm-reconciler.dev",
        "workspaces/finalizers",
        "update",
        "as staticsites/finalizers: needed for blockOwnerDeletion on the ConfigMap children under OwnerReferencesPermissionEnforcement",
    ),
    (
        "",
        "configmaps",
        "get",
        "a child is re-read by name only when its creating apply was refused (409/422: an object of that name that the stale cache did not show); that race is not provoked deterministically here (plugin ConfigMaps are watched, never read by name)",
    ),
    (
        "",
        "services",
        "get",
        "a child is re-read by name only when its creating apply was refused (409/422, stale cache); not provoked deterministically here",
    ),
    (
        "apps",
        "deployments",
        "get",
        "a child is re-read by name only when its creating apply was refused (409/422, stale cache); not provoked deterministically here",
    ),
    (
        "",
        "services",
        "delete",
        "children are deleted when the plugin stops desiring them or under the Recreate update strategy; static-site always desires its Service (tombstone's teardown exercises delete on ConfigMaps)",
    ),
    (
        "apps",
        "deployments",
        "delete",
        "children are deleted when the plugin stops desiring them or under the Recreate update strategy; static-site always desires its Deployment",
    ),
];

/// Where the host runs in this test: its Lease (run_common's `run` uses
/// `--lease-namespace default`) and its ServiceAccount.
const HOST_NAMESPACE: &str = "default";
const SERVICE_ACCOUNT: &str = "wasm-reconciler";

const LEASE: &[&str] = &[
    "--leader-elect=true",
    "--lease-duration-seconds=15",
    "--renew-deadline-seconds=10",
    "--retry-period-seconds=1",
    "--shutdown-timeout-seconds=10",
];

#[test]
fn printed_rbac_allows_every_host_request_and_nothing_unused() -> Result<()> {
    let root = wr_tests::plugins::workspace_root();
    let static_site = wr_tests::plugins::plugin_path("static-site");
    let tombstone = wr_tests::plugins::plugin_path("tombstone");
    let dir = tempfile::tempdir()?;
    let (_api, kc, url) = apiserver_with_log(dir.path())?;

    // --- Install: CRDs, plugin ConfigMaps, the examples' WasmControllers as they are.
    install_wc_crd(&kc, dir.path())?;
    for f in [
        "examples/static-site/crd.yaml",
        "examples/tombstone/crd.yaml",
    ] {
        apply_file(&kc, &root.join(f))?;
    }
    kubectl(&kc, &["create", "namespace", "wasm-reconciler"])?;
    publish(&kc, &static_site, "static-site-plugin")?;
    publish(&kc, &tombstone, "tombstone-plugin")?;
    for f in [
        "examples/static-site/controller.yaml",
        "examples/tombstone/controller.yaml",
    ] {
        apply_file(&kc, &root.join(f))?;
    }

    // --- The host, electing itself leader.
    let (mut host, _metrics) = run(&kc, "rbac-run", LEASE)?;
    eventually("the host to take the lease", 60, || {
        lease_holder(&kc).filter(|h| h.starts_with("rbac-run_"))
    })?;

    // --- Parents created.
    apply_file(&kc, &root.join("examples/static-site/site.yaml"))?;
    apply_file(&kc, &root.join("examples/tombstone/workspace.yaml"))?;
    eventually("web Ready with a 2-replica Deployment", 120, || {
        (web_ready(&kc).as_deref() == Some("True") && web_replicas(&kc).as_deref() == Some("2"))
            .then_some(())
    })?;
    eventually("workspace team-a Ready", 120, || {
        (workspace_ready(&kc).as_deref() == Some("True")).then_some(())
    })?;

    // --- A spec updated.
    set_replicas(&kc, 3)?;
    eventually("the Deployment to follow the edit", 60, || {
        (web_replicas(&kc).as_deref() == Some("3")).then_some(())
    })?;

    // --- A child deleted by hand comes back.
    let uid = field(&kc, &["service", "web"], "{.metadata.uid}").context("service web")?;
    kubectl(&kc, &["-n", "default", "delete", "service", "web"])?;
    eventually("service web to be recreated", 60, || {
        field(&kc, &["service", "web"], "{.metadata.uid}").filter(|u| !u.is_empty() && *u != uid)
    })?;

    // --- A 409 on each parent's status write: the host re-reads the parent.
    // (Spec edits go through `replace`, a PUT, so the patch faults hit the host only.)
    set_faults(
        &url,
        &json!({"rules": [
            {"verbs": ["patch"], "resources": ["staticsites"], "rate": 1.0,
             "action": {"kind": "conflict"}, "times": 1},
            {"verbs": ["patch"], "resources": ["workspaces"], "rate": 1.0,
             "action": {"kind": "conflict"}, "times": 1},
        ]}),
    )?;
    // A new port changes the Service too (a server-side apply of it).
    replace_spec(&kc, "staticsite", "web", |spec| {
        spec["replicas"] = json!(4);
        spec["port"] = json!(8081)
    })?;
    replace_spec(&kc, "workspace", "team-a", |spec| {
        spec["data"]["notes"] = json!("edited")
    })?;
    eventually("both injected conflicts to hit", 60, || {
        injected(&url).ok().filter(|i| i.len() >= 2)
    })?;
    eventually(
        "the Deployment to follow the edit after the conflict",
        60,
        || (web_replicas(&kc).as_deref() == Some("4")).then_some(()),
    )?;
    eventually("the Service to follow the port edit", 60, || {
        field(&kc, &["service", "web"], "{.spec.ports[*].port}")
            .filter(|p| p.split_whitespace().any(|p| p == "8081"))
    })?;
    eventually("team-a to observe its new generation", 60, || {
        let generation = field(&kc, &["workspace", "team-a"], "{.metadata.generation}")?;
        let observed = field(
            &kc,
            &["workspace", "team-a"],
            r#"{.status.conditions[?(@.type=="Ready")].observedGeneration}"#,
        )?;
        (generation == observed).then_some(())
    })?;
    set_faults(&url, &json!({}))?;
    eprintln!(
        "service web ports after the edit: {:?}",
        field(&kc, &["service", "web"], "{.spec.ports}")
    );

    // --- A parent deleted: the finalizer path (tombstone tears down, then releases).
    kubectl(
        &kc,
        &[
            "-n",
            "default",
            "delete",
            "workspace",
            "team-a",
            "--wait=false",
        ],
    )?;
    eventually("workspace team-a to be gone", 90, || {
        kubectl(
            &kc,
            &[
                "-n",
                "default",
                "get",
                "workspace",
                "team-a",
                "--ignore-not-found",
                "-o",
                "name",
            ],
        )
        .ok()
        .filter(|s| s.trim().is_empty())
    })?;

    // --- A plugin ConfigMap hot-reloaded with a new build.
    let rebuilt = dir.path().join("static_site_rebuilt.wasm");
    let bytes = with_custom_section(std::fs::read(&static_site)?, b"rbac-requests");
    let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
    std::fs::write(&rebuilt, &bytes)?;
    publish(&kc, &rebuilt, "static-site-plugin")?;
    eventually("the new plugin digest on the WasmController", 90, || {
        field_cluster(
            &kc,
            &["wasmcontroller", "static-site"],
            "{.status.pluginDigest}",
        )
        .filter(|d| *d == digest)
    })?;
    set_replicas(&kc, 2)?;
    eventually("the reloaded plugin to reconcile", 60, || {
        (web_replicas(&kc).as_deref() == Some("2")).then_some(())
    })?;

    // --- SIGTERM: in-flight work finishes, the lease is released, exit 0.
    host.signal("TERM")?;
    ensure!(host.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
    ensure!(
        lease_holder(&kc).as_deref() == Some(""),
        "the lease must be released on SIGTERM, holder {:?}",
        lease_holder(&kc)
    );

    // --- The verdict, from the request log.
    let log = requests(&url)?;
    let host_reqs: Vec<&RequestRecord> = log
        .iter()
        .filter(|r| host_identity(r).is_some_and(|id| id.starts_with("rbac-run_")))
        .collect();
    let others = log.len() - host_reqs.len();
    ensure!(
        log.iter().any(|r| r
            .user_agent
            .as_deref()
            .is_some_and(|a| a.starts_with("kubectl/"))),
        "kubectl's requests must be in the log under their own agent"
    );
    ensure!(
        host_reqs.len() > 20,
        "only {} host requests in the log of {}",
        host_reqs.len(),
        log.len()
    );
    eprintln!(
        "request log: {} requests, {} by the host, {others} by kubectl/publish",
        log.len(),
        host_reqs.len()
    );

    let rbac = rbac_output(&root)?;
    let grants = bound_grants(&rbac, HOST_NAMESPACE, SERVICE_ACCOUNT)?;
    ensure!(!grants.is_empty(), "no rule is bound to the ServiceAccount");

    // Nothing wildcarded, no deletecollection.
    for g in &grants {
        let r = &g.rule;
        ensure!(
            !r.api_groups
                .iter()
                .chain(&r.resources)
                .chain(&r.verbs)
                .any(|s| s == "*"),
            "wildcard in {g:?}"
        );
        ensure!(
            !r.verbs.iter().any(|v| v == "deletecollection"),
            "deletecollection granted: {g:?}"
        );
    }

    // What the authorizer checks for each request: its verb, plus `create`
    // for a server-side apply that created the object (kube-apiserver
    // authorizes that create separately; the response is 201).
    let checks: Vec<RequestRecord> = host_reqs.iter().flat_map(|r| authorizations(r)).collect();

    // 1. Every host request is allowed.
    let denied: Vec<String> = checks
        .iter()
        .filter(|r| !grants.iter().any(|g| g.allows(r)))
        .map(describe)
        .collect();
    ensure!(
        denied.is_empty(),
        "{} host requests the printed RBAC does not allow:\n{}",
        denied.len(),
        denied.join("\n")
    );

    // 2. Nothing more: every granted (group, resource, verb) was used, or is justified.
    let mut used: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for r in &checks {
        *used
            .entry((r.group.clone(), rbac_resource(r), r.verb.clone()))
            .or_default() += 1;
    }
    let mut unused = Vec::new();
    let mut granted_triples = Vec::new();
    for g in &grants {
        for (group, resource, verb) in g.rule.triples() {
            granted_triples.push((group.clone(), resource.clone(), verb.clone()));
            let exercised = checks.iter().any(|r| {
                r.group == group && rbac_resource(r) == resource && r.verb == verb && g.allows(r)
            });
            if exercised {
                continue;
            }
            match justification(&group, &resource, &verb) {
                Some(why) => {
                    eprintln!("granted, unused, justified: {group}/{resource} {verb}: {why}")
                }
                None => unused.push(format!(
                    "{}/{resource} {verb} ({})",
                    if group.is_empty() { "core" } else { &group },
                    g.from
                )),
            }
        }
    }
    for ((group, resource, verb), n) in &used {
        eprintln!("used: {group}/{resource} {verb} x{n}");
    }
    ensure!(
        unused.is_empty(),
        "granted but never used in the run, and not justified (tighten `rbac` or justify):\n{}",
        unused.join("\n")
    );
    // The justifications must not be stale: each names something still granted.
    for (g, res, v, _) in JUSTIFIED {
        ensure!(
            granted_triples
                .iter()
                .any(|(gg, rr, vv)| gg == g && rr == res && vv == v),
            "JUSTIFIED lists {g}/{res} {v}, which the printed RBAC no longer grants"
        );
    }
    Ok(())
}

/// The authorization checks of one request: its own verb, and `create` too
/// when a server-side apply created the object (201), as kube-apiserver's
/// patch handler authorizes that create separately.
fn authorizations(r: &RequestRecord) -> Vec<RequestRecord> {
    let mut out = vec![r.clone()];
    if r.verb == "patch" && r.patch_type.as_deref() == Some("apply") && r.code == 201 {
        out.push(RequestRecord {
            verb: "create".into(),
            ..r.clone()
        });
    }
    out
}

fn justification(group: &str, resource: &str, verb: &str) -> Option<&'static str> {
    JUSTIFIED
        .iter()
        .find(|(g, r, v, _)| *g == group && *r == resource && *v == verb)
        .map(|(_, _, _, why)| *why)
}

// --- A minimal RBAC evaluator (the authorizer's rule matching, no aggregation).

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
}

impl Rule {
    fn triples(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for g in &self.api_groups {
            for r in &self.resources {
                for v in &self.verbs {
                    out.push((g.clone(), r.clone(), v.clone()));
                }
            }
        }
        out
    }
}

/// A rule in effect for the subject: cluster-wide (ClusterRole through a
/// ClusterRoleBinding) or in one namespace (through a RoleBinding).
#[derive(Debug)]
struct Grant {
    namespace: Option<String>,
    rule: Rule,
    from: String,
}

impl Grant {
    fn allows(&self, r: &RequestRecord) -> bool {
        let any = |list: &[String], x: &str| list.iter().any(|s| s == "*" || s == x);
        if let Some(ns) = &self.namespace
            && r.namespace.as_deref() != Some(ns.as_str())
        {
            return false;
        }
        // resourceNames limit requests that name an object; a create, or a
        // list/watch without a name, is not matched by them.
        let name_ok = self.rule.resource_names.is_empty()
            || r.name
                .as_deref()
                .is_some_and(|n| self.rule.resource_names.iter().any(|x| x == n));
        any(&self.rule.api_groups, &r.group)
            && any(&self.rule.resources, &rbac_resource(r))
            && any(&self.rule.verbs, &r.verb)
            && name_ok
    }
}

/// The rules bound to ServiceAccount `ns/sa` in the printed documents.
fn bound_grants(docs: &[Value], ns: &str, sa: &str) -> Result<Vec<Grant>> {
    let kind = |d: &Value| d["kind"].as_str().unwrap_or("").to_string();
    let name = |d: &Value| d["metadata"]["name"].as_str().unwrap_or("").to_string();
    let namespace = |d: &Value| d["metadata"]["namespace"].as_str().map(str::to_string);
    let rules = |d: &Value| -> Result<Vec<Rule>> {
        let rs: Vec<Rule> = serde_json::from_value(d["rules"].clone()).unwrap_or_default();
        ensure!(
            rs.iter().all(|r| r.non_resource_urls.is_empty()),
            "non-resource URLs in {}",
            name(d)
        );
        Ok(rs)
    };
    let binds_sa = |d: &Value| {
        d["subjects"].as_array().is_some_and(|s| {
            s.iter()
                .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == ns)
        })
    };
    let find = |k: &str, n: &str, in_ns: Option<&str>| {
        docs.iter()
            .find(|d| kind(d) == k && name(d) == n && namespace(d).as_deref() == in_ns)
    };
    let mut out = Vec::new();
    for b in docs.iter().filter(|d| binds_sa(d)) {
        let role_kind = b["roleRef"]["kind"].as_str().unwrap_or("");
        let role_name = b["roleRef"]["name"].as_str().unwrap_or("");
        let (role, scope) = match (kind(b).as_str(), role_kind) {
            ("ClusterRoleBinding", "ClusterRole") => (find("ClusterRole", role_name, None), None),
            ("RoleBinding", "ClusterRole") => (find("ClusterRole", role_name, None), namespace(b)),
            ("RoleBinding", "Role") => {
                let bns = namespace(b);
                (find("Role", role_name, bns.as_deref()), bns)
            }
            other => bail!("unexpected binding {other:?}"),
        };
        let role = role.with_context(|| {
            format!(
                "{} {} refers to a missing {role_kind} {role_name}",
                kind(b),
                name(b)
            )
        })?;
        for rule in rules(role)? {
            out.push(Grant {
                namespace: scope.clone(),
                rule,
                from: format!("{role_kind} {role_name}"),
            });
        }
    }
    Ok(out)
}

// --- Helpers.

/// `wasm-reconciler rbac` for the examples, parsed.
fn rbac_output(root: &Path) -> Result<Vec<Value>> {
    let out = Command::new(BIN)
        .args(["rbac", "--namespace", HOST_NAMESPACE, "-f"])
        .arg(root.join("examples/static-site"))
        .arg("-f")
        .arg(root.join("examples/tombstone"))
        .output()
        .context("running wasm-reconciler rbac")?;
    ensure!(
        out.status.success(),
        "rbac failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = Value::deserialize(doc)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

fn apply_file(kc: &Path, f: &Path) -> Result<()> {
    kubectl(
        kc,
        &["apply", "--server-side", "-f", f.to_str().unwrap_or("")],
    )?;
    Ok(())
}

fn publish(kc: &Path, plugin: &Path, name: &str) -> Result<()> {
    let out = Command::new(BIN)
        .args(["publish", "--plugin"])
        .arg(plugin)
        .args(["--name", name, "--namespace", "wasm-reconciler", "--apply"])
        .arg("--kubeconfig")
        .arg(kc)
        .output()
        .context("running wasm-reconciler publish")?;
    ensure!(
        out.status.success(),
        "publish {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A jsonpath of a namespaced object in `default`.
fn field(kc: &Path, what: &[&str], path: &str) -> Option<String> {
    let mut args = vec!["-n", "default", "get"];
    args.extend_from_slice(what);
    let jp = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &jp]);
    kubectl(kc, &args).ok().map(|s| s.trim().to_string())
}

/// A jsonpath of a cluster-scoped object.
fn field_cluster(kc: &Path, what: &[&str], path: &str) -> Option<String> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let jp = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &jp]);
    kubectl(kc, &args).ok().map(|s| s.trim().to_string())
}

fn workspace_ready(kc: &Path) -> Option<String> {
    field(
        kc,
        &["workspace", "team-a"],
        r#"{.status.conditions[?(@.type=="Ready")].status}"#,
    )
}

/// Edits a parent's spec with GET + PUT (`kubectl replace`), retried on 409.
fn replace_spec(kc: &Path, kind: &str, name: &str, edit: impl Fn(&mut Value)) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("obj.json");
    eventually(&format!("replacing {kind} {name}"), 60, || {
        let text = kubectl(kc, &["-n", "default", "get", kind, name, "-o", "json"]).ok()?;
        let mut obj: Value = serde_json::from_str(&text).ok()?;
        edit(&mut obj["spec"]);
        std::fs::write(&file, obj.to_string()).ok()?;
        kubectl(kc, &["replace", "-f", file.to_str()?]).ok()
    })?;
    Ok(())
}

/// Appends a custom section to a component: still a valid component, new digest.
fn with_custom_section(mut bytes: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let name = b"rbac-test";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(payload);
    bytes.push(0);
    let mut n = body.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    bytes.extend_from_slice(&body);
    bytes
}

/// The evaluator itself: namespaces, subresources, resourceNames, bindings.
#[test]
fn the_rule_evaluator_matches_like_the_authorizer() -> Result<()> {
    let docs: Vec<Value> = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "c"},
               "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]},
                         {"apiGroups": ["x.io"], "resources": ["things/status"], "verbs": ["patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "c"}, "roleRef": {"kind": "ClusterRole", "name": "c"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ops"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "r", "namespace": "ops"},
               "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                          "resourceNames": ["l"], "verbs": ["get", "update"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "r", "namespace": "ops"}, "roleRef": {"kind": "Role", "name": "r"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ops"}]}),
        // Bound to someone else: must not count.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "other"},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "other"}, "roleRef": {"kind": "ClusterRole", "name": "other"},
               "subjects": [{"kind": "ServiceAccount", "name": "else", "namespace": "ops"}]}),
    ];
    let grants = bound_grants(&docs, "ops", "sa")?;
    let req = |verb: &str,
               group: &str,
               res: &str,
               sub: Option<&str>,
               ns: Option<&str>,
               name: Option<&str>| {
        RequestRecord {
            verb: verb.into(),
            group: group.into(),
            version: "v1".into(),
            resource: res.into(),
            subresource: sub.map(String::from),
            namespace: ns.map(String::from),
            name: name.map(String::from),
            code: 200,
            field_manager: None,
            patch_type: None,
            dry_run: false,
            user_agent: None,
            fault: None,
        }
    };
    let allowed = |r: &RequestRecord| grants.iter().any(|g| g.allows(r));
    assert!(allowed(&req(
        "list",
        "apps",
        "deployments",
        None,
        Some("a"),
        None
    )));
    assert!(!allowed(&req(
        "delete",
        "apps",
        "deployments",
        None,
        Some("a"),
        Some("d")
    )));
    assert!(allowed(&req(
        "patch",
        "x.io",
        "things",
        Some("status"),
        Some("a"),
        Some("t")
    )));
    assert!(!allowed(&req(
        "patch",
        "x.io",
        "things",
        None,
        Some("a"),
        Some("t")
    )));
    assert!(allowed(&req(
        "get",
        "coordination.k8s.io",
        "leases",
        None,
        Some("ops"),
        Some("l")
    )));
    assert!(!allowed(&req(
        "get",
        "coordination.k8s.io",
        "leases",
        None,
        Some("ops"),
        Some("m")
    )));
    assert!(!allowed(&req(
        "get",
        "coordination.k8s.io",
        "leases",
        None,
        Some("dev"),
        Some("l")
    )));
    assert!(!allowed(&req(
        "list",
        "coordination.k8s.io",
        "leases",
        None,
        Some("ops"),
        None
    )));
    assert!(!allowed(&req(
        "get",
        "",
        "secrets",
        None,
        Some("ops"),
        Some("s")
    )));
    Ok(())
}
