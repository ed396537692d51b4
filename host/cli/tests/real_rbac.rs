//! Least privilege, enforced for real (issue 13 item 4): `wasm-reconciler run`
//! as a process against a real kube-apiserver with `--authorization-mode=RBAC`,
//! authenticated as a ServiceAccount bound only to what
//! `wasm-reconciler rbac -f examples/static-site -f examples/tombstone` prints.
//!
//! 1. **Each rule is needed**: for every rule of the printed ClusterRole and
//!    Role, a host runs as a ServiceAccount of its own bound to the printed
//!    RBAC *minus that rule*, and the examples' parents are created in a
//!    namespace of its own (every rule is exercised by a host starting and
//!    reconciling new parents: watches, Lease, finalizers, children with
//!    `blockOwnerDeletion`, status, Events). The kube-apiserver's audit log
//!    must show a 403 for that account within a minute; a rule without one
//!    is reported as unneeded.
//! 2. **The full lifecycle passes with zero 403s** as a ServiceAccount bound to
//!    the printed RBAC: parents created, a spec updated, a child deleted by
//!    hand and recreated, a plugin hot-reloaded from its ConfigMap, a parent
//!    finalized, a parent deleted (its children collected by the real garbage
//!    collector), the WasmControllers deleted (the host releases the parents
//!    left over from part 1 and its own cleanup finalizer). Then the audit log
//!    must hold no 403 for the account, and enough requests by it that the
//!    check means something.
//!
//! The embedded API server stores RBAC objects but does not enforce them
//! (`rbac_requests.rs` is its version: an evaluator over its request log), so
//! this test runs only with `WR_TEST_CLUSTER=real`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::real_kube::*;
use crate::run_common::{BIN, eventually, kubectl};

#[test]
fn printed_rbac_is_enough_and_every_rule_is_needed_on_real_kubernetes() -> Result<()> {
    let Some(real) = real(
        "printed_rbac_is_enough_and_every_rule_is_needed_on_real_kubernetes",
        "the embedded API server does not enforce RBAC",
    )?
    else {
        return Ok(());
    };
    let kc = real.kubeconfig.clone();
    let dir = tempfile::tempdir()?;
    let t0 = Instant::now();
    install_examples(&kc, dir.path())?;

    // --- 1. Every printed rule is needed.
    // Described with a placeholder name (each run below uses its own).
    let rules = printed_rules(&rbac("NAME")?)?;
    ensure!(rules.len() >= 8, "only {} printed rules", rules.len());
    let mut unneeded = Vec::new();
    let mut namespaces = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let started = Instant::now();
        let name = real.namespace(&format!("without-{i}"))?;
        namespaces.push(name.clone());
        match denial_without(&real, dir.path(), &name, i)? {
            Some(denied) => eprintln!(
                "without rule {i} ({rule}): refused after {:.1}s: {denied}",
                started.elapsed().as_secs_f64()
            ),
            None => unneeded.push(format!("rule {i}: {rule}")),
        }
    }
    eprintln!(
        "{} of {} rules proven needed in {:.0}s",
        rules.len() - unneeded.len(),
        rules.len(),
        t0.elapsed().as_secs_f64()
    );

    // --- 2. The full lifecycle with all of them: zero 403s.
    let t1 = Instant::now();
    let full = real.namespace("full")?;
    namespaces.push(full.clone());
    let outcome = full_lifecycle(&real, dir.path(), &full);
    // Clean up even after a failure: no finalizer may keep anything of this
    // test alive on a shared cluster once its hosts are gone.
    cleanup(&kc, &namespaces);
    outcome?;
    eprintln!(
        "full lifecycle with zero 403s in {:.0}s",
        t1.elapsed().as_secs_f64()
    );
    ensure!(
        unneeded.is_empty(),
        "printed rules that no request needed on a real kube-apiserver (tighten `rbac`):\n{}",
        unneeded.join("\n")
    );
    Ok(())
}

/// `wasm-reconciler rbac` for the examples (as they are), every object named
/// `name`, the host's ServiceAccount `name` and its Lease `name` in namespace `name`.
fn rbac(name: &str) -> Result<Vec<Value>> {
    let root = wr_tests::plugins::workspace_root();
    let out = Command::new(BIN)
        .args(["rbac", "--name", name, "--namespace", name])
        .args(["--service-account", name, "--lease-name", name, "-f"])
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
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&String::from_utf8(out.stdout)?) {
        let v = Value::deserialize(doc)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// The rules of the printed ClusterRole and Roles, in order, described.
fn printed_rules(docs: &[Value]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for d in docs {
        let kind = d["kind"].as_str().unwrap_or("");
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        for r in d["rules"].as_array().context("a role without rules")? {
            let list = |k: &str| {
                r[k].as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|s| if s.is_empty() { "core" } else { s })
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default()
            };
            let names = match list("resourceNames") {
                n if n.is_empty() => String::new(),
                n => format!(" names {n}"),
            };
            out.push(format!(
                "{kind} {}/{} {}{names}",
                list("apiGroups"),
                list("resources"),
                list("verbs")
            ));
        }
    }
    Ok(out)
}

/// The printed RBAC for `name` with rule `skip` (in [`printed_rules`] order)
/// removed, and that rule.
fn rbac_without(name: &str, skip: Option<usize>) -> Result<(Vec<Value>, Option<Value>)> {
    let mut docs = rbac(name)?;
    let mut removed = None;
    let mut i = 0;
    for d in &mut docs {
        let kind = d["kind"].as_str().unwrap_or("").to_string();
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        let rules = d["rules"].as_array_mut().context("a role without rules")?;
        let n = rules.len();
        if let Some(s) = skip
            && (i..i + n).contains(&s)
        {
            removed = Some(rules.remove(s - i));
        }
        i += n;
    }
    Ok((docs, removed))
}

/// Applies `docs` as administrator.
fn apply_docs(kc: &Path, dir: &Path, name: &str, docs: &[Value]) -> Result<()> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    apply_text(kc, dir, &format!("{name}-rbac.json"), &list.to_string())?;
    Ok(())
}

/// A host bound to the printed RBAC without rule `skip`, creating the
/// examples' parents in namespace `name`: the first 403 of its account that
/// the rule would have allowed, or `None` when none came within a minute (the
/// rule was not needed). A 403 the rule would not have allowed fails the test.
fn denial_without(real: &Real, dir: &Path, name: &str, skip: usize) -> Result<Option<String>> {
    let kc = &real.kubeconfig;
    let (docs, rule) = rbac_without(name, Some(skip))?;
    let rule = rule.context("no such rule")?;
    apply_docs(kc, dir, name, &docs)?;
    let sa_kc = service_account_kubeconfig(kc, dir, name, name)?;
    let user = format!("system:serviceaccount:{name}:{name}");
    let log = dir.join(format!("{name}.log"));
    let host = host(&sa_kc, name, name, name, &log)?;
    for f in [
        "examples/static-site/site.yaml",
        "examples/tombstone/workspace.yaml",
    ] {
        apply_text(kc, dir, "parent.yaml", &example_in(f, name)?)?;
    }
    let until = Instant::now() + Duration::from_secs(60);
    let denied = loop {
        let (_, denied) = audit(&real.audit_log, real.audit_from, &user)?;
        if let Some(ev) = denied.first() {
            let d = describe(ev);
            ensure!(
                denied.iter().all(|ev| covers(&rule, ev)),
                "without rule {skip}, a request that rule does not cover was refused: {}",
                denied.iter().map(describe).collect::<Vec<_>>().join("\n")
            );
            break Some(d);
        }
        if Instant::now() > until {
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    drop(host);
    Ok(denied)
}

/// Part 2: the whole lifecycle as the printed RBAC's ServiceAccount, in namespace `ns`.
fn full_lifecycle(real: &Real, dir: &Path, ns: &str) -> Result<()> {
    let kc = &real.kubeconfig;
    apply_docs(kc, dir, ns, &rbac_without(ns, None)?.0)?;
    let sa_kc = service_account_kubeconfig(kc, dir, ns, ns)?;
    let user = format!("system:serviceaccount:{ns}:{ns}");
    let log = dir.join("full.log");
    let mut host = host(&sa_kc, "full", ns, ns, &log)?;
    let fail = |e: anyhow::Error| {
        let tail = std::fs::read_to_string(&log)
            .map(|t| {
                let lines: Vec<&str> = t.lines().collect();
                lines[lines.len().saturating_sub(40)..].join("\n")
            })
            .unwrap_or_default();
        e.context(format!("host log tail:\n{tail}"))
    };
    let mut steps = || -> Result<()> {
        eventually("the host to take its lease", 60, || {
            lease_holder(kc, ns, ns).filter(|h| h.starts_with("full_"))
        })?;

        // Create.
        apply_text(
            kc,
            dir,
            "site.yaml",
            &example_in("examples/static-site/site.yaml", ns)?,
        )?;
        apply_text(
            kc,
            dir,
            "ws.yaml",
            &example_in("examples/tombstone/workspace.yaml", ns)?,
        )?;
        eventually("web Ready with a 2-replica Deployment", 120, || {
            (ready(kc, ns, SITE, "web").as_deref() == Some("True")
                && field(kc, ns, &["deployment", "web"], "{.spec.replicas}").as_deref()
                    == Some("2"))
            .then_some(())
        })?;
        eventually("workspace team-a Ready", 120, || {
            (ready(kc, ns, WORKSPACE, "team-a").as_deref() == Some("True")).then_some(())
        })?;

        // Update: replicas and port (the Service is re-applied too).
        kubectl(
            kc,
            &[
                "-n",
                ns,
                "patch",
                SITE,
                "web",
                "--type=merge",
                "-p",
                r#"{"spec":{"replicas":3,"port":8081}}"#,
            ],
        )?;
        eventually("the Deployment and Service to follow the edit", 60, || {
            (field(kc, ns, &["deployment", "web"], "{.spec.replicas}").as_deref() == Some("3")
                && field(kc, ns, &["service", "web"], "{.spec.ports[*].port}")
                    .is_some_and(|p| p.split_whitespace().any(|p| p == "8081")))
            .then_some(())
        })?;

        // A child deleted by hand comes back.
        let uid = field(kc, ns, &["service", "web"], "{.metadata.uid}").context("service web")?;
        kubectl(kc, &["-n", ns, "delete", "service", "web"])?;
        eventually("service web to be recreated", 60, || {
            field(kc, ns, &["service", "web"], "{.metadata.uid}")
                .filter(|u| !u.is_empty() && *u != uid)
        })?;

        // Hot reload: a new build of the plugin into its ConfigMap.
        let rebuilt = dir.join("static_site_rebuilt.wasm");
        let bytes = with_custom_section(
            std::fs::read(wr_tests::plugins::plugin_path("static-site"))?,
            b"real-rbac",
        );
        let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
        std::fs::write(&rebuilt, &bytes)?;
        publish(kc, &rebuilt, "static-site-plugin")?;
        eventually("the new plugin digest on the WasmController", 90, || {
            kubectl(
                kc,
                &[
                    "get",
                    "wasmcontroller",
                    "static-site",
                    "-o",
                    "jsonpath={.status.pluginDigest}",
                ],
            )
            .ok()
            .filter(|d| d.trim() == digest)
        })?;
        kubectl(
            kc,
            &[
                "-n",
                ns,
                "patch",
                SITE,
                "web",
                "--type=merge",
                "-p",
                r#"{"spec":{"replicas":2}}"#,
            ],
        )?;
        eventually("the reloaded plugin to reconcile", 60, || {
            (field(kc, ns, &["deployment", "web"], "{.spec.replicas}").as_deref() == Some("2"))
                .then_some(())
        })?;

        // Finalize: the tombstone plugin tears down, then the host releases.
        kubectl(
            kc,
            &["-n", ns, "delete", WORKSPACE, "team-a", "--wait=false"],
        )?;
        eventually("workspace team-a to be gone", 90, || {
            gone(kc, ns, WORKSPACE, "team-a").then_some(())
        })?;

        // Delete: the real garbage collector removes the children.
        kubectl(kc, &["-n", ns, "delete", SITE, "web", "--wait=false"])?;
        eventually("web and its children to be gone", 90, || {
            (gone(kc, ns, SITE, "web")
                && gone(kc, ns, "deployment", "web")
                && gone(kc, ns, "service", "web"))
            .then_some(())
        })?;

        // WasmController deletion: a workspace still carries the finalizer,
        // the host releases it (and those of part 1), then its own.
        apply_text(
            kc,
            dir,
            "ws-b.yaml",
            &example_in("examples/tombstone/workspace.yaml", ns)?.replace("team-a", "team-b"),
        )?;
        eventually("team-b to carry the tombstone finalizer", 60, || {
            field(kc, ns, &[WORKSPACE, "team-b"], "{.metadata.finalizers}")
                .filter(|f| f.contains("wasm-reconciler.dev/tombstone"))
        })?;
        delete_example_controllers(kc, 90)?;
        let finalizers = field(kc, ns, &[WORKSPACE, "team-b"], "{.metadata.finalizers}");
        ensure!(
            finalizers
                .as_deref()
                .is_some_and(|f| !f.contains("wasm-reconciler.dev/tombstone")),
            "team-b kept the finalizer after its WasmController was deleted: {finalizers:?}"
        );

        // SIGTERM: the lease is released.
        host.signal("TERM")?;
        ensure!(host.wait_exit(30)? == Some(0), "SIGTERM must exit 0");
        Ok(())
    };
    steps().map_err(fail)?;

    // The verdict, from the audit log (give the last events a moment).
    std::thread::sleep(Duration::from_secs(1));
    let (requests, denied) = audit(&real.audit_log, real.audit_from, &user)?;
    let denied: Vec<String> = denied.iter().map(describe).collect();
    eprintln!(
        "audit log: {requests} requests by {user}, {} refused",
        denied.len()
    );
    ensure!(
        requests > 50,
        "only {requests} requests by {user} in the audit log: is it the right log?"
    );
    ensure!(
        denied.is_empty(),
        "{} requests of the host were refused (403) with the printed RBAC:\n{}",
        denied.len(),
        denied.join("\n")
    );
    Ok(())
}

/// Whether a refused request (an audit event) is one `rule` allows: its verb
/// on its resource (with subresource) in its group, by name when the rule
/// names objects. A child refused by the OwnerReferencesPermissionEnforcement
/// admission plugin ("cannot set blockOwnerDeletion") is what a rule granting
/// `update` on `<parent>/finalizers` allows.
fn covers(rule: &Value, ev: &Value) -> bool {
    let s = |p: &str| ev.pointer(p).and_then(Value::as_str).unwrap_or("");
    let has = |k: &str, x: &str| {
        rule[k]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(x)))
    };
    if s("/responseStatus/message").contains("cannot set blockOwnerDeletion") {
        return has("verbs", "update")
            && rule["resources"].as_array().is_some_and(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .any(|r| r.ends_with("/finalizers"))
            });
    }
    let resource = match s("/objectRef/subresource") {
        "" => s("/objectRef/resource").to_string(),
        sub => format!("{}/{sub}", s("/objectRef/resource")),
    };
    let named = rule["resourceNames"]
        .as_array()
        .is_none_or(|n| n.is_empty() || n.iter().any(|x| x.as_str() == Some(s("/objectRef/name"))));
    has("apiGroups", s("/objectRef/apiGroup"))
        && has("resources", &resource)
        && has("verbs", s("/verb"))
        && named
}

/// Removes what this test made: finalizers first (its hosts are gone), so
/// nothing is left terminating on a shared cluster.
fn cleanup(kc: &Path, namespaces: &[String]) {
    for ns in namespaces {
        let kinds = format!("{SITE},{WORKSPACE}");
        let names = kubectl(kc, &["-n", ns, "get", &kinds, "-o", "name"]).unwrap_or_default();
        for obj in names.lines().filter(|l| !l.is_empty()) {
            let _ = kubectl(
                kc,
                &[
                    "-n",
                    ns,
                    "patch",
                    obj,
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ],
            );
        }
    }
    for wc in ["static-site", "tombstone"] {
        let _ = kubectl(
            kc,
            &[
                "patch",
                "wasmcontroller",
                wc,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ],
        );
    }
    let _ = kubectl(
        kc,
        &[
            "delete",
            "wasmcontroller",
            "static-site",
            "tombstone",
            "--ignore-not-found",
            "--wait=false",
        ],
    );
    let mut args = vec!["delete", "namespace", "--ignore-not-found", "--wait=false"];
    args.extend(namespaces.iter().map(String::as_str));
    let _ = kubectl(kc, &args);
    for ns in namespaces {
        let _ = kubectl(
            kc,
            &[
                "delete",
                "clusterrole,clusterrolebinding",
                ns,
                "--ignore-not-found",
            ],
        );
    }
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
