//! The kubectl scenario (tests/kubectl/everyday.sh) run against this server;
//! each step's output, normalised, is one check.

use std::sync::LazyLock;

use anyhow::Context;
use regex::Regex;
use serde_json::json;

use super::Ctx;
use crate::normalize;
use crate::run::Run;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../kubectl/everyday.sh");

static AGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b\d+(s|m|h|d)(\d+(s|m|h))?\b|<unknown>|<invalid>").expect("age")
});
static URL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"https?://[0-9.:a-z]+").expect("url"));
static IP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b").expect("ip"));
static RV: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(resourceVersion"?:\s*"?)\d+"#).expect("rv"));
/// klog's prefix: severity, date, time, pid, file:line.
static KLOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ ([\w.]+:\d+)\]").expect("klog")
});
static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[ \t]+").expect("spaces"));

/// kubectl output with cluster-specific values replaced; column padding is
/// collapsed because it follows the width of values normalised away.
pub fn normalise(text: &str, token: &str) -> Vec<String> {
    let t = KLOG.replace_all(text, "<klog> ${1}]");
    let t = normalize::text(&t, token);
    let t = URL.replace_all(&t, "<server>");
    let t = IP.replace_all(&t, "<ip>");
    let t = RV.replace_all(&t, "${1}<rv>");
    let t = AGE.replace_all(&t, "<age>");
    t.lines()
        .map(|l| SPACES.replace_all(l.trim_end(), " ").into_owned())
        .collect()
}

/// The user name the kubeconfig authenticates as (a choice of each cluster's
/// fixture: `admin` here, `wr-admin` for the real control plane).
async fn admin_name(r: &Run) -> anyhow::Result<String> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let resp = r
        .send(crate::target::Req::with_body(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &review,
        ))
        .await?;
    Ok(resp.json()["status"]["userInfo"]["username"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

pub async fn kubectl(r: &Run, ctx: &Ctx) -> anyhow::Result<()> {
    let admin = admin_name(r).await?;
    let out = ctx.out.join(format!("kubectl-{}", r.t.name));
    let _ = std::fs::remove_dir_all(&out);
    let status = tokio::process::Command::new("bash")
        .arg(SCRIPT)
        .arg(&r.t.kubeconfig)
        .arg(&out)
        .arg(&r.token)
        .env("KUBECTL", &ctx.kubectl)
        .status()
        .await
        .with_context(|| format!("running {SCRIPT}"))?;
    anyhow::ensure!(
        status.success(),
        "{SCRIPT} failed on {}: {status}",
        r.t.name
    );
    let mut files: Vec<_> = std::fs::read_dir(&out)
        .with_context(|| format!("reading {}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let lines: Vec<String> = normalise(&text, &r.token)
            .into_iter()
            .map(|l| {
                if !admin.is_empty() && l == admin {
                    "<admin-user>".into()
                } else {
                    l
                }
            })
            .collect();
        r.record(&format!("kubectl/{stem}"), json!(lines));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages_addresses_and_padding_are_normalised() {
        let out = "NAME   TYPE        CLUSTER-IP   PORT(S)   AGE\nweb    ClusterIP   10.0.0.17    80/TCP    12s\nKubernetes control plane is running at https://127.0.0.1:39715";
        assert_eq!(
            super::normalise(out, "r1"),
            vec![
                "NAME TYPE CLUSTER-IP PORT(S) AGE",
                "web ClusterIP <ip> 80/TCP <age>",
                "Kubernetes control plane is running at <server>",
            ]
        );
        assert_eq!(
            super::normalise(
                "W1201 14:48:06.646348   18276 prune.go:71] Deprecated",
                "r1"
            ),
            vec!["<klog> prune.go:71] Deprecated"]
        );
    }
}
