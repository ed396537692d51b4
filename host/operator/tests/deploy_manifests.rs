//! The deployment artefacts under `host/deploy/`: the plain manifests and the
//! Helm chart apply cleanly (twice: idempotent) to the embedded API server
//! with `kubectl apply --server-side`.
//!
//! `helm` is not installable on this machine (not in Debian, PyPI or npm; the
//! Debian Go is too old to build it), so the chart is rendered here with
//! `gtmpl`, a Rust implementation of Go's text/template, plus the four Helm
//! functions the chart uses (`toYaml`, `nindent`, `quote`, `default`). The
//! chart sticks to that subset on purpose.
//!
//! Every kind in them must be served by the embedded server (RBAC objects
//! are stored there, not enforced): an unserved kind fails the test.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use gtmpl::{Context as TplContext, Func, FuncError, Template, Value as Tpl};
use serde::Deserialize;
use serde_json::{Value, json};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

// ---------- Helm rendering (test-only) ----------

fn to_tpl(v: &Value) -> Tpl {
    match v {
        Value::Null => Tpl::Nil,
        Value::Bool(b) => Tpl::from(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Tpl::from(i),
            None => Tpl::from(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Tpl::from(s.as_str()),
        Value::Array(a) => Tpl::Array(a.iter().map(to_tpl).collect()),
        Value::Object(o) => Tpl::Object(o.iter().map(|(k, v)| (k.clone(), to_tpl(v))).collect()),
    }
}

fn from_tpl(v: &Tpl) -> Value {
    match v {
        Tpl::Nil | Tpl::NoValue | Tpl::Function(_) => Value::Null,
        Tpl::Bool(b) => Value::Bool(*b),
        Tpl::String(s) => Value::String(s.clone()),
        Tpl::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => json!(i),
            (None, Some(f)) => json!(f),
            _ => Value::Null,
        },
        Tpl::Array(a) => Value::Array(a.iter().map(from_tpl).collect()),
        Tpl::Object(o) | Tpl::Map(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), from_tpl(&o[k])))
                    .collect(),
            )
        }
    }
}

fn text_of(v: &Tpl) -> String {
    match v {
        Tpl::String(s) => s.clone(),
        Tpl::Nil | Tpl::NoValue => String::new(),
        other => other.to_string(),
    }
}

fn arg(args: &[Tpl], i: usize, name: &str, n: usize) -> Result<Tpl, FuncError> {
    args.get(i)
        .cloned()
        .ok_or_else(|| FuncError::ExactlyXArgs(name.to_string(), n))
}

fn to_yaml(args: &[Tpl]) -> Result<Tpl, FuncError> {
    let v = from_tpl(&arg(args, 0, "toYaml", 1)?);
    let s = serde_yaml::to_string(&v).map_err(|e| FuncError::Generic(e.to_string()))?;
    Ok(Tpl::from(s.trim_end_matches('\n')))
}

fn nindent(args: &[Tpl]) -> Result<Tpl, FuncError> {
    let n = match arg(args, 0, "nindent", 2)? {
        Tpl::Number(n) => n.as_u64().unwrap_or(0) as usize,
        _ => return Err(FuncError::UnableToConvertFromValue),
    };
    let pad = " ".repeat(n);
    let body = text_of(&arg(args, 1, "nindent", 2)?);
    let lines: Vec<String> = body.lines().map(|l| format!("{pad}{l}")).collect();
    Ok(Tpl::from(format!("\n{}", lines.join("\n"))))
}

fn quote(args: &[Tpl]) -> Result<Tpl, FuncError> {
    let s = text_of(&arg(args, 0, "quote", 1)?);
    Ok(Tpl::from(
        serde_json::to_string(&s).map_err(|e| FuncError::Generic(e.to_string()))?,
    ))
}

fn default(args: &[Tpl]) -> Result<Tpl, FuncError> {
    let fallback = arg(args, 0, "default", 2)?;
    let given = args.get(1).cloned().unwrap_or(Tpl::Nil);
    let empty = match &given {
        Tpl::Nil | Tpl::NoValue => true,
        Tpl::String(s) => s.is_empty(),
        Tpl::Bool(b) => !b,
        Tpl::Array(a) => a.is_empty(),
        Tpl::Object(o) | Tpl::Map(o) => o.is_empty(),
        _ => false,
    };
    Ok(if empty { fallback } else { given })
}

fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

fn yaml_file(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    Ok(serde_yaml::from_str(&text)?)
}

/// `helm template wasm-reconciler host/deploy/helm/wasm-reconciler -n wasm-reconciler --set …`
fn render_chart(overrides: Value) -> anyhow::Result<String> {
    let chart_dir = deploy_dir().join("helm/wasm-reconciler");
    let chart = yaml_file(&chart_dir.join("Chart.yaml"))?;
    let mut values = yaml_file(&chart_dir.join("values.yaml"))?;
    merge(&mut values, &overrides);
    let ctx = json!({
        "Values": values,
        "Release": {"Name": "wasm-reconciler", "Namespace": "wasm-reconciler", "Service": "Helm"},
        "Chart": {"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
    });
    let mut templates: Vec<PathBuf> = std::fs::read_dir(chart_dir.join("templates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    templates.sort();
    let mut out = String::new();
    for t in templates {
        let mut tpl = Template::default();
        let funcs: [(&str, Func); 4] = [
            ("toYaml", to_yaml),
            ("nindent", nindent),
            ("quote", quote),
            ("default", default),
        ];
        tpl.add_funcs(&funcs);
        let text = std::fs::read_to_string(&t)?;
        tpl.parse(text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", t.display()))?;
        let rendered = tpl
            .render(&TplContext::from(to_tpl(&ctx)))
            .map_err(|e| anyhow::anyhow!("{}: {e}", t.display()))?;
        let name = t.file_name().and_then(|n| n.to_str()).unwrap_or("");
        out.push_str(&format!(
            "---\n# Source: wasm-reconciler/templates/{name}\n{rendered}\n"
        ));
    }
    Ok(out)
}

fn docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for d in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(d)?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"] == kind)
}

fn args_of(deploy: &Value) -> Vec<String> {
    deploy
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn chart_renders_defaults() -> anyhow::Result<()> {
    let d = docs(&render_chart(json!({}))?)?;
    let kinds: Vec<&str> = d.iter().filter_map(|x| x["kind"].as_str()).collect();
    for k in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let deploy = find(&d, "Deployment").context("no Deployment")?;
    assert_eq!(deploy.pointer("/spec/replicas"), Some(&json!(2)));
    let c = deploy
        .pointer("/spec/template/spec/containers/0")
        .context("no container")?;
    assert_eq!(c["image"], "ghcr.io/wasm-reconciler/wasm-reconciler:0.1.0");
    assert_eq!(
        c.pointer("/resources/requests/memory"),
        Some(&json!("128Mi"))
    );
    assert_eq!(
        c.pointer("/securityContext/readOnlyRootFilesystem"),
        Some(&json!(true))
    );
    assert_eq!(
        c.pointer("/securityContext/allowPrivilegeEscalation"),
        Some(&json!(false))
    );
    assert_eq!(
        c.pointer("/securityContext/capabilities/drop/0"),
        Some(&json!("ALL"))
    );
    assert_eq!(
        deploy.pointer("/spec/template/spec/securityContext/seccompProfile/type"),
        Some(&json!("RuntimeDefault"))
    );
    let args = args_of(deploy);
    assert!(args.contains(&"--log-format=json".to_string()), "{args:?}");
    assert!(
        args.contains(&"--lease-duration-seconds=15".to_string()),
        "{args:?}"
    );
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        assert!(c.get(probe).is_some(), "{probe} missing");
    }
    assert_eq!(
        c.pointer("/livenessProbe/httpGet/path"),
        Some(&json!("/livez"))
    );
    assert_eq!(
        c.pointer("/readinessProbe/httpGet/path"),
        Some(&json!("/readyz"))
    );
    Ok(())
}

#[test]
fn chart_values_take_effect() -> anyhow::Result<()> {
    let extra = json!({"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]});
    let d = docs(&render_chart(json!({
        "replicas": 3,
        "logFormat": "text",
        "image": {"tag": "v9"},
        "resources": {"requests": {"cpu": "1"}},
        "leaderElection": {"enabled": false, "leaseDurationSeconds": 30},
        "rbac": {"extraRules": [extra.clone()]},
        "imagePullSecrets": [{"name": "regcred"}],
    }))?)?;
    let deploy = find(&d, "Deployment").context("no Deployment")?;
    assert_eq!(deploy.pointer("/spec/replicas"), Some(&json!(3)));
    assert_eq!(
        deploy.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("ghcr.io/wasm-reconciler/wasm-reconciler:v9"))
    );
    assert_eq!(
        deploy.pointer("/spec/template/spec/imagePullSecrets/0/name"),
        Some(&json!("regcred"))
    );
    assert_eq!(
        deploy.pointer("/spec/template/spec/containers/0/resources/requests/cpu"),
        Some(&json!("1"))
    );
    let args = args_of(deploy);
    assert!(args.contains(&"--log-format=text".to_string()), "{args:?}");
    assert!(
        args.contains(&"--leader-elect=false".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--lease-duration-seconds=30".to_string()),
        "{args:?}"
    );
    assert!(
        find(&d, "Role").is_none(),
        "no lease Role without leader election"
    );
    let rules = find(&d, "ClusterRole")
        .and_then(|r| r["rules"].as_array())
        .context("no rules")?;
    assert!(rules.contains(&extra), "{rules:?}");
    Ok(())
}

// ---------- applying to the embedded API server ----------

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .context("running kubectl (is it on PATH?)")?;
    if !out.status.success() {
        bail!(
            "kubectl {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Groups the server serves (core is "").
async fn served_groups(client: &kube::Client) -> anyhow::Result<Vec<String>> {
    let mut groups = vec![String::new()];
    for g in client.list_api_groups().await?.groups {
        groups.push(g.name);
    }
    Ok(groups)
}

fn group_of(doc: &Value) -> String {
    let api = doc["apiVersion"].as_str().unwrap_or("");
    api.split_once('/')
        .map(|(g, _)| g.to_string())
        .unwrap_or_default()
}

/// Applies the documents of `text` the server can store (twice); returns
/// the kinds skipped because their group is not served.
async fn apply(
    kubeconfig: &Path,
    dir: &Path,
    name: &str,
    text: &str,
    served: &[String],
) -> anyhow::Result<Vec<String>> {
    let mut keep = Vec::new();
    let mut skipped = Vec::new();
    for d in docs(text)? {
        if served.contains(&group_of(&d)) {
            keep.push(d);
        } else {
            skipped.push(format!(
                "{} {}",
                d["apiVersion"].as_str().unwrap_or(""),
                d["kind"].as_str().unwrap_or("")
            ));
        }
    }
    if keep.is_empty() {
        return Ok(skipped);
    }
    let file = dir.join(format!("{name}.yaml"));
    let mut stream = String::new();
    for d in &keep {
        stream.push_str("---\n");
        stream.push_str(&serde_yaml::to_string(d)?);
    }
    std::fs::write(&file, stream)?;
    let f = file.to_string_lossy().into_owned();
    for _ in 0..2 {
        kubectl(
            kubeconfig,
            &[
                "apply",
                "--server-side",
                "--field-manager=wr-deploy-test",
                "-f",
                &f,
            ],
        )
        .await?;
    }
    Ok(skipped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_and_chart_apply_server_side() -> anyhow::Result<()> {
    let server = wr_apiserver::start(wr_apiserver::Config::default()).await?;
    let client = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;
    let tmp = tempfile::tempdir()?;
    let kubeconfig = tmp.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let served = served_groups(&client).await?;

    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir().join("manifests"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "manifests missing: {files:?}");
    let mut skipped = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        let name = f.file_stem().and_then(|s| s.to_str()).unwrap_or("m");
        skipped.extend(apply(&kubeconfig, tmp.path(), name, &text, &served).await?);
    }
    // The chart into its own namespace, beside the plain manifests.
    // (`kubectl create namespace` would send protobuf, which the server does not speak.)
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: wr-helm}\n";
    apply(&kubeconfig, tmp.path(), "helm-namespace", ns, &served).await?;
    let chart =
        render_chart(json!({}))?.replace("namespace: wasm-reconciler", "namespace: wr-helm");
    skipped.extend(apply(&kubeconfig, tmp.path(), "chart", &chart, &served).await?);

    assert!(
        skipped.is_empty(),
        "kinds the embedded server does not serve: {skipped:?}"
    );

    let replicas = kubectl(
        &kubeconfig,
        &[
            "get",
            "deployment",
            "wasm-reconciler",
            "-n",
            "wasm-reconciler",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
    )
    .await?;
    assert_eq!(replicas, "2");
    let sa = kubectl(
        &kubeconfig,
        &[
            "get",
            "serviceaccount",
            "wasm-reconciler",
            "-n",
            "wr-helm",
            "-o",
            "name",
        ],
    )
    .await?;
    assert_eq!(sa.trim(), "serviceaccount/wasm-reconciler");
    let svc = kubectl(
        &kubeconfig,
        &[
            "get",
            "service",
            "wasm-reconciler-metrics",
            "-n",
            "wr-helm",
            "-o",
            "jsonpath={.spec.ports[0].port}",
        ],
    )
    .await?;
    assert_eq!(svc, "8080");
    server.shutdown().await;
    Ok(())
}

#[test]
fn rbac_documents_are_valid_rbac_objects() -> anyhow::Result<()> {
    // Checked structurally while the embedded server cannot store them.
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let mut texts = vec![std::fs::read_to_string(
        deploy_dir().join("manifests/20-rbac.yaml"),
    )?];
    texts.push(render_chart(json!({}))?);
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in texts {
        for d in docs(&t)? {
            let kind = d["kind"].as_str().unwrap_or("").to_string();
            match kind.as_str() {
                "ClusterRole" => drop(serde_json::from_value::<ClusterRole>(d)?),
                "ClusterRoleBinding" => drop(serde_json::from_value::<ClusterRoleBinding>(d)?),
                "Role" => drop(serde_json::from_value::<Role>(d)?),
                "RoleBinding" => drop(serde_json::from_value::<RoleBinding>(d)?),
                _ => continue,
            }
            *seen.entry(kind).or_default() += 1;
        }
    }
    for k in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
        assert_eq!(seen.get(k), Some(&2), "{k}: {seen:?}");
    }
    Ok(())
}
