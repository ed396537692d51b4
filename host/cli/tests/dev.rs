//! Acceptance test of `wasm-reconciler dev` (issue 6, first bullet): the
//! README's first command, bounded in time, with kubectl as the referee —
//! the example parents become Ready with their children, an edit of a parent
//! reaches its children, a rebuilt plugin is hot-reloaded, SIGINT stops it
//! with exit 0, and a restart on the same data directory keeps the state.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};
use wr_tests::plugins::plugin_path;

/// Generous bound for anything to converge (first start compiles two components).
const CONVERGE: Duration = Duration::from_secs(120);

struct Dev {
    child: Child,
    log: PathBuf,
    out: PathBuf,
}

impl Dev {
    fn start(work: &Path, plugins: &Path, tag: &str) -> Dev {
        Dev::start_with(work, plugins, tag, &[])
    }

    /// [`Dev::start`] with more command-line arguments.
    fn start_with(work: &Path, plugins: &Path, tag: &str, extra: &[&str]) -> Dev {
        let log = work.join(format!("dev-{tag}.log"));
        let out = work.join(format!("dev-{tag}.out"));
        let child = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
            .args(["dev", "--port", "0", "--plugin-dir"])
            .arg(plugins)
            .arg("--data-dir")
            .arg(work.join("data"))
            .arg("--kubeconfig-out")
            .arg(work.join("kubeconfig"))
            .args(extra)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cannot start wasm-reconciler dev");
        Dev { child, log, out }
    }

    fn diagnostics(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        format!(
            "--- dev stderr (last lines, newest first):\n{}",
            tail.join("\n")
        )
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// Waits (bounded) for the process to exit.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "dev did not exit after the signal\n{}",
                self.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run kubectl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn get_json(kubeconfig: &Path, args: &[&str]) -> Option<Value> {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(kubeconfig, &a).ok()?).ok()
}

/// Polls `f` until it returns Some, failing with the dev log after [`CONVERGE`].
fn eventually<T>(dev: &Dev, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + CONVERGE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what}\n{}",
            dev.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The parent's uid once its Ready condition is True for its current generation.
fn ready_uid(kc: &Path, kind: &str, name: &str) -> Option<String> {
    let p = get_json(kc, &["get", kind, name])?;
    let generation = p["metadata"]["generation"].as_i64()?;
    let ready = p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    (ready["status"] == "True" && ready["observedGeneration"].as_i64() == Some(generation))
        .then(|| p["metadata"]["uid"].as_str().map(str::to_string))
        .flatten()
}

/// Names of the objects of `resources` controlled by the object with `uid`.
fn children_of(kc: &Path, resources: &str, uid: &str) -> Vec<String> {
    let Some(list) = get_json(kc, &["get", resources]) else {
        return vec![];
    };
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r["uid"] == uid && r["controller"] == true)
                })
        })
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    names.sort();
    names
}

fn deployment_replicas(kc: &Path) -> Option<i64> {
    get_json(kc, &["get", "deployment", "web"])?["spec"]["replicas"].as_i64()
}

/// Appends a custom section to a component: still a valid component, new digest.
fn with_custom_section(mut bytes: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let name = b"dev-test";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(payload);
    bytes.push(0); // custom section id
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

#[test]
fn dev_runs_the_examples_follows_edits_hot_reloads_and_stops_cleanly() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for name in ["static-site", "tombstone"] {
        let src = plugin_path(name);
        std::fs::copy(&src, plugins.join(src.file_name().unwrap())).unwrap();
    }
    let kc = work.path().join("kubeconfig");

    let mut dev = Dev::start(work.path(), &plugins, "first");

    // The example parents become Ready with their children.
    let web = eventually(&dev, "StaticSite web Ready", || {
        ready_uid(&kc, "staticsite", "web")
    });
    let web_children = eventually(&dev, "children of web", || {
        let c = children_of(&kc, "deployments,services,configmaps", &web);
        (c.len() == 3).then_some(c)
    });
    assert_eq!(
        web_children,
        ["ConfigMap/web-content", "Deployment/web", "Service/web"]
    );
    let team = eventually(&dev, "Workspace team-a Ready", || {
        ready_uid(&kc, "workspace", "team-a")
    });
    eventually(&dev, "children of team-a", || {
        (!children_of(&kc, "configmaps", &team).is_empty()).then_some(())
    });

    // The banner's commands name the kubeconfig the test is using.
    let banner = std::fs::read_to_string(&dev.out).unwrap();
    let expected = format!(
        "kubectl --kubeconfig {} get staticsites,deployments",
        kc.display()
    );
    assert!(banner.contains(&expected), "banner:\n{banner}");

    // Edit the parent: the Deployment follows.
    assert_eq!(deployment_replicas(&kc), Some(2));
    kubectl(
        &kc,
        &[
            "patch",
            "staticsite",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
    )
    .unwrap();
    eventually(&dev, "Deployment web scaled to 3", || {
        (deployment_replicas(&kc) == Some(3)).then_some(())
    });

    // Rebuild the plugin (same logic, new bytes): the controller reloads it.
    let wasm = plugins.join("static_site.wasm");
    let new_bytes = with_custom_section(std::fs::read(&wasm).unwrap(), b"rebuilt");
    let new_digest = format!("sha256:{:x}", Sha256::digest(&new_bytes));
    std::fs::write(&wasm, &new_bytes).unwrap();
    eventually(&dev, "static-site reloaded the rebuilt component", || {
        let wc = get_json(&kc, &["get", "wasmcontroller", "static-site"])?;
        (wc["status"]["pluginDigest"] == new_digest.as_str()).then_some(())
    });
    kubectl(
        &kc,
        &[
            "patch",
            "staticsite",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":4}}"#,
        ],
    )
    .unwrap();
    eventually(&dev, "reloaded plugin scales web to 4", || {
        (deployment_replicas(&kc) == Some(4)).then_some(())
    });

    dev.signal("INT");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());

    // Restart on the same data directory: objects (and the edit) are kept,
    // the samples are not reset, and everything is Ready again.
    // (After its banner: the status read next was stored by the first run.)
    let mut dev = Dev::start(work.path(), &plugins, "second");
    banner_of(&mut dev);
    eventually(&dev, "StaticSite web Ready after restart", || {
        ready_uid(&kc, "staticsite", "web").filter(|u| *u == web)
    });
    assert_eq!(deployment_replicas(&kc), Some(4));
    dev.signal("TERM");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());
}

/// A signal while `dev` is still starting (the kubeconfig is written before
/// the examples are installed and the host starts) stops it cleanly, not by
/// the signal's default action half-way through its setup.
#[test]
fn dev_stops_cleanly_on_a_signal_during_startup() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let src = plugin_path("static-site");
    std::fs::copy(&src, plugins.join(src.file_name().unwrap())).unwrap();
    let mut dev = Dev::start(work.path(), &plugins, "early");
    eventually(&dev, "the kubeconfig written", || {
        work.path().join("kubeconfig").exists().then_some(())
    });
    dev.signal("TERM");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());
}

/// docs/dev.md: "To try your own plugin, put its component in a directory of
/// your own, point `--plugin-dir` there, and create a WasmController whose
/// `spec.plugin.path` names the file." The directory holds no example.
#[test]
fn dev_runs_a_plugin_dir_holding_only_your_own_components() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("mine");
    std::fs::create_dir_all(&plugins).unwrap();
    let mine = plugins.join("my_site.wasm");
    std::fs::copy(plugin_path("static-site"), &mine).unwrap();
    let kc = work.path().join("kubeconfig");

    let mut dev = Dev::start(work.path(), &plugins, "own");
    // It runs (the banner is printed once everything is installed) ...
    let deadline = Instant::now() + CONVERGE;
    while !std::fs::read_to_string(&dev.out)
        .unwrap_or_default()
        .contains("kubeconfig written to")
    {
        if let Some(status) = dev.child.try_wait().unwrap() {
            panic!(
                "dev exited ({status}) with a plugin dir of its own\n{}",
                dev.diagnostics()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no banner\n{}",
            dev.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // ... without the examples it has no component for ...
    let wcs = get_json(&kc, &["get", "wasmcontrollers"]).unwrap();
    assert_eq!(wcs["items"].as_array().map(Vec::len), Some(0), "{wcs}");

    // ... and runs a controller of the user's own on that component.
    let wc = format!(
        "apiVersion: wasm-reconciler.dev/v1alpha1\nkind: WasmController\n\
         metadata: {{name: my-site}}\nspec:\n  \
         parentResource: {{apiVersion: examples.wasm-reconciler.dev/v1alpha1, resource: staticsites}}\n  \
         childResources:\n  - {{apiVersion: apps/v1, resource: deployments}}\n  \
         - {{apiVersion: v1, resource: services}}\n  - {{apiVersion: v1, resource: configmaps}}\n  \
         plugin: {{path: {}}}\n",
        mine.display()
    );
    let site = "apiVersion: examples.wasm-reconciler.dev/v1alpha1\nkind: StaticSite\n\
                metadata: {name: mine, namespace: default}\n\
                spec: {image: 'nginx:1.27', replicas: 1, port: 8080, content: {index.html: hi}}\n";
    for (name, doc) in [("wc.yaml", wc.as_str()), ("site.yaml", site)] {
        let f = work.path().join(name);
        std::fs::write(&f, doc).unwrap();
        kubectl(&kc, &["apply", "-f", f.to_str().unwrap()]).unwrap();
    }
    let uid = eventually(&dev, "StaticSite mine Ready", || {
        ready_uid(&kc, "staticsite", "mine")
    });
    eventually(&dev, "children of mine", || {
        (children_of(&kc, "deployments", &uid).len() == 1).then_some(())
    });
    dev.signal("TERM");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());
}

/// Waits (bounded) for `dev`'s banner on stdout and returns it.
fn banner_of(dev: &mut Dev) -> String {
    let deadline = Instant::now() + CONVERGE;
    loop {
        let out = std::fs::read_to_string(&dev.out).unwrap_or_default();
        if out.contains("Press Ctrl-C") {
            return out;
        }
        if let Some(status) = dev.child.try_wait().unwrap() {
            panic!("dev exited ({status})\n{}", dev.diagnostics());
        }
        assert!(
            Instant::now() < deadline,
            "no banner\n{}",
            dev.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Session 8 new-user trial: a `wasm-reconciler new` project runs `dev
/// --plugin-dir build --no-samples`, then applies its own CRD, controller and
/// parent. The banner shows commands that work (not the examples' `patch
/// staticsite web`, which is not there), and `dev` logs the user's parent
/// becoming Ready as it does for the examples' (it followed only the
/// examples' kinds before); the controller names its parent by `kind`, as
/// the tombstone example does.
#[test]
fn dev_banner_and_ready_log_cover_your_own_controller() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("build");
    std::fs::create_dir_all(&plugins).unwrap();
    let mine = plugins.join("my_site.wasm");
    std::fs::copy(plugin_path("static-site"), &mine).unwrap();
    let kc = work.path().join("kubeconfig");

    let mut dev = Dev::start_with(work.path(), &plugins, "banner", &["--no-samples"]);
    let banner = banner_of(&mut dev);
    assert!(
        !banner.contains("patch staticsite web"),
        "banner:\n{banner}"
    );
    assert!(!banner.contains("get staticsites"), "banner:\n{banner}");
    assert!(
        banner.contains("apply -f controller.yaml\n"),
        "banner:\n{banner}"
    );

    let docs = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
         metadata: {{name: mysites.mine.example.com}}\nspec:\n  group: mine.example.com\n  \
         scope: Namespaced\n  names: {{plural: mysites, singular: mysite, kind: MySite}}\n  \
         versions:\n  - name: v1\n    served: true\n    storage: true\n    \
         subresources: {{status: {{}}}}\n    schema:\n      openAPIV3Schema:\n        \
         type: object\n        properties:\n          \
         spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n          \
         status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n\
         ---\napiVersion: wasm-reconciler.dev/v1alpha1\nkind: WasmController\n\
         metadata: {{name: my-site}}\nspec:\n  \
         parentResource: {{apiVersion: mine.example.com/v1, kind: MySite}}\n  \
         childResources:\n  - {{apiVersion: apps/v1, resource: deployments}}\n  \
         - {{apiVersion: v1, resource: services}}\n  - {{apiVersion: v1, resource: configmaps}}\n  \
         plugin: {{path: {}}}\n",
        mine.display()
    );
    // The WasmController before its parent CRD: `dev` follows the kind once
    // it is served.
    let (crd, wc) = docs.split_once("---\n").unwrap();
    for (name, doc) in [("wc.yaml", wc), ("crd.yaml", crd)] {
        let f = work.path().join(name);
        std::fs::write(&f, doc).unwrap();
        kubectl(&kc, &["apply", "-f", f.to_str().unwrap()]).unwrap();
        std::thread::sleep(Duration::from_secs(2));
    }
    let site = "apiVersion: mine.example.com/v1\nkind: MySite\n\
                metadata: {name: mine, namespace: default}\n\
                spec: {image: 'nginx:1.27', replicas: 1, port: 8080, content: {index.html: hi}}\n";
    let f = work.path().join("example.yaml");
    std::fs::write(&f, site).unwrap();
    eventually(&dev, "MySite served", || {
        kubectl(&kc, &["apply", "-f", f.to_str().unwrap()]).ok()
    });
    eventually(&dev, "MySite mine Ready", || {
        ready_uid(&kc, "mysite", "mine")
    });
    let logged = |dev: &Dev| {
        std::fs::read_to_string(&dev.log)
            .unwrap_or_default()
            .lines()
            .any(|l| {
                l.contains("parent Ready") && l.contains("kind=MySite") && l.contains("name=mine")
            })
    };
    eventually(&dev, "dev logs `parent Ready` for MySite mine", || {
        logged(&dev).then_some(())
    });
    dev.signal("TERM");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());
}

/// Session 8 new-user trial: `dev --authorization rbac` with a plugin dir
/// holding only one example's component grants the host that example's RBAC
/// (it paired the examples and the components found by position, so
/// `tombstone.wasm` alone got static-site's rules and its Workspace a 403).
#[test]
fn dev_rbac_with_only_the_tombstone_component_runs_tombstone() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("build");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(plugin_path("tombstone"), plugins.join("tombstone.wasm")).unwrap();
    let kc = work.path().join("kubeconfig");
    let mut dev = Dev::start_with(work.path(), &plugins, "rbac1", &["--authorization", "rbac"]);
    banner_of(&mut dev);
    eventually(&dev, "Workspace team-a Ready", || {
        ready_uid(&kc, "workspace", "team-a")
    });
    dev.signal("TERM");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());
}

/// Session 8 trial: a second `dev` on a busy port (the default 6443, with
/// another `dev` running) says how to get past it, not only the OS error.
#[test]
fn dev_on_a_busy_port_says_port_0_picks_a_free_one() {
    let work = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-reconciler"))
        .args(["dev", "--port", &port, "--plugin-dir"])
        .arg(work.path())
        .arg("--kubeconfig-out")
        .arg(work.path().join("kubeconfig"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("--port 0 picks a free port"), "{stderr}");
}

/// The StaticSite's `Available` condition: (status, message).
fn available_of(kc: &Path, name: &str) -> Option<(String, String)> {
    let p = get_json(kc, &["get", "staticsite", name])?;
    let c = p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    Some((
        c["status"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or("").to_string(),
    ))
}

/// Issue 16, item 6: in `dev` (defaults, as the README runs it) the workload
/// simulator runs the example's Deployment, so the StaticSite, which reports
/// its Deployment's available replicas, becomes `Available=True` — and
/// follows a scale-up, which it can only do by reacting to its child's status.
#[test]
fn dev_simulates_workloads_so_the_example_site_becomes_available() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for name in ["static-site", "tombstone"] {
        let src = plugin_path(name);
        std::fs::copy(&src, plugins.join(src.file_name().unwrap())).unwrap();
    }
    let kc = work.path().join("kubeconfig");
    let mut dev = Dev::start(work.path(), &plugins, "simulated");

    let (_, message) = eventually(&dev, "StaticSite web Available=True", || {
        available_of(&kc, "web").filter(|(s, _)| s == "True")
    });
    assert_eq!(message, "2/2 replicas available");
    // What the site reports comes from a Deployment the simulator rolled out:
    // Running pods on a simulated node, controlled by the Deployment's ReplicaSet.
    let d = get_json(&kc, &["get", "deployment", "web"]).unwrap();
    assert_eq!(d["status"]["availableReplicas"], 2, "{d:#}");
    let pods = get_json(
        &kc,
        &["get", "pods", "-l", "app.kubernetes.io/instance=web"],
    );
    let pods = pods.map(|p| p["items"].as_array().cloned().unwrap_or_default());
    let pods = pods.unwrap_or_default();
    assert_eq!(pods.len(), 2, "{pods:#?}");
    for p in &pods {
        assert_eq!(p["status"]["phase"], "Running", "{p:#}");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    }

    kubectl(
        &kc,
        &[
            "patch",
            "staticsite",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
    )
    .unwrap();
    eventually(&dev, "StaticSite web reports 3/3 available", || {
        available_of(&kc, "web").filter(|(s, m)| s == "True" && m == "3/3 replicas available")
    });
    dev.signal("TERM");
    let status = dev.wait_exit();
    assert!(status.success(), "exit {status:?}\n{}", dev.diagnostics());
}
