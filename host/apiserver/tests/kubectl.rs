//! kubectl 1.32 (the user's view) against the embedded server: the built-in
//! kinds everyday commands create, `scale`, `api-resources`, `explain` and
//! client-side validation (issue 20 items 1, 3, 8).
//!
//! kubectl's typed generators (`create deployment`, `run`) send protobuf,
//! which another module covers; here their objects go through
//! `--dry-run=client -o json | kubectl create -f -` (JSON) so this test
//! measures resources and OpenAPI alone.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use wr_apiserver::{Config, RunningServer};

/// kubectl 1.32: `$KUBECTL`, else the versioned binary of the Cloud SDK
/// (the `kubectl` on PATH there is a dispatcher that picks a version from
/// the server's), else `kubectl` on PATH.
fn kubectl_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let sdk = PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl.1.32");
    if sdk.exists() {
        return Some(sdk);
    }
    std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| PathBuf::from("kubectl"))
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

struct Out {
    ok: bool,
    stdout: String,
    /// stdout and stderr.
    text: String,
}

impl Kubectl {
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Out> {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes()).await?;
        }
        let out = child.wait_with_output().await?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        Ok(Out {
            ok: out.status.success(),
            stdout,
            text,
        })
    }

    /// Run and require success; returns the combined output.
    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        let out = self.run(args, stdin).await?;
        anyhow::ensure!(out.ok, "kubectl {} failed:\n{}", args.join(" "), out.text);
        Ok(out.text)
    }

    /// `kubectl <generator args> --dry-run=client -o json | kubectl create -f -`.
    async fn generate_and_create(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut gen_args = args.to_vec();
        gen_args.extend(["--dry-run=client", "-o", "json"]);
        let json = self.ok(&gen_args, None).await?;
        self.ok(&["create", "-f", "-"], Some(&json)).await
    }
}

async fn setup(dir: &Path) -> anyhow::Result<Option<(RunningServer, Kubectl)>> {
    let Some(bin) = kubectl_binary() else {
        eprintln!("skipped: no kubectl 1.32 (set KUBECTL or install the Cloud SDK's kubectl.1.32)");
        return Ok(None);
    };
    let srv = wr_apiserver::start(Config::default()).await?;
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig)?;
    Ok(Some((
        srv,
        Kubectl {
            bin,
            kubeconfig,
            cache: dir.join("cache"),
        },
    )))
}

fn has_line(text: &str, pattern: &[&str]) -> bool {
    text.lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words == pattern
    })
}

#[tokio::test]
async fn kubectl_works_with_builtin_workloads() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some((srv, k)) = setup(dir.path()).await? else {
        return Ok(());
    };

    // kubectl warns on stderr that 1.32 is outside the supported skew of 1.37.
    let v = k.run(&["version", "-o", "json"], None).await?;
    let v: serde_json::Value = serde_json::from_str(&v.stdout)?;
    assert_eq!(
        v["serverVersion"]["gitVersion"],
        wr_apiserver::KUBERNETES_VERSION
    );

    let res = k.ok(&["api-resources"], None).await?;
    for row in [
        &["pods", "po", "v1", "true", "Pod"][..],
        &["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
        &["statefulsets", "sts", "apps/v1", "true", "StatefulSet"],
        &["cronjobs", "cj", "batch/v1", "true", "CronJob"],
        &["jobs", "batch/v1", "true", "Job"],
        &[
            "ingresses",
            "ing",
            "networking.k8s.io/v1",
            "true",
            "Ingress",
        ],
        &["persistentvolumes", "pv", "v1", "false", "PersistentVolume"],
        &[
            "horizontalpodautoscalers",
            "hpa",
            "autoscaling/v2",
            "true",
            "HorizontalPodAutoscaler",
        ],
        &[
            "poddisruptionbudgets",
            "pdb",
            "policy/v1",
            "true",
            "PodDisruptionBudget",
        ],
    ] {
        assert!(has_line(&res, row), "api-resources lacks {row:?}:\n{res}");
    }

    let out = k
        .generate_and_create(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
        ])
        .await?;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = k
        .generate_and_create(&["run", "solo", "--image=nginx:1.27"])
        .await?;
    assert!(out.contains("pod/solo created"), "{out}");
    let out = k
        .generate_and_create(&["create", "job", "once", "--image=busybox:1.36"])
        .await?;
    assert!(out.contains("job.batch/once created"), "{out}");
    let out = k
        .generate_and_create(&[
            "create",
            "cronjob",
            "nightly",
            "--image=busybox:1.36",
            "--schedule=0 3 * * *",
        ])
        .await?;
    assert!(out.contains("cronjob.batch/nightly created"), "{out}");

    let out = k
        .ok(&["scale", "deployment", "web", "--replicas=4"], None)
        .await?;
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    let replicas = k
        .ok(
            &["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"],
            None,
        )
        .await?;
    assert_eq!(replicas.trim(), "4");

    let all = k.ok(&["get", "all", "-o", "name"], None).await?;
    for name in [
        "pod/solo",
        "deployment.apps/web",
        "job.batch/once",
        "cronjob.batch/nightly",
    ] {
        assert!(
            all.lines().any(|l| l == name),
            "get all lacks {name}:\n{all}"
        );
    }

    // --prune walks kubectl's default allowlist (Endpoints, PVCs, Ingresses, ...).
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pruned","labels":{"set":"demo"}}}"#;
    let out = k
        .ok(&["apply", "--prune", "-l", "set=demo", "-f", "-"], Some(cm))
        .await?;
    assert!(out.contains("configmap/pruned created"), "{out}");
    srv.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn kubectl_explain_and_validation_use_the_openapi_documents() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some((srv, k)) = setup(dir.path()).await? else {
        return Ok(());
    };
    let out = k.ok(&["explain", "deployment.spec.replicas"], None).await?;
    assert!(out.contains("GROUP:      apps"), "{out}");
    assert!(out.contains("FIELD: replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");
    let out = k.ok(&["explain", "pods.spec.containers"], None).await?;
    assert!(out.contains("FIELD: containers <[]Container>"), "{out}");

    let crd = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
      "metadata":{"name":"gizmos.example.com"},
      "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"gizmos","kind":"Gizmo"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{
          "type":"object","description":"A gizmo for tests.",
          "properties":{"spec":{"type":"object","properties":{
            "size":{"type":"integer","description":"How big the gizmo is."}}}}}}}]}}"#;
    k.ok(&["apply", "-f", "-"], Some(crd)).await?;
    let out = k.ok(&["explain", "gizmos"], None).await?;
    assert!(out.contains("KIND:       Gizmo"), "{out}");
    assert!(out.contains("A gizmo for tests."), "{out}");
    let out = k.ok(&["explain", "gizmos.spec.size"], None).await?;
    assert!(out.contains("How big the gizmo is."), "{out}");

    // A group version the server does not serve: kubectl's validation
    // falls back to the v2 document, then mapping fails with its message.
    let bad = r#"{"apiVersion":"apps/v2","kind":"Deployment","metadata":{"name":"x"}}"#;
    let out = k.run(&["apply", "-f", "-"], Some(bad)).await?;
    assert!(!out.ok);
    assert!(
        out.text
            .contains(r#"no matches for kind "Deployment" in version "apps/v2""#),
        "{}",
        out.text
    );
    srv.shutdown().await;
    Ok(())
}
