//! Helpers of the tests that need a real kube-apiserver (issue 13): the
//! cluster itself (`WR_TEST_CLUSTER=real`), kubeconfigs for ServiceAccounts
//! (a token from the TokenRequest API), the audit log as the referee of what
//! a ServiceAccount was refused, the examples installed into a namespace of
//! the test's own, and `wasm-reconciler run` as a process with a Lease of its own.
//!
//! The real cluster may be shared with other tests (one namespace each), so
//! everything here is named per test and the audit log is read per user.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

use crate::run_common::{BIN, Proc, kubectl};

/// This test's turn on the shared real control plane (`wr_tests::target`),
/// or `None` (the test then skips with the reason printed) unless
/// `WR_TEST_CLUSTER=real`.
pub struct Real {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The API server's audit log (JSON lines, one event per request).
    pub audit_log: PathBuf,
    /// Where the audit log ended when this test began.
    pub audit_from: u64,
    /// Exclusive use of the shared cluster while it lives.
    pub session: wr_tests::target::RealSession,
}

impl Real {
    /// Namespace `name` of this test (unique on the shared cluster, labelled
    /// so that the next session clears it), created.
    pub fn namespace(&self, name: &str) -> Result<String> {
        self.session.create_namespace_blocking(name)?;
        Ok(self.session.ns(name))
    }
}

/// The real cluster, or `None` with a one-line reason printed.
pub fn real(test: &str, why_real_only: &str) -> Result<Option<Real>> {
    if !wr_tests::target::real_selected() {
        eprintln!("{test}: skipped, needs WR_TEST_CLUSTER=real: {why_real_only}");
        return Ok(None);
    }
    let session = wr_tests::target::RealSession::begin_blocking()
        .context("taking a turn on the real control plane")?;
    let audit_log = session.shared.audit.path().to_path_buf();
    Ok(Some(Real {
        kubeconfig: session.shared.kubeconfig.clone(),
        audit_from: session.shared.audit.mark()?,
        audit_log,
        session,
    }))
}

/// The examples' parent kinds, fully qualified: a bare `staticsite` is ambiguous
/// on a shared cluster where other suites install `staticsites` of other groups
/// (`languages_e2e` adds `staticsites.{rust,js,python,c}.examples…`), and kubectl
/// then picks one of them — the wrong one for these tests.
pub const SITE: &str = "staticsites.examples.wasm-reconciler.dev";
/// See [`SITE`].
pub const WORKSPACE: &str = "workspaces.examples.wasm-reconciler.dev";

/// `kubectl apply --server-side --force-conflicts` of a YAML/JSON text.
pub fn apply_text(kc: &Path, dir: &Path, name: &str, text: &str) -> Result<String> {
    let f = dir.join(name);
    std::fs::write(&f, text)?;
    kubectl(
        kc,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            f.to_str().unwrap_or(""),
        ],
    )
}

/// A kubeconfig for ServiceAccount `ns/sa` (created if missing) on the
/// admin kubeconfig's server, authenticated by a one-hour token from the
/// TokenRequest API (`kubectl create token`), so the host sees exactly the
/// RBAC bound to that account.
pub fn service_account_kubeconfig(admin: &Path, dir: &Path, ns: &str, sa: &str) -> Result<PathBuf> {
    apply_text(
        admin,
        dir,
        &format!("sa-{ns}-{sa}.json"),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": ns}})
        .to_string(),
    )?;
    let token = kubectl(
        admin,
        &["-n", ns, "create", "token", sa, "--duration", "3600s"],
    )?;
    let view: Value = serde_json::from_str(&kubectl(
        admin,
        &[
            "config",
            "view",
            "--raw",
            "--minify",
            "--flatten",
            "-o",
            "json",
        ],
    )?)
    .context("kubectl config view")?;
    let cluster = view
        .pointer("/clusters/0/cluster")
        .cloned()
        .context("the admin kubeconfig has no cluster")?;
    let user = format!("system:serviceaccount:{ns}:{sa}");
    let kc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "real", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token.trim()}}],
        "contexts": [{"name": "sa", "context": {"cluster": "real", "user": user}}],
        "current-context": "sa",
    });
    let path = dir.join(format!("kubeconfig-{ns}-{sa}"));
    std::fs::write(&path, kc.to_string())?;
    Ok(path)
}

/// Audit events of `user` (`system:serviceaccount:NS:SA`) after position
/// `from`: (requests, the refused ones (403), whole events: the message tells
/// an admission refusal apart). Only the final stage of each request counts.
pub fn audit(log: &Path, from: u64, user: &str) -> Result<(usize, Vec<Value>)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(log)
        .with_context(|| format!("opening the audit log {}", log.display()))?;
    f.seek(SeekFrom::Start(from))?;
    let mut text = String::new();
    f.read_to_string(&mut text)
        .with_context(|| format!("reading the audit log {}", log.display()))?;
    let mut requests = 0;
    let mut denied = Vec::new();
    for line in text.lines().filter(|l| l.contains(user)) {
        let Ok(ev) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if ev.pointer("/user/username").and_then(Value::as_str) != Some(user)
            || ev.get("stage").and_then(Value::as_str) == Some("RequestReceived")
        {
            continue;
        }
        requests += 1;
        if ev.pointer("/responseStatus/code").and_then(Value::as_i64) == Some(403) {
            denied.push(ev);
        }
    }
    Ok((requests, denied))
}

/// `verb group/resource[/sub] ns/name: message` of an audit event.
pub fn describe(ev: &Value) -> String {
    let s = |p: &str| ev.pointer(p).and_then(Value::as_str).unwrap_or("");
    let group = match s("/objectRef/apiGroup") {
        "" => "core",
        g => g,
    };
    let sub = match s("/objectRef/subresource") {
        "" => String::new(),
        x => format!("/{x}"),
    };
    format!(
        "{} {group}/{}{sub} {}/{}: {}",
        s("/verb"),
        s("/objectRef/resource"),
        s("/objectRef/namespace"),
        s("/objectRef/name"),
        s("/responseStatus/message"),
    )
}

/// The text of an example manifest with its `namespace: default` moved to `ns`.
pub fn example_in(file: &str, ns: &str) -> Result<String> {
    let root = wr_tests::plugins::workspace_root();
    let text = std::fs::read_to_string(root.join(file))?;
    ensure!(
        text.contains("namespace: default"),
        "{file} no longer puts its object in namespace default"
    );
    Ok(text.replace("namespace: default", &format!("namespace: {ns}")))
}

/// Namespace of the examples' plugin ConfigMaps (their controller.yaml names it).
pub const PLUGIN_NS: &str = "wasm-reconciler";

/// `wasm-reconciler publish --apply` of a plugin into ConfigMap `wasm-reconciler/name`.
pub fn publish(kc: &Path, plugin: &Path, name: &str) -> Result<()> {
    let out = Command::new(BIN)
        .args(["publish", "--plugin"])
        .arg(plugin)
        .args(["--name", name, "--namespace", PLUGIN_NS, "--apply"])
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

/// Installs what the examples need cluster-wide, as an administrator: the
/// WasmController CRD (`wasm-reconciler crds`), the examples' CRDs, their
/// plugins published into namespace `wasm-reconciler` (as the examples name
/// it; kept between tests), and their WasmControllers as they are. Fails when
/// other WasmControllers exist: a host reconciles every WasmController in the
/// cluster, and those of another test would need rules the examples' RBAC
/// does not print (a session starts by clearing them).
pub fn install_examples(kc: &Path, dir: &Path) -> Result<()> {
    let root = wr_tests::plugins::workspace_root();
    let crds = Command::new(BIN).arg("crds").output()?;
    ensure!(crds.status.success(), "wasm-reconciler crds failed");
    apply_text(kc, dir, "crds.yaml", &String::from_utf8(crds.stdout)?)?;
    for f in [
        "examples/static-site/crd.yaml",
        "examples/tombstone/crd.yaml",
    ] {
        apply_text(
            kc,
            dir,
            "example-crd.yaml",
            &std::fs::read_to_string(root.join(f))?,
        )?;
    }
    kubectl(
        kc,
        &[
            "wait",
            "--for=condition=Established",
            "crd/wasmcontrollers.wasm-reconciler.dev",
            "crd/staticsites.examples.wasm-reconciler.dev",
            "crd/workspaces.examples.wasm-reconciler.dev",
        ],
    )?;
    let others: Vec<String> = kubectl(kc, &["get", "wasmcontrollers", "-o", "name"])?
        .lines()
        .map(|l| {
            l.trim_start_matches("wasmcontroller.wasm-reconciler.dev/")
                .to_string()
        })
        .filter(|n| n != "static-site" && n != "tombstone")
        .collect();
    ensure!(
        others.is_empty(),
        "the cluster has WasmControllers of another test ({}); the examples' least-privilege RBAC cannot cover them",
        others.join(", ")
    );
    apply_text(
        kc,
        dir,
        "ns-wasm-reconciler.json",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLUGIN_NS}})
            .to_string(),
    )?;
    publish(
        kc,
        &wr_tests::plugins::plugin_path("static-site"),
        "static-site-plugin",
    )?;
    publish(
        kc,
        &wr_tests::plugins::plugin_path("tombstone"),
        "tombstone-plugin",
    )?;
    for f in [
        "examples/static-site/controller.yaml",
        "examples/tombstone/controller.yaml",
    ] {
        apply_text(
            kc,
            dir,
            "example-wc.yaml",
            &std::fs::read_to_string(root.join(f))?,
        )?;
    }
    Ok(())
}

/// Deletes the examples' WasmControllers and waits until they are gone (a
/// running host releases their parents, then its cleanup finalizer).
pub fn delete_example_controllers(kc: &Path, secs: u64) -> Result<()> {
    kubectl(
        kc,
        &[
            "delete",
            "wasmcontroller",
            "static-site",
            "tombstone",
            "--ignore-not-found",
            "--wait=false",
        ],
    )?;
    crate::run_common::eventually("the WasmControllers to be gone", secs, || {
        kubectl(kc, &["get", "wasmcontrollers", "-o", "name"])
            .ok()
            .filter(|s| s.trim().is_empty())
    })?;
    Ok(())
}

/// `wasm-reconciler run` as `kubeconfig`'s user, electing itself leader of
/// Lease `lease_ns/lease`; its log goes to `log`. Returns once it serves /metrics.
pub fn host(
    kubeconfig: &Path,
    name: &str,
    lease_ns: &str,
    lease: &str,
    log: &Path,
) -> Result<Proc> {
    let mut child = Command::new(BIN)
        .args(["--log-level", "info", "run", "--kubeconfig"])
        .arg(kubeconfig)
        .args([
            "--metrics-bind",
            "127.0.0.1:0",
            "--lease-namespace",
            lease_ns,
        ])
        .args(["--lease-name", lease])
        .args([
            "--leader-elect=true",
            "--lease-duration-seconds=15",
            "--renew-deadline-seconds=10",
            "--retry-period-seconds=1",
            "--shutdown-timeout-seconds=10",
        ])
        .env("POD_NAME", name)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?)
        .spawn()
        .with_context(|| format!("starting run {name}"))?;
    let out = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if line.starts_with("metrics: ") {
                let _ = tx.send(line);
            }
        }
    });
    let proc = Proc {
        child,
        name: name.into(),
    };
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        bail!(
            "run {name} did not serve /metrics within 60 s (log: {})",
            log.display()
        );
    }
    Ok(proc)
}

/// Holder of Lease `ns/name`.
pub fn lease_holder(kc: &Path, ns: &str, name: &str) -> Option<String> {
    kubectl(
        kc,
        &[
            "-n",
            ns,
            "get",
            "lease",
            name,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    )
    .ok()
    .map(|s| s.trim().to_string())
}

/// A jsonpath of a namespaced object.
pub fn field(kc: &Path, ns: &str, what: &[&str], path: &str) -> Option<String> {
    let mut args = vec!["-n", ns, "get"];
    args.extend_from_slice(what);
    let jp = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &jp]);
    kubectl(kc, &args).ok().map(|s| s.trim().to_string())
}

/// True once `kind/name` in `ns` does not exist.
pub fn gone(kc: &Path, ns: &str, kind: &str, name: &str) -> bool {
    kubectl(
        kc,
        &[
            "-n",
            ns,
            "get",
            kind,
            name,
            "--ignore-not-found",
            "-o",
            "name",
        ],
    )
    .is_ok_and(|s| s.trim().is_empty())
}

/// `Ready` condition status of a parent.
pub fn ready(kc: &Path, ns: &str, kind: &str, name: &str) -> Option<String> {
    field(
        kc,
        ns,
        &[kind, name],
        r#"{.status.conditions[?(@.type=="Ready")].status}"#,
    )
}
